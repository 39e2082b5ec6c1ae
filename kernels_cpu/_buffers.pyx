# cython: language_level=3
"""Cheap, complete validation of torch tensors before a ``nogil`` loop (see ``_buffers.pxd``).

Every check reads metadata only (no tensor ops, no allocation) and raises an exception naming the
argument. Costs are a few attribute reads per tensor, in the order of cheapness: type check (C),
``dtype`` identity (interned torch dtype objects), ``is_cpu``, ``is_contiguous()``, ``shape``,
``data_ptr()``. ``device.type`` is avoided on the success path (it allocates).

Why the reads call torch's C slots directly: for a tiny launch, validation dominates, and most of
each read was CPython's generic attribute machinery (type-dict lookups, bound-method objects),
not torch. For a tensor whose type is exactly ``torch.Tensor`` -- what kernels are launched with
-- the same torch getters and methods (``TensorBase``'s ``dtype``/``is_cpu``/``shape`` getset
descriptors and ``is_contiguous``/``data_ptr`` method descriptors) are called through their
C function pointers, fetched once at import. They are the very functions attribute access would
run (torch's own ``__torch_function__``-mode handling included), so every check still reads the
tensor's live metadata on every call; nothing is cached per tensor. The shortcut is taken only
while ``torch.Tensor``'s type version tag is the one under which the five names were verified to
resolve to those descriptors (any assignment to the class changes the tag: re-verified then); any
other tensor type (subclasses) takes plain attribute access.
"""
import torch

from cpython.object cimport PyObject, PyObject_TypeCheck, PyTypeObject, Py_TYPE
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from libc.stdint cimport intptr_t

cdef extern from "Python.h":
    # The slots behind ``getset_descriptor`` and ``method_descriptor`` objects (descrobject.h).
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
    ctypedef struct PyMappingMethods:
        lenfunc mp_length
    ctypedef struct _TypeMapping "PyTypeObject":
        PyMappingMethods* tp_as_mapping
    PyTypeObject PyGetSetDescr_Type
    PyTypeObject PyMethodDescr_Type
    enum:
        METH_NOARGS
        METH_VARARGS
        METH_KEYWORDS

cdef object _Tensor = torch.Tensor
cdef PyTypeObject* _tensor_type = <PyTypeObject*>torch.Tensor
cdef unsigned int _tensor_tag = 0   # torch.Tensor's version tag when the slots were verified
cdef tuple _no_args = ()

cdef PyGetSetDef* _get_dtype = NULL
cdef PyGetSetDef* _get_is_cpu = NULL
cdef PyGetSetDef* _get_shape = NULL
cdef PyGetSetDef* _get_ndim = NULL
cdef lenfunc _length = NULL        # TensorBase's C length slot: size(0) of a tensor with dim >= 1
cdef noargs_fn _data_ptr = NULL
cdef kwargs_fn _is_contiguous = NULL


cdef PyGetSetDef* _getset(dict base, str name):
    d = base.get(name)
    if d is None or Py_TYPE(d) != &PyGetSetDescr_Type:
        return NULL
    return (<PyGetSetDescrObject*><PyObject*>d).d_getset


cdef PyMethodDef* _method(dict base, str name, int flags):
    d = base.get(name)
    if d is None or Py_TYPE(d) != &PyMethodDescr_Type:
        return NULL
    if ((<PyMethodDescrObject*><PyObject*>d).d_method.ml_flags & (METH_NOARGS | METH_VARARGS
                                                                   | METH_KEYWORDS)) != flags:
        return NULL
    return (<PyMethodDescrObject*><PyObject*>d).d_method


cdef bint _verify_slots() except -1:
    """Point the direct slots at torch's, if ``torch.Tensor`` resolves the five names to them."""
    global _tensor_tag, _get_dtype, _get_is_cpu, _get_shape, _get_ndim, _length, _data_ptr
    global _is_contiguous
    _tensor_tag = 0
    base_type = torch._C.TensorBase
    cdef dict base = dict(base_type.__dict__)
    names = ("dtype", "is_cpu", "shape", "ndim", "is_contiguous", "data_ptr")
    for name in names:
        # what ``t.<name>`` finds through torch.Tensor's MRO must be TensorBase's own descriptor
        if getattr(_Tensor, name, None) is not base.get(name):
            return False
    cdef PyMethodDef* contiguous = _method(base, "is_contiguous", METH_VARARGS | METH_KEYWORDS)
    cdef PyMethodDef* data_ptr = _method(base, "data_ptr", METH_NOARGS)
    _get_dtype = _getset(base, "dtype")
    _get_is_cpu = _getset(base, "is_cpu")
    _get_shape = _getset(base, "shape")
    _get_ndim = _getset(base, "ndim")
    cdef PyMappingMethods* mapping = (<_TypeMapping*><PyTypeObject*>base_type).tp_as_mapping
    _length = mapping.mp_length if mapping != NULL else NULL
    if (contiguous == NULL or data_ptr == NULL or _get_dtype == NULL or _get_is_cpu == NULL
            or _get_shape == NULL or _get_ndim == NULL or _length == NULL):
        return False
    _is_contiguous = <kwargs_fn>contiguous.ml_meth
    _data_ptr = data_ptr.ml_meth
    _tensor_tag = (<_TypeTag*>_tensor_type).tp_version_tag
    return _tensor_tag != 0


