# cython: language_level=3
"""CPU versions of Model Runner V2's output kernels: what the sampler reports besides tokens.

* ``num_nans_kernel`` -- vLLM's ``_num_nans_kernel`` (``metrics/logits.py``): NaNs per logits
  row, launched by ``get_num_nans`` when the sampler's ``compute_nans`` is set
  (``VLLM_COMPUTE_NANS_IN_LOGITS=1``), before sampling.
* ``compact_sampling_mask_kernel`` -- vLLM's ``_compact_sampling_mask_kernel``
  (``sample/output.py``): per sampled output row, the first ``max_num_kept`` ids with a finite
  logit, their full count and a little-endian bitmask of them. ``SamplingMaskTensors.from_logits``
  launches it when the model config's ``return_sampling_mask`` is set (the ``Sampler`` and the
  rejection sampler, one launch per request chunk there).

Both read ``[tokens, V]`` logits rows with ``V`` up to 256k, so the work is split in *chunks*:
one per row when there are at least as many rows as threads, else each row cut into
byte-aligned pieces (a multiple of 64 columns, at least ``MIN_CHUNK``) so that a few long rows
still fill the team. Per-chunk results (NaN counts; kept counts and the bitmask bytes) come
from one parallel pass; a row's total is the sum of its chunks, in order, and the compacted ids
of a chunk start at the kept count of the chunks before it -- the position the Triton kernel's
running ``count`` gives them -- so a second pass writes them, in parallel too, touching only
chunks that start below ``max_num_kept``.

NaN and "finite" are decided on the bits (exponent all ones; NaN: a non-zero mantissa too),
which is what the kernels' float comparisons decide for every float dtype they load (a NaN or
infinity stays one when the kernel widens it to fp32); no float arithmetic is done.

Every argument is validated before anything is written; refusals name the argument
(``<name>: expected ..., got ...``).
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import torch

from kernels_cpu._buffers cimport (
    DT_BFLOAT16, DT_FLOAT16, DT_FLOAT32, DT_FLOAT64, DT_INT64, DT_INT8, DT_UINT8, IBuf, M_INDEX,
    check_index, check_table, check_tensor, dtype_code, expected, iget, iset, isize,
)
from kernels_cpu._checks cimport as_int, need_count, need_min, no_overlap
from kernels_cpu._parallel cimport threads_for

cdef extern from *:
    """
    static inline int fd_popcount8(unsigned int b) { return __builtin_popcount(b & 0xffu); }
    static inline int fd_ctz32(unsigned int b) { return __builtin_ctz(b); }
    """
    int fd_popcount8(unsigned int b) noexcept nogil
    int fd_ctz32(unsigned int b) noexcept nogil

cdef object _Tensor = torch.Tensor

#: Logits dtypes: every float the kernels load (vLLM's sampler passes float32).
cdef int M_LOGITS = (1 << DT_FLOAT32) | (1 << DT_FLOAT16) | (1 << DT_BFLOAT16) | (1 << DT_FLOAT64)
#: The packed mask: bytes (the Triton kernel stores ``.to(tl.uint8)``; an int8 buffer keeps the
#: same bits).
cdef int M_BYTES = (1 << DT_UINT8) | (1 << DT_INT8)

cdef enum:
    # Shortest piece of a row given to one thread when rows are fewer than threads: about 2 us
    # of reading on one core; shorter pieces cost more in scheduling than they save.
    MIN_CHUNK = 16384


ctypedef fused bits_t:
    uint16_t
    uint32_t
    uint64_t


# -- the logits view ------------------------------------------------------------------------------

cdef struct Logits:
    char* ptr
    int code                # dtype code
    Py_ssize_t rs           # row stride (elements), the caller's argument
    Py_ssize_t cs           # column stride (elements), the caller's argument


cdef int _logits(object t, str name, object row_stride, str rs_name, object col_stride,
                 str cs_name, int64_t lo_row, int64_t hi_row, int64_t V, Logits* out) except -1:
    """Validate logits read at ``ptr + row * row_stride + col * col_stride`` for rows
    ``[lo_row, hi_row)`` and columns ``[0, V)`` (nothing read when the range is empty).

    A 2-D tensor is a table of its own rows and columns: the rows read must be its rows, ``V``
    at most its width, and each stride argument its own stride wherever that dimension has more
    than one element (any other stride reads elements that are not the row/column meant). Any
    other shape is a contiguous flat buffer holding every element read.
    """
    cdef Py_ssize_t shp[3]
    cdef Py_ssize_t st0 = 0, rows, cols, st1
    cdef int code = 0
    cdef int64_t rs = as_int(row_stride, rs_name)
    cdef int64_t cs = 1 if col_stride is None else as_int(col_stride, cs_name)
    cdef bint reads = hi_row > lo_row and V > 0
    out.rs = rs
    out.cs = cs
    if isinstance(t, _Tensor) and t.dim() == 2:
        rows = t.shape[0]
        cols = t.shape[1]
        if col_stride is not None and cols > 1 and rows > 0:
            # the kernel takes a column stride: the table's strides as torch has them
            code = dtype_code(t.dtype)
            if not (M_LOGITS & (1 << code)):
                raise TypeError(expected(name, "dtype float32 or float16 or bfloat16 or float64",
                                         t.dtype))
            if not t.is_cpu:
                raise ValueError(expected(name, "a CPU tensor", f"device {t.device}"))
            if t.is_neg():
                raise ValueError(expected(name, f"a tensor without torch's lazy neg bit (pass "
                                          f"{name}.resolve_neg())", "a lazily negated view"))
            st0, st1 = t.stride()
            if cs != st1:
                raise ValueError(expected(cs_name, f"{name}.stride(1) = {st1}", cs))
            out.ptr = <char*><size_t>t.data_ptr()
        else:
            out.ptr = check_table(t, name, M_LOGITS, shp, &st0, &code)
        if reads:
            if lo_row < 0 or hi_row > rows:
                raise ValueError(expected(name, f"rows [{lo_row}, {hi_row}) of the launch",
                                          f"shape {tuple(t.shape)}"))
            if V > cols:
                raise ValueError(expected(name, f"rows of at least vocab_size = {V} columns",
                                          f"shape {tuple(t.shape)}"))
            if rows > 1 and rs != st0:
                raise ValueError(expected(rs_name, f"{name}.stride(0) = {st0}", rs))
    else:
        out.ptr = check_tensor(t, name, M_LOGITS, -1, &code, shp)
        if reads:
            need_min(rs_name, rs, 0)
            need_min(cs_name if col_stride is not None else "vocab_size", cs, 0)
            if lo_row < 0:
                raise ValueError(expected(name, f"rows [{lo_row}, {hi_row}) of the launch",
                                          "a flat buffer (no negative rows)"))
            need_count(name, shp[0], (hi_row - 1) * rs + (V - 1) * cs + 1,
                       f"rows up to {hi_row - 1} of {V} columns, {rs} apart")
    out.code = code
    return 0


cdef inline void _masks(int code, uint64_t* absm, uint64_t* expm) noexcept nogil:
    """The magnitude and exponent masks of a float dtype's bit pattern."""
    if code == DT_FLOAT32:
        absm[0] = 0x7fffffffu
        expm[0] = 0x7f800000u
    elif code == DT_FLOAT16:
        absm[0] = 0x7fffu
        expm[0] = 0x7c00u
    elif code == DT_BFLOAT16:
        absm[0] = 0x7fffu
        expm[0] = 0x7f80u
    else:
        absm[0] = 0x7fffffffffffffffu
        expm[0] = 0x7ff0000000000000u


