"""Registry of kernel overrides, name resolution and the rebinding pass over ``sys.modules``.

    import fastdispatch
    fastdispatch.register_kernels({"pkg.mod.my_kernel": my_cpu_impl})
    assert not any(fastdispatch.verify().values())

Same contract as vLLM's ``vllm.triton_utils.dispatcher`` (``register_kernels``, ``_registry``,
``_resolve_kernel``, ``_rebind_kernels`` and 0.34's name for it, ``_rebind_impls``), with 0.34's
rules (:mod:`fastdispatch._dialect`: an impl that is a Triton kernel is installed raw), plus a way
back (``unregister_kernels``), scoped overrides (``overrides``), a check that nothing still
launches the original (``verify``), and a lock: registry operations may race with each other and
with launches in other threads.

Why a raw impl's holders are recorded: a Triton-kernel impl is an object other modules hold too
(its own defining module, to begin with). Putting the original back must touch only the holders
this registration changed, never every reference to the impl, so they are remembered
(``RegistryEntry.rebound``) instead of found again by a scan.

Why a pass over ``sys.modules``: a kernel object is referenced from more places than its
defining attribute -- ``from mod import kernel`` copies in other modules, and launch owners that
keep it as ``.kernel`` (with cached argument names). Every one of them must launch the override,
or the override is silently dead for that call site.

Logged on the ``fastdispatch.registry`` logger: each registration and removal at DEBUG, an
overwrite of a registered name at WARNING (as vLLM's module logs it; it is also a
``RuntimeWarning``, see :mod:`fastdispatch._log`).
"""

import contextlib
import importlib
import logging
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

from ._bindcheck import own_grid
from ._dialect import V034, Dialect, is_triton_kernel
from ._log import get_logger, warn_both

if TYPE_CHECKING:
    # Either backend implements ``_core.pyi``; type-check against that contract.
    from . import _core as core
    from ._core import KernelOverride
else:
    from ._backend import core

logger = get_logger("registry")

__all__ = [
    "RegistryEntry",
    "forward_mode",
    "_registry",
    "_rebind_impls",
    "_rebind_kernels",
    "_resolve_kernel",
    "overrides",
    "register_kernels",
    "unregister_kernels",
    "verify",
]

_lock = threading.RLock()


class RegistryEntry(tuple):
    """``_registry`` value: the pair ``(original, impl)`` -- vLLM's meaning, so
    ``original, impl = _registry[name]`` works -- plus ``override`` (what stands in the holders:
    the installed :class:`KernelOverride`, or the impl itself when it is a Triton kernel
    installed raw), ``host``/``attr`` (where the name resolved), ``stored`` (the object the host
    itself stored: for a class attribute this may be a ``staticmethod`` around ``original``; it
    is what ``unregister_kernels`` puts back) and ``rebound`` (for a raw impl, the holders this
    registration changed; None for a wrapper, which only we hold)."""

    override: Any
    host: Any
    attr: str
    stored: Any
    rebound: Any

    def __new__(
        cls,
        original: Any,
        impl: Callable[..., Any],
        override: Any,
        host: Any,
        attr: str,
        stored: Any = None,
        rebound: Any = None,
    ) -> "RegistryEntry":
        self = tuple.__new__(cls, (original, impl))
        self.override = override
        self.host = host
        self.attr = attr
        self.stored = original if stored is None else stored
        self.rebound = rebound
        return self

    @property
    def original(self) -> Any:
        return self[0]

    @property
    def impl(self) -> Callable[..., Any]:
        return self[1]


#: Qualified kernel name -> :class:`RegistryEntry` ``(original, impl)``.
_registry: dict[str, RegistryEntry] = {}


def _import(module_name: str, kernel_name: str) -> types.ModuleType:
    try:
        importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"Kernel {kernel_name!r} not found for override: cannot import module "
            f"{module_name!r} ({exc})",
            name=exc.name,
        ) from exc
    return sys.modules[module_name]


