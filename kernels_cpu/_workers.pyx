# cython: language_level=3
"""CPU versions of the model-runner's Triton kernels: slot mapping and state copies.

``compute_slot_mapping_kernel`` is ``vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel``
(one slot per scheduled token from the block table, context-parallel aware, padding after);
``compute_slot_mapping_hybrid_kernel`` is the same kernel in the 15-argument form of vLLM
0.27-0.31, whose KV-cache blocks may be split into smaller attention-kernel blocks;
``batch_memcpy_kernel`` is ``vllm.v1.worker.mamba_utils.batch_memcpy_kernel`` (copy regions given
by raw addresses); ``scatter_states_kernel`` is the mamba/KDA layers' ``_scatter_states_kernel``
(state-cache rows written at slot indices). Same three steps as ``_spec_decode``: metadata checks, a ``nogil`` value pass,
then the ``nogil`` compute pass (OpenMP when large enough).
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, INT64_MAX
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memmove

import torch

from fastdispatch._capi cimport PY_SSIZE_T_MAX


from kernels_cpu._buffers cimport (
    M_INT64, M_UINT64, IBuf, check_index, check_tensor, iget, iset
)
from kernels_cpu._checks cimport (
    as_int, expected, first_decrease, need_count, need_min, need_table_rows, order_error,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._tables cimport (
    Rows,
    check_rows,
    pow2_shift,
    row_fn,
    run_rows,
    run_rows_for,
)


# Tokens per parallel chunk of compute_slot_mapping: requests are uneven (a prefill of thousands
# of tokens beside one-token decodes), so the team splits the token range, not the requests.
DEF CHUNK = 2048


# ---------------------------------------------------------------------------------------------
# compute_slot_mapping_kernel
# ---------------------------------------------------------------------------------------------

cdef struct SlotArgs:
    IBuf qsl
    IBuf pos
    IBuf out
    Rows bt
    Py_ssize_t R
    int64_t first          # qsl[0]
    int64_t last           # qsl[R]
    int64_t kb             # KV_CACHE_BLOCK_SIZE
    int64_t world          # TOTAL_CP_WORLD_SIZE
    int64_t rank           # TOTAL_CP_RANK
    int64_t inter          # CP_KV_CACHE_INTERLEAVE_SIZE
    int64_t pad
    int kb_shift           # log2(kb) when kb is a power of two, else -1 (single-rank fast path)
    int64_t limit          # single rank: positions must be < limit = cols * kb
    int64_t bs             # hybrid form: block_size (tokens per attention-kernel block)
    int64_t bpk            # hybrid form: BLOCKS_PER_KV_BLOCK


cdef inline Py_ssize_t _request_of(const SlotArgs* a, int64_t i) noexcept nogil:
    """The request owning token i: the largest r < R with qsl[r] <= i (qsl non-decreasing)."""
    cdef Py_ssize_t lo = 0, hi = a.R - 1, mid
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if iget(a.qsl, mid) <= i:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef inline bint _local(const SlotArgs* a, int64_t pos, int64_t* vbi, int64_t* lbo) noexcept nogil:
    """Split ``pos`` (>= 0) into its virtual block and, when this rank owns it, the offset."""
    cdef int64_t vbs = a.kb * a.world, vbo
    vbi[0] = pos // vbs
    vbo = pos - vbi[0] * vbs
    if (vbo // a.inter) % a.world != a.rank:
        return False
    lbo[0] = (vbo // (a.world * a.inter)) * a.inter + vbo % a.inter
    return True


cdef void _slot_chunk(const void* p, Py_ssize_t c) noexcept nogil:
    cdef const SlotArgs* a = <const SlotArgs*>p
    cdef int64_t i = a.first + <int64_t>c * CHUNK, stop = i + CHUNK, end, pos, vbi = 0, lbo = 0
    cdef Py_ssize_t r
    if stop > a.last:
        stop = a.last
    cdef const char* row
    r = _request_of(a, i)
    while i < stop:
        end = iget(a.qsl, r + 1)
        if end > stop:
            end = stop
        if a.world == 1:                # every token is local: one divide (or shift) per token
            while i < end:
                pos = iget(a.pos, i)
                if a.kb_shift >= 0:
                    vbi = pos >> a.kb_shift
                    lbo = pos & (a.kb - 1)
                else:
                    vbi = pos // a.kb
                    lbo = pos - vbi * a.kb
                iset(a.out, i, iget(a.bt.buf, r * a.bt.stride + vbi) * a.kb + lbo)
                i += 1
        else:
            while i < end:
                pos = iget(a.pos, i)
                if _local(a, pos, &vbi, &lbo):
                    iset(a.out, i, iget(a.bt.buf, r * a.bt.stride + vbi) * a.kb + lbo)
                else:
                    iset(a.out, i, a.pad)
                i += 1
        r += 1


cdef enum SlotBad:
    SB_OK = 0
    SB_NEG_POS
    SB_BLOCK


cdef int _slot_check(const SlotArgs* a, Py_ssize_t* at) noexcept nogil:
    """Positions must be >= 0 and, where this rank stores them, inside the block table."""
    cdef Py_ssize_t r
    cdef int64_t i, pos, vbi = 0, lbo = 0
    if a.world == 1:                    # no division: block index < cols <=> pos < cols * kb
        for i in range(iget(a.qsl, 0), iget(a.qsl, a.R)):
            pos = iget(a.pos, i)
            if pos < 0 or pos >= a.limit:
                at[0] = i
                return SB_NEG_POS if pos < 0 else SB_BLOCK
        return SB_OK
    for r in range(a.R):
        for i in range(iget(a.qsl, r), iget(a.qsl, r + 1)):
            pos = iget(a.pos, i)
            at[0] = i
            if pos < 0:
                return SB_NEG_POS
            if _local(a, pos, &vbi, &lbo) and vbi >= a.bt.cols:
                return SB_BLOCK
    return SB_OK


cdef inline bint _hybrid_slot(const SlotArgs* a, int64_t pos, int64_t* bi, int64_t* off) noexcept nogil:
    """Hybrid form: the kernel block index and the offset in it of ``pos`` (>= 0), or False when
    another context-parallel rank stores it. ``vbi * bpk`` must not overflow (checked first)."""
    cdef int64_t vbi = 0, lbo = 0
    if not _local(a, pos, &vbi, &lbo):
        return False
    bi[0] = vbi * a.bpk + lbo // a.bs
    off[0] = lbo % a.bs
    return True


cdef void _slot_chunk_hybrid(const void* p, Py_ssize_t c) noexcept nogil:
    cdef const SlotArgs* a = <const SlotArgs*>p
    cdef int64_t i = a.first + <int64_t>c * CHUNK, stop = i + CHUNK, end, bi = 0, off = 0
    cdef Py_ssize_t r
    if stop > a.last:
        stop = a.last
    r = _request_of(a, i)
    while i < stop:
        end = iget(a.qsl, r + 1)
        if end > stop:
            end = stop
        while i < end:
            if _hybrid_slot(a, iget(a.pos, i), &bi, &off):
                iset(a.out, i, iget(a.bt.buf, r * a.bt.stride + bi) * a.bs + off)
            else:
                iset(a.out, i, a.pad)
            i += 1
        r += 1


cdef int _slot_check_hybrid(const SlotArgs* a, Py_ssize_t* at) noexcept nogil:
    """Hybrid form: positions >= 0 and, where this rank stores them, a kernel block index
    ``vbi * BLOCKS_PER_KV_BLOCK + local // block_size`` inside ``[0, cols)``."""
    cdef int64_t i, pos, vbi = 0, lbo = 0, rest
    for i in range(iget(a.qsl, 0), iget(a.qsl, a.R)):
        pos = iget(a.pos, i)
        at[0] = i
        if pos < 0:
            return SB_NEG_POS
        if not _local(a, pos, &vbi, &lbo):
            continue
        rest = lbo // a.bs
        if a.bpk != 0 and vbi > (a.bt.cols - rest) // a.bpk:
            return SB_BLOCK                   # vbi * bpk + rest >= cols (or would overflow)
        if vbi * a.bpk + rest >= a.bt.cols:
            return SB_BLOCK
    return SB_OK


