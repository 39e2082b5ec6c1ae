"""fastdispatch: a compiled dispatch runtime for Triton kernels and their CPU overrides.

    import fastdispatch
    fastdispatch.register_kernels({"vllm.v1.sample.rejection_sampler.expand_kernel": my_impl})
    assert not any(fastdispatch.verify().values())   # nothing still launches the original

A drop-in for vLLM's ``vllm.triton_utils.dispatcher`` (``register_kernels``, ``KernelOverride``,
``_registry``, ``_resolve_kernel``, ``_rebind_kernels``, ``_kernel_arg_names``, and 0.34's
``_rebind_impls`` and ``_is_triton_kernel``, with 0.34's rules) whose launch path
-- ``override[grid](**kwargs)`` and the launch owner's dispatch -> bind -> launch chain -- is
compiled (``BACKEND == "cython"``), with a pure-Python twin of identical behaviour
(``BACKEND == "python"``, forced by ``FASTDISPATCH_PURE_PYTHON=1``). Beyond vLLM: a
registration-time bind check, ``unregister_kernels``, scoped ``overrides``, ``verify`` and a
thread-safe registry.

Launch path pieces, public so integrations can reuse them on foreign launch owners:
``kernel_dispatcher`` / ``LaunchOwner`` (our launch owner), ``launch_binding_plan`` (which
dispatch inputs bind to which kernel arguments), ``prepare_launch_kwargs`` (vLLM's
``_prepare_launch_kwargs``) and ``launch_owner`` (vLLM's ``launch``: bind and launch one
dispatch result, straight into the impl when the kernel is a ``KernelOverride``), with a
``PlanCache`` per launch site.
"""

from typing import TYPE_CHECKING

from ._backend import BACKEND, fast_launch
from ._backend import core as _backend_core
from ._dialect import is_triton_kernel
from ._registration import (
    RegistryEntry,
    overrides,
    register_kernels,
    unregister_kernels,
    verify,
)

# vLLM's dispatcher module exposes these private names and callers import them from it: the
# drop-in re-exports them (the ``as`` form marks an explicit re-export).
from ._registration import _rebind_impls as _rebind_impls
from ._registration import _rebind_kernels as _rebind_kernels
from ._registration import _registry as _registry
from ._registration import _resolve_kernel as _resolve_kernel

if TYPE_CHECKING:
    # Both backends implement ``_core.pyi``: that stub is the public types' one definition.
    from ._core import (
        KernelOverride,
        LaunchArgumentError,
        LaunchBindingPlan,
        Launcher,
        LaunchOwner,
        PlanCache,
        _kernel_arg_names,
        kernel_dispatcher,
        launch_binding_plan,
        launch_owner,
        prepare_launch_kwargs,
    )
else:
    KernelOverride = _backend_core.KernelOverride
    Launcher = _backend_core.Launcher
    LaunchArgumentError = _backend_core.LaunchArgumentError
    LaunchBindingPlan = _backend_core.LaunchBindingPlan
    LaunchOwner = _backend_core.LaunchOwner
    PlanCache = _backend_core.PlanCache
    kernel_dispatcher = _backend_core.kernel_dispatcher
    launch_binding_plan = _backend_core.launch_binding_plan
    launch_owner = _backend_core.launch_owner
    prepare_launch_kwargs = _backend_core.prepare_launch_kwargs
    _kernel_arg_names = _backend_core._kernel_arg_names

# vLLM 0.34's name for its test of an impl that is itself a Triton kernel (installed raw).
_is_triton_kernel = is_triton_kernel

__version__: str = "0.1.0"

__all__ = [
    "BACKEND",
    "KernelOverride",
    "LaunchArgumentError",
    "LaunchBindingPlan",
    "LaunchOwner",
    "Launcher",
    "PlanCache",
    "RegistryEntry",
    "fast_launch",
    "kernel_dispatcher",
    "launch_binding_plan",
    "launch_owner",
    "overrides",
    "prepare_launch_kwargs",
    "register_kernels",
    "unregister_kernels",
    "verify",
]
