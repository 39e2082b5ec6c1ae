# cython: language_level=3
"""The row table of the spec-decode and worker kernels, and the loop over their rows.

``check_rows`` is the one reading of a 2-D int32/int64 table whose row stride is passed as a
separate launch argument (a block table, a sampled-token matrix); ``run_rows`` runs a kernel's
independent rows serially or on an OpenMP team. Every other argument check lives in
``_checks.pxd``.
"""
from cython.parallel cimport prange

import torch

from kernels_cpu._buffers cimport DT_INT64, M_INDEX, check_table, check_tensor
from kernels_cpu._checks cimport as_int, expected, need_min

from fastdispatch._capi cimport PY_SSIZE_T_MAX

cdef object _Tensor = torch.Tensor


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
