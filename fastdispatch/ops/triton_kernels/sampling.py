"""Triton kernels for speculative-decoding rejection sampling.

Same names, argument names and argument order as vLLM's kernels (``vllm/v1/sample/
rejection_sampler.py``), so a launch keyed by those names binds to these kernels, to vLLM's, or
to the ``kernels_cpu`` implementations alike. The behaviour is the contract in
``docs/kernel_contracts.md``; two deliberate differences that only widen what is defined:

* ``expand_kernel`` writes every token of a request, looping in ``MAX_NUM_TOKENS`` chunks, instead
  of silently stopping after the first chunk;
* row offsets into ``[T, V]`` probability tensors are computed in int64, so int32 index buffers
  cannot overflow on large ``T * V``.

Notation: B requests, T draft tokens in all, V vocabulary entries. ``cu_num_*`` buffers hold an
inclusive cumulative sum: request ``i`` owns ``[cu[i-1], cu[i])`` with ``cu[-1]`` taken as 0.
"""

from .._triton import tl, triton


@triton.jit
def _request_span(cu_ptr, req_idx):
    """``(start, end)`` of request ``req_idx`` in an inclusive cumulative-sum buffer."""
    start = tl.load(cu_ptr + req_idx - 1, mask=req_idx > 0, other=0)
    end = tl.load(cu_ptr + req_idx)
    return start, end


@triton.jit(do_not_specialize=["replace_from", "replace_to"])
def expand_kernel(
    output_ptr,  # [T], same dtype as input
    input_ptr,  # [B]
    cu_num_tokens_ptr,  # [B]
    replace_from,
    replace_to,
    MAX_NUM_TOKENS: tl.constexpr,  # chunk width (power of two)
):
    req_idx = tl.program_id(0)
    start, end = _request_span(cu_num_tokens_ptr, req_idx)
    value = tl.load(input_ptr + req_idx)
    value = tl.where(value == replace_from, replace_to, value)
    lanes = tl.arange(0, MAX_NUM_TOKENS)
    for chunk in range(start, end, MAX_NUM_TOKENS):
        offsets = chunk + lanes
        tl.store(output_ptr + offsets, value, mask=offsets < end)


@triton.jit(do_not_specialize=["max_spec_len"])
def rejection_greedy_sample_kernel(
    output_token_ids_ptr,  # [B, max_spec_len + 1], pre-filled with -1
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [T]
    target_argmax_ptr,  # [T]
    bonus_token_ids_ptr,  # [B] (or [B, 1])
    is_greedy_ptr,  # [B] bool, or None: every request is greedy
    max_spec_len,
    uniform_probs_ptr,  # [T] float64, or None (synthetic mode only)
    synthetic_conditional_rates_ptr,  # [max_spec_len] float32, or None
    SYNTHETIC_MODE: tl.constexpr,
):
    req_idx = tl.program_id(0)
    if is_greedy_ptr is not None:
        if not tl.load(is_greedy_ptr + req_idx):
            return  # a random request: the random kernel owns its row
    start, end = _request_span(cu_num_draft_tokens_ptr, req_idx)
    out_row = output_token_ids_ptr + req_idx.to(tl.int64) * (max_spec_len + 1)

    # Walk the drafts; once one is rejected, later positions stay untouched (-1).
    walking = True
    for pos in range(0, end - start):
        if walking:
            tok = start + pos
            draft = tl.load(draft_token_ids_ptr + tok)
            target = tl.load(target_argmax_ptr + tok)
            if SYNTHETIC_MODE:
                u = tl.load(uniform_probs_ptr + tok)
                rate = tl.load(synthetic_conditional_rates_ptr + pos)
                accept = (u < rate) & (draft >= 0)
                tl.store(out_row + pos, tl.where(accept, draft, target))
            else:
                accept = draft == target
                tl.store(out_row + pos, target)
            walking = accept
    if walking:
        tl.store(out_row + (end - start), tl.load(bonus_token_ids_ptr + req_idx))


