"""The binding planner's rules, written once for both backends.

vLLM's launch owner turns a dispatch function's inputs and launch kwargs into the kernel's
launch kwargs with a binding plan: dispatch input ``x`` binds to kernel argument ``x``, ``x_ptr``,
``X`` or ``X_PTR`` (the first that exists) unless the dispatch function passed that argument
itself, and an unbound ``x_stride[_d]`` (``X_STRIDE[_d]``) argument takes ``.stride(d)`` of the
bound ``x`` (or ``x_ptr``). Deciding that is cold work -- once per (kernel, dispatch signature,
launch keys) -- so it lives here, in plain Python; each backend's ``LaunchBindingPlan`` only
stores the answer in the form its launch path reads (C arrays in ``_plan.pyx``, tuples in the
twin). :func:`prepare_launch_kwargs` and :func:`launch_generic` -- the dict-building forms of a
launch, taken when the kernel is not one of our overrides -- are shared for the same reason.
"""

from typing import NamedTuple

from ._errors import bad_spec

__all__ = [
    "PlanRules",
    "launch_generic",
    "plan_lookup",
    "plan_rules",
    "prepare_launch_kwargs",
    "site_plan",
    "unpack_spec",
]

# Launch kwargs that change *how* a launch happens; vLLM pops them after binding.
_ROUTING = frozenset({"kernel", "_runtime_launcher", "_runtime_launcher_arg_count"})


class PlanRules(NamedTuple):
    """What a plan decides, by name and as indices into ``arg_names``.

    ``input_targets``: ``(input index, kernel argument)``; ``stride_targets``: ``(kernel argument,
    source argument, dim)`` -- vLLM's fields. ``input_fill``: ``(input index, argument index)``,
    the last input winning where two reach one argument; ``stride_fill``: ``(argument index,
    source, dim)`` with source the launch kwarg's name, or ``-1 - input index``; ``generic``: the
    completed launch kwargs route the launch (``kernel``, ``_runtime_launcher``...).
    """

    input_targets: tuple
    stride_targets: tuple
    input_fill: tuple
    stride_fill: tuple
    generic: bool


def plan_rules(arg_names, input_names, launch_names):
    """Apply the binding rules (see the module) to one kernel, signature and set of launch keys."""
    arg_set = set(arg_names)
    launch_set = set(launch_names)

    def target_for(name):
        pointer = f"{name}_ptr"
        for candidate in (name, pointer, name.upper(), pointer.upper()):
            if candidate in arg_set:
                return candidate
        return None

    input_targets = []
    for index, name in enumerate(input_names):
        target = target_for(name)
        if target is not None and target not in launch_set:
            input_targets.append((index, target))
    bound = launch_set | {target for _, target in input_targets}
    stride_targets = []
    for target in arg_names:
        if target in bound:
            continue
        name, sep, dim = target.rpartition("_stride")
        if not sep:
            name, sep, dim = target.rpartition("_STRIDE")
        dim = dim[1:] if dim.startswith("_") else dim
        if sep and (not dim or (dim.isascii() and dim.isdigit())):
            pointer = f"{name}_PTR" if sep == "_STRIDE" else f"{name}_ptr"
            source = name if name in bound else pointer
            if source in bound:
                stride_targets.append((target, source, int(dim or 0)))

    # Index form. Two inputs may reach one target; as with sequential assignment, the last wins.
    last = {}
    for index, target in input_targets:
        last[target] = index
    arg_index = {name: i for i, name in enumerate(arg_names)}
    input_fill = tuple(
        (index, arg_index[target]) for index, target in input_targets if last[target] == index
    )
    stride_fill = tuple(
        (arg_index[target], source if source in launch_set else -1 - last[source], dim)
        for target, source, dim in stride_targets
    )
    completed = bound | {target for target, _, _ in stride_targets}
    return PlanRules(
        tuple(input_targets),
        tuple(stride_targets),
        input_fill,
        stride_fill,
        bool(completed & _ROUTING),
    )


