# cython: language_level=3
"""Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).

A counter-based generator: ``philox4x32_10(counter, key)`` is a pure function of a 128-bit counter
and a 64-bit key, so a kernel can draw the random number for any (request, position, block) by
naming it, in any order, on any thread, in any chunking -- no generator state is carried between
elements. Ten rounds is the Random123 default; the paper's known-answer vectors pin the result.

Everything here is ``cdef inline`` and ``nogil`` so the kernels that ``cimport`` it inline the
rounds into their loops (no call, no GIL). The helpers turn 32-bit words into variates:

* ``u01_float``  -- float32 uniform on (0, 1] (Random123's ``u01``: ``x * 2**-32 + 2**-33``; the
  float rounding maps the top ~128 words to exactly 1.0, never to 0).
* ``u01_open``   -- float64 uniform on (0, 1): ``(x + 0.5) * 2**-32``, exact in a double.
* ``u53_open``   -- float64 uniform on (0, 1) with 53 random bits from two words.
* ``exp_open``   -- float64 Exp(1) variate ``-log(u01_open(x))``: never 0, never inf (at most
  22.9), so a score ``p / E`` is always finite for finite ``p``.
* ``exp_float``  -- float32 ``-log(u01_float(x))``; may be exactly 0 (probability ~2**-25).
"""
from libc.stdint cimport uint32_t, uint64_t
from libc.math cimport log, logf


cdef inline void philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                               uint32_t k0, uint32_t k1, uint32_t* out) noexcept nogil:
    """Write Philox-4x32-10(counter=(c0, c1, c2, c3), key=(k0, k1)) into ``out[0:4]``."""
    cdef uint64_t p0, p1
    cdef uint32_t t
    cdef int r
    for r in range(10):
        if r:
            k0 = k0 + <uint32_t>0x9E3779B9U     # Weyl key schedule (golden ratio, sqrt(3) - 1)
            k1 = k1 + <uint32_t>0xBB67AE85U
        p0 = <uint64_t>0xD2511F53U * c0
        p1 = <uint64_t>0xCD9E8D57U * c2
        t = <uint32_t>(p1 >> 32) ^ c1 ^ k0
        c1 = <uint32_t>p1
        c2 = <uint32_t>(p0 >> 32) ^ c3 ^ k1
        c3 = <uint32_t>p0
        c0 = t
    out[0] = c0
    out[1] = c1
    out[2] = c2
    out[3] = c3


cdef inline float u01_float(uint32_t x) noexcept nogil:
    return <float>x * <float>2.3283064365386963e-10 + <float>1.1641532182693481e-10


cdef inline double u01_open(uint32_t x) noexcept nogil:
    return (<double>x + 0.5) * 2.3283064365386963e-10


cdef inline double u53_open(uint32_t a, uint32_t b) noexcept nogil:
    # 27 bits of a, 26 bits of b -> an integer in [0, 2**53); +0.5 keeps both ends open
    return ((<double>(a >> 5)) * 67108864.0 + <double>(b >> 6) + 0.5) * 1.1102230246251565e-16


cdef inline double exp_open(uint32_t x) noexcept nogil:
    return -log(u01_open(x))


cdef inline float exp_float(uint32_t x) noexcept nogil:
    return -logf(u01_float(x))
