"""The map from vLLM's Triton kernels to the kernels in this package, for every signature we know.

One table, :data:`VLLM_KERNELS`: per kernel, the qualified names vLLM has kept it under (newest
first) and the ``kernels_cpu`` functions that implement its known signatures. Which function
serves a release is decided by :func:`impl_for` from the argument names of the kernel standing
there -- compared with each function's own parameters, read from the function itself -- so a new
signature is supported by adding a function to the table, and a signature nobody implements
gets no implementation (the caller leaves that kernel to vLLM) instead of a wrong one.

Why per signature: vLLM 0.27-0.31's slot-mapping kernel takes 15 arguments (``block_size`` and
``BLOCKS_PER_KV_BLOCK`` for KV-cache blocks split into attention-kernel blocks), 0.32's takes 13;
an implementation of the one cannot bind the other's launch, and the two compute different slots
from the same table. Likewise the top-k/top-p kernel: 14 arguments in 0.27-0.29, 15 from 0.30
(``SPLIT_COVERS_PONLY``, for the split top-p kernels vLLM launches only on CUDA). The other ten
kernels have one signature from 0.27 to 0.33.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


class KernelEntry(NamedTuple):
    """One of vLLM's kernels: where vLLM has kept it, and our implementations of it."""

    #: Qualified names vLLM has kept the kernel under, newest first.
    names: tuple[str, ...]
    #: Names of the ``kernels_cpu`` functions implementing its signatures, newest first.
    impls: tuple[str, ...]


_SAMPLER = "vllm.v1.sample.rejection_sampler"
_SPEC = "vllm.v1.spec_decode.utils"

#: vLLM kernel (its function name) -> where vLLM keeps it and what implements it here.
VLLM_KERNELS: dict[str, KernelEntry] = {
    "expand_kernel": KernelEntry((f"{_SAMPLER}.expand_kernel",), ("expand_kernel",)),
    "rejection_greedy_sample_kernel": KernelEntry(
        (f"{_SAMPLER}.rejection_greedy_sample_kernel",), ("rejection_greedy_sample_kernel",)
    ),
    "rejection_random_sample_kernel": KernelEntry(
        (f"{_SAMPLER}.rejection_random_sample_kernel",), ("rejection_random_sample_kernel",)
    ),
    "sample_recovered_tokens_kernel": KernelEntry(
        (f"{_SAMPLER}.sample_recovered_tokens_kernel",), ("sample_recovered_tokens_kernel",)
    ),
    "eagle_step_slot_mapping_metadata_kernel": KernelEntry(
        (f"{_SPEC}.eagle_step_slot_mapping_metadata_kernel",),
        ("eagle_step_slot_mapping_metadata_kernel",),
    ),
    "eagle_prepare_inputs_padded_kernel": KernelEntry(
        (f"{_SPEC}.eagle_prepare_inputs_padded_kernel",), ("eagle_prepare_inputs_padded_kernel",)
    ),
    "eagle_prepare_next_token_padded_kernel": KernelEntry(
        (f"{_SPEC}.eagle_prepare_next_token_padded_kernel",),
        ("eagle_prepare_next_token_padded_kernel",),
    ),
    "copy_and_expand_eagle_inputs_kernel": KernelEntry(
        (f"{_SPEC}.copy_and_expand_eagle_inputs_kernel",),
        ("copy_and_expand_eagle_inputs_kernel",),
    ),
    "copy_and_expand_dflash_inputs_kernel": KernelEntry(
        (f"{_SPEC}.copy_and_expand_dflash_inputs_kernel",),
        ("copy_and_expand_dflash_inputs_kernel",),
    ),
    "compute_slot_mapping_kernel": KernelEntry(
        (
            # 0.29+: a launch-owner class keeps it (0.29-0.31: 15 arguments, 0.32+: 13)
            "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel",
            # 0.27, 0.28: a module-level kernel (15 arguments)
            "vllm.v1.worker.block_table._compute_slot_mapping_kernel",
        ),
        ("compute_slot_mapping_kernel", "compute_slot_mapping_hybrid_kernel"),
    ),
    "batch_memcpy_kernel": KernelEntry(
        ("vllm.v1.worker.mamba_utils.batch_memcpy_kernel",), ("batch_memcpy_kernel",)
    ),
    # 0.30+: 15 arguments (SPLIT_COVERS_PONLY); 0.27-0.29: 14
    "topk_topp_kernel": KernelEntry(
        ("vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",),
        ("topk_topp_kernel", "topk_topp_nosplit_kernel"),
    ),
}

#: vLLM 0.32's qualified kernel name -> the implementing function in ``kernels_cpu`` (the
#: newest name and signature of every :data:`VLLM_KERNELS` entry).
VLLM_KERNEL_NAMES: dict[str, str] = {
    entry.names[0]: entry.impls[0] for entry in VLLM_KERNELS.values()
}


def vllm_overrides() -> dict[str, Callable[..., Any]]:
    """Return ``{vLLM 0.32 qualified name: kernels_cpu function}`` for all 12 kernels.

    The result is ready for ``register_kernels`` -- fastdispatch's or vLLM's own -- against
    vLLM 0.32's signatures; for another release pick per signature with :func:`impl_for`.
    """
    import kernels_cpu

    return {qualname: getattr(kernels_cpu, fn) for qualname, fn in VLLM_KERNEL_NAMES.items()}


def parameter_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names of ``fn``'s positional parameters, in order."""
    params = inspect.signature(fn).parameters.values()
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def impl_for(kernel: str, arg_names: Sequence[str]) -> Callable[..., Any] | None:
    """The ``kernels_cpu`` function implementing ``kernel`` (a :data:`VLLM_KERNELS` key) with
    exactly these argument names in this order, or None when none does.

    Exact names and order, not just a count: a launch binds by name, and two signatures of the
    same length could mean different things.
    """
    import kernels_cpu

    wanted = tuple(arg_names)
    for fn_name in VLLM_KERNELS[kernel].impls:
        fn = getattr(kernels_cpu, fn_name)
        if parameter_names(fn) == wanted:
            return fn
    return None
