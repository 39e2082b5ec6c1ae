"""Types of ``kernels_cpu._sampling``: vLLM's greedy and random rejection kernels on CPU.

Buffers (``*_ptr``) are CPU tensors, used in place; integer scalars accept anything with
``__index__`` (Python or numpy integers, 0-d integer tensors). Flags that the Triton kernels
take as ``constexpr`` default to what the other arguments imply when ``None``.
"""

from typing import SupportsIndex

from torch import Tensor

def rejection_greedy_sample_kernel(
    output_token_ids_ptr: Tensor,
    cu_num_draft_tokens_ptr: Tensor,
    draft_token_ids_ptr: Tensor,
    target_argmax_ptr: Tensor,
    bonus_token_ids_ptr: Tensor,
    is_greedy_ptr: Tensor | None,
    max_spec_len: SupportsIndex,
    uniform_probs_ptr: Tensor | None = None,
    synthetic_conditional_rates_ptr: Tensor | None = None,
    SYNTHETIC_MODE: bool | int | None = None,
) -> None: ...
def rejection_random_sample_kernel(
    output_token_ids_ptr: Tensor,
    cu_num_draft_tokens_ptr: Tensor,
    draft_token_ids_ptr: Tensor,
    draft_probs_ptr: Tensor | None,
    target_probs_ptr: Tensor,
    bonus_token_ids_ptr: Tensor,
    recovered_token_ids_ptr: Tensor,
    uniform_probs_ptr: Tensor,
    is_greedy_ptr: Tensor,
    max_spec_len: SupportsIndex,
    vocab_size: SupportsIndex,
    synthetic_conditional_rates_ptr: Tensor | None = None,
    NO_DRAFT_PROBS: bool | int | None = None,
    SYNTHETIC_MODE: bool | int | None = None,
) -> None: ...
