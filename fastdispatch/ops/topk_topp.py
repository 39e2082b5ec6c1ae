"""Top-k / top-p masking of logits on CPU without sorting the vocabulary.

    from fastdispatch.ops.topk_topp import apply_top_k_top_p
    logits = apply_top_k_top_p(logits, k, p)      # masked in place, returned

vLLM's CPU path (``apply_top_k_top_p_pytorch``) sorts every row -- on a [80, 128256] batch
hundreds of milliseconds per step with top-p -- and its top-k-only path raises on a batch of zero
rows. ``kernels_cpu.top_k_top_p`` selects instead (see its module for the algorithm and the kept
set, ties included); this module is the vLLM-shaped entry: ``None`` disables a filter, zero rows
are a no-op, and what the kernel does not take (float64 logits, a CUDA tensor, logits whose
columns are not unit-stride, ``k``/``p`` of another dtype) goes to a fallback -- vLLM's own
function when installed through :mod:`fastdispatch.vllm`, else a sort-based reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kernels_cpu import top_k_top_p

from .._topk_topp_dropin import KNOWN_PARAMETERS, adapter_for, supported

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
    if supported(logits, k, p):
        top_k_top_p(logits, k, p, mask_value)
        return logits
    if fallback is not None:
        return fallback(logits, k, p)
    return _sorted_reference(logits, k, p, mask_value)
