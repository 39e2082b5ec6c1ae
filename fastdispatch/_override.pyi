"""Types of ``fastdispatch._override`` (the override and its launcher): defined once, in
``_core.pyi``, the contract of both backends; this module re-exports them.
"""

from ._core import KernelOverride as KernelOverride
from ._core import Launcher as Launcher

__all__ = ["KernelOverride", "Launcher"]
