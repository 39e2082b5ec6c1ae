"""``kernels_cpu.top_k_top_p`` against its plain reference and vLLM's rules.

Random rows (hypothesis draws the shape, per-row k/p, ties, ``-inf`` entries, single finite
values and the layout; a seeded generator the values) are masked in place inside guarded,
row-strided allocations; the kept set must equal ``fdkit.reference.topk_topp``'s. Top-p depends on
float sums, so where a row's boundary is within float rounding of ``p`` the kernel may keep one
token more or less than the float64 reference: the test then requires the kept set to lie between
the reference's for ``p * (1 - 1e-5)`` and ``p * (1 + 1e-5)`` and to be a prefix of the rank order.
"""

import math

import pytest
import torch
from _fuzz import fuzz_settings
from _sampling_helpers import peak_sweep, threads
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import kernels_cpu
from fdkit.guards import check_guards, guarded_rows
from fdkit.reference.topk_topp import kept_mask
from fdkit.reference.topk_topp import top_k_top_p as reference

HYP = fuzz_settings(150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _rows(B, V, dtype, seed, style):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, V, generator=g) * [0.05, 1.0, 4.0, 30.0][style % 4]
    if style % 5 == 1:
        x = torch.round(x)  # many ties, at the k-th value and across the top-p boundary
    if style % 5 == 2:
        x[torch.rand(B, V, generator=g) < 0.6] = -math.inf
    if style % 5 == 3 and V > 0:
        x[:] = -math.inf
        x[:, int(torch.randint(0, V, (1,), generator=g))] = 1.5  # a single finite value
    if style % 7 == 4 and B > 0:
        x[0] = -math.inf  # a row of -inf
    return x.to(dtype)


def _case(draw_b, draw_v, dtype, seed, style, k_kind, p_kind, extra_cols):
    B, V = draw_b, draw_v
    base, view = guarded_rows((B, V), dtype, extra_cols=extra_cols)
    view.copy_(_rows(B, V, dtype, seed, style))
    g = torch.Generator().manual_seed(seed + 1)
    k = None
    if k_kind is not None:
        k = torch.randint(1, V + 3, (B,), generator=g).to(k_kind)
        if B and V:
            k[0] = min(V, 3)
    p = None
    if p_kind is not None:
        p = (torch.rand(B, generator=g, dtype=torch.float64) * 0.98 + 0.02).to(p_kind)
        if B > 1:
            p[1] = 1.0
    return base, view, k, p


def _check_against_reference(before, after, k, p):
    B, V = before.shape
    for r in range(B):
        kr = None if k is None else int(k[r])
        pr = None if p is None else float(p[r])
        got = after[r] != -math.inf
        want = kept_mask(before[r], kr, pr)
        # masked entries become -inf; kept entries are untouched
        assert torch.equal(after[r][got], before[r][got])
        want_vals = before[r] != -math.inf
        if torch.equal(got, want & want_vals):
            continue
        assert pr is not None and pr < 1.0, (r, kr, pr)  # top-k alone is exact
        lo = kept_mask(before[r], kr, pr * (1 - 1e-5)) & want_vals
        hi = kept_mask(before[r], kr, min(1.0, pr * (1 + 1e-5))) & want_vals
        assert bool((lo <= got).all()) and bool((got <= hi).all()), (r, kr, pr)


@given(
    B=st.integers(0, 5),
    V=st.sampled_from([1, 2, 3, 17, 64, 65, 255, 300, 1000, 4099]),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**31 - 1),
    style=st.integers(0, 34),
    k_kind=st.sampled_from([None, torch.int32, torch.int64]),
    p_kind=st.sampled_from([None, torch.float32, torch.float64]),
    extra_cols=st.sampled_from([0, 3]),
)
@HYP
def test_matches_reference(B, V, dtype, seed, style, k_kind, p_kind, extra_cols):
    base, view, k, p = _case(B, V, dtype, seed, style, k_kind, p_kind, extra_cols)
    before = view.clone()
    kernels_cpu.top_k_top_p(view, k, p)
    check_guards(base, view, name="logits")
    _check_against_reference(before.float(), view.float(), k, p)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_on_random_rows(dtype):
    """Away from float ties of the boundary the kept sets are identical (top-k always)."""
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(12, 3001, generator=g) * 2).to(dtype)
    k = torch.tensor([1, 2, 5, 20, 50, 100, 3000, 3001, 4000, 7, 64, 2999], dtype=torch.int32)
    got, want = x.clone(), x.clone()
    kernels_cpu.top_k_top_p(got, k, None)
    reference(want, k, None)
    assert torch.equal(got, want)


