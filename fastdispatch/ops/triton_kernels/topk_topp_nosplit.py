"""The 14-argument top-k/top-p kernel: vLLM 0.27-0.29's ``_topk_topp_kernel`` (no split top-p
kernels, so no ``SPLIT_COVERS_PONLY``).

The Triton twin of ``kernels_cpu.topk_topp_nosplit_kernel``, compared with it under the
interpreter. Kept out of :data:`QUALNAMES` (one kernel per contract there): no op launches it,
it exists to pin down the contract.
"""

from .._triton import tl, triton
from .topk_topp import _rows


@triton.jit(do_not_specialize=["BATCH_SIZE"])
def topk_topp_nosplit_kernel(
    LOGITS,
    LOGITS_STRIDE_0,
    BUFFER,
    PERCENTILE_TO_STD_TABLE,
    NORMAL_CDF_TO_SIGMA_TABLE,
    K,
    P,
    BATCH_SIZE,
    VOCAB_SIZE: tl.constexpr,
    MASK_VALUE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_SIZE_TRUNC: tl.constexpr,
    TOPK_ENABLED: tl.constexpr,
    TOPP_ENABLED: tl.constexpr,
):
    """vLLM 0.27-0.29's form (no ``SPLIT_COVERS_PONLY``): every row's top-k then top-p."""
    _rows(
        LOGITS,
        LOGITS_STRIDE_0,
        K,
        P,
        BATCH_SIZE,
        VOCAB_SIZE,
        MASK_VALUE,
        BLOCK_SIZE,
        TOPK_ENABLED,
        TOPP_ENABLED,
        False,
    )
