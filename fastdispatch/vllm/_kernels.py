"""Which of vLLM's kernels are ours on this release, and with which ``kernels_cpu`` function.

Per kernel, the implementation is chosen from the argument names of the kernel standing there
(``kernels_cpu.impl_for``); a kernel whose signature no ``kernels_cpu`` function implements, or
that this release does not have, is left to vLLM -- that one name, with a warning and its reason
in :func:`fastdispatch.vllm.kernel_report` (``python -m fastdispatch verify --vllm``) -- and the
other kernels are still ours. :func:`fastdispatch.vllm.install` then registers the chosen
kernels with their ``kernels_cpu`` implementations.
"""

import sys

from ._installation import logger


def _kernel_names():
    from kernels_cpu import VLLM_KERNEL_NAMES

    return tuple(VLLM_KERNEL_NAMES)


#: vLLM 0.32's qualified names of the kernels that ``kernels_cpu`` implements
#: (:func:`fastdispatch.vllm.kernel_names` gives the running release's).
KERNEL_NAMES = _kernel_names()

#: Kernels vLLM's CPU platform has no implementation of (no shim registered or assigned, in any
#: release 0.27-0.33): vLLM launches them only where Triton runs (``apply_top_k_top_p_triton``,
#: behind ``HAS_TRITON``), so a stock CPU worker holds the Triton kernel itself -- a plain
#: function without Triton -- and never imports its module. ``install`` registers ours there
#: all the same, so that a launch which does reach it (vLLM's Triton entry called with CPU
#: tensors, as its own tests do) runs ``kernels_cpu``; vLLM's split top-p kernels
#: (``_topp_sb_*``, CUDA only: vLLM never launches them off a CUDA device) are not replaced.
#: Likewise the mamba/KDA state-cache write ``_scatter_states_kernel``, whose owner's dispatch
#: function asserts CUDA tensors: ``install`` also gives that owner a CPU dispatch function
#: (``_cpu_specs``). The vLLM suite checks this set against the platform hook's registrations.
NO_STOCK_CPU = frozenset(
    {
        "vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",
        "vllm.model_executor.layers.mamba.ops.scatter_states._scatter_states_kernel",
    }
)


def _standing_kernel(fd, host, attr):
    """The kernel a launch through ``host.attr`` would reach first, under any override standing
    there (ours, or vLLM's ``KernelOverride``/CPU shim): the object whose signature counts."""
    value = getattr(host, attr)
    for entry in list(fd._registry.values()):
        if value is entry.override:
            return entry.original
    inner = getattr(value, "kernel", None)  # vLLM's KernelOverride keeps the kernel it shadows
    return inner if callable(inner) else value


def _choose_kernels(state):
    """``{qualified name: kernels_cpu function}`` for the kernels this release has with a
    signature we implement; every other kernel goes to ``state.left`` with the reason.

    Per kernel of ``kernels_cpu.VLLM_KERNELS``: a kernel whose module this release does not
    have at all goes to ``state.absent`` with the release facts' words (``_releases``: "not in
    this release (removed in 0.34)", or "(added in 0.30)") and is not reported as left;
    otherwise the first of its known qualified names that resolves here (newest first:
    0.29+ keep the slot-mapping kernel on a class, 0.27/0.28 at module level), then the
    implementation whose parameters are the standing kernel's argument names
    (``kernels_cpu.impl_for``). Nothing is registered here.
    """
    import kernels_cpu
    from kernels_cpu._overrides import parameter_names

    from ._releases import absent_reason

    fd = state.fd
    version = _vllm_version()
    chosen = {}
    for kernel, entry in kernels_cpu.VLLM_KERNELS.items():
        found, failures, module_seen = None, [], False
        for name in entry.names:
            try:
                host, attr = fd._resolve_kernel(name)
            except ModuleNotFoundError:
                continue
            except (ImportError, ValueError):
                module_seen = True
                continue
            except Exception as exc:  # noqa: BLE001 - a module of vLLM's failing to import
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            found = name
            break
        if found is None and not module_seen and not failures:
            # a kernel of another release (its module is not in this one): nothing to replace
            state.absent[entry.names[0]] = absent_reason(kernel, version)
            continue
        if found is None:
            state.left[entry.names[0]] = f"not in this vLLM (looked for {', '.join(entry.names)})"
            if failures:
                state.left[entry.names[0]] += f"; {'; '.join(failures)}"
            continue
        try:
            arg_names = tuple(fd._kernel_arg_names(_standing_kernel(fd, host, attr)))
        except Exception as exc:  # noqa: BLE001 - this one name goes to vLLM, not the install
            state.left[found] = f"its argument names cannot be read ({exc})"
            continue
        impl = kernels_cpu.impl_for(kernel, arg_names)
        if impl is None:
            known = "; ".join(
                f"{fn}({', '.join(parameter_names(getattr(kernels_cpu, fn)))})"
                for fn in entry.impls
            )
            state.left[found] = (
                f"signature ({', '.join(arg_names)}) is not one kernels_cpu implements ({known})"
            )
            continue
        chosen[found] = impl
    for name, why in state.left.items():
        logger.warning("fastdispatch: %s left to vLLM: %s", name, why)
    for name, why in state.absent.items():
        logger.info("fastdispatch: %s: %s", name, why)
    return chosen


def _vllm_version():
    """The running vLLM's version (``vllm.__version__``), or None when it cannot be read."""
    module = sys.modules.get("vllm")
    version = getattr(module, "__version__", None) if module is not None else None
    return version if isinstance(version, str) else None
