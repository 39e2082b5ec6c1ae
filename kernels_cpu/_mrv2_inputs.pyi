"""Types of ``kernels_cpu._mrv2_inputs``: Model Runner V2's input kernels on CPU.

Each takes the Triton kernel's arguments in order and the launch grid as the keyword-only
``grid`` (1-3 ints); index buffers are int32 or int64 tensors, integer arguments Python, numpy
or 0-d tensor integers, ``BLOCK_SIZE``-like constexprs ints or None.
"""

from collections.abc import Sequence
from typing import SupportsIndex

from torch import Tensor

def prepare_prefill_inputs_kernel(
    input_ids_ptr: Tensor,
    next_prefill_tokens_ptr: Tensor,
    next_prefill_tokens_stride: SupportsIndex,
    num_lookahead: SupportsIndex,
    idx_mapping_ptr: Tensor,
    query_start_loc_ptr: Tensor,
    all_token_ids_ptr: Tensor,
    all_token_ids_stride: SupportsIndex,
    prefill_lens_ptr: Tensor,
    num_computed_tokens_ptr: Tensor,
    BLOCK_SIZE: SupportsIndex | None = None,
    LOOKAHEAD_BLOCK: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def prepare_pos_seq_lens_kernel(
    pos_ptr: Tensor,
    seq_lens_ptr: Tensor,
    idx_mapping_ptr: Tensor,
    query_start_loc_ptr: Tensor,
    num_computed_tokens_ptr: Tensor,
    max_num_reqs: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def combine_sampled_and_draft_tokens_kernel(
    input_ids_ptr: Tensor,
    idx_mapping_ptr: Tensor,
    last_sampled_tokens_ptr: Tensor,
    query_start_loc_ptr: Tensor,
    seq_lens_ptr: Tensor,
    prefill_len_ptr: Tensor,
    draft_tokens_ptr: Tensor,
    draft_tokens_stride: SupportsIndex,
    cu_num_logits_ptr: Tensor,
    logits_indices_ptr: Tensor,
    BLOCK_SIZE: SupportsIndex | None = None,
    NUM_NEW_SAMPLED_TOKENS: SupportsIndex = 1,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def get_num_sampled_and_rejected_kernel(
    num_sampled_ptr: Tensor,
    num_rejected_ptr: Tensor,
    seq_lens_ptr: Tensor,
    cu_num_logits_ptr: Tensor,
    idx_mapping_ptr: Tensor,
    prefill_len_ptr: Tensor,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def post_update_kernel(
    idx_mapping_ptr: Tensor,
    num_computed_tokens_ptr: Tensor,
    last_sampled_tokens_ptr: Tensor,
    output_bin_counts_ptr: Tensor | None,
    output_bin_counts_stride: SupportsIndex,
    sampled_tokens_ptr: Tensor,
    sampled_tokens_stride: SupportsIndex,
    num_sampled_ptr: Tensor,
    num_rejected_ptr: Tensor,
    query_start_loc_ptr: Tensor | None,
    all_token_ids_ptr: Tensor,
    all_token_ids_stride: SupportsIndex,
    total_len_ptr: Tensor,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def post_update_with_drafts_kernel(
    idx_mapping_ptr: Tensor,
    num_computed_tokens_ptr: Tensor,
    last_sampled_tokens_ptr: Tensor,
    output_bin_counts_ptr: Tensor | None,
    output_bin_counts_stride: SupportsIndex,
    sampled_tokens_ptr: Tensor,
    sampled_tokens_stride: SupportsIndex,
    num_sampled_ptr: Tensor,
    num_rejected_ptr: Tensor,
    query_start_loc_ptr: Tensor | None,
    all_token_ids_ptr: Tensor,
    all_token_ids_stride: SupportsIndex,
    total_len_ptr: Tensor,
    draft_tokens_ptr: Tensor | None,
    draft_tokens_out_ptr: Tensor | None,
    num_draft_tokens: SupportsIndex,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def post_update_num_computed_tokens_kernel(
    idx_mapping_ptr: Tensor,
    num_computed_tokens_ptr: Tensor,
    query_start_loc_ptr: Tensor,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def expand_idx_mapping_kernel(
    idx_mapping_ptr: Tensor,
    expanded_idx_mapping_ptr: Tensor,
    expanded_local_pos_ptr: Tensor,
    cu_num_logits_ptr: Tensor,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def gather_block_tables_kernel(
    batch_idx_to_req_idx: Tensor,
    src_block_table_ptrs: Tensor,
    dst_block_table_ptrs: Tensor,
    block_table_strides: Tensor,
    num_blocks_ptr: Tensor,
    num_blocks_stride: SupportsIndex,
    num_reqs: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def gather_block_tables_windowed_kernel(
    batch_idx_to_req_idx: Tensor,
    src_block_table_ptrs: Tensor,
    dst_block_table_ptrs: Tensor,
    block_table_strides: Tensor,
    num_blocks_ptr: Tensor,
    num_blocks_stride: SupportsIndex,
    num_reqs: SupportsIndex,
    num_computed_tokens_ptr: Tensor,
    sliding_window_reach_ptr: Tensor,
    block_sizes_ptr: Tensor,
    MASK_SLIDING_WINDOW: bool | None = None,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def compute_slot_mappings_kernel(
    max_num_tokens: SupportsIndex,
    idx_mapping: Tensor,
    query_start_loc: Tensor,
    pos: Tensor,
    block_table_ptrs: Tensor,
    block_table_strides: Tensor,
    block_sizes: Tensor,
    slot_mapping_enabled: Tensor,
    dcp_sharded: Tensor,
    slot_mappings_ptr: Tensor,
    slot_mappings_stride: SupportsIndex,
    cp_rank: SupportsIndex,
    CP_SIZE: SupportsIndex = 1,
    CP_INTERLEAVE: SupportsIndex = 1,
    PAD_ID: SupportsIndex = -1,
    TRITON_BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def apply_write_kernel(
    output_ptr: Tensor,
    output_stride: SupportsIndex | Tensor,
    write_indices_ptr: Tensor,
    write_starts_ptr: Tensor,
    write_contents_ptr: Tensor,
    write_cu_lens_ptr: Tensor,
    write_group_ids_ptr: Tensor | None,
    BLOCK_SIZE: SupportsIndex | None = None,
    MULTI_GROUP: bool | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
def prompt_logprobs_token_ids_kernel(
    prompt_logprobs_token_ids_ptr: Tensor,
    query_start_loc_ptr: Tensor,
    idx_mapping_ptr: Tensor,
    num_computed_tokens_ptr: Tensor,
    all_token_ids_ptr: Tensor,
    all_token_ids_stride: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: Sequence[SupportsIndex],
) -> None: ...
