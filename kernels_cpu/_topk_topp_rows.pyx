# cython: language_level=3
"""Top-k / top-p masking of logits rows, in place, by selection instead of a sort: the row loop.

This module is the ``nogil`` layer: the selection in C, the loop over rows (``mask_rows``) and
one row's mask for kernels that mask a row they have already read (``_spec_step``), all shared
through ``_topk_topp_rows.pxd``. The validated entry points (``top_k_top_p`` and vLLM's kernel
signatures) are ``_topk_topp.pyx``'s.

What is kept (vLLM's semantics: its PyTorch path ``apply_top_k_top_p_pytorch``, its Triton kernel
``_topk_topp_kernel`` and the Triton tests that pin the order of ties):

* **top-k** keeps every value ``>=`` the k-th largest of the row, counted with multiplicity, so
  ties at the k-th value are all kept; ``k >= V`` keeps the row. Fewer than ``k`` finite values:
  the threshold is ``-inf`` and nothing is masked.
* **top-p**, applied to what top-k kept, ranks the kept tokens by value (ties by index, lowest
  first) and keeps a token when the probability mass ranked strictly above it is ``< p``; the top
  token is therefore always kept, and of a group of tied values straddling the boundary the
  lowest indices are kept (vLLM's Triton test ``test_topp_tie_break_deterministic``). ``p == 1``
  keeps the row.
* Masked entries get ``mask_value`` (``-inf`` by default). A row that is all ``-inf`` or holds
  a NaN is left unchanged (nothing in it can be ranked).

How, per row (``k`` and ``p`` are per row; any count of rows, zero included):

1. one vectorised pass for the row maximum (and NaN);
2. top-k: the k-th largest by a filtered selection -- a buffer collects values ``>=`` a running
   threshold (whole 32-value blocks with none at or above it are skipped after one vectorised
   count), and each time it holds ``2k`` a quickselect raises the threshold to the buffer's k-th
   largest -- about one read of the row for the small ``k`` that models ship;
3. top-p after top-k (the kept set is small): the kept values are gathered, sorted and walked;
   top-p alone (or after a large ``k``): one pass sums the masses ``exp(x - max)`` (vectorised
   float32 ``exp``, < 2 ulp, sums in float64) into 512 buckets of width 1/8 in ``max - x``, the
   bucket holding the boundary is found from the bucket masses, its members are gathered in index
   order and refined the same way (256 sub-buckets over their range) until a handful remain or
   all are tied, then sorted and walked;
4. one pass writes ``mask_value`` where a token is not kept -- after the bucket pass, by one
   comparison a value with the boundary bucket's least member value (found by bisection over the
   floats: a value's bucket is non-increasing in it), the same set as its bucket's test.

fp16/bf16 rows are converted into a float32 scratch row first (exactly: both embed in float32),
the decisions are made there, and masked entries are written in the row's dtype. Rows run in
parallel (OpenMP, one scratch arena per thread) above the calibrated work threshold; where there
are fewer rows than threads (one request's few long rows) each row is split instead: its passes
run in chunks of 8192 values on every thread, with the thresholds, sums (chunk by chunk, in row
order, as one thread sums them too) and candidates (packed in row order) of one thread. A caller
that writes the row itself (the one pass's copy of a target row) can have it written and masked
in one parallel region, barriers between the passes (``load_mask_row_f32_team``), or first read
for its chunks' maxima alone (a peek), so a row masked to its maximum is written once; and a run
of such rows -- a speculative step's rows while each keeps its draft -- masked in one region, a
barrier a row (``run_rows_f32_team``); with draft probabilities, each row of a run masked, then
its caller's statistics of it (``then``) and the caller's test of whether the next is read, in
one region (``run_rows_then_f32_team``).
"""
from cython.parallel cimport prange, parallel
from libc.stdint cimport int64_t, uint16_t
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY

from kernels_cpu._buffers cimport DT_FLOAT32