def _resolve_kernel(name: str) -> tuple[Any, str]:
    """Return the ``(host, attribute)`` holding the kernel ``name``.

    ``pkg.mod.attr`` resolves to the module ``pkg.mod``; ``pkg.mod.Class.attr`` (a capitalised
    second-to-last part, vLLM's convention) to the class ``Class`` of ``pkg.mod``. A module that
    cannot be imported raises ``ModuleNotFoundError`` and a missing attribute ``ValueError``,
    both naming the kernel and what is missing.
    """
    if not isinstance(name, str) or name.count(".") < 1:
        raise ValueError(f"Kernel name {name!r} must be qualified: 'pkg.module.attr'")
    module_name, attr = name.rsplit(".", 1)
    parts = module_name.split(".")
    if len(parts) > 1 and parts[-1][:1].isupper():
        class_module = ".".join(parts[:-1])
        module = _import(class_module, name)
        cls = getattr(module, parts[-1], None)
        if cls is None:
            raise ValueError(
                f"Kernel {name!r} not found for override: module {class_module!r} has no "
                f"attribute {parts[-1]!r}"
            )
        if not hasattr(cls, attr):
            raise ValueError(
                f"Kernel {name!r} not found for override: {class_module}.{parts[-1]} has no "
                f"attribute {attr!r}"
            )
        return cls, attr
    module = _import(module_name, name)
    if hasattr(module, attr):
        return module, attr
    raise ValueError(
        f"Kernel {name!r} not found for override: module {module_name!r} has no attribute {attr!r}"
    )


# -- the scan ----------------------------------------------------------------------------------
# Everything below reads namespaces through the C-level descriptors of ``module``/``type``/
# ``object`` rather than attribute access: a module ``__getattr__``, a lazy module, a property
# named ``__dict__`` or a deprecated attribute (torch's FutureWarning) must never run, and foreign
# objects are compared by ``id`` only -- never hashed, never ``==``.

# (typeshed declares ``ModuleType.__dict__`` as an instance property; on the class it is the
# class namespace, whose ``"__dict__"`` entry is the getset descriptor read here.)
_MODULE_DICT: Any = types.ModuleType.__dict__["__dict__"]  # type: ignore[index]
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_SETATTR = type.__setattr__


def _namespaces():
    """Yield ``(module name, namespace dict, snapshot of its items)`` for every real module."""
    for mod_name, module in list(sys.modules.items()):
        if not issubclass(type(module), types.ModuleType):
            continue
        try:
            namespace = _MODULE_DICT.__get__(module)
            if type(namespace) is not dict:
                continue
            items = list(namespace.items())
        except Exception:
            continue
        yield mod_name, namespace, items


_CLASS = object()  # marker: the value is a class; read its class __dict__


def _dict_reader(tp):
    """How to read the namespace where an instance of ``tp`` would keep ``kernel``, or None.

    A class (``tp`` is a metaclass): its class ``__dict__`` (class-attribute kernels). An
    instance: its instance ``__dict__``, read through the C getset descriptor its type inherits.
    Types whose ``__dict__`` is anything else (a property, ``__slots__`` only) are skipped.
    """
    if issubclass(tp, type):
        return _CLASS
    try:
        for klass in _TYPE_MRO.__get__(tp):
            class_dict = _TYPE_DICT.__get__(klass)
            if "__dict__" in class_dict:
                descr = class_dict["__dict__"]
                return descr if type(descr) is types.GetSetDescriptorType else None
    except Exception:
        return None
    return None


