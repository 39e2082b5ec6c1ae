"""The one-pass V2 verification (``kernels_cpu.rejection_sample_one_pass``) against vLLM 0.32's
host sequence run on our kernels: the fp32 copy, ``_temperature_kernel``, ``apply_top_k_top_p``
(ours: ``top_k_top_p``), then ``rejection_sample``'s four launches (statistics of every draft
row, the rejection walk, the resampling draw, the insert). The tokens must be the same, bit for
bit, whatever the batch: greedy and random requests mixed, one-hot or full draft distributions,
-1 placeholder drafts, top-k/top-p per request, float32/bfloat16 logits, fp32/fp64 Gumbel noise,
int32/int64 indices, one thread or a team (the launches' kernels are checked against vLLM's own
under the interpreter by ``test_mrv2_parity.py``)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import kernels_cpu
from kernels_cpu import _mrv2_sample as sample
from kernels_cpu import _mrv2_spec as spec
from tests._fuzz import fuzz_settings
from tests._sampling_helpers import peak_sweep
from tests._spec_helpers import threads


def _cdiv(a, b):
    return -(-a // b)


def _next_pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


def _stock(
    target, draft, ds, cu, pos, idx, eim, elp, temp, seed, K, fp64, apply_temperature,
    top_k=None, top_p=None,
):  # fmt: skip
    """vLLM 0.32's ``Sampler.apply_sampling_params`` (temperature, top-k/top-p) and
    ``rejection_sample`` (no synthetic rates, block verification or watermark), each launch a
    kernel of ours (top-k/top-p: ``top_k_top_p``, what the plugin puts in vLLM's
    ``apply_top_k_top_p``)."""
    L, V = target.shape
    logits = target
    if apply_temperature or top_k is not None or top_p is not None:
        logits = torch.empty_like(target, dtype=torch.float32).copy_(target)
    if apply_temperature:
        sample.temperature_kernel(
            logits, logits.stride(0), eim, temp, V, 8192, grid=(L, _cdiv(V, 8192))
        )
    if top_k is not None or top_p is not None:
        kernels_cpu.top_k_top_p(
            logits,
            None if top_k is None else top_k[eim.long()],
            None if top_p is None else top_p[eim.long()],
        )
    if draft is not None:
        V = min(V, draft.shape[2])
    R = cu.shape[0] - 1
    nb = _cdiv(V, 8192)
    tam = torch.empty(L, nb, dtype=torch.int64)
    tmax, tsum, dmax, dsum = (torch.empty(L, nb) for _ in range(4))
    ds0 = draft.stride(0) if draft is not None else 0
    ds1 = draft.stride(1) if draft is not None else 0
    spec.compute_local_logits_stats_kernel(
        tam, nb, tmax, nb, tsum, nb, dmax, nb, dsum, nb, logits, logits.stride(0), draft, ds0,
        ds1, eim, elp, temp, V, K, 8192, HAS_DRAFT_LOGITS=draft is not None, grid=(L, nb),
    )  # fmt: skip
    sampled = torch.empty(R, K + 1, dtype=torch.int64)
    num_sampled = torch.empty(R, dtype=torch.int32)
    trl, drl = torch.empty(R), torch.empty(R)
    spec.rejection_kernel(
        sampled, K + 1, num_sampled, trl, drl, logits, logits.stride(0), tam, nb, tmax, nb,
        tsum, nb, ds, draft, ds0, ds1, dmax, nb, dsum, nb, cu, idx, temp, seed, pos, None,
        None, None, 0, nb, _next_pow2(nb), HAS_DRAFT_LOGITS=draft is not None,
        SYNTHETIC_MODE=False, USE_BLOCK_VERIFICATION=False, grid=(R,),
    )  # fmt: skip
    rnb = _cdiv(V, 1024)
    rarg = torch.empty(R, rnb, dtype=torch.int64)
    rmax = torch.empty(R, rnb, dtype=torch.float64 if fp64 else torch.float32)
    spec.resample_kernel(
        rarg, rnb, rmax, rnb, logits, logits.stride(0), trl, draft, ds0, ds1, drl,
        num_sampled, cu, eim, ds, temp, seed, pos, None, None, 0, None, None, 0, 0, V, 1024,
        HAS_DRAFT_LOGITS=draft is not None, USE_FP64=fp64, USE_BLOCK_VERIFICATION=False,
        CONTEXT_WIDTH=1, WATERMARK=False, DEDUPLICATE_CONTEXTS=False, grid=(R, rnb),
    )  # fmt: skip
    spec.insert_resampled_kernel(
        sampled, K + 1, num_sampled, rarg, rnb, rmax, rnb, rnb, cu, eim, temp,
        _next_pow2(rnb), grid=(R,),
    )  # fmt: skip
    return sampled, num_sampled


def _batch(
    seed,
    *,
    R,
    K,
    V,
    idx,
    dtype,
    with_draft,
    temps,
    accept_bias,
    placeholders,
    masks="none",
    spread=None,
):
    """A V2 verification batch: request ``r`` (slot ``slots[r]``) has ``nd_r <= K`` drafts and
    ``nd_r + 1`` rows; drafts are often the target's argmax (so walks run long). ``masks``:
    "none", "k", "p" or "kp": per-slot top-k and/or top-p (some slots keep every token)."""
    g = torch.Generator().manual_seed(seed)
    nds = [int(torch.randint(0, K + 1, (1,), generator=g)) for _ in range(R)]
    cu = [0]
    for nd in nds:
        cu.append(cu[-1] + nd + 1)
    L = cu[-1]
    slots = torch.randperm(R + 3, generator=g)[:R]
    scale = (1 + 4 * torch.rand(L, 1, generator=g)) if spread is None else spread
    target = torch.randn(L, V, generator=g) * scale
    target = target.to(dtype)
    eim = torch.empty(L, dtype=idx)
    elp = torch.empty(L, dtype=idx)
    ds = torch.randint(0, V, (L,), generator=g, dtype=torch.int64)
    for r, nd in enumerate(nds):
        for i in range(nd + 1):
            li = cu[r] + i
            eim[li] = int(slots[r])
            elp[li] = i
            if i > 0 and float(torch.rand(1, generator=g)) < accept_bias:
                ds[li] = int(target[li - 1].float().argmax())  # draft i-1 verified at row li-1
            if i > 0 and placeholders and float(torch.rand(1, generator=g)) < 0.1:
                ds[li] = -1
    picks = torch.randint(0, len(temps), (R + 3,), generator=g)
    temp = torch.tensor([temps[int(t)] for t in picks])
    draft = None
    if with_draft:
        draft = torch.randn(R + 3, K, V, generator=g)
        for r, nd in enumerate(nds):  # drafts close to the target: acceptance is likely
            s = int(slots[r])
            for i in range(nd):
                draft[s, i] = target[cu[r] + i].float() + 0.3 * draft[s, i]
        draft = draft.to(dtype)
    top_k = top_p = None
    if "k" in masks:
        top_k = torch.randint(1, V + 1, (R + 3,), generator=g, dtype=torch.int32)
        top_k[::3] = V  # a slot without top-k
        top_k = top_k.to(idx)
    if "p" in masks:
        top_p = 0.05 + 0.95 * torch.rand(R + 3, generator=g)
        top_p[1::3] = 1.0  # a slot without top-p
    return dict(
        target=target,
        draft=draft,
        ds=ds.to(idx),
        cu=torch.tensor(cu, dtype=idx),
        pos=(torch.arange(L) * 7 + 11).to(idx),
        idx=slots.to(idx),
        eim=eim,
        elp=elp,
        temp=temp,
        seed=(torch.randint(-(2**62), 2**62, (R + 3,), generator=g)).to(torch.int64),
        K=K,
        top_k=top_k,
        top_p=top_p,
    )


def _same_tokens(got, want):
    gs, gn = got
    ws, wn = want
    assert gn.tolist() == wn.tolist()
    for r, n in enumerate(wn.tolist()):
        assert gs[r, :n].tolist() == ws[r, :n].tolist(), f"request {r}"


def _args(b):
    return (b["target"], b["draft"], b["ds"], b["cu"], b["pos"], b["idx"], b["eim"], b["elp"],
            b["temp"], b["seed"], b["K"])  # fmt: skip


def _both(b, fp64, apply_temperature):
    want = _stock(*_args(b), fp64, apply_temperature, b["top_k"], b["top_p"])
    target = b["target"].clone()
    got = kernels_cpu.rejection_sample_one_pass(
        *_args(b),
        use_fp64=fp64,
        apply_temperature=apply_temperature,
        top_k=b["top_k"],
        top_p=b["top_p"],
    )
    # the raw rows are read, never written (compared bit for bit: NaN rows too)
    assert torch.equal(b["target"].view(torch.uint8), target.view(torch.uint8))
    return got, want


@pytest.fixture(params=[True, False], ids=["ahead", "not-ahead"])
def ahead(request):
    """Whether the one pass accepts drafts with probabilities ahead of processing their rows
    (``_accept_ahead``, the default), or processes every row the walk reaches: the path it
    replaces, still taken where a verdict is not sure."""
    was = spec._set_accept_ahead(request.param)
    yield request.param
    spec._set_accept_ahead(was)


@pytest.fixture(params=[0, 1, 2], ids=["row-by-row", "first-then-rest", "all-together"])
def batching(request):
    """How the one pass batches a request's rows accepted ahead into its parallel loops
    (``_set_ahead_batching``): each row alone, the first alone then the rest (the default), or
    all together -- the same verdicts whichever."""
    was = spec._set_ahead_batching(request.param)
    yield request.param
    spec._set_ahead_batching(was)


@pytest.fixture(params=[1, 4], ids=["one-thread", "team-of-4"])
def team(request):
    # the same team for every example of a test (nothing else changes it)
    with threads(request.param):
        yield request.param


@fuzz_settings(25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**31 - 1),
    R=st.integers(1, 6),
    K=st.integers(1, 4),
    V=st.sampled_from([37, 1500, 9000, 17000]),
    idx=st.sampled_from([torch.int32, torch.int64]),
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
    with_draft=st.booleans(),
    temps=st.sampled_from([(0.8,), (0.0,), (0.0, 0.8, 1.0, 1.7), (1.0,), (0.3, 0.0)]),
    accept_bias=st.sampled_from([0.0, 0.9]),
    placeholders=st.booleans(),
    fp64=st.booleans(),
    apply_temperature=st.booleans(),
    masks=st.sampled_from(["none", "none", "k", "p", "kp"]),
    spread=st.sampled_from([None, None, 0.01, 40.0]),
)
def test_one_pass_gives_the_launches_tokens(
    team, seed, R, K, V, idx, dtype, with_draft, temps, accept_bias, placeholders, fp64,
    apply_temperature, masks, spread,
):  # fmt: skip
    """``spread``: near-flat rows (the draw's pruning by noise bounds has little to cut) or
    widely spread ones (it cuts most lanes); None: each row its own scale in 1-5."""
    b = _batch(seed, R=R, K=K, V=V, idx=idx, dtype=dtype, with_draft=with_draft, temps=temps,
               accept_bias=accept_bias, placeholders=placeholders, masks=masks,
               spread=spread)  # fmt: skip
    _same_tokens(*_both(b, fp64, apply_temperature))


def test_long_walks_and_first_rejections_both_occur():
    """The batches above exercise both ends: a walk that accepts every draft (the bonus row
    drawn) and one rejected at its first draft."""
    lengths = set()
    for seed in range(8):
        likely = seed % 2 == 0
        b = _batch(seed, R=6, K=3, V=1500, idx=torch.int64, dtype=torch.float32,
                   with_draft=likely, temps=(0.3,), accept_bias=0.9 if likely else 0.0,
                   placeholders=False)  # fmt: skip
        (_, n), _ = _both(b, False, True)
        cu = b["cu"].tolist()
        lengths |= {(int(n[r]), cu[r + 1] - cu[r]) for r in range(6)}
    assert any(ns == rows for ns, rows in lengths)  # all accepted + bonus
    assert any(ns == 1 and rows > 1 for ns, rows in lengths)  # first draft rejected


@pytest.mark.parametrize("masks", ["none", "p"])
@pytest.mark.parametrize("apply_temperature", [False, True])
@pytest.mark.parametrize("shift", [0.0, -60.0])
def test_drafts_of_every_probability_get_the_launches_verdict(
    team, masks, apply_temperature, shift
):
    """One-hot drafts whose target probability runs from ~1e-6 to ~1 (the first draft of each
    request; rows flat, spread or peaked; ``shift``: every logit far below zero, where only the
    probabilities say what is likely): the one pass decides many rejections from a row's
    maximum and a partial sum of its exponentials, or a draft's -inf alone, without its
    statistics -- the verdicts, and so the tokens, are the launches' at every probability,
    those near the request's uniform included."""
    R, K, V = 48, 2, 9000
    b = _batch(5, R=R, K=K, V=V, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8, 1.0), accept_bias=0.0, placeholders=False, masks=masks)  # fmt: skip
    g = torch.Generator().manual_seed(11)
    cu = b["cu"].tolist()
    t = b["target"]
    verdicts = set()
    for r in range(R):
        if cu[r + 1] - cu[r] < 2:
            continue
        li = cu[r]
        row = torch.randn(V, generator=g) * [0.05, 1.0, 6.0][r % 3]
        tok = int(torch.randint(0, V, (1,), generator=g))
        want_p = 10 ** (-6 * float(torch.rand(1, generator=g)))  # 1e-6 .. 1
        others = torch.logsumexp(torch.cat([row[:tok], row[tok + 1 :]]), 0)
        row[tok] = others + torch.log(torch.tensor(want_p / (1 - want_p + 1e-12)))
        t[li] = row + shift
        b["ds"][li + 1] = tok
    got, want = _both(b, False, apply_temperature)
    _same_tokens(got, want)
    for r in range(R):
        if cu[r + 1] - cu[r] >= 2:
            verdicts.add(int(want[1][r]) > 1)
    assert verdicts == {True, False}  # both verdicts occur


