"""The compiled launch path, as one namespace: the backend ``_backend`` picks by default.

The code lives in one module per concept -- ``_override`` (``KernelOverride`` and its launcher),
``_plan`` (the binding plan, the per-site plan cache), ``_owner`` (the launch owner and vLLM's
``launch``) and ``_vllm_owner`` (the ``__call__`` for vLLM's own owner classes) -- over the cold
code both backends share (``_bindcheck``, ``_planner``, ``_owner_setup``, ``_errors``). This
module only gathers them under the names of ``_core.pyi``, the contract that the pure-Python twin
``_core_py`` implements too. Importing it fails with ``ImportError`` when any extension is
missing, which is what makes ``_backend`` fall back to the twin.
"""

from ._bindcheck import kernel_arg_names as _kernel_arg_names
from ._errors import LaunchArgumentError
from ._override import KernelOverride, Launcher
from ._owner import LaunchOwner, kernel_dispatcher, launch_owner
from ._plan import LaunchBindingPlan, PlanCache, launch_binding_plan, prepare_launch_kwargs
from ._vllm_owner import owner_call_method

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
