# The counter-based random stream of Model Runner V2's sampler, as vLLM's Triton kernels compute
# it (vllm/v1/worker/gpu/sample/gumbel.py: murmur3_hash32, murmur3_uniform32/64): one 32-bit
# MurmurHash3 of (domain, seed lo, seed hi, pos lo, token) per draw. Reproduced operation for
# operation -- uint32 arithmetic wraps as Triton's does, and the float conversions are exact
# (2**-16 and 2**-32 scalings of integers below 2**24) until one final rounding -- so a seeded
# request draws the same uniforms on CPU as on a GPU, bit for bit.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


cdef extern from "_murmur3.h":
    # the hash steps, written once in C (also for the cloned lane loop, fd_uniforms32_at)
    uint32_t _rotl32 "fd_rotl32"(uint32_t value, int shift) noexcept nogil
    uint32_t _mix "fd_murmur3_mix"(uint32_t h, uint32_t key) noexcept nogil
    uint32_t _fmix32 "fd_murmur3_fmix32"(uint32_t h) noexcept nogil
    float _to_uniform32 "fd_murmur3_to_uniform32"(uint32_t r) noexcept nogil
    void uniforms32_at_lanes "fd_uniforms32_at"(uint32_t prefix, uint32_t key0,
                                                const int32_t* lanes, Py_ssize_t n,
                                                float* u) noexcept nogil


cdef inline uint32_t murmur3_hash32(int64_t seed, int64_t pos, uint32_t offset,
                                    uint32_t domain) noexcept nogil:
    """vLLM's ``murmur3_hash32(seed, pos, offset, domain)``."""
    cdef uint64_t s = <uint64_t>seed
    cdef uint32_t h = domain
    h = _mix(h, <uint32_t>(s & <uint64_t>0xFFFFFFFFU))
    h = _mix(h, <uint32_t>((s >> 32) & <uint64_t>0xFFFFFFFFU))
    h = _mix(h, <uint32_t>(<uint64_t>pos & <uint64_t>0xFFFFFFFFU))
    h = _mix(h, offset)
    return _fmix32(h ^ 16)


cdef inline float murmur3_uniform32(int64_t seed, int64_t pos, uint32_t offset) noexcept nogil:
    """vLLM's ``murmur3_uniform32``: ``(r + 0.5) * 2**-32`` rounded once to fp32, in (0, 1)."""
    return _to_uniform32(murmur3_hash32(seed, pos, offset, 0))


cdef inline double murmur3_uniform64(int64_t seed, int64_t pos, uint32_t offset) noexcept nogil:
    """vLLM's ``murmur3_uniform64``: 53 bits of two hashes, ``(r + 0.5) * 2**-53``, in (0, 1)."""
    cdef uint64_t lo = murmur3_hash32(seed, pos, offset, 0)
    cdef uint64_t hi = murmur3_hash32(seed, pos, offset, <uint32_t>0x9E3779B9)
    cdef uint64_t random53 = ((hi << 32) | lo) >> 11
    cdef double u = (<double>random53 + 0.5) * 1.1102230246251565e-16
    if u == 1.0:
        u = u - 1.1102230246251565e-16
    return u
