"""The docstrings of the launch functions that both backends define, written once.

The compiled ``launch_owner`` and ``owner_call_method`` and their twins in ``_core_py`` keep one
contract; each sets its ``__doc__`` from here, so ``help()`` says the same whichever backend
``_backend`` picked. The classes (``KernelOverride``, ``LaunchOwner``) keep their docstrings in
both places: an extension type's docstring is fixed when it is compiled.
"""

__all__ = ["LAUNCH_OWNER", "OWNER_CALL_METHOD"]

LAUNCH_OWNER = """vLLM's ``launch``: run one launch described by a dispatch function's result.

``kernel``: what the owner launches (its ``.kernel``: a Triton kernel, a :class:`KernelOverride`,
anything subscriptable by grid); ``arg_names``: its argument names (the owner's
``_kernel_arg_names``); ``spec``: ``(grid, launch_kwargs)`` or ``(grid, launch_kwargs,
outputs)``; ``input_names``/``input_values``: the dispatch parameters and this call's values;
``cache``: an optional :class:`PlanCache` kept per launch site.

Semantics (vLLM's): the launch kwargs are completed as by :func:`prepare_launch_kwargs` (on a
copy -- ``spec``'s dict is not modified); a ``kernel`` entry replaces the kernel,
``_runtime_launcher``/``_runtime_launcher_arg_count`` entries route the launch through
``runtime_launcher(kernel, grid, *first_args, **rest)``; ``grid=None`` skips the launch;
otherwise ``kernel[grid](**kwargs)`` -- or ``kernel(**kwargs)`` when the kernel is not
subscriptable (a plain Python function standing in for a kernel when Triton is absent). Returns
``outputs`` (``None`` for a 2-tuple). When ``kernel`` is a :class:`KernelOverride` with these
``arg_names`` the launch goes to the impl directly from the plan, with the same result.
"""

OWNER_CALL_METHOD = """A ``__call__`` for a foreign launch owner class that keeps its launch
in its instance ``__dict__``: the kernel, a dispatch function, the dispatch function's parameter
names (a tuple) and their defaults (a dict) -- stored under the given attribute names.

Why: an owner's own ``__call__`` is the per-launch glue between the caller and
:func:`launch_owner`; written in Python it costs as much as a small CPU kernel, so the compiled
backend's (``_vllm_owner.pyx``) costs a fraction of vLLM's. The function returned is a method (it
binds like a ``def``), to be set as the class's ``__call__``.

``owner(*args, **kwargs)``: when the kernel is a :class:`KernelOverride`, there is a dispatch
function and the owner's ``warming_attr`` is false, runs ``spec = dispatch(*args, **kwargs)``,
completes the inputs (positional ``args``, then each remaining parameter from ``kwargs`` or the
defaults) and launches ``launch_owner(kernel, kernel.arg_names, spec, names, values, cache)``,
with one :class:`PlanCache` per owner kept in ``plan_caches`` (``id(owner)`` -> ``(owner,
cache)``). Anything else is ``fallback(owner, *args, **kwargs)`` (the class's original
``__call__``).
"""