@pytest.mark.parametrize("apply_temperature", [False, True])
def test_a_masked_rows_draw_gives_the_block_draws_token(team, apply_temperature):
    """A resampled row that is mostly -inf (a logits mask, top-k) is drawn from its lanes above
    -inf alone; the token must be the block draw's: a few lanes kept, spread over the row or
    in one block, the rejected draft among them (read as -inf), the draft kept with one other
    lane, more lanes than the sparse draw makes room for (the blocks drawn), a NaN in a masked
    row (the blocks drawn), a row whose kept lanes tie, and bonus rows (every draft
    accepted)."""
    V, K = 20000, 1  # twenty 1024-blocks: a team splits the draw into runs of blocks
    cases = 32
    b = _batch(4, R=cases, K=K, V=V, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8, 1.0), accept_bias=0.0, placeholders=False)  # fmt: skip
    R = cases
    b["cu"] = torch.arange(0, 2 * R + 1, 2, dtype=torch.int64)
    b["idx"] = torch.arange(R, dtype=torch.int64)
    b["eim"] = torch.arange(R, dtype=torch.int64).repeat_interleave(2)
    b["elp"] = torch.tensor([0, 1] * R, dtype=torch.int64)
    b["pos"] = torch.arange(2 * R, dtype=torch.int64) * 3 + 1
    b["temp"] = torch.tensor([0.8, 1.0] * (R // 2))
    g = torch.Generator().manual_seed(21)
    t = torch.full((2 * R, V), float("-inf"))
    ds = torch.zeros(2 * R, dtype=torch.int64)
    kept = [3, 40, V // 40, V // 9, V // 7, V // 2, 1, 2]  # below and above an eighth
    for r in range(R):
        row = t[2 * r]
        n = kept[r % len(kept)]
        lanes = torch.randperm(V, generator=g)[:n]
        if r % 3 == 1:
            lanes = torch.arange(n) % 1024 + 5 * 1024  # all in one block
        row[lanes] = torch.randn(n, generator=g) * 2
        if n == 1:
            lanes = torch.cat([lanes, torch.tensor([(int(lanes[0]) + 7) % V])])
            row[lanes[1]] = row[lanes[0]] - 3.0  # the draft kept with one other lane
        draft = int(lanes[0])
        row[draft] = row.max() - 6.0  # kept, unlikely: rejected (rarely accepted)
        if r % 4 == 2:
            row[draft] = row.max() + 1.5  # the likeliest token: when rejected, the draw must
            # pass over it (it would often win it)
        if r % 4 == 3:
            row[draft] = row.max() + 40.0  # certain: accepted, the bonus row drawn
        if r == 5:
            row[lanes[1]] = float("nan")  # a NaN among the masked lanes: the blocks drawn
        if r == 6:
            row[lanes] = 1.5  # every kept lane tied but for the draft
            row[draft] = -4.0
        ds[2 * r + 1] = draft  # the draft checked at the request's first row
        t[2 * r + 1] = torch.where(
            torch.rand(V, generator=g) < 0.05, torch.randn(V, generator=g), float("-inf")
        )  # its bonus row: sparse too
    b["target"] = t
    b["ds"] = ds
    got, want = _both(b, False, apply_temperature)
    _same_tokens(got, want)
    assert set(got[1].tolist()) == {1, 2}  # rejected first drafts and accepted ones (bonus)
    # a likeliest draft rejected: the draw's exclusion of it is tested
    assert any(int(got[1][r]) == 1 for r in range(2, R, 4))


@pytest.mark.parametrize("with_draft", [False, True])
@pytest.mark.parametrize("masks", ["p", "k", "kp"])
def test_one_requests_rows_split_across_the_team_are_masked_as_top_k_top_p_masks_them(
    team, masks, with_draft, ahead
):
    """One request at a time, so a team splits each row (its copy and top-p's passes in one
    parallel region, the path planned from the chunk maxima; with draft probabilities the
    row's statistics in that region too): every row kind -- plain, peaked far past the first
    values or among them, a maximum just above the first values', a NaN, a +inf, a row of one
    value repeated, -inf stretches -- is processed as ``top_k_top_p`` masks it, bit for bit,
    and the tokens are the launches'. Every draft is its row's argmax, so each row is reached
    (with one-hot drafts; with draft probabilities where the test accepts) -- but a draft with
    probabilities accepted ahead (``ahead``) leaves its row unprocessed."""
    V = 3 * 8192 - 100  # three chunks, the last partial
    g = torch.Generator().manual_seed(8)
    base = torch.randn(2, V, generator=g) * 2.5
    first = base[:, :2048].amax(1)
    kinds = []
    for kind in range(8):
        t = base.clone()
        if kind == 1:
            t[0, 20000] = first[0] + 35  # peaked far past the first values
        elif kind == 2:
            t[0, 50] = first[0] + 25  # peaked among the first values
        elif kind == 3:
            t[0, 15000] = first[0] + 0.05  # just above the first values' maximum
        elif kind == 4:
            t[0, 23333] = float("nan")
        elif kind == 5:
            t[0, 9000] = float("inf")
        elif kind == 6:
            t[0] = 0.25  # one value repeated: every token tied
        elif kind == 7:
            t[0, 8192:16384] = float("-inf")  # a whole chunk masked
        kinds.append(t)
    for kind, t in enumerate(kinds):
        for apply_temperature in (False, True):
            b = _batch(kind, R=1, K=1, V=V, idx=torch.int64, dtype=torch.float32,
                       with_draft=with_draft, temps=(0.8,), accept_bias=0.0,
                       placeholders=False, masks=masks)  # fmt: skip
            b["cu"] = torch.tensor([0, 2], dtype=torch.int64)
            b["idx"] = torch.tensor([0], dtype=torch.int64)
            b["eim"] = torch.zeros(2, dtype=torch.int64)
            b["elp"] = torch.tensor([0, 1], dtype=torch.int64)
            b["pos"] = torch.tensor([3, 4], dtype=torch.int64)
            b["temp"] = torch.tensor([0.8])
            if b["top_k"] is not None:
                b["top_k"] = torch.tensor([40 + 300 * kind], dtype=torch.int64)
            if b["top_p"] is not None:
                b["top_p"] = torch.tensor([0.9])
            b["target"] = t
            b["ds"] = torch.tensor([0, int(t[0].nan_to_num(nan=-1.0).argmax())])
            args = _fused_args(b)
            processed = torch.full((2, V), 123.0)
            spec.rejection_sample_fused(
                *args, APPLY_TEMPERATURE=apply_temperature, top_k_ptr=b["top_k"],
                top_p_ptr=b["top_p"], processed_ptr=processed,
            )  # fmt: skip
            want = t / 0.8 if apply_temperature else t.clone()
            kernels_cpu.top_k_top_p(
                want,
                None if b["top_k"] is None else b["top_k"].repeat(2),
                None if b["top_p"] is None else b["top_p"].repeat(2),
            )
            if (processed[0] == 123.0).all():  # the first row is reached: processed or
                assert with_draft and ahead and args[1].tolist() == [2], kind  # accepted ahead
            for r in range(2):
                if not (processed[r] == 123.0).all():
                    assert torch.equal(processed[r].view(torch.int32), want[r].view(torch.int32)), (
                        kind,
                        r,
                        apply_temperature,
                    )
            _same_tokens(
                args[:2],
                _stock(*_args(b), False, apply_temperature, b["top_k"], b["top_p"]),
            )


@pytest.mark.parametrize("reject_at", [None, 0, 2, 3])
def test_a_requests_walk_with_draft_probabilities_on_a_team(team, reject_at, ahead):
    """One request of four drafts with probabilities, each row split across the team: every
    draft accepted (the drafter's logits the target's, each draft its row's argmax), or the
    one at ``reject_at`` rejected (a token top-p masks). The tokens are the launches'. Not
    ``ahead``, the rows the walk reaches are processed up front in one region (each masked,
    its statistics computed, its draft tested there), each masked as ``top_k_top_p`` masks it,
    bit for bit; ``ahead``, the accepted drafts' rows are left unprocessed -- the verdict is
    sure from one pass over the raw row -- and the rejected row and the bonus row processed.
    The rows past the rejection are not processed."""
    K, V = 4, 3 * 8192 - 100
    g = torch.Generator().manual_seed(21)
    t = torch.randn(K + 1, V, generator=g) * 2.5
    ds = torch.zeros(K + 1, dtype=torch.int64)
    for i in range(K):
        ds[i + 1] = int(t[i].argmax())
        if i == reject_at:
            ds[i + 1] = int(t[i].argmin())  # outside top-p: the target gives it no mass
    for apply_temperature in (False, True):
        # the drafter's law the target's, before its top-p (the walk divides draft logits by
        # the temperature; the target's only with apply_temperature)
        draft = torch.randn(3, K, V, generator=g)
        draft[1] = t[:K] if apply_temperature else t[:K] * 0.8
        b = dict(
            target=t, draft=draft, ds=ds, cu=torch.tensor([0, K + 1]),
            pos=torch.arange(K + 1) + 5, idx=torch.tensor([1]),
            eim=torch.ones(K + 1, dtype=torch.int64), elp=torch.arange(K + 1),
            temp=torch.tensor([1.0, 0.8, 1.0]), seed=torch.tensor([3, 99, 4]), K=K,
            top_k=None, top_p=torch.tensor([1.0, 0.9, 1.0]),
        )  # fmt: skip
        args = _fused_args(b)
        processed = torch.full((K + 1, V), 123.0)
        spec.rejection_sample_fused(
            *args, APPLY_TEMPERATURE=apply_temperature, top_p_ptr=b["top_p"],
            processed_ptr=processed,
        )  # fmt: skip
        reached = K + 1 if reject_at is None else reject_at + 1
        assert args[1].tolist() == [reached]
        want = t / 0.8 if apply_temperature else t.clone()
        kernels_cpu.top_k_top_p(want, None, torch.full((K + 1,), 0.9))
        for r in range(K + 1):
            if r < reached - 1 and ahead:
                assert (processed[r] == 123.0).all(), r  # accepted ahead
            elif r < reached:
                assert torch.equal(processed[r].view(torch.int32), want[r].view(torch.int32)), r
            else:
                assert (processed[r] == 123.0).all(), r
        _same_tokens(args[:2], _stock(*_args(b), False, apply_temperature, None, b["top_p"]))


def _near_verdict_batch(seed, R, p, apply_temperature):
    """A batch of ``R`` requests of 4 drafts with probabilities whose acceptance ratio runs
    from ~0.05 to past 1 (``test_drafts_with_probabilities_near_their_verdict_...``), run
    through the one pass and checked against the launches' tokens; returns (accepted drafts
    per request, their rows accepted ahead)."""
    K, V = 4, 9000
    b = _batch(seed, R=R, K=K, V=V, idx=torch.int64, dtype=torch.float32, with_draft=True,
               temps=(0.8, 1.0), accept_bias=0.0, placeholders=False)  # fmt: skip
    g = torch.Generator().manual_seed(seed + 5)
    cu = b["cu"].tolist()
    t, draft = b["target"], b["draft"]
    for r in range(R):
        nd = cu[r + 1] - cu[r] - 1
        s = int(b["idx"][r])
        for i in range(nd):
            li = cu[r] + i
            row = torch.randn(V, generator=g) * [0.5, 2.0, 5.0][(r + i) % 3]
            if (r + i) % 5 == 4:  # every token tied: top-p keeps the lowest indices
                row = torch.full((V,), 0.3)
            if (r + i) % 7 == 6:  # a confident row: its peak's 8192-chunk alone weighs
                row[int(torch.randint(0, V, (1,), generator=g))] += 30.0
            t[li] = row
            temp = float(b["temp"][s])
            law = row / temp if apply_temperature else row
            order = law.argsort(descending=True)
            rank = int(torch.randint(0, 3, (1,), generator=g))  # a likely token
            if p < 1.0 and (r + i) % 2:  # one at top-p's boundary, kept or not
                edge = int((law[order].softmax(0).cumsum(0) < p).sum())
                rank = max(0, edge + int(torch.randint(-2, 3, (1,), generator=g)))
            tok = int(order[rank])
            if (r + i) % 5 == 4:  # at the kept set's end: index 0.9 V
                tok = int(0.9 * V) + int(torch.randint(-3, 4, (1,), generator=g))
            b["ds"][li + 1] = tok
            draft[s, i] = row if apply_temperature or temp == 1.0 else row * temp
            draft[s, i, tok] += temp * float(3.5 * torch.rand(1, generator=g) - 0.5)
    b["top_p"] = torch.full((R + 3,), p)
    args = _fused_args(b)
    processed = torch.full(tuple(t.shape), 123.0)
    spec.rejection_sample_fused(
        *args, APPLY_TEMPERATURE=apply_temperature, top_p_ptr=b["top_p"], processed_ptr=processed
    )  # fmt: skip
    want = _stock(*_args(b), False, apply_temperature, None, b["top_p"])
    _same_tokens(args[:2], want)
    n = want[1].tolist()
    accepted = [n[r] - 1 for r in range(R) if cu[r + 1] - cu[r] >= 2]
    return accepted, _accepted_ahead(processed, cu, n)


@pytest.mark.parametrize("p", [0.9, 1.0])
@pytest.mark.parametrize("apply_temperature", [False, True])
def test_drafts_with_probabilities_near_their_verdict_get_the_launches_verdict(
    team, batching, p, apply_temperature
):
    """Drafts with probabilities whose acceptance ratio ``p_target / p_draft`` runs from ~0.05
    to past 1 (the drafter's law the target's but for the draft token, raised or lowered), at
    top-p 0.9 or none, the draft a likely token or one at top-p's boundary (just kept or just
    masked; in rows of one value repeated, the kept set the lowest indices; rows peaked far
    above the rest, whose other chunk counts at its bound): the one pass
    accepts many of them ahead of processing their rows, from bounds on the processed row's
    mass, and tests the rest as the launches do -- the verdicts, and so the tokens, are the
    launches' at every ratio, those near the request's uniform included; drafts are accepted
    ahead, and both verdicts occur. A request's rows are four, batched as the fixture says;
    one batch of 40 requests (a thread walks each request) and calls of two requests each
    (fewer than a team of 4: each request's rows split across the team)."""
    wide, ahead_wide = _near_verdict_batch(7, 40, p, apply_temperature)
    small, ahead_small = [], 0
    for seed in range(8):
        got, ahead = _near_verdict_batch(100 + seed, 2, p, apply_temperature)
        small += got
        ahead_small += ahead
    for accepted in (wide, small):
        assert 0 in accepted and max(accepted) >= 2  # rejections, and runs of acceptances
    assert ahead_wide > 0 and ahead_small > 0


def _accepted_ahead(processed, cu, num_sampled):
    """How many accepted drafts' rows the one pass left unprocessed (``processed`` filled
    with 123.0 before the call): drafts it accepted ahead of their rows."""
    return sum(
        bool((processed[cu[r] + i] == 123.0).all())
        for r in range(len(num_sampled))
        for i in range(num_sampled[r] - 1)
    )


def test_drafts_accepted_ahead_read_each_row_at_its_own_slots_temperature(team, batching):
    """The rows' expanded slots (``expanded_idx_mapping``: the temperature the row is processed
    at) differ from their request's slot (``idx_mapping``: the temperature the test divides
    the draft logits by): the one pass bounds a row's mass as its processing loads it, so the
    drafts it accepts ahead of their rows, and the tokens, are the launches'."""
    R, K, V = 24, 3, 9000
    b = _batch(9, R=R, K=K, V=V, idx=torch.int64, dtype=torch.float32, with_draft=True,
               temps=(0.8,), accept_bias=0.9, placeholders=False)  # fmt: skip
    cu = b["cu"].tolist()
    spare = R  # slots R .. R + 2 are no request's: their temperatures only the rows read
    b["temp"][spare:] = torch.tensor([0.5, 1.0, 2.0])
    for r in range(R):
        for li in range(cu[r], cu[r + 1]):
            b["eim"][li] = spare + (r % 3)
    b["idx"] = torch.arange(R)
    b["temp"][:R] = 0.8
    b["top_p"] = torch.full((R + 3,), 0.9)
    draft, g = b["draft"], torch.Generator().manual_seed(4)
    for r in range(R):
        for i in range(cu[r + 1] - cu[r] - 1):
            # the drafter's law the row's, but for its draft token (ratios around the uniform)
            li = cu[r] + i
            draft[r, i] = b["target"][li] * 0.8 / float(b["temp"][spare + r % 3])
            draft[r, i, int(b["ds"][li + 1])] += 0.8 * float(3.5 * torch.rand(1, generator=g) - 0.5)
    args = _fused_args(b)
    processed = torch.full(tuple(b["target"].shape), 123.0)
    spec.rejection_sample_fused(
        *args, APPLY_TEMPERATURE=True, top_p_ptr=b["top_p"], processed_ptr=processed
    )  # fmt: skip
    want = _stock(*_args(b), False, True, None, b["top_p"])
    _same_tokens(args[:2], want)
    assert _accepted_ahead(processed, cu, want[1].tolist()) > 0


def _processed_row_holds(got, want, draft, may_be_lean, where):
    """A processed row as ``top_k_top_p`` leaves it (``want``), bit for bit -- or, where it
    ``may_be_lean`` (a sampled row in a walk of one-hot drafts: what the one pass leaves
    unwritten after a peek, on one thread or a team) and the mask keeps one token alone, that
    token's value and -inf at its ``draft``'s (-1: a request's last row, no draft), the rest
    as it was: nothing reads it. True where the row is the lean one."""
    kept = want > float("-inf")
    if (
        may_be_lean
        and int(kept.sum()) == 1
        and not torch.equal(got.view(torch.int32), want.view(torch.int32))
    ):
        j = int(kept.nonzero()[0, 0])
        assert got[j].view(torch.int32) == want[j].view(torch.int32), where
        if draft >= 0 and draft != j:
            assert got[draft] == float("-inf"), where
        return True
    assert torch.equal(got.view(torch.int32), want.view(torch.int32)), where
    return False


def _merged_by(temp):
    """Two adjacent float32 values ``x < y`` (near 30: far above a row of ``randn * 2``) whose
    quotients by ``temp`` round to one float."""
    x = torch.tensor(25.7)
    while x < 32:
        y = torch.nextafter(x, torch.tensor(float("inf")))
        if x / temp == y / temp:
            return float(x), float(y)
        x = y
    raise AssertionError("no pair of adjacent floats merges")


def _peaked_runs(tails, steps, V, seed):
    """Target rows for ``_fused_args``: one request per tail, its first two rows peaked (the
    maximum alone holds 0.9 of the mass at top-p 0.9), then the tail's row, then a plain bonus
    row; each draft its row's argmax (so a walk runs through the run)."""
    R = len(tails)
    L = R * steps
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(L, V, generator=g) * 2
    first = t[:, :2048].amax(1)
    for r, tail in enumerate(tails):
        for i in range(steps):
            li = r * steps + i
            if i < 2 or tail.startswith("peaked"):
                t[li, (3001 * (li + 1)) % V] = first[li] + 30
            elif i == steps - 1:
                pass  # the bonus row: plain
            elif tail == "nan":
                t[li, 12000] = float("nan")
            elif tail == "inf":
                t[li, 19000] = float("inf")
            elif tail == "tie":
                t[li, 500] = t[li, 15000] = first[li] + 30
            elif tail == "tie-in-chunk":
                t[li, 9000] = t[li, 9100] = first[li] + 30
            elif tail == "past-its-chunk":
                # the chunk maxima leave the maximum alone (the other chunks' bound 0.1 of its
                # mass at p 0.9), its own chunk's values do not, and top-p keeps values of the
                # other chunks: at temperature 1, level 0 outside the maximum's chunk (1),
                # -0.1 inside it, the maximum 11.68 above
                t[li] = 0.0
                t[li, 8192:16384] = -0.1
                t[li, 9000] = 11.68
            elif tail == "above":
                t[li, 9000] = first[li] + 0.05
            elif tail == "merged":
                # the maximum one float above another value of its chunk, the two one float
                # once divided by the temperature 0.8: a tie in the row processed, none raw
                x, y = _merged_by(0.8)
                t[li, 9000], t[li, 9100] = x, y
    ds = torch.zeros(L, dtype=torch.int64)
    ds[1:] = t[:-1].nan_to_num(nan=-1.0).argmax(1)  # each draft: its row's argmax
    for r, tail in enumerate(tails):
        li = r * steps + 2  # the tail's row: a draft its top token rejects
        top = int(ds[li + 1])
        if tail == "peaked-rejected-in-chunk":  # in the maximum's 8192-value chunk
            ds[li + 1] = top + 1 if (top + 1) % 8192 else top - 1
        elif tail == "peaked-rejected":  # in another chunk
            ds[li + 1] = (top + 8192) % V
    return t, ds


@pytest.mark.parametrize("apply_temperature", [False, True])
@pytest.mark.parametrize(
    "layout", ["a-request-a-call", "one-call", "one-call-in-the-caches", "one-call-past-the-caches"]
)
def test_rows_after_one_masked_to_its_top_token_are_masked_as_top_k_top_p_masks_them(
    team, apply_temperature, layout
):
    """A row whose request's previous row was masked to its top token alone is first read for
    its chunks' maxima (a peek), without the copy: peaked again, it is written once; any other
    row is then loaded chunk by chunk as the passes reach it. Runs of peaked rows followed by
    every other kind -- a plain row (top-p's passes), a NaN, a +inf past the first values, a
    maximum tied with another value (or one float above another, which the temperature's
    division merges: tied once processed), a maximum just above the first values', a top-k row, a
    row whose chunk maxima alone leave its maximum alone but whose maximum's chunk does not (a
    tie there; values close below it, top-p keeping values of other chunks: on a team, the
    other chunks are masked while that chunk is tested, and loaded again), a peaked row whose
    draft it rejects (a token in its maximum's chunk: a team goes on to peek the next row
    before it knows; one in another chunk) -- at temperatures
    0.8, 1 (the row not divided) and 0 (greedy); one request a call (its rows split across the
    team), all in one call (a request a thread), all four times over in one call (14 MB of
    rows, past ``_PEEK_BYTES``: peeked because the walk leaves a row kept alone lean), and all
    twenty times over in one call -- 70 MB of rows, past ``_STREAM_BYTES``: a peaked row's
    mask then streamed to memory by non-temporal stores, over a poisoned buffer. Each
    processed row must be ``top_k_top_p``'s, bit for bit (or lean: ``_processed_row_holds``),
    and the tokens the launches'."""
    V, K = 20000, 2  # three chunks: a team splits the row
    tails = ["plain", "nan", "inf", "tie", "above", "topk", "peaked", "tie-in-chunk",
             "past-its-chunk", "peaked-rejected-in-chunk", "peaked-rejected",
             "merged"]  # fmt: skip
    temps = [0.8, 1.0, 0.8, 0.0, 0.8, 1.0, 0.8, 0.8, 1.0, 0.8, 1.0, 0.8]
    copies = {"one-call-in-the-caches": 4, "one-call-past-the-caches": 20}.get(layout, 1)
    tails, temps = tails * copies, temps * copies
    steps = K + 2  # the run's two rows, the tail's, the bonus row
    size = len(tails) * steps * V * 4
    assert (copies == 20) == (size > spec._STREAM_BYTES)
    assert (copies == 4) == (spec._PEEK_BYTES < size <= spec._STREAM_BYTES)
    t, ds = _peaked_runs(tails, steps, V, 11)
    together = layout != "a-request-a-call"
    groups = [list(range(len(tails)))] if together else [[r] for r in range(len(tails))]
    for reqs in groups:
        R = len(reqs)
        rows = torch.cat([torch.arange(r * steps, (r + 1) * steps) for r in reqs])
        L = R * steps
        b = _batch(5, R=R, K=K + 1, V=V, idx=torch.int64, dtype=torch.float32,
                   with_draft=False, temps=(0.8,), accept_bias=0.0, placeholders=False,
                   masks="p")  # fmt: skip
        b["cu"] = torch.arange(0, L + 1, steps, dtype=torch.int64)
        b["idx"] = torch.arange(R, dtype=torch.int64)
        b["eim"] = torch.arange(R, dtype=torch.int64).repeat_interleave(steps)
        b["elp"] = torch.arange(steps, dtype=torch.int64).repeat(R)
        b["pos"] = torch.arange(L, dtype=torch.int64)
        b["temp"] = torch.tensor([temps[r] for r in reqs])
        b["top_p"] = torch.full((R,), 0.9)
        b["top_k"] = torch.tensor([40 if tails[r] == "topk" else V for r in reqs])
        b["target"] = t[rows].clone()
        b["ds"] = ds[rows].clone()
        b["ds"][0::steps] = 0
        args = _fused_args(b)
        processed = torch.full((L, V), 123.0)
        spec.rejection_sample_fused(
            *args, APPLY_TEMPERATURE=apply_temperature, top_k_ptr=b["top_k"],
            top_p_ptr=b["top_p"], processed_ptr=processed,
        )  # fmt: skip
        want = b["target"].clone()
        if apply_temperature:
            rt = b["temp"][b["eim"]]
            want /= torch.where((rt == 0) | (rt == 1), torch.ones_like(rt), rt)[:, None]
        kernels_cpu.top_k_top_p(want, b["top_k"][b["eim"]], b["top_p"][b["eim"]])
        reached = [li for li in range(L) if not (processed[li] == 123.0).all()]
        # each walk reaches the row after its run (the run's drafts are accepted)
        assert {r * steps + 2 for r in range(R)} <= set(reached), reqs
        lean = [
            li
            for li in reached
            if _processed_row_holds(
                processed[li],
                want[li],
                int(b["ds"][li + 1]) if (li + 1) % steps else -1,
                temps[reqs[li // steps]] > 0,
                (reqs, li),
            )
        ]
        if any(temps[r] > 0 for r in reqs):
            # a sampled request's second row, peeked and kept to its top token, is left
            # unwritten -- on one thread, and on a team that splits the request's rows
            assert {i * steps + 1 for i, r in enumerate(reqs) if temps[r] > 0} <= set(lean), (
                reqs,
                lean,
            )
            # and a peaked request's bonus row, reached after its drafts are all accepted
            bonus = {
                (i + 1) * steps - 1
                for i, r in enumerate(reqs)
                if temps[r] > 0 and tails[r] == "peaked"
            }
            assert bonus <= set(lean), (reqs, lean)
        _same_tokens(
            args[:2],
            _stock(*_args(b), False, apply_temperature, b["top_k"], b["top_p"]),
        )


@given(
    n=st.integers(0, 70),
    values=st.lists(st.sampled_from([-2.0, -1.0, 0.0, 3.0, 3.5, float("-inf"), float("nan")]),
                    min_size=70, max_size=70),
    long=st.booleans(),
)  # fmt: skip
def test_a_chunks_top_two_are_its_maximum_and_the_largest_other_value(n, values, long):
    """The peek of a maximum's chunk (``fd_top2_nan``, ``fd_first_equal``) against a plain
    reading: the maximum with NaN set aside, whether a NaN occurs, its first index, and the
    largest other value -- the maximum again where it occurs twice (in one lane of the sixteen
    or in two, or in the tail past them), -inf where nothing else beats it; few values (the
    tail alone) and 8192 (a chunk) with the same values at its start and its end."""
    x = torch.tensor(values[:n], dtype=torch.float32)
    if long:
        x = torch.cat([x, torch.full((8192 - 2 * n,), -5.0), x.flip(0)])
    m, nan, first, second = spec._top2_of(x)
    finite = x[~x.isnan()]
    want_m = float(finite.max()) if finite.numel() else float("-inf")
    assert m == want_m and nan == bool(x.isnan().any())
    hits = (x == want_m).nonzero().flatten().tolist()
    assert first == (hits[0] if hits else len(x))
    if len(hits) > 1 and want_m > float("-inf"):
        assert second == want_m
    else:
        rest = torch.cat([finite[finite != want_m], torch.tensor([float("-inf")])])
        assert second == float(rest.max())


@pytest.mark.parametrize("masks", ["none", "kp"])
def test_nan_and_minus_inf_rows_match(masks):
    """A row of NaN, one of -inf and one of a single finite value: the walk and the draw give
    vLLM's launches' tokens."""
    b = _batch(3, R=3, K=2, V=300, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8, 0.0), accept_bias=0.5, placeholders=False, masks=masks)  # fmt: skip
    t = b["target"]
    t[0] = float("nan")
    t[1] = float("-inf")
    t[2] = float("-inf")
    t[2, 17] = 3.0
    for apply_temperature in (False, True):
        _same_tokens(*_both(b, False, apply_temperature))


@pytest.mark.parametrize("apply_temperature", [False, True])
def test_rows_whose_maximum_the_first_values_miss_are_masked_as_top_p_masks_them(
    team, apply_temperature
):
    """Top-p weighs a row against a reference from its first values; the one pass knows each
    row's maximum from its copy and sends a row whose maximum lies above that reference (a
    confident model's top token far into the row, a +inf) or that holds a NaN straight to the
    exact-maximum path. Every processed row must be ``top_k_top_p``'s, bit for bit, and the
    tokens the launches': peaked rows, a NaN and a +inf past the first values, a maximum just
    above the first values' (the reference path), plain rows."""
    V, R = 20000, 5  # three chunks: a team splits the row
    b = _batch(2, R=R, K=1, V=V, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8,), accept_bias=0.0, placeholders=False, masks="p")  # fmt: skip
    b["cu"] = torch.arange(0, 2 * R + 1, 2, dtype=torch.int64)
    b["idx"] = torch.arange(R, dtype=torch.int64)
    b["eim"] = torch.arange(R, dtype=torch.int64).repeat_interleave(2)
    b["elp"] = torch.tensor([0, 1] * R, dtype=torch.int64)
    b["pos"] = torch.arange(2 * R, dtype=torch.int64)
    b["temp"] = torch.full((R,), 0.8)
    b["top_p"] = torch.tensor([0.9, 0.9, 0.9, 0.9, 0.5])
    t = torch.randn(2 * R, V, generator=torch.Generator().manual_seed(3)) * 2
    first = t[:, :2048].amax(1)
    # each request's first row is reached; request 0's draft is accepted (its row peaked)
    t[0, 5000] = first[0] + 30  # peaked: the maximum far past the first values
    t[1, 15000] = first[1] + 45  # its bonus row, too
    t[2, 12000] = float("nan")
    t[4, 19000] = float("inf")
    t[6, 100] = first[6] + 25  # peaked, the maximum among the first values
    t[8, 9000] = first[8] + 0.05  # above the first values' maximum, below the reference
    b["target"] = t
    b["ds"] = torch.zeros(2 * R, dtype=torch.int64)
    b["ds"][1::2] = t[0::2].nan_to_num(nan=-1.0).argmax(1)  # each first draft: its argmax
    args = _fused_args(b)
    processed = torch.full((2 * R, V), 123.0)
    spec.rejection_sample_fused(
        *args, APPLY_TEMPERATURE=apply_temperature, top_p_ptr=b["top_p"],
        processed_ptr=processed,
    )  # fmt: skip
    want = t / 0.8 if apply_temperature else t.clone()
    kernels_cpu.top_k_top_p(want, None, b["top_p"][b["eim"]])
    reached = [r for r in range(2 * R) if not (processed[r] == 123.0).all()]
    assert {0, 1, 2, 4, 6, 8} <= set(reached)
    # a request's bonus row (odd) has no draft; request 0's, peeked after its first row kept
    # its top token and kept to its own, is left unwritten but for that token (five requests:
    # one thread a request, on a team of 4 too)
    lean = [
        r
        for r in reached
        if _processed_row_holds(
            processed[r], want[r], -1 if r % 2 else int(b["ds"][r + 1]), True, r
        )
    ]
    assert lean == [1], lean
    assert (processed[0] > float("-inf")).sum() == 1  # the peak alone holds 0.9 of the mass
    _same_tokens(args[:2], _stock(*_args(b), False, apply_temperature, None, b["top_p"]))


def test_a_short_requests_last_row_reads_no_draft_past_the_batch(team):
    """A request of fewer rows than ``num_speculative_steps + 1`` (its last row's local position
    below the bonus rule's) last in the batch, its rows peaked and each draft its row's top
    token: its last row, peeked and kept to its top token, tests no draft -- the draft tokens
    end with the batch's rows (``draft_sampled_ptr`` exactly that long: AddressSanitizer's run
    reads past it otherwise) -- and the tokens are the launches'."""
    V, K = 20000, 3
    b = _batch(4, R=2, K=K, V=V, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8,), accept_bias=0.0, placeholders=False, masks="p")  # fmt: skip
    b["cu"] = torch.tensor([0, K + 1, K + 3], dtype=torch.int64)  # the second: one draft
    L = K + 3
    b["eim"] = torch.tensor([0] * (K + 1) + [1, 1], dtype=torch.int64)
    b["elp"] = torch.tensor(list(range(K + 1)) + [0, 1], dtype=torch.int64)
    b["idx"] = torch.tensor([0, 1], dtype=torch.int64)
    b["pos"] = torch.arange(L, dtype=torch.int64)
    b["temp"] = torch.tensor([0.8, 0.8])
    b["top_p"] = torch.tensor([0.9, 0.9])
    t = torch.randn(L, V, generator=torch.Generator().manual_seed(8)) * 2
    t[torch.arange(L), (977 * torch.arange(1, L + 1)) % V] += 40  # every row peaked
    b["target"] = t
    b["ds"] = torch.zeros(L, dtype=torch.int64)
    b["ds"][1:] = t[:-1].argmax(1)  # each draft its row's top token: every draft accepted
    args = _fused_args(b)
    processed = torch.full((L, V), 123.0)
    spec.rejection_sample_fused(*args, APPLY_TEMPERATURE=True, top_p_ptr=b["top_p"],
                                processed_ptr=processed)  # fmt: skip
    assert args[1].tolist() == [K + 1, 2]
    want = t / 0.8
    kernels_cpu.top_k_top_p(want, None, b["top_p"][b["eim"]])
    for r in range(L):
        last = r in (K, L - 1)
        _processed_row_holds(processed[r], want[r], -1 if last else int(b["ds"][r + 1]), True, r)
    _same_tokens(args[:2], _stock(*_args(b), False, True, None, b["top_p"]))


@pytest.mark.parametrize("with_k", [False, True])
def test_a_row_whose_maximum_alone_reaches_p_is_masked_as_top_p_masks_it(team, with_k):
    """A row whose maximum alone holds p of its mass is masked to it from the chunk maxima its
    copy found, without top-p's passes -- where a bound shows it (the other chunks' maxima,
    the maximum's chunk's second value). Each processed row must be ``top_k_top_p``'s bit for
    bit: a peak swept across the point where the top token alone reaches p (the bound taken
    too loose masks rows whose kept set is larger), at p 0.5, 0.9 and 0.999; a peak tied with
    another value, one with a runner-up just below it, rows of a few finite values."""
    V = 20000  # three chunks: a team splits the row
    rows, ps = peak_sweep(V, 11)
    g = torch.Generator().manual_seed(12)
    x = torch.randn(V, generator=g)
    x[[3000, 17000]] = 40.0  # tied at the top
    rows.append(x)
    x = torch.randn(V, generator=g)
    x[9000], x[9001] = 40.0, 39.99  # a runner-up just below
    rows.append(x)
    for spot in (5, 8191, 8192, 19999):
        x = torch.full((V,), float("-inf"))
        x[[1, 12000]] = torch.tensor([0.0, -3.0])
        x[spot] = 9.0  # a few finite values, the peak at a chunk's edge
        rows.append(x)
    ps += [0.9] * (len(rows) - len(ps))
    R = len(rows)
    b = _batch(2, R=R, K=1, V=V, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(1.0,), accept_bias=0.0, placeholders=False, masks="p")  # fmt: skip
    b["cu"] = torch.arange(0, R + 1, dtype=torch.int64)  # bonus rows only: each one drawn
    b["idx"] = b["eim"] = torch.arange(R, dtype=torch.int64)
    b["elp"] = torch.zeros(R, dtype=torch.int64)
    b["pos"] = torch.arange(R, dtype=torch.int64)
    b["temp"] = torch.full((R,), 1.0)
    b["ds"] = torch.zeros(R, dtype=torch.int64)
    b["top_p"] = torch.tensor(ps)
    b["top_k"] = torch.tensor([1, 5, 50, 20000] * R, dtype=torch.int64)[:R] if with_k else None
    b["target"] = torch.stack(rows)
    args = _fused_args(b)
    processed = torch.full((R, V), 123.0)
    spec.rejection_sample_fused(
        *args, top_k_ptr=b["top_k"], top_p_ptr=b["top_p"], processed_ptr=processed
    )
    want = b["target"].clone()
    kernels_cpu.top_k_top_p(want, b["top_k"], b["top_p"])
    for r in range(R):
        assert torch.equal(processed[r].view(torch.int32), want[r].view(torch.int32)), r
    kept = (want > float("-inf")).sum(1)
    assert (kept == 1).any() and (kept > 1).any()  # both sides of the point are swept


@pytest.mark.parametrize("apply_temperature", [False, True])
def test_rows_masked_to_one_token_have_the_launches_statistics(team, apply_temperature):
    """A draft row top-p masked to its top token alone (a confident model's, its draft that
    token) gets its statistics without a read of its other blocks: the block holding the token
    as the program computes it, every other block max -inf and sum 0, as the program leaves a
    block of -inf. The one pass's statistics tables must be the stats launch's over the
    processed rows, bit for bit, beside rows of many kept tokens, and the tokens the
    launches'."""
    V, R, K = 20000, 3, 2  # three statistics blocks
    L = R * (K + 1)
    b = _batch(4, R=R, K=K, V=V, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8,), accept_bias=0.0, placeholders=False, masks="p")  # fmt: skip
    b["cu"] = torch.arange(0, L + 1, K + 1, dtype=torch.int64)
    b["idx"] = torch.arange(R, dtype=torch.int64)
    b["eim"] = torch.arange(R, dtype=torch.int64).repeat_interleave(K + 1)
    b["elp"] = torch.arange(K + 1, dtype=torch.int64).repeat(R)
    b["pos"] = torch.arange(L, dtype=torch.int64)
    b["temp"] = torch.full((R,), 0.8)
    b["top_p"] = torch.tensor([0.9, 0.5, 0.9])
    t = torch.randn(L, V, generator=torch.Generator().manual_seed(5)) * 2
    tops = torch.randint(0, V, (L,), generator=torch.Generator().manual_seed(6))
    peaked = [li for li in range(L) if li < 2 * (K + 1)]  # requests 0 and 1: confident
    t[peaked, tops[peaked]] += 40.0
    b["target"] = t
    b["ds"] = torch.zeros(L, dtype=torch.int64)
    b["ds"][1:] = t[:-1].argmax(1)  # each draft its row's argmax: request 2's may be rejected
    args = _fused_args(b)
    processed = torch.full((L, V), 123.0)
    spec.rejection_sample_fused(
        *args, APPLY_TEMPERATURE=apply_temperature, top_p_ptr=b["top_p"],
        processed_ptr=processed,
    )  # fmt: skip
    assert args[1].tolist()[:2] == [K + 1, K + 1]  # the confident requests accept every draft
    # the statistics launch over the rows as vLLM processes them (a row kept to one token
    # alone may be left unwritten but for that token: _processed_row_holds)
    want = t / 0.8 if apply_temperature else t.clone()
    kernels_cpu.top_k_top_p(want, None, b["top_p"][b["eim"]])
    nb = _cdiv(V, 8192)
    tam = torch.empty(L, nb, dtype=torch.int64)
    tmax, tsum, dmax, dsum = (torch.full((L, nb), 7.0) for _ in range(4))
    spec.compute_local_logits_stats_kernel(
        tam, nb, tmax, nb, tsum, nb, dmax, nb, dsum, nb, want, V, None, 0, 0, b["eim"],
        b["elp"], b["temp"], V, K, 8192, HAS_DRAFT_LOGITS=False, grid=(L, nb),
    )  # fmt: skip
    got_max, got_sum = args[-8], args[-7]
    for li in peaked:
        if li % (K + 1) < K:  # a draft row of a confident request: reached, masked to one
            assert (want[li] > float("-inf")).sum() == 1, li
            _processed_row_holds(processed[li], want[li], int(b["ds"][li + 1]), True, li)
            assert torch.equal(got_max[li].view(torch.int32), tmax[li].view(torch.int32)), li
            assert torch.equal(got_sum[li].view(torch.int32), tsum[li].view(torch.int32)), li
    assert (processed[2 * (K + 1)] > float("-inf")).sum() > 1  # request 2: many kept
    stock = _stock(*_args(b), False, apply_temperature, None, b["top_p"])
    _same_tokens(args[:2], stock)


def test_unreached_rows_are_not_processed():
    """With top-k/top-p, only the rows the walk reaches (and each resampled row) are written to
    the processed buffer: a request whose first draft is rejected leaves its later rows alone."""
    b = _batch(0, R=2, K=3, V=600, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.0,), accept_bias=0.0, placeholders=False, masks="k")  # fmt: skip
    b["cu"] = torch.tensor([0, 4, 8], dtype=torch.int64)
    b["eim"] = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1], dtype=torch.int64)
    b["elp"] = torch.tensor([0, 1, 2, 3] * 2, dtype=torch.int64)
    b["idx"] = torch.tensor([0, 1], dtype=torch.int64)
    b["target"] = torch.randn(8, 600, generator=torch.Generator().manual_seed(5))
    b["pos"] = torch.arange(8, dtype=torch.int64)
    # greedy: the draft checked at row li (ds[li + 1]) is that row's argmin, never its argmax,
    # so each request's first row rejects it
    b["ds"] = b["target"].argmin(1).roll(1)
    args = _fused_args(b)
    processed = torch.full((8, 600), 123.0)
    spec.rejection_sample_fused(*args, top_k_ptr=b["top_k"], processed_ptr=processed)
    assert args[1].tolist() == [1, 1]
    reached = {0, 4}
    for row in range(8):
        assert (processed[row] == 123.0).all() == (row not in reached), row


