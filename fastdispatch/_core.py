"""The compiled launch path, as one namespace: the backend ``_backend`` picks by default.

The code lives in one module per concept -- ``_override`` (``KernelOverride`` and its launcher),
``_plan`` (the binding plan, the per-site plan cache), ``_owner`` (the launch owner and vLLM's
``launch``) and ``_vllm_owner`` (the ``__call__`` for vLLM's own owner classes) -- over the cold
code both backends share (``_bindcheck``, ``_planner``, ``_owner_setup``, ``_errors``,
``_docs``). This
module only gathers them under the names of ``_core.pyi``, the contract that the pure-Python twin
``_core_py`` implements too. Importing it fails with ``ImportError`` when any extension is
missing, which is what makes ``_backend`` fall back to the twin.
"""

# re-exported: the names are _core_names.NAMES, which ruff cannot read from __all__
from ._bindcheck import kernel_arg_names as _kernel_arg_names  # noqa: F401
from ._core_names import NAMES
from ._errors import LaunchArgumentError  # noqa: F401
from ._override import KernelOverride, Launcher  # noqa: F401
from ._owner import LaunchOwner, kernel_dispatcher, launch_owner  # noqa: F401
from ._plan import (  # noqa: F401
    LaunchBindingPlan,
    PlanCache,
    launch_binding_plan,
    prepare_launch_kwargs,
)
from ._vllm_owner import owner_call_method  # noqa: F401

__all__ = list(NAMES)
