# cython: language_level=3
"""What ``_topk_topp_rows`` shares at C level: the ``nogil`` loop over a table's rows, for the
validated entry points (``_topk_topp``), and one row's top-k/top-p mask on a float32 working
row, for kernels that mask a row they have already read (``_spec_step`` masks each sampled
row's temperature-scaled copy as its walk reaches it) or have yet to write (``_mrv2_spec``'s one
pass hands ``load_mask_row_f32_team`` a loader, so a team copies and masks the row in one
parallel region, and ``run_rows_f32_team`` -- with draft probabilities
``run_rows_then_f32_team``, the rows' statistics too -- the rows of a request its walk will
reach, in one region). The kept-set rules are ``_topk_topp_rows.pyx``'s, written once there.
"""
from libc.stdint cimport int32_t, int64_t, uint16_t

from kernels_cpu._buffers cimport expected


cdef inline int64_t _k_at(const char* kp, bint wide, Py_ssize_t r) noexcept nogil:
    """Row ``r``'s ``k`` from an int32 (or, ``wide``, int64) buffer."""
    if wide:
        return (<const int64_t*>kp)[r]
    return (<const int32_t*>kp)[r]


cdef inline double _p_at(const char* pp, bint dbl, Py_ssize_t r) noexcept nogil:
    """Row ``r``'s ``p`` from a float32 (or, ``dbl``, float64) buffer."""
    if dbl:
        return (<const double*>pp)[r]
    return (<const float*>pp)[r]


cdef inline int check_k_at(const char* kp, bint wide, Py_ssize_t i, str name) except -1:
    """The rule every top-k entry keeps, for each kernel that takes a ``k`` buffer: ``k >= 1``
    (``k >= V`` keeps the row); entry ``i`` of ``name`` refused naming it."""
    cdef int64_t kv = _k_at(kp, wide, i)
    if kv < 1:
        raise ValueError(expected(name, "values >= 1", f"{name}[{i}] = {kv}"))
    return 0


cdef inline int check_p_at(const char* pp, bint dbl, Py_ssize_t i, str name,
                           bint above_one=False) except -1:
    """The rule every top-p entry keeps: ``0 < p <= 1`` (``1`` keeps the row; ``above_one``:
    a caller for which p > 1 keeps it too); entry ``i`` of ``name`` refused naming it."""
    cdef double pv = _p_at(pp, dbl, i)
    if not (0.0 < pv and (above_one or pv <= 1.0)):
        raise ValueError(expected(name, "values > 0" if above_one else "values in (0, 1]",
                                  f"{name}[{i}] = {pv}"))
    return 0


cdef int mask_rows(char* base, Py_ssize_t row_bytes, int code, Py_ssize_t B, Py_ssize_t V,
                   const char* kp, bint kwide, const char* pp, bint pdbl, float maskf,
                   uint16_t mask16, int nt) noexcept nogil
cdef void* row_scratch(Py_ssize_t V) noexcept nogil
cdef void free_row_scratch(void* s) noexcept nogil
cdef void mask_row_f32(float* row, Py_ssize_t n, int64_t k, double p, void* s) noexcept nogil
cdef Py_ssize_t mask_row_f32_team(float* row, Py_ssize_t n, int64_t k, double p, void* s,
                                 int nt, float row_max, bint row_nan,
                                 const float* chunk_max) noexcept nogil
# Writes row[c0, c0 + length) (a caller's copy of its source row, e.g. divided by a
# temperature) and returns the largest of those values, NaN set aside; nan: whether one is NaN
ctypedef float (*row_loader)(void* ctx, Py_ssize_t c0, Py_ssize_t length, float* row,
                             int* nan) noexcept nogil
# A chunk's top two, for a peek asked for them: the first index holding its maximum (-1:
# none) and the largest of its other values (the maximum again where it occurs twice), of the
# values the loader would write
cdef struct row_top2:
    Py_ssize_t first
    float second
# The largest of the values the loader would write to row[c0, c0 + length), NaN set aside
# (nan: whether one is NaN), read without writing them; t2 (NULL: not asked) their top two
ctypedef float (*row_peeker)(void* ctx, Py_ssize_t c0, Py_ssize_t length,
                             int* nan, row_top2* t2) noexcept nogil
# A caller's work on masked row i, unit b, on its team (load_mask_row_f32_team's then: i 0;
# run_rows_then_f32_team's: the run's row i)
ctypedef void (*row_then)(void* ctx, Py_ssize_t i, Py_ssize_t b) noexcept nogil
cdef Py_ssize_t load_mask_row_f32_team(float* row, Py_ssize_t n, int64_t k, double p, void* s,
                                       int nt, row_loader load, row_peeker peek, void* ctx,
                                       float* chunk_max, int* chunk_nan,
                                       bint stream=*, row_then then=*, void* tctx=*,
                                       Py_ssize_t nthen=*, int* then_ran=*,
                                       bint lean=*) noexcept nogil
cdef extern from "_run_rows.h":
    ctypedef struct fd_run_row:
        float* row
        int64_t k
        double p
        void* ctx
        int peek
        int64_t want
    enum: FD_RUN_HOLD
    void* fd_run_hold(fd_run_row* r) noexcept nogil
# Describes row i of a run (run_rows_f32_team) into out, the same on every thread of its team
ctypedef void (*run_row_at)(void* ctx, Py_ssize_t i, fd_run_row* out) noexcept nogil
cdef Py_ssize_t run_rows_f32_team(Py_ssize_t n, Py_ssize_t rows, int nt, void* s,
                                  row_loader load, row_peeker peek, run_row_at at, void* ctx,
                                  float* chunk_max, int* chunk_nan, int64_t* kept,
                                  bint lean=*) noexcept nogil
# Whether the run goes on past row i (one thread)
ctypedef int (*run_row_test)(void* ctx, Py_ssize_t i) noexcept nogil
cdef Py_ssize_t run_rows_then_f32_team(Py_ssize_t n, Py_ssize_t rows, int nt, void* s,
                                       row_loader load, run_row_at at, void* ctx,
                                       row_then then, Py_ssize_t nthen, run_row_test test,
                                       float* chunk_max, int* chunk_nan,
                                       int64_t* kept) noexcept nogil
cdef void widen_row(const char* row, int code, Py_ssize_t n, float* out) noexcept nogil
