# cython: language_level=3
# Model Runner V2's Gumbel-max draw over one vocabulary block, as vLLM's Triton helpers
# ``gumbel_noised_argmax``/``gumbel_block_argmax`` (vllm/v1/worker/gpu/sample/gumbel.py) compute
# it without temperature (APPLY_TEMPERATURE=False) and without the logits cache: the rejection
# sampler's resampling inlines exactly this. The noise of token ``v`` is a pure function of
# (seed, pos, v) -- the counter-based stream of ``_murmur3.pxd`` -- so a block can be drawn on
# any thread in any order and give the same bits as on a GPU.
#
# fp32 mode: ``u = murmur3_uniform32``, noise ``-log(-log1p_neg_stable(u))`` (a degree-8 series
# for u < 0.25, ``log(max(1 - u, 2**-24))`` above), added to the fp32 logit. fp64 mode: the logit
# widened to fp64, ``u = murmur3_uniform64``, noise ``-log(-log(u))``. Each operation is done in
# the kernel's dtype and order (no fma contraction: the build has ``-ffp-contract=off``); only
# libm's ``logf``/``log`` may differ in the last ulp from the library a GPU or numpy uses.
# The argmax is ``tl.max(..., return_indices=True)`` as Triton's interpreter computes it
# (``np.nanmax``, ``np.nanargmax``): the value ignores NaN, the index reads NaN as -inf; ties go
# to the first index, masked entries are -inf. So a block with no score above -inf -- every lane
# -inf or NaN -- has index 0.
from libc.math cimport fabs, fabsf, log, logf, INFINITY, NAN
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from kernels_cpu._murmur3 cimport (_fmix32, _mix, murmur3_uniform32, murmur3_uniform64,
                                   uniforms32_at_lanes)


# Upper bounds of the noise, so a logit that cannot win is skipped without hashing: fp32 noise
# is ``-log(-log(1 - u))`` with ``u >= 2**-33`` (at most ~22.9), fp64 noise ``-log(-log(u))``
# with ``u <= 1 - 2**-54`` (at most ~37.4). A logit ``x`` with ``x + bound < best`` loses to
# ``best`` whatever its noise, as ``fl(x + noise) <= fl(x + bound)`` (each sum in the draw's
# dtype).
DEF NOISE32_BOUND = 24.0
# and a lower bound of the fp32 noise (at least ~-2.82): a lane with logit ``x`` scores at
# least ``fl(x + NOISE32_LOW)``, whatever its noise
DEF NOISE32_LOW = -3.0
DEF NOISE64_BOUND = 40.0


cdef inline float log1p_neg_stable(float value) noexcept nogil:
    """vLLM's ``_log1p_neg_stable``: ``log(1 - value)`` in fp32, its constants rounded to fp32
    as Triton rounds a Python float met with an fp32 tensor."""
    cdef float polynomial = <float>(1.0 / 8.0)
    polynomial = <float>(1.0 / 7.0) + value * polynomial
    polynomial = <float>(1.0 / 6.0) + value * polynomial
    polynomial = <float>(1.0 / 5.0) + value * polynomial
    polynomial = <float>(1.0 / 4.0) + value * polynomial
    polynomial = <float>(1.0 / 3.0) + value * polynomial
    polynomial = <float>(1.0 / 2.0) + value * polynomial
    polynomial = <float>1.0 + value * polynomial
    cdef float series = -value * polynomial
    cdef float one_minus = <float>1.0 - value
    if not (one_minus >= <float>5.960464477539063e-08):   # tl.maximum: NaN never reaches here
        one_minus = <float>5.960464477539063e-08
    if value < <float>0.25:
        return series
    return logf(one_minus)


cdef inline float gumbel_noise32(int64_t seed, int64_t pos, uint32_t key) noexcept nogil:
    """The fp32 Gumbel noise of token ``key`` at ``pos`` of the request seeded ``seed``."""
    cdef float u = murmur3_uniform32(seed, pos, key)
    return -logf(-log1p_neg_stable(u))


cdef inline double gumbel_noise64(int64_t seed, int64_t pos, uint32_t key) noexcept nogil:
    """The fp64 Gumbel noise (USE_FP64) of token ``key`` at ``pos``."""
    cdef double u = murmur3_uniform64(seed, pos, key)
    return -log(-log(u))