def plan_lookup(plan_cls):
    """``launch_binding_plan`` for one backend: a process-wide table of ``plan_cls`` objects."""
    plans = {}

    def launch_binding_plan(arg_names, input_names, launch_names=()):
        """The (cached) binding plan for a kernel, a dispatch signature and a set of launch kwargs.

        Dispatch input ``x`` binds to the kernel argument ``x``, ``x_ptr``, ``X`` or ``X_PTR``
        (first that exists) unless the dispatch function passed that argument explicitly
        (explicit launch kwargs win). Unbound kernel arguments ``x_stride``/``x_stride_<d>``
        (``X_STRIDE``...) take ``.stride(d)`` of the bound ``x`` (or ``x_ptr``). Same rules as
        vLLM's plan.
        """
        key = (tuple(arg_names), tuple(input_names), tuple(launch_names))
        plan = plans.get(key)
        if plan is None:
            plan = plans.setdefault(key, plan_cls(*key))
        return plan

    return launch_binding_plan


def site_plan(lookup, plan_cls, arg_names, input_names, launch_kwargs):
    """A launch site's plan after a ``PlanCache`` miss, and the launch keys the cache keeps.

    ``lookup``: the backend's ``launch_binding_plan``; ``plan_cls``: its ``LaunchBindingPlan``.
    The table's plan is shared by every site with equal names, but a cache hits only on the same
    ``arg_names``/``input_names`` objects (identity, no comparison): when the shared plan holds
    other tuples than this caller's, the site gets a plan of its own that keeps the caller's, so
    the next launch from here hits. Both backends' caches miss through this one function.
    """
    keys = tuple(launch_kwargs)
    plan = lookup(arg_names, input_names, keys)
    if plan.arg_names is not arg_names or plan.input_names is not input_names:
        plan = plan_cls(arg_names, input_names, keys)
    return plan, keys


_rules: dict[tuple, PlanRules] = {}


def prepare_launch_kwargs(arg_names, input_names, input_values, launch_kwargs):
    """vLLM's ``_prepare_launch_kwargs``: complete ``launch_kwargs`` in place and return it.

    ``arg_names``: the kernel's argument names; ``input_names``/``input_values``: the dispatch
    function's parameter names and the values of this call (defaults filled in);
    ``launch_kwargs``: the dict the dispatch function returned (pass a copy: it is mutated).
    Adds each bound input under its kernel argument name, then each ``*_stride[_d]`` argument as
    ``launch_kwargs[source].stride(d)``; explicit launch kwargs are never overwritten.
    """
    key = (tuple(arg_names), tuple(input_names), tuple(launch_kwargs))
    rules = _rules.get(key)
    if rules is None:
        rules = _rules.setdefault(key, plan_rules(*key))
    return _complete(rules, input_values, launch_kwargs)


def _complete(plan, input_values, launch_kwargs):
    """Add ``plan``'s bound inputs, then its strides, to ``launch_kwargs`` (``plan``: a
    :class:`PlanRules` or either backend's ``LaunchBindingPlan``, which carry the same fields)."""
    for index, target in plan.input_targets:
        launch_kwargs[target] = input_values[index]
    for target, source, dim in plan.stride_targets:
        launch_kwargs[target] = launch_kwargs[source].stride(dim)
    return launch_kwargs


def unpack_spec(spec):
    """``(grid, launch_kwargs, outputs)`` of a dispatch function's 2- or 3-item result."""
    if type(spec) is tuple or type(spec) is list:
        if len(spec) == 3:
            return spec[0], spec[1], spec[2]
        if len(spec) == 2:
            return spec[0], spec[1], None
    raise bad_spec(spec)


def launch_generic(kernel, arg_names, grid, launch_kwargs, plan, input_values, outputs):
    """vLLM's ``launch`` with the launch kwargs as a dict: a kernel that is not our override
    (a Triton kernel, anything subscriptable by grid, a plain function) or a routed launch.
    ``plan``: the launch's binding plan, which the caller has already found for these launch
    keys (completing a copy of ``launch_kwargs`` with it is :func:`prepare_launch_kwargs`)."""
    kwargs = _complete(plan, input_values, dict(launch_kwargs))
    kernel = kwargs.pop("kernel", None) or kernel
    runtime_launcher = kwargs.pop("_runtime_launcher", None)
    runtime_launcher_arg_count = kwargs.pop("_runtime_launcher_arg_count", 0)
    if grid is None:
        return outputs
    if runtime_launcher is not None:
        regular_args = [kwargs.pop(name) for name in arg_names[:runtime_launcher_arg_count]]
        runtime_launcher(kernel, grid, *regular_args, **kwargs)
    elif hasattr(type(kernel), "__getitem__"):
        kernel[grid](**kwargs)
    else:
        # A plain function (Triton absent, no override): call it with the launch kwargs.
        kernel(**kwargs)
    return outputs