def _scan(by_id):
    """Yield ``(kind, where, holder, container, key, value)`` for every reference to a watched
    object.

    ``by_id`` maps ``id(obj) -> (obj, ...)`` for the objects looked for. ``kind`` is ``"attr"``
    (``container[key]`` is a module attribute) or ``"owner"`` (``holder`` keeps it as ``kernel``
    in ``container``, its instance or class dict).
    """
    readers = {}  # id(type) -> (type, reader): one MRO walk per type, not per value
    for mod_name, namespace, items in _namespaces():
        for attr, value in items:
            if type(attr) is not str:  # not an attribute name; hashing it could run foreign code
                continue
            hit = by_id.get(id(value))
            if hit is not None and hit[0] is value:
                yield "attr", f"{mod_name}.{attr}", None, namespace, attr, value
                continue
            tp = type(value)
            entry = readers.get(id(tp))
            if entry is None or entry[0] is not tp:
                entry = readers[id(tp)] = (tp, _dict_reader(tp))
            reader = entry[1]
            if reader is None:
                continue
            try:
                d = _TYPE_DICT.__get__(value) if reader is _CLASS else reader.__get__(value)
                kernel = d.get("kernel") if d else None
            except Exception:
                continue
            if kernel is None:
                continue
            hit = by_id.get(id(kernel))
            if hit is not None and hit[0] is kernel and (reader is _CLASS or type(d) is dict):
                yield "owner", f"{mod_name}.{attr}.kernel", value, d, "kernel", kernel


def _put(kind, holder, container, key, value, replacement):
    """Point one holder found by :func:`_scan` (or recorded from it) at ``replacement``, if it
    still holds ``value``; True when it did."""
    if kind == "attr" or not issubclass(type(holder), type):
        if container.get(key) is not value:
            return False
        container[key] = replacement
        if kind == "owner":
            container.pop("_kernel_arg_names", None)
        return True
    if _TYPE_DICT.__get__(holder).get(key) is not value:
        return False
    _TYPE_SETATTR(holder, key, replacement)
    return True


def _rebind(pairs):
    """:func:`_rebind_kernels`, returning what it changed: ``(original, kind, holder,
    container, key)`` per holder."""
    by_id = {id(original): (original, replacement) for original, replacement in pairs}
    changed = []
    if not by_id:
        return changed
    for kind, _where, holder, container, key, value in list(_scan(by_id)):
        if _put(kind, holder, container, key, value, by_id[id(value)][1]):
            changed.append((value, kind, holder, container, key))
    return changed


def _rebind_kernels(overrides: Iterable[tuple[Any, Any]]) -> None:
    """Point every reference to each original kernel at its wrapper, in one pass.

    ``overrides`` is a list of ``(original, wrapper)`` pairs (vLLM's signature; any replacement
    works, which is how ``unregister_kernels`` restores originals). Module attributes that *are*
    an original are rebound; launch owners and classes whose own ``__dict__`` holds it as
    ``kernel`` get the wrapper, and instances drop their cached ``_kernel_arg_names`` so the
    launch binding re-derives it from the wrapper.
    """
    _rebind(overrides)


def _rebind_impls(replacements: Iterable[tuple[Any, Any]]) -> None:
    """vLLM 0.34's name for :func:`_rebind_kernels`: ``(original, replacement)`` pairs, where a
    replacement is a wrapper or a Triton-kernel impl installed raw -- the same pass."""
    _rebind(replacements)


def _set_host(host, attr, value):
    if issubclass(type(host), type):
        _TYPE_SETATTR(host, attr, value)
    else:
        setattr(host, attr, value)


