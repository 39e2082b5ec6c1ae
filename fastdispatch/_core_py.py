"""Pure-Python twin of the compiled launch path: its hot path, readable.

The compiled path is three modules by concept -- ``_override.pyx`` (``KernelOverride`` and its
launcher), ``_plan.pyx`` (the binding plan and the per-site plan cache) and ``_owner.pyx`` (the
launch owner and vLLM's ``launch``), gathered as ``fastdispatch._core`` -- and this module
mirrors what runs on every launch there, step for step, same checks in the same order, so that a
reader can understand the compiled code from this one and the same tests run against both. It is
the backend when the extensions are missing or when ``FASTDISPATCH_PURE_PYTHON=1`` is set.

Cold code is not mirrored but shared by both backends: the bind check (``_bindcheck``), the
planner's rules, a plan cache's miss and the dict-building launch (``_planner``), the owner's
set-up (``_owner_setup``), every error a launch raises (``_errors``) and the launch functions'
docstrings (``_docs``). The twin of ``_vllm_owner.pyx`` -- the ``__call__`` that
``fastdispatch.vllm`` puts on vLLM's own owner classes -- is here too (:func:`owner_call_method`,
at the end): it launches through this module's ``launch_owner``.
"""

from ._bindcheck import (
    MISSING,
    OMIT,
    TRITON_LAUNCH_OPTIONS,
    bind_layout,
    grid_launcher,
    impl_arg_names,
    kernel_arg_names,
    kernel_defaults,
    launch_options,
    merge_positional,
    own_grid,
    unchecked_layout,
)
from ._core_names import NAMES
from ._docs import LAUNCH_OWNER, OWNER_CALL_METHOD
from ._errors import (  # noqa: F401 - LaunchArgumentError: re-exported (_core_names.NAMES)
    LaunchArgumentError,
    describe,
    input_count_mismatch,
    missing_arguments,
    unexpected_arguments,
)
from ._owner_setup import dispatch_signature, dispatcher_factory
from ._planner import (  # noqa: F401 - prepare_launch_kwargs: re-exported (_core_names.NAMES)
    launch_generic,
    plan_lookup,
    plan_rules,
    prepare_launch_kwargs,
    site_plan,
    unpack_spec,
)

__all__ = list(NAMES)

_kernel_arg_names = kernel_arg_names

# Marks a slot the launch has not filled yet (never a legal argument value).
_UNSET = object()


