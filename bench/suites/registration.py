"""``register_kernels`` for vLLM's 11 kernel names: vLLM's own (its platform hook) vs ours.

This is what a vLLM CPU worker pays once at start-up (anchor ~125 ms: it scans every module and
trips a torch FutureWarning on the way). Ours registers ``kernels_cpu.vllm_overrides()`` through
``fastdispatch.register_kernels`` in the same vLLM process; before each of our samples (outside the
timed loop) ``unregister_kernels`` puts vLLM's stock overrides back, so every sample does a full
registration. It rebinds vLLM's modules, so this suite runs last in the vLLM interpreter.
"""

from __future__ import annotations

import importlib

from .._model import Built, GroupSpec, Unavailable
from .._rows import RowDef
from .._timing import Case

STOCK = "vLLM register_kernels (platform hook, 11 shims)"
OURS = "fastdispatch.register_kernels (11 kernels_cpu)"


def _register_builder(ctx) -> Built:
    """register_kernels for the 11 names: vLLM's with its shims vs ours with kernels_cpu."""
    b = Built(info={"names": 11})

    def stock():
        ctx.vllm.require()
        from vllm.platforms.cpu import CpuPlatform

        return Case(
            "",
            stmt="hook()",
            namespace={"hook": CpuPlatform.register_triton_kernel_overrides},
            state="stock",
            meta={"call": "CpuPlatform.register_triton_kernel_overrides()"},
        )

    def ours():
        ctx.vllm.require()
        try:
            fd = importlib.import_module("fastdispatch")
            kc = importlib.import_module("kernels_cpu")
        except Exception as exc:
            raise Unavailable(f"fastdispatch/kernels_cpu not importable: {exc}") from exc
        fv = importlib.import_module("fastdispatch.vllm")
        # the names vLLM's hook registers: not the kernels it has no CPU implementation of
        mapping = {n: f for n, f in kc.vllm_overrides().items() if n not in fv.NO_STOCK_CPU}
        if not hasattr(fd, "unregister_kernels"):
            raise Unavailable(
                "fastdispatch has no unregister_kernels: cannot restore vLLM afterwards"
            )
        names = list(mapping)

        def setup():  # outside the timed loop: start each sample from stock vLLM
            registered = [n for n in names if n in fd._registry]
            if registered:
                fd.unregister_kernels(registered)

        return Case(
            "",
            stmt="reg(mapping)",
            namespace={"reg": fd.register_kernels, "mapping": mapping},
            state="stock",
            setup=setup,
            meta={"call": "fastdispatch.register_kernels(kernels_cpu.vllm_overrides())"},
        )

    b.add(STOCK, stock)
    b.add(OURS, ours)

    def cleanup():
        try:
            fd = importlib.import_module("fastdispatch")
            registered = [
                n
                for n in importlib.import_module("kernels_cpu").vllm_overrides()
                if n in fd._registry
            ]
            if registered:
                fd.unregister_kernels(registered)
        except Exception:
            pass

    b.cleanup = cleanup
    return b


def groups(ctx):
    return [
        GroupSpec(
            id="registration/register_kernels(11 names)",
            suite="registration",
            title="register_kernels for vLLM's 11 kernel names (ns per call)",
            rows=(RowDef("stock", STOCK), RowDef("ours", OURS)),
            anchor=(STOCK,),
            build=_register_builder,
            needs_vllm=True,
            params={"names": 11},
            max_repeats={"quick": 3, "default": 9}.get(ctx.preset),
        )
    ]
