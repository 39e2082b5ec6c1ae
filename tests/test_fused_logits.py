"""``rejection_sample_step_logits``: the step with the softmax folded into the walk.

Token-exact against the Python twin (which emulates the kernels' float32 exp operation by
operation), the target law by chi-square, thread invariance, and validation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu
from kernels_cpu import _fused
from tests._fused_helpers import (
    chi2_pvalue,
    draw_step_case,
    expf,
    reference_step_logits,
    step_bonus_greedy,
    step_start,
)
from tests._fuzz import fuzz_settings

ALPHA = 1e-4
IDX = (torch.int32, torch.int64)


def test_expf_accuracy_and_edges():
    x = -torch.rand(200_000, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 87
    x32 = x.float()
    got = _fused._expf_values(x32).double()
    want = torch.exp(x32.double())
    assert ((got - want).abs() / want).max().item() < 2 * 2.0**-24
    edge = torch.tensor([0.0, -0.0, -1e-30, float("-inf"), float("nan"), -87.0, -87.5, -300.0])
    e = _fused._expf_values(edge).tolist()
    assert e[0] == e[1] == e[2] == 1.0 and e[3] == 0.0 and math.isnan(e[4])
    assert 0 < e[5] < 2e-38 and e[6] == 0.0 and e[7] == 0.0


def test_expf_twin_is_bit_exact():
    gen = torch.Generator().manual_seed(1)
    x = torch.cat(
        [
            -torch.rand(100_000, generator=gen) * 90,
            -torch.rand(1000, generator=gen) * 1e-3,
            torch.tensor([0.0, float("-inf"), -87.33654, -87.33653]),
        ]
    )
    assert np.array_equal(
        _fused._expf_values(x).numpy().view(np.uint32), expf(x.numpy()).view(np.uint32)
    )


@st.composite
def case(draw):
    return draw_step_case(draw, "synthetic", "masked")


def build(c):
    gen, B, K, V, counts, T, (out_dt, cu_dt, d_dt, b_dt) = step_start(c)
    logits = torch.randn(T, V, generator=gen) * 3
    if c["masked"]:  # top-k style -inf entries
        logits[torch.rand(T, V, generator=gen) < 0.3] = float("-inf")
        if T:
            logits[:, 0] = 0.0
    q = torch.softmax(torch.randn(T, V, generator=gen), -1) if c["with_q"] else None
    draft = torch.randint(-1, V, (T,), generator=gen).to(d_dt)
    if T and V > 1:
        take = torch.rand(T, generator=gen) < 0.5
        draft[take] = logits.argmax(-1)[take].to(d_dt)
    bonus, greedy = step_bonus_greedy(gen, c, b_dt)
    return dict(
        cu=torch.tensor(np.cumsum(counts), dtype=cu_dt),
        logits=logits,
        q=q,
        draft=draft,
        bonus=bonus,
        greedy=greedy,
        rates=torch.rand(max(K, 1), generator=gen) if c["synthetic"] else None,
        seeds=torch.randint(-(2**63), 2**63 - 1, (B, 2), generator=gen),
        B=B,
        K=K,
        out_dt=out_dt,
    )


def fixed_case(B, K, V, seed, greedy, masked):
    """A drawn case written out: every request with ``K`` drafts, draft probabilities, no
    synthetic mode, int32 indices."""
    return dict(
        B=B,
        K=K,
        counts=[K] * B,
        V=V,
        seed=seed,
        with_q=True,
        greedy=greedy,
        synthetic=False,
        masked=masked,
        dt=[torch.int32] * 4,
    )


def step_args(b):
    """The step's arguments after the output, in order: the kernel's and the reference's alike."""
    return [b[k] for k in ("cu", "draft", "q", "logits", "bonus", "greedy", "seeds", "K", "rates")]


def run(b, out=None):
    if out is None:
        out = torch.full((b["B"], b["K"] + 1), -1, dtype=b["out_dt"])
    _fused.rejection_sample_step_logits(out, *step_args(b))
    return out


@fuzz_settings(120, deadline=None, derandomize=True)
@given(case())
def test_matches_twin(c):
    b = build(c)
    buf = torch.full((b["B"] * (b["K"] + 1) + 8,), 777, dtype=b["out_dt"])
    out = buf[4:-4].view(b["B"], b["K"] + 1)
    out.fill_(-1)
    run(b, out)
    assert out.tolist() == reference_step_logits(*step_args(b))
    assert (buf[:4] == 777).all() and (buf[-4:] == 777).all()


