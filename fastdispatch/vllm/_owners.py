"""vLLM's launch owners hand an overridden kernel's launch to fastdispatch's compiled path.

The ``triton_kernel_dispatcher_with_warmup`` owners (``_DecoratedTritonJitKernel.__call__``) and
every ``VllmTritonJitKernel.launch`` hand an overridden kernel's launch to the compiled
:func:`fastdispatch.launch_owner`, which binds the dispatch inputs straight into the
implementation's call instead of building a kwargs dict per launch; the decorator-made owner's
``__call__`` itself is the backend's compiled ``owner_call_method`` glue (dispatch, complete the
inputs, launch) rather than Python code. Class-style owners wrapped in vLLM's
``kernel_launcher`` (``ComputeSlotMappingKernel``) skip its per-launch ``Signature.bind`` when
every argument comes positionally. Kernels that are not overridden (and JIT warmup) take vLLM's
own path, untouched. Every patch goes through the installation's ``_Patches`` log.
"""

from ._installation import logger

_WARMUP_HELPER = "vllm.model_executor.warmup.jit_warmup_triton_helper"

# Where vLLM's decorator-made owners keep their launch in the instance ``__dict__`` (the kernel,
# the dispatch function, its parameter names and defaults, the warm-up flag), as the keywords
# of ``owner_call_method``.
OWNER_LAYOUT = dict(
    kernel_attr="kernel",
    dispatch_attr="_dispatch_fn",
    names_attr="_dispatch_arg_names",
    defaults_attr="_dispatch_defaults",
    warming_attr="_warming",
)


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
        __call__ = state.fd._backend_core.owner_call_method(stock_call, caches, **OWNER_LAYOUT)
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