cdef int _slot_prepare(
    SlotArgs* a, object num_tokens, object max_num_tokens, object query_start_loc_ptr,
    object positions_ptr, object block_table_ptr, object block_table_stride,
    object slot_mapping_ptr, object KV_CACHE_BLOCK_SIZE, object TOTAL_CP_WORLD_SIZE,
    object TOTAL_CP_RANK, object CP_KV_CACHE_INTERLEAVE_SIZE, object PAD_ID,
    int64_t* nt_out, int64_t* mnt_out,
) except -1:
    """The checks both forms share, in the order the 13-argument kernel has always made them:
    scalars, buffers, then the offsets against the buffers. Fills ``a`` (all but the positions
    check, which depends on the form)."""
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t n_pos, n_out, at = 0
    cdef int64_t nt, mnt
    nt = as_int(num_tokens, "num_tokens")
    mnt = as_int(max_num_tokens, "max_num_tokens")
    a.kb = as_int(KV_CACHE_BLOCK_SIZE, "KV_CACHE_BLOCK_SIZE")
    a.world = as_int(TOTAL_CP_WORLD_SIZE, "TOTAL_CP_WORLD_SIZE")
    a.rank = as_int(TOTAL_CP_RANK, "TOTAL_CP_RANK")
    a.inter = as_int(CP_KV_CACHE_INTERLEAVE_SIZE, "CP_KV_CACHE_INTERLEAVE_SIZE")
    a.pad = as_int(PAD_ID, "PAD_ID")
    need_min("num_tokens", nt, 0)
    need_min("KV_CACHE_BLOCK_SIZE", a.kb, 1)
    need_min("TOTAL_CP_WORLD_SIZE", a.world, 1)
    if a.rank < 0 or a.rank >= a.world:
        raise ValueError(expected("TOTAL_CP_RANK",
                                  f"a rank in [0, TOTAL_CP_WORLD_SIZE = {a.world})", a.rank))
    need_min("CP_KV_CACHE_INTERLEAVE_SIZE", a.inter, 1)
    if <object>a.kb * a.world > INT64_MAX or <object>a.world * a.inter > INT64_MAX:
        raise ValueError(expected("TOTAL_CP_WORLD_SIZE", "a size whose products with "
                                  "KV_CACHE_BLOCK_SIZE and CP_KV_CACHE_INTERLEAVE_SIZE fit in "
                                  "int64", a.world))
    a.qsl = check_index(query_start_loc_ptr, "query_start_loc_ptr", -1, shape)
    need_count("query_start_loc_ptr", shape[0], 1, "num_reqs + 1")
    a.R = shape[0] - 1
    a.pos = check_index(positions_ptr, "positions_ptr", -1, shape)
    n_pos = shape[0]
    a.out = check_index(slot_mapping_ptr, "slot_mapping_ptr", -1, shape)
    n_out = shape[0]
    a.bt = check_rows(block_table_ptr, "block_table_ptr", block_table_stride, "block_table_stride")
    if mnt > nt:
        need_count("slot_mapping_ptr", n_out, mnt, "max_num_tokens")
    with nogil:
        at = first_decrease(a.qsl, a.R + 1)
    if at >= 0:
        order_error("query_start_loc_ptr", a.qsl, at)
    a.first = iget(a.qsl, 0)
    a.last = iget(a.qsl, a.R)
    if n_pos < a.last or n_out < a.last:  # (messages formatted only when raised)
        need_count("positions_ptr", n_pos, a.last, f"query_start_loc_ptr[{a.R}]")
        need_count("slot_mapping_ptr", n_out, a.last, f"query_start_loc_ptr[{a.R}]")
    if a.last > a.first:
        need_table_rows("block_table_ptr", a.bt.rows, a.R, "num_reqs")
    a.kb_shift = pow2_shift(a.kb)
    a.limit = a.bt.cols * a.kb if a.bt.cols <= INT64_MAX // a.kb else INT64_MAX
    a.bs = a.kb
    a.bpk = 1
    nt_out[0] = nt
    mnt_out[0] = mnt
    return 0


