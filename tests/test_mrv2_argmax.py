"""vLLM 0.34's split argmax kernels on CPU (``kernels_cpu._mrv2_argmax``): the greedy argmax's
two stages and the Gumbel sampler's combine.

Beside the parity tests against vLLM 0.34's own kernels under the interpreter
(``test_mrv2_parity.py``: ``test_mrv2_parity_in_its_release`` where the sources under test are
an older release's): the parity cases (``fdkit.mrv2.sample``: random layouts, int32/int64
index buffers, NaN/-inf/ties, poisoned outputs between guards) against plain-torch readings of
the kernels; the two greedy stages together against vLLM's own fallback
(``logits.masked_fill(logits.isnan(), -inf).argmax(-1)``) and the combine against 0.32's
``local_argmax.gather(local_max.argmax(-1))``, launched as vLLM's host code launches them; the
edges the rules decide (blocks past ``N``, no lanes at all); bad launches refused naming the
argument with every buffer as it was; results that do not depend on the thread count.
"""

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu as K
from fdkit.cases import guard_violations
from fdkit.mrv2 import sample as cases
from tests._fuzz import fuzz_settings
from tests._spec_helpers import threads

INDEX = (torch.int32, torch.int64)
NAMES = ("argmax_partial_kernel", "argmax_finish_kernel", "gumbel_combine_kernel")
NEG_INF = float("-inf")


def _cdiv(a, b):
    return -(-a // b)


def _next_pow2(n):
    return 1 << max(0, n - 1).bit_length()


# -- plain-torch readings of vLLM's kernels ------------------------------------------------------


def _flat(t, stride, r, c0, c1):
    """Elements ``[c0, c1)`` of row ``r``: a 2-D tensor's own row, else ``t`` read flat with
    ``stride`` between rows (as the kernel's ``ptr + r * stride + c`` reads it)."""
    if t.dim() == 2:
        return t[r, c0:c1]
    return t.reshape(-1)[r * stride + c0 : r * stride + c1]


def _put(t, stride, r, c, v):
    if t.dim() == 2:
        t[r, c] = v
    else:
        t.reshape(-1)[r * stride + c] = v


def _first_max(values):
    """``tl.argmax`` with NaN as -inf: the first index of the largest, 0 when there is none."""
    if values.numel() == 0:
        return 0
    values = values.double()
    return int(values.masked_fill(values.isnan(), NEG_INF).argmax())


def _ref_partial(kw, grid):
    n, bs, s = kw["N"], kw["BLOCK"], kw["SPLITS"]
    for r in range(grid[0]):
        for part in range(grid[1]):
            c0 = part * bs
            block = _flat(kw["X"], kw["SX"], r, c0, max(c0, min(n, c0 + bs))).float()
            block = block.masked_fill(block.isnan(), NEG_INF)
            j = _first_max(block)
            best = block[j] if block.numel() else NEG_INF
            _put(kw["PV"], s, r, part, best)
            _put(kw["PI"], s, r, part, c0 + j)


def _ref_finish(kw, grid):
    s = kw["SPLITS"]
    lanes = min(s, kw["BLOCK"])
    for r in range(grid[0]):
        part = _first_max(_flat(kw["PV"], s, r, 0, lanes))
        kw["OUT"].reshape(-1)[r] = _flat(kw["PI"], s, r, part, part + 1)[0]


def _ref_combine(kw, grid):
    nb, padded = kw["num_blocks"], kw["PADDED_NUM_BLOCKS"]
    lanes = min(nb, padded) if nb > 0 else 0
    for r in range(grid[0]):
        scores = _flat(kw["local_max_ptr"], kw["local_max_stride"], r, 0, lanes)
        b = int(scores.argmax()) if lanes else padded  # torch.argmax: the first NaN wins
        stride = kw["local_argmax_stride"]
        kw["sampled_ptr"].reshape(-1)[r] = _flat(kw["local_argmax_ptr"], stride, r, b, b + 1)[0]


REFERENCES = {
    "argmax_partial_kernel": _ref_partial,
    "argmax_finish_kernel": _ref_finish,
    "gumbel_combine_kernel": _ref_combine,
}


# -- the parity cases against the references -----------------------------------------------------


def _grid(case):
    return tuple(case.grid) + (1,) * (3 - len(case.grid))


def _make(name, seed, idx):
    return cases.CASES[name](random.Random(seed), idx, "small")


def _run(case, positional=False):
    kw, compared = case.build()
    fn = getattr(K, case.kernel)
    if positional:
        fn(*kw.values(), grid=_grid(case))
    else:
        fn(**kw, grid=_grid(case))
    return compared


def _same(a, b):
    if a.is_floating_point():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    return torch.equal(a, b)


@pytest.mark.parametrize("name", NAMES)
@fuzz_settings(80, deep_examples=3000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), idx=st.sampled_from(INDEX), positional=st.booleans())
def test_matches_the_reference(name, seed, idx, positional):
    case = _make(name, seed, idx)
    got = _run(case, positional)
    kw, want = case.build()
    REFERENCES[name](kw, _grid(case))
    assert got.keys() == want.keys()
    for key in got:
        assert _same(got[key], want[key]), (
            f"{case}: {key}\nkernel:    {got[key].tolist()}\nreference: {want[key].tolist()}"
        )
    assert not guard_violations(case, got), case


