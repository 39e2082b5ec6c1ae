# cython: language_level=3, boundscheck=False, wraparound=False
"""vLLM's launch owners, launched by the compiled path: a ``__call__`` for a foreign owner class.

vLLM's ``triton_kernel_dispatcher`` owners keep their launch in the instance ``__dict__`` under
attribute names of vLLM's choosing; ``fastdispatch.vllm`` reads those names from the running
release at install and hands them here. This module is that integration's hot path and nothing
else; its twin is ``_core_py.owner_call_method``.
"""
from cpython.tuple cimport PyTuple_GET_SIZE

from ._capi cimport call_kw
from ._override cimport KernelOverride
from ._owner cimport launch_owner_c
from ._plan cimport PlanCache
from ._slots cimport dict_of

from ._docs import OWNER_CALL_METHOD

__all__ = ["owner_call_method"]


def owner_call_method(fallback, dict plan_caches not None, *, str kernel_attr not None,
                      str dispatch_attr not None, str names_attr not None,
                      str defaults_attr not None, str warming_attr not None):
    def __call__(self, *args, **kwargs):
        cdef dict d = dict_of(self)
        cdef object kernel = d.get(kernel_attr)
        cdef object dispatch = d.get(dispatch_attr)
        cdef object names, values, defaults, hit, key
        cdef PlanCache cache
        cdef Py_ssize_t nargs, i
        if type(kernel) is not KernelOverride or dispatch is None or getattr(self, warming_attr):
            return fallback(self, *args, **kwargs)
        spec = call_kw(dispatch, args, kwargs if kwargs else None)
        names = d[names_attr]
        if type(names) is not tuple:
            names = tuple(names)
        values = args
        nargs = PyTuple_GET_SIZE(args)
        if nargs != PyTuple_GET_SIZE(names):
            defaults = d[defaults_attr]
            values = args + tuple([kwargs[name] if name in kwargs else defaults[name]
                                   for name in names[nargs:]])
        key = id(self)
        hit = plan_caches.get(key)
        if type(hit) is not tuple or PyTuple_GET_SIZE(hit) != 2 or (<tuple> hit)[0] is not self:
            hit = plan_caches[key] = (self, PlanCache())
        cache = <PlanCache?> (<tuple> hit)[1]
        return launch_owner_c(kernel, (<KernelOverride> kernel).names, spec, names, values, cache)

    return __call__


owner_call_method.__doc__ = OWNER_CALL_METHOD  # one text with the twin's
