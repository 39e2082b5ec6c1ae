"""``kernels_cpu._fused``: token-exact agreement with the Python twin, invariance to threads and
chunking, the sampling distributions (chi-square), and validation."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fdkit.guards as fdguards
import kernels_cpu
from kernels_cpu import _fused
from tests._fused_helpers import (
    chi2_pvalue,
    draw_step_case,
    masses,
    recover,
    reference_step,
    spread_distribution,
    step_bonus_greedy,
    step_start,
)
from tests._fuzz import fuzz_settings

ALPHA = 1e-4  # significance of every chi-square test; seeds are fixed, so outcomes are too
POISON = fdguards.POISON_INT  # what an output the kernel does not write keeps
IDX = (torch.int32, torch.int64)


@pytest.fixture
def parallel_everything():
    old = kernels_cpu.parallel_threshold()
    kernels_cpu.set_parallel_threshold(0)
    yield
    kernels_cpu.set_parallel_threshold(old)
    kernels_cpu.set_num_threads(None)


def rand_probs(T, V, gen, zero_frac=0.2):
    p = torch.softmax(torch.randn(T, V, generator=gen) * 3, dim=-1)
    p[torch.rand(T, V, generator=gen) < zero_frac] = 0
    return p.contiguous()


@st.composite
def step_case(draw):
    return draw_step_case(draw, "scores", "synthetic")


def build(case):
    gen, B, K, V, counts, T, (out_dt, cu_dt, d_dt, b_dt) = step_start(case)
    cu = torch.tensor(np.cumsum(counts), dtype=cu_dt)
    t = rand_probs(T, V, gen)
    q = rand_probs(T, V, gen) if case["with_q"] else None
    draft = torch.randint(-1, V, (T,), generator=gen).to(d_dt)
    if T and V > 1:  # make acceptance common: half the drafts are the target's argmax
        take = torch.rand(T, generator=gen) < 0.5
        draft[take] = t.argmax(-1)[take].to(d_dt)
    bonus, greedy = step_bonus_greedy(gen, case, b_dt)
    scores = torch.randn(T, V, generator=gen) if case["scores"] else None
    rates = torch.rand(max(K, 1), generator=gen) if case["synthetic"] else None
    seeds = torch.randint(-(2**63), 2**63 - 1, (B, 2), generator=gen)
    return dict(
        cu=cu,
        t=t,
        q=q,
        draft=draft,
        bonus=bonus,
        greedy=greedy,
        scores=scores,
        rates=rates,
        seeds=seeds,
        B=B,
        K=K,
        T=T,
        V=V,
        out_dt=out_dt,
    )


def step_args(c):
    """The step's arguments after the output, in order: the kernel's and the reference's alike."""
    keys = ("cu", "draft", "q", "t", "bonus", "greedy", "scores", "seeds", "K", "rates")
    return [c[k] for k in keys]


def run_step(c, out):
    _fused.rejection_sample_step(out, *step_args(c))


@fuzz_settings(150, deadline=None, derandomize=True)
@given(step_case())
def test_step_matches_twin(case):
    c = build(case)
    buf, out = fdguards.guarded((c["B"], c["K"] + 1), c["out_dt"])
    run_step(c, out)
    ref = reference_step(*step_args(c))
    ref = [[POISON if v == -1 else v for v in row] for row in ref]
    assert out.tolist() == ref
    assert fdguards.guards_intact(buf, out)


@fuzz_settings(60, deadline=None, derandomize=True)
@given(step_case())
def test_recovered_matches_twin(case):
    c = build(case)
    if c["V"] == 1 and c["q"] is None:
        pass  # draft id 0 masked: the all-zero row gives id 0
    buf, out = fdguards.guarded((c["T"],), c["out_dt"])
    _fused.recovered_tokens(out, c["cu"], c["draft"], c["q"], c["t"], c["seeds"])
    cu = [0] + c["cu"].tolist()
    ref = []
    for r in range(c["B"]):
        key, stream = c["seeds"][r].tolist()
        for j in range(cu[r + 1] - cu[r]):
            k = cu[r] + j
            ref.append(
                recover(
                    c["t"][k].numpy(),
                    c["q"][k].numpy() if c["q"] is not None else None,
                    None if c["q"] is not None else int(c["draft"][k]),
                    key,
                    stream,
                    j,
                )
            )
    assert out.tolist() == ref
    assert fdguards.guards_intact(buf, out)


