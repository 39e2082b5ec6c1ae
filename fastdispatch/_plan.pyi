"""Types of ``fastdispatch._plan`` (the binding plan and the per-site plan cache): defined once, in
``_core.pyi``, the contract of both backends; this module re-exports them.
"""

from ._core import LaunchBindingPlan as LaunchBindingPlan
from ._core import PlanCache as PlanCache
from ._core import launch_binding_plan as launch_binding_plan
from ._core import prepare_launch_kwargs as prepare_launch_kwargs

__all__ = ["LaunchBindingPlan", "PlanCache", "launch_binding_plan", "prepare_launch_kwargs"]
