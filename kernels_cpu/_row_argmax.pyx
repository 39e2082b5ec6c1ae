# cython: language_level=3
"""``torch.argmax(logits, dim=-1)`` for the greedy drafter of Model Runner V2.

vLLM 0.32's speculators pick each greedy draft token with ``logits.argmax(dim=-1)`` over the
draft model's ``[requests, vocab]`` logits (``DraftModelSpeculator.sample_draft``): on one core
torch's reduction takes ~1.8 ms for 16 rows of a 128k vocabulary, ten times a read of them, and
runs once per draft step. 0.34 moved the pick onto a split Triton argmax (``greedy_argmax``, our
``_mrv2_argmax``); this is the same pass at 0.32's semantics, which are torch's:

* the first index of the largest value (ties keep the earlier column);
* NaN counts as larger than everything: the first NaN's index, when the row has one;
* a row of -inf only gives 0.

One pass per row in chunks (the largest value of a chunk and whether it holds a NaN, one
vectorised loop), then one scan of the winning chunk for its first occurrence. Rows split over
an OpenMP team, or -- fewer rows than threads -- each row's columns split into parts whose
results are combined in column order (same answer: the first part with a NaN, else the first
with the largest value). Comparisons only: exact for float32, bfloat16 and float16 (widened
exactly).
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from kernels_cpu._buffers cimport (
    DT_FLOAT32, DT_INT64, check_table, check_tensor, expected,
)
from kernels_cpu._checks cimport no_overlap
from kernels_cpu._mrv2_rows cimport M_LOGITS, load_f32
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._rowmax cimport fd_first_equal, fd_first_nan, fd_max_nan



cdef enum:
    CHUNK = 2048          # columns per chunk (8 KiB of float32: the winner's rescan is short)
    MIN_PART = 16384      # the fewest columns a part of a split row gets


cdef struct Part:
    float best            # the part's largest value, NaN ignored (-inf: none beats -inf)
    int64_t idx           # its first column; the first NaN's when nan
    bint nan


cdef inline const float* _chunk(const char* row, int code, Py_ssize_t c0, Py_ssize_t n,
                                float* buf) noexcept nogil:
    """Columns ``[c0, c0 + n)`` of ``row`` as float32: in place for float32, else widened into
    ``buf`` (exactly)."""
    cdef Py_ssize_t i
    if code == DT_FLOAT32:
        return (<const float*>row) + c0
    for i in range(n):
        buf[i] = load_f32(row, code, c0 + i)
    return buf


cdef void _part(const char* row, int code, Py_ssize_t lo, Py_ssize_t hi, Part* out) noexcept nogil:
    """torch's argmax over columns ``[lo, hi)`` of ``row`` (``lo < hi``), as a ``Part``."""
    cdef float buf[CHUNK]
    cdef const float* x
    cdef Py_ssize_t c, n, win = -1, win_n = 0
    cdef float best = -INFINITY, m
    cdef int nan = 0
    c = lo
    while c < hi:
        n = hi - c if hi - c < CHUNK else CHUNK
        x = _chunk(row, code, c, n, buf)
        m = fd_max_nan(x, n, &nan)
        if nan:
            out.nan = True
            out.best = INFINITY
            out.idx = c + fd_first_nan(x, n)
            return
        if m > best:
            best = m
            win = c
            win_n = n
        c += n
    out.nan = False
    out.best = best
    if win < 0:
        out.idx = lo                            # nothing above -inf: the first column
    else:
        x = _chunk(row, code, win, win_n, buf)
        out.idx = win + fd_first_equal(x, win_n, best)


cdef inline void _tile(const char* x, Py_ssize_t row_bytes, int code, Py_ssize_t V,
                       Py_ssize_t parts, Py_ssize_t t, Part* res) noexcept nogil:
    """Tile ``t``: part ``t % parts`` of row ``t // parts``'s columns, into ``res[t]``."""
    cdef Py_ssize_t p = t % parts
    _part(x + (t // parts) * row_bytes, code, V * p // parts, V * (p + 1) // parts, &res[t])


def argmax_rows(logits, out):
    """``out[r] = torch.argmax(logits[r])`` for every row ``r`` (the module docstring's rules).

    logits: float32, bfloat16 or float16, ``[rows, V]`` with ``V >= 1`` and unit column stride
    (rows any distance apart); out: int64, contiguous, at least ``rows`` elements, apart from
    ``logits``. Returns ``out``. Nothing is written on bad input."""
    cdef Py_ssize_t shp[2]
    cdef Py_ssize_t oshp[1]
    cdef Py_ssize_t rs = 0, R, V, parts, tiles, t, r, p, span
    cdef int code = 0, ocode = 0, nt
    cdef const char* x
    cdef int64_t* o
    cdef Part* res
    cdef Py_ssize_t item
    x = check_table(logits, "logits", M_LOGITS, shp, &rs, &code)
    o = <int64_t*>check_tensor(out, "out", 1 << DT_INT64, 1, &ocode, oshp)
    R = shp[0]
    V = shp[1]
    if R > 0 and V == 0:
        raise ValueError(expected("logits", "at least one column (an argmax of nothing)",
                                  f"shape ({R}, 0)"))
    if oshp[0] < R:
        raise ValueError(expected("out", f"at least {R} elements (one per row of logits)",
                                  oshp[0]))
    item = 4 if code == DT_FLOAT32 else 2
    span = ((R - 1) * rs + V) * item if R > 0 else 0
    no_overlap("out", <char*>o, R * 8, "logits", <char*>x, span)
    if R == 0:
        return out
    nt = threads_for(R * V)
    parts = 1
    if nt > R:
        parts = (nt + R - 1) // R
        if parts > (V + MIN_PART - 1) // MIN_PART:
            parts = (V + MIN_PART - 1) // MIN_PART
        if parts < 1:
            parts = 1
    tiles = R * parts
    res = <Part*>malloc(tiles * sizeof(Part))
    if res == NULL:
        raise MemoryError()
    try:
        with nogil:
            if nt <= 1 or tiles <= 1:
                for t in range(tiles):
                    _tile(x, rs * item, code, V, parts, t, res)
            else:
                for t in prange(tiles, num_threads=nt, schedule="static"):
                    _tile(x, rs * item, code, V, parts, t, res)
            for r in range(R):
                t = r * parts
                for p in range(1, parts):       # the first NaN, else the first largest
                    if res[t].nan:
                        break
                    if res[r * parts + p].nan or res[r * parts + p].best > res[t].best:
                        t = r * parts + p
                o[r] = res[t].idx
    finally:
        free(res)
    return out
