"""Pure-Python twin of ``_vllm_owner.pyx``: a ``__call__`` for vLLM's launch owner classes.

vLLM's ``triton_kernel_dispatcher`` owners keep their launch in the instance ``__dict__`` under
attribute names of vLLM's choosing; ``fastdispatch.vllm`` reads those names from the running
release at install and hands them here.
"""

__all__ = ["owner_call_method"]


def owner_call_method(
    fallback, plan_caches, *, kernel_attr, dispatch_attr, names_attr, defaults_attr, warming_attr
):
    """A ``__call__`` for a foreign launch owner class that keeps its launch in its instance
    ``__dict__``: the kernel, a dispatch function, the dispatch function's parameter names (a
    tuple) and their defaults (a dict) -- stored under the given attribute names.

    Why: an owner's own ``__call__`` is the per-launch glue between the caller and
    :func:`launch_owner`; the compiled version (``_vllm_owner.pyx``) costs a fraction of this
    one. The
    function returned is a method (it binds like a ``def``), to be set as the class's ``__call__``.

    ``owner(*args, **kwargs)``: when the kernel is a :class:`KernelOverride`, there is a
    dispatch function and the owner's ``warming_attr`` is false, runs ``spec =
    dispatch(*args, **kwargs)``, completes the inputs (positional ``args``, then each remaining
    parameter from ``kwargs`` or the defaults) and launches
    ``launch_owner(kernel, kernel.arg_names, spec, names, values, cache)``, with one
    :class:`PlanCache` per owner kept in ``plan_caches`` (``id(owner)`` -> ``(owner, cache)``).
    Anything else is ``fallback(owner, *args, **kwargs)`` (the class's original ``__call__``).
    """
    # The twin's hot path; imported here, not at the top, because _core_py exports this function.
    from ._core_py import KernelOverride, PlanCache, launch_owner

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