def test_topk_keeps_every_tie_at_the_kth_value():
    x = torch.tensor([[3.0, 1.0, 2.0, 2.0, 2.0, 0.0]])
    kernels_cpu.top_k_top_p(x, torch.tensor([2]), None)
    assert x.tolist() == [[3.0, -math.inf, 2.0, 2.0, 2.0, -math.inf]]


def test_topp_tie_at_the_boundary_keeps_the_lowest_indices():
    """vLLM's Triton test: 1000 tied top tokens, the p = 0.5 boundary inside the tie group; the
    first copies in index order are kept, as many as the mass rule allows."""
    V = 128256
    x = torch.full((4, V), -math.inf)
    x[:, :1000] = 1.0
    x[:, 1000:2000] = 0.0
    p = torch.full((4,), 0.5)
    runs = []
    for _ in range(3):
        y = x.clone()
        kernels_cpu.top_k_top_p(y, None, p)
        runs.append(y)
    assert all(torch.equal(runs[0], r) for r in runs[1:])
    kept = (runs[0][0] != -math.inf).nonzero().flatten()
    e = math.e
    # token r of the tie group is kept when r * e < 0.5 * (1000 e + 1000)
    n = sum(1 for r in range(1000) if r * e < 0.5 * (1000 * e + 1000))
    assert kept.tolist() == list(range(n))


def test_topp_always_keeps_the_top_token_and_p_one_is_a_no_op():
    x = torch.tensor([[0.0, 10.0, 0.0], [1.0, 2.0, 3.0]])
    y = x.clone()
    kernels_cpu.top_k_top_p(y, None, torch.tensor([1e-6, 1.0]))
    assert y[0].tolist() == [-math.inf, 10.0, -math.inf]
    assert torch.equal(y[1], x[1])


def test_rows_of_minus_inf_and_nan_are_left_unchanged():
    x = torch.full((2, 5), -math.inf)
    x[1] = torch.tensor([1.0, float("nan"), 0.0, 2.0, 3.0])
    y = x.clone()
    kernels_cpu.top_k_top_p(y, torch.tensor([1, 1]), torch.tensor([0.5, 0.5]))
    assert torch.equal(y[0], x[0])
    assert torch.equal(y[1].isnan(), x[1].isnan()) and y[1][~y[1].isnan()].tolist() == [
        1.0,
        0.0,
        2.0,
        3.0,
    ]


def test_fewer_finite_values_than_k_keeps_them_all():
    x = torch.full((1, 1000), -math.inf)
    x[0, [3, 500, 999]] = torch.tensor([0.5, -1.0, 2.0])
    y = x.clone()
    kernels_cpu.top_k_top_p(y, torch.tensor([50]), None)
    assert torch.equal(y, x)


def test_positive_infinity_holds_all_the_mass():
    x = torch.tensor([[1.0, math.inf, 2.0, math.inf, math.inf, math.inf]])
    kernels_cpu.top_k_top_p(x, None, torch.tensor([0.5]))
    # four +inf tokens of mass 1/4 each: ranks 0 and 1 have mass above 0 and 1/4 < 1/2
    assert x.tolist() == [[-math.inf, math.inf, -math.inf, math.inf, -math.inf, -math.inf]]


def test_mask_value_is_written_in_the_rows_dtype():
    for dtype in DTYPES:
        x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=dtype)
        kernels_cpu.top_k_top_p(x, torch.tensor([2]), None, mask_value=-7.5)
        assert x.float().tolist() == [[-7.5, -7.5, 3.0, 4.0]]


def test_zero_rows_and_zero_columns():
    kernels_cpu.top_k_top_p(torch.empty(0, 100), torch.empty(0, dtype=torch.int32), None)
    kernels_cpu.top_k_top_p(torch.empty(0, 100), None, torch.empty(0))
    kernels_cpu.top_k_top_p(torch.empty(3, 0), torch.ones(3, dtype=torch.int64), None)


