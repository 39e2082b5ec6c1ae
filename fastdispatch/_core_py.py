"""Pure-Python twin of ``fastdispatch._core``: the launch hot path, readable.

This module mirrors ``_core.pyx`` one-to-one -- same classes, same functions, same checks in the
same order, same messages -- so that a reader can understand the compiled module from this one
and the same tests run against both. It is the backend when the extension is missing or when
``FASTDISPATCH_PURE_PYTHON=1`` is set.

What lives here (the parts of vLLM's ``triton_utils.dispatcher`` and of its launch owner that run
on every launch):

* :class:`KernelOverride` -- stands in for a Triton kernel; ``override[grid](**kwargs)`` routes a
  launch keyed by the kernel's argument names to the impl, through a :class:`BindLayout` computed
  once at construction (``_bindcheck``);
* :func:`launch_binding_plan` -- which dispatch inputs bind to which kernel arguments
  (``x`` -> ``x``/``x_ptr``/``X``/``X_PTR``) and which ``*_stride[_d]`` arguments come from tensors;
* :func:`prepare_launch_kwargs` and :func:`launch_owner` -- vLLM's ``_prepare_launch_kwargs`` and
  ``launch`` as free functions, so an integration can reuse them on foreign launch owners;
* :class:`LaunchOwner` and :func:`kernel_dispatcher` -- our launch owner.
"""

import inspect

from ._bindcheck import (
    MISSING,
    OMIT,
    TRITON_LAUNCH_OPTIONS,
    bind_layout,
    kernel_arg_names,
    kernel_defaults,
)

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

_kernel_arg_names = kernel_arg_names

# Marks a slot the launch has not filled yet (never a legal argument value).
_UNSET = object()


class LaunchArgumentError(TypeError, RuntimeError):
    """A launch's arguments do not fit the kernel (unexpected or missing names).

    A ``TypeError`` (wrong call) and, for code written against vLLM -- whose override raises
    ``RuntimeError`` for unexpected launch arguments -- also a ``RuntimeError``.
    """


def _describe(kernel):
    return (
        getattr(kernel, "__qualname__", None) or getattr(kernel, "__name__", None) or repr(kernel)
    )


