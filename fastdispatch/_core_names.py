"""The names the launch path exports, in ``_core.pyi``'s order: the compiled ``_core`` and the
pure-Python twin ``_core_py`` both take their ``__all__`` from here, so the two backends cannot
export different sets (``tests/test_typing.py`` checks this list against the stub's).
"""

NAMES = (
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
)
