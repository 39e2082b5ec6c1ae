# cython: language_level=3
"""Argument checks shared by the spec-decode and worker kernels.

They complement ``_buffers`` for what those kernels need beyond a contiguous flat buffer: 2-D
tables whose row stride is passed as a separate launch argument, minimum lengths, optional
(``None``/``0``) pointers and plain integer scalars. All of them read metadata only and raise an
exception naming the offending argument.
"""
from cython.parallel cimport prange

import operator

import torch

from kernels_cpu._buffers cimport DT_INT64, M_INDEX, check_table, check_tensor
from kernels_cpu._checks cimport bool_at_least, expected, index_at_least, need_min

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX

cdef object _Tensor = torch.Tensor
cdef object _index = operator.index
cdef object _I64_MIN = -(1 << 63)
cdef object _I64_MAX = (1 << 63) - 1


cdef Rows check_rows(object t, str name, object stride, str stride_name) except *:
    """An int32/int64 table the kernel reads at ``ptr + row * stride + col``.

    A 2-D tensor is a table of its own rows: they may be any distance apart (a column slice of a
    wider buffer) with unit-stride columns, and ``stride`` must be its ``stride(0)`` whenever it
    has more than one row -- any other stride would read elements that are not the row the
    kernel means. Any other shape is a flat buffer (what a Triton kernel sees): contiguous, read
    as ``numel // stride`` whole rows of ``stride`` columns, or as one short row when it holds
    at most ``stride`` elements. ``rows``/``cols`` bound every read the callers make.
    """
    cdef Rows r
    cdef int code = 0
    cdef Py_ssize_t shape[2]
    cdef Py_ssize_t st0, st, n
    st = as_int(stride, stride_name)
    if isinstance(t, _Tensor) and t.dim() == 2:
        r.buf.ptr = check_table(t, name, M_INDEX, shape, &st0, &code)
        r.rows = shape[0]
        r.cols = shape[1]
        if r.rows > 1 and r.cols > 0 and st != st0:
            raise ValueError(expected(stride_name, f"{name}.stride(0) = {st0}", st))
    else:
        r.buf.ptr = check_tensor(t, name, M_INDEX, -1, &code, shape)
        n = shape[0]
        if st < 0 or n == 0:
            r.rows = 0
            r.cols = 0
        elif st == 0:
            r.rows = PY_SSIZE_T_MAX                   # every row is the first
            r.cols = n
        elif n <= st:
            r.rows = 1                                # one (short) row: the first n elements
            r.cols = n
        else:
            r.rows = n // st                          # whole rows; a partial last one is unused
            r.cols = st
    need_min(stride_name, st, 0)
    r.stride = st
    r.buf.wide = code == DT_INT64
    return r


cdef IBuf need_index(object t, str name, Py_ssize_t n) except *:
    """A contiguous int32/int64 buffer of any shape with at least ``n`` elements."""
    return index_at_least(t, name, n)


cdef IBuf need_positions(object t, str name, Py_ssize_t n) except *:
    """Token positions: ``[num_tokens]``, or ``[3, num_tokens]`` under M-RoPE -- any contiguous
    buffer whose first ``n`` elements are the positions.

    The Triton kernels index the flat buffer with token indices < num_tokens, which in a
    contiguous ``[3, N]`` tensor is row 0 (the temporal positions): the same is read here.
    """
    return need_index(t, name, n)


cdef char* need_bool(object t, str name, Py_ssize_t n, Py_ssize_t* length=NULL) except NULL:
    """A contiguous bool buffer of any shape with at least ``n`` elements (count to ``length``)."""
    return bool_at_least(t, name, n, None, length)


cdef int64_t as_int(object v, str name) except? -1:
    """An integer scalar argument (Python int, numpy integer, 0-d int tensor); not bool/float."""
    cdef int64_t out
    if type(v) is int:                  # the common case: no generic protocol lookups
        try:
            out = v
            return out
        except OverflowError:
            raise ValueError(expected(name, "an integer that fits in int64", v)) from None
    if isinstance(v, bool) or isinstance(v, float):
        raise TypeError(expected(name, "an integer", type(v).__name__))
    try:
        i = _index(v)
    except TypeError:
        raise TypeError(expected(name, "an integer", type(v).__name__)) from None
    if not (_I64_MIN <= i <= _I64_MAX):
        raise ValueError(expected(name, "an integer that fits in int64", i))
    return i


cdef bint as_flag(object v, str name) except -1:
    """A boolean launch flag (constexpr in the Triton kernel): bool or 0/1."""
    if v is True or v is False:
        return v
    if v is None:
        return False
    try:
        i = _index(v)
    except TypeError:
        raise TypeError(expected(name, "a bool", type(v).__name__)) from None
    if i != 0 and i != 1:
        raise ValueError(expected(name, "a bool", repr(v)))
    return i == 1


cdef void run_rows(row_fn fn, const void* args, Py_ssize_t n, int nthreads) noexcept nogil:
    """Call ``fn(args, i)`` for i in [0, n): serially for one thread, else an OpenMP team.

    Rows (requests, chunks) are independent by construction -- the validation pass has made
    sure their output ranges are disjoint -- so any schedule gives the serial result. Guided
    scheduling because requests are uneven (one prefill beside many one-token decodes).
    """
    cdef Py_ssize_t i
    if nthreads <= 1 or n <= 1:
        for i in range(n):
            fn(args, i)
    else:
        for i in prange(n, nogil=True, num_threads=nthreads, schedule="guided"):
            fn(args, i)
