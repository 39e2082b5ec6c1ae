"""Stub of the compiled ``fastdispatch._fastlaunch`` (see ``_fastlaunch_py`` for the twin)."""

from typing import Any

__all__ = ["FastLaunch", "direct_tensor_reads"]

class FastLaunch:
    kernel: Any
    fn: Any
    arg_names: Any
    constexprs: Any
    params: Any
    state: Any
    passthrough: str | None
    def __init__(self, kernel: Any) -> None: ...
    def __getitem__(self, grid: Any) -> Any: ...
    def __getattr__(self, name: str) -> Any: ...
    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any: ...
    def _derive_key(self, device: Any, vals: Any, opts: Any) -> Any: ...

def direct_tensor_reads(enabled: bool = True) -> bool: ...