def test_same_result_at_any_thread_count():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 2000, generator=g)
    k = torch.randint(1, 2000, (64,), generator=g)
    p = torch.rand(64, generator=g) * 0.9 + 0.1
    results = []
    for n in (1, 2):
        with threads(n):
            y = x.clone()
            kernels_cpu.top_k_top_p(y, k, p)
            results.append(y)
    assert torch.equal(results[0], results[1])


@pytest.mark.parametrize("V", [8192 * 3 + 17, 128256])
@pytest.mark.parametrize("style", ["randn", "peaked", "ties"])
@pytest.mark.parametrize("k_kind", ["none", "small", "large", "chunk"])
def test_a_row_split_across_threads_keeps_what_one_thread_keeps(V, style, k_kind):
    """Fewer rows than threads: each row's passes run in chunks on every thread -- the top-k
    selection (each chunk's own top k, then the k-th largest of those), the gather of what it
    keeps, the bucket and mask passes -- with the same thresholds, sums in the same order and
    candidates packed in row order, so the kept set is one thread's, bit for bit, and vLLM's
    law (the reference). k: none, a model's (20), past the gather limit (5000), and at least a
    chunk (9000: a chunk keeps all it holds)."""
    g = torch.Generator().manual_seed(V % 1000 + len(style) + len(k_kind))
    x = torch.randn(3, V, generator=g) * 3
    if style == "peaked":
        x[:, torch.randint(0, V, (40,), generator=g)] += 12.0
    elif style == "ties":
        x = (x * 2).round() / 2  # many equal values, some at the boundary
    k = {
        "none": None,
        "small": torch.tensor([20, 1, 50]),
        "large": torch.tensor([5000, 4097, 300]),
        "chunk": torch.tensor([9000, 8192, V - 1]),
    }[k_kind]
    for p in (torch.tensor([0.9, 0.5, 0.999]), None):
        if k is None and p is None:
            continue
        results = []
        for n in (1, 4):  # 3 rows < 4 threads: the rows are split
            with threads(n):
                y = x.clone()
                kernels_cpu.top_k_top_p(y, k, p)
                results.append(y)
        assert torch.equal(results[0], results[1]), (k_kind, p)
        want = x.clone()
        reference(want, k, p)
        assert torch.equal(results[1].isinf(), want.isinf()), (k_kind, p)


