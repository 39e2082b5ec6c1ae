# The compiled launch owner and vLLM's ``launch`` as a C function, for _vllm_owner to cimport.
from ._plan cimport PlanCache


cdef class LaunchOwner:
    cdef dict __dict__
    # Read-only from Python under the twin's attribute names (the stub's properties).
    cdef readonly object _dispatch_fn
    cdef readonly tuple _dispatch_arg_names
    cdef readonly dict _dispatch_defaults
    cdef readonly PlanCache _plan_cache


cdef object launch_owner_c(object kernel, object arg_names, object spec, tuple input_names,
                           object input_values, PlanCache cache)