def test_step_token_equals_recovered_kernel_token():
    # the step computes a recovered token only where it emits one; it is the same token
    gen = torch.Generator().manual_seed(3)
    B, K, V = 12, 4, 3000
    T = B * K
    t, q = rand_probs(T, V, gen), rand_probs(T, V, gen)
    cu = torch.arange(K, T + 1, K, dtype=torch.int32)
    draft = torch.randint(0, V, (T,), generator=gen, dtype=torch.int32)
    seeds = torch.randint(0, 2**62, (B, 2), generator=gen)
    rec = torch.empty(T, dtype=torch.int64)
    _fused.recovered_tokens(rec, cu, draft, q, t, seeds)
    out = torch.full((B, K + 1), -1, dtype=torch.int32)
    _fused.rejection_sample_step(
        out, cu, draft, q, t, torch.zeros(B, dtype=torch.int64), None, None, seeds, K, None
    )
    n_rejected = 0
    for r in range(B):
        row = out[r].tolist()
        a = next((j for j in range(K) if row[j] != draft[r * K + j]), None)
        if a is not None and row[a] != -1:
            assert row[a] == rec[r * K + a]
            n_rejected += 1
    assert n_rejected > 0


def test_threads_and_chunking_do_not_change_tokens(parallel_everything):
    gen = torch.Generator().manual_seed(11)
    B, K, V = 8, 3, 20_000
    T = B * K
    t, q = rand_probs(T, V, gen, 0.0), rand_probs(T, V, gen, 0.0)
    cu = torch.arange(K, T + 1, K, dtype=torch.int64)
    draft = torch.randint(0, V, (T,), generator=gen)
    seeds = torch.randint(0, 2**62, (B, 2), generator=gen)
    greedy = torch.tensor([i % 3 == 0 for i in range(B)])
    results = set()
    for threads in (1, 2, 3):
        kernels_cpu.set_num_threads(threads)
        for chunk in (1, 5, 64, 1000):
            old = _fused._set_chunk_blocks(chunk)
            try:
                rec = torch.empty(T, dtype=torch.int64)
                _fused.recovered_tokens(rec, cu, draft, q, t, seeds)
                rec2 = torch.empty(T, dtype=torch.int64)
                _fused.recovered_tokens(rec2, cu, draft, None, t, seeds)
                out = torch.full((B, K + 1), -1, dtype=torch.int64)
                _fused.rejection_sample_step(
                    out, cu, draft, q, t, torch.arange(B), greedy, None, seeds, K, None
                )
            finally:
                _fused._set_chunk_blocks(old)
            results.add(
                (tuple(rec.tolist()), tuple(rec2.tolist()), tuple(out.reshape(-1).tolist()))
            )
    assert len(results) == 1


def test_seeds_reproduce_and_differ():
    gen = torch.Generator().manual_seed(5)
    T, V = 64, 1000
    t, q = rand_probs(T, V, gen, 0), rand_probs(T, V, gen, 0)
    cu = torch.arange(1, T + 1, dtype=torch.int32)
    draft = torch.randint(0, V, (T,), generator=gen, dtype=torch.int32)
    seeds = torch.randint(0, 2**62, (T, 2), generator=gen)
    a, b, c = (torch.empty(T, dtype=torch.int32) for _ in range(3))
    _fused.recovered_tokens(a, cu, draft, q, t, seeds)
    _fused.recovered_tokens(b, cu, draft, q, t, seeds.clone())
    seeds2 = seeds.clone()
    seeds2[:, 0] += 1
    _fused.recovered_tokens(c, cu, draft, q, t, seeds2)
    assert torch.equal(a, b)
    assert (a != c).sum() > T // 4


# ---------------------------------------------------------------------------------------------
# distributions (chi-square at significance ALPHA over N draws, V = 1000: four race blocks)
# ---------------------------------------------------------------------------------------------

