"""Types of ``fastdispatch._owner`` (the launch owner and vLLM's ``launch``): defined once, in
``_core.pyi``, the contract of both backends; this module re-exports them.
"""

from ._core import LaunchOwner as LaunchOwner
from ._core import kernel_dispatcher as kernel_dispatcher
from ._core import launch_owner as launch_owner

__all__ = ["LaunchOwner", "kernel_dispatcher", "launch_owner"]
