"""CPU implementations of vLLM's sampling and speculative-decoding Triton kernels.

Each kernel takes the Triton kernel's arguments in its order and under its names, reads int32 or
int64 buffers in place and writes outputs in the caller's dtype. ``vllm_overrides()`` maps vLLM's
qualified kernel names to these functions for ``register_kernels``; ``VLLM_KERNELS`` and
``impl_for`` pick the function per kernel signature for other vLLM releases.
"""

import torch  # noqa: F401  -- load torch's libgomp before ours: one OpenMP runtime per process

from ._overrides import VLLM_KERNEL_NAMES, VLLM_KERNELS, impl_for, vllm_overrides  # noqa: E402
from ._parallel import (  # noqa: E402
    get_num_threads,
    openmp_enabled,
    parallel_threshold,
    set_num_threads,
    set_parallel_threshold,
)
from ._sampling import (  # noqa: E402, F401 -- in __all__ by the kernel table
    expand_kernel,
    rejection_greedy_sample_kernel,
    rejection_random_sample_kernel,
    sample_recovered_tokens_kernel,
)
from ._spec_decode import (  # noqa: E402, F401 -- in __all__ by the kernel table
    copy_and_expand_dflash_inputs_kernel,
    copy_and_expand_eagle_inputs_kernel,
    eagle_prepare_inputs_padded_kernel,
    eagle_prepare_next_token_padded_kernel,
    eagle_step_slot_mapping_metadata_kernel,
)
from ._topk_topp import (  # noqa: E402, F401 -- the kernels in __all__ by the kernel table
    top_k_top_p,
    topk_topp_kernel,
    topk_topp_nosplit_kernel,
)
from ._workers import (  # noqa: E402, F401 -- in __all__ by the kernel table
    batch_memcpy_kernel,
    compute_slot_mapping_hybrid_kernel,
    compute_slot_mapping_kernel,
)

__all__ = [
    "VLLM_KERNEL_NAMES",
    "VLLM_KERNELS",
    "impl_for",
    "vllm_overrides",
    "get_num_threads",
    "openmp_enabled",
    "parallel_threshold",
    "set_num_threads",
    "set_parallel_threshold",
    "top_k_top_p",
    # the kernels: every implementation in the kernel table, in its order
    *(impl for entry in VLLM_KERNELS.values() for impl in entry.impls),
]
