"""Registration-time bind check: decide, once, how a launch reaches an implementation.

A Triton launch arrives as ``kernel[grid](**kwargs)`` keyed by the *kernel's* argument names. An
override implementation may use the same names (forward by name) or its own names in the kernel's
order (forward positionally, as vLLM's CPU shims do). vLLM decides this per launch and, when the
impl's parameters do not fit, binds silently wrong (a missing middle argument shifts every later
one) or fails only at the first launch. Here the decision is made when the override is built and
reduced to a :class:`BindLayout` -- a table that maps each kernel argument to one slot of the
impl's call -- so that

* an impl that cannot accept the launch is refused at ``register_kernels`` with a ``TypeError``
  naming the parameters, and
* a launch is table lookups and one vectorcall (the compiled backend reads the same table).

Both backends build their tables from this module, so they cannot disagree on binding.

An impl with a ``[grid]`` of its own (a grid-remapping launcher, vLLM 0.34's term) is not bound
here: it takes the launch over, and the override hands it the caller's grid (:func:`own_grid`).
What reaches the launcher its ``[grid]`` returns is decided here too (:func:`grid_launcher`).
"""

import functools
import inspect

from ._errors import positional_mismatch

__all__ = [
    "MISSING",
    "OMIT",
    "TRITON_LAUNCH_OPTIONS",
    "BindLayout",
    "bind_layout",
    "grid_launcher",
    "impl_arg_names",
    "kernel_arg_names",
    "kernel_defaults",
    "launch_options",
    "merge_positional",
    "own_grid",
    "unchecked_layout",
]


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name

    def __reduce__(self):
        return self._name


#: Slot default meaning "required": a launch that does not supply it is an error.
MISSING = _Sentinel("MISSING")
#: Slot default meaning "leave it out of the call" (only for impls whose signature is unknown:
#: trailing positional arguments that the launch omits are omitted from the call too).
OMIT = _Sentinel("OMIT")

#: Launch options a Triton kernel accepts besides its own arguments. They mean nothing to a CPU
#: implementation and are dropped (unless the kernel has an argument of that name), so a launch
#: written for the GPU (``kernel[grid](..., num_warps=4)``) also runs against an override.
TRITON_LAUNCH_OPTIONS = frozenset(
    {
        "num_warps",
        "num_stages",
        "num_ctas",
        "maxnreg",
        "enable_fp_fusion",
        "launch_cooperative_grid",
        "launch_pdl",
        "num_buffers_warp_spec",
        "num_consumer_groups",
        "reg_dec_producer",
        "reg_inc_consumer",
        "warmup",
    }
)

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def kernel_arg_names(kernel):
    """Argument names of a Triton kernel, an interpreted kernel, an override or a plain function.

    Same meaning as vLLM's ``_kernel_arg_names``: ``kernel.arg_names`` when present (Triton's
    ``JITFunction`` and ``InterpretedFunction``, and overrides, which mirror the original), else
    the signature of ``kernel.func`` or of the kernel itself (Triton absent: plain functions).
    """
    names = getattr(kernel, "arg_names", None)
    if names is None:
        fn = getattr(kernel, "func", kernel)
        names = tuple(inspect.signature(fn).parameters)
    return tuple(names)


def impl_arg_names(impl):
    """An implementation's argument names as vLLM 0.34 reads them: :func:`kernel_arg_names`
    (``arg_names``, else the signature of ``impl.func`` or of the impl), or ``()`` when it
    cannot be introspected (a launcher object, a C callable)."""
    try:
        return kernel_arg_names(impl)
    except (TypeError, ValueError):
        return ()


def _python_function(kernel):
    """The plain Python function under Triton wrappers (``Autotuner``/``Heuristics``/JIT
    ``.fn``)."""
    fn = kernel
    for _ in range(8):
        inner = getattr(fn, "fn", None)
        if inner is None or inner is fn:
            break
        fn = inner
    return fn


def kernel_defaults(kernel):
    """Defaults of the kernel's own arguments (``BLOCK: tl.constexpr = 128``), as a dict.

    Used to fill a kernel argument the launch omits when the impl has no default for it: the
    kernel's default is the contract the launch relied on. Unknown signatures give ``{}``.
    """
    stored = getattr(kernel, "_kernel_defaults", None)
    if isinstance(stored, dict):
        return dict(stored)
    try:
        sig = inspect.signature(_python_function(kernel))
    except (TypeError, ValueError):
        return {}
    return {
        name: p.default
        for name, p in sig.parameters.items()
        if p.default is not inspect.Parameter.empty and p.kind in (*_POSITIONAL, p.KEYWORD_ONLY)
    }