cdef extern from *:
    """
    #if defined(__clang__)
    #pragma STDC FP_CONTRACT OFF
    #elif defined(__GNUC__)
    #pragma GCC optimize ("fp-contract=off")
    #endif
    #include <string.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <math.h>
    #if defined(__x86_64__)
    #include <emmintrin.h>  /* _mm_stream_ps, _mm_sfence (SSE, every x86-64) */
    #endif
    #include "_clones.h"    /* FD_CLONES: baseline, x86-64-v3 and -v4 copies of a hot loop */
    #include "_rowmax.h"    /* fd_max_nan: a row's maximum and whether it holds a NaN */
    #include "_run_rows.h"  /* fd_run_row: a run's row, as its caller describes it */
    #define TKP_BLK 64          /* values per block of the vectorised passes */
    #define TKP_NB 512          /* top-p buckets over ref - x, of a width fitted to the row */
    #define TKP_NSUB 256        /* refinement sub-buckets */
    #define TKP_SMALL 64        /* candidates resolved by sorting */
    #define TKP_GATHER 4096     /* top-k kept sets up to this size are resolved by sorting */
    #define TKP_SAMPLE 2048     /* values that fit the top-p buckets to a row */
    #define TKP_SPAN 8192       /* values per chunk of the bucket and mask passes (a unit of
                                   work when one row is split across threads) */

    typedef struct { float x; float e; int64_t i; } tkp_cand;

    /* A row's maximum with NaN set aside and whether it holds a NaN (fd_max_nan's pair), where
       the caller already read the row whole (its copy of it) */
    typedef struct { float m; int nan; const float* cmax; } tkp_rowmax;

    typedef struct {
        float* vals;        /* V floats: the row as float32 (fp16/bf16 rows) */
        float* sel;         /* V floats: the top-k selection buffer */
        tkp_cand* c1;       /* V candidates */
        tkp_cand* c2;       /* V candidates */
        double* part;       /* TKP_NB bucket masses per chunk of a row */
        float* pool;        /* V floats: a split row's top-k candidates, chunk by chunk */
        Py_ssize_t* counts; /* boundary candidates per chunk of a row */
    } tkp_scratch;

    #include "_fastexp.h"   /* fd_expf: the exp the fused sampler uses */

    static inline float tkp_h2f(uint16_t h) {
        uint32_t s = ((uint32_t)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, b;
        float f;
        if (e == 0) {
            f = (float)m * 5.9604644775390625e-8f;   /* m * 2**-24: exact */
            return (h & 0x8000u) ? -f : f;
        }
        if (e == 31) b = s | 0x7f800000u | (m << 13);
        else b = s | ((e + 112u) << 23) | (m << 13);
        memcpy(&f, &b, 4);
        return f;
    }

    static inline float tkp_bf2f(uint16_t h) {
        uint32_t b = (uint32_t)h << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }

    /* row as float32 into out (code: 8 fp16, 9 bf16) */
    FD_CLONES static void tkp_widen(const uint16_t* row, Py_ssize_t n, int code, float* out) {
        if (code == 9) { for (Py_ssize_t i = 0; i < n; i++) out[i] = tkp_bf2f(row[i]); }
        else { for (Py_ssize_t i = 0; i < n; i++) out[i] = tkp_h2f(row[i]); }
    }


    /* the element of rank t (0-based, ascending) of a[0:n), by quickselect (a is permuted;
       no NaN in a) */
    static float tkp_nth(float* a, Py_ssize_t n, Py_ssize_t t) {
        Py_ssize_t lo = 0, hi = n - 1;
        while (lo < hi) {
            float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi], piv;
            if (x < y) piv = y < z ? y : (x < z ? z : x);
            else piv = x < z ? x : (y < z ? z : y);
            Py_ssize_t i = lo, j = hi;
            while (i <= j) {
                while (a[i] < piv) i++;
                while (a[j] > piv) j--;
                if (i <= j) { float s = a[i]; a[i] = a[j]; a[j] = s; i++; j--; }
            }
            if (t <= j) hi = j;
            else if (t >= i) lo = i;
            else return a[t];
        }
        return a[t];
    }

    /* The k-th largest value of x[0:n) counted with multiplicity (1 <= k < n); the row's
       maximum into *mx and whether it holds a NaN into *nan, in the same pass. A buffer collects
       the values >= a running threshold; each time it holds 2k (at least 128) the threshold is
       raised to its k-th largest (a quickselect) and what falls below is dropped -- no value
       below the buffer's k-th largest can be among the row's k largest -- so the threshold
       tracks the k-th largest of what has been read and few blocks are ever appended.
       Blocks of TKP_KB values are tested by one count of the values not below the threshold
       (a NaN counts: the block is appended, where the NaN is seen); a block with none is
       skipped. Plain loops of fixed length over float compares and an int count, which GCC
       vectorises at every width (SSE2, AVX2, AVX-512, NEON): 16-lane vector-extension code with
       shuffles had been scalarised, through the stack, on all but AVX-512 (~10x slower). */
    #define TKP_KB 32
    FD_CLONES static float tkp_kth_largest(const float* x, Py_ssize_t n, Py_ssize_t k,
                                            float* buf, float* mx, int* nan) {
        Py_ssize_t cap = 2 * k < 128 ? 128 : 2 * k, cnt = 0;
        float thr = -INFINITY;
        int anynan = 0;
        for (Py_ssize_t i = 0; i < n; i += TKP_KB) {
            Py_ssize_t len = n - i < TKP_KB ? n - i : TKP_KB;
            const float* b = x + i;
            int q = 0;
            if (len == TKP_KB) { for (int j = 0; j < TKP_KB; j++) q += !(b[j] < thr); }
            else { for (Py_ssize_t j = 0; j < len; j++) q += !(b[j] < thr); }
            if (!q) continue;
            /* branch-free append: every value is written, the count moves for those that
               qualify (the write index never passes the value's own index, < n) */
            int nq = 0;
            for (Py_ssize_t j = 0; j < len; j++) {
                float e = b[j];
                buf[cnt] = e;
                nq |= e != e;
                cnt += (e >= thr) & (e > -INFINITY);  /* -inf values only count as -inf */
            }
            anynan |= nq;
            if (cnt >= cap) {
                thr = tkp_nth(buf, cnt, cnt - k);
                Py_ssize_t w = 0;
                for (Py_ssize_t r = 0; r < cnt; r++)
                    if (buf[r] >= thr) buf[w++] = buf[r];
                cnt = w;
                if (2 * cnt > cap) cap *= 2;   /* ties at thr: grow, never stall */
            }
        }
        /* the maximum is the buffer's, which always holds it (every value >= the threshold is
           kept, and the maximum is) */
        float best = -INFINITY;
        for (Py_ssize_t r = 0; r < cnt; r++) best = buf[r] > best ? buf[r] : best;
        *mx = best;
        *nan = anynan;
        if (anynan || cnt < k) return -INFINITY;
        return tkp_nth(buf, cnt, cnt - k);
    }
    #undef TKP_KB

    /* rank order: larger value first, then lower index */
    static int tkp_cmp(const void* pa, const void* pb) {
        const tkp_cand* a = (const tkp_cand*)pa;
        const tkp_cand* b = (const tkp_cand*)pb;
        if (a->x > b->x) return -1;
        if (a->x < b->x) return 1;
        return a->i < b->i ? -1 : (a->i > b->i);
    }

    static void tkp_sort(tkp_cand* c, Py_ssize_t n) {
        if (n > 32) { qsort(c, (size_t)n, sizeof(tkp_cand), tkp_cmp); return; }
        for (Py_ssize_t a = 1; a < n; a++) {
            tkp_cand v = c[a];
            Py_ssize_t b = a;
            while (b > 0 && tkp_cmp(&c[b - 1], &v) > 0) { c[b] = c[b - 1]; b--; }
            c[b] = v;
        }
    }

    /* Walk candidates c[0:n) (index order on entry) in rank order after `above` mass: keep
       while the mass strictly above is < target. Returns the last kept value in *vstar and how
       many kept candidates equal it in *ntie; 0 when none is kept (the boundary lies above). */
    static int tkp_walk(tkp_cand* c, Py_ssize_t n, double above, double target,
                        float* vstar, int64_t* ntie) {
        tkp_sort(c, n);
        int kept = 0;
        for (Py_ssize_t r = 0; r < n && above < target; r++) {
            if (kept && c[r].x == *vstar) (*ntie)++;
            else { *vstar = c[r].x; *ntie = 1; }
            kept = 1;
            above += (double)c[r].e;
        }
        return kept;
    }

    /* The bucket of a value d = x - ref below a row's reference (d <= 0), nw = -w: (ref - x) * w
       as d * -w (the same float: negation is exact, rounding to nearest symmetric, so the
       bucket pass shares d with the exponential), the last bucket taking everything below */
    static inline int tkp_bucket(float d, float nw) {
        float t = d * nw;
        t = t < (float)(TKP_NB - 1) ? t : (float)(TKP_NB - 1);
        return (int)t;
    }

    /* The smallest value of x[0:n) that is >= floor and > -inf (m when there is none), in
       sixteen lanes of float selects, which vectorise (the branch had kept the loop scalar: on
       a team, the thread that takes the sample holds the others at the next barrier) */
    FD_CLONES static float tkp_low(const float* x, Py_ssize_t n, float floor, float m) {
        float lo = m, l[16];
        Py_ssize_t i = 0;
        for (int k = 0; k < 16; k++) l[k] = m;
        for (; i + 16 <= n; i += 16)
            for (int k = 0; k < 16; k++) {
                float v = x[i + k];
                float c = v >= floor ? v : m;       /* NaN: not >= floor */
                c = c > -INFINITY ? c : m;
                l[k] = c < l[k] ? c : l[k];
            }
        for (; i < n; i++) {
            float v = x[i];
            if (v >= floor && v > -INFINITY && v < lo) lo = v;
        }
        for (int k = 0; k < 16; k++) lo = l[k] < lo ? l[k] : lo;
        return lo;
    }

    /* The bucket scale that spreads `span` below the reference over the buckets: a row's own
       spread, not a fixed width, so a flat row (a high-temperature or an untrained model's)
       does not pile into a handful of buckets. */
    static inline float tkp_width(float span) {
        float w = (float)TKP_NB / span;
        return w < 1e7f ? w : 1e7f;
    }

    /* Top-p alone's reference from the first values x[0, min(n, TKP_SAMPLE)) (any upper bound
       of the row works: the law is scale-free, so the pass that finds the row maximum is
       saved): *ref, headroom above the sample's maximum -- half its span, at most 16: exp(x -
       ref) of the row's maximum must not underflow (masses are float32) -- and *w, the bucket
       scale over twice that span. 0 (nothing set) where the sample holds a NaN or no finite
       maximum. A row whose maximum lies above *ref voids the bucket pass (the exact-maximum
       path then). */
    static int tkp_sample_ref(const float* x, Py_ssize_t n, float* ref, float* w) {
        int has_nan = 0;
        Py_ssize_t ns = n < TKP_SAMPLE ? n : TKP_SAMPLE;
        float m0 = fd_max_nan(x, ns, &has_nan);
        if (has_nan || !(m0 > -INFINITY && m0 < INFINITY)) return 0;
        float span = m0 - tkp_low(x, ns, -INFINITY, m0);
        *ref = m0 + 16.0f;
        *w = 8.0f;
        if (span > 0.0f && span < INFINITY) {
            *ref = m0 + (0.5f * span < 16.0f ? 0.5f * span : 16.0f);
            *w = tkp_width(2.0f * span);
        }
        return 1;
    }

    /* Bucket masses of one chunk of a row: the values of x[0:n) that are >= floor, weighed
       exp(x - m) against a finite reference m >= every value, in four interleaved sums folded
       at the chunk's end. Returns 1 (mass partly written) when a value exceeds m or is NaN. */
    FD_CLONES static int tkp_chunk_masses(const float* x, Py_ssize_t n, float floor, float m,
                                          float w, double* mass) {
        double hist[4][TKP_NB];
        memset(hist, 0, sizeof hist);
        double* h0 = hist[0];
        double* h1 = hist[1];
        double* h2 = hist[2];
        double* h3 = hist[3];
        float e[TKP_BLK];           /* float in the vector loop (a double there halves its
                                       width), widened -- exactly -- in a loop of its own */
        double ed[TKP_BLK];
        int bk[TKP_BLK];
        float nw = -w;
        for (Py_ssize_t lo = 0; lo < n; lo += TKP_BLK) {
            Py_ssize_t len = n - lo < TKP_BLK ? n - lo : TKP_BLK;
            const float* b = x + lo;
            int bad = 0;
            /* d = v - m <= 0 and not NaN unless the block is refused (bad, one unordered
               test): fd_expf_nonpos; without a floor (top-p alone) no select for it -- a loop
               of its own, 1-3% of a top-p row at one thread against the select kept */
            if (floor > -INFINITY) {
                for (Py_ssize_t j = 0; j < len; j++) {
                    float v = b[j], d = v - m;
                    float ev = fd_expf_nonpos(d);
                    e[j] = v >= floor ? ev : 0.0f;
                    bk[j] = tkp_bucket(d, nw);
                    bad |= !(v <= m);
                }
            } else {
                for (Py_ssize_t j = 0; j < len; j++) {
                    float v = b[j], d = v - m;
                    e[j] = fd_expf_nonpos(d);
                    bk[j] = tkp_bucket(d, nw);
                    bad |= !(v <= m);
                }
            }
            if (bad) return 1;
            for (Py_ssize_t j = 0; j < len; j++) ed[j] = (double)e[j];
            /* value j into sum j % 4, four at a time (no index arithmetic per value) */
            Py_ssize_t j = 0;
            for (; j + 4 <= len; j += 4) {
                h0[bk[j]] += ed[j];
                h1[bk[j + 1]] += ed[j + 1];
                h2[bk[j + 2]] += ed[j + 2];
                h3[bk[j + 3]] += ed[j + 3];
            }
            for (; j < len; j++) hist[j & 3][bk[j]] += ed[j];
        }
        for (int q = 0; q < TKP_NB; q++)
            mass[q] = (hist[0][q] + hist[1][q]) + (hist[2][q] + hist[3][q]);
        return 0;
    }

    /* The boundary bucket of a row's bucket masses mass[TKP_NB] (its chunks' summed in row
       order, so a row split across threads sums exactly as one thread does): the first bucket
       at which the mass from the top reaches p times the total. *above: the mass of the
       buckets before it; *target: p times the total. */
    static int tkp_boundary(const double* mass, double p, double* above, double* target) {
        double z = 0.0, acc = 0.0;
        for (int q = 0; q < TKP_NB; q++) z += mass[q];
        *target = p * z;
        int bstar = TKP_NB - 1;
        for (int q = 0; q < TKP_NB; q++) {
            if (mass[q] > 0.0 && acc + mass[q] >= *target) { bstar = q; break; }
            acc += mass[q];
        }
        *above = acc;
        return bstar;
    }

    /* Top-p over the values of x[0:n) that are >= floor, bucketed and weighed relative to a
       finite reference m >= every value: one pass of bucket masses, TKP_SPAN values at a time
       into part (the scratch's), nt > 1: the chunks on nt threads, the same sums. Returns the
       boundary bucket, or -1 when a value exceeds m or is NaN (nothing written). */
    static int tkp_topp_buckets(const float* x, Py_ssize_t n, float floor, float m, float w,
                                double p, double* above, double* target, double* part,
                                int nt) {
        Py_ssize_t nch = n > 0 ? (n + TKP_SPAN - 1) / TKP_SPAN : 1;
        memset(part, 0, TKP_NB * sizeof(double));
        /* a value above m (or a NaN) voids the pass: the chunks not begun are then skipped,
           on every thread (the flag is read and written atomically, relaxed: a chunk begun
           before it is seen only costs its own time) */
        int bad = 0, split = nt > 1 && nch > 1;
        double summed[TKP_NB];
    #ifdef _OPENMP
        #pragma omp parallel num_threads(nt) if(split)
    #endif
        {
    #ifdef _OPENMP
            #pragma omp for schedule(static)
    #endif
            for (Py_ssize_t ch = 0; ch < nch; ch++) {
                if (__atomic_load_n(&bad, __ATOMIC_RELAXED)) continue;
                Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
                if (tkp_chunk_masses(x + lo, len, floor, m, w, part + ch * TKP_NB))
                    __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
            }
            /* on a team, each thread sums its share of the buckets over the chunks, in chunk
               order (the sums one thread makes): the chunks' masses lie in the caches of the
               threads that wrote them, and one thread reading them all had been a serial
               stretch longer than a chunk's pass */
            if (split && !__atomic_load_n(&bad, __ATOMIC_RELAXED)) {
    #ifdef _OPENMP
                #pragma omp for schedule(static)
    #endif
                for (int q = 0; q < TKP_NB; q++) {
                    double acc = part[q];
                    for (Py_ssize_t ch = 1; ch < nch; ch++) acc += part[ch * TKP_NB + q];
                    summed[q] = acc;
                }
            }
        }
        if (bad) return -1;
        if (!split) {                 /* one thread: the same sums, a chunk's masses at a time */
            memcpy(summed, part, sizeof summed);
            for (Py_ssize_t ch = 1; ch < nch; ch++)
                for (int q = 0; q < TKP_NB; q++) summed[q] += part[ch * TKP_NB + q];
        }
        return tkp_boundary(summed, p, above, target);
    }

    /* Resolve the boundary among candidates c[0:nc) (index order, kept untouched; at least
       one of positive mass) after `above`: narrow them into d by sub-bucket masses until few
       remain or all are tied, then walk them in rank order. */
    static void tkp_resolve(const tkp_cand* c, Py_ssize_t nc, float m, double above,
                            double target, tkp_cand* d, float* vstar, int64_t* ntie) {
        /* masses exp(x - m) (m = +inf: the +inf values share the mass); a zero mass ranks below
           every positive one, so all the mass is above it: never kept */
        Py_ssize_t np = 0;
        for (Py_ssize_t j = 0; j < nc; j++) {
            float e = m == INFINITY ? (c[j].x == INFINITY ? 1.0f : 0.0f) : fd_expf(c[j].x - m);
            if (e > 0.0f) { d[np] = c[j]; d[np].e = e; np++; }
        }
        nc = np;
        for (;;) {
            if (nc <= TKP_SMALL) break;
            float lo = d[0].x, hi = d[0].x;
            for (Py_ssize_t j = 1; j < nc; j++) {
                lo = d[j].x < lo ? d[j].x : lo;
                hi = d[j].x > hi ? d[j].x : hi;
            }
            if (lo == hi) break;                      /* all tied: the walk is in index order */
            double sub[TKP_NSUB];
            memset(sub, 0, sizeof sub);
            double scale = (double)(TKP_NSUB - 1) / ((double)hi - (double)lo);
            for (Py_ssize_t j = 0; j < nc; j++)
                sub[(int)(((double)hi - (double)d[j].x) * scale)] += (double)d[j].e;
            int qstar = -1, last = 0;
            for (int q = 0; q < TKP_NSUB; q++) {
                if (sub[q] > 0.0) last = q;
                if (sub[q] > 0.0 && above + sub[q] >= target) { qstar = q; break; }
                above += sub[q];
            }
            if (qstar < 0) {                          /* rounding: the boundary is the last */
                qstar = last;
                above -= sub[last];
            }
            Py_ssize_t nd = 0;                        /* in place: nd <= j */
            for (Py_ssize_t j = 0; j < nc; j++)
                if ((int)(((double)hi - (double)d[j].x) * scale) == qstar) d[nd++] = d[j];
            nc = nd;
        }
        if (!tkp_walk(d, nc, above, target, vstar, ntie)) {
            /* rounding left nothing to keep here: keep the whole candidate set */
            *vstar = d[nc - 1].x;
            *ntie = 0;
            for (Py_ssize_t j = 0; j < nc; j++) if (d[j].x == *vstar) (*ntie)++;
        }
    }

    /* the float bits as an integer that orders the floats: NaN aside, a < b iff key(a) < key(b) */
    static inline uint32_t tkp_key(float f) {
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        return u & 0x80000000u ? ~u : u | 0x80000000u;
    }

    static inline float tkp_unkey(uint32_t k) {
        uint32_t u = k & 0x80000000u ? k & 0x7fffffffu : ~k;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }

    /* The least float v <= m (-inf included) with tkp_bucket(v - m, -w) <= b, found by bisection
       over the ordered floats: the bucket is non-increasing in v (each of its roundings is
       monotone), so {v <= m: bucket(v) <= b} is exactly {t <= v <= m} -- the mask pass then
       compares each value with t instead of computing its bucket. */
    static float tkp_bucket_least(float m, float w, int b) {
        uint32_t lo = tkp_key(-INFINITY), hi = tkp_key(m);     /* bucket(m) = 0 <= b */
        if (tkp_bucket(-INFINITY - m, -w) <= b) return -INFINITY;
        while (hi - lo > 1) {                          /* bucket(lo) > b, bucket(hi) <= b */
            uint32_t mid = lo + (hi - lo) / 2;
            if (tkp_bucket(tkp_unkey(mid) - m, -w) <= b) hi = mid;
            else lo = mid;
        }
        return tkp_unkey(hi);
    }

    /* The mask pass's bounds for the values x <= m of a row: keep x >= *keep -- x >= floor and,
       bstar >= 0, bucket <= bstar -- and gather as boundary candidates the kept x < *top (those
       of bucket bstar; none where bstar < 0). */
    static void tkp_mask_bounds(float floor, int bstar, float m, float w, float* keep,
                                float* top) {
        *keep = floor;
        *top = -INFINITY;
        if (bstar >= 0) {
            float t = tkp_bucket_least(m, w, bstar);
            *keep = t > floor ? t : floor;
            *top = bstar > 0 ? tkp_bucket_least(m, w, bstar - 1) : INFINITY;
        }
    }

    /* The mask pass over values x[0:n) that are <= the bounds' reference (or NaN): keep x >=
       keep (a NaN is not kept), and gather the kept values below top -- the boundary
       candidates, from tkp_mask_bounds -- into c (index order). Returns their count. */
    FD_CLONES static Py_ssize_t tkp_mask_pass(char* row, int code, const float* x,
                                               Py_ssize_t n, float keep, float top,
                                               float maskf, uint16_t mask16, tkp_cand* c) {
        Py_ssize_t nc = 0;
        for (Py_ssize_t lo = 0; lo < n; lo += TKP_BLK) {
            Py_ssize_t len = n - lo < TKP_BLK ? n - lo : TKP_BLK;
            const float* b = x + lo;
            if (code == 3) {
                float* w = (float*)row + lo;
                for (Py_ssize_t j = 0; j < len; j++) w[j] = b[j] >= keep ? w[j] : maskf;
            } else {
                uint16_t* w = (uint16_t*)row + lo;
                for (Py_ssize_t j = 0; j < len; j++) w[j] = b[j] >= keep ? w[j] : mask16;
            }
            if (!(top > keep)) continue;  /* no candidates (the bounds' bstar < 0) */
            int any = 0;                  /* a vector test first: most blocks hold none */
            for (Py_ssize_t j = 0; j < len; j++) any |= (b[j] >= keep) & (b[j] < top);
            if (any)
                for (Py_ssize_t j = 0; j < len; j++)
                    if (b[j] >= keep && b[j] < top) {
                        c[nc].x = b[j]; c[nc].i = lo + j; nc++;
                    }
        }
        return nc;
    }

    /* The boundary candidates of a row's nch chunks, each gathered by tkp_mask_pass at its
       chunk's offset in c (counts[ch] of them, indices within the chunk), packed in row order
       with row indices: the candidates one thread's pass over the row gathers. Returns their
       count. */
    static Py_ssize_t tkp_pack(tkp_cand* c, const Py_ssize_t* counts, Py_ssize_t nch) {
        Py_ssize_t nc = 0;                        /* nc <= lo + j: packed in place */
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN;
            for (Py_ssize_t j = 0; j < counts[ch]; j++) {
                c[nc] = c[lo + j];
                c[nc].i += lo;
                nc++;
            }
        }
        return nc;
    }

    /* tkp_mask_pass over a whole row, TKP_SPAN values at a time on nt threads (nt <= 1 or one
       chunk: tkp_mask_pass itself): each chunk gathers its boundary candidates into c at its
       own offset, then they are packed in row order -- the candidates one thread gathers. */
    static Py_ssize_t tkp_mask_pass_split(char* row, int code, const float* x, Py_ssize_t n,
                                          float floor, int bstar, float m, float w, float maskf,
                                          uint16_t mask16, tkp_cand* c, Py_ssize_t* counts,
                                          int nt) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
        float keep, top;
        tkp_mask_bounds(floor, bstar, m, w, &keep, &top);
        if (nt <= 1 || nch <= 1)
            return tkp_mask_pass(row, code, x, n, keep, top, maskf, mask16, c);
        size_t es = code == 3 ? sizeof(float) : sizeof(uint16_t);
    #ifdef _OPENMP
        #pragma omp parallel for num_threads(nt) schedule(static)
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
            counts[ch] = tkp_mask_pass(row + lo * es, code, x + lo, len, keep, top, maskf,
                                       mask16, c + lo);
        }
        return tkp_pack(c, counts, nch);
    }

    /* mask the candidates c[0:nc) (index order) that top-p drops */
    static void tkp_drop(char* row, int code, const tkp_cand* c, Py_ssize_t nc, float vstar,
                         int64_t ntie, float maskf, uint16_t mask16) {
        for (Py_ssize_t j = 0; j < nc; j++) {
            float v = c[j].x;
            if (v > vstar) continue;
            if (v == vstar && ntie > 0) { ntie--; continue; }
            if (code == 3) ((float*)row)[c[j].i] = maskf;
            else ((uint16_t*)row)[c[j].i] = mask16;
        }
    }

    /* tkp_kth_largest over a row split across nt threads (1 <= k < n): each chunk keeps its
       values >= its own k-th largest (all of them where it holds at most k), the kept values
       are packed in row order, and the k-th largest of those is the row's -- every value of the
       row's top k is in its chunk's top k, and nothing larger than the row's k-th is added.
       The row's maximum and NaN flag come from the chunks. */
    static float tkp_kth_largest_split(const float* x, Py_ssize_t n, Py_ssize_t k,
                                       tkp_scratch* s, float* mx, int* nan, int nt) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
        float best = -INFINITY;
        int anynan = 0;
    #ifdef _OPENMP
        #pragma omp parallel for num_threads(nt) schedule(static) reduction(|:anynan) \
            reduction(max:best)
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN, cnt = 0;
            float mc, t = -INFINITY;
            int nc = 0;
            if (k < len) t = tkp_kth_largest(x + lo, len, k, s->sel + lo, &mc, &nc);
            else mc = fd_max_nan(x + lo, len, &nc);
            for (Py_ssize_t i = 0; i < len; i++)
                if (x[lo + i] >= t) s->pool[lo + cnt++] = x[lo + i];
            s->counts[ch] = cnt;
            best = mc > best ? mc : best;
            anynan |= nc;
        }
        *mx = best;
        *nan = anynan;
        if (anynan) return -INFINITY;
        Py_ssize_t total = 0;
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            memmove(s->pool + total, s->pool + ch * TKP_SPAN, s->counts[ch] * sizeof(float));
            total += s->counts[ch];
        }
        if (total > k) {
            float m2;
            int n2;
            return tkp_kth_largest(s->pool, total, k, s->sel, &m2, &n2);
        }
        float lo = INFINITY;                      /* exactly k: the k-th largest is the least */
        for (Py_ssize_t i = 0; i < total; i++) lo = s->pool[i] < lo ? s->pool[i] : lo;
        return lo;
    }

    /* fd_max_nan over a row by chunks, each chunk's maximum into cmax (NaN set aside), split
       across nt threads (the order of a maximum does not change it): the exact-maximum path
       reads a row on a team in parallel, and keeps the chunk maxima for tkp_only_top */
    static float tkp_max_split(const float* x, Py_ssize_t n, int* nan, float* cmax, int nt) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
        float best = -INFINITY;
        int anynan = 0;
    #ifdef _OPENMP
        #pragma omp parallel for num_threads(nt) schedule(static) reduction(|:anynan) \
            reduction(max:best) if(nt > 1)
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
            int nc = 0;
            float mc = fd_max_nan(x + lo, len, &nc);
            cmax[ch] = mc;
            best = mc > best ? mc : best;
            anynan |= nc;
        }
        *nan = anynan;
        return best;
    }

    /* The values of x[0:n) that are >= floor, with their masses exp(x - m), gathered into c in
       index order, chunks on nt threads; returns their count (up to n). */
    static Py_ssize_t tkp_gather_split(const float* x, Py_ssize_t n, float floor, float m,
                                       tkp_cand* c, Py_ssize_t* counts, int nt) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
    #ifdef _OPENMP
        #pragma omp parallel for num_threads(nt) schedule(static)
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN, cnt = 0;
            for (Py_ssize_t i = lo; i < lo + len; i++)
                if (x[i] >= floor) {
                    c[lo + cnt].x = x[i]; c[lo + cnt].e = fd_expf(x[i] - m); c[lo + cnt].i = i;
                    cnt++;
                }
            counts[ch] = cnt;
        }
        Py_ssize_t nc = 0;
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            memmove(c + nc, c + ch * TKP_SPAN, counts[ch] * sizeof(tkp_cand));
            nc += counts[ch];
        }
        return nc;
    }

    /* x[0:n) = v (n <= 0: nothing) */
    FD_CLONES static void tkp_fill(float* x, Py_ssize_t n, float v) {
        for (Py_ssize_t i = 0; i < n; i++) x[i] = v;
    }

    /* tkp_fill by non-temporal stores where the ISA has them (x86-64: movntps, then a store
       fence, so the values are visible to any thread past the caller's next barrier or
       release): for a row far larger than the caches that no one reads soon -- a store
       that misses the cache first reads its line (read for ownership), a third of a masked
       row's memory traffic where the row was peeked, not copied. Elsewhere tkp_fill. */
    static void tkp_fill_stream(float* x, Py_ssize_t n, float v) {
    #if defined(__x86_64__)
        Py_ssize_t i = 0;
        while (i < n && ((uintptr_t)(x + i) & 15)) x[i++] = v;
        __m128 w = _mm_set1_ps(v);
        for (; i + 4 <= n; i += 4) _mm_stream_ps(x + i, w);
        for (; i < n; i++) x[i] = v;
        _mm_sfence();
    #else
        tkp_fill(x, n, v);
    #endif
    }

    /* Top-p's answer for a float32 row whose maximum m alone reaches p of its mass, from the
       maxima of its TKP_SPAN-value chunks (cmax, NaN set aside; the row holds no NaN) and a
       read of the maximum's chunk, without the bucket and mask passes: the walk keeps the top
       token (nothing ranks above it) and stops at the next while the mass above it, 1, is at
       least p times the total -- the total at most 1 plus each chunk's count times the mass
       of its maximum, the maximum's chunk counted by its second largest value. Where that
       bound times p falls below 1 by a margin far above the masses' rounding (fd_expf within
       an ulp of expf, their sums in double), the maximum's index is returned (nothing
       written: tkp_only_top then masks every other value, maskf, chunk by chunk on nt
       threads); -1 where it does not, where the maximum is tied or not finite, or p >= 1 -- the
       row then takes the passes, which give the same kept set wherever this applies. Top-k
       first changes nothing: it keeps the maximum and only takes mass away. A confident
       model's row -- its top token far above the rest -- is this case. */
    static Py_ssize_t tkp_only_top_chunks(Py_ssize_t n, double p, const float* cmax, float m,
                                          double* rest_out) {
        /* tkp_only_top_find's test on the chunk maxima alone: the chunk holding the maximum
           (its first), or -1; *rest_out: the other chunks' mass bound */
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN, top = -1;
        double rest = 0.0;
        if (!(p < 1.0) || !(m > -INFINITY && m < INFINITY) || n < 2) return -1;
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t cn = n - ch * TKP_SPAN < TKP_SPAN ? n - ch * TKP_SPAN : TKP_SPAN;
            if (top < 0 && cmax[ch] == m) { top = ch; continue; }
            rest += (double)cn * (double)expf(cmax[ch] - m);   /* a -inf chunk: 0 */
            if (!(p * (1.0 + rest * 1.00001) < 0.9999999)) return -1;
        }
        *rest_out = rest;
        return top;
    }

    /* The test of the maximum m alone within its chunk of cn values, from the maximum's first
       index j there, the largest of the chunk's other values s2 and whether one is NaN (rest:
       the other chunks' mass bound): j, or -1 (a NaN, a tie at the maximum, or the bound
       fails) -- one verdict, whether the chunk was loaded (tkp_only_top_in) or peeked
       (tkp_only_top_peeked) */
    static Py_ssize_t tkp_only_top_verdict(Py_ssize_t j, float s2, int nan, Py_ssize_t cn,
                                           double p, float m, double rest) {
        if (nan || !(s2 < m)) return -1;            /* a tie at the maximum */
        rest += (double)(cn - 1) * (double)expf(s2 - m);
        if (!(p * (1.0 + rest * 1.00001) < 0.9999999)) return -1;
        return j;
    }

    /* tkp_only_top_find's test within the maximum's chunk `top` (as tkp_only_top_chunks left
       it): the maximum's index, or -1 (a tie at the maximum, or the bound fails) */
    static Py_ssize_t tkp_only_top_in(const float* row, Py_ssize_t n, double p, float m,
                                      Py_ssize_t top, double rest) {
        Py_ssize_t lo = top * TKP_SPAN, cn = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
        Py_ssize_t j = lo + fd_first_equal(row + lo, cn, m);
        if (j == lo + cn) return -1;
        int nan = 0;
        float a = fd_max_nan(row + lo, j - lo, &nan), b = fd_max_nan(row + j + 1, lo + cn - j - 1,
                                                                      &nan);
        return tkp_only_top_verdict(j, a > b ? a : b, nan, cn, p, m, rest);
    }

    static Py_ssize_t tkp_only_top_find(const float* row, Py_ssize_t n, double p,
                                        const float* cmax, float m) {
        double rest = 0.0;
        Py_ssize_t top = tkp_only_top_chunks(n, p, cmax, m, &rest);
        return top < 0 ? -1 : tkp_only_top_in(row, n, p, m, top, rest);
    }

    /* tkp_only_top's mask of chunk ch: every value but row[j] (maskf); stream: by
       tkp_fill_stream */
    static void tkp_only_top_fill_by(float* row, Py_ssize_t n, Py_ssize_t ch, Py_ssize_t j,
                                     float maskf, int stream) {
        Py_ssize_t c0 = ch * TKP_SPAN, c1 = n - c0 < TKP_SPAN ? n : c0 + TKP_SPAN;
        void (*fill)(float*, Py_ssize_t, float) = stream ? tkp_fill_stream : tkp_fill;
        fill(row + c0, (j < c1 ? j : c1) - c0, maskf);
        if (j + 1 > c0) fill(row + j + 1, c1 - (j + 1), maskf);
        else fill(row + c0, c1 - c0, maskf);
    }

    static void tkp_only_top_fill(float* row, Py_ssize_t n, Py_ssize_t ch, Py_ssize_t j,
                                  float maskf) {
        tkp_only_top_fill_by(row, n, ch, j, maskf, 0);
    }

    static Py_ssize_t tkp_only_top(float* row, Py_ssize_t n, double p, const float* cmax,
                                   float m, float maskf, int nt) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
        Py_ssize_t j = tkp_only_top_find(row, n, p, cmax, m);
        if (j < 0) return -1;
    #ifdef _OPENMP
        #pragma omp parallel for num_threads(nt) schedule(static) if(nt > 1)
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) tkp_only_top_fill(row, n, ch, j, maskf);
        return j;
    }

    /* One row, in place. k >= n: no top-k; p >= 1: no top-p. code: 3 fp32, 8 fp16, 9 bf16.
       nt > 1: the row's passes split across nt threads by chunks -- the top-k selection, the
       gather of what it keeps, the bucket and mask passes -- with the same thresholds, sums
       and candidates as on one thread. known (NULL: none): the row's maximum and NaN flag, as
       a caller that wrote the row found them -- top-p alone then skips a bucket pass that its
       reference from the first values would void, and the read for the exact maximum -- and
       its chunks' maxima (cmax, NULL: none), from which a row whose maximum alone reaches p
       is masked to it at once (tkp_only_top; the exact-maximum path of top-p alone finds them
       itself). Returns the token so kept, -1 where the row took any other way. */
    static Py_ssize_t tkp_row(char* row, int code, Py_ssize_t n, int64_t k, double p,
                              float maskf, uint16_t mask16, tkp_scratch* s, int nt,
                              const tkp_rowmax* known) {
        int do_k = k < (int64_t)n, do_p = p < 1.0;
        if (n == 0 || !(do_k || do_p)) return -1;
        const float* x;
        if (code == 3) x = (const float*)row;
        else { tkp_widen((const uint16_t*)row, n, code, s->vals); x = s->vals; }
        int has_nan = 0;
        float m, floor = -INFINITY, vstar = 0.0f;
        int64_t ntie = 0;
        tkp_cand* c = s->c1;
        Py_ssize_t nc = 0;
        int split = nt > 1 && n > TKP_SPAN;
        if (known && known->cmax && !known->nan && code == 3) {
            Py_ssize_t top = tkp_only_top((float*)row, n, p, known->cmax, known->m, maskf, nt);
            if (top >= 0) return top;                 /* the maximum alone reaches p */
        }
        if (do_k) {
            floor = split ? tkp_kth_largest_split(x, n, (Py_ssize_t)k, s, &m, &has_nan, nt)
                          : tkp_kth_largest(x, n, (Py_ssize_t)k, s->sel, &m, &has_nan);
        } else {
            /* top-p alone: weigh against a reference from the first values (tkp_sample_ref);
               a larger value or a NaN sends the row down the exact-maximum path */
            float ref, w;
            if (tkp_sample_ref(x, n, &ref, &w)) {
                /* a known row maximum above ref (or a NaN) would void the pass: skip it */
                if (!known || (!known->nan && !(known->m > ref))) {
                    double above, target;
                    int bstar = tkp_topp_buckets(x, n, -INFINITY, ref, w, p, &above, &target,
                                                 s->part, nt);
                    if (bstar >= 0) {
                        nc = tkp_mask_pass_split(row, code, x, n, -INFINITY, bstar, ref, w,
                                                 maskf, mask16, c, s->counts, nt);
                        tkp_resolve(c, nc, ref, above, target, s->c2, &vstar, &ntie);
                        tkp_drop(row, code, c, nc, vstar, ntie, maskf, mask16);
                        return -1;
                    }
                }
            }
            if (known) {
                m = known->m;
                has_nan = known->nan;
            } else {
                m = tkp_max_split(x, n, &has_nan, s->pool, split ? nt : 1);
                Py_ssize_t top = has_nan || code != 3 ? -1
                                 : tkp_only_top((float*)row, n, p, s->pool, m, maskf, nt);
                if (top >= 0) return top;             /* the maximum alone reaches p */
            }
        }
        if (has_nan || m == -INFINITY) return -1;
        if (!do_p) {
            tkp_mask_pass_split(row, code, x, n, floor, -1, m, 8.0f, maskf, mask16, c,
                                s->counts, nt);
            return -1;
        }
        int small = 1;
        if (m == INFINITY) {
            /* the +inf values hold all the mass, equally */
            for (Py_ssize_t i = 0; i < n; i++)
                if (x[i] == INFINITY) { c[nc].x = x[i]; c[nc].e = 1.0f; c[nc].i = i; nc++; }
            floor = INFINITY;
        } else if (do_k && split) {
            nc = tkp_gather_split(x, n, floor, m, c, s->counts, nt);
            small = nc <= TKP_GATHER;
        } else if (do_k) {
            for (Py_ssize_t i = 0; i < n && small; i++)
                if (x[i] >= floor) {
                    if (nc == TKP_GATHER) small = 0;
                    else { c[nc].x = x[i]; c[nc].e = fd_expf(x[i] - m); c[nc].i = i; nc++; }
                }
        } else small = 0;
        if (small) {
            double z = 0.0;
            for (Py_ssize_t j = 0; j < nc; j++) z += (double)c[j].e;
            tkp_mask_pass_split(row, code, x, n, floor, -1, m, 8.0f, maskf, mask16, c + nc,
                                s->counts, nt);
            tkp_resolve(c, nc, m, 0.0, p * z, s->c2, &vstar, &ntie);
        } else {
            double above, target;
            /* the kept values lie in [floor, m]: the buckets span that (or, without a finite
               floor, four times the sample's range below m) */
            Py_ssize_t ns = n < TKP_SAMPLE ? n : TKP_SAMPLE;
            float span = floor > -INFINITY ? 1.25f * (m - floor)
                                           : 4.0f * (m - tkp_low(x, ns, floor, m));
            float w = span > 0.0f && span < INFINITY ? tkp_width(span) : 8.0f;
            int bstar = tkp_topp_buckets(x, n, floor, m, w, p, &above, &target, s->part, nt);
            nc = tkp_mask_pass_split(row, code, x, n, floor, bstar, m, w, maskf, mask16, c,
                                     s->counts, nt);
            tkp_resolve(c, nc, m, above, target, s->c2, &vstar, &ntie);
        }
        tkp_drop(row, code, c, nc, vstar, ntie, maskf, mask16);
        return -1;
    }

    /* A chunk loader for tkp_row_loaded: writes row[c0, c0 + len) and returns the largest of
       those values (NaN set aside), *nan: whether one is NaN. */
    typedef float (*tkp_loader)(void* ctx, Py_ssize_t c0, Py_ssize_t len, float* row, int* nan);

    /* What a peek of a chunk also reads where asked: the first index holding its maximum (-1:
       none) and the largest of its other values (the maximum again where it occurs twice: a
       tie), of the values a loader would write -- the test of the maximum alone without the
       chunk loaded (tkp_only_top_peeked) */
    typedef struct { Py_ssize_t first; float second; } tkp_top2;

    /* A chunk peeker: the largest of the values a loader would write to row[c0, c0 + len)
       (NaN set aside; *nan: whether one is NaN), read without writing them; t2 (NULL: not
       asked) their top two (tkp_top2) */
    typedef float (*tkp_peeker)(void* ctx, Py_ssize_t c0, Py_ssize_t len, int* nan,
                                tkp_top2* t2);

    /* A run's describer (tkp_run_top): row i of the run into *out, on every thread */
    typedef void (*tkp_run_at)(void* ctx, Py_ssize_t i, fd_run_row* out);

    /* tkp_row_loaded's path for a row it loaded: the one tkp_row takes given its maximum */
    typedef struct { float m; int nan; int mode; Py_ssize_t top; float ref, w; } tkp_plan;

    enum { TKP_OTHER = 0, TKP_ONLY_TOP = 1, TKP_BUCKETS = 2 };

    /* tkp_only_top_in for a row peeked, not loaded: its maximum's chunk's top two peeked
       (tkp_top2) stand for the loaded chunk's -- the same answer, for a loader that divides
       (a correctly rounded quotient is monotone in the dividend: the loaded chunk's largest
       other value is the peeked one divided, a tie stays a tie, and two values the division
       merges are a tie in both) -- where the chunk had been loaded and read three times over
       on one thread while the team waited */
    static Py_ssize_t tkp_only_top_peeked(Py_ssize_t n, double p, float m, Py_ssize_t top,
                                          double rest, tkp_peeker peek, void* ctx) {
        Py_ssize_t lo = top * TKP_SPAN, cn = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
        tkp_top2 t2;
        int nan = 0;
        float cm = peek(ctx, lo, cn, &nan, &t2);
        if (!(cm == m) || t2.first < lo || t2.first >= lo + cn) return -1;
        return tkp_only_top_verdict(t2.first, t2.second, nan, cn, p, m, rest);
    }

    /* The plan's first half, from the chunks' maxima and NaN flags alone: the row's maximum
       and NaN flag into pl (mode TKP_OTHER, top -1), and the chunk that tkp_only_top_chunks
       finds holding the maximum (*rest: the other chunks' mass bound), or -1 */
    static Py_ssize_t tkp_plan_chunks(Py_ssize_t n, double p, const float* cmax,
                                      const int* cnan, tkp_plan* pl, double* rest) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
        pl->m = -INFINITY;
        pl->nan = 0;
        pl->mode = TKP_OTHER;
        pl->top = -1;
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            pl->m = cmax[ch] > pl->m ? cmax[ch] : pl->m;
            pl->nan |= cnan[ch];
        }
        *rest = 0.0;
        return pl->nan ? -1 : tkp_only_top_chunks(n, p, cmax, pl->m, rest);
    }

    /* The plan's second half, for a row not masked to its maximum alone: top-p alone whose
       maximum does not lie above the reference from its first values takes the bucket passes
       (TKP_BUCKETS, pl->ref and pl->w); any other row TKP_OTHER. load (NULL: x holds them):
       the first values are not yet written, load writes them. */
    static void tkp_plan_rest(float* x, Py_ssize_t n, int64_t k, double p, tkp_loader load,
                              void* ctx, tkp_plan* pl) {
        if (pl->nan || k < (int64_t)n || !(p < 1.0)) return;
        if (load) {
            int nan = 0;
            load(ctx, 0, n < TKP_SAMPLE ? n : TKP_SAMPLE, x, &nan);
        }
        if (tkp_sample_ref(x, n, &pl->ref, &pl->w) && !(pl->m > pl->ref)) pl->mode = TKP_BUCKETS;
    }

    /* The plan's test of the maximum alone, on one thread: tkp_plan_chunks, then the test
       within the maximum's chunk -- peek (NULL where x holds the row) where cmax and cnan came
       from a peek: the chunk's top two peeked (tkp_only_top_peeked) and, where the test keeps
       the maximum, its value alone loaded into x; TKP_ONLY_TOP and pl->top where it keeps
       the maximum alone. The rest of the plan (tkp_plan_rest) is for a caller that takes the
       passes on the row as loaded; the one-thread peek does not. */
    static void tkp_plan_top(float* x, Py_ssize_t n, double p, const float* cmax,
                             const int* cnan, tkp_loader load, tkp_peeker peek, void* ctx,
                             tkp_plan* pl) {
        double rest;
        Py_ssize_t top = tkp_plan_chunks(n, p, cmax, cnan, pl, &rest);
        if (top < 0) return;
        if (peek) {
            pl->top = tkp_only_top_peeked(n, p, pl->m, top, rest, peek, ctx);
            if (pl->top >= 0) {
                int nan = 0;
                load(ctx, pl->top, 1, x, &nan);
            }
        } else {
            pl->top = tkp_only_top_in(x, n, p, pl->m, top, rest);
        }
        if (pl->top >= 0) pl->mode = TKP_ONLY_TOP;
    }

    /* One float32 row split across nt threads (nt > 1, two chunks at least), loaded and
       masked in one parallel region: each thread loads its chunks (load: the caller's copy of
       the row into row, e.g. a temperature's division), then the same path tkp_row takes with
       the row's maximum known -- the maximum alone (tkp_only_top), or top-p alone's bucket and
       mask passes on the chunks each thread loaded (still in its cache) -- with barriers
       between the passes rather than a region each (a region's start costs several barriers'
       time on a wide team). Every thread folds the chunks' maxima (the same answer on each,
       no thread waited for); where they name a chunk holding the maximum, the thread that
       loaded it (the same static schedule) tests it in its cache while the others mask
       their chunks, and masks its own around the maximum when the test keeps it alone; where
       it does not (a tie, the bound), the masked chunks are loaded again. Returns the token
       kept alone, -1 where the passes masked the row, -2 where the row is loaded but takes
       another path (top-k, a NaN, a maximum far above the first values): the caller then
       runs tkp_row with *known (the row's maximum, NaN flag and chunk maxima, cmax).
       peek (NULL: none): the first pass reads the chunks' maxima without writing the row; the
       chunk holding the maximum is loaded by its tester, and any other path loads each chunk
       as its next pass begins (load_mask_row_f32_team). */
    /* The first pass of a row split across the enclosing region's team (orphaned worksharing,
       no barrier after it: the caller's): each chunk's maximum and NaN flag into cmax and cnan,
       by peek (read only) or, peek NULL, by load (the row written) */
    static void tkp_team_maxima(float* row, Py_ssize_t n, tkp_loader load, tkp_peeker peek,
                                void* ctx, float* cmax, int* cnan) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
    #ifdef _OPENMP
        #pragma omp for schedule(static) nowait
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
            cmax[ch] = peek ? peek(ctx, lo, len, &cnan[ch], NULL)
                            : load(ctx, lo, len, row, &cnan[ch]);
        }
    }

    /* The maximum alone, on the same team (no barrier after it): the thread that holds chunk
       `top` (the same static schedule as tkp_team_maxima's) tests it (tkp_only_top_in, m and
       rest from tkp_plan_chunks; where the row was peeked -- peek not NULL -- from its peek's
       top two, tkp_only_top_peeked, then loads the maximum's value alone where the test keeps
       it, the chunk where it does not) and masks it around the maximum when the test keeps it
       alone, writing its answer to *kept (the index, -1); every other thread masks its
       chunks -- right where the answer is >= 0. lean (a peeked row): nothing is masked, the
       maximum's value alone written (load_mask_row_f32_team's lean) */
    static void tkp_team_only_top(float* row, Py_ssize_t n, double p, float m, Py_ssize_t top,
                                  double rest, tkp_peeker peek, int lean, tkp_loader load,
                                  void* ctx, int64_t* kept) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN;
    #ifdef _OPENMP
        #pragma omp for schedule(static) nowait
    #endif
        for (Py_ssize_t ch = 0; ch < nch; ch++) {
            Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
            if (ch == top) {
                Py_ssize_t j;
                int nan = 0;
                if (peek) {
                    j = tkp_only_top_peeked(n, p, m, top, rest, peek, ctx);
                    if (j >= 0) load(ctx, j, 1, row, &nan);     /* masked around, or lean */
                    else load(ctx, lo, len, row, &nan);         /* the next pass reads it */
                } else {
                    j = tkp_only_top_in(row, n, p, m, top, rest);
                }
                if (j >= 0 && !lean) tkp_only_top_fill(row, n, ch, j, -INFINITY);
                *kept = j;
            } else if (!lean) {
                tkp_fill(row + lo, len, -INFINITY);
            }
        }
    }

    typedef struct {
        float* row; Py_ssize_t n; int64_t k; double p; tkp_scratch* s;
        tkp_loader load; tkp_peeker peek; void* ctx; float* cmax; int* cnan;
        /* written by one thread of the team for the others, read after a barrier */
        int lean;                   /* a peeked row kept alone is not masked (the caller's) */
        int64_t kept;               /* the maximum's chunk's test (its tester's) */
        int bad;                    /* a bucket pass voided (0 before the region) */
        tkp_plan pl;                /* the plan's second half (one thread's) */
        float sref, sw;             /* top-p alone's reference and scale from the first */
        int sref_ok;                /* values, taken as they were loaded (tkp_sample_ref) */
        double summed[TKP_NB];
    } tkp_loaded;

    /* tkp_row_loaded's passes, called by every thread of the enclosing parallel region (its
       worksharing loops bind to that region): returns on every thread what tkp_row_loaded
       returns, thread 0 writes *known. A row kept to its maximum alone ends at the barrier
       after its mask, so a caller (tkp_run_top) may go on to another row in the same region;
       the bucket path's last step (one thread drops the boundary's candidates) does not. */
    static Py_ssize_t tkp_loaded_team(tkp_loaded* J, tkp_rowmax* known) {
        float* row = J->row;
        Py_ssize_t n = J->n, nch = (n + TKP_SPAN - 1) / TKP_SPAN, kept = -1;
        tkp_loader load = J->load;
        tkp_peeker peek = J->peek;
        void* ctx = J->ctx;
        float* cmax = J->cmax;
        int* cnan = J->cnan;
        tkp_scratch* s = J->s;
        tkp_plan mine;              /* each thread's copy of the plan's first half */
        double rest;
        Py_ssize_t top;
        int whole = !peek;          /* the row written whole */
        /* top-p alone on a row loaded whole: the reference from its first values is taken by
           the thread that has just loaded them (chunk 0's: thread 0, the static schedule),
           before the barrier -- one thread taking it after the barrier had held the team */
        int sampled = !peek && J->k >= (int64_t)n && J->p < 1.0;
        tkp_plan pl;                /* the plan's second half: the same on every thread */
        pl.mode = TKP_OTHER;
        tkp_team_maxima(row, n, load, peek, ctx, cmax, cnan);
        if (sampled) {
    #ifdef _OPENMP
            #pragma omp master
    #endif
            J->sref_ok = tkp_sample_ref(row, n, &J->sref, &J->sw);
        }
    #ifdef _OPENMP
        #pragma omp barrier
    #endif
        top = tkp_plan_chunks(n, J->p, cmax, cnan, &mine, &rest);
        if (top >= 0) {
            tkp_team_only_top(row, n, J->p, mine.m, top, rest, peek,
                              peek != NULL && J->lean, load, ctx, &J->kept);
    #ifdef _OPENMP
            #pragma omp barrier
    #endif
            kept = J->kept;         /* the tester's, after the barrier */
            if (kept < 0) {
                /* not the maximum alone: the masked chunks loaded (again) */
    #ifdef _OPENMP
                #pragma omp for schedule(static)
    #endif
                for (Py_ssize_t ch = 0; ch < nch; ch++) {
                    Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
                    int nan = 0;
                    if (ch != top) load(ctx, lo, len, row, &nan);
                }
                whole = 1;
            }
        }
        if (kept < 0 && sampled) {
            pl = mine;              /* tkp_plan_rest's answer, from the sample taken */
            pl.ref = J->sref;
            pl.w = J->sw;
            if (!pl.nan && J->sref_ok && !(pl.m > pl.ref)) pl.mode = TKP_BUCKETS;
        } else if (kept < 0) {
    #ifdef _OPENMP
            #pragma omp single
    #endif
            {
                J->pl = mine;
                tkp_plan_rest(row, n, J->k, J->p, whole ? NULL : load, ctx, &J->pl);
            }
            pl = J->pl;             /* after the single's barrier */
        }
        if (kept < 0) {
            if (pl.mode == TKP_BUCKETS) {
                /* the same chunks on the same threads as the load (static, same count) */
    #ifdef _OPENMP
                #pragma omp for schedule(static)
    #endif
                for (Py_ssize_t ch = 0; ch < nch; ch++) {
                    Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
                    int nan = 0;
                    if (!whole) load(ctx, lo, len, row, &nan);  /* written here, then read */
                    if (tkp_chunk_masses(row + lo, len, -INFINITY, pl.ref, pl.w,
                                         s->part + ch * TKP_NB))
                        __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);
                }
    #ifdef _OPENMP
                #pragma omp for schedule(static)
    #endif
                for (int q = 0; q < TKP_NB; q++) {
                    double acc = s->part[q];
                    for (Py_ssize_t ch = 1; ch < nch; ch++) acc += s->part[ch * TKP_NB + q];
                    J->summed[q] = acc;
                }
                if (!__atomic_load_n(&J->bad, __ATOMIC_RELAXED)) {
                    double above, target;
                    int bstar = tkp_boundary(J->summed, J->p, &above, &target);
                    float keep, top;
                    tkp_mask_bounds(-INFINITY, bstar, pl.ref, pl.w, &keep, &top);
    #ifdef _OPENMP
                    #pragma omp for schedule(static)
    #endif
                    for (Py_ssize_t ch = 0; ch < nch; ch++) {
                        Py_ssize_t lo = ch * TKP_SPAN;
                        Py_ssize_t len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
                        s->counts[ch] = tkp_mask_pass((char*)(row + lo), 3, row + lo, len,
                                                      keep, top, -INFINITY, 0, s->c1 + lo);
                    }
    #ifdef _OPENMP
                    #pragma omp single nowait
    #endif
                    {
                        Py_ssize_t nc = tkp_pack(s->c1, s->counts, nch);
                        float vstar = 0.0f;
                        int64_t ntie = 0;
                        tkp_resolve(s->c1, nc, pl.ref, above, target, s->c2, &vstar, &ntie);
                        tkp_drop((char*)row, 3, s->c1, nc, vstar, ntie, -INFINITY, 0);
                    }
                }
            } else if (!whole) {
                /* another path: the row written for tkp_row */
    #ifdef _OPENMP
                #pragma omp for schedule(static)
    #endif
                for (Py_ssize_t ch = 0; ch < nch; ch++) {
                    Py_ssize_t lo = ch * TKP_SPAN, len = n - lo < TKP_SPAN ? n - lo : TKP_SPAN;
                    int nan = 0;
                    load(ctx, lo, len, row, &nan);
                }
            }
        }
    #ifdef _OPENMP
        #pragma omp master
    #endif
        {
            known->m = mine.m;
            known->nan = mine.nan;
            known->cmax = cmax;
        }
        if (kept >= 0) return kept;
        return pl.mode == TKP_BUCKETS && !__atomic_load_n(&J->bad, __ATOMIC_RELAXED) ? -1 : -2;
    }

    static void tkp_loaded_init(tkp_loaded* J, float* row, Py_ssize_t n, int64_t k, double p,
                                tkp_scratch* s, tkp_loader load, tkp_peeker peek, void* ctx,
                                float* cmax, int* cnan) {
        J->row = row; J->n = n; J->k = k; J->p = p; J->s = s;
        J->load = load; J->peek = peek; J->ctx = ctx; J->cmax = cmax; J->cnan = cnan;
        J->kept = -1;
        J->lean = 0;
        J->bad = 0;
        J->pl.mode = TKP_OTHER;
        J->sref_ok = 0;
    }

    /* A caller's work on row i once it is masked, unit b of nthen (tkp_row_loaded: i 0;
       tkp_run_then_test: the run's row i), on its team */
    typedef void (*tkp_then)(void* ctx, Py_ssize_t i, Py_ssize_t b);

    /* then (NULL: none): where the row's passes ran in the region (any answer but -2), the
       team goes on to then's nthen units (a static schedule) after a barrier, in the same
       region -- a caller's reads of the masked row (a statistics pass) then cost no region of
       their own -- and *then_ran is set */
    static Py_ssize_t tkp_row_loaded(float* row, Py_ssize_t n, int64_t k, double p,
                                     tkp_scratch* s, int nt, tkp_loader load, tkp_peeker peek,
                                     void* ctx, float* cmax, int* cnan, tkp_rowmax* known,
                                     tkp_then then, void* tctx, Py_ssize_t nthen,
                                     int* then_ran, int lean) {
        tkp_loaded J;
        Py_ssize_t ret = -2;
        tkp_loaded_init(&J, row, n, k, p, s, load, peek, ctx, cmax, cnan);
        J.lean = lean;
    #ifdef _OPENMP
        #pragma omp parallel num_threads(nt)
    #endif
        {
            Py_ssize_t mine = tkp_loaded_team(&J, known);
    #ifdef _OPENMP
            #pragma omp master
    #endif
            ret = mine;
            if (then && mine != -2) {   /* the same answer on every thread */
    #ifdef _OPENMP
                #pragma omp barrier
                #pragma omp for schedule(static)
    #endif
                for (Py_ssize_t b = 0; b < nthen; b++) then(tctx, 0, b);
    #ifdef _OPENMP
                #pragma omp master
    #endif
                *then_ran = 1;
            }
        }
        return ret;
    }

    /* A run of rows (fd_run_row: consecutive rows of one request, at describes row i on each
       thread), each split across nt threads, in one parallel region: the first row as
       tkp_row_loaded masks it; each next row, reached only while the row before it kept one
       token alone and that token is the row's want (a speculative verification's accepted
       draft), peeked and written once around its maximum when the chunk maxima and its
       chunk's test leave the maximum alone. The team then pays one region for the run,
       where a region a row had cost several barriers' time each (a wide team's start), and a
       barrier a row: after a row's mask the team goes straight on to peek the next row (read
       only: cmax and cnan alternate halves by row, nch each), and learns at that peek's
       barrier whether the row before kept its want -- needed only where the want lies in the
       maximum's chunk (elsewhere the row cannot keep it, and the run ends without the peek).
       A row the run reaches but does not keep alone is left for its caller, nothing of it
       counted done (its mask's writes are redone by the caller's load). Returns the rows
       done, from the first: kept[i] the token each kept alone (-1: the first row masked by
       the passes, or by tkp_row where tkp_row_loaded leaves it another path); kept[1:rows)
       -1 on entry. */
    static Py_ssize_t tkp_run_top(Py_ssize_t n, Py_ssize_t rows, int nt, tkp_scratch* s,
                                  tkp_loader load, tkp_peeker peek, tkp_run_at at, void* actx,
                                  float* cmax, int* cnan, int64_t* kept, int lean) {
        Py_ssize_t nch = (n + TKP_SPAN - 1) / TKP_SPAN, first = -2, done;
        fd_run_row r0;
        tkp_rowmax known;
        tkp_loaded J;
        at(actx, 0, &r0);
        tkp_loaded_init(&J, r0.row, n, r0.k, r0.p, s, load, r0.peek ? peek : NULL, r0.ctx,
                        cmax, cnan);
        J.lean = lean;
    #ifdef _OPENMP
        #pragma omp parallel num_threads(nt)
    #endif
        {
            fd_run_row rr[2];
            Py_ssize_t ret = tkp_loaded_team(&J, &known), i = 1;
            int64_t want = r0.want;
    #ifdef _OPENMP
            #pragma omp master
    #endif
            first = ret;
            if (ret >= 0 && ret == want) {
                for (; i < rows; i++) {
                    fd_run_row* R = &rr[i & 1];
                    float* cm = cmax + (i & 1) * nch;
                    int* cn = cnan + (i & 1) * nch;
                    tkp_plan mine;
                    double rest;
                    Py_ssize_t top;
                    at(actx, i, R);
                    if (!R->peek) break;
                    tkp_team_maxima(R->row, n, load, peek, R->ctx, cm, cn);
    #ifdef _OPENMP
                    #pragma omp barrier
    #endif
                    if (i > 1 && kept[i - 1] != want) break;  /* the tester's, before the barrier */
                    top = tkp_plan_chunks(n, R->p, cm, cn, &mine, &rest);
                    if (top < 0) break;
                    tkp_team_only_top(R->row, n, R->p, mine.m, top, rest, peek, lean, load,
                                      R->ctx, &kept[i]);
                    want = R->want;
                    if (want < 0 || want / TKP_SPAN != top) { i++; break; }
                }
            }
    #ifdef _OPENMP
            #pragma omp master
    #endif
            done = i;
        }
        if (first == -2)
            first = tkp_row((char*)r0.row, 3, n, r0.k, r0.p, -INFINITY, 0, s, nt, &known);
        kept[0] = first;
        /* the rows after the first: done up to the first not kept alone (reached or not) */
        for (Py_ssize_t i = 1; i < done; i++)
            if (kept[i] < 0) return i;
        return done;
    }

    /* Whether the run goes on past row i (one thread, after row i's statistics) */
    typedef int (*tkp_row_test)(void* ctx, Py_ssize_t i);

    /* A run of rows (rows >= 1; fd_run_row: consecutive rows of one request, at describes row
       i) each split across nt threads, in one parallel region, for a caller that reads each
       row masked and then a statistics pass over it, and decides from those whether to read
       the next (a speculative verification with draft probabilities: its test of each draft):
       row i loaded and masked as tkp_row_loaded masks it (not peeked), then, but for the last
       row, then's nthen units of it (a static schedule) after a barrier, and test(i) on one
       thread -- the next row only where it answers 1. Each row had taken a region for its mask
       and one for its statistics, a wide team's start twice a row. A row tkp_row_loaded
       leaves another path (-2: top-k, a NaN, a maximum far above its first values) ends the
       run, not done (the caller masks it). Returns the rows done from the first -- masked,
       and all but the last of the run's rows with their units run -- kept[i] each one's
       answer (the token it kept alone, or -1). */
    static Py_ssize_t tkp_run_then_test(Py_ssize_t n, Py_ssize_t rows, int nt, tkp_scratch* s,
                                        tkp_loader load, tkp_run_at at, void* actx,
                                        tkp_then then, Py_ssize_t nthen, tkp_row_test test,
                                        float* cmax, int* cnan, int64_t* kept) {
        /* the row at hand, described by one thread for all; the next row's set up (by that
           thread) only once every thread is past this one's passes (the units' barrier) */
        fd_run_row desc;
        tkp_loaded J;
        Py_ssize_t done = 0;
        int go = 1;
        at(actx, 0, &desc);
        tkp_loaded_init(&J, desc.row, n, desc.k, desc.p, s, load, NULL, desc.ctx, cmax, cnan);
    #ifdef _OPENMP
        #pragma omp parallel num_threads(nt)
    #endif
        {
            for (Py_ssize_t i = 0; i < rows; i++) {
                tkp_rowmax known;
                Py_ssize_t mine = tkp_loaded_team(&J, &known);
                if (mine == -2) break;          /* the same answer on every thread */
    #ifdef _OPENMP
                #pragma omp master
    #endif
                {
                    kept[i] = mine;
                    done = i + 1;
                }
                if (i == rows - 1) break;
    #ifdef _OPENMP
                #pragma omp barrier
                #pragma omp for schedule(static)
    #endif
                for (Py_ssize_t b = 0; b < nthen; b++) then(actx, i, b);
    #ifdef _OPENMP
                #pragma omp master
    #endif
                {
                    go = test(actx, i);
                    if (go) {
                        at(actx, i + 1, &desc);
                        tkp_loaded_init(&J, desc.row, n, desc.k, desc.p, s, load, NULL,
                                        desc.ctx, cmax, cnan);
                    }
                }
    #ifdef _OPENMP
                #pragma omp barrier
    #endif
                if (!go) break;
            }
        }
        return done;
    }

    static int tkp_alloc(tkp_scratch* s, Py_ssize_t n, int need_vals) {
        size_t nn = (size_t)(n > 0 ? n : 1);
        s->vals = need_vals ? (float*)malloc(nn * sizeof(float)) : NULL;
        s->sel = (float*)malloc(nn * sizeof(float));
        s->c1 = (tkp_cand*)malloc(nn * sizeof(tkp_cand));
        s->c2 = (tkp_cand*)malloc(nn * sizeof(tkp_cand));
        size_t nch = (nn + TKP_SPAN - 1) / TKP_SPAN;
        s->part = (double*)malloc(nch * TKP_NB * sizeof(double));
        s->counts = (Py_ssize_t*)malloc(nch * sizeof(Py_ssize_t));
        s->pool = (float*)malloc(nn * sizeof(float));
        return (need_vals && !s->vals) || !s->sel || !s->c1 || !s->c2 || !s->part || !s->counts
               || !s->pool;
    }

    static void tkp_free(tkp_scratch* s) {
        free(s->vals); free(s->sel); free(s->c1); free(s->c2); free(s->part); free(s->counts);
        free(s->pool);
    }
    """
    ctypedef struct tkp_scratch:
        float* vals
    ctypedef struct tkp_rowmax:
        float m
        int nan
        const float* cmax
    Py_ssize_t tkp_row(char* row, int code, Py_ssize_t n, int64_t k, double p, float maskf,
                       uint16_t mask16, tkp_scratch* s, int nt,
                       const tkp_rowmax* known) noexcept nogil
    ctypedef float (*tkp_loader)(void* ctx, Py_ssize_t c0, Py_ssize_t length, float* row,
                                 int* nan) noexcept nogil
    ctypedef struct tkp_top2:
        Py_ssize_t first
        float second
    ctypedef float (*tkp_peeker)(void* ctx, Py_ssize_t c0, Py_ssize_t length,
                                 int* nan, tkp_top2* t2) noexcept nogil
    ctypedef void (*tkp_then)(void* ctx, Py_ssize_t i, Py_ssize_t b) noexcept nogil
    Py_ssize_t tkp_row_loaded(float* row, Py_ssize_t n, int64_t k, double p, tkp_scratch* s,
                              int nt, tkp_loader load, tkp_peeker peek, void* ctx, float* cmax,
                              int* cnan, tkp_rowmax* known, tkp_then then, void* tctx,
                              Py_ssize_t nthen, int* then_ran, int lean) noexcept nogil
    ctypedef void (*tkp_run_at)(void* ctx, Py_ssize_t i, fd_run_row* out) noexcept nogil
    ctypedef int (*tkp_row_test)(void* ctx, Py_ssize_t i) noexcept nogil
    Py_ssize_t tkp_run_then_test(Py_ssize_t n, Py_ssize_t rows, int nt, tkp_scratch* s,
                                 tkp_loader load, tkp_run_at at, void* actx, tkp_then then,
                                 Py_ssize_t nthen, tkp_row_test test, float* cmax, int* cnan,
                                 int64_t* kept) noexcept nogil
    Py_ssize_t tkp_run_top(Py_ssize_t n, Py_ssize_t rows, int nt, tkp_scratch* s,
                           tkp_loader load, tkp_peeker peek, tkp_run_at at, void* actx,
                           float* cmax, int* cnan, int64_t* kept, int lean) noexcept nogil
    ctypedef struct tkp_plan:
        int mode
        Py_ssize_t top
    enum: TKP_ONLY_TOP
    void tkp_plan_top(float* x, Py_ssize_t n, double p, const float* cmax, const int* cnan,
                      tkp_loader load, tkp_peeker peek, void* ctx, tkp_plan* pl) noexcept nogil
    void tkp_only_top_fill_by(float* row, Py_ssize_t n, Py_ssize_t ch, Py_ssize_t j,
                              float maskf, int stream) noexcept nogil
    int tkp_alloc(tkp_scratch* s, Py_ssize_t n, int need_vals) noexcept nogil
    void tkp_free(tkp_scratch* s) noexcept nogil
    void tkp_widen(const uint16_t* row, Py_ssize_t n, int code, float* out) noexcept nogil
    enum: SPAN "TKP_SPAN"


