"""Which of vLLM's dispatcher rules a registration follows: 0.34's, or 0.31-0.33's.

vLLM 0.34 changed what ``register_kernels`` does with two kinds of implementation:

* an implementation that is itself a Triton kernel (:func:`is_triton_kernel`) is installed
  raw, not wrapped in a ``KernelOverride``, so that kernels inlining it as a device function
  keep compiling and a launchable one runs natively;
* an implementation with a ``[grid]`` of its own receives the caller's grid through
  ``override[grid]`` (0.31-0.33 call it like any other impl, the grid ignored).

``fastdispatch.register_kernels`` follows 0.34 (:data:`V034`). ``fastdispatch.vllm.install``
reads the standing dispatcher module (:func:`dialect_of`) and registers vLLM's requests with
its rules, so a worker of 0.31-0.33 sees the behaviour of its own release.
"""

from typing import Any, NamedTuple

__all__ = ["V031", "V034", "Dialect", "dialect_of", "is_triton_kernel"]


class Dialect(NamedTuple):
    """The rules of one dispatcher generation."""

    #: The releases whose dispatcher has these rules.
    releases: str
    #: ``override[grid]`` hands the grid to an impl with its own ``[grid]``.
    hand_grid: bool
    #: An impl that is a Triton kernel is installed itself, not wrapped.
    raw_triton: bool


V034 = Dialect("0.34", hand_grid=True, raw_triton=True)
V031 = Dialect("0.31-0.33", hand_grid=False, raw_triton=False)


def is_triton_kernel(obj: Any) -> bool:
    """vLLM 0.34's ``_is_triton_kernel``: callable with Triton's JIT launch protocol
    (``__getitem__``, ``run``, ``warmup``, ``arg_names``) -- launchable kernels and device
    functions alike; plain callables and grid-remapping launchers are not."""
    return callable(obj) and all(
        hasattr(obj, name) for name in ("__getitem__", "run", "warmup", "arg_names")
    )


def dialect_of(dispatcher: Any) -> Dialect:
    """The rules of the dispatcher module ``dispatcher`` (vLLM's ``vllm.triton_utils.dispatcher``),
    read from what it defines, never from a version number: 0.34's module defines
    ``_is_triton_kernel`` and ``_rebind_impls``; 0.31-0.33's define neither."""
    names = vars(dispatcher)
    if "_is_triton_kernel" in names or "_rebind_impls" in names:
        return V034
    return V031