cdef inline bint _direct(object t) except -1:
    """True when ``t``'s metadata may be read through the direct slots."""
    if Py_TYPE(t) != _tensor_type:
        return False
    if _tensor_tag != 0 and (<_TypeTag*>_tensor_type).tp_version_tag == _tensor_tag:
        return True
    return _verify_slots()


_verify_slots()
cdef object _i32 = torch.int32
cdef object _i64 = torch.int64
cdef object _f32 = torch.float32
cdef object _f64 = torch.float64
cdef object _bool = torch.bool
cdef object _u8 = torch.uint8
cdef object _i8 = torch.int8
cdef object _f16 = torch.float16
cdef object _bf16 = torch.bfloat16

cdef tuple _NAMES = ("other", "int32", "int64", "float32", "float64", "bool", "uint8", "int8",
                     "float16", "bfloat16")


cdef int dtype_code(object dtype) noexcept:
    if dtype is _i32:
        return DT_INT32
    if dtype is _i64:
        return DT_INT64
    if dtype is _f32:
        return DT_FLOAT32
    if dtype is _f64:
        return DT_FLOAT64
    if dtype is _bool:
        return DT_BOOL
    if dtype is _u8:
        return DT_UINT8
    if dtype is _i8:
        return DT_INT8
    if dtype is _f16:
        return DT_FLOAT16
    if dtype is _bf16:
        return DT_BFLOAT16
    return DT_OTHER


cdef str dtype_name(int code):
    return _NAMES[code]


cdef bint is_none(object t) noexcept:
    return t is None


cdef str _allowed(int mask):
    return " or ".join([_NAMES[i] for i in range(1, len(_NAMES)) if mask & (1 << i)])


cdef char* check_tensor(object t, str name, int mask, int ndim, int* code_out,
                        Py_ssize_t* shape_out) except NULL:
    """Validate ``t`` and return its data pointer.

    mask: accepted dtype codes (M_* bits). ndim: required number of dimensions, or -1 for any
    (then ``shape_out`` receives only ``numel`` in slot 0). shape_out: at least ``ndim`` slots.
    Raises TypeError (not a tensor / wrong dtype / wrong ndim) or ValueError (device,
    contiguity) naming ``name``. A zero-element tensor yields a non-NULL dummy pointer.
    """
    cdef int code
    cdef object dtype
    cdef intptr_t p
    cdef bint direct = _direct(t)
    if not direct and not isinstance(t, _Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    dtype = _get_dtype.get(t, _get_dtype.closure) if direct else t.dtype
    code = dtype_code(dtype)
    if code == DT_OTHER or not (mask & (1 << code)):
        raise TypeError(f"{name} must have dtype {_allowed(mask)}, got {dtype}")
    if not (_get_is_cpu.get(t, _get_is_cpu.closure) if direct else t.is_cpu):
        raise ValueError(f"{name} must be a CPU tensor, got device {t.device}")
    if not (_is_contiguous(t, _no_args, NULL) if direct else t.is_contiguous()):
        raise ValueError(f"{name} must be contiguous")
    if direct and ndim <= 1 and _get_ndim.get(t, _get_ndim.closure) == 1:
        # 1-D (asked for, or any ndim accepted): size(0), which is also numel, from the length
        # slot without building a torch.Size
        shape_out[0] = _length(t)
    else:
        _check_shape(t, name, ndim, direct, shape_out)
    if code_out != NULL:
        code_out[0] = code
    p = <intptr_t>(_data_ptr(t, NULL) if direct else t.data_ptr())
    if p == 0:
        return <char*>shape_out   # empty tensor: never dereferenced, but must not be NULL
    return <char*>p


cdef int _check_shape(object t, str name, int ndim, bint direct, Py_ssize_t* shape_out) except -1:
    cdef object shape
    cdef Py_ssize_t i, n, numel
    shape = _get_shape.get(t, _get_shape.closure) if direct else t.shape
    n = PyTuple_GET_SIZE(shape)
    if ndim >= 0:
        if n != ndim:
            raise TypeError(f"{name} must be {ndim}-D, got shape {tuple(shape)}")
        for i in range(n):
            shape_out[i] = <Py_ssize_t>(<object>PyTuple_GET_ITEM(shape, i))
    else:
        numel = 1
        for i in range(n):
            numel *= <Py_ssize_t>(<object>PyTuple_GET_ITEM(shape, i))
        shape_out[0] = numel
    return 0


cdef IBuf check_index(object t, str name, int ndim, Py_ssize_t* shape_out) except *:
    """``check_tensor`` for an int32/int64 index buffer, returned as an ``IBuf``."""
    cdef IBuf b
    cdef int code = 0
    b.ptr = check_tensor(t, name, M_INDEX, ndim, &code, shape_out)
    b.wide = code == DT_INT64
    return b