def _install(mapping, warn, dialect=V034):
    """Resolve, bind-check and build every wrapper first, then rebind: all or nothing.

    ``dialect``: whose rules (:mod:`fastdispatch._dialect`) -- whether a Triton-kernel impl is
    installed raw and an impl with its own ``[grid]`` gets the grid. Overwrites are reported
    once the new overrides stand (a refused mapping changed nothing, so it overwrote nothing).
    """
    planned = []
    overwritten = []
    for name, impl in mapping.items():
        host, attr = _resolve_kernel(name)
        current = getattr(host, attr)
        # What the host stores itself (a class may keep ``staticmethod(kernel)``): restored as is.
        stored = current
        if issubclass(type(host), type):
            stored = _TYPE_DICT.__get__(host).get(attr, current)
        entry = _registry.get(name)
        original = current
        if entry is not None:
            if warn:
                overwritten.append(name)
            if current is entry.override:
                original = entry.original
                stored = entry.stored
        if not callable(impl) and own_grid(impl) is None:
            raise TypeError(
                f"override for kernel {name!r}: expected a callable or an object with a "
                f"[grid] of its own, got {impl!r}"
            )
        if dialect.raw_triton and is_triton_kernel(impl):
            wrapper = impl  # installed raw: it launches natively and inlines as a device function
        else:
            wrapper = core.KernelOverride(original, impl, hand_grid=dialect.hand_grid)
        planned.append((name, host, attr, current, original, impl, wrapper, stored))
    pairs = []
    for name, _host, _attr, current, original, _impl, wrapper, _stored in planned:
        entry = _registry.get(name)
        if entry is not None and entry.rebound is not None and current is entry.override:
            # a raw impl stands: move the holders it was put in, not every reference to it
            for _value, kind, holder, container, key in entry.rebound:
                _put(kind, holder, container, key, current, wrapper)
        else:
            pairs.append((current, wrapper))
        if original is not current:
            pairs.append((original, wrapper))
    # Rebind every other holder before the defining attributes: same order as vLLM.
    changed = _rebind(pairs)
    for name, host, attr, current, original, impl, wrapper, stored in planned:
        rebound = None
        if wrapper is impl:
            rebound = [c for c in changed if c[0] is original or c[0] is current]
            previous = _registry.get(name)
            if previous is not None and previous.rebound is not None:
                rebound += previous.rebound
        _set_host(host, attr, wrapper)
        _registry[name] = RegistryEntry(original, impl, wrapper, host, attr, stored, rebound)
    for name in overwritten:
        warn_both(logger, f"Kernel {name} is already registered. Overwriting.", stacklevel=3)
    if logger.isEnabledFor(logging.DEBUG):
        for name, _host, _attr, _current, _original, impl, wrapper, _stored in planned:
            logger.debug(
                "Registered kernel override %s -> %s (%s)",
                name,
                _describe(impl),
                forward_mode(wrapper),
            )


def _describe(obj):
    """``module.qualname`` of a function or class, else its repr (for log records)."""
    qualname = getattr(obj, "__qualname__", None)
    module = getattr(obj, "__module__", None)
    if isinstance(qualname, str) and isinstance(module, str):
        return f"{module}.{qualname}"
    return repr(obj)


def forward_mode(override: Any) -> str:
    """How a :class:`KernelOverride` hands launch arguments to its impl: ``"by name"`` (the impl
    uses the kernel's argument names), ``"positional"`` (kernel order, names differ) or
    ``"[grid] of the impl"`` (the impl launches itself); ``"raw"`` for a Triton-kernel impl
    installed in the kernel's place."""
    if not isinstance(override, core.KernelOverride):
        return "raw"
    if override._own_grid is not None:
        return "[grid] of the impl"
    return "by name" if getattr(override, "_forward_by_name", False) else "positional"


def register_kernels(overrides: Mapping[str, Callable[..., Any]]) -> None:
    """Register platform implementations for Triton kernels (vLLM-compatible).

    ``overrides`` maps a qualified kernel name (``"pkg.mod.kernel"`` or, for a kernel kept as a
    class attribute, ``"pkg.mod.Class.kernel"``) to its implementation. Implementations are
    launched like the kernels themselves: by the kernel's argument names, or positionally in
    the kernel's order when their names differ. An implementation that cannot accept the
    kernel's launch arguments is refused here with a ``TypeError``, and then nothing is changed.
    Registering a name again warns and replaces the previous override (``unregister_kernels``
    still restores the true original).

    vLLM 0.34's rules (:mod:`fastdispatch._dialect`): an implementation that is itself a Triton
    kernel is installed raw, in the kernel's place (it must mirror the kernel's parameter names
    or order, as in vLLM); one with a ``[grid]`` of its own receives the caller's grid.
    """
    with _lock:
        _install(dict(overrides), warn=True)


def _register_as(overrides: Mapping[str, Callable[..., Any]], dialect: Dialect) -> None:
    """:func:`register_kernels` with the rules of another dispatcher generation (the vLLM
    integration registers a 0.31-0.33 worker's requests with that release's rules)."""
    with _lock:
        _install(dict(overrides), warn=True, dialect=dialect)


