# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled launch owner: ``owner(*args)`` -> dispatch function -> plan -> the override's slots.

vLLM's launch owner runs a dispatch function that returns ``(grid, launch_kwargs[, outputs])``,
completes the launch kwargs from the dispatch inputs with a binding plan and launches
``kernel[grid](**kwargs)``. When the kernel is one of our overrides, :func:`launch_owner_c`
completes the plan straight into the override's call slots (``KernelOverride.launch``): the
intermediate kwargs dict of vLLM's chain is never built, and the site's plan is found by its
:class:`~fastdispatch._plan.PlanCache`. Anything else takes the shared dict-building path
(``_planner.launch_generic``). The owner's set-up (reading the dispatch signature) is
``_owner_setup``'s, shared with the twin; ``_core_py.py`` has this hot path in plain Python.
"""
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject, PyTypeObject, ternaryfunc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from ._capi cimport call_kw
from ._override cimport KernelOverride
from ._plan cimport LaunchBindingPlan, PlanCache
from ._slots cimport dict_of

from ._bindcheck import kernel_arg_names
from ._docs import LAUNCH_OWNER
from ._errors import describe, input_count_mismatch
from ._owner_setup import dispatch_signature, dispatcher_factory
from ._plan import launch_binding_plan
from ._planner import launch_generic, unpack_spec

__all__ = ["LaunchOwner", "kernel_dispatcher", "launch_owner"]


cdef object launch_owner_c(object kernel, object arg_names, object spec, tuple input_names,
                           object input_values, PlanCache cache):
    cdef LaunchBindingPlan plan
    cdef KernelOverride override
    cdef Py_ssize_t nspec
    cdef object grid, launch_kwargs, outputs = None
    if type(spec) is tuple and (PyTuple_GET_SIZE(spec) == 2 or PyTuple_GET_SIZE(spec) == 3):
        nspec = PyTuple_GET_SIZE(spec)
        grid = <object> PyTuple_GET_ITEM(spec, 0)
        launch_kwargs = <object> PyTuple_GET_ITEM(spec, 1)
        if nspec == 3:
            outputs = <object> PyTuple_GET_ITEM(spec, 2)
    else:
        grid, launch_kwargs, outputs = unpack_spec(spec)
    if type(launch_kwargs) is not dict:
        launch_kwargs = dict(launch_kwargs)
    if type(arg_names) is not tuple:
        arg_names = tuple(arg_names)
    if type(input_values) is not tuple:
        input_values = tuple(input_values)
    if len(input_values) != len(input_names):
        raise input_count_mismatch(len(input_values), len(input_names))
    if cache is not None:
        plan = cache.lookup_c(arg_names, input_names, launch_kwargs)
    else:
        plan = launch_binding_plan(arg_names, input_names, tuple(launch_kwargs))
    if type(kernel) is KernelOverride and not plan.generic:
        override = <KernelOverride> kernel
        # an impl with its own [grid] launches itself: the generic path hands it the grid
        if override.own_grid is None and (
                override.names is arg_names or override.names == arg_names):
            if grid is None:
                return outputs
            override.launch(launch_kwargs, plan, input_values)
            return outputs
    return launch_generic(kernel, arg_names, grid, launch_kwargs, plan, input_values, outputs)


def launch_owner(kernel, arg_names, spec, input_names, input_values, PlanCache cache=None):
    return launch_owner_c(kernel, arg_names, spec, tuple(input_names), input_values, cache)


launch_owner.__doc__ = LAUNCH_OWNER  # one text with the twin's


# -- launch owner ----------------------------------------------------------------------------------


cdef class LaunchOwner:
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
        dict_of(self)["kernel"] = kernel
        self._dispatch_fn = dispatch
        self._dispatch_arg_names = names
        self._dispatch_defaults = defaults
        self._plan_cache = PlanCache()
        dict_of(self)["_warmup_inputs_fn"] = warmup_inputs

    @property
    def _kernel_arg_names(self):
        names = dict_of(self).get("_kernel_arg_names")
        if names is None:
            names = kernel_arg_names(dict_of(self)["kernel"])
            dict_of(self)["_kernel_arg_names"] = names
        return names

    def __call__(self, *args, **kwargs):
        return _owner_call(self, args, kwargs if kwargs else None)

    def launch(self, launch_spec, inputs):
        """vLLM's ``launch(spec, inputs)``: launch a spec with a mapping of dispatch inputs."""
        return launch_owner_c(dict_of(self)["kernel"], self._kernel_arg_names, launch_spec,
                              tuple(inputs), tuple(inputs.values()), None)

    def register_warmup(self, *args, **kwargs):
        """Accepted for compatibility with vLLM's owners; there is nothing to compile ahead."""
        return None

    def __getitem__(self, grid):
        return dict_of(self)["kernel"][grid]

    def __getattr__(self, name):
        d = dict_of(self)
        if name == "kernel" or "kernel" not in d:
            raise AttributeError(name)
        return getattr(d["kernel"], name)

    def __repr__(self):
        return f"<LaunchOwner {describe(self._dispatch_fn)} kernel={dict_of(self).get('kernel')!r}>"


kernel_dispatcher = dispatcher_factory(LaunchOwner)


# Cython's generic ``def __call__(self, *args, **kwargs)`` wrapper checks every keyword and copies
# the kwargs dict before our code runs; the owner gets a direct ``tp_call`` that hands the dict
# over untouched. ``LaunchOwner.__call__`` stays as the documented, introspectable form.

cdef object _owner_tp_call(PyObject* self, PyObject* args, PyObject* kwds):
    return _owner_call(<LaunchOwner> self, <tuple> args, <dict> kwds if kwds != NULL else None)


cdef object _owner_call(LaunchOwner owner, tuple values, dict kwargs):
    """Dispatch, complete the inputs from the dispatch function's defaults, then launch with the
    kernel and cached argument names the owner's instance dict holds now (the rebinding pass
    swaps ``kernel`` there and drops ``_kernel_arg_names``)."""
    cdef tuple names = owner._dispatch_arg_names
    cdef PyObject* found
    spec = call_kw(owner._dispatch_fn, values, kwargs)
    if PyTuple_GET_SIZE(values) != PyTuple_GET_SIZE(names):
        defaults = owner._dispatch_defaults
        values = values + tuple(
            kwargs[name] if kwargs is not None and name in kwargs else defaults[name]
            for name in names[PyTuple_GET_SIZE(values):]
        )
    d = dict_of(owner)
    found = PyDict_GetItem(d, "kernel")
    if found == NULL:
        raise AttributeError("kernel")
    kernel = <object> found
    found = PyDict_GetItem(d, "_kernel_arg_names")
    if found != NULL and <object> found is not None:
        arg_names = <object> found
    else:
        arg_names = owner._kernel_arg_names
    return launch_owner_c(kernel, arg_names, spec, names, values, owner._plan_cache)


(<PyTypeObject*> LaunchOwner).tp_call = <ternaryfunc> _owner_tp_call
