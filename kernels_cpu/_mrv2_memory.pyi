"""Types of ``kernels_cpu._mrv2_memory``: Model Runner V2's KV-cache block zeroing on CPU."""

from typing import SupportsIndex

from torch import Tensor

__all__ = ["zero_kv_blocks_kernel"]

def zero_kv_blocks_kernel(
    seg_addrs_ptr: Tensor,
    seg_block_strides_ptr: Tensor,
    seg_page_sizes_ptr: Tensor,
    block_ids_ptr: Tensor,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, int, int],
) -> None: ...
