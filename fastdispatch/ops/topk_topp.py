"""Top-k / top-p masking of logits on CPU without sorting the vocabulary.

    from fastdispatch.ops.topk_topp import apply_top_k_top_p
    logits = apply_top_k_top_p(logits, k, p)      # masked in place, returned

vLLM's CPU path (``apply_top_k_top_p_pytorch``) sorts every row -- on a [80, 128256] batch
hundreds of milliseconds per step with top-p -- and its top-k-only path raises on a batch of zero
rows. This module is the vLLM-shaped entry: ``None`` disables a filter, zero rows are a no-op.
It launches our Triton kernel ``topk_topp_kernel`` (vLLM's ``_topk_topp_kernel`` arguments,
exact kept set: see ``fastdispatch.ops.triton_kernels.topk_topp``) through a launch owner, as
vLLM's ``_topk_topp`` does -- natively on a GPU, and on CPU the ``kernels_cpu`` kernel registered
over it (selection, no sort; ``kernels_cpu._topk_topp``). What the kernel does not take (float64
logits, columns that are not unit-stride, ``k``/``p`` of another dtype, a device without Triton)
goes to a fallback: vLLM's own function when given, else a sort-based reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .. import kernel_dispatcher
from .._topk_topp_dropin import KNOWN_PARAMETERS, adapter_for, layout_ok, supported
from ._triton import HAS_TRITON
from .triton_kernels.topk_topp import topk_topp_kernel

__all__ = ["KNOWN_PARAMETERS", "adapter_for", "apply_top_k_top_p", "supported"]


def _sorted_reference(logits, k, p, mask_value=-math.inf):
    """Sort-based top-k then top-p (vLLM's PyTorch path), for inputs the kernel does not take."""
    if k is None and p is None:
        return logits
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        idx = (logits_sort.size(1) - k.to(torch.long).clamp(max=logits_sort.size(1))).unsqueeze(1)
        logits_sort.masked_fill_(logits_sort < logits_sort.gather(1, idx), mask_value)
    if p is not None:
        probs_sum = logits_sort.softmax(dim=-1).cumsum(dim=-1)
        mask = probs_sum <= 1 - p.to(probs_sum.dtype).unsqueeze(dim=1)
        mask[:, -1] = False
        logits_sort.masked_fill_(mask, mask_value)
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


_BLOCK = 1024


@kernel_dispatcher(kernel=topk_topp_kernel)
def _topk_topp(
    logits, buffer, percentile_to_std_table, normal_cdf_to_sigma_table, k, p, mask_value
):
    # vLLM's dispatch: logits -> LOGITS (and LOGITS_STRIDE_0), k -> K, p -> P; a disabled
    # filter's pointer is the logits (never read); one program per row
    B, V = logits.shape
    topk, topp = k is not None, p is not None
    return ((B,) if B else None), dict(
        K=k if topk else logits,
        P=p if topp else logits,
        BATCH_SIZE=B,
        VOCAB_SIZE=V,
        BLOCK_SIZE=_BLOCK,
        BLOCK_SIZE_TRUNC=_BLOCK // 2,
        TOPK_ENABLED=topk,
        TOPP_ENABLED=topp,
        SPLIT_COVERS_PONLY=False,
    )


def _launchable(logits, k, p):
    """Our kernel takes these: on CPU what ``kernels_cpu`` takes (it validates the values); on
    a CUDA device, where Triton runs, the same dtypes and layout, and -- unchecked by a GPU
    launch -- rows that do not overlap and one ``k``/``p`` value per row."""
    if logits.is_cpu:
        return supported(logits, k, p)
    if not (HAS_TRITON and logits.is_cuda and layout_ok(logits, k, p)):
        return False
    B, V = logits.shape
    return (B <= 1 or logits.stride(0) >= V) and all(t is None or t.numel() == B for t in (k, p))


def apply_top_k_top_p(
    logits: torch.Tensor,
    k: torch.Tensor | None,
    p: torch.Tensor | None,
    mask_value: float = -math.inf,
    fallback: Callable[..., torch.Tensor] | None = None,
) -> torch.Tensor:
    """Mask ``logits`` [B, V] in place to each row's top-k, then top-p, set and return it.

    ``k`` (int32/int64, values >= 1; ``k >= V`` keeps a row) and ``p`` (float, values in
    (0, 1]; ``1`` keeps a row) hold one value per row, or are None. Inputs the kernel does not
    take go to ``fallback(logits, k, p)`` (default: a sort-based reference).
    """
    if k is None and p is None:
        return logits
    if _launchable(logits, k, p):
        _topk_topp(logits, logits, logits, logits, k, p, float(mask_value))
        return logits
    if fallback is not None:
        return fallback(logits, k, p)
    return _sorted_reference(logits, k, p, mask_value)
