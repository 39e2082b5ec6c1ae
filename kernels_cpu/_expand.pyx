# cython: language_level=3
"""CPU version of vLLM's ``expand_kernel``: a per-request value spread over its tokens.

One of the rejection sampler's kernels; the rules every one of them follows (validate everything
first, then write in place at the caller's dtypes; what a launch may pass) are written once, in
``_sampling.pyx``'s docstring. Requests are copied in parallel above the calibrated work
threshold; each writes only its own tokens.
"""
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, INT32_MIN, INT32_MAX
from cpython.number cimport PyNumber_Index

from kernels_cpu._buffers cimport (
    IBuf, iget, isize, check_tensor, DT_FLOAT32, DT_INT32, DT_INT64, M_INDEX,
)
from kernels_cpu._checks cimport (
    Extent, as_int, expected, index_at_least, measure_offsets, need_count, need_min, no_overlap,
    offset_start,
)
from kernels_cpu._parallel cimport threads_for


ctypedef fused expand_t:
    float
    int32_t
    int64_t

cdef inline void _expand_row(expand_t* out, const expand_t* inp, IBuf cu, Py_ssize_t i,
                             expand_t rfrom, bint can_match, expand_t rto,
                             int64_t cap) noexcept nogil:
    cdef int64_t s = offset_start(cu, i), j
    cdef int64_t n = iget(cu, i) - s
    cdef expand_t v = inp[i]
    if n > cap:
        n = cap         # the Triton kernel stores tl.arange(0, MAX_NUM_TOKENS) lanes at most
    if can_match and v == rfrom:
        v = rto
    for j in range(n):
        out[s + j] = v


cdef void _expand_loop(expand_t* out, const expand_t* inp, IBuf cu, Py_ssize_t B,
                       expand_t rfrom, bint can_match, expand_t rto, int64_t cap,
                       int nt) noexcept nogil:
    cdef Py_ssize_t i
    if nt <= 1:
        for i in range(B):
            _expand_row(out, inp, cu, i, rfrom, can_match, rto, cap)
    else:
        for i in prange(B, nogil=True, num_threads=nt, schedule="static"):
            _expand_row(out, inp, cu, i, rfrom, can_match, rto, cap)


cdef int64_t _int_value(object x, str name) except? -1:
    """``x`` as an exact int64 (ints, integral floats, anything with ``__index__``)."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    try:
        return PyNumber_Index(x)
    except TypeError:
        raise TypeError(expected(name, "an integer for an integer buffer", repr(x))) from None
    except OverflowError:
        raise ValueError(expected(name, "a value that fits in int64", repr(x))) from None


cdef float _float_value(object x, str name) except? -1:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(expected(name, "a number", repr(x))) from None


def expand_kernel(output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to,
                  MAX_NUM_TOKENS=None):
    """``output[cu[i-1]:cu[i]] = input[i]``, with ``replace_from`` mapped to ``replace_to``.

    output/input: contiguous, any shape, same dtype (float32, int32 or int64); one request per
    ``input_ptr`` element (vLLM launches one program per input element); cu: int32/int64 with at
    least one entry per request. As in the Triton kernel, at most ``MAX_NUM_TOKENS`` (when given)
    elements are written per request, and ``output_ptr`` needs only the elements written (a
    longer one keeps its tail); the comparison is done in the buffer's dtype (float32 for float
    buffers, exact integers otherwise).
    """
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t B, T, cap, i, end
    cdef int64_t s0, n0
    cdef int code_o = 0, code_i = 0
    cdef Extent ext
    cdef char* po = check_tensor(output_ptr, "output_ptr", (1 << DT_FLOAT32) | M_INDEX, -1,
                                 &code_o, shp)
    T = shp[0]
    cdef char* pi = check_tensor(input_ptr, "input_ptr", (1 << DT_FLOAT32) | M_INDEX, -1,
                                 &code_i, shp)
    B = shp[0]
    if code_i != code_o:
        raise TypeError(expected("input_ptr", f"output_ptr's dtype {output_ptr.dtype}",
                                 input_ptr.dtype))
    cdef IBuf cu = index_at_least(cu_num_tokens_ptr, "cu_num_tokens_ptr", B,
                                  "one per input_ptr element")
    if MAX_NUM_TOKENS is None:
        cap = -1
    else:
        cap = as_int(MAX_NUM_TOKENS, "MAX_NUM_TOKENS")
        need_min("MAX_NUM_TOKENS", cap, 0)
    measure_offsets(cu, B, -1, NULL, -1, "cu_num_tokens_ptr", &ext)
    end = 0
    for i in range(B):
        s0 = offset_start(cu, i)
        n0 = iget(cu, i) - s0
        if cap >= 0 and n0 > cap:
            n0 = cap
        if n0 > 0 and s0 + n0 > end:
            end = s0 + n0
    need_count("output_ptr", T, end, "the tokens cu_num_tokens_ptr gives the requests")
    T = end
    cdef int isz = 4 if code_o != DT_INT64 else 8
    no_overlap("output_ptr", po, T * isz, "cu_num_tokens_ptr", cu.ptr, B * isize(cu))

    cdef int64_t f_i, t_i
    cdef float f_f, t_f
    cdef bint can_match = True
    cdef int nt = threads_for(T + B)
    if code_o == DT_FLOAT32:
        f_f = _float_value(replace_from, "replace_from")
        t_f = _float_value(replace_to, "replace_to")
        _expand_loop(<float*>po, <float*>pi, cu, B, f_f, True, t_f, T if cap < 0 else cap, nt)
        return
    f_i = _int_value(replace_from, "replace_from")
    t_i = _int_value(replace_to, "replace_to")
    if code_o == DT_INT32:
        if t_i < INT32_MIN or t_i > INT32_MAX:
            raise ValueError(expected("replace_to", "a value that fits the int32 output_ptr", t_i))
        can_match = INT32_MIN <= f_i <= INT32_MAX
        _expand_loop(<int32_t*>po, <int32_t*>pi, cu, B, <int32_t>f_i, can_match, <int32_t>t_i,
                     T if cap < 0 else cap, nt)
    else:
        _expand_loop(<int64_t*>po, <int64_t*>pi, cu, B, f_i, True, t_i, T if cap < 0 else cap, nt)
