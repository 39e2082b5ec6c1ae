"""The map from vLLM's qualified Triton kernel names to the kernels in this package.

vLLM (0.32.0) looks its 11 CPU-replaceable kernels up under these names; the function names here
are the Triton kernels' own, with the same arguments, so a launch binds by name or position.
"""

from collections.abc import Callable
from typing import Any

#: vLLM qualified kernel name -> name of the implementing function in ``kernels_cpu``.
VLLM_KERNEL_NAMES: dict[str, str] = {
    "vllm.v1.sample.rejection_sampler.expand_kernel": "expand_kernel",
    "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel": (
        "rejection_greedy_sample_kernel"
    ),
    "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel": (
        "rejection_random_sample_kernel"
    ),
    "vllm.v1.sample.rejection_sampler.sample_recovered_tokens_kernel": (
        "sample_recovered_tokens_kernel"
    ),
    "vllm.v1.spec_decode.utils.eagle_step_slot_mapping_metadata_kernel": (
        "eagle_step_slot_mapping_metadata_kernel"
    ),
    "vllm.v1.spec_decode.utils.eagle_prepare_inputs_padded_kernel": (
        "eagle_prepare_inputs_padded_kernel"
    ),
    "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel": (
        "eagle_prepare_next_token_padded_kernel"
    ),
    "vllm.v1.spec_decode.utils.copy_and_expand_eagle_inputs_kernel": (
        "copy_and_expand_eagle_inputs_kernel"
    ),
    "vllm.v1.spec_decode.utils.copy_and_expand_dflash_inputs_kernel": (
        "copy_and_expand_dflash_inputs_kernel"
    ),
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": "compute_slot_mapping_kernel",
    "vllm.v1.worker.mamba_utils.batch_memcpy_kernel": "batch_memcpy_kernel",
}


def vllm_overrides() -> dict[str, Callable[..., Any]]:
    """Return ``{vLLM qualified name: kernels_cpu function}`` for all 11 kernels.

    The result is ready for ``register_kernels`` -- fastdispatch's or vLLM's own.
    """
    import kernels_cpu

    return {qualname: getattr(kernels_cpu, fn) for qualname, fn in VLLM_KERNEL_NAMES.items()}
