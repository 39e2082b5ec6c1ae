"""Types of ``kernels_cpu._mrv2_sample``: Model Runner V2's hot sampler kernels on CPU.

Each takes the Triton kernel's arguments in its order and under its names, and the launch grid
as the keyword-only ``grid`` (a tuple of 1-3 ints): the number of tokens is the grid's.
"""

from typing import SupportsIndex

from torch import Tensor

def temperature_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    temperature_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
def min_p_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    min_p_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
def penalties_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    token_ids_ptr: Tensor,
    expanded_local_pos_ptr: Tensor,
    repetition_penalty_ptr: Tensor,
    frequency_penalty_ptr: Tensor,
    presence_penalty_ptr: Tensor,
    prompt_bin_mask_ptr: Tensor,
    prompt_bin_mask_stride: SupportsIndex,
    output_bin_counts_ptr: Tensor,
    output_bin_counts_stride: SupportsIndex,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
def bincount_kernel(
    expanded_idx_mapping_ptr: Tensor,
    all_token_ids_ptr: Tensor,
    all_token_ids_stride: SupportsIndex,
    prompt_len_ptr: Tensor,
    prefill_len_ptr: Tensor,
    prompt_bin_mask_ptr: Tensor,
    prompt_bin_mask_stride: SupportsIndex,
    output_bin_counts_ptr: Tensor,
    output_bin_counts_stride: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
def gumbel_sample_kernel(
    local_argmax_ptr: Tensor,
    local_argmax_stride: SupportsIndex,
    local_max_ptr: Tensor,
    local_max_stride: SupportsIndex,
    logits_cache_ptr: Tensor | None,
    logits_cache_stride_0: SupportsIndex,
    logits_cache_stride_1: SupportsIndex,
    logits_cache_col_ptr: Tensor | None,
    logits_cache_source_ptr: Tensor | None,
    logits_cache_source_stride: SupportsIndex,
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    seeds_ptr: Tensor,
    pos_ptr: Tensor,
    temp_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    IS_DRAFTING: bool,
    APPLY_TEMPERATURE: bool,
    USE_FP64: bool,
    PER_TOKEN_COL: bool,
    *,
    grid: tuple[int, ...],
) -> None: ...
def gumbel_sample_biased_kernel(
    local_argmax_ptr: Tensor,
    local_argmax_stride: SupportsIndex,
    local_max_ptr: Tensor,
    local_max_stride: SupportsIndex,
    logits_cache_ptr: Tensor | None,
    logits_cache_stride_0: SupportsIndex,
    logits_cache_stride_1: SupportsIndex,
    logits_cache_col_ptr: Tensor | None,
    logits_cache_source_ptr: Tensor | None,
    logits_cache_source_stride: SupportsIndex,
    logits_cache_row_mapping_ptr: Tensor | None,
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    bias_ptr: Tensor | None,
    bias_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    seeds_ptr: Tensor,
    pos_ptr: Tensor,
    temp_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    IS_DRAFTING: bool,
    APPLY_TEMPERATURE: bool,
    USE_FP64: bool,
    PER_TOKEN_COL: bool,
    HAS_BIAS: bool,
    *,
    grid: tuple[int, ...],
) -> None: ...
def _murmur3_draws(
    seeds: Tensor,
    positions: Tensor,
    keys: Tensor,
    hashes: Tensor,
    uniform32: Tensor,
    uniform64: Tensor,
) -> None: ...
def noise_bound_slack(first: int, count: int, step: int) -> tuple[float, float]: ...
