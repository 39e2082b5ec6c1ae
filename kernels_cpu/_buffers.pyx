# cython: language_level=3
"""Cheap, complete validation of torch tensors before a ``nogil`` loop (see ``_buffers.pxd``).

Every check reads metadata only (no tensor ops, no allocation) and raises an exception naming the
argument. Costs are a few attribute reads per tensor, in the order of cheapness: type check (C),
``dtype`` identity (interned torch dtype objects), ``is_cpu``, ``is_contiguous()``, ``shape``,
``data_ptr()``. ``device.type`` is avoided on the success path (it allocates).
"""
import torch

from cpython.object cimport PyObject_TypeCheck, PyTypeObject
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from libc.stdint cimport intptr_t

cdef object _Tensor = torch.Tensor
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
    cdef object shape
    cdef Py_ssize_t i, n
    cdef intptr_t p
    if not isinstance(t, _Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    code = dtype_code(t.dtype)
    if code == DT_OTHER or not (mask & (1 << code)):
        raise TypeError(f"{name} must have dtype {_allowed(mask)}, got {t.dtype}")
    if not t.is_cpu:
        raise ValueError(f"{name} must be a CPU tensor, got device {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
    shape = t.shape
    n = PyTuple_GET_SIZE(shape)
    if ndim >= 0:
        if n != ndim:
            raise TypeError(f"{name} must be {ndim}-D, got shape {tuple(shape)}")
        for i in range(n):
            shape_out[i] = <Py_ssize_t>(<object>PyTuple_GET_ITEM(shape, i))
    else:
        shape_out[0] = t.numel()
    if code_out != NULL:
        code_out[0] = code
    p = <intptr_t>t.data_ptr()
    if p == 0:
        return <char*>shape_out   # empty tensor: never dereferenced, but must not be NULL
    return <char*>p


cdef IBuf check_index(object t, str name, int ndim, Py_ssize_t* shape_out) except *:
    """``check_tensor`` for an int32/int64 index buffer, returned as an ``IBuf``."""
    cdef IBuf b
    cdef int code = 0
    b.ptr = check_tensor(t, name, M_INDEX, ndim, &code, shape_out)
    b.wide = code == DT_INT64
    return b