# -- as vLLM's host code launches them -----------------------------------------------------------


def _greedy_argmax(logits):
    """vLLM 0.34's ``greedy_argmax`` (``sample/greedy_argmax.py``), its Triton path, with our
    kernels behind the launcher the plugin installs."""
    rows, vocab = logits.shape
    out = torch.empty(rows, dtype=torch.int64)
    block = 4096
    splits = _cdiv(vocab, block)
    values = torch.empty((rows, splits), dtype=torch.float32)
    indices = torch.empty((rows, splits), dtype=torch.int32)
    K.GridLauncher(K.argmax_partial_kernel)[(rows, splits)](
        logits, values, indices, vocab, logits.stride(0), splits, block, num_warps=4
    )
    K.GridLauncher(K.argmax_finish_kernel)[(rows,)](
        values, indices, out, splits, _next_pow2(splits), num_warps=1
    )
    return out


def _fallback(logits):
    """What ``greedy_argmax`` computes off the GPU: NaN as -inf, then ``argmax``."""
    return logits.masked_fill(logits.isnan(), NEG_INF).argmax(dim=-1)


@fuzz_settings(25, deep_examples=400, deadline=None)
@given(
    rows=st.integers(1, 4),
    vocab=st.sampled_from((4096, 5000, 8192, 12289)),
    dtype=st.sampled_from((torch.float32, torch.bfloat16)),
    ties=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_the_greedy_stages_are_vllms_argmax(rows, vocab, dtype, ties, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab + 3, generator=g) * 3
    if ties:
        logits = logits.round()
    logits[0, torch.randint(0, vocab, (20,), generator=g)] = float("nan")
    logits[-1, : vocab // 2] = NEG_INF
    if rows > 2:
        logits[1] = float("nan")  # NaN as -inf: index 0
    logits = logits.to(dtype)[:, :vocab]  # a column slice: rows vocab + 3 apart
    assert torch.equal(_greedy_argmax(logits), _fallback(logits))


@pytest.mark.parametrize("fp64", [False, True])
def test_the_combine_is_the_argmax_and_gather_it_replaced(idx_dtype_cases, fp64):
    """0.34's ``gumbel_sample`` combines per-block winners with this kernel where 0.32 took
    ``local_argmax.gather(-1, local_max.argmax(-1))``: the same token."""
    idx = idx_dtype_cases
    g = torch.Generator().manual_seed(3)
    rows, vocab, bs = 6, 5000, 1024
    nb = _cdiv(vocab, bs)
    logits = torch.randn(rows, vocab, generator=g).round()
    logits[2, 1500] = float("nan")
    logits[4] = NEG_INF
    mapping = torch.tensor([0, 1, 0, -1, 1, 0], dtype=idx)
    la = torch.empty(rows, nb, dtype=torch.int64)
    lm = torch.empty(rows, nb, dtype=torch.float64 if fp64 else torch.float32)
    K.gumbel_sample_kernel(
        la, nb, lm, nb, None, 0, 0, None, None, 0, logits, vocab, mapping,
        torch.tensor([11, 12], dtype=idx), torch.arange(rows, dtype=idx),
        torch.tensor([0.8, 0.0]), vocab, bs, False, True, fp64, False, grid=(rows, nb),
    )  # fmt: skip
    lm[5, 2] = float("nan")  # a NaN score: the first NaN wins, as torch.argmax's
    sampled = torch.empty(rows, dtype=torch.int64)
    K.GridLauncher(K.gumbel_combine_kernel)[(rows,)](
        la, la.stride(0), lm, lm.stride(0), sampled, nb, PADDED_NUM_BLOCKS=_next_pow2(nb)
    )
    assert torch.equal(sampled, la.gather(-1, lm.argmax(-1, keepdim=True)).view(-1))


@pytest.fixture(params=INDEX, ids=["int32", "int64"])
def idx_dtype_cases(request):
    return request.param


# -- the edges the rules decide ------------------------------------------------------------------


def test_a_block_past_n_and_blocks_of_no_number_take_their_first_column():
    x = torch.tensor([[1.0, 5.0, 5.0, 2.0, 9.0], [NEG_INF, float("nan"), NEG_INF, 3.0, 3.0]])
    pv = torch.full((2, 4), 7.0)
    pi = torch.full((2, 4), -7, dtype=torch.int64)
    K.argmax_partial_kernel(x, pv, pi, 4, 5, 4, 2, grid=(2, 3))  # N = 4: column 4 is unread
    assert pi.tolist() == [[1, 2, 4, -7], [0, 3, 4, -7]]
    assert pv[:, :3].tolist() == [[5.0, 5.0, NEG_INF], [NEG_INF, 3.0, NEG_INF]]
    assert (pv[:, 3] == 7).all()


def test_no_split_reads_the_first_slot_no_block_reads_the_sentinel(idx_dtype_cases):
    idx = idx_dtype_cases
    out = torch.full((3,), -7, dtype=torch.int64)
    K.argmax_finish_kernel(torch.empty(0), torch.tensor([42, 5], dtype=idx), out, 0, 1, grid=(3,))
    assert out.tolist() == [42, 42, 42]  # SPLITS = 0: every row's part 0 is PI[0]
    la = torch.arange(10, dtype=idx).view(2, 5)
    sampled = torch.full((2,), -7, dtype=idx)
    K.gumbel_combine_kernel(la, 5, torch.empty(2, 0), 0, sampled, 0, 4, grid=(2,))
    assert sampled.tolist() == [4, 9]  # no block: PADDED_NUM_BLOCKS = 4 is the slot read


def test_the_finish_reads_no_block_past_block():
    pv = torch.tensor([[1.0, 2.0, 9.0], [float("nan"), NEG_INF, 4.0]])
    pi = torch.tensor([[10, 11, 12], [20, 21, 22]])
    out = torch.empty(2, dtype=torch.int64)
    K.argmax_finish_kernel(pv, pi, out, 3, 2, grid=(2,))
    assert out.tolist() == [11, 20]  # NaN and -inf tie as -inf: the first
    K.argmax_finish_kernel(pv, pi, out, 3, 4, grid=(2,))
    assert out.tolist() == [12, 22]


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_grid_writes_nothing(name):
    for seed in range(6):
        case = _make(name, seed, torch.int64)
        kw, after = case.build()
        _, before = case.build()
        grid = list(_grid(case))
        grid[0] = 0
        getattr(K, name)(**kw, grid=tuple(grid))
        for key in after:
            assert _same(after[key], before[key]), (case, key)


# -- refusals ------------------------------------------------------------------------------------


def _partial_args():
    x = torch.randn(3, 40)
    return dict(
        X=x,
        PV=torch.full((3, 4), 7.0),
        PI=torch.full((3, 4), -7, dtype=torch.int32),
        N=40,
        SX=40,
        SPLITS=4,
        BLOCK=16,
    )


def _finish_args():
    return dict(
        PV=torch.randn(3, 4),
        PI=torch.arange(12, dtype=torch.int32).view(3, 4),
        OUT=torch.full((3,), -7, dtype=torch.int64),
        SPLITS=4,
        BLOCK=4,
    )


def _combine_args():
    return dict(
        local_argmax_ptr=torch.arange(12).view(3, 4),
        local_argmax_stride=4,
        local_max_ptr=torch.randn(3, 4),
        local_max_stride=4,
        sampled_ptr=torch.full((3,), -7, dtype=torch.int64),
        num_blocks=4,
        PADDED_NUM_BLOCKS=4,
    )


def _i64(*shape):
    return torch.zeros(*shape, dtype=torch.int64)


def _i32(*shape):
    return torch.zeros(*shape, dtype=torch.int32)


REFUSALS = [
    ("argmax_partial_kernel", dict(X=torch.randn(3, 39), SX=39), "X"),
    ("argmax_partial_kernel", dict(X=torch.randn(3, 40, dtype=torch.float64)), "X"),
    ("argmax_partial_kernel", dict(SX=41), "SX"),
    ("argmax_partial_kernel", dict(N=40.0), "N"),
    ("argmax_partial_kernel", dict(BLOCK=0), "BLOCK"),
    ("argmax_partial_kernel", dict(PV=torch.full((2, 4), 7.0)), "PV"),
    ("argmax_partial_kernel", dict(PV=torch.full((12,), 7.0), SPLITS=5), "SPLITS"),
    ("argmax_partial_kernel", dict(PI=torch.zeros(3, 4, dtype=torch.int16)), "PI"),
    ("argmax_partial_kernel", dict(PV=torch.ones(12), PI=_i32(12), SPLITS=2), "PV"),  # overlap
    ("argmax_finish_kernel", dict(PV=torch.randn(2, 4)), "PV"),
    ("argmax_finish_kernel", dict(PI=torch.zeros(11, dtype=torch.int32)), "PI"),
    ("argmax_finish_kernel", dict(OUT=_i64(2)), "OUT"),
    ("argmax_finish_kernel", dict(OUT=torch.zeros(3)), "OUT"),
    ("argmax_finish_kernel", dict(BLOCK=0), "BLOCK"),
    ("argmax_finish_kernel", dict(SPLITS=-1), "SPLITS"),
    ("gumbel_combine_kernel", dict(PADDED_NUM_BLOCKS=0), "PADDED_NUM_BLOCKS"),
    ("gumbel_combine_kernel", dict(local_max_ptr=torch.randn(3, 3)), "local_max_stride"),
    ("gumbel_combine_kernel", dict(local_max_ptr=torch.randn(11)), "local_max_ptr"),  # flat
    ("gumbel_combine_kernel", dict(local_max_ptr=_i32(3, 4)), "local_max_ptr"),
    ("gumbel_combine_kernel", dict(local_argmax_ptr=_i64(2, 4)), "local_argmax_ptr"),
    ("gumbel_combine_kernel", dict(num_blocks=0), "local_argmax_ptr"),  # the sentinel slot 4
    ("gumbel_combine_kernel", dict(sampled_ptr=_i64(2)), "sampled_ptr"),
    ("gumbel_combine_kernel", dict(num_blocks=True), "num_blocks"),
]  # fmt: skip

MAKERS = {
    "argmax_partial_kernel": _partial_args,
    "argmax_finish_kernel": _finish_args,
    "gumbel_combine_kernel": _combine_args,
}


def _refused(name, args, refused, grid):
    tensors = {k: v for k, v in args.items() if isinstance(v, torch.Tensor)}
    before = {k: v.clone() for k, v in tensors.items()}
    with pytest.raises((TypeError, ValueError), match=f"^{refused}:"):
        getattr(K, name)(**args, grid=grid)
    for key, t in tensors.items():
        assert _same(t, before[key]), key


def _grid_of(name):
    return (3, 3) if name == "argmax_partial_kernel" else (3,)


@pytest.mark.parametrize("name, change, refused", REFUSALS)
def test_bad_launches_are_refused_naming_the_argument(name, change, refused):
    _refused(name, {**MAKERS[name](), **change}, refused, _grid_of(name))


def test_outputs_over_what_the_launch_reads_are_refused():
    """An output sharing memory with a buffer the launch reads: the result would depend on
    the order of the programs."""
    args = _partial_args()
    args["PV"] = args["X"].view(-1)[:12]
    _refused("argmax_partial_kernel", args, "PV", (3, 3))
    args = _partial_args()
    args["PI"] = args["PV"].view(-1).view(torch.int32)
    _refused("argmax_partial_kernel", args, "PI", (3, 3))
    args = _finish_args()
    args["PI"] = torch.arange(12, dtype=torch.int64).view(3, 4)
    args["OUT"] = args["PI"].view(-1)[8:]
    _refused("argmax_finish_kernel", args, "OUT", (3,))
    args = _combine_args()
    args["sampled_ptr"] = args["local_argmax_ptr"].view(-1)[:3]
    _refused("gumbel_combine_kernel", args, "sampled_ptr", (3,))


def test_the_grid_is_checked():
    args = _partial_args()
    before = args["PV"].clone()
    for grid in [(3, 2, 2), (-1, 2), [3, 2], (3.0, 2)]:
        with pytest.raises((TypeError, ValueError), match="^grid"):
            K.argmax_partial_kernel(**args, grid=grid)
    with pytest.raises(ValueError, match="^grid"):
        K.argmax_finish_kernel(**_finish_args(), grid=(3, 2))
    with pytest.raises(ValueError, match="^X"):  # 4 rows, 3 of logits
        K.argmax_partial_kernel(**args, grid=(4, 3))
    assert torch.equal(args["PV"], before)


# -- thread-count independence -------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 5, 300])
def test_the_result_does_not_depend_on_the_thread_count(rows):
    vocab = 128256 if rows < 300 else 9000
    g = torch.Generator().manual_seed(rows)
    logits = (torch.randn(rows, vocab, generator=g) * 3).round()
    logits[0, ::7] = float("nan")
    nb = 64
    scores = torch.randn(rows, nb, generator=g).round()
    scores[::3, 7] = float("nan")
    winners = torch.randint(0, vocab, (rows, nb), generator=g)
    results = []
    for n in (1, 2):
        sampled = torch.empty(rows, dtype=torch.int64)
        with threads(n, threshold=0):
            greedy = _greedy_argmax(logits)
            greedy16 = _greedy_argmax(logits.to(torch.bfloat16))
            K.gumbel_combine_kernel(winners, nb, scores, nb, sampled, nb, nb, grid=(rows,))
        results.append((greedy, greedy16, sampled))
    for a, b in zip(*results):
        assert torch.equal(a, b)
    assert torch.equal(results[0][0], _fallback(logits))
    assert torch.equal(results[0][2], winners.gather(-1, scores.argmax(-1, keepdim=True)).view(-1))