cdef inline Py_ssize_t _itemsize(int code) noexcept nogil:
    if code == DT_FLOAT32:
        return 4
    if code == DT_FLOAT64:
        return 8
    return 2


# -- chunks ---------------------------------------------------------------------------------------

cdef Py_ssize_t _chunk_len(Py_ssize_t rows, int64_t V, int nt) noexcept nogil:
    """Columns per chunk: the whole row (rounded up to 64) unless rows are fewer than threads;
    then pieces of a multiple of 64 columns (whole bitmask bytes, whole cache lines of fp32),
    at least ``MIN_CHUNK`` long, about ``nt / rows`` per row."""
    cdef int64_t per, L
    if V <= 0:
        return 64
    if nt <= 1 or rows >= nt or V <= MIN_CHUNK:
        return ((V + 63) // 64) * 64
    per = (nt + rows - 1) // rows
    L = (V + per - 1) // per
    if L < MIN_CHUNK:
        L = MIN_CHUNK
    return ((L + 63) // 64) * 64


cdef inline Py_ssize_t _nchunks(int64_t V, Py_ssize_t L) noexcept nogil:
    return 1 if V <= 0 else (V + L - 1) // L


# -- NaN counts -----------------------------------------------------------------------------------

cdef inline int64_t _nan_run(const bits_t* p, int64_t c0, int64_t c1, bits_t absm,
                             bits_t expm) noexcept nogil:
    """NaNs among ``p[c0:c1]`` (a NaN: exponent all ones and a non-zero mantissa)."""
    cdef int64_t j
    cdef uint32_t n = 0            # a chunk is far shorter than 2**32: 32-bit lanes vectorise
    for j in range(c0, c1):
        n += (p[j] & absm) > expm
    return n


cdef struct NanJob:
    char* logits
    int code
    Py_ssize_t rs
    int64_t V
    Py_ssize_t L              # columns per chunk
    Py_ssize_t nc             # chunks per row
    int64_t* partial          # one count per (row, chunk)


cdef inline void _nan_chunk(const NanJob* j, Py_ssize_t item) noexcept nogil:
    cdef Py_ssize_t row = item // j.nc
    cdef int64_t c0 = (item % j.nc) * j.L
    cdef int64_t c1 = c0 + j.L
    cdef char* base
    if c1 > j.V:
        c1 = j.V
    if c0 >= c1:
        j.partial[item] = 0
        return
    base = j.logits + <int64_t>row * j.rs * _itemsize(j.code)
    if j.code == DT_FLOAT32:
        j.partial[item] = _nan_run(<const uint32_t*>base, c0, c1, <uint32_t>0x7fffffffu,
                                   <uint32_t>0x7f800000u)
    elif j.code == DT_FLOAT16:
        j.partial[item] = _nan_run(<const uint16_t*>base, c0, c1, <uint16_t>0x7fffu,
                                   <uint16_t>0x7c00u)
    elif j.code == DT_BFLOAT16:
        j.partial[item] = _nan_run(<const uint16_t*>base, c0, c1, <uint16_t>0x7fffu,
                                   <uint16_t>0x7f80u)
    else:
        j.partial[item] = _nan_run(<const uint64_t*>base, c0, c1,
                                   <uint64_t>0x7fffffffffffffffu, <uint64_t>0x7ff0000000000000u)


cdef int64_t _grid_programs(object grid) except -1:
    """Programs along the grid's first axis (0 when any axis is empty): the kernels read
    ``program_id(0)`` only, so the programs of the other axes repeat the same work."""
    cdef int64_t g, first = 0
    cdef Py_ssize_t i
    if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3:
        raise TypeError(expected("grid", "a tuple of 1 to 3 ints", repr(grid)))
    for i in range(len(grid)):
        g = as_int(grid[i], "grid")
        need_min("grid", g, 0)
        if i == 0:
            first = g
        elif g == 0:
            first = 0
    return first


def num_nans_kernel(logits_ptr, logits_stride, num_nans_ptr, vocab_size, BLOCK_SIZE=None, *,
                    grid):
    """``num_nans[r]`` = NaNs among ``logits[r * logits_stride + 0 : ... + vocab_size]`` for
    each of the grid's ``grid[0]`` rows (the count only the grid carries).

    logits: float32/float16/bfloat16/float64, a ``[N, >= vocab_size]`` table (a column slice of
    a wider one too; ``logits_stride`` its row stride) or a contiguous flat buffer; num_nans:
    int32 (vLLM's) or int64, contiguous, one element per row. ``vocab_size <= 0`` counts
    nothing (every row gets 0), as the kernel's empty loop does. ``BLOCK_SIZE`` is accepted and
    not needed: the count does not depend on it.
    """
    cdef int64_t R = _grid_programs(grid)
    cdef int64_t V = as_int(vocab_size, "vocab_size")
    cdef Logits lg
    cdef Py_ssize_t shp[1]
    cdef IBuf out
    cdef NanJob job
    cdef Py_ssize_t items, it, c, r
    cdef int64_t s
    cdef int nt
    if V < 0:
        V = 0
    _logits(logits_ptr, "logits_ptr", logits_stride, "logits_stride", None, "", 0, R, V, &lg)
    out = check_index(num_nans_ptr, "num_nans_ptr", -1, shp)
    need_count("num_nans_ptr", shp[0], R, "one per program of the grid")
    if R > 0 and V > 0:
        no_overlap("num_nans_ptr", out.ptr, R * isize(out), "logits_ptr", lg.ptr,
                   ((R - 1) * lg.rs + V) * _itemsize(lg.code))
    if R == 0:
        return
    nt = threads_for(R * V + R)
    job.logits = lg.ptr
    job.code = lg.code
    job.rs = lg.rs
    job.V = V
    job.L = _chunk_len(R, V, nt)
    job.nc = _nchunks(V, job.L)
    items = R * job.nc
    job.partial = <int64_t*>malloc(items * sizeof(int64_t))
    if job.partial == NULL:
        raise MemoryError()
    try:
        with nogil:
            if nt <= 1 or items <= 1:
                for it in range(items):
                    _nan_chunk(&job, it)
            else:
                for it in prange(items, num_threads=nt, schedule="static"):
                    _nan_chunk(&job, it)
            for r in range(R):
                s = 0
                for c in range(job.nc):
                    s += job.partial[r * job.nc + c]
                iset(out, r, s)
    finally:
        free(job.partial)


# -- compacted sampling masks ---------------------------------------------------------------------

cdef inline int64_t _pack_run(const bits_t* p, Py_ssize_t cs, int64_t c0, int64_t c1,
                              bits_t expm, uint8_t* mask) noexcept nogil:
    """Bitmask bytes ``c0 / 8 ..`` of columns ``[c0, c1)`` (``c0`` a multiple of 8; bit ``k``
    of a byte is column ``8 * byte + k``; columns past ``c1`` are 0 bits, as the kernel's
    ``-inf`` padding gives); returns how many columns are finite."""
    cdef int64_t j = c0, n = 0, b = c0 >> 3
    cdef unsigned int byte
    cdef int k, q
    cdef uint8_t flags[64]
    cdef uint64_t f
    if cs == 1:
        # 64 columns at a time: the 0/1 flags in a vectorised loop, then each 8 of them (one
        # little-endian uint64) into a byte by one multiplication -- bit k of the product's
        # top byte is flag k, the terms never carry into one another
        while j + 64 <= c1:
            for k in range(64):
                flags[k] = (p[j + k] & expm) != expm
            for q in range(8):
                memcpy(&f, &flags[8 * q], 8)
                byte = <unsigned int>((f * <uint64_t>0x0102040810204080u) >> 56)
                mask[b + q] = <uint8_t>byte
                n += fd_popcount8(byte)
            j += 64
            b += 8
    while j + 8 <= c1:
        byte = 0
        for k in range(8):
            byte |= (<unsigned int>((p[(j + k) * cs] & expm) != expm)) << k
        mask[b] = <uint8_t>byte
        n += fd_popcount8(byte)
        j += 8
        b += 1
    if j < c1:
        byte = 0
        for k in range(c1 - j):
            byte |= (<unsigned int>((p[(j + k) * cs] & expm) != expm)) << k
        mask[b] = <uint8_t>byte
        n += fd_popcount8(byte)
    return n


cdef struct MaskJob:
    char* logits
    int code
    Py_ssize_t rs, cs
    int64_t V
    Py_ssize_t L, nc
    int64_t* src              # per active row: the logits row
    int64_t* dst              # per active row: the output row
    int64_t* partial          # per (active row, chunk): kept columns, then their first position
    uint8_t* mask
    Py_ssize_t mask_rs
    IBuf ids
    Py_ssize_t ids_rs
    int64_t K                 # max_num_kept (<= 0: no ids)


cdef inline void _mask_chunk(const MaskJob* j, Py_ssize_t item) noexcept nogil:
    cdef Py_ssize_t a = item // j.nc
    cdef int64_t c0 = (item % j.nc) * j.L
    cdef int64_t c1 = c0 + j.L
    cdef char* base
    cdef uint8_t* mask
    if c1 > j.V:
        c1 = j.V
    if c0 >= c1:
        j.partial[item] = 0
        return
    base = j.logits + j.src[a] * j.rs * _itemsize(j.code)
    mask = j.mask + j.dst[a] * j.mask_rs
    if j.code == DT_FLOAT32:
        if j.cs == 1:
            j.partial[item] = _pack_run(<const uint32_t*>base, 1, c0, c1,
                                        <uint32_t>0x7f800000u, mask)
        else:
            j.partial[item] = _pack_run(<const uint32_t*>base, j.cs, c0, c1,
                                        <uint32_t>0x7f800000u, mask)
    elif j.code == DT_FLOAT16:
        j.partial[item] = _pack_run(<const uint16_t*>base, j.cs, c0, c1, <uint16_t>0x7c00u, mask)
    elif j.code == DT_BFLOAT16:
        j.partial[item] = _pack_run(<const uint16_t*>base, j.cs, c0, c1, <uint16_t>0x7f80u, mask)
    else:
        j.partial[item] = _pack_run(<const uint64_t*>base, j.cs, c0, c1,
                                    <uint64_t>0x7ff0000000000000u, mask)


cdef inline void _ids_chunk(const MaskJob* j, Py_ssize_t item) noexcept nogil:
    """The compacted ids of one chunk, from its bitmask bytes, starting at the position its
    predecessors' kept counts give (``partial[item]`` after the prefix pass)."""
    cdef Py_ssize_t a = item // j.nc
    cdef int64_t c0 = (item % j.nc) * j.L
    cdef int64_t c1 = c0 + j.L
    cdef int64_t pos = j.partial[item], b, b_end, row_ids
    cdef unsigned int byte
    cdef const uint8_t* mask
    if pos >= j.K:
        return
    if c1 > j.V:
        c1 = j.V
    mask = j.mask + j.dst[a] * j.mask_rs
    row_ids = j.dst[a] * j.ids_rs
    b_end = (c1 + 7) >> 3
    for b in range(c0 >> 3, b_end):
        byte = mask[b]
        while byte != 0:
            iset(j.ids, row_ids + pos, b * 8 + fd_ctz32(byte))
            pos += 1
            if pos >= j.K:
                return
            byte &= byte - 1


cdef int _out_table(object t, str name, int mask, object stride, str stride_name,
                    int64_t rows, int64_t width, char** ptr, int* code, Py_ssize_t* rs) except -1:
    """An output written at ``ptr + row * stride + col`` for rows ``[0, rows)`` and columns
    ``[0, width)``: a 2-D table of its own rows (``stride`` its ``stride(0)`` when it has more
    than one row, at least ``width`` columns) or a contiguous flat buffer. Rows written by
    different programs may not overlap (``stride >= width`` when two or more are written)."""
    cdef Py_ssize_t shp[3]
    cdef Py_ssize_t st0 = 0
    cdef int64_t st = as_int(stride, stride_name)
    cdef bint writes = rows > 0 and width > 0
    if isinstance(t, _Tensor) and t.dim() == 2:
        ptr[0] = check_table(t, name, mask, shp, &st0, code)
        if writes:
            if rows > shp[0]:
                raise ValueError(expected(name, f"at least {rows} rows (one per output row "
                                          f"written)", f"shape {tuple(t.shape)}"))
            if width > shp[1]:
                raise ValueError(expected(name, f"rows of at least {width} columns",
                                          f"shape {tuple(t.shape)}"))
            if shp[0] > 1 and st != st0:
                raise ValueError(expected(stride_name, f"{name}.stride(0) = {st0}", st))
    else:
        ptr[0] = check_tensor(t, name, mask, -1, code, shp)
        if writes:
            need_min(stride_name, st, 0)
            need_count(name, shp[0], (rows - 1) * st + width,
                       f"{rows} rows of {width} columns, {st} apart")
    if writes and rows > 1 and st < width:
        raise ValueError(expected(stride_name, f">= {width} (rows written may not overlap)", st))
    rs[0] = st
    return 0


def compact_sampling_mask_kernel(logits_ptr, logits_row_stride, logits_col_stride,
                                 cu_num_logits_ptr, num_sampled_tokens_ptr, token_ids_ptr,
                                 token_ids_row_stride, packed_mask_ptr, packed_mask_row_stride,
                                 counts_ptr, vocab_size, max_num_kept, ROWS_PER_REQUEST,
                                 BLOCK_SIZE=None, *, grid):
    """Per output row ``o < grid[0]`` (request ``o // ROWS_PER_REQUEST``, slot
    ``o % ROWS_PER_REQUEST``): when the slot is below the request's ``num_sampled_tokens``, the
    logits row ``cu_num_logits[req] + slot`` gives ``counts[o]`` = its finite logits,
    ``token_ids[o, :min(count, max_num_kept)]`` = the first of their column ids in order, and
    ``packed_mask[o, :ceil(vocab_size / 8)]`` = its finite-logit bitmask (bit ``k`` of byte
    ``b`` is column ``8b + k``); otherwise ``counts[o] = 0`` and nothing else of the row is
    written.

    logits: float32 (vLLM's) /float16/bfloat16/float64, a 2-D table whose strides are the
    stride arguments (any column stride) or a contiguous flat buffer; cu_num_logits (a start
    per request) and num_sampled_tokens: int32/int64, any mix; token_ids and counts: int32
    (vLLM's) or int64; packed_mask: uint8 (or int8). token_ids needs ``min(max_num_kept,
    vocab_size)`` columns per row written (what the launch may write), packed_mask
    ``ceil(vocab_size / 8)``. ``BLOCK_SIZE`` (a power of two >= 8 in any launch Triton
    compiles) changes nothing of the result and is not needed.
    """
    cdef int64_t R = _grid_programs(grid)
    cdef int64_t V = as_int(vocab_size, "vocab_size")
    cdef int64_t K = as_int(max_num_kept, "max_num_kept")
    cdef int64_t RPR = as_int(ROWS_PER_REQUEST, "ROWS_PER_REQUEST")
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n_cu
    cdef IBuf cu, ns, cnt
    cdef int64_t o, req, slot, n_req, src, lo = 0, hi = 0, dst_end = 0, width, nbytes
    cdef Py_ssize_t n_act = 0, items, it, c, a
    cdef int64_t* act = NULL
    cdef Logits lg
    cdef MaskJob job
    cdef char* ids_p
    cdef char* mask_p
    cdef int ids_code = 0, mask_code = 0, nt
    cdef Py_ssize_t ids_rs = 0, mask_rs = 0
    cdef int64_t s, t
    need_min("ROWS_PER_REQUEST", RPR, 1)
    if V < 0:
        V = 0
    n_req = (R + RPR - 1) // RPR
    ns = check_index(num_sampled_tokens_ptr, "num_sampled_tokens_ptr", -1, shp)
    need_count("num_sampled_tokens_ptr", shp[0], n_req,
               f"one per request of the grid's {R} rows, {RPR} per request")
    cu = check_index(cu_num_logits_ptr, "cu_num_logits_ptr", -1, shp)
    n_cu = shp[0]
    act = <int64_t*>malloc((2 * R + 1) * sizeof(int64_t))
    if act == NULL:
        raise MemoryError()
    job.partial = NULL
    try:
        # the sampled slots: the rows the launch reads and writes beyond counts
        for o in range(R):
            req = o // RPR
            slot = o % RPR
            if slot >= iget(ns, req):
                continue
            need_count("cu_num_logits_ptr", n_cu, req + 1,
                       f"a start for request {req}, which has sampled tokens")
            src = iget(cu, req) + slot
            if n_act == 0 or src < lo:
                lo = src
            if n_act == 0 or src + 1 > hi:
                hi = src + 1
            act[n_act] = src
            act[R + n_act] = o
            n_act += 1
            dst_end = o + 1
        _logits(logits_ptr, "logits_ptr", logits_row_stride, "logits_row_stride",
                logits_col_stride, "logits_col_stride", lo, hi, V, &lg)
        width = K if K < V else V
        if width < 0:
            width = 0
        nbytes = (V + 7) // 8
        _out_table(token_ids_ptr, "token_ids_ptr", M_INDEX, token_ids_row_stride,
                   "token_ids_row_stride", dst_end, width, &ids_p, &ids_code, &ids_rs)
        _out_table(packed_mask_ptr, "packed_mask_ptr", M_BYTES, packed_mask_row_stride,
                   "packed_mask_row_stride", dst_end, nbytes, &mask_p, &mask_code, &mask_rs)
        cnt = check_index(counts_ptr, "counts_ptr", -1, shp)
        need_count("counts_ptr", shp[0], R, "one per program of the grid")
        job.ids.ptr = ids_p
        job.ids.wide = ids_code == DT_INT64
        _disjoint(&lg, lo, hi, V, cu, n_cu, ns, n_req, cnt, R, job.ids, ids_rs, dst_end, width,
                  mask_p, mask_rs, nbytes)
        if R == 0:
            return
        nt = threads_for(n_act * V + R)
        job.logits = lg.ptr
        job.code = lg.code
        job.rs = lg.rs
        job.cs = lg.cs
        job.V = V
        job.L = _chunk_len(n_act, V, nt)
        job.nc = _nchunks(V, job.L)
        job.src = act
        job.dst = act + R
        job.mask = <uint8_t*>mask_p
        job.mask_rs = mask_rs
        job.ids_rs = ids_rs
        job.K = width
        items = n_act * job.nc
        job.partial = <int64_t*>malloc((items + 1) * sizeof(int64_t))
        if job.partial == NULL:
            raise MemoryError()
        with nogil:
            if nt <= 1 or items <= 1:
                for it in range(items):
                    _mask_chunk(&job, it)
            else:
                for it in prange(items, num_threads=nt, schedule="static"):
                    _mask_chunk(&job, it)
            # per row: the count, and each chunk's first position (an exclusive prefix)
            for o in range(R):
                iset(cnt, o, 0)
            for a in range(n_act):
                s = 0
                for c in range(job.nc):
                    t = job.partial[a * job.nc + c]
                    job.partial[a * job.nc + c] = s
                    s += t
                iset(cnt, job.dst[a], s)
            if width > 0:
                if nt <= 1 or items <= 1:
                    for it in range(items):
                        _ids_chunk(&job, it)
                else:
                    for it in prange(items, num_threads=nt, schedule="static"):
                        _ids_chunk(&job, it)
    finally:
        free(job.partial)
        free(act)


cdef int _disjoint(Logits* lg, int64_t lo, int64_t hi, int64_t V, IBuf cu, Py_ssize_t n_cu,
                   IBuf ns, int64_t n_req, IBuf cnt, int64_t R, IBuf ids, Py_ssize_t ids_rs,
                   int64_t rows, int64_t width, char* mask, Py_ssize_t mask_rs,
                   int64_t nbytes) except -1:
    """The three outputs may not overlap one another nor anything the launch reads (the
    logits rows, the starts, the sampled counts): the result would depend on the order in
    which programs run."""
    cdef int64_t isz = _itemsize(lg.code)
    cdef char* lg_p = lg.ptr + lo * lg.rs * isz
    cdef int64_t lg_n = 0
    cdef int64_t ids_n = 0, mask_n = 0
    if hi > lo and V > 0:
        lg_n = ((hi - 1 - lo) * lg.rs + (V - 1) * lg.cs + 1) * isz
    if rows > 0 and width > 0:
        ids_n = ((rows - 1) * ids_rs + width) * isize(ids)
    if rows > 0 and nbytes > 0:
        mask_n = (rows - 1) * mask_rs + nbytes
    cdef int64_t cnt_n = R * isize(cnt)
    cdef int64_t cu_n = (n_cu if n_cu < n_req else n_req) * isize(cu)
    cdef int64_t ns_n = n_req * isize(ns)
    no_overlap("counts_ptr", cnt.ptr, cnt_n, "logits_ptr", lg_p, lg_n)
    no_overlap("counts_ptr", cnt.ptr, cnt_n, "cu_num_logits_ptr", cu.ptr, cu_n)
    no_overlap("counts_ptr", cnt.ptr, cnt_n, "num_sampled_tokens_ptr", ns.ptr, ns_n)
    no_overlap("token_ids_ptr", ids.ptr, ids_n, "logits_ptr", lg_p, lg_n)
    no_overlap("token_ids_ptr", ids.ptr, ids_n, "cu_num_logits_ptr", cu.ptr, cu_n)
    no_overlap("token_ids_ptr", ids.ptr, ids_n, "num_sampled_tokens_ptr", ns.ptr, ns_n)
    no_overlap("token_ids_ptr", ids.ptr, ids_n, "counts_ptr", cnt.ptr, cnt_n)
    no_overlap("packed_mask_ptr", mask, mask_n, "logits_ptr", lg_p, lg_n)
    no_overlap("packed_mask_ptr", mask, mask_n, "cu_num_logits_ptr", cu.ptr, cu_n)
    no_overlap("packed_mask_ptr", mask, mask_n, "num_sampled_tokens_ptr", ns.ptr, ns_n)
    no_overlap("packed_mask_ptr", mask, mask_n, "counts_ptr", cnt.ptr, cnt_n)
    no_overlap("packed_mask_ptr", mask, mask_n, "token_ids_ptr", ids.ptr, ids_n)
    return 0
