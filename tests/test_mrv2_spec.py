"""``kernels_cpu._mrv2_spec``: Model Runner V2's rejection sampler kernels on CPU.

Parity with vLLM's own Triton kernels is ``tests/test_mrv2_parity.py``'s; here:

* plain-torch references where they are cheap -- the block stats (max, first argmax, sum of
  exponentials), the greedy verification walk, the gathering, flattening and insertion, the
  temperature-0 resampling (a plain argmax of the target), the one-hot residual (the rejected
  draft never drawn) -- over random launches (hypothesis), int32 and int64 index buffers;
* thread invariance: the per-block kernels give the same bits on one thread as on many (the
  vocabulary split across threads);
* every bad argument refused naming it, nothing written (outputs and in-place buffers compared
  before and after); empty grids touch nothing;
* vLLM 0.33's and 0.34's forms of the stats and residual kernels against 0.32's: the same rows
  where their bonus rules agree, a request ending early (0.33's ``num_logits`` rule) leaving
  its last row, 0.34's row mapping reading the mapped rows.

The cases launch the signature standing in the sources under test; a test of 0.32's own
functions pins them to 0.32's (``cases_032``).
"""

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fdkit.mrv2 as mrv2
import kernels_cpu
from kernels_cpu import _mrv2_spec as spec
from kernels_cpu import contracts
from tests._fuzz import fuzz_settings

IDX = (torch.int32, torch.int64)


def _grid(case):
    return tuple(case.grid) + (1,) * (3 - len(case.grid))


@pytest.fixture
def cases_032(monkeypatch):
    """The case generators launch 0.32's signatures whatever the sources under test are: for
    the tests of 0.32's own functions, and of the later forms against them."""
    monkeypatch.setattr(mrv2.spec, "_standing_args", lambda kernel: ())


def _find(name, idx, pred, tries=400):
    """The first random case of ``name`` (from ``fdkit.mrv2``) whose launch kwargs satisfy
    ``pred``; a case, its kwargs and the buffers a launch writes."""
    for seed in range(tries):
        case = mrv2.make_case(name, seed, idx)
        kw, bufs = case.build()
        if pred(kw, case):
            return case, kw, bufs
    raise AssertionError(f"no case of {name} satisfies the predicate")


def _snapshot(kw):
    return {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}


def _unchanged(kw, before):
    for k, v in before.items():
        assert torch.equal(kw[k], v) or (
            v.is_floating_point() and torch.equal(kw[k].nan_to_num(), v.nan_to_num())
        ), f"{k} was written"


def _refused(name, kw, grid, arg, exc=ValueError):
    before = _snapshot(kw)
    with pytest.raises(exc, match=f"^{arg}: expected"):
        _run(name, kw, grid)
    _unchanged(kw, before)


def _takes_grid(name):
    return contracts.contract(name).takes_grid


def _impl(name, kw):
    """The implementation of kernel ``name`` taking ``kw``'s arguments: a case launches the
    signature standing in the sources under test (0.34's form, say), so pick it as the plugin
    does, by the argument names; ``name``'s own function for a launch cut short of some."""
    return kernels_cpu.impl_for(name, tuple(kw)) or getattr(spec, name)


def _run(name, kw, grid):
    fn = _impl(name, kw)
    return fn(**kw, grid=grid) if _takes_grid(fn.__name__) else fn(**kw)


# -- references --------------------------------------------------------------------------------


def _bonus_row(kw, li):
    """Whether row ``li`` of a stats/residual launch is a bonus row, by the rule of the form
    launched: 0.32's local position >= num_speculative_steps, 0.33+'s next row at local
    position 0 or at or past num_logits."""
    elp = kw["expanded_local_pos_ptr"]
    if "num_speculative_steps" in kw:
        return int(elp[li]) >= kw["num_speculative_steps"]
    return li + 1 >= kw["num_logits"] or int(elp[li + 1]) == 0


