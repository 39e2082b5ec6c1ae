"""vLLM's Triton top-k/top-p entry, ``apply_top_k_top_p_triton``, pointed at our CPU kernel.

vLLM's own tests of its Triton kernel (``tests/v1/sample/test_topk_topp_sampler.py``,
``TestTritonTopkTopp``) need a GPU; on CPU its module still imports (placeholder Triton) and,
with fastdispatch installed, its ``_topk_topp`` owner launches ``kernels_cpu.topk_topp_kernel``
through the override registered over ``_topk_topp_kernel``. These tests make the same checks as
vLLM's on CPU tensors, at sizes a CPU run affords: against vLLM's own PyTorch path (top-k
exact, top-p within vLLM's tolerance: at most 3 tokens or 0.5 % per row), rows of ``-inf``
(grammar masks), few or tied finite values, column-sliced logits, mixed batches, the no-op
cases, and the tie order at the top-p boundary being the same on every call.
"""

import pytest
import torch

NEG = float("-inf")


@pytest.fixture(scope="module")
def entry():
    import fastdispatch.vllm as fv

    fv.install()
    import vllm.v1.sample.ops.topk_topp_triton as tt

    assert type(vars(tt)["_topk_topp_kernel"]).__name__ == "KernelOverride"
    yield tt.apply_top_k_top_p_triton
    fv.uninstall()


def _pytorch(logits, k, p):
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    return apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=True)


def _compare(entry, logits, k, p):
    ref = _pytorch(logits.clone(), k, p)
    got = entry(
        logits.clone(),
        None if k is None else k.to(torch.int32),
        None if p is None else p.to(torch.float32),
    )
    a, b = (ref != NEG).sum(-1), (got != NEG).sum(-1)
    if p is None:
        assert torch.equal(a, b), (a.tolist(), b.tolist())
    else:
        diff, top = int((a - b).abs().max()), int(a.max())
        assert diff <= 3 or diff / top < 0.005, (diff, top)
    return got


@pytest.mark.parametrize("B,V", [(1, 1024), (8, 32000), (32, 1024), (4, 128256)])
@pytest.mark.parametrize("mode", ["k", "p", "kp"])
def test_matches_vllms_pytorch_path(entry, B, V, mode):
    g = torch.Generator().manual_seed(B * 31 + V)
    logits = torch.randn(B, V, generator=g)
    k = p = None
    if "k" in mode:
        k = torch.randint(1, min(100, V), (B,), generator=g)
        k.masked_fill_(torch.randint(0, 4, (B,), generator=g) == 0, V)
    if "p" in mode:
        p = torch.rand(B, generator=g) * 0.9 + 0.1
        p.masked_fill_(torch.randint(0, 4, (B,), generator=g) == 0, 1.0)
    _compare(entry, logits, k, p)


def test_extremes_and_no_ops(entry):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(16, 1024, generator=g)
    for k in (
        torch.ones(16, dtype=torch.int32),
        torch.full((16,), 1024, dtype=torch.int32),
        torch.tensor([1, 1024, 2, 1023] * 4, dtype=torch.int32),
    ):
        _compare(entry, logits, k, None)
    for p in (torch.full((16,), 0.01), torch.ones(16), torch.tensor([0.1, 0.5, 0.9, 1.0] * 4)):
        _compare(entry, logits, None, p)
    x = logits.clone()
    assert torch.equal(entry(x, None, None), logits)


@pytest.mark.parametrize("fraction", [0.5, 0.99])
def test_rows_of_mostly_minus_inf(entry, fraction):
    g = torch.Generator().manual_seed(2)
    B, V = 8, 128256
    logits = torch.randn(B, V, generator=g)
    logits[torch.rand(B, V, generator=g) < fraction] = NEG
    k = torch.randint(1, 50, (B,), generator=g, dtype=torch.int32)
    p = torch.rand(B, generator=g) * 0.9 + 0.1
    for kk, pp in ((k, None), (None, p), (k, p)):
        out = entry(logits.clone(), kk, pp)
        assert not out.isnan().any()
        kept = (out > NEG).sum(-1)
        assert bool((kept > 0).all())
        if kk is not None:
            assert bool((kept <= kk).all())