# -- noise bounds by uniform bucket ---------------------------------------------------------------
# A lane's score is its logit plus its noise, and the noise is a monotone function of its uniform
# u: fp32 noise ``-log(-log1p(-u))`` falls as u grows, fp64 noise ``-log(-log(u))`` rises. So the
# uniform alone -- a hash and two conversions, no logarithm -- bounds the noise: with u in bucket
# ``k = floor(u * NOISE_BUCKETS)`` the noise is at most the noise at the bucket's edge on the
# large-noise side (plus a margin far above the few ulps by which the fp32 series/logf
# composition can stray from monotone). A lane whose logit plus that bound does not beat the
# block's best score so far cannot win the block (float addition rounds monotonically:
# ``fl(x + g) <= fl(x + G)`` for ``g <= G``), and its logarithms are skipped. The scores that are
# computed are the dense draw's, bit for bit, so the winner and its score are the dense draw's.
# Each module that cimports this file has its own copy of the tables and fills it at import
# (``fill_noise_bounds()``); ``kernels_cpu._mrv2_sample.noise_bound_slack`` checks them.

cdef extern from *:
    """
    enum { FD_NOISE_BUCKETS = 4096 };
    static float fd_noise32_up[FD_NOISE_BUCKETS + 1];  /* u == 1.0 (largest hash rounds up) */
    static double fd_noise64_up[FD_NOISE_BUCKETS + 1];
    /* fd_noise32_env[k] = max(fd_noise32_up[k:]): a bound for every bucket >= k, never
       rising with k, so the first bucket whose bound a score cannot beat is a binary search */
    static float fd_noise32_env[FD_NOISE_BUCKETS + 1];
    static int32_t fd_identity_lanes[256];
    #include <stdint.h>
    #include <string.h>
    #include "_clones.h"
    /* A chunk of the draw, x[0, n) (n <= 256): its largest value, NaN left out (*hi_out; -inf
       when none: then nothing more, 0 returned), and the lanes with x[j] + bound >= thr (NaN:
       never), thr first raised to the largest value plus low (the least noise: a score the
       chunk's largest value reaches whatever its noise, which a lane below it less the bound
       cannot reach -- a masked lane's -inf among them) -- 32 running maxima, then the
       comparisons into a byte per lane (each loop vectorised), then, unless no lane or every
       lane reaches (lanes untouched: the caller takes them all), the set bytes eight at a time
       into lanes, in order: a masked stretch costs its compares, not a branch per lane.
       Returns the count. */
    FD_CLONES __attribute__((noinline))
    static Py_ssize_t fd_lanes_reaching(const float *x, Py_ssize_t n, float bound, float low,
                                        float thr, int32_t *lanes, float *hi_out) {
        unsigned char hit[256 + 8];
        float b[32];
        float h = -INFINITY;
        Py_ssize_t j = 0, k = 0;
        int count = 0;
        for (int q = 0; q < 32; q++) b[q] = -INFINITY;
        for (; j + 32 <= n; j += 32)
            for (int q = 0; q < 32; q++) { float v = x[j + q]; b[q] = v > b[q] ? v : b[q]; }
        for (int q = 0; q < 32; q++) h = b[q] > h ? b[q] : h;
        for (; j < n; j++) h = x[j] > h ? x[j] : h;
        *hi_out = h;
        if (h == -INFINITY) return 0;             /* nothing but -inf and NaN */
        if (h + low > thr) thr = h + low;
        for (j = 0; j < n; j++) hit[j] = x[j] + bound >= thr;
        for (j = 0; j < n; j++) count += hit[j];
        if (count == 0 || count == n) return count;
        for (j = n; j < ((n + 7) & ~(Py_ssize_t)7); j++) hit[j] = 0;
        for (j = 0; j < n; j += 8) {
            uint64_t w;
            memcpy(&w, hit + j, 8);
            while (w) {
                lanes[k++] = (int32_t)(j + (__builtin_ctzll(w) >> 3));
                w &= w - 1;
            }
        }
        return count;
    }

    /* The offsets of x[0, n) above -inf, in order, into out (at most cap of them): a draw over
       a masked row -- top-k/top-p keep a few thousand of a 128k vocabulary -- looks at those
       lanes alone. Returns their count; -1 where there are more than cap or a NaN occurs (the
       caller then draws block by block). 256 values at a time: compares into a byte per lane
       and a NaN count (each loop vectorised), then the set bytes eight at a time -- a masked
       stretch costs its compares. */
    FD_CLONES __attribute__((noinline, unused))
    static Py_ssize_t fd_kept_lanes(const float *x, Py_ssize_t n, int32_t *out, Py_ssize_t cap) {
        unsigned char hit[256 + 8];
        Py_ssize_t k = 0;
        for (Py_ssize_t j0 = 0; j0 < n; j0 += 256) {
            const float *c = x + j0;
            Py_ssize_t m = n - j0 < 256 ? n - j0 : 256, j;
            int count = 0, nan = 0;
            for (j = 0; j < m; j++) hit[j] = c[j] > -INFINITY;
            for (j = 0; j < m; j++) count += hit[j];
            for (j = 0; j < m; j++) nan += c[j] != c[j];
            if (nan || k + count > cap) return -1;
            if (!count) continue;
            for (j = m; j < ((m + 7) & ~(Py_ssize_t)7); j++) hit[j] = 0;
            for (j = 0; j < m; j += 8) {
                uint64_t w;
                memcpy(&w, hit + j, 8);
                while (w) {
                    out[k++] = (int32_t)(j0 + j + (__builtin_ctzll(w) >> 3));
                    w &= w - 1;
                }
            }
        }
        return k;
    }
    """
    enum: NOISE_BUCKETS "FD_NOISE_BUCKETS"
    float NOISE32_UP "fd_noise32_up"[]
    double NOISE64_UP "fd_noise64_up"[]
    float NOISE32_ENV "fd_noise32_env"[]
    int32_t IDENTITY_LANES "fd_identity_lanes"[]
    Py_ssize_t lanes_reaching "fd_lanes_reaching"(const float* x, Py_ssize_t n, float bound,
                                                  float low, float thr, int32_t* lanes,
                                                  float* hi) noexcept nogil
    Py_ssize_t kept_lanes "fd_kept_lanes"(const float* x, Py_ssize_t n, int32_t* out,
                                          Py_ssize_t cap) noexcept nogil