class KernelOverride:
    """Stands in for a Triton kernel and routes launches to ``impl``.

    Attributes mirror vLLM's: ``arg_names`` (the original kernel's), ``constexprs``, ``func`` (the
    impl), ``__name__`` (the impl's), ``__module__`` (the kernel's), ``_forward_by_name``.

    ``override[grid](**kwargs)`` -- a launch keyed by the kernel's argument names -- calls the impl
    with each argument in the slot the bind layout gives it (by name when the impl uses the
    kernel's names, else positionally in kernel order). ``grid`` is ignored, as in vLLM: a CPU impl
    loops over the index space itself. Triton launch options (``num_warps`` ...) are dropped.
    Positional launch arguments (``override[grid](*args)``) and ``override(*args, **kwargs)``
    pass straight through to the impl.
    """

    def __init__(self, kernel, impl):
        arg_names = kernel_arg_names(kernel)
        kdefaults = kernel_defaults(kernel)
        kernel_name = _describe(kernel)
        layout = bind_layout(
            arg_names, impl, kdefaults, f"kernel {kernel_name!r} by impl {_describe(impl)!r}"
        )
        self._impl = impl
        self.arg_names = arg_names
        self.constexprs = getattr(kernel, "constexprs", None)
        self.func = impl
        self.__name__ = getattr(impl, "__name__", "kernel_override")
        self.__module__ = getattr(kernel, "__module__", "")
        self._forward_by_name = layout.forward_by_name
        self._kernel_defaults = kdefaults
        self._kernel_name = kernel_name
        self._layout = layout
        self._init_tables(layout)
        self._launcher = Launcher(self)

    def _init_tables(self, layout):
        for name in self.arg_names:
            if not isinstance(name, str):
                raise TypeError(f"kernel argument names must be str, got {name!r}")
        # Name -> call slot; Triton launch options -> -2 (dropped). (The compiled module keeps
        # the same facts as C arrays and remembers, per dict position, the last key seen.)
        slot_of = {name: -2 for name in TRITON_LAUNCH_OPTIONS}
        slot_of.update((name, layout.arg_slots[i]) for i, name in enumerate(self.arg_names))
        self._slot_of = slot_of
        self._nargs = len(self.arg_names)
        self._npos = layout.npos
        self._nslots = layout.npos + len(layout.kwnames)
        self._kwnames = layout.kwnames
        self._arg_slots = layout.arg_slots
        self._slot_args = layout.slot_args
        self._slot_defaults = layout.slot_defaults
        # Slots no kernel argument feeds always hold the impl's default.
        self._template = tuple(
            _UNSET if a >= 0 else layout.slot_defaults[s] for s, a in enumerate(layout.slot_args)
        )

    def __getitem__(self, grid):
        return self._launcher

    def __call__(self, *args, **kwargs):
        return self._impl(*args, **kwargs)

    def __repr__(self):
        return f"<KernelOverride {self._kernel_name} -> {_describe(self._impl)}>"

    def __reduce__(self):
        raise TypeError("KernelOverride cannot be pickled: register the impl in each process")

    # -- launch machinery ------------------------------------------------------------------------

    def _launch_kwargs(self, kwargs):
        """``override[grid](**kwargs)``: route a launch keyed by kernel argument names."""
        return self._launch(kwargs, None, None)

    def _launch(self, kwargs, plan, input_values):
        """Fill the call slots from ``kwargs`` (and ``plan``'s inputs and strides), call the impl.

        ``plan``/``input_values`` are None for a plain ``override[grid](**kwargs)`` launch.
        """
        slots = list(self._template)
        filled = 0
        unexpected = None
        slot_of = self._slot_of
        if kwargs is not None:
            for key, value in kwargs.items():
                s = slot_of.get(key, -1) if isinstance(key, str) else -1
                if s >= 0:
                    if slots[s] is _UNSET:
                        filled += 1
                    slots[s] = value
                elif s == -1:
                    if unexpected is None:
                        unexpected = []
                    unexpected.append(key)
        if plan is not None:
            arg_slots = self._arg_slots
            for index, arg in plan.input_fill:
                s = arg_slots[arg]
                if slots[s] is _UNSET:
                    filled += 1
                slots[s] = input_values[index]
            for arg, src, dim in plan.stride_fill:
                source = kwargs[src] if isinstance(src, str) else input_values[-1 - src]
                s = arg_slots[arg]
                stride = source.stride(dim)
                if slots[s] is _UNSET:
                    filled += 1
                slots[s] = stride
        if unexpected is not None:
            raise LaunchArgumentError(
                f"Override for {self.__name__!r} (kernel {self._kernel_name!r}) received "
                f"unexpected launch arguments: {unexpected}; kernel arguments are "
                f"{list(self.arg_names)}"
            )
        npos = self._npos
        if filled != self._nargs:
            defaults = self._slot_defaults
            total = self._nslots
            if not self._kwnames:
                # Unknown impl signature: omitted trailing positional arguments stay omitted.
                while npos > 0 and slots[npos - 1] is _UNSET and defaults[npos - 1] is OMIT:
                    npos -= 1
                total = npos
            missing = None
            for s in range(total):
                if slots[s] is _UNSET:
                    d = defaults[s]
                    if d is MISSING or d is OMIT:
                        if missing is None:
                            missing = []
                        missing.append(self.arg_names[self._slot_args[s]])
                    else:
                        slots[s] = d
            if missing is not None:
                raise LaunchArgumentError(
                    f"Override for {self.__name__!r} (kernel {self._kernel_name!r}) is missing "
                    f"launch arguments without a default: {missing}"
                )
            del slots[total:]
        if self._kwnames:
            return self._impl(*slots[:npos], **dict(zip(self._kwnames, slots[npos:])))
        return self._impl(*slots)


class Launcher:
    """What ``override[grid]`` returns: one per override, reused by every launch."""

    __slots__ = ("override",)

    def __init__(self, override):
        self.override = override

    def __call__(self, *args, **kwargs):
        if args:
            return self.override._impl(*args, **kwargs)
        return self.override._launch(kwargs, None, None)

    def __repr__(self):
        return f"<launcher of {self.override!r}>"


# -- binding plan --------------------------------------------------------------------------------


