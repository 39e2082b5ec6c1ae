"""Types of ``kernels_cpu._topk_topp``: top-k / top-p masking of logits rows in place."""

from torch import Tensor

def top_k_top_p(
    logits: Tensor,
    k: Tensor | None = None,
    p: Tensor | None = None,
    mask_value: float = ...,
) -> None: ...
def topk_topp_kernel(
    LOGITS: Tensor,
    LOGITS_STRIDE_0: int,
    BUFFER: object,
    PERCENTILE_TO_STD_TABLE: object,
    NORMAL_CDF_TO_SIGMA_TABLE: object,
    K: Tensor,
    P: Tensor,
    BATCH_SIZE: int,
    VOCAB_SIZE: int,
    MASK_VALUE: float,
    BLOCK_SIZE: object = None,
    BLOCK_SIZE_TRUNC: object = None,
    TOPK_ENABLED: bool | None = None,
    TOPP_ENABLED: bool | None = None,
    SPLIT_COVERS_PONLY: bool | None = None,
) -> None: ...
def topk_topp_nosplit_kernel(
    LOGITS: Tensor,
    LOGITS_STRIDE_0: int,
    BUFFER: object,
    PERCENTILE_TO_STD_TABLE: object,
    NORMAL_CDF_TO_SIGMA_TABLE: object,
    K: Tensor,
    P: Tensor,
    BATCH_SIZE: int,
    VOCAB_SIZE: int,
    MASK_VALUE: float,
    BLOCK_SIZE: object = None,
    BLOCK_SIZE_TRUNC: object = None,
    TOPK_ENABLED: bool | None = None,
    TOPP_ENABLED: bool | None = None,
) -> None: ...
