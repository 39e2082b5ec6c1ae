"""Plain-Python references for the 11 kernel contracts, written from ``kernels.md``.

Each ``ref_<kernel>(grid, **launch)`` takes the kernel's launch arguments by name and the launch
grid, and writes its outputs in place exactly as the kernel would -- element by element in Python,
deliberately naive, so it shares no code (and no cleverness) with either the Triton kernels or
``kernels_cpu``. Used by the interpreter tests of our Triton kernels and by the ops tests.
"""

import ctypes


def _span(cu, i):
    return (int(cu[i - 1]) if i > 0 else 0), int(cu[i])


def ref_expand_kernel(
    grid, output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS=None
):
    for i in range(grid[0]):
        start, end = _span(cu_num_tokens_ptr, i)
        v = input_ptr[i].item()
        if v == replace_from:
            v = replace_to
        for t in range(start, end):
            output_ptr[t] = v


def ref_rejection_greedy_sample_kernel(
    grid,
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    target_argmax_ptr,
    bonus_token_ids_ptr,
    is_greedy_ptr,
    max_spec_len,
    uniform_probs_ptr,
    synthetic_conditional_rates_ptr,
    SYNTHETIC_MODE,
):
    out = output_token_ids_ptr.view(-1)
    for i in range(grid[0]):
        if is_greedy_ptr is not None and not bool(is_greedy_ptr[i]):
            continue
        start, end = _span(cu_num_draft_tokens_ptr, i)
        row = i * (max_spec_len + 1)
        all_ok = True
        for pos in range(end - start):
            d = int(draft_token_ids_ptr[start + pos])
            t = int(target_argmax_ptr[start + pos])
            if SYNTHETIC_MODE:
                ok = (
                    float(uniform_probs_ptr[start + pos])
                    < float(synthetic_conditional_rates_ptr[pos])
                ) and d >= 0
                out[row + pos] = d if ok else t
            else:
                ok = d == t
                out[row + pos] = t
            if not ok:
                all_ok = False
                break
        if all_ok:
            out[row + end - start] = int(bonus_token_ids_ptr.view(-1)[i])


def ref_rejection_random_sample_kernel(
    grid,
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    draft_probs_ptr,
    target_probs_ptr,
    bonus_token_ids_ptr,
    recovered_token_ids_ptr,
    uniform_probs_ptr,
    is_greedy_ptr,
    max_spec_len,
    vocab_size,
    synthetic_conditional_rates_ptr,
    NO_DRAFT_PROBS,
    SYNTHETIC_MODE,
):
    import torch

    out = output_token_ids_ptr.view(-1)
    for i in range(grid[0]):
        if bool(is_greedy_ptr[i]):
            continue
        start, end = _span(cu_num_draft_tokens_ptr, i)
        row = i * (max_spec_len + 1)
        all_ok = True
        for pos in range(end - start):
            tok = start + pos
            d = int(draft_token_ids_ptr[tok])
            u = float(uniform_probs_ptr[tok])  # float64
            if d < 0:
                ok = False
            elif SYNTHETIC_MODE:
                ok = u < float(synthetic_conditional_rates_ptr[pos])
            else:
                tp = target_probs_ptr[tok, d].to(torch.float32)
                dp = (
                    torch.ones((), dtype=torch.float32)
                    if NO_DRAFT_PROBS
                    else draft_probs_ptr[tok, d].to(torch.float32)
                )
                # float32 ratio, float64 comparison
                ok = bool(dp > 0) and float(tp / dp) >= u
            if ok:
                out[row + pos] = d
            else:
                out[row + pos] = int(recovered_token_ids_ptr[tok])
                all_ok = False
                break
        if all_ok:
            out[row + end - start] = int(bonus_token_ids_ptr.view(-1)[i])