def test_threads_do_not_change_tokens():
    old = kernels_cpu.parallel_threshold()
    kernels_cpu.set_parallel_threshold(0)
    try:
        b = build(fixed_case(B=12, K=3, V=5000, seed=3, greedy="mixed", masked=True))
        outs = set()
        for threads in (1, 2, 3):
            kernels_cpu.set_num_threads(threads)
            outs.add(tuple(run(b).reshape(-1).tolist()))
        assert len(outs) == 1
    finally:
        kernels_cpu.set_parallel_threshold(old)
        kernels_cpu.set_num_threads(None)


V = 1000
N = 12_000


@pytest.mark.parametrize("with_q", [True, False])
def test_emitted_tokens_follow_softmax(with_q):
    gen = torch.Generator().manual_seed(50)
    row = torch.full((V,), -30.0)
    hot = torch.randperm(V, generator=gen)[:30]
    row[hot] = torch.randn(30, generator=gen)
    p = torch.softmax(row.double(), -1)
    qrow = torch.softmax(row + torch.randn(V, generator=gen), -1)
    K = 2
    B = N // K
    T = B * K
    draft = torch.multinomial(qrow.double(), T, replacement=True, generator=gen).to(torch.int32)
    out = torch.full((B, K + 1), -1, dtype=torch.int32)
    _fused.rejection_sample_step_logits(
        out,
        torch.arange(K, T + 1, K),
        draft,
        qrow.expand(T, V).contiguous() if with_q else None,
        row.expand(T, V).contiguous(),
        torch.zeros(B, dtype=torch.int64),
        None,
        torch.randint(0, 2**62, (B, 2), generator=gen),
        K,
    )
    counts = np.bincount(out[:, 0].numpy(), minlength=V)
    assert chi2_pvalue(counts, p.numpy()) > ALPHA
    acc = out[:, 0] == draft[0::K]
    assert chi2_pvalue(np.bincount(out[acc, 1].numpy(), minlength=V), p.numpy()) > ALPHA


def test_agrees_with_probs_step_on_softmax():
    # same seeds, same tokens as the probability step fed torch.softmax (up to float rounding
    # of the normaliser, which moves a token only at a near-exact tie: none here)
    b = build(fixed_case(B=16, K=4, V=3000, seed=9, greedy="none", masked=False))
    out = run(b)
    ref = torch.full_like(out, -1)
    _fused.rejection_sample_step(
        ref,
        b["cu"],
        b["draft"],
        b["q"],
        b["logits"].softmax(-1),
        b["bonus"],
        None,
        None,
        b["seeds"],
        b["K"],
        None,
    )
    assert torch.equal(out, ref)


def test_all_masked_row():
    logits = torch.full((2, 300), float("-inf"))
    out = torch.full((1, 3), -1, dtype=torch.int32)
    _fused.rejection_sample_step_logits(
        out,
        torch.tensor([2]),
        torch.tensor([5, 6]),
        None,
        logits,
        torch.tensor([1]),
        None,
        torch.zeros((1, 2), dtype=torch.int64),
        2,
    )
    assert out.tolist() == [[0, -1, -1]]


@pytest.mark.parametrize(
    "name,bad,exc",
    [
        ("target_logits", torch.rand(5, 300, dtype=torch.float64), TypeError),
        ("target_logits", torch.rand(300, 5).t(), ValueError),
        ("target_logits", torch.rand(4, 300), ValueError),
        ("draft_token_ids", torch.tensor([1, 2, 300, 4, 5]), IndexError),
        ("cu_num_draft_tokens", torch.tensor([2, 1, 5]), ValueError),
        ("seeds", torch.zeros((2, 2), dtype=torch.int64), ValueError),
    ],
)
def test_bad_inputs(name, bad, exc):
    args = dict(
        output_token_ids=torch.full((3, 3), -7, dtype=torch.int32),
        cu_num_draft_tokens=torch.tensor([2, 3, 5]),
        draft_token_ids=torch.tensor([1, -1, 299, 4, 5]),
        draft_probs=None,
        target_logits=torch.randn(5, 300),
        bonus_token_ids=torch.zeros(3, dtype=torch.int64),
        is_greedy=None,
        seeds=torch.zeros((3, 2), dtype=torch.int64),
        max_spec_len=2,
    )
    _fused.rejection_sample_step_logits(
        **dict(args, output_token_ids=args["output_token_ids"].clone())
    )
    args[name] = bad
    with pytest.raises(exc, match=name):
        _fused.rejection_sample_step_logits(**args)
    assert (args["output_token_ids"] == -7).all()