def test_all_minus_inf_and_few_valid(entry):
    B, V = 4, 128256
    k = torch.full((B,), 50, dtype=torch.int32)
    p = torch.full((B,), 0.9)
    masked = torch.full((B, V), NEG)
    for kk, pp in ((k, None), (None, p), (k, p)):
        assert bool((entry(masked.clone(), kk, pp) == NEG).all())
    g = torch.Generator().manual_seed(3)
    few = torch.full((B, V), NEG)
    for i in range(B):
        few[i, torch.randperm(V, generator=g)[:5]] = torch.randn(5, generator=g)
    assert bool(((entry(few.clone(), k, None) > NEG).sum(-1) == 5).all())
    small = torch.full((B,), 3, dtype=torch.int32)
    assert bool(((entry(few.clone(), small, None) > NEG).sum(-1) <= 3).all())
    assert bool(((entry(few.clone(), None, p) > NEG).sum(-1) > 0).all())


@pytest.mark.parametrize("num_valid", [1, 2, 10])
def test_equal_and_nearly_equal_few_valid(entry, num_valid):
    g = torch.Generator().manual_seed(4)
    B, V = 4, 128256
    eq = torch.full((B, V), NEG)
    near = torch.full((B, V), NEG)
    for i in range(B):
        idx = torch.randperm(V, generator=g)[:num_valid]
        eq[i, idx] = 1.0
        near[i, idx] = 1.0 + torch.rand(num_valid, generator=g) * 1e-6
    k = torch.full((B,), max(1, num_valid - 1), dtype=torch.int32)
    p = torch.full((B,), 0.95)
    for kk, pp in ((k, None), (None, p), (k, p)):
        out = entry(eq.clone(), kk, pp)
        assert bool(((out > NEG).sum(-1) > 0).all())
        if kk is not None:  # ties at the k-th value are all kept (vLLM's PyTorch path too)
            assert bool(((out > NEG).sum(-1) == num_valid).all())
    assert bool(((entry(near.clone(), None, p) > NEG).sum(-1) > 0).all())


@pytest.mark.parametrize("mode", ["k", "p", "kp"])
def test_column_sliced_logits_match_contiguous(entry, mode):
    B, V, pad = 16, 4096, 8
    backing = torch.full((B, V + pad), -1000.0)
    source = torch.linspace(10.0, -10.0, V)[None, :] + torch.arange(B)[:, None] / 1000.0
    logits = backing[:, :V]
    logits.copy_(source)
    k = torch.full((B,), 154, dtype=torch.int32) if "k" in mode else None
    p = torch.full((B,), 0.95) if "p" in mode else None
    out = entry(logits, k, p)
    assert out.data_ptr() == logits.data_ptr() and not out.is_contiguous()
    contig = entry(source.clone(), k, p)
    ref = _pytorch(source.clone(), k, p)
    assert torch.equal(torch.isfinite(out), torch.isfinite(contig))
    assert torch.equal(torch.isfinite(out), torch.isfinite(ref))
    assert bool((backing[:, V:] == -1000.0).all())  # the padding is not a row's


def test_grammar_rows_in_a_mixed_batch_get_top_p(entry):
    g = torch.Generator().manual_seed(5)
    B, V = 8, 32000
    logits = torch.full((B, V), NEG)
    for i in range(3):
        logits[i, torch.randperm(V, generator=g)[:30]] = torch.randn(30, generator=g)
    logits[3:] = torch.randn(5, V, generator=g)
    k = torch.tensor([50, 50, 50, V, V, 50, 50, 50], dtype=torch.int32)
    p = torch.tensor([0.5, 0.5, 0.5, 0.9, 0.9, 0.9, 0.9, 0.9])
    _compare(entry, logits, k, p)
    only_k = (entry(logits.clone(), k, None)[:3] > NEG).sum(-1)
    both = (entry(logits.clone(), k, p)[:3] > NEG).sum(-1)
    assert bool((both < only_k).all()), (only_k.tolist(), both.tolist())


def test_topp_tie_break_is_deterministic_and_by_index(entry):
    """A tie group straddling the top-p boundary: the same lowest indices kept every call."""
    B, V = 4, 32000
    logits = torch.full((B, V), -20.0)
    logits[:, 100:164] = 0.0  # 64 tied tokens hold nearly all the mass
    p = torch.full((B,), 0.5)
    runs = [entry(logits.clone(), None, p) for _ in range(3)]
    assert all(torch.equal(runs[0], r) for r in runs[1:])
    kept = (runs[0][0] > NEG).nonzero().flatten().tolist()
    assert kept == list(range(100, 100 + len(kept))) and 0 < len(kept) < 64
