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

from ._installation import logger

#: owner (module, attribute) -> (the dispatch function's parameters, the kernel's arguments).
_KNOWN = {
    ("vllm.model_executor.layers.mamba.ops.scatter_states", "scatter_states"): (
        ("state", "src", "indices"),
        (
            "state_ptr",
            "src_ptr",
            "indices_ptr",
            "stride_state_batch",
            "stride_src_batch",
            "stride_indices",
            "row_size",
            "BLOCK_SIZE",
            "launch_pdl",
        ),
    ),
}


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


_SPECS = {
    ("vllm.model_executor.layers.mamba.ops.scatter_states", "scatter_states"): scatter_states_spec,
}


def _probe(where, stock):
    """Whether vLLM's own dispatch function refuses a valid launch on CPU tensors."""
    import torch

    if where[1] == "scatter_states":
        args = (torch.zeros(2, 4), torch.zeros(1, 4), torch.zeros(1, dtype=torch.int32))
    else:  # pragma: no cover - every _KNOWN owner has a probe
        return False
    try:
        stock(*args)
    except Exception:  # noqa: BLE001 - an assertion today; any refusal counts
        return True
    return False


def install_cpu_specs(state, kernel_arg_names):
    """Give each known owner whose dispatch function refuses CPU tensors ours; returns
    ``{owner qualname: reason}`` for the owners left to vLLM (absent, or not as known)."""
    import importlib
    import inspect

    left = {}
    for where, (params, kernel_args) in _KNOWN.items():
        qualname = ".".join(where)
        try:
            owner = getattr(importlib.import_module(where[0]), where[1])
        except Exception as exc:  # noqa: BLE001 - a release without it
            left[qualname] = f"not in this vLLM ({type(exc).__name__})"
            continue
        stock = vars(owner).get("_dispatch_fn") if hasattr(owner, "__dict__") else None
        if stock is None:
            left[qualname] = "not a dispatcher-made owner"
            continue
        names = tuple(inspect.signature(stock).parameters)
        standing = tuple(kernel_arg_names(vars(owner).get("kernel")) or ())
        if names != params or standing != kernel_args:
            left[qualname] = f"signature {names} / kernel {standing} not the known one"
            continue
        if not _probe(where, stock):
            left[qualname] = "vLLM's own dispatch takes CPU tensors"
            continue
        state.patches.set(owner, "_dispatch_fn", _SPECS[where])
    for qualname, why in left.items():
        logger.info("fastdispatch: %s keeps vLLM's dispatch function (%s)", qualname, why)
    return left
