"""Types of ``kernels_cpu._mrv2_drafts``: Model Runner V2's drafter kernels on CPU.

Buffers (``*_ptr``) are CPU tensors, used in place; integer scalars accept anything with
``__index__`` (Python or numpy integers, 0-d integer tensors); ``grid`` is the Triton launch
grid, 1-3 ints (``kernels_cpu.GridLauncher`` passes it).
"""

from typing import SupportsIndex

from torch import Tensor

def standalone_ar_prepare_prefill_inputs_kernel(
    target_input_ids_ptr: Tensor,
    target_positions_ptr: Tensor,
    last_sampled_ptr: Tensor,
    idx_mapping_ptr: Tensor,
    out_input_ids_ptr: Tensor,
    out_positions_ptr: Tensor,
    last_token_indices_ptr: Tensor,
    out_query_start_loc_ptr: Tensor,
    out_seq_lens_ptr: Tensor,
    query_start_loc_ptr: Tensor,
    seq_lens_ptr: Tensor,
    num_rejected_ptr: Tensor,
    max_num_reqs: SupportsIndex,
    max_model_len: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
def ngram_scan_kernel(
    token_ids_ptr: Tensor,
    token_ids_stride: SupportsIndex,
    idx_mapping_ptr: Tensor,
    total_len_ptr: Tensor,
    num_sampled_ptr: Tensor,
    scratch_ptr: Tensor,
    scratch_stride: SupportsIndex,
    L: SupportsIndex,
    MIN_N: SupportsIndex,
    MAX_N: SupportsIndex,
    MAX_N_PO2: SupportsIndex,
    BLOCK_L: SupportsIndex,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
def ngram_finalize_kernel(
    token_ids_ptr: Tensor,
    token_ids_stride: SupportsIndex,
    idx_mapping_ptr: Tensor,
    total_len_ptr: Tensor,
    num_sampled_ptr: Tensor,
    last_sampled_ptr: Tensor,
    scratch_ptr: Tensor,
    scratch_stride: SupportsIndex,
    drafts_ptr: Tensor,
    L: SupportsIndex,
    N_BLOCKS: SupportsIndex,
    K: SupportsIndex,
    K_PO2: SupportsIndex,
    N_BLOCKS_PO2: SupportsIndex,
    *,
    grid: tuple[SupportsIndex, ...],
) -> None: ...
