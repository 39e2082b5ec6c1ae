"""The install state: what an installation changed, and what undoing it needs.

:func:`fastdispatch.vllm.install` copies nothing of vLLM: it reads what the running release
has, patches vLLM's objects by name at run time and records every change here, so that
:func:`fastdispatch.vllm.uninstall` can put each one back. One :class:`_Installation` stands
while installed (``_state``): attribute replacements on vLLM's modules and classes go through
its :class:`_Patches` log, registrations with fastdispatch are remembered by name (with the
class-dict descriptors they displaced), and every other concern of the integration (the
dispatcher's front, the 0.27-0.30 hook, the owners, the sampler) keeps its own record on it.
``_lock`` serialises install, uninstall, the reports and our code that runs inside vLLM.
"""

import threading

from .._log import get_logger

logger = get_logger("vllm")

_DISPATCHER = "vllm.triton_utils.dispatcher"
#: Attributes of vLLM's dispatcher module that fastdispatch provides (its drop-in API); each is
#: put where the standing module has it (0.31-0.33: ``_rebind_kernels``; 0.34: ``_rebind_impls``
#: and ``_is_triton_kernel``).
_DISPATCHER_API = (
    "KernelOverride",
    "_registry",
    "_resolve_kernel",
    "_rebind_kernels",
    "_rebind_impls",
    "_is_triton_kernel",
    "_kernel_arg_names",
)

_lock = threading.RLock()
_state = None  # the _Installation while installed

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
        self._log.append((owner, name, old, value))
        setattr(owner, name, value)

    def undo(self, keep_displaced=False):
        """Put every attribute back, the last change first. With ``keep_displaced``, one that no
        longer holds what was set here (someone replaced ours since) is left as it is."""
        while self._log:
            owner, name, old, value = self._log.pop()
            if keep_displaced and vars(owner).get(name, _MISSING) is not value:
                continue
            if old is _MISSING:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, old)


class _Installation:
    """Everything :func:`install` changed, and what :func:`uninstall` needs to undo it."""

    def __init__(self, dispatcher, runner=None):
        import fastdispatch
        from fastdispatch._dialect import V031, dialect_of

        self.fd = fastdispatch
        self.dispatcher = dispatcher  # vllm.triton_utils.dispatcher, or None (0.27-0.30)
        # the rules vLLM's own registrations (through the front) follow: those of the
        # dispatcher standing here; ours follow fastdispatch's (0.34's) wherever we run
        self.dialect = dialect_of(dispatcher) if dispatcher is not None else V031
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
        self.absent = {}  # kernels of other releases, whose module this one lacks -> why
        self.cpu_specs_left = {}  # owners keeping vLLM's dispatch function (name -> why)
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
        self.step_patches = _Patches()  # RejectionSampler.forward, while the step stands
        self.step_left = None  # why the one-pass step is not installed (None: not asked for)
        self.plan_caches = {}  # id(owner) -> (owner, PlanCache)
        self.mrv2 = {}  # Model Runner V2: qualified name -> what replaces it (see _mrv2)
        self.mrv2_missing = {}  # its launched kernels we lack: name -> (feature, why)
        self.mrv2_left = None  # why Model Runner V2 support is not installed (None: it is)
        self.mrv2_verify = None  # (RejectionSampler, our _verify) while V2's one pass stands
        self.mrv2_verify_left = None  # why it does not (see _mrv2_verify)
        self.mrv2_draft = None  # (DraftModelSpeculator, our sample_draft) while it stands
        self.mrv2_draft_left = None  # why it does not (see _mrv2_drafter)

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

    def register(self, mapping, dialect=None):
        """Register ``mapping`` with fastdispatch, skipping what already stands; with
        fastdispatch's rules, or ``dialect``'s (vLLM's requests: :attr:`dialect`)."""
        todo = {name: impl for name, impl in mapping.items() if not self.standing(name, impl)}
        if not todo:
            return
        for name in todo:
            self._remember_class_attr(name)
        if dialect is None:
            self.fd.register_kernels(todo)
        else:
            self.fd._registration._register_as(todo, dialect)
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
        self.register(mapping, self.dialect)
        for name, impl in theirs.items():
            # A kernel left to vLLM gets vLLM's own override through our launch path -- unless
            # that override cannot take the kernel's launch either: then the kernel stays as it
            # is (vLLM's own mismatch, reported), and the worker starts.
            try:
                self.register({name: impl}, self.dialect)
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
