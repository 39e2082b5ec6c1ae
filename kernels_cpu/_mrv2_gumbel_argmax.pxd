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
# The argmax is ``tl.max(..., return_indices=True)``: NaN is ignored, ties go to the first index,
# masked entries are -inf.
from libc.math cimport log, logf, INFINITY, NAN
from libc.stdint cimport int64_t, uint32_t

from kernels_cpu._murmur3 cimport murmur3_uniform32, murmur3_uniform64


# Upper bounds of the noise, so a logit that cannot win is skipped without hashing: fp32 noise
# is ``-log(-log(1 - u))`` with ``u >= 2**-33`` (at most ~22.9), fp64 noise ``-log(-log(u))``
# with ``u <= 1 - 2**-54`` (at most ~37.4). A logit ``x`` with ``x + bound < best`` loses to
# ``best`` whatever its noise, as ``fl(x + noise) <= fl(x + bound)`` (each sum in the draw's
# dtype).
DEF NOISE32_BOUND = 24.0
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


cdef inline Py_ssize_t gumbel_block_argmax32(const float* logits, Py_ssize_t n_valid,
                                             Py_ssize_t block_size, int64_t first_key,
                                             int64_t seed, int64_t pos, bint noisy,
                                             float* best_out) noexcept nogil:
    """Index (within the block) and value of the max of ``logits[j] + noise(first_key + j)``
    over the block's ``n_valid`` unmasked entries of ``block_size`` (masked ones are -inf; a
    block of no number at all gives NaN at index 0). ``noisy`` False (temperature 0): the plain
    argmax of the logits. NaN is skipped, ties keep the first index."""
    cdef Py_ssize_t j, idx = 0
    cdef float best = NAN, v
    for j in range(n_valid):
        v = logits[j]
        if noisy:
            if <float>(v + <float>NOISE32_BOUND) < best:
                continue        # cannot win whatever its noise (rounding is monotone)
            v = v + gumbel_noise32(seed, pos, <uint32_t>(first_key + j))
        if v != v:
            continue
        if best != best or v > best:
            best = v
            idx = j
    if best != best and n_valid < block_size:
        # no number among the unmasked entries: the masked -inf (at their first index) win,
        # as nanmax over the whole block finds them
        best = -INFINITY
        idx = n_valid
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
            if v + NOISE64_BOUND < best:
                continue
            v = v + gumbel_noise64(seed, pos, <uint32_t>(first_key + j))
        if v != v:
            continue
        if best != best or v > best:
            best = v
            idx = j
    if best != best and n_valid < block_size:
        best = -INFINITY
        idx = n_valid
    best_out[0] = best
    return idx