@triton.jit(do_not_specialize=["max_spec_len"])
def rejection_random_sample_kernel(
    output_token_ids_ptr,  # [B, max_spec_len + 1], pre-filled with -1
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [T]
    draft_probs_ptr,  # [T, V] float32, or None
    target_probs_ptr,  # [T, V] float32
    bonus_token_ids_ptr,  # [B]
    recovered_token_ids_ptr,  # [T]
    uniform_probs_ptr,  # [T] float64
    is_greedy_ptr,  # [B] bool
    max_spec_len,
    vocab_size,
    synthetic_conditional_rates_ptr,  # [max_spec_len] float32, or None
    NO_DRAFT_PROBS: tl.constexpr,
    SYNTHETIC_MODE: tl.constexpr,
):
    req_idx = tl.program_id(0)
    if tl.load(is_greedy_ptr + req_idx):
        return  # a greedy request: the greedy kernel owns its row
    start, end = _request_span(cu_num_draft_tokens_ptr, req_idx)
    out_row = output_token_ids_ptr + req_idx.to(tl.int64) * (max_spec_len + 1)

    walking = True
    for pos in range(0, end - start):
        if walking:
            tok = start + pos
            draft = tl.load(draft_token_ids_ptr + tok)
            u = tl.load(uniform_probs_ptr + tok)
            # Padded drafts (-1) are rejected; their probability is never read.
            valid = draft >= 0
            safe_draft = tl.where(valid, draft, 0).to(tl.int64)
            if SYNTHETIC_MODE:
                rate = tl.load(synthetic_conditional_rates_ptr + pos)
                accept = valid & (u < rate)
            else:
                prob_at = tok.to(tl.int64) * vocab_size + safe_draft
                target_p = tl.load(target_probs_ptr + prob_at, mask=valid, other=0.0)
                if NO_DRAFT_PROBS:
                    draft_p = tl.full((), 1.0, tl.float32)
                else:
                    draft_p = tl.load(draft_probs_ptr + prob_at, mask=valid, other=0.0)
                # A zero draft probability rejects (the ratio would be inf or NaN). The ratio
                # is formed in float32, correctly rounded (Triton's `/` compiles to the
                # approximate div.full.f32 on NVIDIA GPUs, which would disagree with every CPU
                # in the last bit), and compared with the float64 uniform draw.
                ratio = tl.math.div_rn(target_p, tl.where(draft_p > 0, draft_p, 1.0))
                accept = valid & (draft_p > 0) & (ratio.to(tl.float64) >= u)
            if accept:
                tl.store(out_row + pos, draft)
            else:
                tl.store(out_row + pos, tl.load(recovered_token_ids_ptr + tok))
            walking = accept
    if walking:
        tl.store(out_row + (end - start), tl.load(bonus_token_ids_ptr + req_idx))


@triton.jit
def sample_recovered_tokens_kernel(
    output_token_ids_ptr,  # [T]
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [T]
    draft_probs_ptr,  # [T, V] float32, or None
    target_probs_ptr,  # [T, V] float32
    inv_q_ptr,  # [B, V] float32 (float64 with USE_FP64_GUMBEL)
    vocab_size,
    BLOCK_SIZE: tl.constexpr,
    NO_DRAFT_PROBS: tl.constexpr,
    USE_FP64_GUMBEL: tl.constexpr,
):
    """Per draft position: argmax over v of ``p[v] * inv_q[req, v]`` (lowest index on ties).

    ``p = max(target - draft, 0)``, or ``target`` with the draft token itself zeroed when there
    are no draft probabilities. Grid ``(B, max_spec_len)``: positions past a request's drafts
    exit at once.
    """
    req_idx = tl.program_id(0)
    pos = tl.program_id(1)
    start, end = _request_span(cu_num_draft_tokens_ptr, req_idx)
    if pos >= end - start:
        return
    tok = start + pos
    prob_row = tok.to(tl.int64) * vocab_size
    q_row = req_idx.to(tl.int64) * vocab_size
    if NO_DRAFT_PROBS:
        draft = tl.load(draft_token_ids_ptr + tok)

    if USE_FP64_GUMBEL:
        best = tl.full((), float("-inf"), tl.float64)
    else:
        best = tl.full((), float("-inf"), tl.float32)
    best_idx = tl.full((), 0, tl.int64)
    lanes = tl.arange(0, BLOCK_SIZE)
    for block in range(0, vocab_size, BLOCK_SIZE):
        v = block + lanes
        in_vocab = v < vocab_size
        target_p = tl.load(target_probs_ptr + prob_row + v, mask=in_vocab, other=0.0)
        if NO_DRAFT_PROBS:
            p = tl.where(v == draft, 0.0, target_p)
        else:
            draft_p = tl.load(draft_probs_ptr + prob_row + v, mask=in_vocab, other=0.0)
            p = tl.maximum(target_p - draft_p, 0.0)
        q = tl.load(inv_q_ptr + q_row + v, mask=in_vocab, other=0.0)
        score = tl.where(in_vocab, p * q, float("-inf"))
        block_best, block_idx = tl.max(
            score, axis=0, return_indices=True, return_indices_tie_break_left=True
        )
        # Strictly greater: an equal score in a later block never displaces an earlier index.
        if block_best > best:
            best = block_best
            best_idx = block + block_idx.to(tl.int64)
    best_idx = tl.minimum(best_idx, vocab_size - 1)
    tl.store(output_token_ids_ptr + tok, best_idx)
