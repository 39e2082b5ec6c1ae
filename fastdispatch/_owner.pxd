# The compiled launch owner and vLLM's ``launch`` as a C function, for _vllm_owner to cimport.
from ._plan cimport PlanCache


cdef class LaunchOwner:
    cdef dict __dict__
    cdef object dispatch_fn
    cdef tuple dispatch_names
    cdef dict dispatch_defaults
    cdef PlanCache plan_cache


cdef object launch_owner_c(object kernel, object arg_names, object spec, tuple input_names,
                           object input_values, PlanCache cache)