cdef void _slot_run(const SlotArgs* a, row_fn chunk, int64_t nt, int64_t mnt):
    """The compute pass (OpenMP over token chunks when large enough), then the padding."""
    cdef Py_ssize_t nchunks = (a.last - a.first + CHUNK - 1) // CHUNK if a.R > 0 else 0
    cdef int64_t i
    cdef int nthreads = threads_for(a.last - a.first)
    with nogil:  # one GIL hand-off for both passes (run_rows_for would add a second)
        run_rows(chunk, a, nchunks, nthreads)
        i = nt
        while i < mnt:
            iset(a.out, i, a.pad)
            i += 1


cdef int _slot_error(const SlotArgs* a, int bad, Py_ssize_t at, object block) except -1:
    """Raise for a ``_slot_check*`` verdict other than ``SB_OK`` (``block``: the block the
    position at ``at`` needs, for ``SB_BLOCK``)."""
    cdef int64_t pos = iget(a.pos, at)
    if bad == SB_NEG_POS:
        raise IndexError(expected(f"positions_ptr[{at}]", "a position >= 0", pos))
    raise IndexError(expected("block_table_ptr", f"a column for block {block} "
                              f"(positions_ptr[{at}] = {pos})", f"{a.bt.cols} columns"))


def compute_slot_mapping_kernel(
    num_tokens, max_num_tokens, query_start_loc_ptr, positions_ptr, block_table_ptr,
    block_table_stride, slot_mapping_ptr, KV_CACHE_BLOCK_SIZE, TOTAL_CP_WORLD_SIZE=1,
    TOTAL_CP_RANK=0, CP_KV_CACHE_INTERLEAVE_SIZE=1, PAD_ID=-1, BLOCK_SIZE=None,
):
    """Slot of each scheduled token: ``block_table[r, pos // B'] * B + offset`` for the tokens of
    request r (``query_start_loc_ptr[r]:[r+1]``), with ``B' = B * TOTAL_CP_WORLD_SIZE`` and
    ``PAD_ID`` for tokens another context-parallel rank stores; then ``PAD_ID`` over
    ``slot_mapping_ptr[num_tokens:max_num_tokens]`` (cudagraph padding).

    The number of requests is ``query_start_loc_ptr.shape[0] - 1`` (the launch grid has one more
    program, the padding one). A negative position or a block index beyond the table's columns
    raises IndexError before anything is written.
    """
    cdef SlotArgs a
    cdef Py_ssize_t at = 0
    cdef int64_t nt = 0, mnt = 0
    cdef int bad
    _slot_prepare(&a, num_tokens, max_num_tokens, query_start_loc_ptr, positions_ptr,
                  block_table_ptr, block_table_stride, slot_mapping_ptr, KV_CACHE_BLOCK_SIZE,
                  TOTAL_CP_WORLD_SIZE, TOTAL_CP_RANK, CP_KV_CACHE_INTERLEAVE_SIZE, PAD_ID,
                  &nt, &mnt)
    with nogil:
        bad = _slot_check(&a, &at)
    if bad != SB_OK:
        _slot_error(&a, bad, at, iget(a.pos, at) // (a.kb * a.world))
    _slot_run(&a, _slot_chunk, nt, mnt)


def compute_slot_mapping_hybrid_kernel(
    num_tokens, max_num_tokens, query_start_loc_ptr, positions_ptr, block_table_ptr,
    block_table_stride, block_size, slot_mapping_ptr, KV_CACHE_BLOCK_SIZE,
    BLOCKS_PER_KV_BLOCK=1, TOTAL_CP_WORLD_SIZE=1, TOTAL_CP_RANK=0,
    CP_KV_CACHE_INTERLEAVE_SIZE=1, PAD_ID=-1, BLOCK_SIZE=None,
):
    """The slot-mapping kernel of vLLM 0.27-0.31 (15 arguments): KV-cache blocks of
    ``KV_CACHE_BLOCK_SIZE`` tokens may be split into ``BLOCKS_PER_KV_BLOCK`` attention-kernel
    blocks of ``block_size`` tokens, and the block table holds kernel-block ids.

    A token at local offset ``l`` of virtual block ``v`` (as in ``compute_slot_mapping_kernel``)
    gets ``block_table[r, v * BLOCKS_PER_KV_BLOCK + l // block_size] * block_size +
    l % block_size``; ``PAD_ID`` for other ranks' tokens and the ``[num_tokens, max_num_tokens)``
    padding. Same checks as the 13-argument form, plus ``block_size >= 1``,
    ``BLOCKS_PER_KV_BLOCK >= 0`` and every kernel block index inside the table (IndexError),
    all before anything is written. With one rank and ``block_size * BLOCKS_PER_KV_BLOCK ==
    KV_CACHE_BLOCK_SIZE`` (what vLLM passes) the slots are exactly those of the 13-argument
    kernel with ``block_size`` blocks, and its single-rank fast path runs.
    """
    cdef SlotArgs a
    cdef Py_ssize_t at = 0
    cdef int64_t nt = 0, mnt = 0, bs, bpk, vbi = 0, lbo = 0
    cdef int bad
    cdef row_fn chunk
    bs = as_int(block_size, "block_size")
    bpk = as_int(BLOCKS_PER_KV_BLOCK, "BLOCKS_PER_KV_BLOCK")
    need_min("block_size", bs, 1)
    need_min("BLOCKS_PER_KV_BLOCK", bpk, 0)
    _slot_prepare(&a, num_tokens, max_num_tokens, query_start_loc_ptr, positions_ptr,
                  block_table_ptr, block_table_stride, slot_mapping_ptr, KV_CACHE_BLOCK_SIZE,
                  TOTAL_CP_WORLD_SIZE, TOTAL_CP_RANK, CP_KV_CACHE_INTERLEAVE_SIZE, PAD_ID,
                  &nt, &mnt)
    if a.world == 1 and <object>bs * bpk == a.kb:
        # pos // bs == (pos // kb) * bpk + (pos % kb) // bs and pos % bs == (pos % kb) % bs:
        # the 13-argument kernel with block size bs computes the same slots.
        a.kb = bs
        a.bs = bs
        a.bpk = 1
        a.kb_shift = pow2_shift(bs)
        a.limit = a.bt.cols * bs if a.bt.cols <= INT64_MAX // bs else INT64_MAX
        with nogil:
            bad = _slot_check(&a, &at)
        chunk = _slot_chunk
    else:
        a.bs = bs
        a.bpk = bpk
        with nogil:
            bad = _slot_check_hybrid(&a, &at)
        chunk = _slot_chunk_hybrid
    if bad == SB_BLOCK:
        _local(&a, iget(a.pos, at), &vbi, &lbo)
    if bad != SB_OK:
        _slot_error(&a, bad, at, <object>vbi * a.bpk + lbo // a.bs)
    _slot_run(&a, chunk, nt, mnt)


# ---------------------------------------------------------------------------------------------
# batch_memcpy_kernel
# ---------------------------------------------------------------------------------------------

cdef struct CopyArgs:
    IBuf src
    IBuf dst
    IBuf sizes


cdef void _copy_row(const void* p, Py_ssize_t i) noexcept nogil:
    cdef const CopyArgs* a = <const CopyArgs*>p
    cdef int64_t n = iget(a.sizes, i)
    if n > 0:
        memmove(<void*><size_t>iget(a.dst, i), <const void*><size_t>iget(a.src, i), <size_t>n)


cdef inline int _same_count(str name, Py_ssize_t have, Py_ssize_t n) except -1:
    """One element per region: as many as ``src_ptrs``."""
    if have != n:
        raise ValueError(expected(name, f"{n} elements (one per src_ptrs region)", have))
    return 0


cdef IBuf _address_buffer(object t, str name, Py_ssize_t* n) except *:
    """A 1-D contiguous CPU tensor of raw addresses: int64 or uint64 (vLLM allocates uint64)."""
    cdef IBuf b
    b.ptr = check_tensor(t, name, M_INT64 | M_UINT64, -1, NULL, n)
    b.wide = True                      # addresses are read as 64-bit patterns either way
    return b


cdef Py_ssize_t _copy_check(const CopyArgs* a, Py_ssize_t n, int64_t* total) noexcept nogil:
    """First region with a negative size or a null address for a non-empty copy, else -1."""
    cdef Py_ssize_t i
    cdef int64_t s
    total[0] = 0
    for i in range(n):
        s = iget(a.sizes, i)
        if s < 0 or (s > 0 and (iget(a.src, i) == 0 or iget(a.dst, i) == 0)):
            return i
        total[0] += s
    return -1


def batch_memcpy_kernel(src_ptrs, dst_ptrs, sizes, BLOCK_SIZE=None):
    """Copy ``sizes[i]`` bytes from address ``src_ptrs[i]`` to ``dst_ptrs[i]`` for every i.

    Each copy is a ``memmove`` (a region may overlap itself, as the Triton kernel allows); copies
    of different regions that overlap each other run in no defined order, as on the GPU. The
    addresses are the caller's promise -- they cannot be checked for ownership -- but sizes must
    be >= 0, the three tensors the same length, and non-empty copies need non-null addresses.
    """
    cdef CopyArgs a
    cdef Py_ssize_t n, n_dst, bad
    cdef Py_ssize_t shape[1]
    cdef int64_t total = 0
    a.src = _address_buffer(src_ptrs, "src_ptrs", &n)
    a.dst = _address_buffer(dst_ptrs, "dst_ptrs", &n_dst)
    _same_count("dst_ptrs", n_dst, n)
    a.sizes = check_index(sizes, "sizes", -1, shape)
    _same_count("sizes", shape[0], n)
    with nogil:
        bad = _copy_check(&a, n, &total)
    if bad >= 0:
        s = iget(a.sizes, bad)
        need_min(f"sizes[{bad}]", s, 0)
        raise ValueError(expected(f"{'src_ptrs' if iget(a.src, bad) == 0 else 'dst_ptrs'}[{bad}]",
                                  f"a non-null address for a copy of {s} bytes", 0))
    run_rows_for(_copy_row, &a, n, total >> 3)


# ---------------------------------------------------------------------------------------------
# scatter_states_kernel
# ---------------------------------------------------------------------------------------------
# The state-cache kernel of vLLM's mamba/KDA layers: ``scatter_states_kernel``.
#
# vLLM's ``_scatter_states_kernel`` (``model_executor/layers/mamba/ops/scatter_states.py``,
# used by the KDA layers of GLM-5-next) writes row ``b`` of ``src`` to row ``indices[b]`` of
# ``state``: program ``(blk, b)`` loads ``indices_ptr + b * stride_indices``, then copies
# ``row_size`` elements from ``src_ptr + b * stride_src_batch`` to ``state_ptr + index *
# stride_state_batch``. Rows are contiguous runs; their distances are the stride arguments.
#
# The CPU kernel reads and writes the same elements. A 2-D-or-more tensor is a table of its own
# rows (``shape[0]`` rows whose trailing dimensions are contiguous, the stride argument its
# ``stride(0)``); a 0-d/1-D one is a flat buffer of rows ``stride`` apart. Every index is checked
# against ``state``'s rows, and read once into a private array, before anything is written; a
# ``src`` that overlaps the state rows is read before any row is written (as ``state[indices] =
# src`` reads it). Rows of the same dtype are copied as bytes (any dtype); a ``src`` of another
# dtype is converted as Triton's ``tl.store`` converts, through torch's copy.

cdef object _Tensor = torch.Tensor
cdef object _i32 = torch.int32
cdef object _i64 = torch.int64


cdef struct RowView:
    char* ptr
    Py_ssize_t rows       # rows the launch may address (PY_SSIZE_T_MAX: stride 0)
    Py_ssize_t stride     # elements between rows (the stride argument)
    Py_ssize_t itemsize
    Py_ssize_t end_bytes  # bytes from ptr the addressable rows span


cdef object _tensor(object t, str name):
    if not isinstance(t, _Tensor):
        raise TypeError(expected(name, "a torch.Tensor", type(t).__name__))
    if not t.is_cpu:
        raise ValueError(expected(name, "a CPU tensor", f"device {t.device}"))
    return t


cdef int _row_view(object t, str name, int64_t row_size, int64_t stride, str stride_name,
                   RowView* v) except -1:
    """Rows of ``row_size`` contiguous elements ``stride`` apart from ``t``'s base pointer."""
    cdef Py_ssize_t n, e, i, want
    _tensor(t, name)
    need_min(stride_name, stride, 0)
    v.ptr = <char*><Py_ssize_t>t.data_ptr()
    v.itemsize = t.element_size()
    v.stride = stride
    if t.dim() >= 2:
        shape, strides = t.shape, t.stride()
        e = 1
        want = 1
        for i in range(t.dim() - 1, 0, -1):     # the trailing dimensions: one contiguous row
            if shape[i] != 1 and strides[i] != want:
                raise ValueError(expected(name, "rows with contiguous trailing dimensions",
                                          f"shape {tuple(shape)}, strides {tuple(strides)}"))
            want *= shape[i]
            e *= shape[i]
        if row_size > e:
            raise ValueError(expected("row_size", f"<= the elements of a {name} row = {e}",
                                      row_size))
        n = shape[0]
        if n > 1 and stride != strides[0]:
            raise ValueError(expected(stride_name, f"{name}.stride(0) = {strides[0]}", stride))
        v.rows = n if e > 0 else 0
    else:
        if not t.is_contiguous():
            raise ValueError(expected(name, "a contiguous tensor", "a non-contiguous one"))
        n = t.numel()
        if n < row_size:
            v.rows = 0
        elif stride == 0:
            v.rows = PY_SSIZE_T_MAX                 # every index addresses the first row
        else:
            v.rows = (n - row_size) // stride + 1
    if v.rows == 0:
        v.end_bytes = 0
    elif v.rows == PY_SSIZE_T_MAX:
        v.end_bytes = row_size * v.itemsize
    else:
        v.end_bytes = ((v.rows - 1) * stride + row_size) * v.itemsize
    return 0


cdef IBuf _indices(object t, int64_t stride, Py_ssize_t* n) except *:
    """``indices_ptr``: a 1-D int32/int64 tensor of any stride (``stride_indices`` its
    ``stride(0)``), or a contiguous one of any shape read flat with ``stride_indices == 1``."""
    cdef IBuf b
    _tensor(t, "indices_ptr")
    dt = t.dtype
    if dt is not _i32 and dt is not _i64:
        raise TypeError(expected("indices_ptr", "dtype int32 or int64", dt))
    need_min("stride_indices", stride, 0)
    b.ptr = <char*><Py_ssize_t>t.data_ptr()
    b.wide = dt is _i64
    if t.dim() == 1:
        n[0] = t.shape[0]
        if n[0] > 1 and stride != t.stride(0):
            raise ValueError(expected("stride_indices", f"indices_ptr.stride(0) = {t.stride(0)}",
                                      stride))
    else:
        if not t.is_contiguous():
            raise ValueError(expected("indices_ptr", "a contiguous tensor (or a 1-D one)",
                                      "a non-contiguous one"))
        n[0] = t.numel()
        if n[0] > 1 and stride != 1:
            raise ValueError(expected("stride_indices", "1 for a flat indices_ptr", stride))
    return b


cdef struct ScatterArgs:
    char* dst
    const char* src
    const int64_t* index
    Py_ssize_t dst_stride   # bytes
    Py_ssize_t src_stride   # bytes
    Py_ssize_t row_bytes


cdef void _scatter(const ScatterArgs* a, Py_ssize_t n, int nt) noexcept nogil:
    cdef Py_ssize_t b
    if nt <= 1:
        for b in range(n):
            memcpy(a.dst + a.index[b] * a.dst_stride, a.src + b * a.src_stride, a.row_bytes)
    else:
        for b in prange(n, nogil=True, num_threads=nt, schedule="static"):
            memcpy(a.dst + a.index[b] * a.dst_stride, a.src + b * a.src_stride, a.row_bytes)


def scatter_states_kernel(state_ptr, src_ptr, indices_ptr, stride_state_batch, stride_src_batch,
                          stride_indices, row_size, BLOCK_SIZE=None, launch_pdl=None):
    """``state[indices[b]] = src[b]`` for every ``b``: ``row_size`` elements per row, in place.

    One row per ``indices_ptr`` element (the Triton grid's second dimension); ``src_ptr`` needs
    that many rows, and every index must address a row of ``state_ptr`` (0 <= index < its
    rows). ``row_size`` 0 launches no program: nothing is read or written. Duplicate indices
    write one of their rows (the Triton kernel's programs race; vLLM's slots are unique).
    ``BLOCK_SIZE`` and ``launch_pdl`` (a CUDA launch-order hint) do not change the result.
    """
    cdef int64_t rs = as_int(row_size, "row_size")
    cdef int64_t s_state = as_int(stride_state_batch, "stride_state_batch")
    cdef int64_t s_src = as_int(stride_src_batch, "stride_src_batch")
    cdef int64_t s_idx = as_int(stride_indices, "stride_indices")
    cdef RowView dst, src
    cdef Py_ssize_t n, b
    cdef int64_t k
    cdef int nt
    cdef ScatterArgs a
    need_min("row_size", rs, 0)
    cdef IBuf idx = _indices(indices_ptr, s_idx, &n)
    if rs == 0 or n == 0:               # the grid has no program: nothing is read or written
        _tensor(state_ptr, "state_ptr")
        _tensor(src_ptr, "src_ptr")
        need_min("stride_state_batch", s_state, 0)
        need_min("stride_src_batch", s_src, 0)
        return
    _row_view(state_ptr, "state_ptr", rs, s_state, "stride_state_batch", &dst)
    _row_view(src_ptr, "src_ptr", rs, s_src, "stride_src_batch", &src)
    if src.rows < n:
        raise ValueError(expected("src_ptr", f"at least {n} rows of row_size = {rs} "
                                  "(one per indices_ptr element)", f"shape {tuple(src_ptr.shape)}"))
    cdef int64_t* index = <int64_t*>malloc(n * sizeof(int64_t))
    if index == NULL:
        raise MemoryError()
    try:
        for b in range(n):
            k = iget(idx, b * s_idx)
            if dst.rows == PY_SSIZE_T_MAX:      # stride 0: every index addresses row 0
                k = 0
            elif k < 0 or k >= dst.rows:
                raise IndexError(expected(f"indices_ptr[{b}]",
                                          f"a row of state_ptr in [0, {dst.rows})", k))
            index[b] = k
        if state_ptr.dtype != src_ptr.dtype:
            _converting_scatter(state_ptr, src_ptr, index, n, rs, s_state, s_src, dst.rows)
            return
        a.dst = dst.ptr
        a.src = src.ptr
        a.index = index
        a.dst_stride = s_state * dst.itemsize
        a.src_stride = s_src * src.itemsize
        a.row_bytes = rs * dst.itemsize
        held = None
        if src.ptr < dst.ptr + dst.end_bytes and dst.ptr < src.ptr + src.end_bytes:
            # src overlaps the rows that may be written: read all of it first
            held = torch.as_strided(src_ptr, (n, rs), (s_src, 1)).clone()
            a.src = <const char*><Py_ssize_t>held.data_ptr()
            a.src_stride = a.row_bytes
        nt = threads_for(n * rs * dst.itemsize >> 3)
        with nogil:
            _scatter(&a, n, nt)
    finally:
        free(index)


cdef int _converting_scatter(object state, object src, const int64_t* index, Py_ssize_t n,
                             int64_t rs, int64_t s_state, int64_t s_src,
                             Py_ssize_t rows) except -1:
    """Rows of another dtype: converted as ``tl.store`` converts (torch's ``copy_``)."""
    cdef Py_ssize_t b
    rows_read = torch.as_strided(src, (n, rs), (s_src, 1)).to(state.dtype)
    for b in range(n):
        torch.as_strided(state, (rs,), (1,), state.storage_offset() + index[b] * s_state).copy_(
            rows_read[b])
    return 0
