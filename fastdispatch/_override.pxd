# The compiled override and its launcher, for the owner modules to cimport; fields in
# _override.pyx (and, as Python, in _core_py.py, which mirrors the hot path).
from cpython.object cimport PyObject

from ._plan cimport LaunchBindingPlan


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
    cdef object own_grid        # the impl's bound ``__getitem__`` (it takes the grid), or None

    cdef Py_ssize_t slot_of(self, PyObject* key, Py_ssize_t position) noexcept
    cdef object launch(self, dict kwargs, LaunchBindingPlan plan, tuple input_values)


cdef class Launcher:
    cdef readonly KernelOverride override