def _fused_args(b):
    L, V = b["target"].shape
    R = b["cu"].shape[0] - 1
    nb, rnb = _cdiv(V, 8192), _cdiv(V, 1024)
    return [
        torch.full((R, b["K"] + 1), -7, dtype=torch.int64),
        torch.full((R,), -7, dtype=torch.int32),
        *_args(b),
        torch.empty(L, nb, dtype=torch.int64), torch.empty(L, nb), torch.empty(L, nb),
        torch.empty(L, nb), torch.empty(L, nb), torch.empty(R), torch.empty(R),
        torch.empty(R, rnb, dtype=torch.int64), torch.empty(R, rnb),
    ]  # fmt: skip


def _small():
    b = _batch(1, R=2, K=2, V=50, idx=torch.int64, dtype=torch.float32, with_draft=False,
               temps=(0.8,), accept_bias=0.5, placeholders=False)  # fmt: skip
    b["cu"] = torch.tensor([0, 2, 5], dtype=torch.int64)
    b["eim"] = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int64)
    b["elp"] = torch.tensor([0, 1, 0, 1, 2], dtype=torch.int64)
    b["idx"] = torch.tensor([0, 1], dtype=torch.int64)
    b["ds"] = torch.zeros(5, dtype=torch.int64)
    b["pos"] = torch.arange(5, dtype=torch.int64)
    b["target"] = torch.randn(5, 50)
    return b


