"""Types of ``kernels_cpu._topk_topp``: top-k / top-p masking of logits rows in place."""

from torch import Tensor

def top_k_top_p(
    logits: Tensor,
    k: Tensor | None = None,
    p: Tensor | None = None,
    mask_value: float = ...,
) -> None: ...