def ref_sample_recovered_tokens_kernel(
    grid,
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    draft_probs_ptr,
    target_probs_ptr,
    inv_q_ptr,
    vocab_size,
    BLOCK_SIZE=None,
    NO_DRAFT_PROBS=False,
    USE_FP64_GUMBEL=False,
):
    import torch

    for i in range(grid[0]):
        start, end = _span(cu_num_draft_tokens_ptr, i)
        for pos in range(min(end - start, grid[1])):
            tok = start + pos
            tp = target_probs_ptr[tok].to(torch.float32)
            if NO_DRAFT_PROBS:
                p = tp.clone()
                d = int(draft_token_ids_ptr[tok])
                if 0 <= d < vocab_size:
                    p[d] = 0.0
            else:
                p = torch.clamp(tp - draft_probs_ptr[tok].to(torch.float32), min=0.0)
            q = inv_q_ptr[i]
            score = (p.to(torch.float64) * q) if USE_FP64_GUMBEL else (p * q.to(torch.float32))
            best, best_v = float("-inf"), 0
            for v in range(vocab_size):  # strictly greater: the lowest index wins ties
                s = float(score[v])
                if s > best:
                    best, best_v = s, v
            output_token_ids_ptr[tok] = min(best_v, vocab_size - 1)


def ref_eagle_step_slot_mapping_metadata_kernel(
    grid,
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
    flat_bt = block_table_ptr.reshape(-1) if block_table_ptr.is_contiguous() else None
    for i in range(grid[0]):
        if i >= batch_size:
            out_slot_mapping_ptr[i] = PAD_ID
            continue
        p = int(positions_ptr[i]) + 1
        over = p >= max_model_len
        if over:
            p = 0
        b = min(p // block_size, n_blocks_per_req - 1)
        if flat_bt is not None:
            block_id = int(flat_bt[i * block_table_stride + b])
        else:
            block_id = int(block_table_ptr[i, b])
        slot = PAD_ID if over else block_id * block_size + p % block_size
        s = 1 if over else int(seq_lens_ptr[i]) + 1
        out_clamped_positions_ptr[i] = p
        out_slot_mapping_ptr[i] = slot
        seq_lens_ptr[i] = min(s, max_model_len)


def ref_eagle_prepare_inputs_padded_kernel(
    grid,
    cu_num_draft_tokens_ptr,
    valid_sampled_tokens_count_ptr,
    query_start_loc_gpu_ptr,
    token_indices_to_sample_ptr,
    num_rejected_tokens_gpu_ptr,
    num_reqs,
):
    for i in range(min(grid[0], num_reqs)):
        start, end = _span(cu_num_draft_tokens_ptr, i)
        n = end - start
        rej = n + 1 - int(valid_sampled_tokens_count_ptr[i]) if n > 0 else 0
        token_indices_to_sample_ptr[i] = int(query_start_loc_gpu_ptr[i + 1]) - 1 - rej
        num_rejected_tokens_gpu_ptr[i] = rej


def ref_eagle_prepare_next_token_padded_kernel(
    grid,
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
    for i in range(min(grid[0], num_reqs)):
        if bool(discard_request_mask_ptr[i]):
            next_token_ids_ptr[i] = int(backup_next_token_ids_ptr[i])
            valid_sampled_tokens_count_ptr[i] = 0
            continue
        row = [int(sampled_token_ids_ptr[i, j]) for j in range(num_sampled_tokens_per_req)]
        valid = [t for t in row if t != -1 and t < vocab_size]
        next_token_ids_ptr[i] = valid[-1] if valid else int(backup_next_token_ids_ptr[i])
        valid_sampled_tokens_count_ptr[i] = len(valid)


def ref_copy_and_expand_eagle_inputs_kernel(
    grid,
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
    BLOCK_SIZE_TOKENS,
):
    P = num_padding_slots_per_request
    limit = grid[1] * BLOCK_SIZE_TOKENS
    for r in range(grid[0]):
        qs, qn, qe = (
            int(query_start_loc_ptr[r]),
            int(query_start_loc_ptr[r + 1]),
            int(query_end_loc_ptr[r]),
        )
        if shift_input_ids:
            n_valid, skip, out_start = qe - qs, 1, qs + r * (P - 1)
        else:
            n_valid, skip, out_start = qe - qs + 1, 0, qs + r * P
        n_out = n_valid + P + (qn - qe - 1)
        first_pos = int(target_positions_ptr[qs])
        for j in range(min(n_out, limit)):
            o = out_start + j
            if j < n_valid:
                tok = int(target_token_ids_ptr[min(qs + skip + j, total_input_tokens - 1)])
            elif j == n_valid:
                tok = int(next_token_ids_ptr[r])
            elif j < n_valid + P:
                tok = parallel_drafting_token_id
            else:
                tok = padding_token_id
            rejected = j >= n_valid + P
            out_input_ids_ptr[o] = tok
            out_positions_ptr[o] = 0 if rejected else first_pos + j
            out_is_rejected_token_mask_ptr[o] = rejected
            out_is_masked_token_mask_ptr[o] = n_valid < j < n_valid + P
            if n_valid <= j < n_valid + P:
                out_new_token_indices_ptr[r * P + j - n_valid] = o
        if shift_input_ids:
            for j in range(min(qn - qs, limit)):
                out_hidden_state_mapping_ptr[qs + j] = out_start + j


def ref_copy_and_expand_dflash_inputs_kernel(
    grid,
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
    BLOCK_SIZE,
    HAS_NUM_REJECTED=False,
):
    flat_bt = block_table_ptr.reshape(-1)
    limit = grid[1] * BLOCK_SIZE

    def slot(r, pos):
        b = min(pos // block_size, block_table_stride - 1)
        return int(flat_bt[r * block_table_stride + b]) * block_size + pos % block_size

    for r in range(grid[0]):
        cs, ce = int(query_start_loc_ptr[r]), int(query_start_loc_ptr[r + 1])
        n_ctx = ce - cs
        accepted_end = ce - (int(num_rejected_tokens_ptr[r]) if HAS_NUM_REJECTED else 0)
        last = int(target_positions_ptr[accepted_end - 1])
        for j in range(min(n_ctx + num_query_per_req, limit)):
            if j < n_ctx:
                pos = int(target_positions_ptr[min(cs + j, total_input_tokens - 1)])
                out_context_positions_ptr[cs + j] = pos
                out_context_slot_mapping_ptr[cs + j] = slot(r, pos)
            else:
                k = j - n_ctx
                q = r * num_query_per_req + k
                pos = last + 1 + k
                out_query_positions_ptr[q] = pos
                out_query_slot_mapping_ptr[q] = slot(r, pos)
                out_input_ids_ptr[q] = (
                    int(next_token_ids_ptr[r]) if k == 0 else parallel_drafting_token_id
                )
                if k > 0:
                    out_token_indices_ptr[r * num_speculative_tokens + k - 1] = q


def ref_compute_slot_mapping_kernel(
    grid,
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,
    positions_ptr,
    block_table_ptr,
    block_table_stride,
    slot_mapping_ptr,
    KV_CACHE_BLOCK_SIZE,
    TOTAL_CP_WORLD_SIZE,
    TOTAL_CP_RANK,
    CP_KV_CACHE_INTERLEAVE_SIZE,
    PAD_ID,
    BLOCK_SIZE=None,
):
    flat_bt = block_table_ptr.reshape(-1)
    span = KV_CACHE_BLOCK_SIZE * TOTAL_CP_WORLD_SIZE
    inter = CP_KV_CACHE_INTERLEAVE_SIZE
    for r in range(grid[0] - 1):
        for t in range(int(query_start_loc_ptr[r]), int(query_start_loc_ptr[r + 1])):
            p = int(positions_ptr[t])
            vb, vo = p // span, p % span
            if (vo // inter) % TOTAL_CP_WORLD_SIZE == TOTAL_CP_RANK:
                local = (vo // (TOTAL_CP_WORLD_SIZE * inter)) * inter + vo % inter
                slot_mapping_ptr[t] = (
                    int(flat_bt[r * block_table_stride + vb]) * KV_CACHE_BLOCK_SIZE + local
                )
            else:
                slot_mapping_ptr[t] = PAD_ID
    for t in range(num_tokens, max_num_tokens):
        slot_mapping_ptr[t] = PAD_ID


def ref_batch_memcpy_kernel(grid, src_ptrs, dst_ptrs, sizes, BLOCK_SIZE=None):
    for i in range(grid[0]):
        ctypes.memmove(int(dst_ptrs[i]), int(src_ptrs[i]), int(sizes[i]))


REFERENCES = {name[4:]: fn for name, fn in dict(globals()).items() if name.startswith("ref_")}
