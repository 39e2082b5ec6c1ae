# cython: language_level=3
"""CPU versions of vLLM 0.34's split argmax kernels: the greedy argmax's two stages and the
Gumbel sampler's combine.

* ``argmax_partial_kernel`` -- ``_argmax_partial`` (``sample/greedy_argmax.py``): per (row,
  block of ``BLOCK`` columns) of the grid, the block's largest logit (NaN counted as -inf)
  to ``PV[row * SPLITS + part]`` and the column of its first occurrence to ``PI``.
* ``argmax_finish_kernel`` -- ``_argmax_finish``: per row, ``OUT[row]`` = the ``PI`` slot of
  the first block whose ``PV`` is the row's largest.
* ``gumbel_combine_kernel`` -- ``_gumbel_combine_kernel`` (``sample/gumbel.py``): per row, the
  ``local_argmax`` slot of the first block whose Gumbel score is NaN, else of the first
  largest score (``torch.argmax``'s rule), to ``sampled[row]``.

``greedy_argmax`` launches the first two where vLLM's speculators pick draft tokens (vocabulary
blocks of 4096, so ~32 blocks of a 128k row); ``gumbel_sample`` launches the combine after its
per-block draw, instead of 0.32's ``local_max.argmax`` and ``gather``.

What the Triton kernels decide, and the CPU kernels with them: ``tl.argmax`` keeps the first
index of the maximum, so a block (or a row of block maxima) that is all -inf -- masked lanes
past ``N``/``SPLITS`` are -inf -- gives index 0; the partial stage replaces NaN by -inf before
it reduces. The finish stage reads maxima the partial stage wrote, which hold no NaN; a NaN
put there by another caller counts as -inf too (the interpreter's ``nanargmax``; a compiled
Triton reduction's answer would depend on its tree). Nothing here is float arithmetic: each
result is a comparison of loaded values, so it is exact for every dtype the kernels load.

The blocks of the partial stage are independent tiles run on an OpenMP team, as the Gumbel
draw's are (``_mrv2_sample``); the finish and combine stages read a handful of slots per row
and split rows over the team only when there are many. Every argument is validated -- bounds,
overlaps between what is written and what is read -- before anything is written; refusals
name the argument (``<name>: expected ..., got ...``).
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from kernels_cpu._buffers cimport (
    DT_FLOAT32, DT_FLOAT64, DT_INT64, IBuf, M_INDEX, M_REAL, expected, iget, iset, isize,
)
from kernels_cpu._checks cimport as_int, index_at_least, need_min, no_overlap
from kernels_cpu._mrv2_rows cimport (
    M_LOGITS, FRows, _block_size, _cols, check_frows, load_f32, need_frows, parse_grid,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._rowmax cimport fd_first_equal, fd_max_nan



cdef enum:
    # Lanes of a float16/bfloat16 block widened to float32 at a time (2 KiB on the stack)
    WIDEN_CHUNK = 512


cdef inline Py_ssize_t _itemsize(int code) noexcept nogil:
    if code == DT_FLOAT64:
        return 8
    if code == DT_FLOAT32:
        return 4
    return 2


cdef inline double _real(const char* p, int code, Py_ssize_t i) noexcept nogil:
    """Element ``i`` of a float32/float64 buffer, exactly (a float32 widened): the kernels
    compare these values in their own dtype, which widening does not change."""
    if code == DT_FLOAT64:
        return (<const double*>p)[i]
    return (<const float*>p)[i]


cdef inline Py_ssize_t _span(FRows* r, Py_ssize_t rows, Py_ssize_t cols) noexcept:
    """Bytes from ``r.ptr`` that rows ``[0, rows)``, columns ``[0, cols)`` reach (0: none)."""
    if rows <= 0 or cols <= 0:
        return 0
    return ((rows - 1) * r.stride + cols) * _itemsize(r.code)


cdef inline Py_ssize_t _ispan(FRows* r, Py_ssize_t rows, Py_ssize_t cols) noexcept:
    """``_span`` of an int32/int64 table."""
    if rows <= 0 or cols <= 0:
        return 0
    return ((rows - 1) * r.stride + cols) * (8 if r.code == DT_INT64 else 4)


cdef inline IBuf _ibuf(FRows* r) noexcept:
    cdef IBuf b
    b.ptr = r.ptr
    b.wide = r.code == DT_INT64
    return b


# -- the partial stage ----------------------------------------------------------------------------

cdef Py_ssize_t _chunk_argmax(const float* x, Py_ssize_t n, float* best) noexcept nogil:
    """Index of the first largest of ``x[0:n]`` (NaN ignored) if it beats ``best``, which it
    then becomes; -1 when it does not (a tie keeps the earlier chunk's index)."""
    cdef int nan = 0
    cdef float m = fd_max_nan(x, n, &nan)
    cdef Py_ssize_t j
    if not (m > best[0]):
        return -1
    j = fd_first_equal(x, n, m)
    best[0] = x[j]
    return j


cdef Py_ssize_t _block_argmax(const char* row, int code, Py_ssize_t c0, Py_ssize_t n,
                              float* best_out) noexcept nogil:
    """``tl.argmax`` of the ``n`` valid lanes from column ``c0`` of ``row`` with NaN as -inf:
    the first index of the largest value, 0 when every lane is -inf (a masked lane is too),
    and that value to ``best_out``. float16/bfloat16 lanes are widened in chunks first."""
    cdef float best = -INFINITY
    cdef float buf[WIDEN_CHUNK]
    cdef Py_ssize_t idx = 0, s, m, i, j
    if code == DT_FLOAT32:
        j = _chunk_argmax((<const float*>row) + c0, n, &best)
        if j >= 0:
            idx = j
    else:
        s = 0
        while s < n:
            m = n - s if n - s < WIDEN_CHUNK else WIDEN_CHUNK
            for i in range(m):
                buf[i] = load_f32(row, code, c0 + s + i)
            j = _chunk_argmax(buf, m, &best)
            if j >= 0:
                idx = s + j
            s += m
    best_out[0] = best
    return idx


cdef struct PartialArgs:
    const char* x
    int x_code
    Py_ssize_t sx             # X's row stride (SX)
    int64_t n                 # N: valid columns per row
    Py_ssize_t bs             # BLOCK
    Py_ssize_t parts          # grid[1]
    Py_ssize_t splits         # SPLITS: PV's and PI's row stride
    char* pv
    int pv_code
    IBuf pi


cdef inline void _partial_tile(const PartialArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t row = tile // a.parts, part = tile % a.parts
    cdef int64_t c0 = <int64_t>part * a.bs
    cdef int64_t valid = a.n - c0
    cdef Py_ssize_t idx = 0, slot = row * a.splits + part
    cdef float best = -INFINITY
    if valid > a.bs:
        valid = a.bs
    if valid > 0:
        idx = _block_argmax(a.x + row * a.sx * _itemsize(a.x_code), a.x_code, c0, valid, &best)
    if a.pv_code == DT_FLOAT64:
        (<double*>a.pv)[slot] = best
    else:
        (<float*>a.pv)[slot] = best
    iset(a.pi, slot, c0 + idx)


def argmax_partial_kernel(X, PV, PI, N, SX, SPLITS, BLOCK, *, grid):
    """Per (row, part) of the grid ``(rows, parts)``: over columns ``[part * BLOCK, (part + 1)
    * BLOCK)`` of row ``row`` (``X + row * SX``), those below ``N`` read and NaN counted as
    -inf, the largest value to ``PV[row * SPLITS + part]`` and the column of its first
    occurrence to ``PI[row * SPLITS + part]`` (``part * BLOCK`` when every lane is -inf or past
    ``N``).

    X: float32, bfloat16 (vLLM's) or float16, a ``[rows, >= N]`` table whose row stride is
    ``SX`` (a column slice of a wider one too) or a contiguous flat buffer; PV: float32 (vLLM's)
    or float64; PI: int32 (vLLM's) or int64; both a ``[rows, SPLITS]`` table (or a view of its
    first ``parts`` columns) or a contiguous flat buffer, ``SPLITS`` their row stride, at least
    ``parts`` when there are two or more rows (rows written may not overlap).
    """
    cdef Py_ssize_t g[3]
    cdef PartialArgs a
    cdef Py_ssize_t R, cols, tiles, tile
    cdef int nt
    parse_grid(grid, 2, g)
    R = g[0]
    a.parts = g[1]
    a.n = as_int(N, "N")
    a.bs = _block_size(BLOCK, "BLOCK")
    cdef FRows x = check_frows(X, "X", M_LOGITS, SX, "SX")
    cdef FRows pv = check_frows(PV, "PV", M_REAL, SPLITS, "SPLITS")
    cdef FRows pi = check_frows(PI, "PI", M_INDEX, SPLITS, "SPLITS")
    cols = _cols(a.n, a.parts, a.bs)
    need_frows(&x, "X", R, cols, False, "the columns the grid's blocks read")
    need_frows(&pv, "PV", R, a.parts, True, "a slot per row and block of the grid")
    need_frows(&pi, "PI", R, a.parts, True, "a slot per row and block of the grid")
    no_overlap("PV", pv.ptr, _span(&pv, R, a.parts), "X", x.ptr, _span(&x, R, cols))
    no_overlap("PI", pi.ptr, _ispan(&pi, R, a.parts), "X", x.ptr, _span(&x, R, cols))
    no_overlap("PI", pi.ptr, _ispan(&pi, R, a.parts), "PV", pv.ptr, _span(&pv, R, a.parts))
    if R == 0 or a.parts == 0:
        return
    a.x = x.ptr
    a.x_code = x.code
    a.sx = x.stride
    a.splits = pv.stride
    a.pv = pv.ptr
    a.pv_code = pv.code
    a.pi = _ibuf(&pi)
    tiles = R * a.parts
    nt = threads_for(R * (cols + a.parts))
    with nogil:
        if nt <= 1 or tiles <= 1:
            for tile in range(tiles):
                _partial_tile(&a, tile)
        else:
            for tile in prange(tiles, num_threads=nt, schedule="static"):
                _partial_tile(&a, tile)


# -- the finish stage -----------------------------------------------------------------------------

cdef inline Py_ssize_t _first_max(const char* p, int code, Py_ssize_t base,
                                  Py_ssize_t lanes) noexcept nogil:
    """The first of ``lanes`` slots from ``base`` holding the largest value, NaN counted as
    -inf (0 when all are -inf, or there are no lanes)."""
    cdef Py_ssize_t j, win = 0
    cdef double best = -INFINITY, v
    for j in range(lanes):
        v = _real(p, code, base + j)
        if v > best:
            best = v
            win = j
    return win


cdef struct FinishArgs:
    const char* pv
    int pv_code
    IBuf pi
    Py_ssize_t splits
    Py_ssize_t lanes          # min(SPLITS, BLOCK): the slots each row reads
    IBuf out


cdef inline void _finish_row(const FinishArgs* a, Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t part = _first_max(a.pv, a.pv_code, row * a.splits, a.lanes)
    iset(a.out, row, iget(a.pi, row * a.splits + part))


def argmax_finish_kernel(PV, PI, OUT, SPLITS, BLOCK, *, grid):
    """Per row of the grid ``(rows,)``: ``OUT[row] = PI[row * SPLITS + part]`` for the first
    ``part`` whose ``PV[row * SPLITS + part]`` is the largest of the row's first ``min(SPLITS,
    BLOCK)`` slots (NaN counted as -inf; part 0 when all are -inf or ``SPLITS`` is 0, which
    still reads ``PI[row * SPLITS]``).

    PV: float32 (vLLM's) or float64; PI: int32 (vLLM's) or int64; both a ``[rows, SPLITS]``
    table or a contiguous flat buffer with row stride ``SPLITS``; OUT: int64 (vLLM's) or int32,
    contiguous, one element per row.
    """
    cdef Py_ssize_t g[3]
    cdef FinishArgs a
    cdef Py_ssize_t R, row, bs, lanes
    cdef Py_ssize_t shp[1]
    cdef int nt
    parse_grid(grid, 1, g)
    R = g[0]
    bs = _block_size(BLOCK, "BLOCK")
    cdef FRows pv = check_frows(PV, "PV", M_REAL, SPLITS, "SPLITS")
    cdef FRows pi = check_frows(PI, "PI", M_INDEX, SPLITS, "SPLITS")
    lanes = pv.stride if pv.stride < bs else bs
    need_frows(&pv, "PV", R, lanes, False, "the slots of each row's blocks")
    need_frows(&pi, "PI", R, lanes if lanes > 0 else 1, False, "the slots of each row's blocks")
    cdef IBuf out = index_at_least(OUT, "OUT", R, "one per row of the grid")
    no_overlap("OUT", out.ptr, R * isize(out), "PV", pv.ptr, _span(&pv, R, lanes))
    no_overlap("OUT", out.ptr, R * isize(out), "PI", pi.ptr,
               _ispan(&pi, R, lanes if lanes > 0 else 1))
    if R == 0:
        return
    a.pv = pv.ptr
    a.pv_code = pv.code
    a.pi = _ibuf(&pi)
    a.splits = pv.stride
    a.lanes = lanes
    a.out = out
    nt = threads_for(R * (lanes + 2))
    with nogil:
        if nt <= 1:
            for row in range(R):
                _finish_row(&a, row)
        else:
            for row in prange(R, num_threads=nt, schedule="static"):
                _finish_row(&a, row)


# -- the Gumbel combine ---------------------------------------------------------------------------

cdef inline Py_ssize_t _combine_winner(const char* lm, int code, Py_ssize_t base,
                                       Py_ssize_t lanes, Py_ssize_t padded) noexcept nogil:
    """The block the combine picks among ``lanes`` scores from ``base``: the first NaN, else
    the first largest; ``padded`` (the kernel's no-lane sentinel) when there are no lanes."""
    cdef Py_ssize_t j
    cdef double v
    if lanes <= 0:
        return padded
    for j in range(lanes):
        v = _real(lm, code, base + j)
        if v != v:
            return j
    return _first_max(lm, code, base, lanes)


cdef struct CombineArgs:
    const char* lm
    int lm_code
    Py_ssize_t lm_stride
    IBuf la
    Py_ssize_t la_stride
    Py_ssize_t lanes
    Py_ssize_t padded
    int64_t* winner


cdef inline void _combine_row(const CombineArgs* a, Py_ssize_t row) noexcept nogil:
    a.winner[row] = _combine_winner(a.lm, a.lm_code, row * a.lm_stride, a.lanes, a.padded)


def gumbel_combine_kernel(local_argmax_ptr, local_argmax_stride, local_max_ptr,
                          local_max_stride, sampled_ptr, num_blocks, PADDED_NUM_BLOCKS, *, grid):
    """Per row of the grid ``(rows,)``: ``sampled[row] = local_argmax[row * local_argmax_stride
    + b]`` for the block ``b`` whose ``local_max`` score decides, among the row's first
    ``min(num_blocks, PADDED_NUM_BLOCKS)``: the first NaN, else the first largest (as
    ``torch.argmax``); ``b = PADDED_NUM_BLOCKS`` when there is no block at all, as the kernel's
    sentinel reads.

    local_argmax: int64 (vLLM's) or int32; local_max: float32 or float64 (USE_FP64); both a
    ``[rows, >= num_blocks]`` table (a column slice of a wider one too) or a contiguous flat
    buffer, their stride arguments the row strides. sampled: int64 (vLLM's) or int32,
    contiguous, one element per row. Only the slot each row picks is read of local_argmax.
    """
    cdef Py_ssize_t g[3]
    cdef CombineArgs a
    cdef Py_ssize_t R, row, reach = 0
    cdef int64_t nb, padded
    cdef int nt
    parse_grid(grid, 1, g)
    R = g[0]
    nb = as_int(num_blocks, "num_blocks")
    padded = as_int(PADDED_NUM_BLOCKS, "PADDED_NUM_BLOCKS")
    need_min("PADDED_NUM_BLOCKS", padded, 1)
    cdef FRows la = check_frows(local_argmax_ptr, "local_argmax_ptr", M_INDEX,
                                local_argmax_stride, "local_argmax_stride")
    cdef FRows lm = check_frows(local_max_ptr, "local_max_ptr", M_REAL, local_max_stride,
                                "local_max_stride")
    a.lanes = 0 if nb <= 0 else (nb if nb < padded else padded)
    a.padded = padded
    need_frows(&lm, "local_max_ptr", R, a.lanes, False, "the scores of each row's blocks")
    cdef IBuf out = index_at_least(sampled_ptr, "sampled_ptr", R, "one per row of the grid")
    no_overlap("sampled_ptr", out.ptr, R * isize(out), "local_max_ptr", lm.ptr,
               _span(&lm, R, a.lanes))
    if R == 0:
        return
    a.lm = lm.ptr
    a.lm_code = lm.code
    a.lm_stride = lm.stride
    a.winner = <int64_t*>malloc(R * sizeof(int64_t))
    if a.winner == NULL:
        raise MemoryError()
    try:
        nt = threads_for(R * (a.lanes + 2))
        with nogil:
            if nt <= 1:
                for row in range(R):
                    _combine_row(&a, row)
            else:
                for row in prange(R, num_threads=nt, schedule="static"):
                    _combine_row(&a, row)
        reach = _winners_reach(&la, a.winner, R)
        no_overlap("sampled_ptr", out.ptr, R * isize(out), "local_argmax_ptr", la.ptr,
                   reach * (8 if la.code == DT_INT64 else 4))
        a.la = _ibuf(&la)
        a.la_stride = la.stride
        _gather_winners(&a, out, R)
    finally:
        free(a.winner)


cdef Py_ssize_t _winners_reach(FRows* la, const int64_t* winner, Py_ssize_t R) except -1:
    """Check that local_argmax holds the slot each row picked; the elements from its base
    pointer they reach."""
    cdef Py_ssize_t row, far = 0, w_max = 0, at
    for row in range(R):
        at = row * la.stride + winner[row]
        if at + 1 > far:
            far = at + 1
        if winner[row] > w_max:
            w_max = winner[row]
    if la.flat:
        if far > la.numel:
            raise ValueError(expected("local_argmax_ptr", f"the slot each row picks, up to "
                                      f"element {far - 1} ({R} rows, local_argmax_stride "
                                      f"{la.stride} apart)", f"{la.numel} elements"))
    else:
        need_frows(la, "local_argmax_ptr", R, w_max + 1, False, "the slot each row picks")
    return far


cdef void _gather_winners(const CombineArgs* a, IBuf out, Py_ssize_t R) noexcept nogil:
    cdef Py_ssize_t row
    for row in range(R):
        iset(out, row, iget(a.la, row * a.la_stride + a.winner[row]))
