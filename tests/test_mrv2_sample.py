"""Model Runner V2's sampler kernels (``kernels_cpu._mrv2_sample``, ``_mrv2_sample_logits``).

Beside the parity tests against vLLM's kernels (``test_mrv2_parity.py``): the random stream
against vLLM's own murmur3 functions bit for bit and seeded tokens against vLLM's Gumbel
sampling (both under Triton's interpreter, in a subprocess); plain-torch references; results
that do not depend on the thread count at the vocabulary sizes the kernels run at; bad input
refused naming the argument with nothing written; empty launches.
"""

import math
import os
import subprocess
import sys

import pytest
import torch
from _fuzz import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu
from kernels_cpu import _mrv2_sample

HERE = os.path.dirname(os.path.abspath(__file__))
IDX = [torch.int32, torch.int64]


@pytest.fixture(params=IDX, ids=["int32", "int64"])
def idx(request):
    return request.param


@pytest.fixture
def threads():
    """Run with a pinned team size and the parallel threshold at 0, restored afterwards."""

    def use(n):
        kernels_cpu.set_num_threads(n)
        kernels_cpu.set_parallel_threshold(0 if n > 1 else None)

    yield use
    kernels_cpu.set_num_threads(None)
    kernels_cpu.set_parallel_threshold(None)


def _cdiv(a, b):
    return -(-a // b)


# -- the random stream and seeded tokens against vLLM's, under the interpreter ------------------


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory):
    """vLLM's murmur3 draws and Gumbel-sampled tokens for the inputs below, computed by
    ``_mrv2_sample_vllm.py`` under ``TRITON_INTERPRET=1`` in a subprocess."""
    pytest.importorskip("triton")
    from fdkit import vllm_source

    if vllm_source.source_root() is None:
        pytest.skip("no vLLM sources")
    g = torch.Generator().manual_seed(7)
    n = 4096
    seeds = torch.randint(-(2**63), 2**63 - 1, (n,), generator=g)
    seeds[:8] = torch.tensor([0, 1, -1, 2**32, 2**63 - 1, -(2**63), 12345, 2**31])
    positions = torch.randint(0, 2**40, (n,), generator=g)
    positions[:8] = torch.tensor([0, 1, 2**30, 2**31 - 1, 2**32, 2**32 + 5, 7, 2**31 + 2**30])
    keys = torch.randint(0, 2**32, (n,), generator=g)
    samples = []
    for k, (fp64, drafting) in enumerate([(False, False), (False, True), (True, False)]):
        rows, v = 5, 3000
        logits = torch.randn(rows, v, generator=g) * (1.0 + 4 * k)
        logits[1, 100:] = float("-inf")  # a row cut down as top-k leaves it
        mapping = torch.tensor([0, 1, 2, 1, -1])
        temperature = torch.tensor([0.7, 1.0, 0.0])
        seed = torch.randint(0, 2**62, (3,), generator=g)
        pos = torch.randint(0, 2**20, (rows,), generator=g)
        samples.append((logits, mapping, temperature, seed, pos, fp64, drafting))
    tmp = tmp_path_factory.mktemp("mrv2_sample")
    torch.save({"draws": (seeds, positions, keys), "samples": samples}, tmp / "in.pt")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.path.dirname(HERE))
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "_mrv2_sample_vllm.py"), tmp / "in.pt", tmp / "out.pt"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return (seeds, positions, keys), samples, torch.load(tmp / "out.pt")


def test_the_stream_is_vllms_bit_for_bit(vllm_run):
    (seeds, positions, keys), _, result = vllm_run
    n = seeds.numel()
    ours = (torch.empty(n, dtype=torch.int64), torch.empty(n), torch.empty(n, dtype=torch.float64))
    _mrv2_sample._murmur3_draws(seeds, positions, keys, *ours)
    for mine, theirs in zip(ours, result["draws"]):
        assert torch.equal(mine, theirs)
    assert ours[1].min() > 0 and ours[1].max() <= 1  # u32 rounds to 1.0 at the very top
    assert 0 < ours[2].min() and ours[2].max() < 1


