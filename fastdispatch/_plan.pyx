# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled binding plan: the planner's answer as C arrays, and the per-site plan cache.

The rules themselves (which dispatch input binds to which kernel argument, which stride comes
from which tensor) are ``_planner.plan_rules``, shared with the twin; a plan here keeps the same
facts as index arrays, so the override's launch (``_override.pyx``) completes its call slots
straight from the dispatch inputs without building vLLM's intermediate kwargs dict. A
:class:`PlanCache` finds a launch site's plan by comparing the launch keys with the last ones
(pointer first, then ``PyUnicode_Compare``), not by hashing.
"""
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_Compare
from libc.stdlib cimport free

from ._slots cimport check_dict_reader, dict_entries, entry, index_array

from ._planner import plan_lookup, plan_rules, prepare_launch_kwargs, site_plan

__all__ = ["LaunchBindingPlan", "PlanCache", "launch_binding_plan", "prepare_launch_kwargs"]

check_dict_reader()


cdef class LaunchBindingPlan:
    """How one owner's dispatch inputs and launch kwargs become the kernel's launch kwargs.

    ``input_targets``: ``(input index, kernel argument)`` pairs; ``stride_targets``:
    ``(kernel argument, source argument, dim)`` triples -- the same fields as vLLM's plan. The
    remaining attributes are the same facts as indices into ``arg_names``, for the launch path.
    """

    def __cinit__(self, *args, **kwargs):
        self.input_fill_index = NULL
        self.input_fill_arg = NULL
        self.stride_fill_arg = NULL
        self.stride_fill_input = NULL
        self.stride_fill_dim = NULL

    def __init__(self, arg_names, input_names, launch_names):
        self.arg_names = tuple(arg_names)
        self.input_names = tuple(input_names)
        self.launch_names = tuple(launch_names)
        (self.input_targets, self.stride_targets, self.input_fill, self.stride_fill,
         self.generic) = plan_rules(self.arg_names, self.input_names, self.launch_names)
        self.n_input_fill = len(self.input_fill)
        self.input_fill_index = index_array([index for index, _ in self.input_fill])
        self.input_fill_arg = index_array([arg for _, arg in self.input_fill])
        self.n_stride_fill = len(self.stride_fill)
        self.stride_fill_arg = index_array([arg for arg, _, _ in self.stride_fill])
        self.stride_fill_input = index_array(
            [-1 if isinstance(src, str) else -1 - src for _, src, _ in self.stride_fill])
        self.stride_fill_dim = index_array([dim for _, _, dim in self.stride_fill])

    def __dealloc__(self):
        free(self.input_fill_index)
        free(self.input_fill_arg)
        free(self.stride_fill_arg)
        free(self.stride_fill_input)
        free(self.stride_fill_dim)

    def __repr__(self):
        return (f"LaunchBindingPlan(input_targets={self.input_targets}, "
                f"stride_targets={self.stride_targets})")


launch_binding_plan = plan_lookup(LaunchBindingPlan)


cdef class PlanCache:
    """Remembers the last plan of one launch site, so a repeated launch skips hashing.

    ``lookup`` returns the plan for ``(arg_names, input_names, keys of launch_kwargs)``; it hits
    when ``arg_names`` and ``input_names`` are the same objects and the launch kwargs have the
    same keys in the same order as last time.
    """

    def lookup(self, arg_names, input_names, launch_kwargs):
        return self.lookup_c(arg_names, input_names, launch_kwargs)

    cdef LaunchBindingPlan lookup_c(self, tuple arg_names, tuple input_names, dict launch_kwargs):
        cdef LaunchBindingPlan plan = self.plan
        cdef Py_ssize_t position = 0, j = 0
        cdef PyObject* key
        cdef PyObject* value
        cdef PyObject* cached
        cdef entry* entries
        cdef Py_ssize_t nentries = 0, e
        if (plan is not None and plan.arg_names is arg_names and plan.input_names is input_names
                and len(launch_kwargs) == PyTuple_GET_SIZE(self.keys)):
            entries = dict_entries(launch_kwargs, &nentries)
            if entries != NULL:
                for e in range(nentries):
                    if entries[e].value == NULL:
                        continue
                    key = entries[e].key
                    cached = PyTuple_GET_ITEM(self.keys, j)
                    j += 1
                    # Keys here are exact str: compare without running any Python code, since
                    # the entry table must not change under us.
                    if key != cached and not (PyUnicode_CheckExact(<object> cached)
                                              and PyUnicode_Compare(<object> key, <object> cached) == 0):
                        break
                else:
                    return plan
            else:
                while PyDict_Next(launch_kwargs, &position, &key, &value):
                    cached = PyTuple_GET_ITEM(self.keys, j)
                    j += 1
                    if key != cached and (<object> key) != (<object> cached):
                        break
                else:
                    return plan
        self.plan, self.keys = site_plan(launch_binding_plan, LaunchBindingPlan, arg_names,
                                         input_names, launch_kwargs)
        return self.plan
