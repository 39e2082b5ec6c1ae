"""Types of the compiled launch path, ``fastdispatch._core``.

The pure-Python twin ``_core_py`` has the same names and signatures (``tests/test_typing.py``
checks the stub against both), so these types are the contract of either backend.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, Union

from typing_extensions import TypeAlias

__all__ = [
    "KernelOverride",
    "Launcher",
    "LaunchArgumentError",
    "LaunchBindingPlan",
    "LaunchOwner",
    "PlanCache",
    "kernel_dispatcher",
    "launch_binding_plan",
    "launch_owner",
    "owner_call_method",
    "prepare_launch_kwargs",
    "_kernel_arg_names",
]

#: What a dispatch function returns: ``(grid, launch_kwargs)`` or ``(grid, launch_kwargs,
#: outputs)``; ``grid=None`` skips the launch. A list of the same two or three items is accepted.
_LaunchSpec: TypeAlias = Union[
    tuple[Any, Mapping[str, Any]],
    tuple[Any, Mapping[str, Any], Any],
    list[Any],
]

def _kernel_arg_names(kernel: Any) -> tuple[str, ...]: ...

class LaunchArgumentError(TypeError, RuntimeError): ...

class KernelOverride:
    """Stands in for a Triton kernel and routes launches to ``impl``."""

    constexprs: Any
    func: Callable[..., Any]
    __name__: str
    __module__: str
    _forward_by_name: bool
    _kernel_defaults: dict[str, Any]
    _kernel_name: str
    def __init__(self, kernel: Any, impl: Any, *, hand_grid: bool = True) -> None: ...
    @property
    def arg_names(self) -> tuple[str, ...]: ...
    @property
    def _impl(self) -> Any: ...
    @property
    def _own_grid(self) -> Callable[[Any], Callable[..., Any]] | None: ...
    def __getitem__(self, grid: Any) -> Callable[..., Any]: ...
    def warmup(self, grid: Any = None, **kwargs: Any) -> Any: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __reduce__(self) -> NoReturn: ...
    def _launch_kwargs(self, kwargs: dict[str, Any] | None) -> Any: ...

class Launcher:
    """What ``override[grid]`` returns: one per override, reused by every launch."""

    @property
    def override(self) -> KernelOverride: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class LaunchBindingPlan:
    """How one owner's dispatch inputs and launch kwargs become the kernel's launch kwargs."""

    @property
    def arg_names(self) -> tuple[str, ...]: ...
    @property
    def input_names(self) -> tuple[str, ...]: ...
    @property
    def launch_names(self) -> tuple[str, ...]: ...
    @property
    def input_targets(self) -> tuple[tuple[int, str], ...]: ...
    @property
    def stride_targets(self) -> tuple[tuple[str, str, int], ...]: ...
    @property
    def input_fill(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def stride_fill(self) -> tuple[tuple[int, str | int, int], ...]: ...
    @property
    def generic(self) -> bool: ...
    def __init__(
        self,
        arg_names: tuple[str, ...],
        input_names: tuple[str, ...],
        launch_names: tuple[str, ...],
    ) -> None: ...

def launch_binding_plan(
    arg_names: Iterable[str], input_names: Iterable[str], launch_names: Iterable[str] = ()
) -> LaunchBindingPlan: ...

class PlanCache:
    """Remembers the last plan of one launch site, so a repeated launch skips hashing."""

    @property
    def plan(self) -> LaunchBindingPlan | None: ...
    @property
    def keys(self) -> tuple[str, ...] | None: ...
    def __init__(self) -> None: ...
    def lookup(
        self,
        arg_names: tuple[str, ...],
        input_names: tuple[str, ...],
        launch_kwargs: dict[str, Any],
    ) -> LaunchBindingPlan: ...

def prepare_launch_kwargs(
    arg_names: Iterable[str],
    input_names: Iterable[str],
    input_values: Sequence[Any],
    launch_kwargs: dict[str, Any],
) -> dict[str, Any]: ...
def launch_owner(
    kernel: Any,
    arg_names: Sequence[str],
    spec: _LaunchSpec,
    input_names: Iterable[str],
    input_values: Sequence[Any],
    cache: PlanCache | None = None,
) -> Any: ...
def owner_call_method(
    fallback: Callable[..., Any],
    plan_caches: dict[int, tuple[Any, PlanCache]],
    *,
    kernel_attr: str,
    dispatch_attr: str,
    names_attr: str,
    defaults_attr: str,
    warming_attr: str,
) -> Callable[..., Any]: ...

class LaunchOwner:
    """Owns one kernel and the dispatch function that configures its launches.

    Unknown attributes are read from the kernel, hence ``__getattr__``.
    """

    kernel: Any
    _warmup_inputs_fn: Callable[..., Any] | None
    def __init__(
        self,
        kernel: Any,
        dispatch: Callable[..., _LaunchSpec],
        warmup_inputs: Callable[..., Any] | None = None,
    ) -> None: ...
    @property
    def _dispatch_fn(self) -> Callable[..., _LaunchSpec]: ...
    @property
    def _dispatch_arg_names(self) -> tuple[str, ...]: ...
    @property
    def _dispatch_defaults(self) -> dict[str, Any]: ...
    @property
    def _plan_cache(self) -> PlanCache: ...
    @property
    def _kernel_arg_names(self) -> tuple[str, ...]: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def launch(self, launch_spec: _LaunchSpec, inputs: Mapping[str, Any]) -> Any: ...
    def register_warmup(self, *args: Any, **kwargs: Any) -> None: ...
    def __getitem__(self, grid: Any) -> Any: ...
    def __getattr__(self, name: str) -> Any: ...

def kernel_dispatcher(
    *, kernel: Any, warmup_inputs: Callable[..., Any] | None = None
) -> Callable[[Callable[..., _LaunchSpec]], LaunchOwner]: ...