@pytest.mark.parametrize("nthreads", [1, 2])
def test_seeded_tokens_are_vllms(vllm_run, idx, threads, nthreads):
    threads(nthreads)
    _, samples, result = vllm_run
    for (logits, mapping, temp, seeds, pos, fp64, drafting), want in zip(samples, result["tokens"]):
        n, v = logits.shape
        nb = _cdiv(v, 1024)
        la = torch.empty(n, nb, dtype=torch.int64)
        lm = torch.empty(n, nb, dtype=torch.float64 if fp64 else torch.float32)
        kernels_cpu.gumbel_sample_kernel(
            la, nb, lm, nb, None, 0, 0, None, None, 0, logits, v, mapping.to(idx),
            seeds, pos.to(idx), temp, v, 1024, drafting, True, fp64, False, grid=(n, nb),
        )  # fmt: skip
        got = la.gather(-1, lm.argmax(-1, keepdim=True)).view(-1)
        assert torch.equal(got, want), (fp64, drafting)
        # temperature 0 and no request: the plain argmax
        assert got[2] == logits[2].argmax() and got[4] == logits[4].argmax()


# -- references ---------------------------------------------------------------------------------


@fuzz_settings(30, deadline=None)
@given(
    n=st.integers(0, 4),
    v=st.integers(1, 600),
    bs=st.sampled_from([32, 64, 8192]),
    seed=st.integers(0, 2**31),
    wide=st.booleans(),
)
def test_temperature_matches_torch(n, v, bs, seed, wide):
    g = torch.Generator().manual_seed(seed)
    idx = torch.int64 if wide else torch.int32
    temps = torch.tensor([0.0, 1.0, 0.5, 1.7, -2.0])
    mapping = torch.randint(0, 5, (n + 2,), generator=g)
    base = torch.randn(n, v + 3, generator=g)
    logits = base[:, :v]
    want = logits.clone()
    t = temps[mapping[:n]]
    scaled = (t != 0) & (t != 1)
    want[scaled] = want[scaled] / t[scaled, None]
    kernels_cpu.temperature_kernel(
        logits, v + 3, mapping.to(idx), temps, v, bs, grid=(n, _cdiv(v, bs))
    )
    assert torch.equal(logits, want)
    assert base[:, v:].eq(base[:, v:]).all()  # the columns past the slice untouched


@fuzz_settings(30, deadline=None)
@given(n=st.integers(0, 4), v=st.integers(1, 600), seed=st.integers(0, 2**31))
def test_min_p_matches_torch(n, v, seed):
    g = torch.Generator().manual_seed(seed)
    min_p = torch.tensor([0.0, 0.05, 0.3, 1.0])
    mapping = torch.randint(0, 4, (n,), generator=g)
    logits = torch.randn(n, v, generator=g) * 3
    if n:
        logits[0, 0] = float("nan")
    want = logits.clone()
    for t in range(n):
        p = min_p[mapping[t]]
        if p != 0:
            row = want[t]
            threshold = row.nan_to_num(nan=float("-inf"), neginf=float("-inf")).max() + torch.log(p)
            near = (row - threshold).abs() < 1e-5  # an ulp of log may flip these
            want[t] = torch.where((row < threshold) & ~near, float("-inf"), row)
            logits[t] = torch.where(near, row, logits[t])
    got = logits.clone()
    kernels_cpu.min_p_kernel(got, v, mapping, min_p, v, 1024, grid=(n,))
    assert torch.equal(got.nan_to_num(1e30), want.nan_to_num(1e30))


