# The counter-based random stream of Model Runner V2's sampler, as vLLM's Triton kernels compute
# it (vllm/v1/worker/gpu/sample/gumbel.py: murmur3_hash32, murmur3_uniform32/64): one 32-bit
# MurmurHash3 of (domain, seed lo, seed hi, pos lo, token) per draw. Reproduced operation for
# operation -- uint32 arithmetic wraps as Triton's does, and the float conversions are exact
# (2**-16 and 2**-32 scalings of integers below 2**24) until one final rounding -- so a seeded
# request draws the same uniforms on CPU as on a GPU, bit for bit.
from libc.stdint cimport int64_t, uint32_t, uint64_t


cdef inline uint32_t _rotl32(uint32_t value, int shift) noexcept nogil:
    return (value << shift) | (value >> (32 - shift))


cdef inline uint32_t _mix(uint32_t h, uint32_t key) noexcept nogil:
    key = key * <uint32_t>0xCC9E2D51
    key = _rotl32(key, 15)
    key = key * <uint32_t>0x1B873593
    h ^= key
    h = _rotl32(h, 13)
    return h * <uint32_t>5 + <uint32_t>0xE6546B64


cdef inline uint32_t _fmix32(uint32_t h) noexcept nogil:
    h ^= h >> 16
    h = h * <uint32_t>0x85EBCA6B
    h ^= h >> 13
    h = h * <uint32_t>0xC2B2AE35
    return h ^ (h >> 16)


cdef inline uint32_t murmur3_hash32(int64_t seed, int64_t pos, uint32_t offset,
                                    uint32_t domain) noexcept nogil:
    """vLLM's ``murmur3_hash32(seed, pos, offset, domain)``."""
    cdef uint64_t s = <uint64_t>seed
    cdef uint32_t h = domain
    h = _mix(h, <uint32_t>(s & 0xFFFFFFFFU))
    h = _mix(h, <uint32_t>((s >> 32) & 0xFFFFFFFFU))
    h = _mix(h, <uint32_t>(<uint64_t>pos & 0xFFFFFFFFU))
    h = _mix(h, offset)
    return _fmix32(h ^ 16)


cdef inline float murmur3_uniform32(int64_t seed, int64_t pos, uint32_t offset) noexcept nogil:
    """vLLM's ``murmur3_uniform32``: ``(r + 0.5) * 2**-32`` rounded once to fp32, in (0, 1)."""
    cdef uint32_t r = murmur3_hash32(seed, pos, offset, 0)
    cdef float hi16 = <float><int>(r >> 16)
    cdef float lo16 = <float><int>(r & 0xFFFF)
    return hi16 * <float>1.52587890625e-05 + (lo16 + <float>0.5) * <float>2.3283064365386963e-10


cdef inline double murmur3_uniform64(int64_t seed, int64_t pos, uint32_t offset) noexcept nogil:
    """vLLM's ``murmur3_uniform64``: 53 bits of two hashes, ``(r + 0.5) * 2**-53``, in (0, 1)."""
    cdef uint64_t lo = murmur3_hash32(seed, pos, offset, 0)
    cdef uint64_t hi = murmur3_hash32(seed, pos, offset, <uint32_t>0x9E3779B9)
    cdef uint64_t random53 = ((hi << 32) | lo) >> 11
    cdef double u = (<double>random53 + 0.5) * 1.1102230246251565e-16
    if u == 1.0:
        u = u - 1.1102230246251565e-16
    return u
