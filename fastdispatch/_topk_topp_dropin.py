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

#: What the drop-in does with each parameter of the vLLM function it replaces (the signatures per
#: release: ``fastdispatch.vllm._sampler.SAMPLING_RELEASES``). ``kernel``: handed to
#: ``kernels_cpu.top_k_top_p``. ``hint``: read and ignored -- ``has_topp_only_rows`` (vLLM 0.33+)
#: says whether some row has top-p without an active top-k, so that vLLM's Triton path may skip its
#: split top-p kernels when none has. Stated truly (vLLM's contract for it) it never changes which
#: tokens are kept -- vLLM's PyTorch path, the CPU path, ignores it -- and the kernel masks every
#: row exactly, so ignoring it is vLLM's own CPU result. A parameter not listed here (a later
#: release's) is taken by signature: at its default the kernel runs, any other value goes to vLLM's
#: own function. ``logits``, ``k``, ``p`` come first, positionally, in every release.
KNOWN_PARAMETERS = {
    "logits": "kernel",
    "k": "kernel",
    "p": "kernel",
    "mask_value": "kernel",  # the Triton entry, apply_top_k_top_p_triton
    "has_topp_only_rows": "hint",  # 0.33+
}


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
    ``(None, why)`` when its signature is not one it can take.

    The drop-in is generated with ``target``'s exact signature (names, kinds, vLLM's own default
    objects), so vLLM calls it positionally and by keyword as it calls its own function:
    ``(logits, k, p)`` (0.27-0.32), ``(logits, k, p, has_topp_only_rows=True)`` (0.33, 0.34),
    the Triton entry's ``mask_value``, and any later parameter that has a default. It runs the
    kernel on what the kernel takes and hands everything else to ``target`` itself, so no call
    vLLM makes is refused: other layouts or devices, and a later parameter passed with anything
    but its default (compared by identity). ``has_topp_only_rows`` is ignored (see
    :data:`KNOWN_PARAMETERS`: a hint that cannot change the result). Not taken: a signature
    that does not open with ``logits, k, p``, or that requires a parameter we do not know.
    """
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError) as exc:
        return None, f"its signature cannot be read ({exc})"
    names = tuple(p.name for p in params)
    odd = [
        p.name
        for p in params
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        or (p.name not in KNOWN_PARAMETERS and p.default is p.empty)
    ]
    if (
        names[:3] != ("logits", "k", "p")
        or odd
        or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params[:3])
    ):
        return None, f"unknown signature {inspect.signature(target)}"
    return _generate(target, params), None


def _generate(target: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    """The drop-in's source, compiled: ``target``'s parameter list, then the kernel's call when
    it applies, else ``target``'s call with every argument as received."""
    namespace: dict[str, Any] = {
        "__target": target,
        "__kernel": top_k_top_p,
        "__supported": supported,
    }
    parts: list[str] = []
    kind: Any = None
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and kind is not p.KEYWORD_ONLY:
            parts.append("*")
        if kind is p.POSITIONAL_ONLY and p.kind is not p.POSITIONAL_ONLY:
            parts.append("/")
        kind = p.kind
        if p.default is p.empty:
            parts.append(p.name)
        else:
            namespace[f"__d{i}"] = p.default
            parts.append(f"{p.name}=__d{i}")
    if kind is inspect.Parameter.POSITIONAL_ONLY:
        parts.append("/")
    at_default = [
        f" and {p.name} is __d{i}" for i, p in enumerate(params) if p.name not in KNOWN_PARAMETERS
    ]
    with_mask = any(p.name == "mask_value" for p in params)
    kernel_args = "logits, k, p, mask_value" if with_mask else "logits, k, p"
    passed = ", ".join(
        p.name if p.kind is p.POSITIONAL_ONLY else f"{p.name}={p.name}" for p in params
    )
    source = (
        f"def apply_top_k_top_p_cpu({', '.join(parts)}):\n"
        "    if k is None and p is None:\n"
        "        return logits\n"
        f"    if __supported(logits, k, p){''.join(at_default)}:\n"
        f"        __kernel({kernel_args})\n"
        "        return logits\n"
        f"    return __target({passed})\n"
    )
    exec(compile(source, f"<fastdispatch drop-in of {target.__name__}>", "exec"), namespace)
    adapter: Any = namespace["apply_top_k_top_p_cpu"]
    adapter.__doc__ = (
        f"``kernels_cpu.top_k_top_p`` with the signature of ``{target.__module__}."
        f"{target.__name__}`` (read at install); what the kernel does not take goes to it."
    )
    adapter.__module__ = __name__
    adapter._fastdispatch_target = target
    return adapter