def _penalties_reference(logits, mapping, tokens, local, rep, freq, pres, mask, counts):
    out = logits.clone()
    n, v = logits.shape
    bits = (mask[:, :, None] >> torch.arange(32)) & 1
    prompt = bits.reshape(mask.shape[0], -1)[:, :v].bool()
    for t in range(n):
        r = int(mapping[t])
        if rep[r] == 1 and freq[r] == 0 and pres[r] == 0:
            continue
        c = counts[r].clone()
        pos = int(local[t])
        for prev in tokens[t - pos + 1 : t + 1].tolist():
            if 0 <= prev < v:
                c[prev] += 1
        x = out[t]
        hit = c > 0
        if rep[r] != 1:
            scale = torch.where(prompt[r] | hit, rep[r], torch.tensor(1.0))
            x = x * torch.where(x > 0, 1.0 / scale, scale)
        x = x - freq[r] * c.float()
        x = x - pres[r] * hit.float()
        out[t] = x
    return out


@pytest.mark.parametrize("nthreads", [1, 2])
def test_penalties_match_torch(idx, threads, nthreads):
    threads(nthreads)
    g = torch.Generator().manual_seed(3)
    states, v, bs = 3, 5000, 1024
    mapping = torch.tensor([0, 0, 0, 1, 2, 2])
    local = torch.tensor([0, 1, 2, 0, 0, 1])
    tokens = torch.randint(0, v, (6,), generator=g)
    tokens[2] = tokens[1]  # a draft repeated
    rep = torch.tensor([1.3, 1.0, 0.9])
    freq = torch.tensor([0.0, 0.4, -0.2])
    pres = torch.tensor([0.5, 0.0, 0.1])
    mask = torch.randint(-(2**31), 2**31, (states, _cdiv(v, 32)), generator=g).to(torch.int32)
    counts = torch.randint(0, 3, (states, v), generator=g, dtype=torch.int32)
    logits = torch.randn(6, v, generator=g)
    want = _penalties_reference(logits, mapping, tokens, local, rep, freq, pres, mask, counts)
    kernels_cpu.penalties_kernel(
        logits, v, mapping.to(idx), tokens.to(idx), local.to(idx), rep, freq, pres, mask,
        mask.shape[1], counts, v, v, bs, grid=(6, _cdiv(v, bs)),
    )  # fmt: skip
    assert torch.equal(logits, want)


def test_bincount_matches_torch(idx):
    g = torch.Generator().manual_seed(5)
    states, v, width = 3, 100, 50
    ids = torch.randint(0, v, (states, width), generator=g)
    prompt = torch.tensor([10, 0, 30])
    prefill = torch.tensor([25, 7, 30])
    mask = torch.zeros(states, _cdiv(v, 32), dtype=torch.int32)
    counts = torch.zeros(states, v, dtype=torch.int32)
    mapping = torch.tensor([2, 0])
    kernels_cpu.bincount_kernel(
        mapping.to(idx), ids.to(idx), width, prompt.to(idx), prefill.to(idx), mask,
        mask.shape[1], counts, v, 16, grid=(2, _cdiv(30, 16)),
    )  # fmt: skip
    for r in (0, 2):
        seen = torch.zeros(_cdiv(v, 32) * 32, dtype=torch.bool)
        seen[ids[r, : prompt[r]]] = True
        words = (seen.view(-1, 32).long() << torch.arange(32)).sum(1)
        assert torch.equal(mask[r].long() & 0xFFFFFFFF, words)
        want = torch.bincount(ids[r, prompt[r] : prefill[r]], minlength=v).int()
        assert torch.equal(counts[r], want)
    assert not mask[1].any() and not counts[1].any()


# -- thread-count independence at full vocabulary ------------------------------------------------


@pytest.mark.parametrize("rows", [1, 5])
def test_hot_kernels_do_not_depend_on_the_thread_count(threads, rows):
    v = 128256
    g = torch.Generator().manual_seed(11)
    base = torch.randn(rows, v, generator=g) * 4
    mapping = torch.arange(rows) % 3
    temps = torch.tensor([0.8, 1.3, 0.0])
    seeds = torch.tensor([1, 2, 3])
    pos = torch.arange(rows) + 100
    results = []
    for n in (1, 2):
        threads(n)
        x = base.clone()
        kernels_cpu.temperature_kernel(x, v, mapping, temps, v, 8192, grid=(rows, _cdiv(v, 8192)))
        kernels_cpu.min_p_kernel(x, v, mapping, torch.tensor([0.01, 0.1, 0.0]), v, 1024,
                                 grid=(rows,))  # fmt: skip
        nb = _cdiv(v, 1024)
        la = torch.empty(rows, nb, dtype=torch.int64)
        lm = torch.empty(rows, nb)
        kernels_cpu.gumbel_sample_kernel(
            la, nb, lm, nb, None, 0, 0, None, None, 0, x, v, mapping, seeds, pos, temps, v,
            1024, False, False, False, False, grid=(rows, nb),
        )  # fmt: skip
        results.append((x, la, lm))
    for a, b in zip(*results):
        assert torch.equal(a, b)


