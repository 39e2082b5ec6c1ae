"""vLLM's ``apply_top_k_top_p`` replaced by ``kernels_cpu.top_k_top_p``: what the kernel takes,
and the drop-in made for the signature standing in vLLM (read at install by
:mod:`fastdispatch.vllm`). Kept out of :mod:`fastdispatch.ops` so that installing into a vLLM
worker does not import our Triton ops (whose import registers their own CPU overrides).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from kernels_cpu import top_k_top_p

__all__ = ["KNOWN_PARAMETERS", "adapter_for", "layout_ok", "supported"]

_LOGITS = (torch.float32, torch.float16, torch.bfloat16)
_K = (torch.int32, torch.int64)
_P = (torch.float32, torch.float64)

#: The parameter lists of the vLLM functions :func:`adapter_for` replaces (every release
#: 0.27-0.33 has the first; the Triton entry adds ``mask_value``).
KNOWN_PARAMETERS = (("logits", "k", "p"), ("logits", "k", "p", "mask_value"))


def layout_ok(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> bool:
    """The dtypes and layout the top-k/top-p kernels take, on any device: [B, V] fp32/fp16/bf16
    logits with unit-stride columns, contiguous int32/int64 ``k`` and float32/float64 ``p`` on
    the logits' device."""
    if not (isinstance(logits, torch.Tensor) and logits.dtype in _LOGITS):
        return False
    if logits.dim() != 2 or (logits.shape[1] > 1 and logits.stride(1) != 1):
        return False
    for t, dtypes in ((k, _K), (p, _P)):
        if t is not None and not (
            isinstance(t, torch.Tensor)
            and t.dtype in dtypes
            and t.device == logits.device
            and t.is_contiguous()
        ):
            return False
    return True


def supported(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> bool:
    """Whether ``kernels_cpu.top_k_top_p`` takes these arguments as they are (it validates the
    values and lengths itself)."""
    return isinstance(logits, torch.Tensor) and logits.is_cpu and layout_ok(logits, k, p)


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
    apply_top_k_top_p_cpu.__qualname__ = "apply_top_k_top_p_cpu"
    apply_top_k_top_p_cpu._fastdispatch_target = target  # type: ignore[attr-defined]
    return apply_top_k_top_p_cpu, None
