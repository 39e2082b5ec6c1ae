"""Random rejection sampling on CPU without the ``[B, V]`` exponential noise tensor.

    from fastdispatch.ops.fused import rejection_sample_fused
    out = rejection_sample_fused(draft_ids, cu, max_spec_len, target_probs, bonus_ids,
                                 draft_probs=draft_probs, generators={3: seeded_generator})

vLLM's random path draws ``q.exponential_()`` over ``[B, V]`` for every step (85-90 % of the step
on CPU) and computes a recovered token for every draft position although only the first rejected
one is used. ``kernels_cpu._fused`` draws its noise inside the vocabulary loop from Philox-4x32-10
and computes a recovered token only where one is emitted. This module turns a batch's randomness
into the kernel's per-request ``(key, stream)`` seeds and offers vLLM-signature drop-ins.

Randomness contract: one 63-bit key per call from torch's default generator (requests tell their
streams apart by batch index), except that a request with its own ``torch.Generator`` (vLLM's
``sampling_metadata.generators``) draws its own key from it -- one draw per step, and none when it
has no draft tokens, as in vLLM -- so a seeded request repeats its tokens whatever else is in the
batch. The stream differs from stock vLLM's; the distribution is the same (speculative sampling's
output law is the target distribution), and the same seeds give the same tokens at any thread
count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from kernels_cpu import _fused

from . import _checks

__all__ = [
    "SEEDED_STREAM",
    "fastdispatch_fused_vllm_overrides",
    "fused_kernel_overrides",
    "rejection_sample_fused",
    "rejection_sample_fused_logits",
    "request_seeds",
    "sample_recovered_tokens_fused",
    "vllm_rejection_sample",
    "vllm_sample_recovered_tokens",
]

#: stream id of requests seeded by their own generator (unseeded ones use their batch index)
SEEDED_STREAM = -1

_VLLM_MODULE = "vllm.v1.sample.rejection_sampler"


def _draw_key(generator: torch.Generator | None) -> int:
    # int64 random_() draws uniformly from [0, 2**63): one generator step per key
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator))


def request_seeds(
    batch_size: int,
    generators: Mapping[int, torch.Generator] | None = None,
    num_draft_tokens: Sequence[int] | None = None,
) -> torch.Tensor:
    """Per-request ``(key, stream)`` rows (int64 ``[batch_size, 2]``) for the fused kernels.

    Unseeded requests share one key drawn from torch's default generator and use their batch
    index as stream; a request with a generator in ``generators`` gets a key drawn from it and
    stream ``SEEDED_STREAM``, so its noise does not depend on its batch slot. Requests with no
    draft tokens (when ``num_draft_tokens`` is given) leave their generator untouched.
    """
    seeds = torch.empty((batch_size, 2), dtype=torch.int64)
    seeds[:, 0] = _draw_key(None)
    seeds[:, 1] = torch.arange(batch_size, dtype=torch.int64)
    if generators:
        for i, gen in generators.items():
            if not 0 <= i < batch_size:
                raise IndexError(
                    _checks.expected("generators", f"request indices in [0, {batch_size})", i)
                )
            if num_draft_tokens is not None and num_draft_tokens[i] == 0:
                continue
            seeds[i, 0] = _draw_key(gen)
            seeds[i, 1] = SEEDED_STREAM
    return seeds


def _num_drafts(cu_num_draft_tokens: torch.Tensor) -> list[int]:
    cu = cu_num_draft_tokens.tolist()
    return [c - p for p, c in zip([0] + cu[:-1], cu)]


def _call_seeds(
    seeds: torch.Tensor | None,
    cu_num_draft_tokens: torch.Tensor,
    generators: Mapping[int, torch.Generator] | None,
    num_draft_tokens: Sequence[int] | None,
) -> torch.Tensor:
    """The ops' ``seeds``: as given, else ``request_seeds`` for the batch (draft counts read from
    ``cu_num_draft_tokens`` only when a request has its own generator and none were passed)."""
    _checks.offsets("cu_num_draft_tokens", cu_num_draft_tokens)
    if seeds is not None:
        return seeds
    if num_draft_tokens is None and generators:
        num_draft_tokens = _num_drafts(cu_num_draft_tokens)
    return request_seeds(cu_num_draft_tokens.shape[0], generators, num_draft_tokens)


def rejection_sample_fused(
    draft_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    max_spec_len: int,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    is_greedy: torch.Tensor | None = None,
    greedy_scores: torch.Tensor | None = None,
    generators: Mapping[int, torch.Generator] | None = None,
    num_draft_tokens: Sequence[int] | None = None,
    synthetic_rates: torch.Tensor | None = None,
    seeds: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.int32,
) -> torch.Tensor:
    """One rejection-sampling step; returns ``[B, max_spec_len + 1]`` tokens, -1 where none.

    ``target_probs`` [T, V] float32 (softmaxed); ``draft_probs`` [T, V] or None (ngram-style
    drafts: the draft id is masked from the recovered distribution). ``is_greedy`` [B] bool or
    None (all random); greedy requests take the argmax of their ``greedy_scores`` rows (default
    ``target_probs``; pass the logits to match vLLM, which argmaxes logits). ``seeds`` overrides
    ``request_seeds(B, generators, num_draft_tokens)``.
    """
    batch_size = cu_num_draft_tokens.shape[0]
    out = torch.full((batch_size, max_spec_len + 1), -1, dtype=out_dtype)
    seeds = _call_seeds(seeds, cu_num_draft_tokens, generators, num_draft_tokens)
    _fused.rejection_sample_step(
        out,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        bonus_token_ids,
        is_greedy,
        greedy_scores,
        seeds,
        max_spec_len,
        synthetic_rates,
    )
    return out


def rejection_sample_fused_logits(
    draft_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    max_spec_len: int,
    target_logits: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    is_greedy: torch.Tensor | None = None,
    generators: Mapping[int, torch.Generator] | None = None,
    num_draft_tokens: Sequence[int] | None = None,
    synthetic_rates: torch.Tensor | None = None,
    seeds: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.int32,
) -> torch.Tensor:
    """``rejection_sample_fused`` on logits [T, V] float32: random requests sample against
    ``softmax(target_logits)`` computed row by row where needed; greedy requests argmax logits."""
    batch_size = cu_num_draft_tokens.shape[0]
    out = torch.full((batch_size, max_spec_len + 1), -1, dtype=out_dtype)
    seeds = _call_seeds(seeds, cu_num_draft_tokens, generators, num_draft_tokens)
    _fused.rejection_sample_step_logits(
        out,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_logits,
        bonus_token_ids,
        is_greedy,
        seeds,
        max_spec_len,
        synthetic_rates,
    )
    return out


def sample_recovered_tokens_fused(
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    generators: Mapping[int, torch.Generator] | None = None,
    num_draft_tokens: Sequence[int] | None = None,
    seeds: torch.Tensor | None = None,
) -> torch.Tensor:
    """Recovered token of every draft position (same dtype as ``draft_token_ids``)."""
    seeds = _call_seeds(seeds, cu_num_draft_tokens, generators, num_draft_tokens)
    out = torch.empty_like(draft_token_ids)
    _fused.recovered_tokens(
        out, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, seeds
    )
    return out


# ---------------------------------------------------------------------------------------------
# vLLM-signature drop-ins (vllm.v1.sample.rejection_sampler, vLLM 0.32.0)
# ---------------------------------------------------------------------------------------------


def vllm_sample_recovered_tokens(
    max_spec_len: int,
    num_draft_tokens: Sequence[int],
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    sampling_metadata: Any,
    device: torch.device | str,
    use_fp64_gumbel: bool = False,
) -> torch.Tensor:
    """Replaces ``rejection_sampler.sample_recovered_tokens``: same arguments, no ``q`` tensor.

    ``use_fp64_gumbel`` is accepted and needs no action: the race's exponentials and scores are
    float64 already.
    """
    seeds = request_seeds(len(num_draft_tokens), sampling_metadata.generators, num_draft_tokens)
    out = torch.empty_like(draft_token_ids)
    _fused.recovered_tokens(
        out, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, seeds
    )
    return out


def vllm_rejection_sample(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: Sequence[int],
    max_spec_len: int,
    cu_num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    sampling_metadata: Any,
    synthetic_mode: bool = False,
    synthetic_conditional_rates: torch.Tensor | None = None,
    use_fp64_gumbel: bool = False,
) -> torch.Tensor:
    """Replaces ``rejection_sampler.rejection_sample``: same arguments and result, fused noise.

    As vLLM: greedy requests (temperature 0) take the argmax of their logits, random requests
    sample against ``softmax(target_logits)``; synthetic mode accepts with the given per-position
    rates. Unlike vLLM, no probability, uniform or exponential tensor is materialised: each row
    is normalised in the kernel only when the walk reaches it, and a recovered token is computed
    only where one is emitted (``rejection_sample_step_logits``).
    """
    batch_size = len(num_draft_tokens)
    out = torch.full((batch_size, max_spec_len + 1), -1, dtype=torch.int32)
    all_greedy = bool(sampling_metadata.all_greedy)
    logits = target_logits
    if logits.dtype != torch.float32:
        logits = logits.to(torch.float32)
    logits = logits.contiguous()
    is_greedy: torch.Tensor | None
    if all_greedy:
        is_greedy = torch.ones(batch_size, dtype=torch.bool)
    else:
        is_greedy = None if sampling_metadata.all_random else (sampling_metadata.temperature == 0)
    rates = synthetic_conditional_rates if synthetic_mode else None
    if all_greedy and rates is None:
        # nothing random: leave every generator where it is, as vLLM does
        seeds = torch.zeros((batch_size, 2), dtype=torch.int64)
    else:
        seeds = request_seeds(batch_size, sampling_metadata.generators, num_draft_tokens)
    _fused.rejection_sample_step_logits(
        out,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        logits,
        bonus_token_ids,
        is_greedy,
        seeds,
        max_spec_len,
        rates,
    )
    return out


def fastdispatch_fused_vllm_overrides(whole_step: bool = True) -> dict[str, Callable[..., Any]]:
    """``{qualified name: replacement}`` for ``register_kernels``, routing vLLM through the fused
    path.

    * ``...rejection_sampler.sample_recovered_tokens`` -> ``vllm_sample_recovered_tokens``: the
      Python function that allocates and fills ``q``; replacing it removes the ``[B, V]`` noise.
    * with ``whole_step`` also ``...rejection_sampler.rejection_sample`` ->
      ``vllm_rejection_sample``: no uniform tensor, and recovered tokens only where emitted.

    Both are looked up by ``RejectionSampler.forward``/``rejection_sample`` as module globals, so
    the rebinding pass that swaps module attributes reaches them. Opt-in: the random stream
    differs from stock vLLM (same distribution; seeded requests stay reproducible).
    """
    mapping: dict[str, Callable[..., Any]] = {
        f"{_VLLM_MODULE}.sample_recovered_tokens": vllm_sample_recovered_tokens
    }
    if whole_step:
        mapping[f"{_VLLM_MODULE}.rejection_sample"] = vllm_rejection_sample
    return mapping


def fused_kernel_overrides() -> dict[str, Callable[..., Any]]:
    """Kernel-level alternative: ``sample_recovered_tokens_kernel`` -> the fused kernel.

    It ignores ``inv_q``'s values (keys come from each row's first 8 bytes, so seeded requests
    stay reproducible) but vLLM still draws ``inv_q``: prefer ``fastdispatch_fused_vllm_overrides``.
    """
    return {
        f"{_VLLM_MODULE}.sample_recovered_tokens_kernel": (
            _fused.sample_recovered_tokens_kernel_fused
        )
    }