# -- refusals -----------------------------------------------------------------------------------


def _temperature_args(idx):
    logits = torch.randn(3, 40)
    return dict(
        logits_ptr=logits,
        logits_stride=40,
        expanded_idx_mapping_ptr=torch.tensor([0, 1, 1], dtype=idx),
        temperature_ptr=torch.tensor([0.5, 2.0]),
        vocab_size=40,
        BLOCK_SIZE=32,
    )


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(expanded_idx_mapping_ptr=torch.tensor([0, 2, 1])), "expanded_idx_mapping_ptr[1]"),
        (dict(logits_stride=41), "logits_stride"),
        (dict(logits_ptr=torch.randn(3, 40, dtype=torch.float64)), "logits_ptr"),
        (dict(vocab_size=41), "logits_ptr"),
        (dict(BLOCK_SIZE=0), "BLOCK_SIZE"),
        (dict(temperature_ptr=torch.tensor([1, 2])), "temperature_ptr"),
        (dict(vocab_size=4.0), "vocab_size"),
    ],
)
def test_temperature_refuses_naming_the_argument(idx, change, name):
    args = _temperature_args(idx)
    if "expanded_idx_mapping_ptr" in change:
        change = dict(expanded_idx_mapping_ptr=change["expanded_idx_mapping_ptr"].to(idx))
    args.update(change)
    before = args["logits_ptr"].clone()
    with pytest.raises(
        (TypeError, ValueError), match=f"^{name.replace('[', '.').replace(']', '.')}"
    ):
        kernels_cpu.temperature_kernel(**args, grid=(3, 2))
    assert torch.equal(args["logits_ptr"], before)


def test_the_grid_is_checked(idx):
    args = _temperature_args(idx)
    before = args["logits_ptr"].clone()
    for grid in [(3, 2, 2), (-1, 2), [3, 2], (3.0, 2)]:
        with pytest.raises((TypeError, ValueError), match="^grid"):
            kernels_cpu.temperature_kernel(**args, grid=grid)
    with pytest.raises(ValueError, match="^expanded_idx_mapping_ptr"):  # 4 tokens, 3 mapped
        kernels_cpu.temperature_kernel(**args, grid=(4, 2))
    assert torch.equal(args["logits_ptr"], before)


