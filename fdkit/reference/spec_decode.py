"""Plain-torch references for the speculative-decoding kernels (``kernels_cpu._spec_decode``).

Same signatures and in-place semantics as the compiled kernels, written as directly as the
contracts read -- whole-tensor torch ops, one Python iteration per request at most -- so they
can serve as the independent oracle in tests. They do no validation: they expect valid input.
Arithmetic is int64; results are written into the caller's buffers in their own dtype.
"""

import torch

_i64 = torch.int64


def _row0(positions):
    """M-RoPE positions are ``[3, N]``; the kernels read the temporal row."""
    return positions[0] if positions.dim() == 2 else positions


def eagle_step_slot_mapping_metadata_kernel(
    positions_ptr,
    block_table_ptr,
    block_table_stride,
    seq_lens_ptr,
    out_clamped_positions_ptr,
    out_slot_mapping_ptr,
    block_size,
    max_model_len,
    n_blocks_per_req,
    PAD_ID,
    batch_size,
):
    b = batch_size
    new_pos = positions_ptr[:b].to(_i64) + 1
    exceeds = new_pos >= max_model_len
    clamped = torch.where(exceeds, torch.zeros_like(new_pos), new_pos)
    block = torch.clamp(clamped // block_size, max=n_blocks_per_req - 1)
    block_id = block_table_ptr[torch.arange(b), block].to(_i64)
    slot = block_id * block_size + clamped % block_size
    slot = torch.where(exceeds, torch.full_like(slot, PAD_ID), slot)
    seq = seq_lens_ptr[:b].to(_i64)
    seq = torch.clamp(torch.where(exceeds, torch.ones_like(seq), seq + 1), max=max_model_len)
    out_clamped_positions_ptr[:b] = clamped
    out_slot_mapping_ptr[:b] = slot
    out_slot_mapping_ptr[b:] = PAD_ID
    seq_lens_ptr[:b] = seq


def eagle_prepare_inputs_padded_kernel(
    cu_num_draft_tokens_ptr,
    valid_sampled_tokens_count_ptr,
    query_start_loc_gpu_ptr,
    token_indices_to_sample_ptr,
    num_rejected_tokens_gpu_ptr,
    num_reqs,
):
    n = num_reqs
    cu = cu_num_draft_tokens_ptr[:n].to(_i64)
    num_drafts = cu - torch.cat([cu.new_zeros(1), cu[:-1]])[:n]
    valid = valid_sampled_tokens_count_ptr[:n].to(_i64)
    rejected = torch.where(num_drafts > 0, num_drafts + 1 - valid, torch.zeros_like(valid))
    last = query_start_loc_gpu_ptr[1 : n + 1].to(_i64) - 1
    token_indices_to_sample_ptr[:n] = last - rejected
    num_rejected_tokens_gpu_ptr[:n] = rejected


def eagle_prepare_next_token_padded_kernel(
    sampled_token_ids_ptr,
    discard_request_mask_ptr,
    backup_next_token_ids_ptr,
    next_token_ids_ptr,
    valid_sampled_tokens_count_ptr,
    vocab_size,
    num_sampled_tokens_per_req,
    num_reqs,
    stride_sampled_token_ids,
    BLOCK_SIZE_TOKENS=None,
):
    n, w = num_reqs, num_sampled_tokens_per_req
    tokens = sampled_token_ids_ptr[:n, :w].to(_i64)
    valid = (tokens != -1) & (tokens < vocab_size)
    count = valid.sum(dim=1)
    backup = backup_next_token_ids_ptr[:n].to(_i64)
    if w > 0:
        idx = torch.arange(w).expand(n, w)
        last_idx = torch.where(valid, idx, torch.full_like(idx, -1)).max(dim=1).values
        last_tok = tokens.gather(1, last_idx.clamp(min=0)[:, None])[:, 0]
    else:
        last_tok = backup
    discard = discard_request_mask_ptr[:n]
    next_token_ids_ptr[:n] = torch.where(discard | (count == 0), backup, last_tok)
    valid_sampled_tokens_count_ptr[:n] = torch.where(discard, torch.zeros_like(count), count)


def copy_and_expand_eagle_inputs_kernel(
    target_token_ids_ptr,
    target_positions_ptr,
    next_token_ids_ptr,
    out_input_ids_ptr,
    out_positions_ptr,
    out_is_rejected_token_mask_ptr,
    out_is_masked_token_mask_ptr,
    out_new_token_indices_ptr,
    out_hidden_state_mapping_ptr,
    query_start_loc_ptr,
    query_end_loc_ptr,
    padding_token_id,
    parallel_drafting_token_id,
    total_input_tokens,
    num_padding_slots_per_request,
    shift_input_ids,
    BLOCK_SIZE_TOKENS=None,
):
    p = num_padding_slots_per_request
    target_positions_ptr = _row0(target_positions_ptr)
    qsl = query_start_loc_ptr.tolist()
    qel = query_end_loc_ptr.tolist()
    for r in range(len(qel)):
        qs, nqs, qe = qsl[r], qsl[r + 1], qel[r]
        if shift_input_ids:
            n_valid, src0, start = qe - qs, qs + 1, qs + r * (p - 1)
        else:
            n_valid, src0, start = qe - qs + 1, qs, qs + r * p
        total = n_valid + p + (nqs - qe - 1)
        if total > 0:
            j = torch.arange(total)
            rejected = j >= n_valid + p
            parallel = (j > n_valid) & (j < n_valid + p)
            bonus = j == n_valid
            copied = j < n_valid
            tokens = torch.zeros(total, dtype=_i64)
            src = torch.clamp(src0 + j[copied], max=total_input_tokens - 1)
            tokens[copied] = target_token_ids_ptr[src].to(_i64)
            tokens[bonus] = int(next_token_ids_ptr[r])
            tokens[parallel] = parallel_drafting_token_id
            tokens[rejected] = padding_token_id
            positions = int(target_positions_ptr[qs]) + j
            positions[rejected] = 0
            out = slice(start, start + total)
            out_input_ids_ptr[out] = tokens
            out_positions_ptr[out] = positions
            out_is_rejected_token_mask_ptr[out] = rejected
            out_is_masked_token_mask_ptr[out] = parallel
            new = (j >= n_valid) & (j < n_valid + p)
            out_new_token_indices_ptr[r * p + (j[new] - n_valid)] = (start + j[new]).to(
                out_new_token_indices_ptr.dtype
            )
        if shift_input_ids:
            out_hidden_state_mapping_ptr[qs:nqs] = start + torch.arange(nqs - qs)


def copy_and_expand_dflash_inputs_kernel(
    next_token_ids_ptr,
    target_positions_ptr,
    out_input_ids_ptr,
    out_context_positions_ptr,
    out_query_positions_ptr,
    out_context_slot_mapping_ptr,
    out_query_slot_mapping_ptr,
    out_token_indices_ptr,
    block_table_ptr,
    block_table_stride,
    query_start_loc_ptr,
    num_rejected_tokens_ptr,
    parallel_drafting_token_id,
    block_size,
    num_query_per_req,
    num_speculative_tokens,
    total_input_tokens,
    BLOCK_SIZE=None,
    HAS_NUM_REJECTED=False,
):
    q, s = num_query_per_req, num_speculative_tokens
    target_positions_ptr = _row0(target_positions_ptr)
    qsl = query_start_loc_ptr.tolist()

    def slots(r, pos):
        block = torch.clamp(pos // block_size, max=block_table_stride - 1)
        return block_table_ptr[r, block].to(_i64) * block_size + pos % block_size

    for r in range(len(qsl) - 1):
        cs, ce = qsl[r], qsl[r + 1]
        ctx = target_positions_ptr[cs:ce].to(_i64)
        out_context_positions_ptr[cs:ce] = ctx
        out_context_slot_mapping_ptr[cs:ce] = slots(r, ctx)
        if q <= 0:
            continue
        end = ce - (int(num_rejected_tokens_ptr[r]) if HAS_NUM_REJECTED else 0)
        pos = int(target_positions_ptr[end - 1]) + 1 + torch.arange(q)
        out = slice(r * q, (r + 1) * q)
        out_query_positions_ptr[out] = pos
        out_query_slot_mapping_ptr[out] = slots(r, pos)
        ids = torch.full((q,), parallel_drafting_token_id, dtype=_i64)
        ids[0] = int(next_token_ids_ptr[r])
        out_input_ids_ptr[out] = ids
        out_token_indices_ptr[r * s : r * s + q - 1] = torch.arange(r * q + 1, (r + 1) * q)