def _names(names: Union[str, Iterable[str], None]) -> list[str]:
    if names is None:
        return list(_registry)
    if isinstance(names, str):
        return [names]
    return list(names)


def _restore(entries_and_targets):
    """Point every holder of each installed override at its target (original or previous)."""
    # The defining attribute first, exactly as the host stored it (e.g. a staticmethod); the
    # scan then rebinds every other holder.
    for _name, entry, target, _prev in entries_and_targets:
        host_dict = _TYPE_DICT.__get__(entry.host) if issubclass(type(entry.host), type) else None
        held = (
            host_dict.get(entry.attr)
            if host_dict is not None
            else getattr(entry.host, entry.attr, None)
        )
        if held is entry.override:
            _set_host(entry.host, entry.attr, entry.stored if target is entry.original else target)
    for _name, entry, target, _prev in entries_and_targets:
        # a raw impl: only the holders its registration changed (see the module docstring)
        for _value, kind, holder, container, key in entry.rebound or ():
            _put(kind, holder, container, key, entry.override, target)
    _rebind(
        [
            (entry.override, target)
            for _name, entry, target, _prev in entries_and_targets
            if entry.rebound is None
        ]
    )
    for name, _entry, _target, prev in entries_and_targets:
        if prev is None:
            _registry.pop(name, None)
            logger.debug("Unregistered kernel override %s (original restored)", name)
        else:
            _registry[name] = prev
            logger.debug("Kernel override %s: previous override restored", name)


def unregister_kernels(names: Union[str, Iterable[str], None] = None) -> None:
    """Remove overrides (all when ``names`` is None) and restore every holder to the original.

    Module attributes, ``from x import kernel`` copies, launch owners and class attributes that
    hold the override get the original kernel back. Unknown names raise ``KeyError``.
    """
    with _lock:
        names = _names(names)
        unknown = [name for name in names if name not in _registry]
        if unknown:
            raise KeyError(f"kernel override(s) not registered: {unknown}")
        _restore([(name, _registry[name], _registry[name].original, None) for name in names])


@contextlib.contextmanager
def overrides(
    mapping: Mapping[str, Callable[..., Any]],
) -> "Iterator[dict[str, KernelOverride]]":
    """Scoped registration: ``with overrides({...}):`` installs, leaving restores.

    On exit each name goes back to exactly what it was before -- the original kernel, or the
    override registered before the block -- unless the name was re-registered or unregistered
    inside the block, in which case that later change is left alone. Yields
    ``{name: KernelOverride}``.
    """
    mapping = dict(mapping)
    with _lock:
        previous = {name: _registry.get(name) for name in mapping}
        _install(mapping, warn=False)
        installed = {name: _registry[name] for name in mapping}
    try:
        yield {name: entry.override for name, entry in installed.items()}
    finally:
        with _lock:
            todo = []
            for name, entry in installed.items():
                if _registry.get(name) is not entry:
                    continue
                prev = previous[name]
                target = prev.override if prev is not None else entry.original
                todo.append((name, entry, target, prev))
            _restore(todo)


def verify(names: Union[str, Iterable[str], None] = None) -> dict[str, list[str]]:
    """Report, for each registered name, the holders that still point at the original kernel.

    Returns ``{name: [holder, ...]}`` with holders written ``module.attr`` (a module attribute)
    or ``module.attr.kernel`` (a launch owner or class keeping it as ``kernel``). After a
    successful ``register_kernels`` every list is empty; a non-empty list is a call site that
    would still launch the original.
    """
    with _lock:
        names = _names(names)
        unknown = [name for name in names if name not in _registry]
        if unknown:
            raise KeyError(f"kernel override(s) not registered: {unknown}")
        report: dict[str, list[str]] = {name: [] for name in names}
        by_id: dict[int, tuple[Any, list[str]]] = {}
        for name in names:
            original = _registry[name].original
            by_id.setdefault(id(original), (original, []))[1].append(name)
        for _kind, where, _holder, _container, _key, value in _scan(by_id):
            for name in by_id[id(value)][1]:
                report[name].append(where)
        return report