cdef inline float noise32_of(float u) noexcept nogil:
    """The fp32 noise of uniform ``u``: ``-log(-log1p_neg_stable(u))``."""
    return -logf(-log1p_neg_stable(u))


cdef inline int noise_bucket(double u) noexcept nogil:
    """``floor(u * NOISE_BUCKETS)``: exact (a power-of-two scaling), so ``k / NOISE_BUCKETS <=
    u`` always holds."""
    return <int>(u * NOISE_BUCKETS)


cdef inline void fill_noise_bounds() noexcept nogil:
    cdef int k
    cdef float g32
    cdef double g64
    NOISE32_UP[0] = INFINITY               # u -> 0: the unbounded tail
    for k in range(1, NOISE_BUCKETS + 1):
        g32 = noise32_of(<float>k / <float>NOISE_BUCKETS)
        NOISE32_UP[k] = g32 + <float>1e-3 + <float>1e-4 * fabsf(g32)
    for k in range(NOISE_BUCKETS - 1):
        g64 = -log(-log(<double>(k + 1) / <double>NOISE_BUCKETS))
        NOISE64_UP[k] = g64 + 1e-9 + 1e-10 * fabs(g64)
    NOISE64_UP[NOISE_BUCKETS - 1] = INFINITY    # u -> 1: the unbounded tail
    NOISE64_UP[NOISE_BUCKETS] = INFINITY
    NOISE32_ENV[NOISE_BUCKETS] = NOISE32_UP[NOISE_BUCKETS]
    for k in range(NOISE_BUCKETS - 1, -1, -1):
        NOISE32_ENV[k] = NOISE32_UP[k] if NOISE32_UP[k] > NOISE32_ENV[k + 1] else NOISE32_ENV[k + 1]
    for k in range(256):
        IDENTITY_LANES[k] = k


cdef inline float uniform_cut32(float gap) noexcept nogil:
    """A uniform below which every lane whose fp32 noise can exceed ``gap`` lies: the edge of
    the first bucket whose bound (``NOISE32_ENV``) is <= ``gap`` -- a lane at or above it has
    noise <= ``gap``. 0 when no bucket's is (every lane may exceed it)."""
    cdef int lo = 0, hi = NOISE_BUCKETS + 1, mid
    if not (gap < INFINITY):
        return 0.0
    while lo < hi:                      # the first k with NOISE32_ENV[k] <= gap
        mid = (lo + hi) // 2
        if NOISE32_ENV[mid] <= gap:
            hi = mid
        else:
            lo = mid + 1
    return <float>lo / <float>NOISE_BUCKETS


cdef inline uint32_t murmur3_prefix(int64_t seed, int64_t pos) noexcept nogil:
    """``murmur3_hash32``'s state after the domain (0), the seed and the position: the same for
    every key of a (request, position), so a block hashes it once and mixes each key into it."""
    cdef uint64_t s = <uint64_t>seed
    cdef uint32_t h = 0
    h = _mix(h, <uint32_t>(s & <uint64_t>0xFFFFFFFFU))
    h = _mix(h, <uint32_t>((s >> 32) & <uint64_t>0xFFFFFFFFU))
    return _mix(h, <uint32_t>(<uint64_t>pos & <uint64_t>0xFFFFFFFFU))