cdef inline int64_t _k_or(const char* kp, bint wide, Py_ssize_t r, Py_ssize_t V) noexcept nogil:
    return _k_at(kp, wide, r) if kp != NULL else V


cdef inline double _p_or(const char* pp, bint dbl, Py_ssize_t r) noexcept nogil:
    return _p_at(pp, dbl, r) if pp != NULL else 1.0


cdef inline bint _splits(Py_ssize_t n) noexcept nogil:
    """Whether a row of ``n`` values is split across a team (``mask_rows``' rows when they are
    fewer than its threads, ``mask_row_f32_team``'s row): two chunks of ``SPAN`` at least."""
    return n >= 2 * SPAN


cdef tkp_scratch* _arena(Py_ssize_t V, int half, int* failed) noexcept nogil:
    """A thread's scratch (NULL, with ``failed`` set, when memory runs out)."""
    cdef tkp_scratch* s = <tkp_scratch*>malloc(sizeof(tkp_scratch))
    if s == NULL:
        failed[0] = 1
        return NULL
    if tkp_alloc(s, V, half):
        tkp_free(s)
        free(s)
        failed[0] = 1
        return NULL
    return s


cdef void _release(tkp_scratch* s) noexcept nogil:
    if s != NULL:
        tkp_free(s)
        free(s)


