"""Rejection-sampling ops for speculative decoding, launched through ``kernel_dispatcher``.

    out = rejection_sample(draft_ids, cu_num_draft_tokens, max_spec_len, target_logits,
                           bonus_ids, is_greedy=temperature == 0, generators={0: g})

Each op prepares buffers and random draws in torch and launches one of our Triton kernels through
a launch owner; whichever implementation the owner holds runs -- the Triton kernel natively on a
GPU, interpreted under ``TRITON_INTERPRET=1``, or the ``kernels_cpu`` implementation registered
over it when no Triton driver is usable. The algorithm is that of Leviathan et al. (2023)
as vLLM implements it: greedy requests accept drafts while they match the target argmax;
random requests accept a draft with probability ``min(1, target/draft)`` and otherwise emit a
token drawn from ``max(target - draft, 0)`` by the exponential-race (Gumbel) trick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from .. import kernel_dispatcher
from . import _checks
from .triton_kernels.sampling import (
    expand_kernel,
    rejection_greedy_sample_kernel,
    rejection_random_sample_kernel,
    sample_recovered_tokens_kernel,
)

__all__ = [
    "PLACEHOLDER_TOKEN_ID",
    "expand_batch_to_tokens",
    "generate_inv_q",
    "generate_uniform_probs",
    "rejection_sample",
    "sample_recovered_tokens",
]

#: Output slots a request did not fill (rejected tail) hold this id.
PLACEHOLDER_TOKEN_ID = -1
#: Tokens one ``expand_kernel`` program writes per step.
_EXPAND_CHUNK = 128
#: Vocabulary entries one ``sample_recovered_tokens_kernel`` program scores per step.
_RECOVERED_BLOCK = 8192

_FLOATS = (torch.float32, torch.float64)
_INDEX = (torch.int32, torch.int64)


# -- launch owners: dispatch parameter ``x`` binds kernel argument ``x``/``x_ptr`` ----------------


@kernel_dispatcher(kernel=expand_kernel)
def _expand(output, input, cu_num_tokens, replace_from, replace_to):
    grid = (input.shape[0],) if input.shape[0] else None
    return grid, dict(MAX_NUM_TOKENS=_EXPAND_CHUNK)


@kernel_dispatcher(kernel=rejection_greedy_sample_kernel)
def _rejection_greedy_sample(
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    target_argmax,
    bonus_token_ids,
    is_greedy,
    max_spec_len,
    uniform_probs,
    synthetic_conditional_rates,
):
    grid = (output_token_ids.shape[0],) if output_token_ids.shape[0] else None
    return grid, dict(SYNTHETIC_MODE=synthetic_conditional_rates is not None)


@kernel_dispatcher(kernel=rejection_random_sample_kernel)
def _rejection_random_sample(
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    draft_probs,
    target_probs,
    bonus_token_ids,
    recovered_token_ids,
    uniform_probs,
    is_greedy,
    max_spec_len,
    synthetic_conditional_rates,
):
    grid = (output_token_ids.shape[0],) if output_token_ids.shape[0] else None
    return grid, dict(
        vocab_size=target_probs.shape[1],
        NO_DRAFT_PROBS=draft_probs is None,
        SYNTHETIC_MODE=synthetic_conditional_rates is not None,
    )


@kernel_dispatcher(kernel=sample_recovered_tokens_kernel)
def _sample_recovered_tokens(
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    draft_probs,
    target_probs,
    inv_q,
    max_spec_len,
):
    batch = cu_num_draft_tokens.shape[0]
    grid = (batch, max_spec_len) if batch and max_spec_len and output_token_ids.shape[0] else None
    return grid, dict(
        vocab_size=target_probs.shape[1],
        BLOCK_SIZE=_RECOVERED_BLOCK,
        NO_DRAFT_PROBS=draft_probs is None,
        USE_FP64_GUMBEL=inv_q.dtype == torch.float64,
    )


# -- ops ----------------------------------------------------------------------------------------


def expand_batch_to_tokens(
    x: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    num_tokens: int,
    replace_from: float = 0,
    replace_to: float = 0,
) -> torch.Tensor:
    """Repeat per-request values per token: ``[a, b, c]`` with ``cu = [2, 5, 6]`` gives
    ``[a, a, b, b, b, c]``; values equal to ``replace_from`` become ``replace_to`` (vLLM uses it
    to turn a greedy temperature of 0 into 1). Returns a new ``[num_tokens]`` tensor of
    ``x``'s dtype (float32, int32 or int64)."""
    _checks.vector("x", x, (torch.float32, torch.int32, torch.int64))
    _checks.index_vector("cu_num_tokens", cu_num_tokens, x.shape[0])
    _checks.same_device(x=x, cu_num_tokens=cu_num_tokens)
    if num_tokens < 0:
        raise ValueError(_checks.expected("num_tokens", ">= 0", num_tokens))
    out = x.new_empty(num_tokens)
    _expand(out, x, cu_num_tokens, replace_from, replace_to)
    return out


