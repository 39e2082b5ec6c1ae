/* The row reductions an argmax is made of: the largest value of a float32 run with NaN set
   aside (and whether one occurs), the first lane equal to a value, the first NaN. Each is one
   vectorised pass (16 independent lanes, a compare-and-select or an OR per lane: GCC emits
   packed max/compare instructions; x86 maxps keeps its second operand on NaN, which is exactly
   `v > m ? v : m`), cloned per x86-64 level (_clones.h). Comparisons only: every result is
   exact, whatever the vector width. */
#ifndef KERNELS_CPU_ROWMAX_H
#define KERNELS_CPU_ROWMAX_H

#include <math.h>
#include "_clones.h"

#define FD_ROWMAX_LANES 16

/* a module may use some of these only */
#if defined(__GNUC__)
#define FD_ROWMAX_FN __attribute__((unused)) static
#else
#define FD_ROWMAX_FN static
#endif

/* The largest of x[0:n) with NaN ignored (-inf when nothing beats it); *has_nan: whether a
   NaN occurs. 32 running maxima and 32 NaN marks, each a float compare-and-select (an int
   flag beside float lanes stops GCC vectorising the loop): two AVX-512 registers each, enough
   independent chains to run at the load rate. */
FD_CLONES FD_ROWMAX_FN float fd_max_nan(const float* x, Py_ssize_t n, int* has_nan) {
    float m[32], f[32];
    Py_ssize_t i = 0;
    int j;
    for (j = 0; j < 32; j++) { m[j] = -INFINITY; f[j] = 0.0f; }
    for (; i + 32 <= n; i += 32)
        for (j = 0; j < 32; j++) {
            float v = x[i + j];
            m[j] = v > m[j] ? v : m[j];
            f[j] = v != v ? 1.0f : f[j];
        }
    float best = -INFINITY, any = 0.0f;
    for (j = 0; j < 32; j++) { best = m[j] > best ? m[j] : best; any = f[j] > any ? f[j] : any; }
    for (; i < n; i++) {
        float v = x[i];
        best = v > best ? v : best;
        any = v != v ? 1.0f : any;
    }
    *has_nan = any != 0.0f;
    return best;
}

/* fd_max_nan's maximum M of x[0:n) and *has_nan, and in the same pass *second: the largest
   of the other values -- M itself where M occurs twice or more, -inf where nothing else
   beats it (NaN set aside). Per lane the two largest seen (a value equal to the lane's
   largest counts as its second: a tie), folded across lanes: a lane's largest is M's second
   unless it equals M, when a second lane holding M makes a tie. Float lanes alone
   (selects), so the loop vectorises as fd_max_nan's; comparisons only, every result exact. */
FD_CLONES FD_ROWMAX_FN float fd_top2_nan(const float* x, Py_ssize_t n, int* has_nan,
                                         float* second) {
    float a[16], b[16], f[16];
    Py_ssize_t i = 0;
    int j, holders = 0;
    for (j = 0; j < 16; j++) { a[j] = -INFINITY; b[j] = -INFINITY; f[j] = 0.0f; }
    for (; i + 16 <= n; i += 16)
        for (j = 0; j < 16; j++) {
            float v = x[i + j];
            b[j] = v > a[j] ? a[j] : (v > b[j] ? v : b[j]);
            a[j] = v > a[j] ? v : a[j];
            f[j] = v != v ? 1.0f : f[j];
        }
    float ta = -INFINITY, tb = -INFINITY, any = 0.0f, best = -INFINITY, sec = -INFINITY;
    for (; i < n; i++) {                /* the tail: one more lane */
        float v = x[i];
        tb = v > ta ? ta : (v > tb ? v : tb);
        ta = v > ta ? v : ta;
        any = v != v ? 1.0f : any;
    }
    for (j = 0; j < 16; j++) { best = a[j] > best ? a[j] : best; any = f[j] > any ? f[j] : any; }
    best = ta > best ? ta : best;
    for (j = 0; j <= 16; j++) {
        float la = j < 16 ? a[j] : ta, lb = j < 16 ? b[j] : tb;
        if (la == best) {
            holders++;
            sec = lb > sec ? lb : sec;
        } else {
            sec = la > sec ? la : sec;
        }
    }
    *has_nan = any != 0.0f;
    *second = holders > 1 && best > -INFINITY ? best : sec;
    return best;
}

/* The first i < n with x[i] == v, n when there is none (v NaN: none). */
FD_CLONES FD_ROWMAX_FN Py_ssize_t fd_first_equal(const float* x, Py_ssize_t n, float v) {
    Py_ssize_t i = 0, j;
    int hit;
    for (; i + FD_ROWMAX_LANES <= n; i += FD_ROWMAX_LANES) {
        hit = 0;
        for (j = 0; j < FD_ROWMAX_LANES; j++)
            hit |= x[i + j] == v;
        if (hit)
            break;
    }
    for (; i < n; i++)
        if (x[i] == v)
            return i;
    return n;
}

/* The first i < n with x[i] NaN, n when there is none. */
FD_CLONES FD_ROWMAX_FN Py_ssize_t fd_first_nan(const float* x, Py_ssize_t n) {
    Py_ssize_t i = 0, j;
    int hit;
    for (; i + FD_ROWMAX_LANES <= n; i += FD_ROWMAX_LANES) {
        hit = 0;
        for (j = 0; j < FD_ROWMAX_LANES; j++)
            hit |= x[i + j] != x[i + j];
        if (hit)
            break;
    }
    for (; i < n; i++)
        if (x[i] != x[i])
            return i;
    return n;
}

#endif
