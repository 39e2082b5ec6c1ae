"""Types of ``kernels_cpu._mrv2_sample_logits``: Model Runner V2's logit bias, bad words,
structured-output bitmask, logprob and NaN-count kernels on CPU.

Each takes the Triton kernel's arguments in its order and under its names, and the launch grid
as the keyword-only ``grid`` (a tuple of 1-3 ints): the number of rows is the grid's.
"""

from typing import SupportsIndex

from torch import Tensor

def bias_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    vocab_size: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    num_allowed_token_ids_ptr: Tensor,
    allowed_token_ids_ptr: Tensor,
    allowed_token_ids_stride: SupportsIndex,
    num_logit_bias_ptr: Tensor,
    bias_token_ids_ptr: Tensor,
    bias_token_ids_stride: SupportsIndex,
    bias_ptr: Tensor,
    bias_stride: SupportsIndex,
    pos_ptr: Tensor,
    min_lens_ptr: Tensor,
    num_stop_token_ids_ptr: Tensor,
    restore_when_all_masked_ptr: Tensor,
    stop_token_ids_ptr: Tensor,
    stop_token_ids_stride: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    LOGITS_BLOCK_SIZE: SupportsIndex,
    CHECK_ALL_MASKED_ROWS: bool,
    *,
    grid: tuple[int, ...],
) -> None: ...
def bad_words_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    bad_word_token_ids_ptr: Tensor,
    bad_word_token_ids_stride: SupportsIndex,
    bad_word_offsets_ptr: Tensor,
    bad_word_offsets_stride: SupportsIndex,
    num_bad_words_ptr: Tensor,
    all_token_ids_ptr: Tensor,
    all_token_ids_stride: SupportsIndex,
    prompt_len_ptr: Tensor,
    total_len_ptr: Tensor,
    input_ids_ptr: Tensor,
    expanded_local_pos_ptr: Tensor,
    *,
    grid: tuple[int, ...],
) -> None: ...
def topk_log_softmax_kernel(
    output_ptr: Tensor,
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    topk_ids_ptr: Tensor,
    topk_ids_stride: SupportsIndex,
    topk: SupportsIndex,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    TOPK_BLOCK_SIZE: SupportsIndex | None,
    *,
    grid: tuple[int, ...],
) -> None: ...
def ranks_kernel(
    output_ptr: Tensor,
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    token_ids_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
def fill_logprob_token_ids_kernel(
    out_token_ids_ptr: Tensor,
    out_token_ids_stride: SupportsIndex,
    out_valid_mask_ptr: Tensor,
    out_valid_mask_stride: SupportsIndex,
    sampled_token_ids_ptr: Tensor,
    topk_indices_ptr: Tensor,
    topk_indices_stride: SupportsIndex,
    expanded_idx_mapping_ptr: Tensor,
    num_per_req_token_ids_ptr: Tensor,
    per_req_token_ids_ptr: Tensor,
    per_req_token_ids_stride: SupportsIndex,
    NUM_TOPK: SupportsIndex,
    PADDED_COLS: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
def apply_grammar_bitmask_kernel(
    logits_ptr: Tensor,
    logits_stride: SupportsIndex,
    logits_indices_ptr: Tensor,
    cu_num_logits_ptr: Tensor,
    bitmask_ptr: Tensor,
    bitmask_stride: SupportsIndex,
    vocab_size: SupportsIndex,
    MASK_STRIDE: SupportsIndex,
    BLOCK_SIZE: SupportsIndex,
    *,
    grid: tuple[int, ...],
) -> None: ...