class BindLayout:
    """How kernel arguments map onto one call of the impl.

    The call is ``impl(*slots[:npos], **dict(zip(kwnames, slots[npos:])))``.

    ``arg_slots[i]``
        the slot that receives kernel argument ``i``;
    ``slot_args[s]``
        the kernel argument feeding slot ``s``, or ``-1`` for an impl parameter the kernel does
        not have (it always gets its default, so the call stays positional past it);
    ``slot_defaults[s]``
        the value used when the launch omits the argument: the impl's default, else the
        kernel's, else :data:`MISSING` (an error naming it) or :data:`OMIT`;
    ``forward_by_name``
        True when the impl takes every kernel argument under the kernel's name (vLLM's
        ``_forward_by_name`` is the special case of identical parameter tuples);
    ``checked``
        False when the impl's signature cannot be read (C builtins): arguments are forwarded
        positionally in kernel order, unchecked.
    """

    __slots__ = (
        "forward_by_name",
        "npos",
        "kwnames",
        "arg_slots",
        "slot_args",
        "slot_defaults",
        "checked",
    )

    def __init__(
        self, forward_by_name, npos, kwnames, arg_slots, slot_args, slot_defaults, checked
    ):
        self.forward_by_name = forward_by_name
        self.npos = npos
        self.kwnames = tuple(kwnames)
        self.arg_slots = tuple(arg_slots)
        self.slot_args = tuple(slot_args)
        self.slot_defaults = tuple(slot_defaults)
        self.checked = checked

    def __repr__(self):
        return (
            f"BindLayout(forward_by_name={self.forward_by_name}, npos={self.npos}, "
            f"kwnames={self.kwnames}, arg_slots={self.arg_slots}, checked={self.checked})"
        )


def unchecked_layout(arg_names, kdefaults=None):
    """The layout for an impl whose parameters are not known: every kernel argument
    positionally in kernel order; omitted trailing arguments stay omitted, others take the
    kernel's default."""
    kdefaults = dict(kdefaults or {})
    n = len(arg_names)
    defaults = [kdefaults.get(name, OMIT) for name in arg_names]
    return BindLayout(False, n, (), range(n), range(n), defaults, False)


def _declared_layout(arg_names, declared, kdefaults, what):
    """The layout for an impl whose signature cannot be read but which may declare its argument
    names (``arg_names``, or a readable ``func``: vLLM 0.34 reads them so). Its defaults are
    unknown, so the launch is positional in kernel order; the names only check it: the impl
    must take as many, and none may be the name of a different kernel argument."""
    layout = unchecked_layout(arg_names, kdefaults)
    if not declared:
        return layout
    declared = tuple(declared)
    if declared == tuple(arg_names):
        layout.forward_by_name = True
        return layout
    if len(declared) < len(arg_names):
        _refuse(
            what,
            f"the impl declares {len(declared)} argument(s) ({_names(declared)}) but the "
            f"kernel passes {len(arg_names)} ({_names(arg_names)})",
        )
    kernel_set = set(arg_names)
    clashes = [
        f"impl argument {name!r} would receive kernel argument {arg_names[j]!r}"
        for j, name in enumerate(declared[: len(arg_names)])
        if name in kernel_set and name != arg_names[j]
    ]
    if clashes:
        _refuse(what, "positional forwarding would bind by a different name: " + "; ".join(clashes))
    return layout


def _refuse(what, problem):
    raise TypeError(f"cannot bind launches of {what}: {problem}")


def _names(params):
    return ", ".join(repr(p) for p in params)


