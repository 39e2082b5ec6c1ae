"""Types of ``kernels_cpu._spec_step``: the whole speculative sampling step read from the logits.

Token and index buffers are int32/int64 CPU tensors; ``logits`` fp32/fp16/bf16 with unit column
stride; ``seeds`` an int64 ``[B, 2]`` tensor of ``(key, stream)`` per request (``_fused``'s).
"""

from typing import SupportsIndex

from torch import Tensor

def spec_sample_step(
    output_token_ids: Tensor,
    logits: Tensor,
    target_logits_indices: Tensor,
    bonus_logits_indices: Tensor,
    cu_num_draft_tokens: Tensor,
    draft_token_ids: Tensor,
    draft_probs: Tensor | None,
    temperature: Tensor | None,
    is_greedy: Tensor | None,
    bonus_greedy: Tensor | None,
    top_k: Tensor | None,
    top_p: Tensor | None,
    seeds: Tensor,
    max_spec_len: SupportsIndex,
) -> None: ...
