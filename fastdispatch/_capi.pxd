# C-API calls whose arguments have contracts Cython's ``object`` declarations cannot express.
#
# ``PyObject_Call(callable, args, kwargs)`` takes ``kwargs`` as NULL or a dict -- never ``None``.
# Declared with ``object kwargs``, a ``None`` goes through as a pointer to the None object and
# CPython reads the word after it as the dict's size: 0 on some builds, garbage on others (an arm64
# CPython 3.11 read 37 and then crashed), and an assertion failure on a debug interpreter. Every
# call with optional kwargs in this package goes through ``call_kw``, whose signature makes the
# wrong call impossible to write: the kwargs pointer is either NULL or the address of a dict.
from cpython.object cimport PyObject

cdef extern from "Python.h":
    object _PyObject_Call_raw "PyObject_Call"(object callable, object args, PyObject* kwargs)


cdef inline object call_kw(object callable, tuple args, dict kwargs):
    """``callable(*args, **kwargs)``, handing ``kwargs`` over uncopied; ``None`` means no kwargs."""
    if kwargs is None:
        return _PyObject_Call_raw(callable, args, NULL)
    return _PyObject_Call_raw(callable, args, <PyObject*> kwargs)


cdef inline object call_kw_raw(object callable, tuple args, PyObject* kwargs):
    """The same for a ``tp_call`` slot's own ``kwds``: NULL or a dict, passed on as it came."""
    return _PyObject_Call_raw(callable, args, kwargs)