def test_gumbel_refuses_small_outputs_and_requests_out_of_range(idx):
    v, nb = 100, 4
    logits = torch.randn(2, v)
    base = dict(
        local_argmax_ptr=torch.full((2, nb), -7, dtype=torch.int64),
        local_argmax_stride=nb,
        local_max_ptr=torch.full((2, nb), -7.0),
        local_max_stride=nb,
        logits_cache_ptr=None,
        logits_cache_stride_0=0,
        logits_cache_stride_1=0,
        logits_cache_col_ptr=None,
        logits_cache_source_ptr=None,
        logits_cache_source_stride=0,
        logits_ptr=logits,
        logits_stride=v,
        expanded_idx_mapping_ptr=torch.tensor([0, -1], dtype=idx),
        seeds_ptr=torch.tensor([5], dtype=idx),
        pos_ptr=torch.tensor([3, 4], dtype=idx),
        temp_ptr=torch.tensor([1.0]),
        vocab_size=v,
        BLOCK_SIZE=32,
        IS_DRAFTING=False,
        APPLY_TEMPERATURE=True,
        USE_FP64=False,
        PER_TOKEN_COL=False,
    )
    bad = [
        (
            dict(local_argmax_ptr=torch.zeros(2, nb - 1, dtype=torch.int64), local_argmax_stride=3),
            "local_argmax_ptr",
        ),
        (dict(local_max_ptr=torch.zeros(2, nb - 1), local_max_stride=3), "local_max_ptr"),
        (dict(expanded_idx_mapping_ptr=torch.tensor([1, 0], dtype=idx)), "expanded_idx_mapping"),
        (dict(pos_ptr=torch.tensor([3], dtype=idx)), "pos_ptr"),
        (dict(USE_FP64="yes"), "USE_FP64"),
        (dict(logits_cache_ptr=torch.zeros(1, 1, v)), "logits_cache_source_ptr"),
    ]
    for change, name in bad:
        args = dict(base, **change)
        la, lm = args["local_argmax_ptr"].clone(), args["local_max_ptr"].clone()
        with pytest.raises((TypeError, ValueError), match=f"^{name}"):
            kernels_cpu.gumbel_sample_kernel(**args, grid=(2, nb))
        assert torch.equal(args["local_argmax_ptr"], la)
        assert torch.equal(args["local_max_ptr"], lm)
    kernels_cpu.gumbel_sample_kernel(**base, grid=(2, nb))
    assert (base["local_argmax_ptr"] >= 0).all()


def test_the_logits_cache_takes_a_strided_view(idx):
    """The cache is a [R, C, V] view of a wider buffer: rows written where the caller's
    strides say, the rest untouched."""
    v, n = 70, 3
    store = torch.zeros(4, 3, v + 5)
    cache = store[:, :, :v]
    source = torch.randn(n, v)
    mapping = torch.tensor([2, -1, 0], dtype=idx)
    col = torch.tensor([1, 0, 2], dtype=idx)
    la = torch.empty(n, 3, dtype=torch.int64)
    lm = torch.empty(n, 3)
    kernels_cpu.gumbel_sample_kernel(
        la, 3, lm, 3, cache, cache.stride(0), cache.stride(1), col, source, v, source, v,
        mapping, torch.tensor([1, 2, 3], dtype=idx), torch.zeros(n, dtype=idx),
        torch.tensor([1.0, 1.0, 0.5]), v, 32, False, True, False, True, grid=(n, 3),
    )  # fmt: skip
    want = torch.zeros_like(store)
    want[2, 1, :v] = source[0]
    want[0, 2, :v] = source[2]
    assert torch.equal(store, want)
    with pytest.raises(ValueError, match="^logits_cache_stride_0"):
        kernels_cpu.gumbel_sample_kernel(
            la, 3, lm, 3, cache, v, cache.stride(1), col, source, v, source, v, mapping,
            torch.tensor([1, 2, 3], dtype=idx), torch.zeros(n, dtype=idx),
            torch.tensor([1.0, 1.0, 0.5]), v, 32, False, True, False, True, grid=(n, 3),
        )  # fmt: skip


def test_penalties_and_bincount_refuse_what_would_go_out_of_bounds(idx):
    v = 64
    logits = torch.randn(2, v)
    before = logits.clone()
    args = [
        logits, v, torch.tensor([0, 0], dtype=idx), torch.tensor([1, 2], dtype=idx),
        torch.tensor([0, 5], dtype=idx), torch.tensor([1.2]), torch.tensor([0.0]),
        torch.tensor([0.0]), torch.zeros(1, 2, dtype=torch.int32), 2,
        torch.zeros(1, v, dtype=torch.int32), v, v, 32,
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"^expanded_local_pos_ptr\[1\]"):
        kernels_cpu.penalties_kernel(*args, grid=(2, 2))
    args[-1] = 48
    with pytest.raises(ValueError, match="^BLOCK_SIZE"):
        kernels_cpu.penalties_kernel(*args, grid=(2, 2))
    assert torch.equal(logits, before)
    mask = torch.zeros(1, 1, dtype=torch.int32)
    counts = torch.zeros(1, 10, dtype=torch.int32)
    ids = torch.tensor([[3, 40, 5]], dtype=idx)  # 40 is past the mask's one word
    with pytest.raises(ValueError, match="^prompt_bin_mask_ptr"):
        kernels_cpu.bincount_kernel(
            torch.tensor([0], dtype=idx), ids, 3, torch.tensor([3], dtype=idx),
            torch.tensor([3], dtype=idx), mask, 1, counts, 10, 4, grid=(1, 1),
        )  # fmt: skip
    assert not mask.any() and not counts.any()