@pytest.mark.parametrize("where", ["first chunk", "middle", "last value", "NaN"])
def test_a_maximum_far_above_the_sample_voids_the_first_pass(where):
    """Top-p alone weighs a row against a reference taken from its first values; a value above
    it (a confident model's top token) voids that bucket pass -- on a team, the chunks not yet
    begun are skipped on every thread -- and the row takes the exact-maximum path. Wherever the
    value lies, one thread and a team keep vLLM's set (a row with a NaN keeps everything, as
    vLLM's kernel does: reference)."""
    V = 8192 * 5 + 31
    g = torch.Generator().manual_seed(len(where))
    x = torch.randn(4, V, generator=g) * 3
    at = {"first chunk": 3000, "middle": V // 2, "last value": V - 1, "NaN": V // 3}[where]
    x[:, at] = float("nan") if where == "NaN" else x[:, at] + 40.0
    if where != "NaN":
        x[1, 7] = x[1, at]  # row 1 holds its top value twice, once inside the sample
    p = torch.tensor([0.9, 0.5, 0.999, 0.2])
    results = []
    for n in (1, 4):  # 4 rows, 4 threads: each row on one thread; then one row split
        for rows in (slice(None), slice(0, 1)):
            with threads(n):
                y = x[rows].clone()
                kernels_cpu.top_k_top_p(y, None, p[rows])
                results.append(y)
    want = x.clone()
    reference(want, None, p)
    for y in results:
        rows = y.shape[0]
        assert torch.equal(y.isinf(), want[:rows].isinf()), where
        assert torch.equal(y.isnan(), want[:rows].isnan()), where


@pytest.mark.parametrize("at", [0, 5000, 8192 * 3 + 17, -1])
@pytest.mark.parametrize("n_threads", [1, 4])
def test_topk_leaves_a_row_with_a_nan_wherever_it_lies(at, n_threads):
    """Top-k skips whole blocks of values below its running threshold after one count; a NaN
    counts as not below, so its block is read value by value and the NaN seen -- at the start
    (no threshold yet), deep in the row among values far below a threshold that has long risen,
    in the last, partial block. One thread or the row split across a team: the row with the NaN
    is left as it is, the row beside it masked (the reference)."""
    V = 8192 * 4 + 21
    g = torch.Generator().manual_seed(V + at)
    x = torch.randn(3, V, generator=g) * 3
    lo = at % V - at % V % 32
    x[0, lo : lo + 32] = -20.0  # the NaN's block otherwise below any threshold
    x[0, at] = float("nan")
    for k in (1, 50, V - 1):
        want = x.clone()
        reference(want, torch.full((3,), k), None)
        for rows in (slice(None), slice(0, 1)):
            with threads(n_threads):
                y = x[rows].clone()
                kernels_cpu.top_k_top_p(y, torch.full((y.shape[0],), k), None)
            assert torch.equal(y[0].isnan(), x[0].isnan()), (k, rows)
            assert torch.equal(y[0][~y[0].isnan()], x[0][~x[0].isnan()]), (k, rows)
            assert torch.equal(y.isinf(), want[rows].isinf()), (k, rows)


@pytest.mark.parametrize("n_threads", [1, 4])
def test_a_row_whose_maximum_alone_reaches_p_keeps_it_alone(n_threads):
    """A row whose maximum alone holds p of the mass is masked to it from the maxima of its
    chunks (the exact-maximum path finds them), without the bucket and mask passes, where a
    bound on the rest of the mass shows it. A peak swept across the point where it alone
    reaches p, at three p, alone and split across a team, keeps the reference's set (away
    from float ties of the boundary): a bound taken too loose drops tokens the row keeps."""
    rows, ps = peak_sweep(8192 * 2 + 5, 17, lifts=tuple(6.0 + i for i in range(15)))
    x = torch.stack(rows)
    p = torch.tensor(ps)
    kept = torch.stack([kept_mask(x[r], None, float(p[r])) for r in range(len(rows))])
    assert (kept.sum(1) == 1).any() and (kept.sum(1) > 1).any()  # both sides are swept
    # all the rows (a row per thread), then rows one at a time (each split across the team)
    for rows_at_once in [slice(None)] + [slice(r, r + 1) for r in range(3, len(rows), 4)]:
        with threads(n_threads):
            y = x[rows_at_once].clone()
            kernels_cpu.top_k_top_p(y, None, p[rows_at_once])
        _check_against_reference(x[rows_at_once], y, None, p[rows_at_once])
    # the mask value is the caller's, whichever way a row is masked
    with threads(n_threads):
        y = x.clone()
        kernels_cpu.top_k_top_p(y, None, p, mask_value=-7.5)
        want = x.clone()
        kernels_cpu.top_k_top_p(want, None, p)
    assert torch.equal(y, torch.where(want == float("-inf"), -7.5, want))


def _bad_calls():
    x = torch.randn(3, 10)
    k = torch.ones(3, dtype=torch.int32)
    p = torch.full((3,), 0.5)
    return [
        ("k", dict(logits=x, k=torch.tensor([1, 0, 2], dtype=torch.int32), p=None), ValueError),
        ("k", dict(logits=x, k=torch.ones(2, dtype=torch.int32), p=None), ValueError),
        ("k", dict(logits=x, k=torch.ones(3), p=None), TypeError),
        ("p", dict(logits=x, k=None, p=torch.tensor([0.5, 0.0, 0.5])), ValueError),
        ("p", dict(logits=x, k=None, p=torch.tensor([0.5, 1.5, 0.5])), ValueError),
        ("p", dict(logits=x, k=None, p=torch.tensor([0.5, float("nan"), 0.5])), ValueError),
        ("p", dict(logits=x, k=k, p=torch.full((4,), 0.5)), ValueError),
        ("p", dict(logits=x, k=k, p=torch.ones(3, dtype=torch.int32)), TypeError),
        ("logits", dict(logits=x.double(), k=k, p=p), TypeError),
        ("logits", dict(logits=x.t(), k=torch.ones(10, dtype=torch.int32), p=None), ValueError),
        ("logits", dict(logits=x[0], k=k[:1], p=None), TypeError),
        ("logits", dict(logits=torch.randn(1, 10).expand(3, 10), k=k, p=None), ValueError),
        ("logits", dict(logits=x.to("meta"), k=k, p=None), ValueError),
        ("mask_value", dict(logits=x, k=k, p=None, mask_value="x"), TypeError),
    ]


@pytest.mark.parametrize("name,kwargs,exc", _bad_calls())
def test_bad_input_raises_naming_the_argument_and_writes_nothing(name, kwargs, exc):
    logits = kwargs["logits"]
    before = logits.clone() if logits.device.type == "cpu" else None
    with pytest.raises(exc, match=name):
        kernels_cpu.top_k_top_p(**kwargs)
    if before is not None:
        assert torch.equal(logits, before)


# -- the kernel form: vLLM's _topk_topp_kernel arguments -----------------------------------------


def _launch(logits, k=None, p=None, split=False, **over):
    """``kernels_cpu.topk_topp_kernel`` as vLLM's ``_topk_topp`` launches it (a dummy pointer
    for a disabled K or P, scratch and tables that the exact kernel must not touch)."""
    B, V = logits.shape
    scratch = torch.full((2, V), 7.0)
    tables = torch.full((200,), 5.0), torch.full((200,), 6.0)
    kw = dict(
        LOGITS=logits,
        LOGITS_STRIDE_0=logits.stride(0),
        BUFFER=scratch,
        PERCENTILE_TO_STD_TABLE=tables[0],
        NORMAL_CDF_TO_SIGMA_TABLE=tables[1],
        K=logits if k is None else k,
        P=logits if p is None else p,
        BATCH_SIZE=B,
        VOCAB_SIZE=V,
        MASK_VALUE=float("-inf"),
        BLOCK_SIZE=256,
        BLOCK_SIZE_TRUNC=128,
        TOPK_ENABLED=k is not None,
        TOPP_ENABLED=p is not None,
        SPLIT_COVERS_PONLY=split,
    )
    kw.update(over)
    kernels_cpu.topk_topp_kernel(**kw)
    assert bool((scratch == 7.0).all()) and bool((tables[0] == 5.0).all())
    assert bool((tables[1] == 6.0).all())


@pytest.mark.parametrize("kdt", [torch.int32, torch.int64])
@pytest.mark.parametrize("split", [False, True])
def test_kernel_form_is_top_k_top_p_on_the_rows_it_reads(kdt, split):
    g = torch.Generator().manual_seed(3)
    base = torch.randn(6, 300, generator=g) * 2
    base[2] = torch.round(base[2])  # ties
    k = torch.tensor([1, 5, 50, 300, 400, 20], dtype=kdt)
    p = torch.tensor([0.5, 0.9, 0.99, 0.3, 0.8, 1.7])
    want = base.clone()[:, :250]
    p_eff = p.clone()
    if split:
        p_eff[k >= 250] = 1.0  # rows whose top-k is off belong to the split top-p kernels
    kernels_cpu.top_k_top_p(want, k, p_eff.clamp(max=1.0))
    got = base.clone()
    _launch(got[:, :250], k, p, split)  # a column slice: rows 300 apart
    assert torch.equal(got[:, :250], want)
    assert torch.equal(got[:, 250:], base[:, 250:])  # columns past VOCAB_SIZE untouched


def test_kernel_form_reads_a_flat_buffer_as_rows_of_the_stride():
    g = torch.Generator().manual_seed(4)
    flat = torch.randn(3 * 40 + 7, generator=g)
    want = flat.clone()
    rows = want[: 3 * 40].view(3, 40)[:, :33]
    kernels_cpu.top_k_top_p(rows, torch.full((3,), 4, dtype=torch.int32), None)
    got = flat.clone()
    _launch(
        torch.empty(3, 33),
        torch.full((3,), 4, dtype=torch.int32),
        LOGITS=got,
        LOGITS_STRIDE_0=40,
    )
    assert torch.equal(got, want)


def test_kernel_form_nosplit_does_every_rows_top_p():
    x = torch.randn(2, 50, generator=torch.Generator().manual_seed(5))
    k = torch.tensor([60, 10], dtype=torch.int32)
    p = torch.tensor([0.5, 0.5])
    want = x.clone()
    kernels_cpu.top_k_top_p(want, k, p)
    got = x.clone()
    kw = dict(
        LOGITS=got,
        LOGITS_STRIDE_0=50,
        BUFFER=None,
        PERCENTILE_TO_STD_TABLE=None,
        NORMAL_CDF_TO_SIGMA_TABLE=None,
        K=k,
        P=p,
        BATCH_SIZE=2,
        VOCAB_SIZE=50,
        MASK_VALUE=float("-inf"),
        BLOCK_SIZE=256,
        BLOCK_SIZE_TRUNC=128,
        TOPK_ENABLED=True,
        TOPP_ENABLED=True,
    )
    kernels_cpu.topk_topp_nosplit_kernel(**kw)
    assert torch.equal(got, want)
    # the 15-argument form with SPLIT_COVERS_PONLY leaves row 0 (k >= V) to the split kernels
    got2 = x.clone()
    kernels_cpu.topk_topp_kernel(**dict(kw, LOGITS=got2, SPLIT_COVERS_PONLY=True))
    assert torch.equal(got2[0], x[0]) and torch.equal(got2[1], want[1])


def test_kernel_form_leaves_nan_rows_and_zero_rows_alone():
    x = torch.randn(2, 20)
    x[1, 3] = math.nan
    y = x.clone()
    _launch(y, torch.full((2,), 3, dtype=torch.int32), torch.full((2,), 0.5))
    assert torch.equal(y[1].isnan(), x[1].isnan()) and torch.equal(
        y[1][~y[1].isnan()], x[1][~x[1].isnan()]
    )
    assert int((y[0] > -math.inf).sum()) <= 3
    _launch(torch.empty(0, 20), torch.empty(0, dtype=torch.int32), None)


def _bad_kernel_calls():
    k = torch.full((3,), 2, dtype=torch.int32)
    p = torch.full((3,), 0.5)
    return [
        ("K", dict(k=torch.tensor([1, 0, 2], dtype=torch.int32)), ValueError),
        ("K", dict(k=torch.ones(2, dtype=torch.int32)), ValueError),
        ("K", dict(k=torch.ones(3)), TypeError),
        ("K", dict(k=torch.ones(3, 2, dtype=torch.int32)[:, 0]), ValueError),
        ("P", dict(p=torch.tensor([0.5, float("nan"), 0.5])), ValueError),
        ("P", dict(p=torch.tensor([0.5, 0.0, 0.5])), ValueError),
        ("P", dict(p=torch.ones(3, dtype=torch.int32)), TypeError),
        ("LOGITS_STRIDE_0", dict(k=k, LOGITS_STRIDE_0=5), ValueError),
        ("LOGITS_STRIDE_0", dict(k=k, LOGITS_STRIDE_0=-1), ValueError),
        ("LOGITS", dict(k=k, VOCAB_SIZE=11), ValueError),
        ("LOGITS", dict(k=k, BATCH_SIZE=4), ValueError),
        ("LOGITS", dict(p=p, LOGITS=torch.zeros(25), LOGITS_STRIDE_0=10), ValueError),
        ("LOGITS", dict(p=p, LOGITS=torch.zeros(3, 10, dtype=torch.float64)), TypeError),
        ("BATCH_SIZE", dict(k=k, BATCH_SIZE=-1), ValueError),
        ("VOCAB_SIZE", dict(k=k, VOCAB_SIZE=2.0), TypeError),
        ("MASK_VALUE", dict(k=k, MASK_VALUE="x"), TypeError),
    ]


@pytest.mark.parametrize("name,kwargs,exc", _bad_kernel_calls())
def test_kernel_form_bad_input_raises_naming_the_argument_and_writes_nothing(name, kwargs, exc):
    x = torch.randn(3, 10)
    kwargs = dict(kwargs)
    logits = kwargs.pop("LOGITS", x)
    before = logits.clone()
    k, p = kwargs.pop("k", None), kwargs.pop("p", None)
    with pytest.raises(exc, match=name):
        _launch(x, k, p, LOGITS=logits, **kwargs)
    assert torch.equal(logits, before)