cdef void* row_scratch(Py_ssize_t V) noexcept nogil:
    """Scratch for ``mask_row_f32`` on rows of up to ``V`` values (NULL when out of memory)."""
    cdef int failed = 0
    return <void*>_arena(V, 0, &failed)


cdef void free_row_scratch(void* s) noexcept nogil:
    _release(<tkp_scratch*>s)


cdef void mask_row_f32(float* row, Py_ssize_t n, int64_t k, double p, void* s) noexcept nogil:
    """One float32 row's top-k (``k >= n``: none) then top-p (``p >= 1``: none) mask, in place,
    ``-inf`` where a token is not kept."""
    tkp_row(<char*>row, DT_FLOAT32, n, k, p, -INFINITY, 0, <tkp_scratch*>s, 1, NULL)


cdef Py_ssize_t mask_row_f32_team(float* row, Py_ssize_t n, int64_t k, double p, void* s,
                                  int nt, float row_max, bint row_nan,
                                  const float* chunk_max) noexcept nogil:
    """``mask_row_f32`` with the row split across a team of ``nt`` threads (one scratch ``s``,
    as ``mask_rows`` gives a row it splits; a row too short to split, ``_splits``, runs on one
    thread), for a caller that wrote the row itself and so knows its maximum (NaN set aside),
    whether it holds a NaN and the maximum of each of its ``SPAN``-value chunks (``chunk_max``;
    NULL: not known): a row whose maximum alone reaches ``p`` (a confident model's top token far
    above the rest) is masked to it from those, and one whose maximum lies far above its first
    values goes straight to the exact-maximum path, without the bucket pass it would void.
    Returns the token the row was masked to by its maximum alone, -1 where it took
    top-k/top-p's passes."""
    cdef tkp_rowmax known
    known.m = row_max
    known.nan = row_nan
    known.cmax = chunk_max
    if not _splits(n):
        nt = 1
    return tkp_row(<char*>row, DT_FLOAT32, n, k, p, -INFINITY, 0, <tkp_scratch*>s, nt, &known)


