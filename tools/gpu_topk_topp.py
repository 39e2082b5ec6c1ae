#!/usr/bin/env python
"""Top-k / top-p on a GPU: our Triton kernel vs ``kernels_cpu``, vLLM's Triton kernel and a sort.

    python setup.py build_ext --inplace
    python tools/gpu_topk_topp.py [--vllm-source PATH/topk_topp_triton.py] [--quick]

For [B, V] float32 logits (B in 1, 16, 80; V in 32000, 128256; values of three spreads, some on a
coarse grid for ties) and top-k 50, top-p 0.9 and both:

1. exactness: ``topk_topp_kernel`` (ours, natively on the GPU) must keep exactly the set
   ``kernels_cpu.topk_topp_kernel`` keeps on the same rows on CPU -- bit-identical outputs --
   and the set of PyTorch's sort-based reference (vLLM's ``apply_top_k_top_p_pytorch``
   algorithm, float32 cumsum: ``fastdispatch.ops.topk_topp._sorted_reference``) up to its
   rounding at the top-p boundary;
2. vLLM's own ``_topk_topp_kernel`` (its source file given: the kernel, its helper and its two
   tables are read from it, nothing else of vLLM is needed) on the same rows: how many tokens per
   row its pivot search keeps that the exact set does not, or misses;
3. time per call (CUDA events, median of 20 after warm-up) of the three.

Prints a table; exit status 1 when (1) fails anywhere.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import triton  # noqa: E402

import kernels_cpu  # noqa: E402
from fastdispatch.ops import triton_kernels  # noqa: E402
from fastdispatch.ops.topk_topp import _sorted_reference as _sorted  # noqa: E402


def _vllm_kernel(path):
    """vLLM's ``_topk_topp_kernel`` (and tables) compiled from its source file alone."""
    src = open(path).read()
    tree = ast.parse(src)
    keep, tables = [], {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in (
            "_update_min_larger_stats",
            "_topk_topp_kernel",
        ):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            keep.append("\n".join(src.splitlines()[first - 1 : node.end_lineno]))
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("_PERCENTILE_TO_STD_TABLE", "_NORMAL_CDF_TO_SIGMA_TABLE"):
                tables[node.targets[0].id] = ast.literal_eval(node.value)
    # the decorators reference `triton` and `tl` only; their options (newer Triton's
    # do_not_specialize_on_alignment) are launch tuning, not semantics
    body = "\n\n".join(keep)
    body = "\n".join(
        "@triton.jit" if line.startswith("@triton.jit(") else line for line in body.splitlines()
    )
    text = "import triton\nimport triton.language as tl\n\n" + body
    path_out = os.path.join(ROOT, "build", "_vllm_topk_topp_kernel.py")
    os.makedirs(os.path.dirname(path_out), exist_ok=True)
    with open(path_out, "w") as f:
        f.write(text)  # Triton reads a kernel's source from its file
    import importlib.util

    spec = importlib.util.spec_from_file_location("_vllm_topk_topp_kernel", path_out)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Triton resolves a called kernel through its module
    spec.loader.exec_module(module)
    return module._topk_topp_kernel, tables


def _launch(kernel, logits, k, p, tables=None, programs=None):
    B, V = logits.shape
    dev = logits.device
    n = programs or B
    buf = torch.empty((n, V), device=dev) if tables else logits
    t1 = torch.tensor(tables["_PERCENTILE_TO_STD_TABLE"], device=dev) if tables else logits
    t2 = torch.tensor(tables["_NORMAL_CDF_TO_SIGMA_TABLE"], device=dev) if tables else logits
    big = tables is not None
    kernel[(n,)](
        logits,
        logits.stride(0),
        buf,
        t1,
        t2,
        k if k is not None else logits,
        p if p is not None else logits,
        B,
        VOCAB_SIZE=V,
        MASK_VALUE=float("-inf"),
        BLOCK_SIZE=8192 if big else 1024,
        BLOCK_SIZE_TRUNC=4096 if big else 512,
        TOPK_ENABLED=k is not None,
        TOPP_ENABLED=p is not None,
        SPLIT_COVERS_PONLY=False,
        **({"num_warps": 8} if big else {}),
    )


def _time(fn, reps=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-source", default="", help="vLLM's topk_topp_triton.py")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_topk_topp: no CUDA device", file=sys.stderr)
        return 2
    dev = "cuda"
    ours = triton_kernels.kernel("topk_topp_kernel")
    vk, tables = _vllm_kernel(args.vllm_source) if args.vllm_source else (None, None)
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    print(
        "| B | V | spread | filter | ours = kernels_cpu | ours vs sort (tokens/row) "
        "| vLLM kernel vs exact (tokens/row: extra / missing) | ours µs | vLLM µs | sort µs |"
    )
    print("|---:|---:|---|---|---|---|---|---:|---:|---:|")
    failed = False
    shapes = (
        [(16, 128256), (80, 128256)]
        if args.quick
        else [(1, 32000), (16, 32000), (80, 32000), (1, 128256), (16, 128256), (80, 128256)]
    )
    for B, V in shapes:
        for spread in ("3.0", "0.05", "grid"):
            g = torch.Generator().manual_seed(B * 7 + V)
            x = torch.randn(B, V, generator=g) * (0.05 if spread == "0.05" else 3.0)
            if spread == "grid":
                x = (x * 2).round() / 2
            for name, kv, pv in (("k50", 50, None), ("p0.9", None, 0.9), ("k50+p0.9", 50, 0.9)):
                k = None if kv is None else torch.full((B,), kv, dtype=torch.int32)
                p = None if pv is None else torch.full((B,), pv)
                cpu = x.clone()
                kernels_cpu.top_k_top_p(cpu, k, p)
                xg = x.to(dev)
                kg = None if k is None else k.to(dev)
                pg = None if p is None else p.to(dev)
                got = xg.clone()
                _launch(ours, got, kg, pg)
                torch.cuda.synchronize()
                same = torch.equal(got.cpu(), cpu)
                failed |= not same
                ref = _sorted(xg.clone(), kg, pg).cpu()
                kept_ours = cpu != -math.inf
                kept_ref = ref != -math.inf
                d_ref = int((kept_ours ^ kept_ref).sum(-1).max())
                t_ours = _time(lambda xg=xg, kg=kg, pg=pg: _launch(ours, xg.clone(), kg, pg))
                t_sort = _time(lambda xg=xg, kg=kg, pg=pg: _sorted(xg.clone(), kg, pg))
                vcol, tv = "—", "—"
                if vk is not None:
                    vg = xg.clone()
                    _launch(vk, vg, kg, pg, tables, programs=min(B, 132))
                    torch.cuda.synchronize()
                    kv_ = vg.cpu() != -math.inf
                    extra = int((kv_ & ~kept_ours).sum(-1).max())
                    missing = int((~kv_ & kept_ours).sum(-1).max())
                    vcol = f"{extra} / {missing}"
                    n = min(B, 132)  # vLLM: one program per SM at most

                    def run(xg=xg, kg=kg, pg=pg, n=n):
                        _launch(vk, xg.clone(), kg, pg, tables, n)

                    tv = f"{_time(run):.0f}"
                print(
                    f"| {B} | {V} | {spread} | {name} | {'yes' if same else 'NO'} | {d_ref} "
                    f"| {vcol} | {t_ours:.0f} | {tv} | {t_sort:.0f} |",
                    flush=True,
                )
    print("FAIL" if failed else "PASS: ours bit-identical to kernels_cpu on every row")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