@pytest.mark.parametrize("idx", IDX)
@fuzz_settings(25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_local_stats_match_torch(idx, seed):
    case = mrv2.make_case("compute_local_logits_stats_kernel", seed, idx)
    kw, _ = case.build()
    _run(case.kernel, kw, _grid(case))
    L, NB = case.grid
    bs, V = kw["BLOCK_SIZE"], kw["vocab_size"]
    tgt = kw["target_logits_ptr"]
    for li in range(L):
        if _bonus_row(kw, li):
            continue
        slot = int(kw["expanded_idx_mapping_ptr"][li])
        temp = float(kw["temp_ptr"][slot])
        for b in range(NB):
            x = torch.full((bs,), float("-inf"))
            n = max(0, min(bs, V - b * bs))
            x[:n] = tgt[li, b * bs : b * bs + n].float()
            # tl.max (nanmax, nanargmax): the max of the numbers; the index counts NaN as -inf
            numbers = x[~x.isnan()]
            m = numbers.max()
            assert kw["target_local_max_ptr"][li, b] == m
            if temp == 0.0:
                # (not nan_to_num: it would also turn +inf into the largest float)
                as_minus_inf = torch.where(x.isnan(), float("-inf"), x)
                first = int((as_minus_inf == m).nonzero()[0])
                assert int(kw["target_local_argmax_ptr"][li, b]) == b * bs + first
            else:
                want = (x - m).exp().sum() if m > float("-inf") else torch.tensor(0.0)
                got = kw["target_local_sumexp_ptr"][li, b]
                torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("idx", IDX)
@fuzz_settings(25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_greedy_verification_walks_the_target_argmax(idx, seed):
    """A greedy request (not synthetic) keeps its drafts while they equal the argmax of the block
    maxima's winner, and stores that argmax at its first mismatch (a -1 draft never matches)."""
    case = mrv2.make_case("rejection_kernel", seed, idx)
    if case.args["SYNTHETIC_MODE"]:
        return
    kw, _ = case.build()
    _run(case.kernel, kw, _grid(case))
    cu = kw["cu_num_logits_ptr"].tolist()
    for r in range(case.grid[0]):
        slot = int(kw["idx_mapping_ptr"][r])
        if float(kw["temp_ptr"][slot]) != 0.0:
            continue
        accepted = 0
        for i in range(cu[r + 1] - cu[r] - 1):
            li = cu[r] + i
            mx = kw["target_local_max_ptr"][li]
            best = int(torch.nan_to_num(mx, nan=float("-inf"), neginf=float("-inf")).argmax())
            target = int(kw["target_local_argmax_ptr"][li, best])
            draft = int(kw["draft_sampled_ptr"][li + 1])
            ok = draft >= 0 and draft == target
            assert int(kw["sampled_ptr"][r, i]) == (draft if ok else target)
            if not ok:
                break
            accepted += 1
        assert int(kw["rejected_steps_ptr"][r]) == accepted


@pytest.mark.parametrize("idx", IDX)
@fuzz_settings(25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_gather_and_flatten_match_torch(idx, seed):
    case = mrv2.make_case("gather_draft_sampled_kernel", seed, idx)
    kw, _ = case.build()
    _run(case.kernel, kw, None)
    li = kw["logits_indices_ptr"].long()
    pos = kw["positions_ptr"].long()[li]
    lp = kw["expanded_local_pos_ptr"].long()
    pl = kw["prefill_len_ptr"].long()[kw["expanded_idx_mapping_ptr"].long()]
    want = torch.where((lp > 0) & (pos - lp < pl), -1, kw["input_ids_ptr"].long()[li])
    assert torch.equal(kw["draft_sampled_ptr"].long(), want)
    assert torch.equal(kw["pos_ptr"].long(), pos)

    case = mrv2.make_case("flatten_sampled_kernel", seed, idx)
    kw, _ = case.build()
    flat0 = kw["flat_sampled_ptr"].clone()
    _run(case.kernel, kw, _grid(case))
    want = flat0
    for r in range(case.grid[0]):
        n, start = int(kw["num_sampled_ptr"][r]), int(kw["cu_num_logits_ptr"][r])
        want[start : start + n] = kw["sampled_ptr"][r, :n]
    assert torch.equal(kw["flat_sampled_ptr"], want)


@pytest.mark.parametrize("idx", IDX)
@fuzz_settings(25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_insert_takes_the_first_largest_block(idx, seed):
    case = mrv2.make_case("insert_resampled_kernel", seed, idx)
    kw, _ = case.build()
    sampled0, ns0 = kw["sampled_ptr"].clone(), kw["num_sampled_ptr"].clone()
    _run(case.kernel, kw, _grid(case))
    cu = kw["cu_num_logits_ptr"].tolist()
    want = sampled0
    for r in range(case.grid[0]):
        n = int(ns0[r])
        row = cu[r] + n
        slot = int(kw["expanded_idx_mapping_ptr"][row])
        if float(kw["temp_ptr"][slot]) == 0.0 and row != cu[r + 1] - 1:
            continue
        mx = torch.nan_to_num(
            kw["resampled_local_max_ptr"][r], nan=float("-inf"), neginf=float("-inf")
        )
        want[r, n] = kw["resampled_local_argmax_ptr"][r, int(mx.argmax())]
    assert torch.equal(kw["sampled_ptr"], want)
    assert torch.equal(kw["num_sampled_ptr"], ns0 + 1)


@pytest.mark.parametrize("idx", IDX)
@fuzz_settings(25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_resample_draws_from_the_residual(idx, seed):
    """At temperature 0 (a greedy request's bonus row) the draw is the block's first argmax of
    the target; a one-hot draft's rejected token is never drawn; every token lies in its
    block and below vocab_size."""
    case = mrv2.make_case("resample_kernel", seed, idx)
    kw, _ = case.build()
    _run(case.kernel, kw, _grid(case))
    R, NB = case.grid
    bs, V = kw["BLOCK_SIZE"], kw["vocab_size"]
    cu = kw["cu_num_logits_ptr"].tolist()
    tgt = kw["target_logits_ptr"]
    for r in range(R):
        row = cu[r] + int(kw["rejected_step_ptr"][r])
        slot = int(kw["expanded_idx_mapping_ptr"][row])
        temp = float(kw["temp_ptr"][slot])
        bonus = row == cu[r + 1] - 1
        if temp == 0.0 and not bonus:
            continue
        rejected = -1 if bonus else int(kw["draft_sampled_ptr"][row + 1])
        for b in range(NB):
            tok = int(kw["resampled_local_argmax_ptr"][r, b])
            val = float(kw["resampled_local_max_ptr"][r, b])
            lo, n = b * bs, max(0, min(bs, V - b * bs))
            assert lo <= tok < lo + bs
            if val > float("-inf"):
                assert tok < lo + n
                if not kw["HAS_DRAFT_LOGITS"] and rejected >= 0:
                    assert tok != rejected
            if temp == 0.0 and n:
                x = tgt[row, lo : lo + n].float()
                # np.nanargmax/np.nanmax, as Triton's interpreter runs tl.max: the index reads
                # NaN as -inf (first of the largest), the value leaves it out -- a masked lane's
                # -inf where the block is partial, NaN where every lane is NaN
                assert tok == lo + int(
                    x.nan_to_num(nan=float("-inf"), neginf=float("-inf")).argmax()
                )
                if x.isnan().all():
                    assert val == float("-inf") if n < bs else val != val
                else:
                    assert val == float(x[~x.isnan()].max())


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("fp64", [False, True])
def test_resample_passes_masked_stretches_as_any_losing_value(idx, fp64):
    """A masked (-inf) lane scores -inf whatever its noise, so the draw passes over masked
    stretches without hashing them: each block comes out as it does when the same lanes hold
    a value that always loses (-1e30, hashed and scored like any other) wherever it holds a
    number; a block without one gives its first lane -- vLLM's argmax reads NaN as -inf for
    the index (``np.nanargmax`` under Triton's interpreter) -- at -inf, or at NaN when it holds
    NaN only."""
    R, V, bs = 6, 3000, 1024
    nb = -(-V // bs)
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(R, V, generator=g) * 3
    masked = torch.rand(R, V, generator=g) < 0.97  # top-p leaves most of a row masked
    masked[:, 300:1500] = True  # stretches longer than a chunk of the draw, a whole block
    masked[1] = True  # a row masked whole
    masked[2, :2048] = True
    nan = torch.zeros(R, V, dtype=torch.bool)
    nan[1, :5] = True  # NaN before the first -inf lane
    nan[3, 1024:2048] = True  # a block of NaN only
    masked &= ~nan
    out = {}
    for name, fill in (("lose", -1e30), ("inf", float("-inf"))):
        x = torch.where(masked, fill, logits).masked_fill(nan, float("nan"))
        la = torch.full((R, nb), -5, dtype=torch.int64)
        lm = torch.full((R, nb), 9.0, dtype=torch.float64 if fp64 else torch.float32)
        spec.resample_kernel(
            la, nb, lm, nb, x, V, torch.zeros(R), None, 0, 0, torch.zeros(R),
            torch.zeros(R, dtype=idx), torch.arange(R + 1, dtype=idx),  # bonus rows only
            torch.tensor([0, 1, 2, 0, 1, 2], dtype=idx), torch.zeros(R + 1, dtype=idx),
            torch.tensor([1.0, 0.7, 1.3]), torch.tensor([3, -(2**40), 17]),
            torch.arange(R, dtype=idx) * 1000, None, None, 0, None, None, 0, 0, V, bs,
            HAS_DRAFT_LOGITS=False, USE_FP64=fp64, USE_BLOCK_VERIFICATION=False,
            CONTEXT_WIDTH=1, WATERMARK=False, DEDUPLICATE_CONTEXTS=False, grid=(R, nb),
        )  # fmt: skip
        out[name] = (la, lm)
    (la_lose, lm_lose), (la_inf, lm_inf) = out["lose"], out["inf"]
    kinds = set()
    for r in range(R):
        for b in range(nb):
            lanes = slice(b * bs, min(V, (b + 1) * bs))
            if not (masked[r, lanes] | nan[r, lanes]).all():
                kinds.add("number")
                assert la_inf[r, b] == la_lose[r, b] and lm_inf[r, b] == lm_lose[r, b], (r, b)
            elif masked[r, lanes].any():
                kinds.add("masked")
                assert la_inf[r, b] == b * bs and lm_inf[r, b] == float("-inf"), (r, b)
            else:
                kinds.add("nan")
                assert la_inf[r, b] == b * bs and lm_inf[r, b].isnan(), (r, b)
    assert kinds == {"number", "masked", "nan"}
    assert la_inf[1].tolist() == [0, 1024, 2048]  # its NaN lanes read as -inf, first


def test_synthetic_rates_bound_acceptance():
    """Synthetic acceptance is ``u < rate`` with the uniform in (0, 1): rate 0 rejects the first
    draft, rate 1 accepts every one (the uniform's bits are the parity tests' to check)."""
    for rate, want in ((0.0, 0), (1.0, 3)):
        kw = _one_request(3, synthetic=torch.full((3,), rate))
        spec.rejection_kernel(**kw, grid=(1, 1, 1))
        assert int(kw["rejected_steps_ptr"][0]) == want


def _one_request(nd, *, V=16, synthetic=None, idx=torch.int64, temp=0.0):
    """A one-request rejection launch of ``nd`` drafts over a ``V``-token vocabulary (one block)."""
    L = nd + 1
    x = torch.randn(L, V, generator=torch.Generator().manual_seed(0))
    return dict(
        sampled_ptr=torch.full((1, nd + 1), -5, dtype=idx),
        sampled_stride=nd + 1,
        rejected_steps_ptr=torch.full((1,), -5, dtype=idx),
        target_rejected_logsumexp_ptr=torch.full((1,), 7.0),
        draft_rejected_logsumexp_ptr=torch.full((1,), 7.0),
        target_logits_ptr=x,
        target_logits_stride=V,
        target_local_argmax_ptr=x.argmax(1, keepdim=True).to(idx),
        target_local_argmax_stride=1,
        target_local_max_ptr=x.amax(1, keepdim=True),
        target_local_max_stride=1,
        target_local_sumexp_ptr=(x - x.amax(1, keepdim=True)).exp().sum(1, keepdim=True),
        target_local_sumexp_stride=1,
        draft_sampled_ptr=torch.arange(L, dtype=idx) % V,
        draft_logits_ptr=None,
        draft_logits_stride_0=0,
        draft_logits_stride_1=0,
        draft_local_max_ptr=torch.zeros(L, 1),
        draft_local_max_stride=1,
        draft_local_sumexp_ptr=torch.zeros(L, 1),
        draft_local_sumexp_stride=1,
        cu_num_logits_ptr=torch.tensor([0, L], dtype=idx),
        idx_mapping_ptr=torch.tensor([0], dtype=idx),
        temp_ptr=torch.tensor([temp]),
        seed_ptr=torch.tensor([1234], dtype=idx),
        pos_ptr=torch.arange(L, dtype=idx) + 100,
        synthetic_conditional_rates_ptr=synthetic,
        cumulative_log_p_ptr=None,
        local_residual_mass_ptr=None,
        local_residual_mass_stride=0,
        vocab_num_blocks=1,
        PADDED_VOCAB_NUM_BLOCKS=1,
        HAS_DRAFT_LOGITS=False,
        SYNTHETIC_MODE=synthetic is not None,
        USE_BLOCK_VERIFICATION=False,
    )


# -- threads -------------------------------------------------------------------------------------


@pytest.fixture
def many_threads():
    before = kernels_cpu.get_num_threads()
    kernels_cpu.set_num_threads(4)
    kernels_cpu.set_parallel_threshold(0)
    yield
    kernels_cpu.set_parallel_threshold(None)
    kernels_cpu.set_num_threads(before)


@pytest.mark.parametrize(
    "name",
    [
        "compute_local_logits_stats_kernel",
        "compute_local_residual_mass_kernel",
        "resample_kernel",
        "rejection_kernel",
        "compute_cumulative_log_p_kernel",
    ],
)
def test_threads_give_the_same_bits(name, many_threads):
    for seed in range(12):
        case = mrv2.make_case(name, seed, torch.int64)
        kw1, bufs1 = case.build()
        kw2, bufs2 = case.build()
        kernels_cpu.set_num_threads(1)
        _run(name, kw1, _grid(case))
        kernels_cpu.set_num_threads(4)
        _run(name, kw2, _grid(case))
        for k in bufs1:
            assert torch.equal(bufs1[k].nan_to_num(), bufs2[k].nan_to_num()), (case, k)


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("idx", IDX)
def test_stats_refusals(idx, cases_032):
    name = "compute_local_logits_stats_kernel"
    case, kw, _ = _find(
        name,
        idx,
        lambda kw, c: (
            c.grid[0] > 1
            and kw["HAS_DRAFT_LOGITS"]
            and kw["target_logits_ptr"].shape[0] > 1
            and any(float(kw["temp_ptr"][s]) != 0 for s in kw["expanded_idx_mapping_ptr"].tolist())
        ),
    )
    g = _grid(case)
    _refused(name, dict(kw, target_logits_stride=kw["target_logits_stride"] + 1), g,
             "target_logits_stride")  # fmt: skip
    _refused(name, dict(kw, BLOCK_SIZE=24), g, "BLOCK_SIZE")
    _refused(name, dict(kw, draft_logits_ptr=None), g, "draft_logits_ptr")
    _refused(name, dict(kw, target_logits_ptr=kw["target_logits_ptr"].double()), g,
             "target_logits_ptr", TypeError)  # fmt: skip
    bad = kw["expanded_idx_mapping_ptr"].clone()
    bad[0] = kw["temp_ptr"].numel()
    kw2 = dict(kw, expanded_idx_mapping_ptr=bad)
    kw2["expanded_local_pos_ptr"] = kw["expanded_local_pos_ptr"].clone().zero_()
    _refused(name, kw2, g, "expanded_idx_mapping_ptr")
    _refused(name, dict(kw, target_logits_ptr=kw["target_logits_ptr"][:1]), g,
             "target_logits_ptr")  # fmt: skip
    _refused(name, dict(kw, HAS_DRAFT_LOGITS="yes"), g, "HAS_DRAFT_LOGITS", TypeError)
    _refused(name, dict(kw, vocab_size=1.0), g, "vocab_size", TypeError)


@pytest.mark.parametrize("idx", IDX)
def test_rejection_refusals(idx):
    name = "rejection_kernel"

    def random_with_drafts(kw, c):
        if kw["SYNTHETIC_MODE"] or kw["USE_BLOCK_VERIFICATION"]:
            return False
        cu = kw["cu_num_logits_ptr"].tolist()
        for r in range(c.grid[0]):
            nd = cu[r + 1] - cu[r] - 1
            if float(kw["temp_ptr"][int(kw["idx_mapping_ptr"][r])]) != 0 and nd > 0:
                return all(int(t) >= 0 for t in kw["draft_sampled_ptr"][cu[r] + 1 : cu[r + 1]])
        return False

    case, kw, _ = _find(name, idx, random_with_drafts)
    g = _grid(case)
    big = kw["draft_sampled_ptr"].clone()
    big[1:] = 10**6
    _refused(name, dict(kw, draft_sampled_ptr=big), g, "draft_sampled_ptr")
    _refused(name, dict(kw, SYNTHETIC_MODE=True), g, "synthetic_conditional_rates_ptr")
    _refused(name, dict(kw, seed_ptr=kw["seed_ptr"].float()), g, "seed_ptr", TypeError)
    _refused(name, dict(kw, PADDED_VOCAB_NUM_BLOCKS=3), g, "PADDED_VOCAB_NUM_BLOCKS")
    _refused(name, dict(kw, cu_num_logits_ptr=kw["cu_num_logits_ptr"][:1]), g,
             "cu_num_logits_ptr")  # fmt: skip
    narrow = torch.zeros(case.grid[0], 0, dtype=idx)
    _refused(name, dict(kw, sampled_ptr=narrow, sampled_stride=0), g, "sampled_ptr")
    _refused(name, dict(kw, vocab_num_blocks=0), g, "vocab_num_blocks")


@pytest.mark.parametrize("idx", IDX)
def test_resample_and_insert_refusals(idx):
    case, kw, _ = _find("resample_kernel", idx, lambda kw, c: c.grid[0] > 0)
    g = _grid(case)
    _refused("resample_kernel", dict(kw, WATERMARK=True, contexts_ptr=None), g, "contexts_ptr")
    far = kw["rejected_step_ptr"].clone()
    far[0] = 10**6
    _refused("resample_kernel", dict(kw, rejected_step_ptr=far), g, "expanded_idx_mapping_ptr")
    _refused("resample_kernel", dict(kw, USE_FP64=2), g, "USE_FP64")

    case, kw, _ = _find(
        "insert_resampled_kernel",
        idx,
        lambda kw, c: any(
            float(kw["temp_ptr"][int(kw["expanded_idx_mapping_ptr"][kw["cu_num_logits_ptr"][r]])])
            != 0
            for r in range(c.grid[0])
        ),
    )
    g = _grid(case)
    narrow = kw["sampled_ptr"][:, :0]
    _refused("insert_resampled_kernel", dict(kw, sampled_ptr=narrow), g, "sampled_ptr")
    _refused("insert_resampled_kernel", dict(kw, temp_ptr=kw["temp_ptr"][:0]), g,
             "expanded_idx_mapping_ptr")  # fmt: skip


@pytest.mark.parametrize("idx", IDX)
def test_gather_and_flatten_refusals(idx):
    case, kw, _ = _find("gather_draft_sampled_kernel", idx, lambda kw, c: kw["num_logits"] > 0)
    bad = kw["logits_indices_ptr"].clone()
    bad[0] = kw["input_ids_ptr"].numel()
    _refused("gather_draft_sampled_kernel", dict(kw, logits_indices_ptr=bad), None,
             "logits_indices_ptr")  # fmt: skip
    _refused("gather_draft_sampled_kernel", dict(kw, num_logits=kw["num_logits"] + 1), None,
             "logits_indices_ptr")  # fmt: skip

    case, kw, _ = _find(
        "flatten_sampled_kernel", idx, lambda kw, c: int(kw["num_sampled_ptr"].sum()) > 0
    )
    _refused("flatten_sampled_kernel", dict(kw, flat_sampled_ptr=kw["flat_sampled_ptr"][:0]),
             _grid(case), "flat_sampled_ptr")  # fmt: skip


@pytest.mark.parametrize(
    "name",
    [
        "compute_local_logits_stats_kernel",
        "compute_cumulative_log_p_kernel",
        "compute_local_residual_mass_kernel",
        "rejection_kernel",
        "resample_kernel",
        "insert_resampled_kernel",
        "flatten_sampled_kernel",
    ],
)
def test_an_empty_grid_touches_nothing(name, cases_032):
    case = mrv2.make_case(name, 3, torch.int32)
    kw, _ = case.build()
    before = _snapshot(kw)
    for grid in ((0, 1, 1), (case.grid[0], 0, 1)):
        getattr(spec, name)(**kw, grid=grid)
    _unchanged(kw, before)


@pytest.mark.parametrize(
    "row, want",
    [
        ([float("nan")], (0, float("-inf"))),  # V = 1: the NaN, then the block's -inf padding
        ([float("-inf"), float("nan"), 2.0, 2.0], (2, 2.0)),
        ([float("nan"), float("-inf"), float("nan")], (0, float("-inf"))),
        ([float("nan"), 1.0, float("nan"), 3.0, 3.0], (3, 3.0)),
    ],
)
def test_greedy_block_argmax_counts_nan_as_minus_inf(row, want):
    """The block winner at temperature 0 is ``tl.max(..., return_indices=True)`` as vLLM's
    kernel computes it under the interpreter: the max ignores NaN, the index counts NaN as
    -inf (``nanargmax``), so a block of NaN and -inf only answers index 0 with -inf."""
    V, bs = len(row), 8
    x = torch.tensor([row])
    arg, mx = torch.full((1, 1), -7, dtype=torch.int64), torch.full((1, 1), 99.0)
    spec.compute_local_logits_stats_kernel(
        arg, 1, mx, 1, torch.empty(1, 1), 1, torch.empty(1, 1), 1, torch.empty(1, 1), 1,
        x, V, None, 0, 0, torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
        torch.tensor([0.0]), V, 1, bs, grid=(1, 1, 1),
    )  # fmt: skip
    assert (int(arg[0, 0]), float(mx[0, 0])) == want


@pytest.mark.parametrize("temp", [1.0, 0.5])
def test_summed_exponentials_of_masked_blocks(temp):
    """A block's summed exponentials skip each run of 128 values that is all -inf (a masked
    row's) without computing them, as the zeros they give: a NaN among them still makes the sum
    NaN, a lone value among them counts, a block of one value per run sums those, and a block
    wholly -inf has max -inf and sum 0 -- in the last block's padding too, at any temperature
    but 0 (the launch reads logits the temperature kernel has divided)."""
    V, bs = 1300, 512
    ninf = float("-inf")
    x = torch.full((4, V), ninf)
    x[0, 5], x[0, 700] = 1.0, 2.0  # one value in a block of -inf
    x[1, 3], x[1, 300] = 0.5, float("nan")  # a NaN in a run that is otherwise -inf
    x[2, 0:512:128] = 0.0  # one value per run of 128
    x[2, 1100:1300:50] = -3.0  # the last block, partial (276 values + padding)
    x[3, 600:1024] = torch.linspace(-5.0, 5.0, 424)  # block 0 wholly -inf
    nb = -(-V // bs)
    mx, se = torch.full((4, nb), 7.0), torch.full((4, nb), 7.0)
    spec.compute_local_logits_stats_kernel(
        torch.empty(4, nb, dtype=torch.int64), nb, mx, nb, se, nb, torch.empty(4, nb), nb,
        torch.empty(4, nb), nb, x, V, None, 0, 0, torch.zeros(4, dtype=torch.int32),
        torch.zeros(4, dtype=torch.int32), torch.tensor([temp]), V, 1, bs, grid=(4, nb, 1),
    )  # fmt: skip
    for li in range(4):
        for b in range(nb):
            blk = x[li, b * bs : (b + 1) * bs]
            numbers = blk[~blk.isnan()]
            m = numbers.max() if numbers.numel() else torch.tensor(ninf)
            want = (blk - m).exp().sum() if m > ninf else torch.tensor(0.0)
            assert float(mx[li, b]) == float(m), (li, b)
            torch.testing.assert_close(se[li, b], want, rtol=2e-6, atol=0.0, equal_nan=True)
    assert se[1, 0].isnan() and float(se[3, 0]) == 0.0 and float(se[2, 0]) == 4.0


def test_wide_vocab_splits_across_threads(many_threads):
    """One decode row over a 128k vocabulary: the stats and the resampling give the same bits
    on one thread and on four (the programs are the row's vocabulary blocks)."""
    rng = random.Random(5)
    V, bs = 128256, 8192
    x = torch.randn(1, V, generator=torch.Generator().manual_seed(rng.getrandbits(32)))
    nb = -(-V // bs)
    outs = []
    for threads in (1, 4):
        kernels_cpu.set_num_threads(threads)
        mx, se = torch.empty(1, nb), torch.empty(1, nb)
        spec.compute_local_logits_stats_kernel(
            torch.empty(1, nb, dtype=torch.int64), nb, mx, nb, se, nb, torch.empty(1, nb), nb,
            torch.empty(1, nb), nb, x, V, None, 0, 0, torch.zeros(1, dtype=torch.int32),
            torch.zeros(1, dtype=torch.int32), torch.tensor([0.7]), V, 1, bs, grid=(1, nb, 1),
        )  # fmt: skip
        nb2 = -(-V // 1024)
        arg, val = torch.empty(1, nb2, dtype=torch.int64), torch.empty(1, nb2)
        spec.resample_kernel(
            arg, nb2, val, nb2, x, V, torch.zeros(1), None, 0, 0, torch.zeros(1),
            torch.zeros(1, dtype=torch.int32), torch.tensor([0, 1]),
            torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
            torch.tensor([0.7]), torch.tensor([99]),
            torch.tensor([12345]), None, None, 0, None, None, 0, 0, V, 1024, grid=(1, nb2, 1),
        )  # fmt: skip
        outs.append((mx, se, arg, val))
    for a, b in zip(*outs):
        assert torch.equal(a, b)
    assert torch.isfinite(outs[0][1]).all() and (outs[0][1] > 0).all()


@pytest.mark.parametrize("idx", IDX)
def test_cumulative_row_mapping(idx, cases_032):
    """vLLM 0.34's form reads request slot ``s``'s draft logits from row ``max(map[s], 0)``: the
    identity mapping (or none) gives 0.32's result, a short mapping is refused naming it."""
    case, kw, bufs = _find(
        "compute_cumulative_log_p_kernel",
        idx,
        lambda kw, c: (
            kw["HAS_DRAFT_LOGITS"]
            and "draft_logits_row_mapping_ptr" not in kw
            and any(float(kw["temp_ptr"][int(s)]) != 0 for s in kw["idx_mapping_ptr"])
        ),
    )
    g = _grid(case)
    spec.compute_cumulative_log_p_kernel(**kw, grid=g)
    for mapping in (None, torch.arange(kw["temp_ptr"].numel(), dtype=idx)):
        kw2, _ = case.build()
        spec.compute_cumulative_log_p_row_mapping_kernel(
            **kw2, draft_logits_row_mapping_ptr=mapping, grid=g
        )
        assert torch.equal(kw2["cumulative_log_p_ptr"], kw["cumulative_log_p_ptr"])
    kw3, _ = case.build()
    before = _snapshot(kw3)
    with pytest.raises(ValueError, match="^draft_logits_row_mapping_ptr: expected"):
        spec.compute_cumulative_log_p_row_mapping_kernel(
            **kw3, draft_logits_row_mapping_ptr=torch.zeros(0, dtype=idx), grid=g
        )
    _unchanged(kw3, before)


# -- vLLM 0.33's and 0.34's forms of the stats and residual kernels -------------------------------

#: kernel -> its forms: 0.32's (num_speculative_steps), 0.33's (num_logits), 0.34's (+ mapping)
FORMS = {
    "compute_local_logits_stats_kernel": (
        "compute_local_logits_stats_kernel",
        "compute_local_logits_stats_num_logits_kernel",
        "compute_local_logits_stats_row_mapping_kernel",
    ),
    "compute_local_residual_mass_kernel": (
        "compute_local_residual_mass_kernel",
        "compute_local_residual_mass_num_logits_kernel",
        "compute_local_residual_mass_row_mapping_kernel",
    ),
}


def _as_form(kw, form, mapping=None):
    """0.32's launch ``kw`` in another form's arguments: ``num_logits`` = the rows, and for
    0.34's the row mapping."""
    names = [a.name for a in contracts.contract(form).args]
    extra = dict(
        num_logits=kw["expanded_local_pos_ptr"].numel(), draft_logits_row_mapping_ptr=mapping
    )
    return {n: kw[n] if n in kw else extra[n] for n in names}


def _launch(form, kw, case):
    buffers = {k: v for k, v in kw.items() if isinstance(v, torch.Tensor)}
    getattr(spec, form)(**kw, grid=_grid(case))
    return buffers


def _full_drafts(kw, case):
    """Every request of the step has all its drafts: both bonus rules pick the same rows."""
    elp, K, L = kw["expanded_local_pos_ptr"], kw["num_speculative_steps"], case.grid[0]
    return L > 0 and all(
        (int(elp[i]) >= K) == (i + 1 >= L or int(elp[i + 1]) == 0) for i in range(L)
    )


@pytest.mark.parametrize("name", tuple(FORMS))
@pytest.mark.parametrize("idx", IDX)
def test_later_forms_agree_where_their_rules_do(name, idx, cases_032):
    """With every request's drafts all there, 0.32's bonus rule and 0.33's pick the same rows;
    with no row mapping, or the identity, 0.34's form reads the rows 0.33's does."""
    form32, form33, form34 = FORMS[name]
    case, kw, _ = _find(
        name,
        idx,
        lambda kw, c: _full_drafts(kw, c) and kw.get("HAS_DRAFT_LOGITS", True),
    )
    want = _launch(form32, kw, case)
    slots = kw["temp_ptr"].numel()
    for form, mapping in ((form33, None), (form34, None), (form34, torch.arange(slots))):
        kw2, _ = case.build()
        got = _launch(form, _as_form(kw2, form, mapping), case)
        for k in want:
            assert torch.equal(want[k].nan_to_num(), got[k].nan_to_num()), (form, k)


@pytest.mark.parametrize("name", tuple(FORMS))
@pytest.mark.parametrize("idx", IDX)
def test_a_request_ending_early_has_its_last_row_as_bonus_row(name, idx, cases_032):
    """0.33+: a request with fewer drafts than ``num_speculative_steps`` (adaptive
    verification) ends at its own last row -- that row gets no stats or residual, where 0.32
    computed them -- and every other row is as 0.32's."""
    form32, form33, _ = FORMS[name]

    def early(kw, c):
        elp, K = kw["expanded_local_pos_ptr"], kw["num_speculative_steps"]
        L = c.grid[0]
        return any(
            int(elp[i]) < K and (i + 1 == L or int(elp[i + 1]) == 0) for i in range(1, L)
        ) and kw.get("HAS_DRAFT_LOGITS", True)

    case, kw, bufs = _find(name, idx, early)
    _launch(form32, kw, case)
    kw2, _ = case.build()
    kw2 = _as_form(kw2, form33)
    _launch(form33, kw2, case)
    fresh, _ = case.build()
    outs = [k for k in bufs if k.startswith(("target_local", "draft_local", "local_resid"))]
    ended = 0
    for i in range(case.grid[0]):
        ends = _bonus_row(kw2, i) and not _bonus_row(kw, i)
        ended += ends
        for k in outs:
            want = fresh[k][i] if ends else kw[k][i]  # the row untouched by 0.33's form
            assert torch.equal(kw2[k][i].nan_to_num(), want.nan_to_num()), (i, k)
    assert ended


def _reads_drafts(name, kw, case):
    """Whether 0.33's form of ``name`` reads some draft logits in the launch ``kw``."""
    later = dict(kw, num_logits=case.grid[0])
    del later["num_speculative_steps"]
    if not kw.get("HAS_DRAFT_LOGITS", True):
        return False
    for li in range(case.grid[0]):
        slot = int(kw["expanded_idx_mapping_ptr"][li])
        if _bonus_row(later, li) or float(kw["temp_ptr"][slot]) == 0:
            continue
        if name == "compute_local_logits_stats_kernel":
            return True
        if int(kw["expanded_local_pos_ptr"][li]) != 0 and int(kw["draft_sampled_ptr"][li + 1]) >= 0:
            return True
    return False


@pytest.mark.parametrize("name", tuple(FORMS))
@pytest.mark.parametrize("idx", IDX)
def test_a_row_mapping_reads_the_mapped_rows(name, idx, cases_032):
    """0.34's form reads request slot ``s``'s draft logits from row ``max(map[s], 0)``: as
    0.33's form reading a cache whose row ``s`` holds that row; a mapping without an entry
    for a slot read is refused naming it, nothing written."""
    _, form33, form34 = FORMS[name]
    case, kw, _ = _find(name, idx, lambda kw, c: _reads_drafts(name, kw, c))
    slots = kw["temp_ptr"].numel()
    g = torch.Generator().manual_seed(slots)
    mapping = torch.randint(-1, kw["draft_logits_ptr"].shape[0], (slots,), generator=g).to(idx)
    got = _launch(form34, _as_form(kw, form34, mapping), case)
    kw2, _ = case.build()
    moved = kw2["draft_logits_ptr"].clone()
    for s in range(slots):
        moved[s] = kw2["draft_logits_ptr"][max(int(mapping[s]), 0)]
    kw2["draft_logits_ptr"] = moved
    want = _launch(form33, _as_form(kw2, form33), case)
    for k in want:
        if k != "draft_logits_ptr":
            assert torch.equal(want[k].nan_to_num(), got[k].nan_to_num()), k
    kw3, _ = case.build()
    kw3 = _as_form(kw3, form34, torch.zeros(0, dtype=idx))
    before = _snapshot(kw3)
    with pytest.raises(ValueError, match="^draft_logits_row_mapping_ptr: expected"):
        _launch(form34, kw3, case)
    _unchanged(kw3, before)


def _masked(block, bs):
    """SKIP_MASKED_BLOCKS' test: the block's max, NaN ignored and the lanes past the vocabulary
    -inf, is -inf (a full block of NaN only has max NaN)."""
    numbers = block[~block.isnan()]
    if block.numel() < bs:
        return bool((numbers == float("-inf")).all())
    return numbers.numel() > 0 and bool((numbers == float("-inf")).all())


def _resampled_blocks(kw, case):
    """``(request, block, masked)`` for each block the resampling draws: not the rows of a
    greedy request other than its bonus row."""
    bs, out = kw["BLOCK_SIZE"], []
    for r in range(case.grid[0]):
        row = int(kw["cu_num_logits_ptr"][r]) + int(kw["rejected_step_ptr"][r])
        slot = int(kw["expanded_idx_mapping_ptr"][row])
        bonus = row == int(kw["cu_num_logits_ptr"][r + 1]) - 1
        if float(kw["temp_ptr"][slot]) == 0.0 and not bonus:
            continue
        for b in range(case.grid[1]):
            block = kw["target_logits_ptr"][row, b * bs : (b + 1) * bs].float()
            out.append((r, b, _masked(block, bs)))
    return out


@pytest.mark.parametrize("idx", IDX)
def test_the_later_resampling_skips_masked_blocks(idx, cases_032):
    """0.34's resampling without a row mapping or skipping draws as 0.32's; with
    SKIP_MASKED_BLOCKS a block whose target logits are all -inf stores token ``b *
    BLOCK_SIZE`` and max -inf, and every other block its draw."""
    form34 = "resample_row_mapping_kernel"

    def launch(kw, case, skip):
        names = [a.name for a in contracts.contract(form34).args]
        extra = dict(draft_logits_row_mapping_ptr=None, SKIP_MASKED_BLOCKS=skip)
        return _launch(form34, {n: kw[n] if n in kw else extra[n] for n in names}, case)

    case, kw, _ = _find(
        "resample_kernel", idx, lambda kw, c: any(m for _, _, m in _resampled_blocks(kw, c))
    )
    want = _launch("resample_kernel", kw, case)
    kw2, _ = case.build()
    got = launch(kw2, case, False)
    for k in want:
        assert torch.equal(want[k].nan_to_num(), got[k].nan_to_num()), k
    kw3, _ = case.build()
    launch(kw3, case, True)
    arg, mx, bs = (
        kw3["resampled_local_argmax_ptr"],
        kw3["resampled_local_max_ptr"],
        kw["BLOCK_SIZE"],
    )
    for r, b, masked in _resampled_blocks(kw, case):
        if masked:
            assert int(arg[r, b]) == b * bs and mx[r, b] == float("-inf"), (r, b)
        else:
            assert int(arg[r, b]) == int(kw["resampled_local_argmax_ptr"][r, b]), (r, b)
            assert torch.equal(
                mx[r, b].nan_to_num(), kw["resampled_local_max_ptr"][r, b].nan_to_num()
            )


# -- vLLM 0.33's and 0.34's rejection: step seeds, FLy --------------------------------------------


def _greedy_fly_launch(drafts, entropy, window, threshold=0.5):
    """One greedy request of four drafts over a vocabulary of 4 (one block): the target argmax
    of rows 0-3 is 1, 2, 3, 0; ``drafts`` are the tokens proposed after each row."""
    L, idx = 5, torch.int64
    argmax = torch.tensor([[1], [2], [3], [0], [0]], dtype=idx)
    return dict(
        sampled_ptr=torch.full((1, 5), -7, dtype=idx),
        sampled_stride=5,
        rejected_steps_ptr=torch.full((1,), -7, dtype=idx),
        target_rejected_logsumexp_ptr=torch.full((1,), 7.0),
        draft_rejected_logsumexp_ptr=torch.full((1,), 7.0),
        target_logits_ptr=torch.zeros(L, 4),
        target_logits_stride=4,
        target_local_argmax_ptr=argmax,
        target_local_argmax_stride=1,
        target_local_max_ptr=torch.ones(L, 1),
        target_local_max_stride=1,
        target_local_sumexp_ptr=torch.ones(L, 1),
        target_local_sumexp_stride=1,
        draft_sampled_ptr=torch.tensor([0, *drafts], dtype=idx),
        draft_logits_ptr=None,
        draft_logits_stride_0=0,
        draft_logits_stride_1=0,
        draft_logits_row_mapping_ptr=None,
        draft_local_max_ptr=None,
        draft_local_max_stride=0,
        draft_local_sumexp_ptr=None,
        draft_local_sumexp_stride=0,
        cu_num_logits_ptr=torch.tensor([0, L], dtype=idx),
        idx_mapping_ptr=torch.tensor([0], dtype=idx),
        temp_ptr=torch.tensor([0.0]),
        seed_ptr=torch.tensor([3], dtype=idx),
        pos_ptr=torch.arange(L, dtype=idx),
        synthetic_conditional_rates_ptr=None,
        cumulative_log_p_ptr=None,
        local_residual_mass_ptr=None,
        local_residual_mass_stride=0,
        fly_entropy_ptr=torch.tensor(entropy),
        fly_entropy_threshold=threshold,
        vocab_num_blocks=1,
        PADDED_VOCAB_NUM_BLOCKS=1,
        HAS_DRAFT_LOGITS=False,
        SYNTHETIC_MODE=False,
        USE_BLOCK_VERIFICATION=False,
        FLY_WINDOW_SIZE=window,
    )


@pytest.mark.parametrize(
    "drafts, entropy, window, accepted, row",
    [
        # no FLy: the first mismatch (row 1) ends it, the target argmax stored there
        ([1, 0, 3, 1], [0.9] * 5, 0, 1, [1, 2, -7, -7]),
        # row 1's rejection deferred (entropy >= 0.5, a draft after it): row 2 accepted
        # natively confirms the window of 1, row 3's rejection is certain (entropy 0.1)
        ([1, 0, 3, 1], [0.9, 0.9, 0.9, 0.1, 0.0], 1, 3, [1, 0, 3, 0]),
        # a window of 2 is not confirmed (row 3 rejects): the length stays at the deferred
        # rejection, its target argmax stored there, the later drafts as verified
        ([1, 0, 3, 1], [0.9] * 5, 2, 1, [1, 2, 3, 1]),
        # a certain target (entropy below the threshold): no deferral
        ([1, 0, 3, 1], [0.9, 0.1, 0.9, 0.9, 0.0], 1, 1, [1, 2, -7, -7]),
        # too few drafts after the rejection to fill the window: no deferral
        ([1, 2, 3, 1], [0.9] * 5, 2, 3, [1, 2, 3, 0]),
        # a -1 placeholder is rejected and never deferred (nothing to keep)
        ([1, -1, 3, 0], [0.9] * 5, 1, 1, [1, 2, -7, -7]),
    ],
)
def test_fly_defers_uncertain_greedy_rejections(drafts, entropy, window, accepted, row):
    kw = _greedy_fly_launch(drafts, entropy, window)
    spec.rejection_row_mapping_kernel(**kw, grid=(1, 1, 1))
    assert int(kw["rejected_steps_ptr"][0]) == accepted
    assert kw["sampled_ptr"][0, :4].tolist() == row
    kw.pop("draft_logits_row_mapping_ptr")
    kw2 = _greedy_fly_launch(drafts, entropy, window)
    kw2.pop("draft_logits_row_mapping_ptr")
    spec.rejection_fly_kernel(**kw2, grid=(1, 1, 1))  # 0.33's form: the same walk
    assert torch.equal(kw2["sampled_ptr"], kw["sampled_ptr"])


@pytest.mark.parametrize("idx", IDX)
def test_later_rejection_without_fly_is_0_32s_but_for_block_step_seeds(idx, cases_032):
    """With FLY_WINDOW_SIZE 0 and no row mapping, the 0.33/0.34 forms verify as 0.32's, except
    that block verification draws step ``i``'s uniform from ``seed ^ i << 32``."""
    for seed in range(40):
        case = mrv2.make_case("rejection_kernel", seed, idx)
        kw, _ = case.build()
        want = _launch("rejection_kernel", kw, case)
        for form in ("rejection_fly_kernel", "rejection_row_mapping_kernel"):
            kw2, _ = case.build()
            extra = dict(
                draft_logits_row_mapping_ptr=None,
                fly_entropy_ptr=None,
                fly_entropy_threshold=0.3,
                FLY_WINDOW_SIZE=0,
            )
            names = [a.name for a in contracts.contract(form).args]
            got = _launch(form, {n: kw2[n] if n in kw2 else extra[n] for n in names}, case)
            if kw["USE_BLOCK_VERIFICATION"] and not all(
                float(kw["temp_ptr"][int(s)]) == 0 for s in kw["idx_mapping_ptr"]
            ):
                continue  # the step seeds draw other uniforms
            for k in want:
                assert torch.equal(want[k].nan_to_num(), got[k].nan_to_num()), (case, form, k)


def test_fly_needs_its_entropies():
    kw = _greedy_fly_launch([1, 0, 3, 1], [0.9] * 5, 1)
    before = _snapshot(kw)
    for change, name in (
        (dict(fly_entropy_ptr=None), "fly_entropy_ptr"),
        (dict(fly_entropy_ptr=torch.ones(3)), "fly_entropy_ptr"),
        (dict(fly_entropy_threshold="high"), "fly_entropy_threshold"),
        (dict(FLY_WINDOW_SIZE=-1), "FLY_WINDOW_SIZE"),
        (dict(draft_sampled_ptr=torch.tensor([0, 1, 4, 3, 1])), "draft_sampled_ptr"),
    ):
        with pytest.raises((TypeError, ValueError), match=f"^{name}: expected"):
            spec.rejection_row_mapping_kernel(**dict(kw, **change), grid=(1, 1, 1))
        _unchanged(kw, before)


def _one_block_draw(x, idx=torch.int64):
    """``resample_kernel`` on one bonus row of one 1024-lane block (fp32, temperature 1, seed 3,
    position 0): the block's token and score."""
    la = torch.full((1, 1), -5, dtype=torch.int64)
    lm = torch.full((1, 1), 9.0)
    spec.resample_kernel(
        la, 1, lm, 1, x.view(1, -1), 1024, torch.zeros(1), None, 0, 0, torch.zeros(1),
        torch.zeros(1, dtype=idx), torch.arange(2, dtype=idx), torch.zeros(1, dtype=idx),
        torch.zeros(2, dtype=idx), torch.tensor([1.0]), torch.tensor([3]),
        torch.zeros(1, dtype=idx), None, None, 0, None, None, 0, 0, 1024, 1024,
        HAS_DRAFT_LOGITS=False, USE_FP64=False, USE_BLOCK_VERIFICATION=False,
        CONTEXT_WIDTH=1, WATERMARK=False, DEDUPLICATE_CONTEXTS=False, grid=(1, 1),
    )  # fmt: skip
    return int(la[0, 0]), float(lm[0, 0])


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("larger_logit_first", [False, True])
def test_an_exact_tie_goes_to_the_first_lane_whichever_logit_is_larger(idx, larger_logit_first):
    """Two lanes whose scores (logit + noise, fp32) are equal bit for bit: the block's token is
    the first of them, as ``tl.max``'s index is, whichever holds the larger logit and whatever
    the other lanes hold (the draw passes lanes over by bounds on their noise: none may pass
    over a lane that ties). The tie is built from the kernel's own scores: lane b's noise is
    its score at logit 0, and its logit is stepped an ulp at a time until its score equals lane
    a's."""
    minf = torch.full((1024,), float("-inf"))

    def alone(lane, value):
        x = minf.clone()
        x[lane] = value
        return _one_block_draw(x, idx)

    a = 100
    _, s_a = alone(a, 1.0)
    for b in range(600, 1000):  # a lane b whose logit, to tie, lies above or below lane a's
        _, g_b = alone(b, 0.0)
        x_b = torch.tensor(s_a - g_b, dtype=torch.float32)
        if (x_b.item() > 1.0) != larger_logit_first:
            break
    else:
        raise AssertionError("no lane on the wanted side")
    for _ in range(16):  # step an ulp at a time to the logit whose score is s_a exactly
        got = (x_b + torch.tensor(g_b, dtype=torch.float32)).item()
        if got == s_a:
            break
        x_b = torch.nextafter(x_b, torch.tensor(float("inf") if got < s_a else float("-inf")))
    assert alone(b, x_b.item()) == (b, s_a), "no tie could be built"
    assert (x_b.item() > 1.0) != larger_logit_first
    for rest in (float("-inf"), -60.0, -8.0):  # other lanes masked, far below, or nearer
        x = torch.full((1024,), rest)
        x[a], x[b] = 1.0, x_b.item()
        tok, score = _one_block_draw(x, idx)
        if rest < -30:
            assert score == s_a  # nothing else can reach it
        if score == s_a:
            assert tok == a, (rest, tok)