N = 12_000
V = 1000


def _pq(seed):
    gen = torch.Generator().manual_seed(seed)
    p = spread_distribution(V, 24, gen, floor=1e-5)
    q = spread_distribution(V, 24, gen, floor=1e-5)
    return p, q


def _draw_seeds(n, seed):
    return torch.randint(-(2**63), 2**63 - 1, (n, 2), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("chunk", [64, 1])
def test_recovered_distribution_residual(chunk):
    p, q = _pq(1)
    t = p.expand(N, V).contiguous()
    dq = q.expand(N, V).contiguous()
    cu = torch.arange(1, N + 1, dtype=torch.int32)
    draft = torch.zeros(N, dtype=torch.int32)
    out = torch.empty(N, dtype=torch.int64)
    old = _fused._set_chunk_blocks(chunk)
    try:
        _fused.recovered_tokens(out, cu, draft, dq, t, _draw_seeds(N, 2))
    finally:
        _fused._set_chunk_blocks(old)
    expected = masses(p.numpy(), q.numpy(), None)
    counts = np.bincount(out.numpy(), minlength=V)
    assert chi2_pvalue(counts, expected) > ALPHA
    assert counts[expected == 0].sum() == 0


def test_recovered_distribution_masks_draft_without_draft_probs():
    p, _ = _pq(4)
    d = int(p.argmax())
    t = p.expand(N, V).contiguous()
    cu = torch.arange(1, N + 1, dtype=torch.int32)
    draft = torch.full((N,), d, dtype=torch.int32)
    out = torch.empty(N, dtype=torch.int32)
    _fused.recovered_tokens(out, cu, draft, None, t, _draw_seeds(N, 5))
    counts = np.bincount(out.numpy(), minlength=V)
    assert counts[d] == 0
    assert chi2_pvalue(counts, masses(p.numpy(), None, d)) > ALPHA


def test_recovered_all_zero_row_gives_zero():
    t = torch.zeros(3, 700)
    out = torch.full((3,), 9, dtype=torch.int32)
    _fused.recovered_tokens(
        out, torch.tensor([3]), torch.tensor([5, 6, 7]), t.clone(), t, _draw_seeds(1, 0)
    )
    assert out.tolist() == [0, 0, 0]


@pytest.mark.parametrize("with_q", [True, False])
@pytest.mark.parametrize("K", [1, 3])
def test_emitted_tokens_follow_target(with_q, K):
    """Speculative sampling's defining property: the first emitted token ~ target p."""
    p, q = _pq(7 + K)
    B = N // K if K > 1 else N
    T = B * K
    gen = torch.Generator().manual_seed(8)
    draft = torch.multinomial(q.double(), T, replacement=True, generator=gen).to(torch.int32)
    t = p.expand(T, V).contiguous()
    dq = q.expand(T, V).contiguous() if with_q else None
    cu = torch.arange(K, T + 1, K, dtype=torch.int32)
    out = torch.full((B, K + 1), -1, dtype=torch.int32)
    _fused.rejection_sample_step(
        out, cu, draft, dq, t, torch.full((B,), V - 1), None, None, _draw_seeds(B, 9), K, None
    )
    first = out[:, 0].numpy()
    assert (first >= 0).all()
    counts = np.bincount(first, minlength=V)
    assert chi2_pvalue(counts, p.numpy()) > ALPHA
    # and the test has power: the draft distribution itself is rejected
    assert chi2_pvalue(np.bincount(draft.numpy()[::K], minlength=V), p.numpy()) < ALPHA


def test_second_token_follows_target_given_first_accepted():
    # with iid positions, the token after an accepted draft is again ~ p
    p, q = _pq(21)
    q = (0.6 * p + 0.4 * q).contiguous()  # overlapping draft: ~60 % acceptance
    B, K = 6000, 2
    T = B * K
    gen = torch.Generator().manual_seed(22)
    draft = torch.multinomial(q.double(), T, replacement=True, generator=gen).to(torch.int32)
    t = p.expand(T, V).contiguous()
    out = torch.full((B, K + 1), -1, dtype=torch.int32)
    _fused.rejection_sample_step(
        out,
        torch.arange(K, T + 1, K),
        draft,
        q.expand(T, V).contiguous(),
        t,
        torch.zeros(B, dtype=torch.int64),
        None,
        None,
        _draw_seeds(B, 23),
        K,
        None,
    )
    acc = out[:, 0] == draft[0::K]
    second = out[acc, 1].numpy()
    assert len(second) > 2000
    assert chi2_pvalue(np.bincount(second, minlength=V), p.numpy()) > ALPHA


# ---------------------------------------------------------------------------------------------
# validation: named errors, nothing written
# ---------------------------------------------------------------------------------------------


def _valid():
    B, K, V = 3, 2, 300
    T = 5
    return dict(
        output_token_ids=torch.full((B, K + 1), POISON, dtype=torch.int32),
        cu_num_draft_tokens=torch.tensor([2, 3, 5], dtype=torch.int32),
        draft_token_ids=torch.tensor([1, -1, 299, 4, 5], dtype=torch.int32),
        draft_probs=torch.rand(T, V),
        target_probs=torch.rand(T, V),
        bonus_token_ids=torch.zeros((B, 1), dtype=torch.int64),
        is_greedy=torch.tensor([True, False, False]),
        greedy_scores=None,
        seeds=torch.zeros((B, 2), dtype=torch.int64),
        max_spec_len=K,
        synthetic_rates=None,
    )


BAD = [
    ("output_token_ids", lambda a: a["output_token_ids"].float(), TypeError),
    ("output_token_ids", lambda a: torch.full((3, 4), 0, dtype=torch.int32), ValueError),
    ("output_token_ids", lambda a: torch.full((3, 6), 0, dtype=torch.int32)[:, ::2], ValueError),
    ("cu_num_draft_tokens", lambda a: torch.tensor([2, 1, 5], dtype=torch.int32), ValueError),
    ("cu_num_draft_tokens", lambda a: torch.tensor([-1, 3, 5], dtype=torch.int32), ValueError),
    ("cu_num_draft_tokens", lambda a: torch.tensor([0, 3, 5], dtype=torch.int32), ValueError),
    ("cu_num_draft_tokens", lambda a: torch.tensor([2, 5], dtype=torch.int32), ValueError),
    ("draft_token_ids", lambda a: torch.tensor([1, 2, 300, 4, 5], dtype=torch.int32), IndexError),
    ("draft_token_ids", lambda a: torch.tensor([1.0, 2, 3, 4, 5]), TypeError),
    ("draft_probs", lambda a: torch.rand(5, 300, dtype=torch.float64), TypeError),
    ("draft_probs", lambda a: torch.rand(5, 299), ValueError),
    ("target_probs", lambda a: torch.rand(300, 5).t(), ValueError),
    ("target_probs", lambda a: torch.rand(5, 300, device="meta"), ValueError),
    ("target_probs", lambda a: [[0.5]], TypeError),
    ("is_greedy", lambda a: torch.tensor([1, 0, 0], dtype=torch.int32), TypeError),
    ("greedy_scores", lambda a: torch.rand(4, 300), ValueError),
    ("seeds", lambda a: torch.zeros((3, 3), dtype=torch.int64), ValueError),
    ("seeds", lambda a: torch.zeros((3, 2), dtype=torch.int32), TypeError),
    ("synthetic_rates", lambda a: torch.rand(1), ValueError),
    ("max_spec_len", lambda a: -1, ValueError),
]


@pytest.mark.parametrize("name,make,exc", BAD)
def test_step_bad_inputs_raise_named_and_write_nothing(name, make, exc):
    args = _valid()
    out = args["output_token_ids"]
    args[name] = make(args)
    with pytest.raises(exc, match=name if name != "max_spec_len" else "max_spec_len"):
        _fused.rejection_sample_step(**args)
    assert (out == POISON).all()


def test_step_reads_only_what_the_offsets_use():
    """Buffers longer than the batch uses are valid: drafts past ``cu[-1]``, more bonus ids
    than requests, per-token vectors as columns -- the same tokens as the exact-size call."""
    torch.manual_seed(5)  # _valid draws its probabilities
    exact = _valid()
    _fused.rejection_sample_step(**exact)
    for name, make in (
        ("draft_token_ids", lambda a: torch.cat([a["draft_token_ids"], a["draft_token_ids"]])),
        ("bonus_token_ids", lambda a: torch.zeros(4, dtype=torch.int64)),
        ("draft_token_ids", lambda a: a["draft_token_ids"].reshape(-1, 1)),
        ("output_token_ids", lambda a: a["output_token_ids"].reshape(-1)),
        ("is_greedy", lambda a: a["is_greedy"].reshape(1, -1)),
    ):
        torch.manual_seed(5)
        args = _valid()
        args[name] = make(args)
        _fused.rejection_sample_step(**args)
        assert torch.equal(
            args["output_token_ids"].reshape(exact["output_token_ids"].shape),
            exact["output_token_ids"],
        ), name


def test_step_output_must_not_overlap_inputs():
    for name, lo, values in (
        ("cu_num_draft_tokens", 8, [2, 3, 5]),
        ("draft_token_ids", 4, [1, -1, 299, 4, 5]),
        ("bonus_token_ids", 6, [0, 0, 0]),
    ):
        args = _valid()
        buf = torch.full((20,), 0, dtype=torch.int32)
        buf[lo : lo + len(values)] = torch.tensor(values, dtype=torch.int32)
        args["output_token_ids"] = buf[:9].view(3, 3)
        args[name] = buf[lo : lo + len(values)]
        before = buf.clone()
        with pytest.raises(ValueError, match="overlap " + name):
            _fused.rejection_sample_step(**args)
        assert torch.equal(buf, before)


def test_recovered_bad_inputs():
    a = _valid()
    out = torch.full((5,), POISON, dtype=torch.int64)
    ok = (
        out,
        a["cu_num_draft_tokens"],
        a["draft_token_ids"],
        a["draft_probs"],
        a["target_probs"],
        a["seeds"],
    )
    _fused.recovered_tokens(*ok)
    out.fill_(POISON)
    for i, bad, exc, name in [
        (2, torch.tensor([1, 2, 300, 4, 5]), IndexError, "draft_token_ids"),
        (1, torch.tensor([2, 3, 6]), ValueError, "cu_num_draft_tokens"),
        (0, torch.full((4,), 0), ValueError, "output_token_ids"),
        (5, torch.zeros((2, 2), dtype=torch.int64), ValueError, "seeds"),
        (3, torch.rand(5, 301), ValueError, "draft_probs"),
    ]:
        args = list(ok)
        args[i] = bad
        with pytest.raises(exc, match=name):
            _fused.recovered_tokens(*args)
        assert (out == POISON).all()
    with pytest.raises(ValueError, match="overlap"):
        _fused.recovered_tokens(a["draft_token_ids"], *ok[1:])


def test_kernel_signature_adapter_keys_from_inv_q():
    gen = torch.Generator().manual_seed(30)
    B, K, V = 4, 3, 900
    T = B * K
    t, q = rand_probs(T, V, gen, 0), rand_probs(T, V, gen, 0)
    cu = torch.arange(K, T + 1, K, dtype=torch.int32)
    draft = torch.randint(0, V, (T,), generator=gen, dtype=torch.int32)
    inv_q = torch.rand(B, V, generator=gen)
    a, b = torch.empty(T, dtype=torch.int32), torch.empty(T, dtype=torch.int32)
    _fused.sample_recovered_tokens_kernel_fused(a, cu, draft, q, t, inv_q, V, 8192, False, False)
    seeds = torch.zeros((B, 2), dtype=torch.int64)
    seeds[:, 0] = inv_q[:, :2].contiguous().view(torch.int64).reshape(B)
    _fused.recovered_tokens(b, cu, draft, q, t, seeds)
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="vocab_size"):
        _fused.sample_recovered_tokens_kernel_fused(a, cu, draft, q, t, inv_q, V + 1)
    with pytest.raises(ValueError, match="inv_q_ptr"):
        _fused.sample_recovered_tokens_kernel_fused(a, cu, draft, q, t, inv_q[:2].contiguous(), V)