class KernelOverride:
    """Stands in for a Triton kernel and routes launches to ``impl``.

    Attributes mirror vLLM's: ``arg_names`` (the original kernel's), ``constexprs``, ``func`` (the
    impl), ``__name__`` (the impl's), ``__module__`` (the kernel's), ``_forward_by_name``.

    ``override[grid](**kwargs)`` -- a launch keyed by the kernel's argument names -- calls the impl
    with each argument in the slot the bind layout gives it (by name when the impl uses the
    kernel's names, else positionally in kernel order). ``grid`` is ignored, as in vLLM: a CPU impl
    loops over the index space itself. Triton launch options (``num_warps`` ...) are dropped.
    Positional launch arguments alone (``override[grid](*args)``) and ``override(*args,
    **kwargs)`` pass straight through to the impl; positional and keyword arguments together
    are bound as one keyed launch (the positional ones first, in kernel order).

    An impl with a ``[grid]`` of its own (vLLM 0.34: a grid-remapping launcher, or a CPU impl that
    needs the grid) takes the launch over: ``override[grid]`` is ``impl[grid]``, so the caller's
    grid reaches it, minus the launch options its launcher cannot take
    (``_bindcheck.grid_launcher``). ``hand_grid=False`` keeps vLLM 0.31-0.33's rule, where such
    an impl is called like any other and the grid is ignored. ``warmup(grid, **kwargs)``
    delegates compile-only warm-up to ``impl.warmup`` and is a no-op without one.
    """

    def __init__(self, kernel, impl, *, hand_grid=True):
        arg_names = kernel_arg_names(kernel)
        kdefaults = kernel_defaults(kernel)
        kernel_name = describe(kernel)
        grid = own_grid(impl) if hand_grid else None
        if grid is None:
            layout = bind_layout(
                arg_names, impl, kdefaults, f"kernel {kernel_name!r} by impl {describe(impl)!r}"
            )
            by_name = layout.forward_by_name
        else:
            # launches go to impl[grid]; only a direct call reaches the impl itself, unbound
            layout = unchecked_layout(arg_names, kdefaults)
            by_name = impl_arg_names(impl) == tuple(arg_names)
        self._impl = impl
        self.arg_names = arg_names
        self.constexprs = getattr(kernel, "constexprs", None)
        self.func = impl
        self.__name__ = getattr(impl, "__name__", "kernel_override")
        self.__module__ = getattr(kernel, "__module__", "")
        self._forward_by_name = by_name
        self._kernel_defaults = kdefaults
        self._kernel_name = kernel_name
        self._layout = layout
        self._own_grid = grid
        self._grid_options = launch_options(arg_names)
        self._grid_cache = {}
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
        own = self._own_grid
        if own is not None:
            return grid_launcher(own(grid), self._grid_options, self._grid_cache)
        return self._launcher

    def warmup(self, grid=None, **kwargs):
        """Compile-only warm-up (vLLM's ``kernel.warmup(grid, **kwargs)``), delegated to the
        impl's own ``warmup``; an impl without one has nothing to compile ahead."""
        warmup = getattr(self._impl, "warmup", None)
        if warmup is None:
            return None
        return warmup(grid=grid, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._impl(*args, **kwargs)

    def __repr__(self):
        return f"<KernelOverride {self._kernel_name} -> {describe(self._impl)}>"

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
            raise unexpected_arguments(self.__name__, self._kernel_name, unexpected, self.arg_names)
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
                raise missing_arguments(self.__name__, self._kernel_name, missing)
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
        override = self.override
        if args:
            if not kwargs:
                return override._impl(*args)
            kwargs = merge_positional(
                override.arg_names, args, kwargs, override.__name__, override._kernel_name
            )
        return override._launch(kwargs, None, None)

    def __repr__(self):
        return f"<launcher of {self.override!r}>"


# -- binding plan --------------------------------------------------------------------------------


class LaunchBindingPlan:
    """How one owner's dispatch inputs and launch kwargs become the kernel's launch kwargs.

    ``input_targets``: ``(input index, kernel argument)`` pairs; ``stride_targets``:
    ``(kernel argument, source argument, dim)`` triples -- the same fields as vLLM's plan. The
    remaining attributes are the same facts as indices into ``arg_names``, for the launch path
    (the rules: ``_planner.plan_rules``).
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
        self.arg_names = tuple(arg_names)
        self.input_names = tuple(input_names)
        self.launch_names = tuple(launch_names)
        (
            self.input_targets,
            self.stride_targets,
            self.input_fill,
            self.stride_fill,
            self.generic,
        ) = plan_rules(self.arg_names, self.input_names, self.launch_names)

    def __repr__(self):
        return (
            f"LaunchBindingPlan(input_targets={self.input_targets}, "
            f"stride_targets={self.stride_targets})"
        )


launch_binding_plan = plan_lookup(LaunchBindingPlan)


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
        plan, self.keys = site_plan(
            launch_binding_plan, LaunchBindingPlan, arg_names, input_names, launch_kwargs
        )
        self.plan = plan
        return plan


def launch_owner(kernel, arg_names, spec, input_names, input_values, cache=None):
    grid, launch_kwargs, outputs = unpack_spec(spec)
    if type(launch_kwargs) is not dict:
        launch_kwargs = dict(launch_kwargs)
    if type(arg_names) is not tuple:
        arg_names = tuple(arg_names)
    input_names = tuple(input_names)
    if type(input_values) is not tuple:
        input_values = tuple(input_values)
    if len(input_values) != len(input_names):
        raise input_count_mismatch(len(input_values), len(input_names))
    if cache is not None:
        plan = cache.lookup(arg_names, input_names, launch_kwargs)
    else:
        plan = launch_binding_plan(arg_names, input_names, tuple(launch_kwargs))
    if (
        type(kernel) is KernelOverride
        and not plan.generic
        and kernel._own_grid is None
        and (kernel.arg_names is arg_names or kernel.arg_names == arg_names)
    ):
        if grid is None:
            return outputs
        kernel._launch(launch_kwargs, plan, input_values)
        return outputs
    return launch_generic(kernel, arg_names, grid, launch_kwargs, plan, input_values, outputs)


launch_owner.__doc__ = LAUNCH_OWNER  # one text with the compiled function's


# -- launch owner ----------------------------------------------------------------------------------


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
        names, defaults = dispatch_signature(dispatch)
        self.kernel = kernel
        self._dispatch_fn = dispatch
        self._warmup_inputs_fn = warmup_inputs
        self._dispatch_arg_names = names
        self._dispatch_defaults = defaults
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
        return f"<LaunchOwner {describe(self._dispatch_fn)} kernel={self.__dict__.get('kernel')!r}>"


kernel_dispatcher = dispatcher_factory(LaunchOwner)


# -- vLLM's owner classes (the twin of _vllm_owner.pyx) -------------------------------------------
#
# vLLM's ``triton_kernel_dispatcher`` owners keep their launch in the instance ``__dict__`` under
# attribute names of vLLM's choosing; ``fastdispatch.vllm`` reads those names from the running
# release at install and hands them here.


def owner_call_method(
    fallback, plan_caches, *, kernel_attr, dispatch_attr, names_attr, defaults_attr, warming_attr
):
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


owner_call_method.__doc__ = OWNER_CALL_METHOD  # one text with the compiled function's