def bind_layout(arg_names, impl, kdefaults=None, what="kernel"):
    """Check that ``impl`` can accept launches of a kernel with ``arg_names``; return its layout.

    Rules (each violation is a ``TypeError`` naming the parameters):

    * **by name** when every kernel argument is a named parameter of the impl: each goes to the
      parameter of that name (positional slot or keyword), whatever the order;
    * otherwise **positionally** in kernel order, except that a kernel argument matching a
      keyword-only parameter goes by keyword. The impl must take enough positional parameters
      (or ``*args``), and none of its positional parameters may carry the name of a *different*
      kernel argument (that would bind a permutation silently wrong);
    * in both modes the impl may not require parameters the kernel does not have, and may not
      have keyword-only parameters that are not kernel arguments (no launch can reach them).
    """
    arg_names = tuple(arg_names)
    kdefaults = dict(kdefaults or {})
    n = len(arg_names)
    if len(set(arg_names)) != n:
        _refuse(what, f"duplicate kernel argument names {arg_names}")
    try:
        sig = inspect.signature(impl)
    except (TypeError, ValueError):
        # No readable signature (a C builtin such as a torch op, a launcher object): forward
        # positionally in kernel order; omitted trailing arguments stay omitted, others take
        # the kernel's default -- checked against the names it declares, if any.
        return _declared_layout(arg_names, impl_arg_names(impl), kdefaults, what)

    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    kwonly = [p for p in params if p.kind is p.KEYWORD_ONLY]
    has_varpos = any(p.kind is p.VAR_POSITIONAL for p in params)
    arg_set = set(arg_names)
    empty = inspect.Parameter.empty

    stray_kwonly = [p.name for p in kwonly if p.name not in arg_set]
    if stray_kwonly:
        _refuse(
            what,
            f"keyword-only parameter(s) {_names(stray_kwonly)} of the impl are not "
            f"kernel arguments {arg_names}, so no launch can pass them",
        )

    named = {p.name: p for p in positional + kwonly}
    by_name = all(name in named for name in arg_names)

    def default_for(param, kernel_name):
        if param is not None and param.default is not empty:
            return param.default
        if kernel_name is not None and kernel_name in kdefaults:
            return kdefaults[kernel_name]
        return MISSING

    if by_name:
        index_of = {p.name: i for i, p in enumerate(positional)}
        mapped_pos = [index_of[name] for name in arg_names if name in index_of]
        npos = max(mapped_pos) + 1 if mapped_pos else 0
        kwnames = [name for name in arg_names if name not in index_of]
        slot_of = {}
        for name in arg_names:
            slot_of[name] = index_of[name] if name in index_of else npos + kwnames.index(name)
        required_extra = [
            p.name for p in positional if p.name not in arg_set and p.default is empty
        ]
        if required_extra:
            _refuse(
                what,
                f"the impl requires parameter(s) {_names(required_extra)} that the "
                f"kernel does not have (kernel arguments: {arg_names})",
            )
        nslots = npos + len(kwnames)
        slot_args = [-1] * nslots
        slot_defaults = [MISSING] * nslots
        for i, name in enumerate(arg_names):
            s = slot_of[name]
            slot_args[s] = i
            slot_defaults[s] = default_for(named[name], name)
        for s in range(npos):
            if slot_args[s] == -1:  # impl-only parameter between kernel arguments
                slot_defaults[s] = positional[s].default
        arg_slots = [slot_of[name] for name in arg_names]
        return BindLayout(True, npos, kwnames, arg_slots, slot_args, slot_defaults, True)

    kw_names = [
        name for name in arg_names if name in named and named[name].kind is named[name].KEYWORD_ONLY
    ]
    pos_args = [name for name in arg_names if name not in kw_names]
    m = len(pos_args)
    if len(positional) < m and not has_varpos:
        _refuse(
            what,
            f"the impl takes {len(positional)} positional parameter(s) "
            f"({_names(p.name for p in positional)}) but the kernel passes {m} "
            f"({_names(pos_args)})",
        )
    clashes = [
        f"impl parameter {p.name!r} would receive kernel argument {pos_args[j]!r}"
        for j, p in enumerate(positional[:m])
        if p.name in arg_set and p.name != pos_args[j]
    ]
    if clashes:
        _refuse(what, "positional forwarding would bind by a different name: " + "; ".join(clashes))
    required_extra = [p.name for p in positional[m:] if p.default is empty]
    if required_extra:
        _refuse(
            what,
            f"the impl requires parameter(s) {_names(required_extra)} that the kernel "
            f"does not have (kernel arguments: {arg_names})",
        )
    npos = m
    nslots = npos + len(kw_names)
    slot_args = [-1] * nslots
    slot_defaults = [MISSING] * nslots
    arg_slots = [0] * n
    for j, name in enumerate(pos_args):
        i = arg_names.index(name)
        arg_slots[i] = j
        slot_args[j] = i
        slot_defaults[j] = default_for(positional[j] if j < len(positional) else None, name)
    for k, name in enumerate(kw_names):
        i = arg_names.index(name)
        s = npos + k
        arg_slots[i] = s
        slot_args[s] = i
        slot_defaults[s] = default_for(named[name], name)
    return BindLayout(False, npos, kw_names, arg_slots, slot_args, slot_defaults, True)