def _draft_counts(
    num_draft_tokens: Sequence[int] | None, cu_num_draft_tokens: torch.Tensor
) -> list[int]:
    if num_draft_tokens is not None:
        counts = list(num_draft_tokens)
        if len(counts) != cu_num_draft_tokens.shape[0]:
            raise ValueError(
                _checks.expected(
                    "num_draft_tokens",
                    f"{cu_num_draft_tokens.shape[0]} entries (one per request)",
                    len(counts),
                )
            )
        return counts
    cu = cu_num_draft_tokens.tolist()  # a device sync on GPU: pass num_draft_tokens to avoid
    return [b - a for a, b in zip([0] + cu[:-1], cu)]


def generate_uniform_probs(
    num_tokens: int,
    num_draft_tokens: Sequence[int] | None,
    generators: Mapping[int, torch.Generator] | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """``[num_tokens]`` float64 uniforms in [0, 1), one per draft token.

    float64 because float32 ``rand`` returns exactly 0.0 often enough to matter (an accept test
    ``ratio >= 0`` that always passes). Requests with a generator in ``generators`` (request
    index -> ``torch.Generator``) redraw their own slice from it, so a seeded request gets the
    same numbers whatever else is in the batch; requests without drafts draw nothing.
    """
    uniform = torch.rand((num_tokens,), dtype=torch.float64, device=device)
    if generators:
        start = 0
        # the counts may be None only without generators
        for req, n in enumerate(num_draft_tokens):  # type: ignore[arg-type]
            if n == 0:
                continue
            gen = generators.get(req)
            if gen is not None:
                uniform[start : start + n].uniform_(generator=gen)
            start += n
    return uniform


def generate_inv_q(
    batch_size: int,
    vocab_size: int,
    num_draft_tokens: Sequence[int] | None,
    generators: Mapping[int, torch.Generator] | None = None,
    device: torch.device | str = "cpu",
    use_fp64_gumbel: bool = False,
) -> torch.Tensor:
    """``1 / q`` for ``q ~ Exp(1)`` of shape ``[batch_size, vocab_size]``, one row per request.

    ``argmax_v p[v] / q[v]`` is a sample from ``p`` (normalized or not): the exponential race.
    Seeded requests redraw their row from their generator when they have drafts.
    """
    dtype = torch.float64 if use_fp64_gumbel else torch.float32
    q = torch.empty((batch_size, vocab_size), dtype=dtype, device=device)
    q.exponential_()
    if generators:
        for req, gen in generators.items():
            if num_draft_tokens[req] > 0:  # type: ignore[index]  # given with generators
                q[req].exponential_(generator=gen)
    return q.reciprocal_()


def sample_recovered_tokens(
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    inv_q: torch.Tensor,
    max_spec_len: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The recovered token of every draft position: ``argmax_v p[v] * inv_q[req, v]`` with
    ``p = max(target - draft, 0)`` (or ``target`` minus the draft token itself without draft
    probabilities); lowest index on ties. Returns ``[T]`` in ``draft_token_ids``' dtype."""
    B = cu_num_draft_tokens.shape[0]
    _checks.index_vector("cu_num_draft_tokens", cu_num_draft_tokens)
    _checks.index_vector("draft_token_ids", draft_token_ids)
    T = draft_token_ids.shape[0]
    _checks.matrix("target_probs", target_probs, (torch.float32,), rows=T)
    V = target_probs.shape[1]
    if draft_probs is not None:
        _checks.matrix("draft_probs", draft_probs, (torch.float32,), rows=T, cols=V)
    _checks.matrix("inv_q", inv_q, _FLOATS, rows=B, cols=V)
    if out is None:
        out = torch.empty_like(draft_token_ids)
    else:
        _checks.index_vector("out", out, T)
    _sample_recovered_tokens(
        out, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, inv_q, max_spec_len
    )
    return out


def rejection_sample(
    draft_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    max_spec_len: int,
    target_logits: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    is_greedy: torch.Tensor | None = None,
    all_random: bool = False,
    num_draft_tokens: Sequence[int] | None = None,
    generators: Mapping[int, torch.Generator] | None = None,
    synthetic_conditional_rates: torch.Tensor | None = None,
    use_fp64_gumbel: bool = False,
    uniform_probs: torch.Tensor | None = None,
    inv_q: torch.Tensor | None = None,
    target_probs: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.int32,
) -> torch.Tensor:
    """Speculative-decoding rejection sampling for a batch of requests.

    Arguments (B requests, T draft tokens in all, V vocabulary entries, K = ``max_spec_len``):

    ``draft_token_ids`` [T] int32/int64 (-1: a padded draft, always rejected);
    ``cu_num_draft_tokens`` [B] inclusive cumulative draft counts;
    ``target_logits`` [T, V] the target model's processed logits: greedy requests compare drafts
    with their argmax, random requests sample from their float32 softmax;
    ``bonus_token_ids`` [B] (or [B, 1]) int64, appended when every draft is accepted;
    ``draft_probs`` [T, V] float32 or None (then the draft is taken as certain);
    ``is_greedy`` [B] bool, or None when every request is greedy; ``all_random`` skips the
    greedy pass when no request is greedy;
    ``num_draft_tokens`` the per-request counts as a list (saves a device sync with generators);
    ``generators`` request index -> ``torch.Generator`` for seeded requests;
    ``synthetic_conditional_rates`` [K] float32: synthetic acceptance (accept draft ``pos`` when
    ``uniform < rate[pos]``), for benchmarking acceptance lengths;
    ``uniform_probs`` [T] float64 / ``inv_q`` [B, V]: supply the random draws instead;
    ``target_probs`` [T, V] float32: the softmax of ``target_logits`` when already at hand.

    Returns ``[B, K + 1]`` of ``out_dtype``: accepted drafts, then the recovered (or bonus)
    token, then ``PLACEHOLDER_TOKEN_ID``.
    """
    _checks.index_vector("draft_token_ids", draft_token_ids)
    _checks.index_vector("cu_num_draft_tokens", cu_num_draft_tokens)
    B, T = cu_num_draft_tokens.shape[0], draft_token_ids.shape[0]
    _checks.matrix("target_logits", target_logits, rows=T)
    V = target_logits.shape[1]
    if max_spec_len < 0:
        raise ValueError(_checks.expected("max_spec_len", ">= 0", max_spec_len))
    if bonus_token_ids.dim() == 2 and bonus_token_ids.shape[1] == 1:
        bonus_token_ids = bonus_token_ids.view(-1)
    _checks.index_vector("bonus_token_ids", bonus_token_ids, B)
    if draft_probs is not None:
        _checks.matrix("draft_probs", draft_probs, (torch.float32,), rows=T, cols=V)
    if is_greedy is not None:
        _checks.vector("is_greedy", is_greedy, (torch.bool,), B)
    if synthetic_conditional_rates is not None:
        _checks.vector("synthetic_conditional_rates", synthetic_conditional_rates, (torch.float32,))
        if synthetic_conditional_rates.shape[0] < max_spec_len:
            raise ValueError(
                _checks.expected(
                    "synthetic_conditional_rates",
                    f"at least max_spec_len = {max_spec_len} entries",
                    synthetic_conditional_rates.shape[0],
                )
            )
    device = target_logits.device
    _checks.same_device(
        draft_token_ids=draft_token_ids,
        cu_num_draft_tokens=cu_num_draft_tokens,
        target_logits=target_logits,
        bonus_token_ids=bonus_token_ids,
        draft_probs=draft_probs,
        is_greedy=is_greedy,
    )
    all_greedy = is_greedy is None and not all_random
    synthetic = synthetic_conditional_rates is not None

    out = torch.full((B, max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=out_dtype, device=device)
    counts = _draft_counts(num_draft_tokens, cu_num_draft_tokens) if generators else None
    if synthetic or not all_greedy:
        if uniform_probs is None:
            uniform_probs = generate_uniform_probs(T, counts, generators, device)
        _checks.vector("uniform_probs", uniform_probs, (torch.float64,), T)

    if not all_random:
        target_argmax = target_logits.argmax(dim=-1)
        _rejection_greedy_sample(
            out,
            cu_num_draft_tokens,
            draft_token_ids,
            target_argmax,
            bonus_token_ids,
            is_greedy,
            max_spec_len,
            uniform_probs if synthetic else None,
            synthetic_conditional_rates,
        )
        if all_greedy:
            return out

    if target_probs is None:
        target_probs = target_logits.softmax(dim=-1, dtype=torch.float32).contiguous()
    else:
        _checks.matrix("target_probs", target_probs, (torch.float32,), rows=T, cols=V)
    if inv_q is None:
        inv_q = generate_inv_q(B, V, counts, generators, device, use_fp64_gumbel)
    recovered = sample_recovered_tokens(
        cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, inv_q, max_spec_len
    )
    if is_greedy is None:  # all random
        is_greedy = torch.zeros(B, dtype=torch.bool, device=device)
    _rejection_random_sample(
        out,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        bonus_token_ids,
        recovered,
        uniform_probs,
        is_greedy,
        max_spec_len,
        synthetic_conditional_rates,
    )
    return out