class LaunchBindingPlan:
    """How one owner's dispatch inputs and launch kwargs become the kernel's launch kwargs.

    ``input_targets``: ``(input index, kernel argument)`` pairs; ``stride_targets``:
    ``(kernel argument, source argument, dim)`` triples -- the same fields as vLLM's plan. The
    remaining attributes are the same facts as indices into ``arg_names``, for the launch path.
    """

    __slots__ = (
        "arg_names",
        "input_names",
        "launch_names",
        "input_targets",
        "stride_targets",
        "input_fill",
        "stride_fill",
        "generic",
    )

    def __init__(self, arg_names, input_names, launch_names):
        self.arg_names = arg_names
        self.input_names = input_names
        self.launch_names = launch_names
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
                source = (
                    name
                    if name in bound
                    else (f"{name}_PTR" if sep == "_STRIDE" else f"{name}_ptr")
                )
                if source in bound:
                    stride_targets.append((target, source, int(dim or 0)))
        self.input_targets = tuple(input_targets)
        self.stride_targets = tuple(stride_targets)

        # Index form. Two inputs may reach one target; as with sequential assignment, the last wins.
        last = {}
        for index, target in input_targets:
            last[target] = index
        arg_index = {name: i for i, name in enumerate(arg_names)}
        self.input_fill = tuple(
            (index, arg_index[target]) for index, target in input_targets if last[target] == index
        )
        # Stride source: -1 - input index when bound from an input, else the launch kwarg name.
        stride_fill = []
        for target, source, dim in stride_targets:
            src = source if source in launch_set else -1 - last[source]
            stride_fill.append((arg_index[target], src, dim))
        self.stride_fill = tuple(stride_fill)
        # ``kernel``/``_runtime_launcher`` among the completed launch kwargs change how the launch
        # happens (vLLM pops them after binding): such launches take the generic path.
        completed = bound | {target for target, _, _ in stride_targets}
        self.generic = bool(
            completed & {"kernel", "_runtime_launcher", "_runtime_launcher_arg_count"}
        )

    def __repr__(self):
        return (
            f"LaunchBindingPlan(input_targets={self.input_targets}, "
            f"stride_targets={self.stride_targets})"
        )


_plans = {}


def launch_binding_plan(arg_names, input_names, launch_names=()):
    """The (cached) binding plan for a kernel, a dispatch signature and a set of launch kwargs.

    Dispatch input ``x`` binds to the kernel argument ``x``, ``x_ptr``, ``X`` or ``X_PTR`` (first
    that exists) unless the dispatch function passed that argument explicitly (explicit launch
    kwargs win). Unbound kernel arguments ``x_stride``/``x_stride_<d>`` (``X_STRIDE``...) take
    ``.stride(d)`` of the bound ``x`` (or ``x_ptr``). Same rules as vLLM's plan.
    """
    key = (tuple(arg_names), tuple(input_names), tuple(launch_names))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans.setdefault(key, LaunchBindingPlan(*key))
    return plan


class PlanCache:
    """Remembers the last plan of one launch site, so a repeated launch skips hashing.

    ``lookup`` returns the plan for ``(arg_names, input_names, keys of launch_kwargs)``; it hits
    when ``arg_names`` and ``input_names`` are the same objects and the launch kwargs have the
    same keys in the same order as last time.
    """

    __slots__ = ("plan", "keys")

    def __init__(self):
        self.plan = None
        self.keys = None

    def lookup(self, arg_names, input_names, launch_kwargs):
        plan = self.plan
        if (
            plan is not None
            and plan.arg_names is arg_names
            and plan.input_names is input_names
            and len(launch_kwargs) == len(self.keys)
        ):
            for key, cached in zip(launch_kwargs, self.keys):
                if key is not cached and key != cached:
                    break
            else:
                return plan
        keys = tuple(launch_kwargs)
        plan = launch_binding_plan(arg_names, input_names, keys)
        # Keep the caller's tuples so identity checks hit next time.
        if plan.arg_names is not arg_names or plan.input_names is not input_names:
            plan = LaunchBindingPlan(arg_names, input_names, keys)
        self.plan = plan
        self.keys = keys
        return plan


def prepare_launch_kwargs(arg_names, input_names, input_values, launch_kwargs):
    """vLLM's ``_prepare_launch_kwargs``: complete ``launch_kwargs`` in place and return it.

    ``arg_names``: the kernel's argument names; ``input_names``/``input_values``: the dispatch
    function's parameter names and the values of this call (defaults filled in);
    ``launch_kwargs``: the dict the dispatch function returned (pass a copy: it is mutated).
    Adds each bound input under its kernel argument name, then each ``*_stride[_d]`` argument as
    ``launch_kwargs[source].stride(d)``; explicit launch kwargs are never overwritten.
    """
    plan = launch_binding_plan(arg_names, input_names, tuple(launch_kwargs))
    for index, target in plan.input_targets:
        launch_kwargs[target] = input_values[index]
    for target, source, dim in plan.stride_targets:
        launch_kwargs[target] = launch_kwargs[source].stride(dim)
    return launch_kwargs


def _unpack_spec(spec):
    if type(spec) is tuple or type(spec) is list:
        if len(spec) == 3:
            return spec[0], spec[1], spec[2]
        if len(spec) == 2:
            return spec[0], spec[1], None
    raise TypeError(
        "a dispatch function must return (grid, launch_kwargs) or (grid, launch_kwargs, outputs), "
        f"got {type(spec).__name__}"
    )


