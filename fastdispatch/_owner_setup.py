"""A launch owner's set-up, written once for both backends.

What an owner learns from its dispatch function -- the parameter names that bind to kernel
arguments and their defaults -- is read once, when the owner is made; only the per-launch part
(``owner(*args)``) differs between the compiled owner and its twin.
"""

import inspect
from functools import update_wrapper

from ._errors import bad_dispatch_function

__all__ = ["dispatch_signature", "dispatcher_factory"]


def dispatch_signature(dispatch):
    """``(names, defaults)`` of a dispatch function: its parameter names in order (a tuple) and
    the defaults of those that have one (a dict). ``*args``/``**kwargs`` are refused: a
    parameter binds to a kernel argument by its name."""
    parameters = tuple(inspect.signature(dispatch).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        raise bad_dispatch_function(dispatch)
    names = tuple(p.name for p in parameters)
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    return names, defaults


def dispatcher_factory(owner_cls):
    """``kernel_dispatcher`` for one backend's owner class."""

    def kernel_dispatcher(*, kernel, warmup_inputs=None):
        """Decorate a dispatch function returning ``(grid, launch_kwargs[, outputs])`` into an
        owner.

        Keyword-compatible with vLLM's ``triton_kernel_dispatcher_with_warmup(kernel=...,
        warmup_inputs=...)``; ``warmup_inputs`` is kept but unused (there is no JIT to warm).
        """

        def decorate(dispatch):
            owner = owner_cls(kernel, dispatch, warmup_inputs)
            update_wrapper(owner, dispatch, updated=())
            return owner

        return decorate

    return kernel_dispatcher
