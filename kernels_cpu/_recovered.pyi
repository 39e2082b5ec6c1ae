"""Types of ``kernels_cpu._recovered``: vLLM's ``sample_recovered_tokens_kernel`` on CPU.

Buffers, scalars and ``constexpr`` flags are taken as ``kernels_cpu._sampling``'s stub says.
"""

from typing import SupportsIndex

from torch import Tensor

def sample_recovered_tokens_kernel(
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