def test_empty_launches_touch_nothing(idx):
    logits = torch.randn(2, 50)
    before = logits.clone()
    mapping = torch.tensor([0, 0], dtype=idx)
    kernels_cpu.temperature_kernel(logits, 50, mapping, torch.tensor([0.5]), 50, 32, grid=(0, 2))
    kernels_cpu.temperature_kernel(logits, 50, mapping, torch.tensor([0.5]), 0, 32, grid=(2, 0))
    kernels_cpu.min_p_kernel(logits, 50, mapping, torch.tensor([0.5]), 0, 32, grid=(2,))
    kernels_cpu.min_p_kernel(logits, 50, torch.empty(0, dtype=idx), torch.empty(0), 50, 32,
                             grid=(0,))  # fmt: skip
    assert torch.equal(logits, before)


def test_logits_kernels_refuse_ids_outside_the_vocabulary(idx):
    v = 30
    logits = torch.randn(2, v)
    before = logits.clone()
    out = torch.full((2,), -1, dtype=idx)
    with pytest.raises(ValueError, match=r"^token_ids_ptr\[1\]"):
        kernels_cpu.ranks_kernel(out, logits, v, torch.tensor([0, v], dtype=idx), v, 32,
                                 grid=(2,))  # fmt: skip
    assert (out == -1).all()
    lp = torch.full((4,), 7.0)
    with pytest.raises(ValueError, match=r"^topk_ids_ptr\[3\]"):
        kernels_cpu.topk_log_softmax_kernel(
            lp, logits, v, torch.tensor([[0, 1], [2, -1]], dtype=idx), 2, 2, v, 32, 2, grid=(2,)
        )
    assert (lp == 7).all()
    assert torch.equal(logits, before)


def test_gumbel_nan_counts_as_minus_inf_for_the_index(idx):
    """As the interpreter reduces (nanmax for the score, nanargmax for the index): a block of
    NaN and -inf scores -inf at its first lane, a NaN among numbers never wins."""
    nan, inf = float("nan"), float("-inf")
    logits = torch.tensor([[nan, inf, inf, inf], [inf, nan, 2.0, 5.0], [nan, nan, nan, nan]])
    la = torch.empty(3, 1, dtype=torch.int64)
    lm = torch.empty(3, 1)
    kernels_cpu.gumbel_sample_kernel(
        la, 1, lm, 1, None, 0, 0, None, None, 0, logits, 4, torch.tensor([0, 0, 0], dtype=idx),
        torch.tensor([1], dtype=idx), torch.zeros(3, dtype=idx), torch.tensor([0.0]), 4, 4,
        False, False, False, False, grid=(3, 1),
    )  # fmt: skip
    assert la.view(-1).tolist() == [0, 3, 0]
    assert lm[0, 0] == inf and lm[1, 0] == 5.0 and lm[2, 0].isnan()