cdef Py_ssize_t load_mask_row_f32_team(float* row, Py_ssize_t n, int64_t k, double p, void* s,
                                       int nt, row_loader load, row_peeker peek, void* ctx,
                                       float* chunk_max, int* chunk_nan,
                                       bint stream=False, row_then then=NULL, void* tctx=NULL,
                                       Py_ssize_t nthen=0, int* then_ran=NULL,
                                       bint lean=False) noexcept nogil:
    """``mask_row_f32_team`` for a row its caller has yet to write: ``load`` writes it, ``SPAN``
    values at a time (each chunk's maximum into ``chunk_max`` and NaN flag into ``chunk_nan``,
    ``n / SPAN`` rounded up of each), then the row is masked as ``mask_row_f32_team`` masks it
    with what the load found. Split across the team, the load and the mask's passes run in one
    parallel region (``tkp_row_loaded``): on a wide team a region's start is the dearer part of
    a one-row step, and each thread's passes then read the chunks it loaded.

    ``peek`` (NULL: none) reads the chunks' maxima without writing them: a row whose maximum
    alone reaches ``p`` is then written once -- its maximum's chunk loaded, every other value
    masked -- rather than copied and then masked; any other row is loaded after the peek, each
    chunk as the pass that reads it next begins (one more read of the source, in cache). For a
    caller that expects such a row (a confident model's rows come in runs). ``stream``: such a
    row's mask, on one thread, is written by non-temporal stores (``tkp_fill_stream``), for a
    caller whose rows stream from memory (a large batch's). ``then`` (NULL: none): where the
    row is split across the team and its passes run in the region, the team goes on to
    ``then(tctx, 0, b)`` for ``b < nthen`` (a static schedule) once the row is masked, in the same
    region, and ``then_ran[0]`` is set -- a caller's statistics of the masked row without a
    region of their own (wide teams pay several barriers for one); else the caller does that
    work itself. ``lean``: a peeked row masked to its maximum alone is written at its maximum
    alone (at the index returned; every other value as it was), on one thread or a team --
    for a caller that reads no other value of such a row, or writes the ones it reads
    itself. A peeked row's test of its maximum reads the peek of the maximum's chunk (its
    first maximum and the largest other value: ``row_top2``), not the chunk loaded."""
    cdef Py_ssize_t ch, nch = (n + SPAN - 1) // SPAN, top
    cdef float m = -INFINITY
    cdef bint nan = False
    cdef tkp_plan pl
    cdef tkp_rowmax known
    if nt > 1 and _splits(n):
        top = tkp_row_loaded(row, n, k, p, <tkp_scratch*>s, nt, <tkp_loader>load,
                             <tkp_peeker>peek, ctx, chunk_max, chunk_nan, &known,
                             <tkp_then>then, tctx, nthen, then_ran, lean)
        if top != -2:
            return top
        return tkp_row(<char*>row, DT_FLOAT32, n, k, p, -INFINITY, 0, <tkp_scratch*>s, nt,
                       &known)
    if peek != NULL:
        for ch in range(nch):
            chunk_max[ch] = peek(ctx, ch * SPAN, min(n - ch * SPAN, SPAN), &chunk_nan[ch],
                                 NULL)
        tkp_plan_top(row, n, p, chunk_max, chunk_nan, <tkp_loader>load, <tkp_peeker>peek, ctx,
                     &pl)
        if pl.mode == TKP_ONLY_TOP:
            if not lean:
                for ch in range(nch):
                    tkp_only_top_fill_by(row, n, ch, pl.top, -INFINITY, stream)
            return pl.top
    for ch in range(nch):
        chunk_max[ch] = load(ctx, ch * SPAN, min(n - ch * SPAN, SPAN), row, &chunk_nan[ch])
        m = chunk_max[ch] if chunk_max[ch] > m else m
        nan = nan or chunk_nan[ch] != 0
    return mask_row_f32_team(row, n, k, p, s, 1, m, nan, chunk_max)


