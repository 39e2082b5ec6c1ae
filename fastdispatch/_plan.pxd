# The compiled binding plan and the per-launch-site plan cache; fields in _plan.pyx.
cdef class LaunchBindingPlan:
    cdef readonly tuple arg_names
    cdef readonly tuple input_names
    cdef readonly tuple launch_names
    cdef readonly tuple input_targets
    cdef readonly tuple stride_targets
    cdef readonly tuple input_fill
    cdef readonly tuple stride_fill
    cdef readonly bint generic
    cdef Py_ssize_t n_input_fill
    cdef Py_ssize_t* input_fill_index   # input index
    cdef Py_ssize_t* input_fill_arg     # kernel argument it binds
    cdef Py_ssize_t n_stride_fill
    cdef Py_ssize_t* stride_fill_arg    # kernel argument filled with a stride
    cdef Py_ssize_t* stride_fill_input  # source input index, or -1 when from launch kwargs
    cdef Py_ssize_t* stride_fill_dim


cdef class PlanCache:
    cdef readonly LaunchBindingPlan plan
    cdef readonly tuple keys

    cdef LaunchBindingPlan lookup_c(self, tuple arg_names, tuple input_names, dict launch_kwargs)