cdef inline void uniforms32_at(uint32_t prefix, uint32_t key0, const int32_t* lanes,
                               Py_ssize_t n, float* u) noexcept nogil:
    """``murmur3_uniform32`` for the keys ``key0 + lanes[q]``, ``q < n``, from the hashed
    prefix -- the last mix and the finaliser per key, then ``(r + 0.5) * 2**-32`` rounded as
    ``_murmur3.pxd`` rounds it -- for only the lanes a draw still has to look at (``u[q]`` is
    lane ``lanes[q]``'s): ``_murmur3.h``'s loop, cloned for x86-64-v3/v4 (32-bit vector
    multiplies)."""
    uniforms32_at_lanes(prefix, key0, lanes, n, u)


DEF DRAW_CHUNK = 256


cdef inline float _higher(float a, float b) noexcept nogil:
    """The larger of two scores, a NaN (none) yielding to the other."""
    if a != a:
        return b
    if b != b:
        return a
    return a if a >= b else b


ctypedef fused score_t:
    float
    double


cdef inline Py_ssize_t _no_score(score_t best, Py_ssize_t idx, Py_ssize_t n_valid,
                                 Py_ssize_t block_size, score_t* best_out) noexcept nogil:
    """A block's result from its best score and index: where nothing scored above -inf, every
    lane is -inf or NaN (a logit above -inf scores above it, the noise being finite), and
    ``np.nanargmax`` -- NaN read as -inf -- takes the first lane: index 0; the value is -inf
    where a lane is (a masked one included), NaN where every lane is NaN."""
    if not (best > -INFINITY):
        idx = 0
        if best != best and n_valid < block_size:
            best = -INFINITY
    best_out[0] = best
    return idx


cdef inline void _score_lane(const float* logits, Py_ssize_t j, float u, float lim, float* best,
                             Py_ssize_t* idx) noexcept nogil:
    """Lane ``j`` of a fp32 draw, its uniform ``u``: passed over where its logit plus the bound
    of its noise cannot beat ``lim`` (the score to beat; NaN: none), else scored -- ``logit +
    noise``, a NaN left out -- into the first largest (``best``, ``idx``)."""
    cdef float v
    if lim == lim and logits[j] + NOISE32_UP[noise_bucket(u)] <= lim:
        return
    v = logits[j] + noise32_of(u)
    if v != v:
        return
    if best[0] != best[0] or v > best[0]:
        best[0] = v
        idx[0] = j