cdef Py_ssize_t run_rows_f32_team(Py_ssize_t n, Py_ssize_t rows, int nt, void* s,
                                  row_loader load, row_peeker peek, run_row_at at, void* ctx,
                                  float* chunk_max, int* chunk_nan, int64_t* kept,
                                  bint lean=False) noexcept nogil:
    """``load_mask_row_f32_team`` for a run of ``rows`` consecutive rows of ``n`` values split
    across a team of ``nt`` threads in one parallel region (``tkp_run_top``), for a caller
    that expects its rows masked to their top token -- a confident model's rows, a
    speculative step whose drafts are its top tokens -- and reads each only while the one
    before it kept the token ``at`` names: the first row is loaded and masked as that
    function masks it; each next one, reached only then, is peeked and written once around
    its maximum when its maximum alone reaches ``p``, or left to the caller. ``at`` describes
    row ``i`` (``fd_run_row``) on every thread; ``chunk_max`` and ``chunk_nan`` hold two rows'
    chunks. Returns the rows done from the first (0 where the row is too short to split or
    the team one thread: the caller masks it), ``kept[i]`` the token each kept alone, -1 the
    first row masked by the passes; ``kept[1:rows)`` must be -1 on entry. ``lean``: a peeked
    row kept alone is left as ``load_mask_row_f32_team``'s ``lean`` leaves it."""
    if rows < 1 or nt <= 1 or not _splits(n):
        return 0
    return tkp_run_top(n, rows, nt, <tkp_scratch*>s, <tkp_loader>load, <tkp_peeker>peek,
                       <tkp_run_at>at, ctx, chunk_max, chunk_nan, kept, lean)