@pytest.mark.parametrize(
    "arg, bad, name",
    [
        (5, lambda b: torch.tensor([0, 0, 3], dtype=torch.int64), "cu_num_logits_ptr"),
        (5, lambda b: torch.tensor([0, 2, 99], dtype=torch.int64), "cu_num_logits_ptr"),
        (8, lambda b: torch.full_like(b["eim"], 99), "expanded_idx_mapping_ptr"),
        (6, lambda b: b["pos"][:1], "pos_ptr"),
        (2, lambda b: b["target"][0], "target_logits_ptr"),
        (10, lambda b: b["temp"][:1], "expanded_idx_mapping_ptr"),
        (20, lambda b: torch.empty(1, 1, dtype=torch.int64), "resampled_local_argmax_ptr"),
        (21, lambda b: torch.empty(1, 1), "resampled_local_max_ptr"),
    ],
)
def test_bad_input_is_refused_naming_it_and_nothing_is_written(arg, bad, name):
    b = _small()
    args = _fused_args(b)
    args[arg] = bad(b)
    with pytest.raises(ValueError, match=name):
        spec.rejection_sample_fused(*args)
    assert (args[0] == -7).all() and (args[1] == -7).all()


@pytest.mark.parametrize("accept", [False, True])
def test_the_slot_after_the_accepted_drafts_is_checked_where_the_walk_picks_it(accept):
    """A ``sampled`` table with a column per draft and none for the bonus token: a valid call
    while every request rejects a draft (the token goes to that draft's column), refused naming
    ``sampled_ptr`` once a request accepts all its drafts (its bonus token has no column) -- the
    check of the rows only the walk picks, as the insert launch makes it."""
    b = _small()
    b["temp"] = torch.zeros_like(b["temp"])  # greedy: a draft is accepted iff it is the argmax
    top = b["target"].argmax(1)
    b["ds"] = torch.zeros_like(top)
    b["ds"][1:] = (top[:-1] + 1) % 50  # each draft (checked a row before) off that row's argmax
    if accept:
        b["ds"][3:5] = top[2:4]  # request 1's drafts, checked at rows 2 and 3: its argmaxes
    args = _fused_args(b)
    args[0] = torch.full((2, 2), -7, dtype=torch.int64)  # K = 2 columns, no bonus column
    if not accept:
        spec.rejection_sample_fused(*args)
        assert args[1].tolist() == [1, 1]
        assert args[0][:, 0].tolist() == top[[0, 2]].tolist()
        return
    with pytest.raises(ValueError, match="sampled_ptr"):
        spec.rejection_sample_fused(*args)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(top_k_ptr=torch.tensor([5, 0], dtype=torch.int32)), "top_k_ptr"),
        (dict(top_k_ptr=torch.tensor([5], dtype=torch.int32)), "top_k_ptr"),
        (dict(top_p_ptr=torch.tensor([0.5, 1.5])), "top_p_ptr"),
        (dict(top_p_ptr=torch.tensor([0.0, 0.5])), "top_p_ptr"),
        (dict(top_p_ptr=torch.tensor([0.5, 0.5]), processed_ptr=None), "processed_ptr"),
        (dict(top_p_ptr=torch.tensor([0.5, 0.5]), processed_ptr=torch.empty(5, 49)),
         "processed_ptr"),
    ],
)  # fmt: skip
def test_bad_masks_are_refused_naming_them_and_nothing_is_written(kw, name):
    b = _small()
    args = _fused_args(b)
    kw = dict(dict(processed_ptr=torch.empty(5, 50)), **kw)
    with pytest.raises(ValueError, match=name):
        spec.rejection_sample_fused(*args, **kw)
    assert (args[0] == -7).all() and (args[1] == -7).all()
