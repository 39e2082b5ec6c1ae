"""Types of ``kernels_cpu._spec_decode``: vLLM's speculative-decoding kernels on CPU.

Buffers (``*_ptr``) are CPU tensors, used in place; integer scalars accept anything with
``__index__`` (Python or numpy integers, 0-d integer tensors).
"""

from typing import SupportsIndex

from torch import Tensor

def eagle_step_slot_mapping_metadata_kernel(
    positions_ptr: Tensor,
    block_table_ptr: Tensor,
    block_table_stride: SupportsIndex,
    seq_lens_ptr: Tensor,
    out_clamped_positions_ptr: Tensor,
    out_slot_mapping_ptr: Tensor,
    block_size: SupportsIndex,
    max_model_len: SupportsIndex,
    n_blocks_per_req: SupportsIndex,
    PAD_ID: SupportsIndex,
    batch_size: SupportsIndex,
) -> None: ...
def eagle_prepare_inputs_padded_kernel(
    cu_num_draft_tokens_ptr: Tensor,
    valid_sampled_tokens_count_ptr: Tensor,
    query_start_loc_gpu_ptr: Tensor,
    token_indices_to_sample_ptr: Tensor,
    num_rejected_tokens_gpu_ptr: Tensor,
    num_reqs: SupportsIndex,
) -> None: ...
def eagle_prepare_next_token_padded_kernel(
    sampled_token_ids_ptr: Tensor,
    discard_request_mask_ptr: Tensor,
    backup_next_token_ids_ptr: Tensor,
    next_token_ids_ptr: Tensor,
    valid_sampled_tokens_count_ptr: Tensor,
    vocab_size: SupportsIndex,
    num_sampled_tokens_per_req: SupportsIndex,
    num_reqs: SupportsIndex,
    stride_sampled_token_ids: SupportsIndex,
    BLOCK_SIZE_TOKENS: SupportsIndex | None = None,
) -> None: ...
def copy_and_expand_eagle_inputs_kernel(
    target_token_ids_ptr: Tensor,
    target_positions_ptr: Tensor,
    next_token_ids_ptr: Tensor,
    out_input_ids_ptr: Tensor,
    out_positions_ptr: Tensor,
    out_is_rejected_token_mask_ptr: Tensor,
    out_is_masked_token_mask_ptr: Tensor,
    out_new_token_indices_ptr: Tensor,
    out_hidden_state_mapping_ptr: Tensor | None,
    query_start_loc_ptr: Tensor,
    query_end_loc_ptr: Tensor,
    padding_token_id: SupportsIndex,
    parallel_drafting_token_id: SupportsIndex,
    total_input_tokens: SupportsIndex,
    num_padding_slots_per_request: SupportsIndex,
    shift_input_ids: bool | int,
    BLOCK_SIZE_TOKENS: SupportsIndex | None = None,
) -> None: ...
def copy_and_expand_dflash_inputs_kernel(
    next_token_ids_ptr: Tensor,
    target_positions_ptr: Tensor,
    out_input_ids_ptr: Tensor,
    out_context_positions_ptr: Tensor,
    out_query_positions_ptr: Tensor,
    out_context_slot_mapping_ptr: Tensor,
    out_query_slot_mapping_ptr: Tensor,
    out_token_indices_ptr: Tensor,
    block_table_ptr: Tensor,
    block_table_stride: SupportsIndex,
    query_start_loc_ptr: Tensor,
    num_rejected_tokens_ptr: Tensor | int | None,
    parallel_drafting_token_id: SupportsIndex,
    block_size: SupportsIndex,
    num_query_per_req: SupportsIndex,
    num_speculative_tokens: SupportsIndex,
    total_input_tokens: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    HAS_NUM_REJECTED: bool | int | None = False,
) -> None: ...
