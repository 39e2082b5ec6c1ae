"""The ops and the fused/vLLM entry points on the other layouts their callers pass.

``torch.multinomial(probs, 1)`` returns draft ids as ``[N, 1]``; vLLM's Python
``sample_recovered_tokens`` then allocates its output ``empty_like`` them and launches the
kernel on both. Every op and entry point must give, on such layouts, exactly the result of the
canonical ``[N]`` call (same tokens; an ``empty_like`` output keeps the caller's shape).
Expected values come from the canonical call, which ``test_ops.py`` checks against plain
references.
"""

import types

import pytest
import torch

import fastdispatch.ops as ops
from fastdispatch.ops import fused

IDX = [torch.int32, torch.int64]


def _batch(g, idx, counts, V):
    T = sum(counts)
    cu = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(idx)
    drafts = torch.randint(0, V, (T,), generator=g).to(idx)
    logits = torch.randn((T, V), generator=g)
    probs = logits.softmax(-1)
    dprobs = torch.rand((T, V), generator=g).softmax(-1)
    bonus = torch.randint(0, V, (len(counts), 1), generator=g)
    return cu, drafts, logits, probs, dprobs, bonus


@pytest.mark.parametrize("idx", IDX)
def test_sample_recovered_tokens_column_drafts(idx):
    g = torch.Generator().manual_seed(11)
    cu, drafts, _, probs, dprobs, _ = _batch(g, idx, [2, 0, 3, 1], 13)
    inv_q = torch.rand((4, 13), generator=g) + 0.5
    for draft_probs in (None, dprobs):
        flat = ops.sample_recovered_tokens(cu, drafts, draft_probs, probs, inv_q, 3)
        col = ops.sample_recovered_tokens(cu, drafts.view(-1, 1), draft_probs, probs, inv_q, 3)
        assert col.shape == (drafts.numel(), 1) and col.dtype == idx
        assert torch.equal(col.view(-1), flat)


@pytest.mark.parametrize("idx", IDX)
def test_rejection_sample_column_drafts_and_bonus(idx):
    g = torch.Generator().manual_seed(12)
    counts = [3, 1, 0, 2]
    cu, drafts, logits, _, dprobs, bonus = _batch(g, idx, counts, 9)
    is_greedy = torch.tensor([True, False, True, False])
    uniform = torch.rand(sum(counts), dtype=torch.float64, generator=g)
    inv_q = torch.rand((4, 9), generator=g) + 0.5
    kw = dict(draft_probs=dprobs, is_greedy=is_greedy, uniform_probs=uniform, inv_q=inv_q)
    flat = ops.rejection_sample(drafts, cu, 3, logits, bonus.view(-1), **kw)
    col = ops.rejection_sample(drafts.view(-1, 1), cu, 3, logits, bonus, **kw)
    assert torch.equal(col, flat)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_expand_column_values(dtype):
    x = torch.tensor([4, 0, 7], dtype=dtype)
    cu = torch.tensor([2, 2, 5], dtype=torch.int32)
    flat = ops.expand_batch_to_tokens(x, cu, 5, replace_from=0, replace_to=1)
    col = ops.expand_batch_to_tokens(x.view(3, 1), cu.view(3, 1), 5, replace_from=0, replace_to=1)
    assert torch.equal(col, flat)


@pytest.mark.parametrize("idx", IDX)
def test_fused_recovered_tokens_column_drafts(idx):
    g = torch.Generator().manual_seed(13)
    cu, drafts, _, probs, dprobs, _ = _batch(g, idx, [1, 4, 2], 17)
    seeds = fused.request_seeds(3)
    for draft_probs in (None, dprobs):
        flat = fused.sample_recovered_tokens_fused(
            cu, drafts, probs, draft_probs=draft_probs, seeds=seeds
        )
        col = fused.sample_recovered_tokens_fused(
            cu, drafts.view(-1, 1), probs, draft_probs=draft_probs, seeds=seeds
        )
        assert col.shape == (drafts.numel(), 1)
        assert torch.equal(col.view(-1), flat)


def _metadata(B, greedy):
    return types.SimpleNamespace(
        generators={},
        all_greedy=all(greedy),
        all_random=not any(greedy),
        temperature=torch.tensor([0.0 if gr else 1.0 for gr in greedy]),
    )


@pytest.mark.parametrize("idx", IDX)
def test_vllm_entry_points_take_column_drafts(idx):
    """vLLM's ``sample_recovered_tokens`` signature with ``[N, 1]`` draft ids (what stock vLLM
    passes on after ``torch.multinomial``): an ``[N, 1]`` result equal to the ``[N]`` call's."""
    g = torch.Generator().manual_seed(14)
    counts = [2, 3, 0]
    cu, drafts, logits, probs, dprobs, bonus = _batch(g, idx, counts, 21)
    md = _metadata(3, [False, False, True])
    torch.manual_seed(0)
    flat = fused.vllm_sample_recovered_tokens(3, counts, cu, drafts, dprobs, probs, md, "cpu")
    torch.manual_seed(0)
    col = fused.vllm_sample_recovered_tokens(
        3, counts, cu, drafts.view(-1, 1), dprobs, probs, md, "cpu"
    )
    assert col.shape == (5, 1) and torch.equal(col.view(-1), flat)
    md = _metadata(3, [True, True, True])
    a = fused.vllm_rejection_sample(drafts, counts, 3, cu, None, logits, bonus, md)
    b = fused.vllm_rejection_sample(drafts.view(-1, 1), counts, 3, cu, None, logits, bonus, md)
    assert torch.equal(a, b)
