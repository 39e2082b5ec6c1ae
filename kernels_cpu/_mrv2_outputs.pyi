"""Types of ``kernels_cpu._mrv2_outputs``: Model Runner V2's NaN-count and sampling-mask
kernels on CPU.

Buffers (``*_ptr``) are CPU tensors, used in place; integer scalars accept anything with
``__index__`` (Python or numpy integers, 0-d integer tensors). ``grid`` is the launch grid
(1-3 ints); the kernels take their row count from its first axis.
"""

from typing import SupportsIndex

from torch import Tensor

def num_nans_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    num_nans_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
def compact_sampling_mask_kernel(
    logits_ptr: Tensor,
    logits_row_stride: SupportsIndex,
    logits_col_stride: SupportsIndex,
    cu_num_logits_ptr: Tensor,
    num_sampled_tokens_ptr: Tensor,
    token_ids_ptr: Tensor,
    token_ids_row_stride: SupportsIndex,
    packed_mask_ptr: Tensor,
    packed_mask_row_stride: SupportsIndex,
    counts_ptr: Tensor,
    vocab_size: SupportsIndex,
    max_num_kept: SupportsIndex,
    ROWS_PER_REQUEST: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
