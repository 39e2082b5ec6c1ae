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

import inspect
import math
from collections.abc import Callable
from typing import Any

import torch

from kernels_cpu import top_k_top_p

__all__ = ["KNOWN_PARAMETERS", "adapter_for", "apply_top_k_top_p", "supported"]

_LOGITS = (torch.float32, torch.float16, torch.bfloat16)
_K = (torch.int32, torch.int64)
_P = (torch.float32, torch.float64)

#: The parameter lists of the vLLM functions :func:`adapter_for` replaces (every release
#: 0.27-0.33 has the first; the Triton entry adds ``mask_value``).
KNOWN_PARAMETERS = (("logits", "k", "p"), ("logits", "k", "p", "mask_value"))


def supported(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> bool:
    """Whether ``kernels_cpu.top_k_top_p`` takes these arguments as they are."""
    if not (isinstance(logits, torch.Tensor) and logits.dtype in _LOGITS and logits.is_cpu):
        return False
    if logits.dim() != 2 or (logits.shape[1] > 1 and logits.stride(1) != 1):
        return False
    for t, dtypes in ((k, _K), (p, _P)):
        if t is not None and not (
            isinstance(t, torch.Tensor) and t.dtype in dtypes and t.is_cpu and t.is_contiguous()
        ):
            return False
    return True


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


def adapter_for(target: Callable[..., Any]) -> tuple[Callable[..., Any] | None, str | None]:
    """A drop-in for vLLM's ``apply_top_k_top_p`` (``target``, read at install), or
    ``(None, why)`` when its parameters are not a list we know (:data:`KNOWN_PARAMETERS`).

    The drop-in takes the same parameters under the same names, runs the kernel on what it
    takes and hands everything else to ``target`` itself, so no call vLLM makes is refused.
    """
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError) as exc:
        return None, f"its signature cannot be read ({exc})"
    names = tuple(p.name for p in params)
    if names not in KNOWN_PARAMETERS or any(
        p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
    ):
        return None, f"unknown signature {inspect.signature(target)}"

    if len(names) == 3:

        def apply_top_k_top_p_cpu(logits, k, p):
            if k is None and p is None:
                return logits
            if supported(logits, k, p):
                top_k_top_p(logits, k, p)
                return logits
            return target(logits, k, p)

    else:
        default = params[3].default

        def apply_top_k_top_p_cpu(logits, k, p, mask_value=default):  # type: ignore[misc]
            if k is None and p is None:
                return logits
            if supported(logits, k, p):
                top_k_top_p(logits, k, p, mask_value)
                return logits
            return target(logits, k, p, mask_value)

    apply_top_k_top_p_cpu.__doc__ = (
        f"``kernels_cpu.top_k_top_p`` with the signature of ``{target.__module__}."
        f"{target.__name__}`` (read at install); what the kernel does not take goes to it."
    )
    apply_top_k_top_p_cpu._fastdispatch_target = target  # type: ignore[attr-defined]
    return apply_top_k_top_p_cpu, None
