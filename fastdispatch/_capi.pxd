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


# -- every other CPython declaration of the compiled modules (fastdispatch, kernels_cpu, fdkit) --
# One home: a module that needs a C-level CPython name cimports it from here (an extern block
# has no run-time part, so kernels_cpu depends on fastdispatch at build time only).
from cpython.object cimport PyTypeObject

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    # The C macros on raw pointers: Cython's Py_INCREF(<object> p) adds a temporary reference.
    void _incref "Py_INCREF" (PyObject* o)
    void _decref "Py_DECREF" (PyObject* o)
    Py_ssize_t _refcnt "Py_REFCNT" (PyObject* o)
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf, PyObject* kwnames)
    size_t PY_VECTORCALL_ARGUMENTS_OFFSET
    object PyObject_GenericGetDict(object o, void* context)
    unsigned long long PyLong_AsUnsignedLongLongMask(object) except? -1
    ctypedef struct PyTupleObject:
        PyObject* ob_item[1]
    # The slots behind ``getset_descriptor`` and ``method_descriptor`` objects (descrobject.h):
    # the readers of tensor metadata call them directly, after checking the descriptor's type.
    ctypedef object (*getter_fn "getter")(object, void*)
    ctypedef struct PyGetSetDef:
        getter_fn get
        void* closure
    ctypedef struct PyGetSetDescrObject:
        PyGetSetDef* d_getset
    ctypedef object (*noargs_fn "PyCFunction")(object, PyObject*)
    ctypedef object (*kwargs_fn "PyCFunctionWithKeywords")(object, object, PyObject*)
    ctypedef struct PyMethodDef:
        noargs_fn ml_meth
        int ml_flags
    ctypedef struct PyMethodDescrObject:
        PyMethodDef* d_method
    ctypedef struct _TypeTag "PyTypeObject":
        unsigned int tp_version_tag
    ctypedef Py_ssize_t (*lenfunc)(object) except -1
    ctypedef PyObject* (*subscriptfunc "binaryfunc")(PyObject*, PyObject*)
    ctypedef struct PyMappingMethods:
        lenfunc mp_length
        subscriptfunc mp_subscript
    ctypedef struct _TypeMapping "PyTypeObject":
        PyMappingMethods* tp_as_mapping
    PyTypeObject PyGetSetDescr_Type
    PyTypeObject PyMethodDescr_Type
    enum:
        METH_NOARGS
        METH_VARARGS
        METH_KEYWORDS
