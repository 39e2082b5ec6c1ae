"""Top-k / top-p masking of [B, V] logits: vLLM's CPU function vs ``kernels_cpu.top_k_top_p``.

vLLM's CPU path (``apply_top_k_top_p`` -> ``apply_top_k_top_p_pytorch``) sorts every row when
top-p is set (``apply_top_k_only``, a ``torch.topk``, for top-k alone); ours selects. Both mask
in place, so every call starts from a fresh copy of the logits: each masking row is ``copy +
mask``, and the ``restore copy`` row is that copy alone, measured in the same run (subtract it for
the masking alone). Floors: ``one read`` is ``logits.max(dim=-1)`` (the max-reduce the project's
anchors call one read of the logits), ``amax`` the bare reduction.

Groups: B in {1, 16, 80} x V in {32000, 128256, 151936, 262144} x {top-k 20, top-k 50, top-p
0.8, top-p 0.9, top-p 0.95, top-k 50 + top-p 0.9} x {fp32, bf16} (``--full``); the default preset
keeps fp32, B in {16, 80} and V in {32000, 128256}; ``--quick`` the [80, 128256] fp32 groups.
"""

from __future__ import annotations

import importlib

from .._model import Built, GroupSpec, need
from .._rows import RowDef
from .._timing import Case

STOCK = "vLLM apply_top_k_top_p (stock CPU path)"
OURS = "kernels_cpu.top_k_top_p"
COPY = "restore copy alone"
READ = "one read: logits.max(dim=-1)"
AMAX = "logits.amax(dim=-1) (bare reduction)"

MODES = {
    "k20": (20, None),
    "k50": (50, None),
    "p0.8": (None, 0.8),
    "p0.9": (None, 0.9),
    "p0.95": (None, 0.95),
    "k50-p0.9": (50, 0.9),
}
BATCHES = (1, 16, 80)
VOCABS = (32000, 128256, 151936, 262144)


def _build(B, V, mode, dtype_name):
    def build(ctx) -> Built:
        import torch

        dtype = getattr(torch, dtype_name)
        gen = torch.Generator().manual_seed(0)
        logits = (torch.randn(B, V, generator=gen) * 3).to(dtype)
        kv, pv = MODES[mode]
        k = None if kv is None else torch.full((B,), kv, dtype=torch.int32)
        p = None if pv is None else torch.full((B,), pv, dtype=torch.float32)
        work = logits.clone()
        ns = {"logits": logits, "work": work, "k": k, "p": p}
        b = Built(info={"bytes": logits.numel() * logits.element_size()})

        def ours():
            return Case(
                "",
                stmt="work.copy_(logits); f(work, k, p)",
                namespace=dict(ns, f=need("kernels_cpu", "top_k_top_p")),
            )

        def stock():
            ctx.vllm.require()
            ts = importlib.import_module("vllm.v1.sample.ops.topk_topp_sampler")
            # looked up at call time: install() rebinds the module attribute
            return Case(
                "",
                stmt="work.copy_(logits); ts.apply_top_k_top_p(work, k, p)",
                namespace=dict(ns, ts=ts),
                state="stock",
            )

        b.add(STOCK, stock)
        b.add(OURS, ours)
        b.add(COPY, lambda: Case("", stmt="work.copy_(logits)", namespace=ns))
        b.add(READ, lambda: Case("", stmt="logits.max(dim=-1)", namespace=ns))
        b.add(AMAX, lambda: Case("", stmt="logits.amax(dim=-1)", namespace=ns))
        b.verify = lambda results: _verify(logits, k, p, ctx)
        b.switch_vllm(ctx, "stock", None)
        return b

    return build


def _verify(logits, k, p, ctx):
    """Ours keeps the same set as vLLM's sort (top-k exactly; top-p within 3 tokens or 0.5 %
    per row, vLLM's own tolerance between its Triton and PyTorch paths)."""
    import torch

    import kernels_cpu

    ours = logits.clone()
    kernels_cpu.top_k_top_p(ours, k, p)
    if not ctx.vllm.importable:
        return {"ok": True, "detail": "vLLM not importable here: ours checked alone"}
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    ref = apply_top_k_top_p_pytorch(logits.clone(), k, p, allow_cpu_sync=True)
    a = (ours != float("-inf")).sum(-1)
    r = (ref != float("-inf")).sum(-1)
    diff = int((a - r).abs().max()) if a.numel() else 0
    ok = diff == 0 if p is None else bool(((a - r).abs() <= torch.clamp(r // 200, min=3)).all())
    return {"ok": ok, "detail": f"kept-count difference per row at most {diff}"}


def grid(preset):
    for dtype in ("float32", "bfloat16") if preset == "full" else ("float32",):
        for B in BATCHES if preset == "full" else (16, 80) if preset == "default" else (80,):
            for V in (
                VOCABS
                if preset == "full"
                else (32000, 128256)
                if preset == "default"
                else (128256,)
            ):
                for mode in MODES if preset != "quick" else ("k50", "p0.9", "k50-p0.9"):
                    yield B, V, mode, dtype


def groups(ctx):
    specs = []
    for B, V, mode, dtype in grid(ctx.preset):
        specs.append(
            GroupSpec(
                id=f"topk_topp/B{B}-V{V}-{mode}-{dtype}",
                suite="topk_topp",
                title=f"top-k/top-p masking {mode}, [{B}, {V}] {dtype} (ns per call)",
                rows=(
                    RowDef("stock", STOCK),
                    RowDef("ours", OURS),
                    RowDef("copy", COPY),
                    RowDef("read", READ),
                    RowDef("amax", AMAX),
                ),
                anchor=(STOCK, OURS),
                vs={"one read": READ, "copy": COPY},
                build=_build(B, V, mode, dtype),
                needs_vllm=True,
                params={"B": B, "V": V, "mode": mode, "dtype": dtype},
                max_repeats={"quick": 5, "default": 7}.get(ctx.preset),
                # Two families: the top-k-alone groups are interleaved with each other only.
                # Beside vLLM's ~400 ms sort-based top-p calls every row meets its logits cold
                # (evicted by the sort's gigabyte of traffic), which no sampler step does -- its
                # logits were just written -- and which moves a memory-bound ~2.5 ms mask by
                # 2 ms while torch.topk's ~20 ms hardly notices (docs/benchmark.md).
                family="topk_topp/" + ("sort" if MODES[mode][1] is not None else "topk"),
            )
        )
    return specs
