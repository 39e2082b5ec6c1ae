"""Triton kernels for EAGLE / DFlash speculative-decoding input preparation.

Same names, argument names and argument order as vLLM's kernels (``vllm/v1/spec_decode/
utils.py``); behaviour per ``docs/kernel_contracts.md``. Block-table slot arithmetic is done in
int64 so an int32 block id times the block size cannot wrap.
"""

from .._triton import tl, triton


@triton.jit
def eagle_step_slot_mapping_metadata_kernel(
    positions_ptr,  # [batch_size] current positions
    block_table_ptr,  # [batch_size, n_blocks_per_req]
    block_table_stride,  # elements between block-table rows
    seq_lens_ptr,  # [batch_size], updated in place
    out_clamped_positions_ptr,  # [batch_size] (output)
    out_slot_mapping_ptr,  # [input_batch_size] (output)
    block_size: tl.constexpr,
    max_model_len: tl.constexpr,
    n_blocks_per_req: tl.constexpr,
    PAD_ID: tl.constexpr,
    batch_size,
):
    """One EAGLE autoregressive step for one request: advance the position (wrapping to 0 past
    ``max_model_len``), look up its KV slot, bump ``seq_lens``. Programs at or beyond
    ``batch_size`` are padding slots and only write ``PAD_ID``."""
    req_idx = tl.program_id(0)
    if req_idx >= batch_size:
        tl.store(out_slot_mapping_ptr + req_idx, PAD_ID)
        return
    position = tl.load(positions_ptr + req_idx) + 1
    overflow = position >= max_model_len
    position = tl.where(overflow, 0, position)
    block_idx = tl.minimum(position // block_size, n_blocks_per_req - 1)
    block_id = tl.load(block_table_ptr + req_idx.to(tl.int64) * block_table_stride + block_idx)
    slot = block_id.to(tl.int64) * block_size + position % block_size
    seq_len = tl.load(seq_lens_ptr + req_idx)
    seq_len = tl.minimum(tl.where(overflow, 1, seq_len + 1), max_model_len)
    tl.store(out_clamped_positions_ptr + req_idx, position)
    tl.store(out_slot_mapping_ptr + req_idx, tl.where(overflow, PAD_ID, slot))
    tl.store(seq_lens_ptr + req_idx, seq_len)


@triton.jit
def eagle_prepare_inputs_padded_kernel(
    cu_num_draft_tokens_ptr,  # [num_reqs] inclusive cumulative sum
    valid_sampled_tokens_count_ptr,  # [num_reqs]
    query_start_loc_gpu_ptr,  # [num_reqs + 1]
    token_indices_to_sample_ptr,  # [num_reqs] (output)
    num_rejected_tokens_gpu_ptr,  # [num_reqs] (output)
    num_reqs,
):
    """Per request: how many drafts were rejected (``drafts + 1 - valid``, 0 without drafts)
    and which token to sample next (the last query token minus the rejected ones)."""
    req_idx = tl.program_id(0)
    if req_idx >= num_reqs:
        return
    prev = tl.load(cu_num_draft_tokens_ptr + req_idx - 1, mask=req_idx > 0, other=0)
    num_drafts = tl.load(cu_num_draft_tokens_ptr + req_idx) - prev
    valid = tl.load(valid_sampled_tokens_count_ptr + req_idx)
    rejected = tl.where(num_drafts > 0, num_drafts + 1 - valid, 0)
    last_token = tl.load(query_start_loc_gpu_ptr + req_idx + 1) - 1
    tl.store(token_indices_to_sample_ptr + req_idx, last_token - rejected)
    tl.store(num_rejected_tokens_gpu_ptr + req_idx, rejected)


@triton.jit
def eagle_prepare_next_token_padded_kernel(
    sampled_token_ids_ptr,  # [num_reqs, num_sampled_tokens_per_req] (row stride below)
    discard_request_mask_ptr,  # [num_reqs] bool
    backup_next_token_ids_ptr,  # [num_reqs]
    next_token_ids_ptr,  # [num_reqs] (output)
    valid_sampled_tokens_count_ptr,  # [num_reqs] (output)
    vocab_size,
    num_sampled_tokens_per_req,
    num_reqs,
    stride_sampled_token_ids,
    BLOCK_SIZE_TOKENS: tl.constexpr,  # power of two >= num_sampled_tokens_per_req
):
    """Per request: count the valid sampled tokens (not -1, below ``vocab_size``) and pick the
    last valid one as the next token; discarded requests and requests with no valid token take
    the backup token (discarded ones report a count of 0)."""
    req_idx = tl.program_id(0)
    if req_idx >= num_reqs:
        return
    backup = tl.load(backup_next_token_ids_ptr + req_idx)
    if tl.load(discard_request_mask_ptr + req_idx):
        tl.store(next_token_ids_ptr + req_idx, backup)
        tl.store(valid_sampled_tokens_count_ptr + req_idx, 0)
    else:
        row = sampled_token_ids_ptr + req_idx.to(tl.int64) * stride_sampled_token_ids
        lanes = tl.arange(0, BLOCK_SIZE_TOKENS)
        in_row = lanes < num_sampled_tokens_per_req
        ids = tl.load(row + lanes, mask=in_row, other=-1)
        valid = in_row & (ids != -1) & (ids < vocab_size)
        count = tl.sum(valid.to(tl.int32), axis=0)
        last = tl.max(tl.where(valid, lanes, -1), axis=0)
        # `last` is -1 when nothing is valid; the masked load then reads nothing.
        token = tl.load(row + last, mask=last >= 0, other=0)
        tl.store(next_token_ids_ptr + req_idx, tl.where(count > 0, token, backup))
        tl.store(valid_sampled_tokens_count_ptr + req_idx, count)


@triton.jit
def copy_and_expand_eagle_inputs_kernel(
    target_token_ids_ptr,  # [total_input_tokens]
    target_positions_ptr,  # [total_input_tokens]
    next_token_ids_ptr,  # [num_reqs]
    out_input_ids_ptr,  # [total_output_tokens] (output)
    out_positions_ptr,  # [total_output_tokens] (output)
    out_is_rejected_token_mask_ptr,  # [total_output_tokens] bool (output)
    out_is_masked_token_mask_ptr,  # [total_output_tokens] bool (output)
    out_new_token_indices_ptr,  # [num_reqs * num_padding_slots_per_request] (output)
    out_hidden_state_mapping_ptr,  # [total_input_tokens] (output, shift_input_ids only)
    query_start_loc_ptr,  # [num_reqs + 1]
    query_end_loc_ptr,  # [num_reqs] last valid (non-rejected) input token per request
    padding_token_id,
    parallel_drafting_token_id,
    total_input_tokens,
    num_padding_slots_per_request,
    # a constexpr, not a runtime i1: the interpreter of Triton <= 3.7 turns a Python bool passed
    # for a runtime parameter into int32 data typed int1 and refuses it; a constexpr is passed
    # through as it is, on every release, and the GPU build specializes both layouts
    shift_input_ids: tl.constexpr,
    BLOCK_SIZE_TOKENS: tl.constexpr,
):
    """Lay out one request's drafting inputs, ``BLOCK_SIZE_TOKENS`` output slots per program.

    Output layout of request ``r`` (``n`` valid tokens, ``p`` padding slots, ``k`` rejected):
    ``[valid tokens (n) | bonus token | parallel-drafting tokens (p - 1) | rejected (k)]``.
    With ``shift_input_ids`` the first input token is dropped (``n = end - start`` instead of
    ``end - start + 1``) and each request's output starts ``r`` slots earlier; the hidden-state
    mapping then sends every input token of the request to its output slot.
    """
    req_idx = tl.program_id(0)
    block = tl.program_id(1)
    q_start = tl.load(query_start_loc_ptr + req_idx)
    q_next = tl.load(query_start_loc_ptr + req_idx + 1)
    q_end = tl.load(query_end_loc_ptr + req_idx)
    if shift_input_ids:
        n_valid = q_end - q_start
        skip = 1
        out_start = q_start + req_idx * (num_padding_slots_per_request - 1)
    else:
        n_valid = q_end - q_start + 1
        skip = 0
        out_start = q_start + req_idx * num_padding_slots_per_request
    n_rejected = q_next - q_end - 1
    n_new_end = n_valid + num_padding_slots_per_request
    n_out = n_new_end + n_rejected

    j = block * BLOCK_SIZE_TOKENS + tl.arange(0, BLOCK_SIZE_TOKENS)
    live = j < n_out
    is_valid = j < n_valid
    is_bonus = j == n_valid
    is_parallel = (j > n_valid) & (j < n_new_end)
    is_rejected = j >= n_new_end
    out_idx = out_start + j

    src = tl.minimum(q_start + skip + j, total_input_tokens - 1)
    ids = tl.load(target_token_ids_ptr + src, mask=is_valid & live, other=0)
    ids = tl.where(is_bonus, tl.load(next_token_ids_ptr + req_idx), ids)
    ids = tl.where(is_parallel, parallel_drafting_token_id, ids)
    ids = tl.where(is_rejected, padding_token_id, ids)
    first_pos = tl.load(target_positions_ptr + q_start)
    pos = tl.where(is_rejected, 0, first_pos + j)

    tl.store(out_input_ids_ptr + out_idx, ids, mask=live)
    tl.store(out_positions_ptr + out_idx, pos, mask=live)
    tl.store(out_is_rejected_token_mask_ptr + out_idx, is_rejected & live, mask=live)
    tl.store(out_is_masked_token_mask_ptr + out_idx, is_parallel & live, mask=live)
    is_new = (j >= n_valid) & (j < n_new_end) & live
    new_slot = req_idx * num_padding_slots_per_request + (j - n_valid)
    tl.store(out_new_token_indices_ptr + new_slot, out_idx, mask=is_new)
    if shift_input_ids:
        tl.store(out_hidden_state_mapping_ptr + q_start + j, out_idx, mask=j < q_next - q_start)


@triton.jit
def copy_and_expand_dflash_inputs_kernel(
    next_token_ids_ptr,  # [num_reqs]
    target_positions_ptr,  # [total_input_tokens]
    out_input_ids_ptr,  # [num_reqs * num_query_per_req] (output)
    out_context_positions_ptr,  # [total_input_tokens] (output)
    out_query_positions_ptr,  # [num_reqs * num_query_per_req] (output)
    out_context_slot_mapping_ptr,  # [total_input_tokens] (output)
    out_query_slot_mapping_ptr,  # [num_reqs * num_query_per_req] (output)
    out_token_indices_ptr,  # [num_reqs * num_speculative_tokens] (output)
    block_table_ptr,  # [num_reqs, blocks per request]
    block_table_stride,  # elements between block-table rows
    query_start_loc_ptr,  # [num_reqs + 1]
    num_rejected_tokens_ptr,  # [num_reqs], or 0/None when HAS_NUM_REJECTED is false
    parallel_drafting_token_id,
    block_size,
    num_query_per_req,
    num_speculative_tokens,
    total_input_tokens,
    BLOCK_SIZE: tl.constexpr,
    HAS_NUM_REJECTED: tl.constexpr = False,
):
    """DFlash first pass for one request, ``BLOCK_SIZE`` of its slots per program.

    Slots ``[0, n_ctx)`` are the context tokens (positions copied, slots looked up); the
    ``num_query_per_req`` query slots that follow continue from the last *accepted* context
    position, the first carrying the bonus token and the rest the parallel-drafting token, whose
    query indices are the tokens to sample.
    """
    req_idx = tl.program_id(0)
    block = tl.program_id(1)
    ctx_start = tl.load(query_start_loc_ptr + req_idx)
    ctx_end = tl.load(query_start_loc_ptr + req_idx + 1)
    n_ctx = ctx_end - ctx_start

    j = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = j < n_ctx + num_query_per_req
    is_ctx = j < n_ctx
    is_query = live & (j >= n_ctx)
    q_off = j - n_ctx

    ctx_pos = tl.load(
        target_positions_ptr + tl.minimum(ctx_start + j, total_input_tokens - 1),
        mask=is_ctx,
        other=0,
    )
    if HAS_NUM_REJECTED:
        accepted_end = ctx_end - tl.load(num_rejected_tokens_ptr + req_idx)
    else:
        accepted_end = ctx_end
    query_pos = tl.load(target_positions_ptr + accepted_end - 1) + 1 + q_off
    pos = tl.where(is_ctx, ctx_pos, query_pos)

    ctx_out = ctx_start + j
    query_out = req_idx * num_query_per_req + q_off
    tl.store(out_context_positions_ptr + ctx_out, ctx_pos, mask=is_ctx)
    tl.store(out_query_positions_ptr + query_out, query_pos, mask=is_query)

    block_idx = tl.minimum(pos // block_size, block_table_stride - 1)
    block_id = tl.load(
        block_table_ptr + req_idx.to(tl.int64) * block_table_stride + block_idx, mask=live, other=0
    )
    slot = block_id.to(tl.int64) * block_size + pos % block_size
    tl.store(out_context_slot_mapping_ptr + ctx_out, slot, mask=is_ctx)
    tl.store(out_query_slot_mapping_ptr + query_out, slot, mask=is_query)

    bonus = tl.load(next_token_ids_ptr + req_idx)
    tl.store(
        out_input_ids_ptr + query_out,
        tl.where(q_off == 0, bonus, parallel_drafting_token_id),
        mask=is_query,
    )
    is_sample = is_query & (q_off > 0)
    tl.store(
        out_token_indices_ptr + req_idx * num_speculative_tokens + q_off - 1,
        query_out,
        mask=is_sample,
    )
