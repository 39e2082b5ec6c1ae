"""Types of ``fastdispatch._vllm_owner`` (the ``__call__`` for vLLM's owner classes): defined once,
in ``_core.pyi``, the contract of both backends; this module re-exports them.
"""

from ._core import owner_call_method as owner_call_method

__all__ = ["owner_call_method"]