cdef Py_ssize_t run_rows_then_f32_team(Py_ssize_t n, Py_ssize_t rows, int nt, void* s,
                                       row_loader load, run_row_at at, void* ctx,
                                       row_then then, Py_ssize_t nthen, run_row_test test,
                                       float* chunk_max, int* chunk_nan,
                                       int64_t* kept) noexcept nogil:
    """``load_mask_row_f32_team`` with its ``then`` for a run of ``rows`` consecutive rows of
    ``n`` values split across a team of ``nt`` threads, in one parallel region
    (``tkp_run_then_test``), for a caller that reads each masked row's statistics (``then``'s
    ``nthen`` units of row ``i``) and decides from them whether it reads the next (``test(ctx,
    i)``, on one thread: 1 goes on) -- a speculative verification with draft probabilities.
    ``at`` describes row ``i`` (``fd_run_row``; its peek and want are not read). Returns the
    rows done from the first (0 where the row is too short to split or the team one thread:
    the caller processes them), each masked and, but the last, its units run; ``kept[i]``
    the token each kept alone, else -1."""
    if rows < 1 or nt <= 1 or not _splits(n):
        return 0
    return tkp_run_then_test(n, rows, nt, <tkp_scratch*>s, <tkp_loader>load, <tkp_run_at>at,
                             ctx, <tkp_then>then, nthen, <tkp_row_test>test, chunk_max,
                             chunk_nan, kept)


