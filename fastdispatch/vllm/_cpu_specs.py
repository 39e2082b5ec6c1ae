"""Dispatch functions for vLLM owners whose own one refuses CPU tensors.

A ``triton_kernel_dispatcher_with_warmup`` owner runs its dispatch function -- the launch's
grid and the kernel's extra arguments -- before the kernel. Most of vLLM's compute that from
shapes alone, so our override of the kernel serves CPU tensors through them. vLLM 0.32's
``scatter_states`` (mamba/KDA state caches) asserts ``state.is_cuda`` first: on a CPU host the
owner dies before the kernel, whatever the kernel is. For such an owner this module has a
dispatch function with the same parameters and the same launch, minus the device assertion
(and with ``launch_pdl`` off: programmatic dependent launch is a CUDA scheduling hint).

Detected, not assumed: at install the owner's own dispatch function is *called* on a tiny CPU
launch; only if it refuses it, and its parameter names and the standing kernel's argument
names are those this module computes for, is ours put in its place (through the
installation's ``_Patches``, undone at uninstall). Anything else is left to vLLM and reported.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ._installation import logger


class _Known(NamedTuple):
    """An owner whose dispatch function this module can stand in for."""

    module: str
    owner: str  # the owner's attribute in ``module``
    kernel: str  # the contract (``kernels_cpu.contracts``) of the kernel it launches
    params: tuple[str, ...]  # its dispatch function's parameters
    spec: Callable[..., Any]  # ours
    probe: Callable[[], tuple]  # a valid launch on CPU tensors, to ask vLLM's own


def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def scatter_states_spec(state, src, indices):
    """vLLM's ``scatter_states`` launch for tensors on any device: grid ``(row blocks, N)``
    and the strides, row length and block size of its ``_scatter_states_kernel``. The shape
    checks are vLLM's; the device is the kernel's business (ours validates it)."""
    if state.ndim < 2 or src.ndim != state.ndim or indices.ndim != 1:
        raise ValueError(
            f"scatter_states: expected state and src of the same rank >= 2 and 1-D indices, "
            f"got {tuple(state.shape)}, {tuple(src.shape)}, {tuple(indices.shape)}"
        )
    if src.shape[1:] != state.shape[1:] or src.shape[0] != indices.shape[0]:
        raise ValueError(
            f"scatter_states: expected src rows shaped as state's and one index per src row, "
            f"got state {tuple(state.shape)}, src {tuple(src.shape)}, indices "
            f"{tuple(indices.shape)}"
        )
    row_size = 1
    for n in state.shape[1:]:
        row_size *= int(n)
    block_size = min(_next_pow2(row_size), 1024)
    grid = (-(-row_size // block_size), indices.numel())
    return grid, dict(
        stride_state_batch=state.stride(0),
        stride_src_batch=src.stride(0),
        stride_indices=indices.stride(0),
        row_size=row_size,
        BLOCK_SIZE=block_size,
        num_warps=8,
        launch_pdl=False,
    )


def _scatter_states_probe():
    import torch

    return torch.zeros(2, 4), torch.zeros(1, 4), torch.zeros(1, dtype=torch.int32)


_KNOWN = (
    _Known(
        "vllm.model_executor.layers.mamba.ops.scatter_states",
        "scatter_states",
        "scatter_states_kernel",
        ("state", "src", "indices"),
        scatter_states_spec,
        _scatter_states_probe,
    ),
)


def _refuses_cpu(known, stock):
    """Whether vLLM's own dispatch function refuses a valid launch on CPU tensors."""
    try:
        stock(*known.probe())
    except Exception:  # noqa: BLE001 - an assertion today; any refusal counts
        return True
    return False


def install_cpu_specs(state):
    """Give each known owner whose kernel is ours here and whose dispatch function refuses CPU
    tensors our dispatch function; returns ``{owner qualname: reason}`` for the owners left to
    vLLM's (absent, not as known, or taking CPU tensors already). The kernel's argument names
    are its contract's (``kernels_cpu.contracts``), compared with the kernel standing there."""
    import importlib
    import inspect

    from kernels_cpu import VLLM_KERNELS, contracts

    left = {}
    for known in _KNOWN:
        if not any(name in state.ours for name in VLLM_KERNELS[known.kernel].names):
            continue  # the kernel is not ours on this release: nothing of ours to reach
        qualname = f"{known.module}.{known.owner}"
        try:
            owner = getattr(importlib.import_module(known.module), known.owner)
        except Exception as exc:  # noqa: BLE001 - a release without it
            left[qualname] = f"not in this vLLM ({type(exc).__name__})"
            continue
        stock = vars(owner).get("_dispatch_fn") if hasattr(owner, "__dict__") else None
        if stock is None:
            left[qualname] = "not a dispatcher-made owner"
            continue
        names = tuple(inspect.signature(stock).parameters)
        standing = tuple(state.fd._kernel_arg_names(vars(owner).get("kernel")) or ())
        kernel_args = tuple(a.name for a in contracts.contract(known.kernel).args)
        if names != known.params or standing != kernel_args:
            left[qualname] = f"signature {names} / kernel {standing} not the known one"
            continue
        if not _refuses_cpu(known, stock):
            left[qualname] = "vLLM's own dispatch takes CPU tensors"
            continue
        state.patches.set(owner, "_dispatch_fn", known.spec)
    for qualname, why in left.items():
        logger.info("fastdispatch: %s keeps vLLM's dispatch function (%s)", qualname, why)
    return left