def merge_positional(arg_names, args, kwargs, impl_name, kernel_name):
    """A launch with positional *and* keyword arguments (``override[grid](a, b, c=..)``) as one
    dict keyed by the kernel's names: the positional ones are the kernel's first arguments, in
    order, as in a Triton launch. The keyed launch then binds it (and drops launch options),
    so ``num_warps`` and the like never reach a plain impl. (A launch with positional
    arguments only passes straight through to the impl, as in vLLM.)"""
    if len(args) > len(arg_names):
        raise positional_mismatch(
            impl_name,
            kernel_name,
            f"{len(args)} positional launch arguments; the kernel takes {len(arg_names)}",
        )
    merged = dict(zip(arg_names, args))
    twice = [name for name in kwargs if name in merged]
    if twice:
        raise positional_mismatch(
            impl_name, kernel_name, f"launch arguments both by position and by name: {twice}"
        )
    merged.update(kwargs)
    return merged


# -- impls with a [grid] of their own ------------------------------------------------------------


def own_grid(impl):
    """The bound ``impl.__getitem__`` when the impl has a ``[grid]`` of its own, else None.

    vLLM 0.34's rule (``getattr(impl, "__getitem__", None)``): such an impl -- a grid-remapping
    launcher, or a CPU impl that needs the launch grid -- receives the caller's grid through
    ``override[grid]`` and launches itself; a plain function has no ``__getitem__``.
    """
    return getattr(impl, "__getitem__", None)


def launch_options(arg_names):
    """The Triton launch options that are not arguments of a kernel with ``arg_names`` (a kernel
    argument named like an option, e.g. a ``launch_pdl`` constexpr, is an argument)."""
    return TRITON_LAUNCH_OPTIONS - set(arg_names)


class OptionFilter:
    """What ``override[grid]`` returns for a ``[grid]`` launcher that cannot take every Triton
    launch option: the launch minus the options the launcher does not name."""

    __slots__ = ("launcher", "drop")

    def __init__(self, launcher, drop):
        self.launcher = launcher
        self.drop = drop

    def __call__(self, *args, **kwargs):
        if kwargs:
            for name in self.drop.intersection(kwargs):
                del kwargs[name]
        return self.launcher(*args, **kwargs)

    def __repr__(self):
        return f"<launch of {self.launcher!r} without {sorted(self.drop)}>"


def _launcher_key(launcher):
    """What decides a launcher's parameters: its code (a closure made per grid shares it), its
    function's code (a bound method), for a ``functools.partial`` its function's key and what
    it binds, or its type (a callable object)."""
    if type(launcher) is functools.partial:
        return (_launcher_key(launcher.func), len(launcher.args), tuple(launcher.keywords))
    code = getattr(launcher, "__code__", None)
    if code is None:
        func = getattr(launcher, "__func__", None)
        code = getattr(func, "__code__", None)
    return code if code is not None else type(launcher)


def _options_dropped(launcher, options):
    """The launch options ``launcher`` cannot take: none when it has ``**kwargs`` or its
    signature cannot be read (it is then handed the launch as written, as vLLM does)."""
    try:
        params = inspect.signature(launcher).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset()
    named = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
    return frozenset(options - named)


def grid_launcher(launcher, options, cache):
    """What ``override[grid]`` returns for an impl with its own ``[grid]``: the ``launcher``
    that ``impl[grid]`` returned, which takes the launch as a Triton launch would.

    The kernel's arguments reach it as the caller wrote them, positionally and/or by the
    kernel's names (the launcher mirrors the kernel's parameters, as vLLM requires). Triton
    launch ``options`` (``num_warps``, ...) reach it when it can take them -- a launcher over a
    Triton kernel (``**kwargs``) needs them for its own launch, and gets the very object
    ``impl[grid]`` returned, as in vLLM -- and are dropped when it names none of them, as for a
    plain impl: a CPU launcher written with the kernel's parameters only must not fail on a
    launch written for the GPU. ``cache`` (one dict per override) keeps the decision per
    launcher code, so it is made once, not per launch.
    """
    key = _launcher_key(launcher)
    drop = cache.get(key)
    if drop is None:
        drop = cache[key] = _options_dropped(launcher, options)
    if not drop:
        return launcher
    return OptionFilter(launcher, drop)