cdef void widen_row(const char* row, int code, Py_ssize_t n, float* out) noexcept nogil:
    """An fp16 (``DT_FLOAT16``) or bf16 (``DT_BFLOAT16``) row as float32, exactly."""
    tkp_widen(<const uint16_t*>row, n, code, out)


cdef int mask_rows(char* base, Py_ssize_t row_bytes, int code, Py_ssize_t B, Py_ssize_t V,
                   const char* kp, bint kwide, const char* pp, bint pdbl, float maskf,
                   uint16_t mask16, int nt) noexcept nogil:
    """Every row's top-k (``kp`` NULL: none) then top-p (``pp`` NULL: none) mask, in place, on
    ``nt`` threads (one scratch arena each); returns 1 when a scratch allocation failed. Fewer
    rows than threads (one request's few long rows, at least two chunks each): the rows in
    turn, each split across the ``nt`` threads (``tkp_row``); otherwise a row per thread, at
    most ``B`` threads."""
    cdef tkp_scratch* s = NULL
    cdef Py_ssize_t r
    cdef int failed[1]
    failed[0] = 0
    cdef int half = code != DT_FLOAT32
    if B < nt and not _splits(V):
        nt = <int>B                     # rows too short to split: a row per thread
    if nt <= 1 or B < nt:
        s = _arena(V, half, failed)
        for r in range(B):
            if s != NULL:
                tkp_row(base + r * row_bytes, code, V, _k_or(kp, kwide, r, V),
                        _p_or(pp, pdbl, r), maskf, mask16, s, nt, NULL)
        _release(s)
    else:
        with parallel(num_threads=nt):
            s = _arena(V, half, failed)   # one arena per thread (s is thread-private)
            for r in prange(B, schedule="dynamic"):
                if s != NULL:
                    tkp_row(base + r * row_bytes, code, V, _k_or(kp, kwide, r, V),
                            _p_or(pp, pdbl, r), maskf, mask16, s, 1, NULL)
            _release(s)
    return failed[0]