def _launch_generic(kernel, arg_names, grid, launch_kwargs, input_names, input_values, outputs):
    kwargs = prepare_launch_kwargs(arg_names, input_names, input_values, dict(launch_kwargs))
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


def launch_owner(kernel, arg_names, spec, input_names, input_values, cache=None):
    """vLLM's ``launch``: run one launch described by a dispatch function's result.

    ``kernel``: what the owner launches (its ``.kernel``: a Triton kernel, a
    :class:`KernelOverride`, anything subscriptable by grid); ``arg_names``: its argument names
    (the owner's ``_kernel_arg_names``); ``spec``: ``(grid, launch_kwargs)`` or
    ``(grid, launch_kwargs, outputs)``; ``input_names``/``input_values``: the dispatch parameters
    and this call's values; ``cache``: an optional :class:`PlanCache` kept per launch site.

    Semantics (vLLM's): the launch kwargs are completed as by :func:`prepare_launch_kwargs`
    (on a copy -- ``spec``'s dict is not modified); a ``kernel`` entry replaces the kernel,
    ``_runtime_launcher``/``_runtime_launcher_arg_count`` entries route the launch through
    ``runtime_launcher(kernel, grid, *first_args, **rest)``; ``grid=None`` skips the launch;
    otherwise ``kernel[grid](**kwargs)`` -- or ``kernel(**kwargs)`` when the kernel is not
    subscriptable (a plain Python function standing in for a kernel when Triton is absent).
    Returns ``outputs`` (``None`` for a 2-tuple). When ``kernel`` is a :class:`KernelOverride`
    with these ``arg_names`` the launch goes to the impl directly from the plan, with the same
    result.
    """
    grid, launch_kwargs, outputs = _unpack_spec(spec)
    if type(launch_kwargs) is not dict:
        launch_kwargs = dict(launch_kwargs)
    if type(arg_names) is not tuple:
        arg_names = tuple(arg_names)
    input_names = tuple(input_names)
    if type(input_values) is not tuple:
        input_values = tuple(input_values)
    if len(input_values) != len(input_names):
        raise ValueError(
            f"{len(input_values)} dispatch input values for {len(input_names)} input names"
        )
    if cache is not None:
        plan = cache.lookup(arg_names, input_names, launch_kwargs)
    else:
        plan = launch_binding_plan(arg_names, input_names, tuple(launch_kwargs))
    if (
        type(kernel) is KernelOverride
        and not plan.generic
        and (kernel.arg_names is arg_names or kernel.arg_names == arg_names)
    ):
        if grid is None:
            return outputs
        kernel._launch(launch_kwargs, plan, input_values)
        return outputs
    return _launch_generic(
        kernel, arg_names, grid, launch_kwargs, input_names, input_values, outputs
    )


def owner_call_method(
    fallback, plan_caches, *, kernel_attr, dispatch_attr, names_attr, defaults_attr, warming_attr
):
    """A ``__call__`` for a foreign launch owner class that keeps its launch in its instance
    ``__dict__``: the kernel, a dispatch function, the dispatch function's parameter names (a
    tuple) and their defaults (a dict) -- stored under the given attribute names.

    Why: an owner's own ``__call__`` is the per-launch glue between the caller and
    :func:`launch_owner`; the compiled backend's version costs a fraction of a Python one. The
    function returned is a method (it binds like a ``def``), to be set as the class's ``__call__``.

    ``owner(*args, **kwargs)``: when the kernel is a :class:`KernelOverride`, there is a
    dispatch function and the owner's ``warming_attr`` is false, runs ``spec =
    dispatch(*args, **kwargs)``, completes the inputs (positional ``args``, then each remaining
    parameter from ``kwargs`` or the defaults) and launches
    ``launch_owner(kernel, kernel.arg_names, spec, names, values, cache)``, with one
    :class:`PlanCache` per owner kept in ``plan_caches`` (``id(owner)`` -> ``(owner, cache)``).
    Anything else is ``fallback(owner, *args, **kwargs)`` (the class's original ``__call__``).
    """
    if type(plan_caches) is not dict:
        raise TypeError(f"plan_caches must be a dict, got {type(plan_caches).__name__}")
    for attr in (kernel_attr, dispatch_attr, names_attr, defaults_attr, warming_attr):
        if not isinstance(attr, str):
            raise TypeError(f"attribute names must be str, got {attr!r}")

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        kernel = d.get(kernel_attr)
        dispatch = d.get(dispatch_attr)
        if type(kernel) is not KernelOverride or dispatch is None or getattr(self, warming_attr):
            return fallback(self, *args, **kwargs)
        spec = dispatch(*args, **kwargs)
        names = d[names_attr]
        if type(names) is not tuple:
            names = tuple(names)
        values = args
        nargs = len(args)
        if nargs != len(names):
            defaults = d[defaults_attr]
            values = args + tuple(
                [kwargs[name] if name in kwargs else defaults[name] for name in names[nargs:]]
            )
        key = id(self)
        hit = plan_caches.get(key)
        if type(hit) is not tuple or len(hit) != 2 or hit[0] is not self:
            hit = plan_caches[key] = (self, PlanCache())
        cache = hit[1]
        if not isinstance(cache, PlanCache):
            raise TypeError(f"Cannot convert {type(cache).__name__} to PlanCache")
        return launch_owner(kernel, kernel.arg_names, spec, names, values, cache)

    return __call__


