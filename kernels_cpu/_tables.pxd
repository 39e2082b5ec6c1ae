# cython: language_level=3
"""The row table of the spec-decode and worker kernels (see ``_tables.pyx``).

``Rows`` is a 2-D int32/int64 table (a block table, a sampled-token matrix) addressed the way the
Triton kernels address it: ``ptr + row * stride + col`` with a row stride the caller passes. The
checks here make sure that stride is the tensor's own, so every read stays inside the view.
"""
from libc.stdint cimport int64_t

from kernels_cpu._buffers cimport IBuf, iget
from kernels_cpu._parallel cimport threads_for


cdef struct Rows:
    IBuf buf
    Py_ssize_t rows
    Py_ssize_t cols
    Py_ssize_t stride      # elements between rows (the caller's stride argument)


cdef Rows check_rows(object t, str name, object stride, str stride_name) except *


cdef inline int pow2_shift(int64_t v) noexcept nogil:
    """``log2(v)`` when ``v`` (>= 1) is a power of two, else -1.

    Block sizes are almost always powers of two; the kernels then replace the per-token
    division and modulo by the block size with a shift and a mask.
    """
    cdef int s = 0
    if v & (v - 1) != 0:
        return -1
    while (<int64_t>1 << s) < v:
        s += 1
    return s


ctypedef void (*row_fn)(const void* args, Py_ssize_t i) noexcept nogil

cdef void run_rows(row_fn fn, const void* args, Py_ssize_t n, int nthreads) noexcept nogil


cdef inline void run_rows_for(row_fn fn, const void* args, Py_ssize_t n,
                              Py_ssize_t work) noexcept:
    """``run_rows`` over ``n`` rows with the GIL released, on the team ``threads_for(work)``
    picks for ``work`` elements of work."""
    cdef int nthreads = threads_for(work)
    with nogil:
        run_rows(fn, args, n, nthreads)
