"""Types of ``kernels_cpu._workers``: vLLM's worker kernels (slot mapping, state copies) on CPU.

Buffers (``*_ptr``) are CPU tensors, used in place; integer scalars accept anything with
``__index__`` (Python or numpy integers, 0-d integer tensors).
"""

from typing import SupportsIndex

from torch import Tensor

def compute_slot_mapping_kernel(
    num_tokens: SupportsIndex,
    max_num_tokens: SupportsIndex,
    query_start_loc_ptr: Tensor,
    positions_ptr: Tensor,
    block_table_ptr: Tensor,
    block_table_stride: SupportsIndex,
    slot_mapping_ptr: Tensor,
    KV_CACHE_BLOCK_SIZE: SupportsIndex,
    TOTAL_CP_WORLD_SIZE: SupportsIndex = 1,
    TOTAL_CP_RANK: SupportsIndex = 0,
    CP_KV_CACHE_INTERLEAVE_SIZE: SupportsIndex = 1,
    PAD_ID: SupportsIndex = -1,
    BLOCK_SIZE: SupportsIndex | None = None,
) -> None: ...
def compute_slot_mapping_hybrid_kernel(
    num_tokens: SupportsIndex,
    max_num_tokens: SupportsIndex,
    query_start_loc_ptr: Tensor,
    positions_ptr: Tensor,
    block_table_ptr: Tensor,
    block_table_stride: SupportsIndex,
    block_size: SupportsIndex,
    slot_mapping_ptr: Tensor,
    KV_CACHE_BLOCK_SIZE: SupportsIndex,
    BLOCKS_PER_KV_BLOCK: SupportsIndex = 1,
    TOTAL_CP_WORLD_SIZE: SupportsIndex = 1,
    TOTAL_CP_RANK: SupportsIndex = 0,
    CP_KV_CACHE_INTERLEAVE_SIZE: SupportsIndex = 1,
    PAD_ID: SupportsIndex = -1,
    BLOCK_SIZE: SupportsIndex | None = None,
) -> None: ...
def batch_memcpy_kernel(
    src_ptrs: Tensor, dst_ptrs: Tensor, sizes: Tensor, BLOCK_SIZE: SupportsIndex | None = None
) -> None: ...
def scatter_states_kernel(
    state_ptr: Tensor,
    src_ptr: Tensor,
    indices_ptr: Tensor,
    stride_state_batch: SupportsIndex,
    stride_src_batch: SupportsIndex,
    stride_indices: SupportsIndex,
    row_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    launch_pdl: bool | None = None,
) -> None: ...
