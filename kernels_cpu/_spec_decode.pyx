# cython: language_level=3
"""CPU versions of vLLM's speculative-decoding Triton kernels (``vllm/v1/spec_decode/utils.py``).

Each public function takes the Triton kernel's arguments, in its order and under its names, and
computes what the kernel's whole launch grid computes. Index buffers are int32 or int64 each on
its own, read and written in place (outputs keep the caller's dtype); masks are bool.

Every function runs in three steps:

1. metadata checks (types, dtypes, devices, lengths, scalars) -- Python-level, no tensor ops;
2. a ``nogil`` pass over the *values* that decide where the kernel reads or writes (offsets,
   positions looked up in block tables) -- a bad value raises before anything is written;
3. the ``nogil`` compute pass, one request per iteration, across an OpenMP team when the launch
   is large enough (``threads_for``), serially otherwise.

The GPU kernels trust their inputs and read out of bounds (or write through a stray index) when
those are wrong; here every such input raises ``ValueError``/``IndexError``/``TypeError`` naming
the argument, and the outputs are left untouched.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT64_MAX

from fastdispatch._capi cimport PY_SSIZE_T_MAX

from kernels_cpu._buffers cimport IBuf, iget, iset, check_index
from kernels_cpu._checks cimport (
    OFFSETS_ORDER, OFFSETS_TOTAL, as_flag, as_int, bool_at_least, bounded_offsets, expected,
    first_decrease, index_at_least, need_count, need_min, need_table_rows, need_within,
    offsets_error, order_error,
)
from kernels_cpu._tables cimport Rows, check_rows, pow2_shift, run_rows_for


cdef inline int64_t _wrap_inc(int64_t v, bint wide) noexcept nogil:
    """``v + 1`` in the buffer's own width with two's-complement wrap (as the GPU computes it)."""
    if wide:
        return <int64_t>(<uint64_t>v + 1u)
    return <int32_t>(<uint32_t>v + 1u)


cdef Py_ssize_t _length(object n):
    """A required buffer length computed in Python ints (no overflow from absurd scalars);
    anything beyond Py_ssize_t is clamped, which no tensor can satisfy, so the length check
    that follows names the buffer."""
    return n if n < PY_SSIZE_T_MAX else PY_SSIZE_T_MAX


# Token positions are ``[num_tokens]``, or ``[3, num_tokens]`` under M-RoPE: the Triton kernels
# index the flat buffer with token indices < num_tokens, which in a contiguous ``[3, N]`` tensor
# is row 0 (the temporal positions) -- the same is read here: any contiguous buffer whose first
# num_tokens elements are the positions.


# ---------------------------------------------------------------------------------------------
# eagle_step_slot_mapping_metadata_kernel
# ---------------------------------------------------------------------------------------------

cdef struct StepArgs:
    IBuf pos
    IBuf seq
    IBuf out_pos
    IBuf out_slot
    Rows bt
    int64_t block_size
    int64_t max_model_len
    int64_t n_blocks
    int64_t pad
    Py_ssize_t batch


cdef void _step_row(const void* p, Py_ssize_t r) noexcept nogil:
    cdef const StepArgs* a = <const StepArgs*>p
    cdef int64_t pos, c, bn, slot, ns
    cdef bint exceeds
    if r >= a.batch:                      # cudagraph padding slot
        iset(a.out_slot, r, a.pad)
        return
    pos = iget(a.pos, r)
    exceeds = pos >= a.max_model_len - 1   # == (pos + 1 >= max_model_len), without overflow
    c = 0 if exceeds else pos + 1
    if exceeds:
        slot = a.pad
        ns = 1
    else:
        bn = c // a.block_size
        if bn > a.n_blocks - 1:
            bn = a.n_blocks - 1
        slot = iget(a.bt.buf, r * a.bt.stride + bn) * a.block_size + c % a.block_size
        ns = _wrap_inc(iget(a.seq, r), a.seq.wide)
    if ns > a.max_model_len:
        ns = a.max_model_len
    iset(a.out_pos, r, c)
    iset(a.out_slot, r, slot)
    iset(a.seq, r, ns)


def eagle_step_slot_mapping_metadata_kernel(
    positions_ptr, block_table_ptr, block_table_stride, seq_lens_ptr, out_clamped_positions_ptr,
    out_slot_mapping_ptr, block_size, max_model_len, n_blocks_per_req, PAD_ID, batch_size,
):
    """One EAGLE drafting step: advance positions, look up slots, bump ``seq_lens`` in place.

    The launch grid is ``out_slot_mapping_ptr.numel()`` (vLLM's ``input_batch_size``): rows past
    ``batch_size`` are cudagraph padding and only get ``PAD_ID``. A position whose next
    position reaches ``max_model_len`` is clamped to 0, gets slot ``PAD_ID`` and seq_len 1.
    Positions below -1 would look up a negative block: IndexError.
    """
    cdef StepArgs a
    cdef Py_ssize_t grid, r, n_out
    cdef Py_ssize_t shape[1]
    a.batch = as_int(batch_size, "batch_size")
    need_min("batch_size", a.batch, 0)
    a.block_size = as_int(block_size, "block_size")
    need_min("block_size", a.block_size, 1)
    a.max_model_len = as_int(max_model_len, "max_model_len")
    need_min("max_model_len", a.max_model_len, 1)
    a.n_blocks = as_int(n_blocks_per_req, "n_blocks_per_req")
    a.pad = as_int(PAD_ID, "PAD_ID")
    a.pos = index_at_least(positions_ptr, "positions_ptr", a.batch)
    a.bt = check_rows(block_table_ptr, "block_table_ptr", block_table_stride, "block_table_stride")
    a.seq = index_at_least(seq_lens_ptr, "seq_lens_ptr", a.batch)
    a.out_pos = index_at_least(out_clamped_positions_ptr, "out_clamped_positions_ptr", a.batch)
    a.out_slot = check_index(out_slot_mapping_ptr, "out_slot_mapping_ptr", -1, shape)
    grid = shape[0]
    need_count("out_slot_mapping_ptr", grid, a.batch, "batch_size")
    if a.batch > 0:
        need_table_rows("block_table_ptr", a.bt.rows, a.batch, "batch_size")
        need_within("n_blocks_per_req", a.n_blocks, 1, a.bt.cols, "block_table_ptr.shape[1]")
    with nogil:
        r = _step_check(&a)
    if r >= 0:
        raise IndexError(expected(f"positions_ptr[{r}]", f"a position >= -1 (its next position "
                                  f"indexes block table row {r})", iget(a.pos, r)))
    run_rows_for(_step_row, &a, grid, grid * 8)


cdef Py_ssize_t _step_check(const StepArgs* a) noexcept nogil:
    cdef Py_ssize_t r
    cdef int64_t pos
    for r in range(a.batch):
        pos = iget(a.pos, r)
        if pos < -1 and pos < a.max_model_len - 1:
            return r
    return -1


# ---------------------------------------------------------------------------------------------
# eagle_prepare_inputs_padded_kernel
# ---------------------------------------------------------------------------------------------

cdef struct PrepArgs:
    IBuf cu
    IBuf valid
    IBuf qsl
    IBuf out_idx
    IBuf out_rej


cdef void _prep_row(const void* p, Py_ssize_t r) noexcept nogil:
    cdef const PrepArgs* a = <const PrepArgs*>p
    cdef int64_t nd = iget(a.cu, r)
    cdef int64_t rej = 0
    if r > 0:
        nd -= iget(a.cu, r - 1)
    if nd > 0:
        rej = nd + 1 - iget(a.valid, r)
    iset(a.out_idx, r, iget(a.qsl, r + 1) - 1 - rej)
    iset(a.out_rej, r, rej)


def eagle_prepare_inputs_padded_kernel(
    cu_num_draft_tokens_ptr, valid_sampled_tokens_count_ptr, query_start_loc_gpu_ptr,
    token_indices_to_sample_ptr, num_rejected_tokens_gpu_ptr, num_reqs,
):
    """Per request: rejected drafts = drafts + 1 - valid sampled tokens (0 without drafts), and
    the token to sample from = the request's last query token minus the rejected ones.

    ``cu_num_draft_tokens_ptr`` is an inclusive cumulative sum and ``query_start_loc_gpu_ptr`` an
    offset array: both must be non-negative and non-decreasing (ValueError otherwise).
    """
    cdef PrepArgs a
    cdef Py_ssize_t n = as_int(num_reqs, "num_reqs")
    cdef Py_ssize_t bad_cu, bad_q
    need_min("num_reqs", n, 0)
    a.cu = index_at_least(cu_num_draft_tokens_ptr, "cu_num_draft_tokens_ptr", n)
    a.valid = index_at_least(valid_sampled_tokens_count_ptr, "valid_sampled_tokens_count_ptr",
                             n)
    a.qsl = index_at_least(query_start_loc_gpu_ptr, "query_start_loc_gpu_ptr", n + 1)
    a.out_idx = index_at_least(token_indices_to_sample_ptr, "token_indices_to_sample_ptr", n)
    a.out_rej = index_at_least(num_rejected_tokens_gpu_ptr, "num_rejected_tokens_gpu_ptr", n)
    with nogil:
        bad_cu = first_decrease(a.cu, n)
        bad_q = first_decrease(a.qsl, n + 1)
    if bad_cu >= 0:
        order_error("cu_num_draft_tokens_ptr", a.cu, bad_cu)
    if bad_q >= 0:
        order_error("query_start_loc_gpu_ptr", a.qsl, bad_q)
    run_rows_for(_prep_row, &a, n, n * 4)


# ---------------------------------------------------------------------------------------------
# eagle_prepare_next_token_padded_kernel
# ---------------------------------------------------------------------------------------------

cdef struct NextArgs:
    Rows sampled
    const uint8_t* discard
    IBuf backup
    IBuf out_next
    IBuf out_valid
    int64_t vocab
    Py_ssize_t width


cdef void _next_row(const void* p, Py_ssize_t r) noexcept nogil:
    cdef const NextArgs* a = <const NextArgs*>p
    cdef Py_ssize_t j, base
    cdef int64_t t, count = 0, last = 0
    if a.discard[r]:
        iset(a.out_next, r, iget(a.backup, r))
        iset(a.out_valid, r, 0)
        return
    base = r * a.sampled.stride
    for j in range(a.width):
        t = iget(a.sampled.buf, base + j)
        if t != -1 and t < a.vocab:     # -1 marks a rejected slot; any other id below V counts
            count += 1
            last = t
    iset(a.out_next, r, last if count > 0 else iget(a.backup, r))
    iset(a.out_valid, r, count)


def eagle_prepare_next_token_padded_kernel(
    sampled_token_ids_ptr, discard_request_mask_ptr, backup_next_token_ids_ptr,
    next_token_ids_ptr, valid_sampled_tokens_count_ptr, vocab_size, num_sampled_tokens_per_req,
    num_reqs, stride_sampled_token_ids, BLOCK_SIZE_TOKENS=None,
):
    """Per request: count sampled tokens that are valid (``!= -1`` and ``< vocab_size``) and
    take the last valid one as the next token; the backup token when none is valid or the
    request is discarded (then the count is 0).

    ``sampled_token_ids_ptr`` is 2-D with rows ``stride_sampled_token_ids`` apart (row-strided
    views are fine); ``BLOCK_SIZE_TOKENS``, when given, must cover ``num_sampled_tokens_per_req``
    as the Triton launch requires.
    """
    cdef NextArgs a
    cdef Py_ssize_t n = as_int(num_reqs, "num_reqs")
    need_min("num_reqs", n, 0)
    a.width = as_int(num_sampled_tokens_per_req, "num_sampled_tokens_per_req")
    a.vocab = as_int(vocab_size, "vocab_size")
    a.sampled = check_rows(sampled_token_ids_ptr, "sampled_token_ids_ptr",
                           stride_sampled_token_ids, "stride_sampled_token_ids")
    if n > 0:
        need_within("num_sampled_tokens_per_req", a.width, 0, a.sampled.cols,
                    "sampled_token_ids_ptr.shape[1]")
    else:
        need_min("num_sampled_tokens_per_req", a.width, 0)
    need_table_rows("sampled_token_ids_ptr", a.sampled.rows, n, "num_reqs")
    if BLOCK_SIZE_TOKENS is not None:
        need_min("BLOCK_SIZE_TOKENS", as_int(BLOCK_SIZE_TOKENS, "BLOCK_SIZE_TOKENS"), a.width,
                 "num_sampled_tokens_per_req")
    a.discard = <const uint8_t*>bool_at_least(discard_request_mask_ptr,
                                              "discard_request_mask_ptr", n)
    a.backup = index_at_least(backup_next_token_ids_ptr, "backup_next_token_ids_ptr", n)
    a.out_next = index_at_least(next_token_ids_ptr, "next_token_ids_ptr", n)
    a.out_valid = index_at_least(valid_sampled_tokens_count_ptr,
                                 "valid_sampled_tokens_count_ptr", n)
    run_rows_for(_next_row, &a, n, n * (a.width + 2))


# ---------------------------------------------------------------------------------------------
# copy_and_expand_eagle_inputs_kernel
# ---------------------------------------------------------------------------------------------

cdef struct EagleArgs:
    IBuf tok
    IBuf tpos
    IBuf next
    IBuf out_ids
    IBuf out_pos
    uint8_t* out_rej
    uint8_t* out_masked
    IBuf out_new
    IBuf out_map
    IBuf qsl
    IBuf qel
    int64_t pad_id
    int64_t par_id
    int64_t total_in
    int64_t P
    bint shift


cdef inline void _eagle_layout(const EagleArgs* a, Py_ssize_t r, int64_t* qs, int64_t* nqs,
                               int64_t* nvalid, int64_t* start, int64_t* total) noexcept nogil:
    """Request r's output layout: [valid copies | bonus | parallel drafts | rejected slots]."""
    cdef int64_t qe = iget(a.qel, r)
    qs[0] = iget(a.qsl, r)
    nqs[0] = iget(a.qsl, r + 1)
    if a.shift:        # the first input token is dropped: one slot fewer per request
        nvalid[0] = qe - qs[0]
        start[0] = qs[0] + r * (a.P - 1)
    else:
        nvalid[0] = qe - qs[0] + 1
        start[0] = qs[0] + r * a.P
    total[0] = nvalid[0] + a.P + (nqs[0] - qe - 1)


cdef void _eagle_row(const void* p, Py_ssize_t r) noexcept nogil:
    cdef const EagleArgs* a = <const EagleArgs*>p
    cdef int64_t qs, nqs, nvalid, start, total, j, o, src, tok, pos, start_pos = 0, bonus = 0
    cdef int64_t P = a.P, off = 1 if a.shift else 0
    cdef uint8_t rej, masked
    _eagle_layout(a, r, &qs, &nqs, &nvalid, &start, &total)
    if total > 0:
        start_pos = iget(a.tpos, qs)
        bonus = iget(a.next, r)
    for j in range(total):
        o = start + j
        rej = 0
        masked = 0
        pos = <int64_t>(<uint64_t>start_pos + <uint64_t>j)   # wraps like the GPU's int64
        if j >= nvalid + P:             # rejected slot (wins over every other region)
            tok = a.pad_id
            pos = 0
            rej = 1
        elif j > nvalid:                # parallel-drafting slot
            tok = a.par_id
            masked = 1
        elif j == nvalid:               # bonus token
            tok = bonus
        else:                           # copied input token
            src = qs + off + j
            if src > a.total_in - 1:
                src = a.total_in - 1
            tok = iget(a.tok, src)
        iset(a.out_ids, o, tok)
        iset(a.out_pos, o, pos)
        a.out_rej[o] = rej
        a.out_masked[o] = masked
        if j >= nvalid and j < nvalid + P:
            iset(a.out_new, r * P + (j - nvalid), o)
    if a.shift:                         # hidden states are not shifted: map every input token
        for j in range(nqs - qs):
            iset(a.out_map, qs + j, start + j)


cdef enum EagleBad:
    EB_OK = 0
    EB_QSL_ORDER = OFFSETS_ORDER
    EB_QSL_TOTAL = OFFSETS_TOTAL
    EB_QEL
    EB_EMPTY
    EB_NEG_OUT


cdef int _eagle_check(const EagleArgs* a, Py_ssize_t R, Py_ssize_t* at,
                      int64_t* max_end) noexcept nogil:
    cdef Py_ssize_t r
    cdef int64_t qs, nqs, qe, nvalid, start, total
    cdef int bad = bounded_offsets(a.qsl, R + 1, a.total_in, at)
    if bad:
        return bad
    max_end[0] = 0
    for r in range(R):
        qe = iget(a.qel, r)
        qs = iget(a.qsl, r)
        at[0] = r
        if qe < qs - 1 or qe > iget(a.qsl, r + 1) - 1:
            return EB_QEL
        _eagle_layout(a, r, &qs, &nqs, &nvalid, &start, &total)
        if total > 0:
            if qs >= a.total_in:        # no input token to take the start position from
                return EB_EMPTY
            if start < 0:
                return EB_NEG_OUT
            if start + total > max_end[0]:
                max_end[0] = start + total
    return EB_OK


def copy_and_expand_eagle_inputs_kernel(
    target_token_ids_ptr, target_positions_ptr, next_token_ids_ptr, out_input_ids_ptr,
    out_positions_ptr, out_is_rejected_token_mask_ptr, out_is_masked_token_mask_ptr,
    out_new_token_indices_ptr, out_hidden_state_mapping_ptr, query_start_loc_ptr,
    query_end_loc_ptr, padding_token_id, parallel_drafting_token_id, total_input_tokens,
    num_padding_slots_per_request, shift_input_ids, BLOCK_SIZE_TOKENS=None,
):
    """Lay out the drafter's inputs per request: the target's tokens (shifted by one when
    ``shift_input_ids``), the bonus token, ``num_padding_slots_per_request - 1`` parallel-drafting
    slots and one padding slot per rejected token; positions continue from the request's first
    input position (0 for rejected slots); masks flag rejected and parallel-drafting slots;
    ``out_new_token_indices_ptr`` receives the output index of each bonus/parallel slot and, when
    shifting, ``out_hidden_state_mapping_ptr`` maps every input token to its output slot.

    ``target_positions_ptr`` may be ``[3, N]`` (M-RoPE): row 0 is read, as the kernel reads it.
    The number of requests is ``query_end_loc_ptr.numel()`` (the launch grid's rows); the whole
    of each request is processed, so ``BLOCK_SIZE_TOKENS`` is not needed. Offsets must be
    non-decreasing with ``query_start_loc_ptr[R] <= total_input_tokens`` and each request's end in
    ``[start - 1, next start - 1]``; outputs must be long enough for every slot written.
    """
    cdef EagleArgs a
    cdef Py_ssize_t R, at = 0, n_ids, n_pos, n_rej, n_mask, n_new, n_map, need_new
    cdef Py_ssize_t shape[1]
    cdef int64_t max_end = 0, qsl_end = 0
    cdef int bad
    a.shift = as_flag(shift_input_ids, "shift_input_ids", False)
    a.pad_id = as_int(padding_token_id, "padding_token_id")
    a.par_id = as_int(parallel_drafting_token_id, "parallel_drafting_token_id")
    a.total_in = as_int(total_input_tokens, "total_input_tokens")
    a.P = as_int(num_padding_slots_per_request, "num_padding_slots_per_request")
    need_min("total_input_tokens", a.total_in, 0)
    need_min("num_padding_slots_per_request", a.P, 0)
    a.qel = check_index(query_end_loc_ptr, "query_end_loc_ptr", -1, shape)
    R = shape[0]
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", R + 1)
    a.tok = index_at_least(target_token_ids_ptr, "target_token_ids_ptr", a.total_in)
    a.tpos = index_at_least(target_positions_ptr, "target_positions_ptr", a.total_in)
    a.next = index_at_least(next_token_ids_ptr, "next_token_ids_ptr", R)
    a.out_ids = check_index(out_input_ids_ptr, "out_input_ids_ptr", -1, shape)
    n_ids = shape[0]
    a.out_pos = check_index(out_positions_ptr, "out_positions_ptr", -1, shape)
    n_pos = shape[0]
    a.out_rej = <uint8_t*>bool_at_least(out_is_rejected_token_mask_ptr,
                                        "out_is_rejected_token_mask_ptr", 0, None, &n_rej)
    a.out_masked = <uint8_t*>bool_at_least(out_is_masked_token_mask_ptr,
                                           "out_is_masked_token_mask_ptr", 0, None, &n_mask)
    need_new = _length(<object>R * a.P)
    a.out_new = index_at_least(out_new_token_indices_ptr, "out_new_token_indices_ptr", need_new)
    if a.shift or out_hidden_state_mapping_ptr is not None:
        a.out_map = check_index(out_hidden_state_mapping_ptr, "out_hidden_state_mapping_ptr", -1,
                                shape)
        n_map = shape[0]
    else:
        a.out_map = a.out_new           # never written without shift
        n_map = 0
    with nogil:
        bad = _eagle_check(&a, R, &at, &max_end)
    offsets_error(bad, "query_start_loc_ptr", a.qsl, at, "total_input_tokens", a.total_in)
    if bad == EB_QEL:
        raise ValueError(expected(f"query_end_loc_ptr[{at}]", f"a value in "
                                  f"[query_start_loc_ptr[{at}] - 1, query_start_loc_ptr[{at + 1}]"
                                  f" - 1]", iget(a.qel, at)))
    if bad == EB_EMPTY:
        raise IndexError(expected("query_start_loc_ptr", f"an input token to take request {at}'s "
                                  f"start position from (it has output slots)", "none"))
    if bad == EB_NEG_OUT:
        raise IndexError(expected("out_input_ids_ptr", f"non-negative output indices "
                                  f"(num_padding_slots_per_request = {a.P} with shift_input_ids)",
                                  f"a negative one for request {at}"))
    for name, n in (("out_input_ids_ptr", n_ids), ("out_positions_ptr", n_pos),
                    ("out_is_rejected_token_mask_ptr", n_rej),
                    ("out_is_masked_token_mask_ptr", n_mask)):
        need_count(name, n, max_end)
    if a.shift and R > 0:
        qsl_end = iget(a.qsl, R)
        need_count("out_hidden_state_mapping_ptr", n_map, qsl_end)
    run_rows_for(_eagle_row, &a, R, max_end + R)


# ---------------------------------------------------------------------------------------------
# copy_and_expand_dflash_inputs_kernel
# ---------------------------------------------------------------------------------------------

cdef struct DflashArgs:
    IBuf next
    IBuf tpos
    IBuf out_ids
    IBuf out_ctx_pos
    IBuf out_q_pos
    IBuf out_ctx_slot
    IBuf out_q_slot
    IBuf out_tok_idx
    Rows bt
    IBuf qsl
    IBuf rej
    bint has_rej
    int64_t par_id
    int64_t block_size
    int64_t Q
    int64_t S
    int64_t total_in
    int bs_shift           # log2(block_size) when it is a power of two, else -1


cdef inline int64_t _dflash_block(const DflashArgs* a, int64_t pos) noexcept nogil:
    """Block-table column for ``pos`` (>= 0), clamped to the row stride as the kernel does."""
    cdef int64_t bn
    if a.bs_shift >= 0:
        bn = pos >> a.bs_shift
    else:
        bn = pos // a.block_size
    if bn > a.bt.stride - 1:
        bn = a.bt.stride - 1
    return bn


cdef inline int64_t _dflash_slot(const DflashArgs* a, Py_ssize_t r, int64_t pos) noexcept nogil:
    cdef int64_t off = (pos & (a.block_size - 1)) if a.bs_shift >= 0 else pos % a.block_size
    return iget(a.bt.buf, r * a.bt.stride + _dflash_block(a, pos)) * a.block_size + off


cdef inline int64_t _dflash_last(const DflashArgs* a, Py_ssize_t r) noexcept nogil:
    """Index of the last accepted context token of request r."""
    cdef int64_t end = iget(a.qsl, r + 1)
    if a.has_rej:
        end -= iget(a.rej, r)
    return end - 1


cdef void _dflash_row(const void* p, Py_ssize_t r) noexcept nogil:
    cdef const DflashArgs* a = <const DflashArgs*>p
    cdef int64_t cs = iget(a.qsl, r), ce = iget(a.qsl, r + 1), i, q, pos, o, last_pos, bonus
    for i in range(cs, ce):             # context tokens: positions copied, slots looked up
        pos = iget(a.tpos, i)
        iset(a.out_ctx_pos, i, pos)
        iset(a.out_ctx_slot, i, _dflash_slot(a, r, pos))
    if a.Q <= 0:
        return
    last_pos = iget(a.tpos, _dflash_last(a, r))
    bonus = iget(a.next, r)
    for q in range(a.Q):                # query tokens: [bonus, mask, mask, ...]
        pos = last_pos + 1 + q
        o = r * a.Q + q
        iset(a.out_q_pos, o, pos)
        iset(a.out_q_slot, o, _dflash_slot(a, r, pos))
        if q == 0:
            iset(a.out_ids, o, bonus)
        else:
            iset(a.out_ids, o, a.par_id)
            iset(a.out_tok_idx, r * a.S + q - 1, o)


cdef enum DflashBad:
    DB_OK = 0
    DB_QSL_ORDER = OFFSETS_ORDER
    DB_QSL_TOTAL = OFFSETS_TOTAL
    DB_LAST
    DB_NEG_POS
    DB_BLOCK


cdef int _dflash_check(const DflashArgs* a, Py_ssize_t R, Py_ssize_t* at,
                       int64_t* val) noexcept nogil:
    cdef Py_ssize_t r
    cdef int64_t i, pos, last, last_pos
    cdef int bad = bounded_offsets(a.qsl, R + 1, a.total_in, at)
    if bad:
        return bad
    for r in range(R):
        for i in range(iget(a.qsl, r), iget(a.qsl, r + 1)):
            pos = iget(a.tpos, i)
            at[0] = i
            val[0] = pos
            if pos < 0:
                return DB_NEG_POS
            # the clamp to stride - 1 keeps a contiguous row in range; a wider stride may not
            if a.bt.stride > a.bt.cols and _dflash_block(a, pos) >= a.bt.cols:
                at[0] = r
                return DB_BLOCK
        if a.Q <= 0:
            continue
        last = _dflash_last(a, r)
        at[0] = r
        val[0] = last
        if last < 0 or last >= a.total_in:
            return DB_LAST
        last_pos = iget(a.tpos, last)
        at[0] = last
        val[0] = last_pos
        if last_pos < -1 or last_pos > INT64_MAX - a.Q:
            return DB_NEG_POS
        val[0] = last_pos + a.Q     # the largest query position
        if _dflash_block(a, last_pos + a.Q) >= a.bt.cols:
            at[0] = r
            return DB_BLOCK
    return DB_OK


def copy_and_expand_dflash_inputs_kernel(
    next_token_ids_ptr, target_positions_ptr, out_input_ids_ptr, out_context_positions_ptr,
    out_query_positions_ptr, out_context_slot_mapping_ptr, out_query_slot_mapping_ptr,
    out_token_indices_ptr, block_table_ptr, block_table_stride, query_start_loc_ptr,
    num_rejected_tokens_ptr, parallel_drafting_token_id, block_size, num_query_per_req,
    num_speculative_tokens, total_input_tokens, BLOCK_SIZE=None, HAS_NUM_REJECTED=False,
):
    """DFlash first-pass inputs per request: context positions and slots copied/looked up,
    ``num_query_per_req`` query tokens ``[bonus, mask...]`` at positions after the last accepted
    context token (``num_rejected_tokens_ptr`` discounts rejected ones when
    ``HAS_NUM_REJECTED``), their slots, and the sample indices of the mask tokens.

    The number of requests is ``query_start_loc_ptr.numel() - 1`` (the launch grid's rows).
    ``target_positions_ptr`` may be ``[3, N]`` (M-RoPE): row 0 is read, as the kernel reads it.
    ``num_rejected_tokens_ptr`` may be ``0``/``None`` unless ``HAS_NUM_REJECTED``. Block lookups
    clamp the block index to ``block_table_stride - 1`` as the kernel does; an index beyond the
    table's columns, a negative position or a last-accepted index outside
    ``[0, total_input_tokens)`` raises IndexError.
    """
    cdef DflashArgs a
    cdef Py_ssize_t R, at = 0, n
    cdef Py_ssize_t shape[1]
    cdef int64_t val = 0, ctx_total
    cdef int bad
    a.has_rej = as_flag(HAS_NUM_REJECTED, "HAS_NUM_REJECTED", False)
    a.par_id = as_int(parallel_drafting_token_id, "parallel_drafting_token_id")
    a.block_size = as_int(block_size, "block_size")
    a.Q = as_int(num_query_per_req, "num_query_per_req")
    a.S = as_int(num_speculative_tokens, "num_speculative_tokens")
    a.total_in = as_int(total_input_tokens, "total_input_tokens")
    need_min("block_size", a.block_size, 1)
    need_min("num_query_per_req", a.Q, 0)
    need_min("num_speculative_tokens", a.S, max(a.Q - 1, 0), "max(num_query_per_req - 1, 0)")
    need_min("total_input_tokens", a.total_in, 0)
    a.qsl = check_index(query_start_loc_ptr, "query_start_loc_ptr", -1, shape)
    need_count("query_start_loc_ptr", shape[0], 1, "num_reqs + 1")
    R = shape[0] - 1
    a.next = index_at_least(next_token_ids_ptr, "next_token_ids_ptr", R)
    a.tpos = index_at_least(target_positions_ptr, "target_positions_ptr", a.total_in)
    a.bt = check_rows(block_table_ptr, "block_table_ptr", block_table_stride, "block_table_stride")
    if R > 0:
        need_table_rows("block_table_ptr", a.bt.rows, R, "num_reqs")
    need_min("block_table_stride", a.bt.stride, 1)
    if a.has_rej:
        if num_rejected_tokens_ptr is None or isinstance(num_rejected_tokens_ptr, int):
            raise TypeError(expected("num_rejected_tokens_ptr", "a tensor when HAS_NUM_REJECTED",
                                     type(num_rejected_tokens_ptr).__name__))
        a.rej = index_at_least(num_rejected_tokens_ptr, "num_rejected_tokens_ptr", R)
    else:
        a.rej = a.next
    n = _length(<object>R * a.Q)
    a.out_ids = index_at_least(out_input_ids_ptr, "out_input_ids_ptr", n)
    a.out_q_pos = index_at_least(out_query_positions_ptr, "out_query_positions_ptr", n)
    a.out_q_slot = index_at_least(out_query_slot_mapping_ptr, "out_query_slot_mapping_ptr", n)
    n = _length((<object>R - 1) * a.S + a.Q - 1) if R > 0 and a.Q > 1 else 0
    a.out_tok_idx = index_at_least(out_token_indices_ptr, "out_token_indices_ptr", n)
    a.out_ctx_pos = index_at_least(out_context_positions_ptr, "out_context_positions_ptr", 0)
    a.out_ctx_slot = index_at_least(out_context_slot_mapping_ptr,
                                    "out_context_slot_mapping_ptr", 0)
    a.bs_shift = pow2_shift(a.block_size)
    with nogil:
        bad = _dflash_check(&a, R, &at, &val)
    offsets_error(bad, "query_start_loc_ptr", a.qsl, at, "total_input_tokens", a.total_in)
    if bad == DB_NEG_POS:
        raise IndexError(expected(f"target_positions_ptr[{at}]", "a position that gives "
                                  "non-negative query positions without overflow",
                                  iget(a.tpos, at)))
    if bad == DB_BLOCK:
        raise IndexError(expected("block_table_ptr", f"a column for block {val // a.block_size} "
                                  f"(position {val} of request {at})",
                                  f"{a.bt.cols} columns"))
    if bad == DB_LAST:
        raise IndexError(expected(
            "num_rejected_tokens_ptr" if a.has_rej else "query_start_loc_ptr",
            f"request {at}'s last accepted context token index in "
            f"[0, total_input_tokens = {a.total_in})", val))
    ctx_total = iget(a.qsl, R)
    for name, t in (("out_context_positions_ptr", out_context_positions_ptr),
                    ("out_context_slot_mapping_ptr", out_context_slot_mapping_ptr)):
        need_count(name, t.numel(), ctx_total)
    run_rows_for(_dflash_row, &a, R, ctx_total + R * a.Q)
