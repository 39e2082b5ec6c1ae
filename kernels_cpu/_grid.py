"""A CPU kernel that needs its launch grid, launched the way a Triton kernel is.

Most CPU kernels read every count they need from their arguments. Some of Model Runner V2's
kernels take a count only from the grid (``_post_update_kernel[(num_reqs,)]``: no argument says
how many requests there are, each program is one) or lay their outputs out per program (the
Gumbel kernel's per-vocabulary-block maxima, one per program of the grid's second axis). Their
``kernels_cpu`` function takes the grid as the keyword-only ``grid``; :class:`GridLauncher` puts
it behind Triton's launch syntax, ``launcher[grid](*args, **kwargs)``, so that a
``KernelOverride`` hands it the caller's grid (vLLM 0.34's dispatcher semantics, and
fastdispatch's) and a module attribute rebound to it launches as the Triton kernel did.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["GridLauncher", "TRITON_LAUNCH_OPTIONS", "normalize_grid"]

#: Keywords a Triton launch takes besides the kernel's own arguments (``JITFunction.run``):
#: compile and launch options, meaningless to a CPU kernel and dropped by the launcher.
TRITON_LAUNCH_OPTIONS = frozenset(
    {
        "num_warps",
        "num_stages",
        "num_ctas",
        "num_buffers_warp_spec",
        "num_consumer_groups",
        "reg_dec_producer",
        "reg_inc_consumer",
        "maxnreg",
        "enable_fp_fusion",
        "launch_cooperative_grid",
        "launch_pdl",
        "waves_per_eu",
        "matrix_instr_nonkdim",
        "kpack",
        "debug",
        "sanitize_overflow",
        "warmup",
    }
)


def normalize_grid(grid: Any, meta: dict[str, Any]) -> tuple[int, ...]:
    """The grid as Triton reads it: a callable is called with the launch's arguments by name;
    the result is 1-3 ints (ints, numpy ints or 0-d integer tensors), missing axes 1."""
    if callable(grid):
        grid = grid(meta)
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"`grid`: expected 1 to 3 axes, got {len(grid)}")
    try:
        axes = tuple(operator.index(g) for g in grid)
    except TypeError:
        raise TypeError(
            f"`grid`: expected integers, got {tuple(type(g).__name__ for g in grid)}"
        ) from None
    if any(g < 0 for g in axes):
        raise ValueError(f"`grid`: expected non-negative axes, got {axes}")
    return axes + (1,) * (3 - len(axes))


class GridLauncher:
    """``launcher[grid](*args, **kwargs)`` -> ``fn(*args, **kwargs, grid=(g0, g1, g2))``.

    ``fn``'s positional parameters are the Triton kernel's arguments in order (its
    ``arg_names``); Triton's launch options (:data:`TRITON_LAUNCH_OPTIONS`) are dropped; any
    other keyword is refused naming it, as Triton refuses it. Calling the launcher without a
    grid is refused: the kernel cannot know how many programs were meant.
    """

    __slots__ = ("fn", "arg_names", "__wrapped__", "__name__", "__qualname__", "__dict__")

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__wrapped__ = fn
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__doc__ = fn.__doc__
        params = inspect.signature(fn).parameters.values()
        self.arg_names = tuple(
            p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        fn, names = self.fn, self.arg_names

        def launch(*args: Any, **kwargs: Any) -> Any:
            for key in [k for k in kwargs if k not in names]:
                if key not in TRITON_LAUNCH_OPTIONS:
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {key!r}")
                del kwargs[key]
            meta = dict(zip(names, args))
            meta.update(kwargs)
            return fn(*args, **kwargs, grid=normalize_grid(grid, meta))

        return launch

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"`grid`: {self.__name__} takes its count from the launch grid; launch it as "
            f"{self.__name__}[grid](...)"
        )

    def __repr__(self) -> str:
        return f"GridLauncher({self.fn.__module__}.{self.__name__})"