cdef inline Py_ssize_t gumbel_block_argmax32(const float* logits, Py_ssize_t n_valid,
                                             Py_ssize_t block_size, int64_t first_key,
                                             int64_t seed, int64_t pos, bint noisy,
                                             float* best_out, float floor=NAN) noexcept nogil:
    """Index (within the block) and value of the max of ``logits[j] + noise(first_key + j)``
    over the block's ``n_valid`` unmasked entries of ``block_size`` (masked ones are -inf; a
    block of no number at all gives NaN at index 0). ``noisy`` False (temperature 0): the plain
    argmax of the logits. NaN is left out of the value and read as -inf for the index, ties
    keep the first index: a block scoring nothing above -inf has index 0 (``_no_score``).
    Chunk by chunk, only the
    lanes whose logit plus the largest noise can still beat the best score are hashed, and of
    those only the ones whose bucket bound can are scored (notes above). A chunk is passed over
    whole when no lane's logit can win, hashed whole (no lane list) when every lane's can
    still, and its lanes are not scored at all when none of their uniforms lies below the cut
    that the best score less its largest logit sets (``uniform_cut32``: a margin above float
    rounding, so the lanes passed over are ones the per-lane test passes over too).

    ``floor`` (NaN: none) is a score an earlier block of the same row reached: lanes that cannot
    exceed it are passed over too, so the block's result is exact only when it exceeds
    ``floor`` -- what a caller that wants the row's first largest score needs, block by block
    in order (a block tying an earlier one never wins: the first block with the largest score
    does)."""
    cdef Py_ssize_t j, idx = 0, s, m, q, k
    cdef float best = NAN, v, thr, hi, cut, lim
    cdef int32_t lanes[DRAW_CHUNK]
    cdef const int32_t* use
    cdef float u[DRAW_CHUNK]
    cdef uint32_t prefix
    cdef bint any_low
    if not noisy:
        for j in range(n_valid):
            v = logits[j]
            if v != v:
                continue
            if best != best or v > best:
                best = v
                idx = j
    else:
        prefix = murmur3_prefix(seed, pos)
        s = 0
        while s < n_valid:
            m = n_valid - s if n_valid - s < DRAW_CHUNK else DRAW_CHUNK
            lim = _higher(best, floor)  # the score to beat
            thr = lim if lim == lim else -INFINITY
            # the lanes that can still win (NaN lanes never do), and the largest logit
            k = lanes_reaching(logits + s, m, <float>NOISE32_BOUND, <float>NOISE32_LOW, thr,
                               lanes, &hi)
            if hi == -INFINITY:
                # no lane above -inf (a masked stretch): each scores -inf or NaN, whatever its
                # noise (finite), so none beats a score; with none yet and no floor, a -inf
                # lane makes the block's value -inf (its index is set at the end)
                if lim != lim:
                    for j in range(m):
                        if logits[s + j] == -INFINITY:
                            best = -INFINITY
                            break
                s += m
                continue
            if k == 0:
                s += m                  # no lane can win
                continue
            use = lanes
            if k == m:
                use = IDENTITY_LANES    # every lane (the list was not written)
            uniforms32_at(prefix, <uint32_t>(first_key + s), use, k, u)
            if lim == lim:
                # a lane beats the score to beat only with noise above lim - hi (hi: the
                # chunk's largest logit, > -inf here), less a margin for the sums' rounding
                cut = uniform_cut32((lim - hi) - (<float>1e-5 + <float>1e-5 * fabsf(lim)))
                any_low = False
                for q in range(k):
                    any_low = any_low | (u[q] < cut)
                if not any_low:
                    s += m
                    continue
            for q in range(k):
                # against the best score so far, or the floor
                _score_lane(logits, s + use[q], u[q], _higher(best, floor), &best, &idx)
            s += m
    return _no_score(best, idx, n_valid, block_size, best_out)


cdef inline Py_ssize_t gumbel_lanes_argmax32(const float* logits, const int32_t* lanes,
                                             Py_ssize_t n, int64_t first_key, int64_t skip,
                                             int64_t seed, int64_t pos, float* u,
                                             float* best_out) noexcept nogil:
    """``gumbel_block_argmax32``'s noisy draw over the lanes ``lanes[:n]`` (in order; offsets
    from ``logits`` and ``first_key``) of a stretch whose other lanes are -inf, lane ``skip``
    (an offset; -1: none) read as -inf too: the offset and score of the first largest score
    among them -- the stretch's, wherever it holds a lane above -inf, as a -inf lane never beats
    one (its score is -inf, the noise being finite). -1 (``best_out`` NaN) where no lane is
    left. The same scores and the same bound on each lane's noise as the block draw; ``u``: a
    ``DRAW_CHUNK`` buffer."""
    cdef Py_ssize_t q0 = 0, q, m, j, idx = -1
    cdef float best = NAN
    cdef uint32_t prefix = murmur3_prefix(seed, pos)
    while q0 < n:
        m = n - q0 if n - q0 < DRAW_CHUNK else DRAW_CHUNK
        uniforms32_at(prefix, <uint32_t>first_key, lanes + q0, m, u)
        for q in range(m):
            j = lanes[q0 + q]
            if j != skip:
                _score_lane(logits, j, u[q], best, &best, &idx)
        q0 += m
    best_out[0] = best
    return idx


cdef inline Py_ssize_t gumbel_block_argmax64(const float* logits, Py_ssize_t n_valid,
                                             Py_ssize_t block_size, int64_t first_key,
                                             int64_t seed, int64_t pos, bint noisy,
                                             double* best_out) noexcept nogil:
    """``gumbel_block_argmax32`` in fp64 (USE_FP64): the logits widened, fp64 noise."""
    cdef Py_ssize_t j, idx = 0
    cdef double best = NAN, v
    for j in range(n_valid):
        v = <double>logits[j]
        if noisy:
            if v == -INFINITY:
                # scores -inf whatever its (finite) noise: the block's value is at least
                # -inf (its index is set at the end)
                if best != best:
                    best = -INFINITY
                continue
            if v + NOISE64_BOUND < best:
                continue
            v = v + gumbel_noise64(seed, pos, <uint32_t>(first_key + j))
        if v != v:
            continue
        if best != best or v > best:
            best = v
            idx = j
    return _no_score(best, idx, n_valid, block_size, best_out)
