/* The float32 exp the kernels_cpu sampling kernels share (kernels_cpu._fused, _topk_topp):
   one definition, included by each module's C block, so every kernel weighs a logit alike. */
#ifndef KERNELS_CPU_FASTEXP_H
#define KERNELS_CPU_FASTEXP_H

#include <stdint.h>
#include <string.h>

/* fd_expf's reduction, polynomial and scale, for a clamped argument -87.33654 <= xc <= 0 */
static inline float fd_expf_core(float xc) {
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r;
    p = p + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* exp(x) for x <= 0 (the only use: logit - a row reference >= it), branch-free so loops over it
   vectorise: Cody-Waite reduction by ln 2 (round via the 1.5 * 2**23 trick), Cephes' degree-6
   polynomial, scale by 2**n built from bits. Relative error < 2 ulp; exp(-inf) = 0, NaN stays
   NaN. Below -87.3 (float underflow) the result is 0. */
static inline float fd_expf(float x) {
    float xc = x < -87.33654f ? -87.33654f : x;
    xc = xc > 0.0f ? 0.0f : xc;
    xc = x != x ? 0.0f : xc;            /* NaN: no float -> int conversion of it (undefined) */
    float y = fd_expf_core(xc);
    y = x < -87.33654f ? 0.0f : y;
    return x != x ? x : y;
}

/* fd_expf(x) for an x known to be <= 0 and not NaN (a value less a reference >= it, in a loop
   that refuses NaN): the same float, without the two guards that cannot apply -- fewer vector
   operations in the loops that call it for every value of a row */
static inline float fd_expf_nonpos(float x) {
    float xc = x < -87.33654f ? -87.33654f : x;
    float y = fd_expf_core(xc);
    return x < -87.33654f ? 0.0f : y;
}

#endif