@pytest.mark.parametrize("fp64", [False, True])
@pytest.mark.parametrize("apply_temperature", [False, True])
def test_gumbel_blocks_without_a_number_above_minus_inf(idx, fp64, apply_temperature):
    """At a temperature above 0, a block with no lane above -inf (a top-k/top-p row's masked
    block) scores as the interpreter reduces it, whichever loop scores it (the float32 draw
    passes over such a block without a hash): -inf at its first lane where a lane is -inf, NaN
    where every lane is NaN (but for a last block's lanes past the vocabulary: -inf), and a
    block holding a number is drawn as before."""
    nan, inf = float("nan"), float("-inf")
    v, bs = 10, 4  # three blocks, the last of two lanes
    rows = [
        [inf] * v,
        [nan, inf, nan, nan] + [inf, inf, nan, inf] + [nan, inf],
        [nan] * v,
        [nan, nan, nan, nan] + [inf, inf, 3.0, inf] + [nan, nan],
    ]
    logits = torch.tensor(rows)
    n = len(rows)
    la = torch.full((n, 3), -7, dtype=torch.int64)
    lm = torch.full((n, 3), 9.0, dtype=torch.float64 if fp64 else torch.float32)
    kernels_cpu.gumbel_sample_kernel(
        la, 3, lm, 3, None, 0, 0, None, None, 0, logits, v, torch.zeros(n, dtype=idx),
        torch.tensor([5], dtype=idx), torch.arange(n, dtype=idx), torch.tensor([0.8]), v, bs,
        False, apply_temperature, fp64, False, grid=(n, 3),
    )  # fmt: skip
    assert la.tolist() == [[0, 4, 8], [0, 4, 8], [0, 4, 8], [0, 6, 8]]
    scores = lm.tolist()
    assert scores[0] == [inf, inf, inf] and scores[1] == [inf, inf, inf]
    assert math.isnan(scores[2][0]) and math.isnan(scores[2][1]) and scores[2][2] == inf
    assert math.isnan(scores[3][0]) and scores[3][1] > 3.0 - 2.0 and scores[3][2] == inf


