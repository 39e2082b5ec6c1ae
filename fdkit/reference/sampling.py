"""Plain-torch references for vLLM's four rejection-sampling kernels.

Each function mirrors the Triton kernel's behaviour (``vllm/v1/sample/rejection_sampler.py``)
in the most direct torch form: a Python loop over requests (the kernel's grid) with scalar or
vector torch ops inside. Numerics follow the GPU kernel, not the convenient torch default:

* greedy: the target argmax is truncated to int32 before the compare;
* random: ``target / draft`` is a float32 quotient compared with the float64 uniform in float64;
* recovered: ``prob * inv_q`` in inv_q's dtype; ``max(t - d, 0)`` maps NaN to 0 (the GPU's
  ``maxnum``); NaN scores never win the argmax; ties go to the lowest index; result clamped
  to ``vocab_size - 1``.
"""

from __future__ import annotations

import torch


def _offsets(cu: torch.Tensor) -> list:
    """Inclusive cumulative counts -> [(start, end)] per request."""
    ends = [int(c) for c in cu.tolist()]
    starts = [0] + ends[:-1]
    return list(zip(starts, ends))


def _flag(value, default: bool) -> bool:
    return default if value is None else bool(value)


def expand_kernel(
    output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS=None
):
    """output[cu[i-1]:cu[i]] = input[i] (replace_from -> replace_to), at most MAX_NUM_TOKENS
    each."""
    for i, (s, e) in enumerate(_offsets(cu_num_tokens_ptr)):
        n = e - s if MAX_NUM_TOKENS is None else min(e - s, MAX_NUM_TOKENS)
        v = input_ptr[i]
        if output_ptr.dtype.is_floating_point:
            # the kernel compares in the buffer's float32
            hit = bool(v == torch.tensor(float(replace_from), dtype=v.dtype))
            new = torch.tensor(float(replace_to), dtype=v.dtype)
        else:
            hit = int(v) == int(replace_from)
            new = torch.tensor(int(replace_to), dtype=v.dtype)
        output_ptr[s : s + n] = new if hit else v


def _i32(x: int) -> int:
    """Wrap to int32, as a store into an int32 buffer (or ``.to(tl.int32)``) does."""
    return (int(x) + 2**31) % 2**32 - 2**31


def _store(out: torch.Tensor, row: int, col: int, value: int) -> None:
    out[row, col] = _i32(value) if out.dtype == torch.int32 else int(value)


def rejection_greedy_sample_kernel(
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    target_argmax_ptr,
    bonus_token_ids_ptr,
    is_greedy_ptr,
    max_spec_len,
    uniform_probs_ptr=None,
    synthetic_conditional_rates_ptr=None,
    SYNTHETIC_MODE=None,
):
    synthetic = _flag(SYNTHETIC_MODE, synthetic_conditional_rates_ptr is not None)
    out = output_token_ids_ptr
    draft = draft_token_ids_ptr.tolist()
    argmax = target_argmax_ptr.tolist()
    bonus = bonus_token_ids_ptr.reshape(-1).tolist()
    greedy = None if is_greedy_ptr is None else is_greedy_ptr.tolist()
    for i, (s, e) in enumerate(_offsets(cu_num_draft_tokens_ptr)):
        if greedy is not None and not greedy[i]:
            continue
        rejected = False
        for pos in range(e - s):
            d = draft[s + pos]
            tgt = _i32(argmax[s + pos])
            if synthetic:
                u = float(uniform_probs_ptr[s + pos])  # python float: float64
                r = float(synthetic_conditional_rates_ptr[pos])
                accepted = u < r and d >= 0
                tok = d if accepted else tgt
                rejected = not accepted
            else:
                tok = tgt
                rejected = d != tgt
            _store(out, i, pos, tok)
            if rejected:
                break
        if not rejected:
            _store(out, i, e - s, bonus[i])


def rejection_random_sample_kernel(
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
    synthetic_conditional_rates_ptr=None,
    NO_DRAFT_PROBS=None,
    SYNTHETIC_MODE=None,
):
    synthetic = _flag(SYNTHETIC_MODE, synthetic_conditional_rates_ptr is not None)
    no_draft = _flag(NO_DRAFT_PROBS, draft_probs_ptr is None)
    out = output_token_ids_ptr
    draft = draft_token_ids_ptr.tolist()
    recovered = recovered_token_ids_ptr.tolist()
    bonus = bonus_token_ids_ptr.reshape(-1).tolist()
    greedy = is_greedy_ptr.tolist()
    for i, (s, e) in enumerate(_offsets(cu_num_draft_tokens_ptr)):
        if greedy[i]:
            continue
        rejected = False
        for pos in range(e - s):
            d = draft[s + pos]
            u = uniform_probs_ptr[s + pos].to(torch.float64)
            if d < 0:
                accepted = False
            elif synthetic:
                accepted = bool(u < synthetic_conditional_rates_ptr[pos].to(torch.float64))
            else:
                tp = target_probs_ptr[s + pos, d]
                dp = (
                    torch.ones((), dtype=torch.float32) if no_draft else draft_probs_ptr[s + pos, d]
                )
                # float32 quotient, compared in float64
                accepted = bool(dp > 0) and bool((tp / dp).to(torch.float64) >= u)
            if accepted:
                _store(out, i, pos, d)
            else:
                _store(out, i, pos, recovered[s + pos])
                rejected = True
                break
        if not rejected:
            _store(out, i, e - s, bonus[i])


def sample_recovered_tokens_kernel(
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    draft_probs_ptr,
    target_probs_ptr,
    inv_q_ptr,
    vocab_size,
    BLOCK_SIZE=None,
    NO_DRAFT_PROBS=None,
    USE_FP64_GUMBEL=None,
):
    no_draft = _flag(NO_DRAFT_PROBS, draft_probs_ptr is None)
    V = int(vocab_size)
    for i, (s, e) in enumerate(_offsets(cu_num_draft_tokens_ptr)):
        for tok in range(s, e):
            if V == 0:
                output_token_ids_ptr[tok] = -1  # min(0, V - 1), as the kernel's clamp gives
                continue
            if no_draft:
                prob = target_probs_ptr[tok].clone()
                d = int(draft_token_ids_ptr[tok])
                if 0 <= d < V:
                    prob[d] = 0.0
            else:
                diff = target_probs_ptr[tok] - draft_probs_ptr[tok]
                prob = torch.where(diff > 0, diff, torch.zeros_like(diff))  # NaN -> 0
            score = prob * inv_q_ptr[i]  # promotes to float64 with a float64 inv_q
            score = torch.where(score.isnan(), torch.full_like(score, float("-inf")), score)
            # torch.argmax returns the first maximal index; if every score is -inf the kernel's
            # initial index 0 stands, which is also argmax's answer
            output_token_ids_ptr[tok] = min(int(torch.argmax(score)), V - 1)
