"""Triton, or a stand-in for it, and how our kernels will run in this process.

The kernel modules in :mod:`fastdispatch.ops.triton_kernels` import ``triton``/``tl`` from here so
they import everywhere: with Triton installed they are real ``@triton.jit`` kernels; without it
``jit`` returns the plain Python function (as vLLM's placeholder does), so the kernel still has a
qualified name and a signature that :func:`fastdispatch.register_kernels` can resolve and bind.

Three run modes follow from the environment at import time:

``"native"``
    Triton is installed and one of its GPU drivers is active: launch the Triton kernels.
``"interpret"``
    ``TRITON_INTERPRET=1`` was set before the kernels were decorated: Triton runs them on CPU
    tensors through its interpreter (slow; for differential tests).
``"cpu"``
    anything else (Triton absent, or installed with no usable driver): the kernels cannot run, so
    importing :mod:`fastdispatch.ops` registers the ``kernels_cpu`` implementations over them.
"""

import os
import types
from typing import Optional

__all__ = ["HAS_TRITON", "INTERPRET", "triton", "tl", "active_driver", "run_mode"]


def _cdiv(a, b):
    return -(-a // b)


def _passthrough(*args, **kwargs):
    """``@jit`` / ``@jit(...)`` that returns the function unchanged."""
    if args and callable(args[0]) and len(args) == 1 and not kwargs:
        return args[0]
    return lambda fn: fn


class _ConstexprPlaceholder:
    """Stands for ``tl.constexpr`` in annotations when Triton is absent."""

    def __init__(self, value=None):
        self.value = value


def _placeholder_modules():
    tl_mod = types.ModuleType("triton.language")
    tl_mod.constexpr = _ConstexprPlaceholder
    for name in ("int1", "int8", "int32", "int64", "uint8", "float32", "float64"):
        setattr(tl_mod, name, None)
    tl_mod.pointer_type = lambda element_ty: None
    tr_mod = types.ModuleType("triton")
    tr_mod.__version__ = "0"
    tr_mod.jit = _passthrough
    tr_mod.cdiv = _cdiv
    tr_mod.language = tl_mod
    return tr_mod, tl_mod


try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # Triton not installed (or its import is blocked on purpose)
    triton, tl = _placeholder_modules()
    HAS_TRITON = False

# Read as Triton reads it (its knobs accept these spellings), so we agree with the decorator.
INTERPRET = HAS_TRITON and os.environ.get("TRITON_INTERPRET", "0").strip().lower() in (
    "1",
    "true",
    "yes",
    "on",
    "y",
)


def active_driver() -> Optional[str]:
    """Name of the one active Triton GPU backend (``"nvidia"``, ``"amd"``), or ``None``.

    Mirrors Triton's own driver selection: the ``cpu`` backend, where present, reports itself
    active unconditionally and is never chosen implicitly, so it does not count. Any error while
    probing (a half-installed backend, a driver library that fails to load) means no driver.
    """
    if not HAS_TRITON:
        return None
    try:
        from triton.backends import backends
    except Exception:
        return None
    active = []
    for name, backend in backends.items():
        if name == "cpu":
            continue
        try:
            if backend.driver is not None and backend.driver.is_active():
                active.append(name)
        except Exception:
            continue
    return active[0] if len(active) == 1 else None


def run_mode() -> str:
    """``"native"``, ``"interpret"`` or ``"cpu"`` (see the module docstring)."""
    if not HAS_TRITON:
        return "cpu"
    if INTERPRET:
        return "interpret"
    return "native" if active_driver() is not None else "cpu"