@pytest.mark.parametrize("apply_temperature", [False, True])
@pytest.mark.parametrize("bs", [64, 1024])
def test_the_float32_draw_is_the_dense_draws(idx, apply_temperature, bs):
    """The float32 draw passes over the lanes that cannot win (the block draw's lane lists and
    noise bounds); a bfloat16 row is drawn lane by lane. On rows whose values bfloat16 holds
    exactly, the two give the same tokens and scores, block for block -- rows where the
    winner mostly lies far below the maximum (a flat row with one lane 6 above, a row of
    four levels), masked lanes, a NaN, a +inf, a block of -inf, temperatures 0.7 and 1."""
    nan, inf = float("nan"), float("-inf")
    v, n = 3000, 12
    nb = _cdiv(v, bs)
    g = torch.Generator().manual_seed(3)
    logits = torch.zeros(n, v)
    logits[:, 7::97] = 6.0  # one lane well above the rest in most blocks
    logits[1::3] = torch.randint(-3, 1, (len(range(1, n, 3)), v), generator=g).float() * 2
    logits[2, torch.randperm(v, generator=g)[: v // 3]] = inf  # masked lanes
    logits[4, 1000:2100] = inf  # whole blocks masked
    logits[5, 17] = nan
    logits[7, 2999] = float("inf")
    half = logits.to(torch.bfloat16)
    assert torch.equal(half.float().nan_to_num(1.5), logits.nan_to_num(1.5))
    out = {}
    for rows in (logits, half):
        la = torch.full((n, nb), -7, dtype=torch.int64)
        lm = torch.full((n, nb), 9.0)
        kernels_cpu.gumbel_sample_kernel(
            la, nb, lm, nb, None, 0, 0, None, None, 0, rows, v, torch.arange(n, dtype=idx) % 2,
            torch.tensor([5, 2**30 + 3], dtype=idx), torch.arange(n, dtype=idx) * 3,
            torch.tensor([0.7, 1.0]), v, bs, False, apply_temperature, False, False,
            grid=(n, nb),
        )  # fmt: skip
        out[rows.dtype] = (la, lm)
    (la32, lm32), (la16, lm16) = out[torch.float32], out[torch.bfloat16]
    assert torch.equal(la32, la16)
    assert torch.equal(lm32.nan_to_num(1.5), lm16.nan_to_num(1.5))
    # the draw is a draw: the flat rows' tokens are mostly not the lane 6 above
    tokens = la32.gather(1, lm32.nan_to_num(-float("inf")).argmax(1, keepdim=True)).view(-1)
    assert (logits[0::3].gather(1, tokens[0::3, None]) < 6.0).any()


def test_the_noise_bounds_hold_over_the_hash_range():
    """The Gumbel draw skips a lane when its logit plus the noise bound of its uniform's bucket
    cannot beat the block's best: each bound must be at least every noise its bucket can give.
    Checked over a stride of the 2**32 hash values (the first and last 2**16 whole: the
    unbounded tails and the u == 1.0 rounding), in float32 and float64."""
    from kernels_cpu._mrv2_sample import noise_bound_slack

    for first, count, step in (
        (0, 1 << 16, 1),
        ((1 << 32) - (1 << 16), 1 << 16, 1),
        (12345, 1 << 20, 4093),
    ):
        slack32, slack64 = noise_bound_slack(first, count, step)
        assert slack32 < 0 and slack64 < 0, (first, step, slack32, slack64)


def _gumbel_forms(idx, with_cache):
    """One launch through each release's form of the Gumbel kernel (0.32, 0.33, 0.34 without
    a bias or row mapping) on the same inputs: ``{form: (local_argmax, local_max)}``."""
    v, n, bs = 300, 3, 64
    nb = _cdiv(v, bs)
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(n, v, generator=g) * 2
    common = dict(
        logits_ptr=logits,
        logits_stride=v,
        expanded_idx_mapping_ptr=torch.tensor([0, 1, 0], dtype=idx),
        seeds_ptr=torch.tensor([11, 22], dtype=idx),
        pos_ptr=torch.tensor([5, 6, 7], dtype=idx),
        temp_ptr=torch.tensor([1.0, 0.7]),
        vocab_size=v,
        BLOCK_SIZE=bs,
        IS_DRAFTING=False,
        APPLY_TEMPERATURE=True,
        USE_FP64=False,
        PER_TOKEN_COL=True,
    )
    out = {}
    for form in ("0.32", "0.33", "0.34"):
        la, lm = torch.full((n, nb), -5, dtype=torch.int64), torch.full((n, nb), 9.0)
        cache = torch.zeros(2, 3, v)
        kw = dict(
            common,
            local_argmax_ptr=la,
            local_argmax_stride=nb,
            local_max_ptr=lm,
            local_max_stride=nb,
            logits_cache_ptr=cache if with_cache else None,
            logits_cache_stride_0=3 * v,
            logits_cache_stride_1=v,
            logits_cache_col_ptr=torch.tensor([1, 2, 0], dtype=idx) if with_cache else None,
            logits_cache_source_ptr=logits if with_cache else None,
            logits_cache_source_stride=v,
        )
        if form == "0.32":
            kernels_cpu.gumbel_sample_kernel(**kw, grid=(n, nb))
        elif form == "0.33":
            kernels_cpu.gumbel_sample_step_seed_kernel(**kw, grid=(n, nb))
        else:
            kernels_cpu.gumbel_sample_biased_kernel(
                **kw, logits_cache_row_mapping_ptr=None, bias_ptr=None, bias_stride=0,
                HAS_BIAS=False, grid=(n, nb),
            )  # fmt: skip
        out[form] = (la, lm)
    return out


def test_0_33s_form_mixes_the_cache_column_into_the_seed(idx):
    """vLLM 0.33's ``_gumbel_sample_kernel`` has 0.32's arguments but, with a logits cache,
    draws under ``spec_step_seed(seed, col)`` as 0.34's does: the same winners and scores as
    0.34's form; 0.32's differ for every token whose column is not 0. Without a cache the
    three forms agree."""
    out = _gumbel_forms(idx, with_cache=True)
    assert all(torch.equal(a, b) for a, b in zip(out["0.33"], out["0.34"]))
    (la32, lm32), (la33, lm33) = out["0.32"], out["0.33"]
    assert torch.equal(lm32[2], lm33[2]) and torch.equal(la32[2], la33[2])  # column 0: seed ^ 0
    assert not torch.equal(lm32[0], lm33[0]) and not torch.equal(lm32[1], lm33[1])
    plain = _gumbel_forms(idx, with_cache=False)
    for form in ("0.33", "0.34"):
        assert all(torch.equal(a, b) for a, b in zip(plain["0.32"], plain[form]))
