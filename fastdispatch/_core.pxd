# Declarations of the compiled launch path, so other Cython modules can cimport the classes and
# call their C-level launch directly. Field meanings are documented in _core.pyx (and, as Python,
# in _core_py.py, which mirrors it).
from cpython.object cimport PyObject


cdef class KernelOverride:
    cdef dict __dict__
    cdef object impl
    cdef tuple names            # the original kernel's argument names (``arg_names``)
    cdef tuple all_names        # interned kernel names followed by Triton launch options
    cdef dict name_index        # name -> index into all_names
    cdef Py_ssize_t nargs       # number of kernel arguments
    cdef Py_ssize_t npos        # positional slots of the impl call
    cdef Py_ssize_t nslots      # positional + keyword slots
    cdef object kwnames         # tuple of keyword slot names, or None
    cdef Py_ssize_t* arg_slots  # kernel argument -> slot
    cdef Py_ssize_t* slot_args  # slot -> kernel argument, -1 for impl-only parameters
    cdef Py_ssize_t* all_index  # all_names index -> kernel argument, -2 for launch options
    cdef Py_ssize_t ncache      # positions remembered (len(all_names))
    cdef PyObject** seen_key    # dict position -> the exact str key seen there last (owned)
    cdef Py_ssize_t* seen_slot  # dict position -> its slot (-2: launch option)
    cdef Py_ssize_t exact_n     # >0: a dict of exactly this many keys, equal to seen_key[:exact_n],
                                # fills every slot once (0: not known)
    cdef PyObject** template    # owned: impl default for impl-only slots, NULL elsewhere
    cdef PyObject** defaults    # owned: default per slot, NULL when required or omitted
    cdef char* omit             # per slot: leave out of the call when not supplied
    cdef bint has_template      # some slot is impl-only (pre-filled with its default)
    cdef Launcher launcher

    cdef Py_ssize_t slot_of(self, PyObject* key, Py_ssize_t position) noexcept
    cdef object launch(self, dict kwargs, LaunchBindingPlan plan, tuple input_values)


cdef class Launcher:
    cdef readonly KernelOverride override


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


cdef class LaunchOwner:
    cdef dict __dict__
    cdef object dispatch_fn
    cdef tuple dispatch_names
    cdef dict dispatch_defaults
    cdef PlanCache plan_cache


cdef object launch_owner_c(object kernel, object arg_names, object spec, tuple input_names,
                           object input_values, PlanCache cache)