# -- launch owner --------------------------------------------------------------------------------


class LaunchOwner:
    """Owns one kernel and the dispatch function that configures its launches.

    ``owner(*args, **kwargs)`` runs the dispatch function, binds its inputs to the kernel's
    arguments (:func:`launch_binding_plan`) and launches ``owner.kernel[grid](**kwargs)``.
    Like vLLM's launch owner, ``kernel`` lives in the instance ``__dict__`` and the kernel's
    argument names are cached there as ``_kernel_arg_names``: the rebinding pass swaps the one
    and drops the other. Unknown attributes are read from the kernel (vLLM's owners do the same),
    so an owner can stand where its kernel is expected (``owner.arg_names``, ``owner[grid]``).
    """

    def __init__(self, kernel, dispatch, warmup_inputs=None):
        parameters = tuple(inspect.signature(dispatch).parameters.values())
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            raise TypeError(
                f"dispatch function {_describe(dispatch)!r} must have explicit parameters "
                "(no *args/**kwargs): their names bind to kernel arguments"
            )
        self.kernel = kernel
        self._dispatch_fn = dispatch
        self._warmup_inputs_fn = warmup_inputs
        self._dispatch_arg_names = tuple(p.name for p in parameters)
        self._dispatch_defaults = {
            p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty
        }
        self._plan_cache = PlanCache()

    @property
    def _kernel_arg_names(self):
        names = self.__dict__.get("_kernel_arg_names")
        if names is None:
            names = kernel_arg_names(self.__dict__["kernel"])
            self.__dict__["_kernel_arg_names"] = names
        return names

    def __call__(self, *args, **kwargs):
        spec = self._dispatch_fn(*args, **kwargs)
        names = self._dispatch_arg_names
        values = args
        if len(args) != len(names):
            defaults = self._dispatch_defaults
            values = args + tuple(
                kwargs[name] if name in kwargs else defaults[name] for name in names[len(args) :]
            )
        d = self.__dict__
        arg_names = d.get("_kernel_arg_names")
        if arg_names is None:
            arg_names = self._kernel_arg_names
        return launch_owner(d["kernel"], arg_names, spec, names, values, self._plan_cache)

    def launch(self, launch_spec, inputs):
        """vLLM's ``launch(spec, inputs)``: launch a spec with a mapping of dispatch inputs."""
        return launch_owner(
            self.__dict__["kernel"],
            self._kernel_arg_names,
            launch_spec,
            tuple(inputs),
            tuple(inputs.values()),
        )

    def register_warmup(self, *args, **kwargs):
        """Accepted for compatibility with vLLM's owners; there is nothing to compile ahead."""
        return None

    def __getitem__(self, grid):
        return self.__dict__["kernel"][grid]

    def __getattr__(self, name):
        d = self.__dict__
        if name == "kernel" or "kernel" not in d:
            raise AttributeError(name)
        return getattr(d["kernel"], name)

    def __repr__(self):
        return (
            f"<LaunchOwner {_describe(self._dispatch_fn)} kernel={self.__dict__.get('kernel')!r}>"
        )


def kernel_dispatcher(*, kernel, warmup_inputs=None):
    """Decorate a dispatch function returning ``(grid, launch_kwargs[, outputs])`` into an owner.

    Keyword-compatible with vLLM's ``triton_kernel_dispatcher_with_warmup(kernel=...,
    warmup_inputs=...)``; ``warmup_inputs`` is kept but unused (there is no JIT to warm).
    """
    from functools import update_wrapper

    def decorate(dispatch):
        owner = LaunchOwner(kernel, dispatch, warmup_inputs)
        update_wrapper(owner, dispatch, updated=())
        return owner

    return decorate
