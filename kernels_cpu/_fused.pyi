"""Types of ``kernels_cpu._fused``: the fused rejection-sampling step, noise drawn in the loop.

Token buffers are int32/int64 CPU tensors, probabilities and logits float32; ``seeds`` is an
int64 ``[B, 2]`` tensor of ``(key, stream)`` per request (the stream is ``_race``'s).
"""

from typing import SupportsIndex

from torch import Tensor

def recovered_tokens(
    output_token_ids: Tensor,
    cu_num_draft_tokens: Tensor,
    draft_token_ids: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    seeds: Tensor,
) -> None: ...
def sample_recovered_tokens_kernel_fused(
    output_token_ids_ptr: Tensor,
    cu_num_draft_tokens_ptr: Tensor,
    draft_token_ids_ptr: Tensor,
    draft_probs_ptr: Tensor | None,
    target_probs_ptr: Tensor,
    inv_q_ptr: Tensor,
    vocab_size: SupportsIndex,
    BLOCK_SIZE: SupportsIndex | None = None,
    NO_DRAFT_PROBS: bool | int | None = None,
    USE_FP64_GUMBEL: bool | int | None = None,
) -> None: ...
def rejection_sample_step(
    output_token_ids: Tensor,
    cu_num_draft_tokens: Tensor,
    draft_token_ids: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    bonus_token_ids: Tensor,
    is_greedy: Tensor | None,
    greedy_scores: Tensor | None,
    seeds: Tensor,
    max_spec_len: SupportsIndex,
    synthetic_rates: Tensor | None = None,
) -> None: ...
def rejection_sample_step_logits(
    output_token_ids: Tensor,
    cu_num_draft_tokens: Tensor,
    draft_token_ids: Tensor,
    draft_probs: Tensor | None,
    target_logits: Tensor,
    bonus_token_ids: Tensor,
    is_greedy: Tensor | None,
    seeds: Tensor,
    max_spec_len: SupportsIndex,
    synthetic_rates: Tensor | None = None,
) -> None: ...
def _expf_values(x: Tensor) -> Tensor: ...
def _set_chunk_blocks(n: int) -> int: ...
