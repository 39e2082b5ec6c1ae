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

Faster still, and the path every exact ``torch.Tensor`` takes when torch offers it: the DLPack
exchange API (DLPack >= 1.3, ``torch.Tensor.__dlpack_c_exchange_api__``). Its
``dltensor_from_py_object_no_sync`` fills a stack ``DLTensor`` -- data pointer, device, dtype,
shape, strides -- from the tensor in one C call, without allocating; five torch getters and
methods become one. It is the standard's own interface for exactly this (a kernel launcher
reading a tensor it does not keep), so it is used as documented: the view is read before
control returns to Python. The module checks it against the attribute reads on a range of
tensors at import and uses it only if every answer agrees. A tensor the API refuses is not
read in place: the check raises, naming the argument. (Unlike the getters, the view does not
consult ``__torch_function__`` modes: a kernel reads the tensor's memory, whatever a mode
would report about it.)
"""
import torch

from cpython.object cimport PyObject, PyObject_TypeCheck, PyTypeObject, Py_TYPE
from cpython.ref cimport Py_XDECREF
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from libc.stdint cimport int32_t, int64_t, intptr_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.exc cimport PyErr_Fetch, PyErr_Clear
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid

cdef extern from *:
    """
    /* DLPack's C ABI (dlpack.h, v1.3): the structs read here, declared locally so that the
     * extension builds without torch's headers. Layouts are fixed by the standard. */
    typedef struct { int32_t device_type; int32_t device_id; } __kc_DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } __kc_DLDataType;
    typedef struct {
        void *data; __kc_DLDevice device; int32_t ndim; __kc_DLDataType dtype;
        int64_t *shape; int64_t *strides; uint64_t byte_offset;
    } __kc_DLTensor;
    typedef int (*__kc_view_fn)(void *py_object, __kc_DLTensor *out);
    typedef struct {
        uint32_t major; uint32_t minor; void *prev_api;          /* DLPackExchangeAPIHeader */
        void *managed_tensor_allocator;
        void *managed_tensor_from_py_object_no_sync;
        void *managed_tensor_to_py_object_no_sync;
        __kc_view_fn dltensor_from_py_object_no_sync;
        void *current_work_stream;
    } __kc_ExchangeAPI;
    """
    ctypedef struct DLDevice "__kc_DLDevice":
        int32_t device_type
    ctypedef struct DLDataType "__kc_DLDataType":
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor "__kc_DLTensor":
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef int (*view_fn "__kc_view_fn")(void* py_object, DLTensor* out) noexcept
    ctypedef struct ExchangeAPI "__kc_ExchangeAPI":
        uint32_t major
        uint32_t minor
        view_fn dltensor_from_py_object_no_sync

cdef enum:
    kDLCPU = 1
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLBfloat = 4
    kDLBool = 6

from fastdispatch._capi cimport (
    METH_KEYWORDS, METH_NOARGS, METH_VARARGS, PyGetSetDef, PyGetSetDescr_Type,
    PyGetSetDescrObject, PyMappingMethods, PyMethodDef, PyMethodDescr_Type, PyMethodDescrObject,
    _TypeMapping, _TypeTag, getter_fn, kwargs_fn, lenfunc, noargs_fn,
)

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
cdef noargs_fn _is_neg = NULL
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
    global _is_contiguous, _is_neg
    _tensor_tag = 0
    base_type = torch._C.TensorBase
    cdef dict base = dict(base_type.__dict__)
    names = ("dtype", "is_cpu", "shape", "ndim", "is_contiguous", "data_ptr", "is_neg")
    for name in names:
        # what ``t.<name>`` finds through torch.Tensor's MRO must be TensorBase's own descriptor
        if getattr(_Tensor, name, None) is not base.get(name):
            return False
    cdef PyMethodDef* contiguous = _method(base, "is_contiguous", METH_VARARGS | METH_KEYWORDS)
    cdef PyMethodDef* data_ptr = _method(base, "data_ptr", METH_NOARGS)
    cdef PyMethodDef* is_neg = _method(base, "is_neg", METH_NOARGS)
    _get_dtype = _getset(base, "dtype")
    _get_is_cpu = _getset(base, "is_cpu")
    _get_shape = _getset(base, "shape")
    _get_ndim = _getset(base, "ndim")
    cdef PyMappingMethods* mapping = (<_TypeMapping*><PyTypeObject*>base_type).tp_as_mapping
    _length = mapping.mp_length if mapping != NULL else NULL
    if (contiguous == NULL or data_ptr == NULL or is_neg == NULL or _get_dtype == NULL
            or _get_is_cpu == NULL
            or _get_shape == NULL or _get_ndim == NULL or _length == NULL):
        return False
    _is_contiguous = <kwargs_fn>contiguous.ml_meth
    _data_ptr = data_ptr.ml_meth
    _is_neg = is_neg.ml_meth
    _tensor_tag = (<_TypeTag*>_tensor_type).tp_version_tag
    return _tensor_tag != 0


cdef inline bint _direct(object t) except -1:
    """True when ``t``'s metadata may be read through the direct slots."""
    if Py_TYPE(t) != _tensor_type:
        return False
    if _tensor_tag != 0 and (<_TypeTag*>_tensor_type).tp_version_tag == _tensor_tag:
        return True
    return _verify_slots()


cdef int _check_not_negated(object t, str name, int code) except -1:
    """A float tensor may carry torch's lazy negation bit (``torch._neg_view``, or the imaginary
    part of a conjugated complex tensor): its memory then holds the values un-negated, and a
    kernel reading it in place would be silently wrong. Integer tensors get the bit only from
    torch's private ``_neg_view`` and are not checked (a call per index buffer)."""
    if code != DT_FLOAT32 and code != DT_FLOAT64 and code != DT_FLOAT16 and code != DT_BFLOAT16:
        return 0
    if _direct(t) and _is_neg != NULL:
        negated = _is_neg(t, NULL)
    else:
        negated = t.is_neg()
    if negated:
        raise ValueError(expected(name, f"a tensor without torch's lazy neg bit (pass "
                                  f"{name}.resolve_neg())", "a lazily negated view"))
    return 0


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
cdef object _strided = torch.strided
cdef object _u64 = getattr(torch, "uint64", None)

cdef tuple _NAMES = ("other", "int32", "int64", "float32", "float64", "bool", "uint8", "int8",
                     "float16", "bfloat16", "uint64")


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
    if dtype is _u64 and dtype is not None:
        return DT_UINT64
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
    (then ``shape_out`` receives only ``numel`` in slot 0), or -2 for any with the layout
    reported (``numel``, ``ndim``, size of the last dimension -- 1 for a 0-d tensor -- in slots
    0..2). shape_out: at least ``max(ndim, 3)`` slots.
    Raises TypeError (not a tensor / wrong dtype / wrong ndim) or ValueError (device,
    contiguity) naming ``name``. A zero-element tensor yields a non-NULL dummy pointer.
    """
    cdef DLTensor view
    if _view != NULL and Py_TYPE(t) == _tensor_type:
        if _view(<void*>t, &view) == 0:
            return _check_view(t, name, mask, ndim, code_out, shape_out, &view)
        return _check_refused(t, name, mask, ndim, code_out, shape_out)
    return _check_attrs(t, name, mask, ndim, code_out, shape_out)


#: (DLPack type code, bits, our dtype code) of every dtype a kernel reads, one table for the
#: lookup below; the kernels' most common dtypes first
cdef int _DL_CODES[30]
_DL_CODES[:] = [
    kDLInt, 32, DT_INT32, kDLInt, 64, DT_INT64, kDLFloat, 32, DT_FLOAT32, kDLBool, 8, DT_BOOL,
    kDLFloat, 64, DT_FLOAT64, kDLFloat, 16, DT_FLOAT16, kDLBfloat, 16, DT_BFLOAT16,
    kDLInt, 8, DT_INT8, kDLUInt, 8, DT_UINT8, kDLUInt, 64, DT_UINT64,
]


cdef int _view_code(DLDataType dt) noexcept:
    """Our dtype code for a DLPack dtype (DT_OTHER for anything we never read)."""
    cdef int i
    if dt.lanes != 1:
        return DT_OTHER
    for i in range(0, 30, 3):
        if dt.code == _DL_CODES[i] and dt.bits == _DL_CODES[i + 1]:
            return _DL_CODES[i + 2]
    return DT_OTHER


cdef bint _view_contiguous(DLTensor* v, int64_t* numel_out) noexcept:
    """torch's ``is_contiguous()`` rule on a view: row-major strides, size-1 dimensions free,
    an empty tensor contiguous."""
    cdef int i
    cdef int64_t numel = 1, expected = 1
    for i in range(v.ndim):
        numel *= v.shape[i]
    numel_out[0] = numel
    if numel == 0 or v.strides == NULL:
        return True
    for i in range(v.ndim - 1, -1, -1):
        if v.shape[i] != 1:
            if v.strides[i] != expected:
                return False
            expected *= v.shape[i]
    return True


cdef int _view_kind(object t, str name, int mask, DLTensor* v) except -1:
    """The view's dtype code, after the dtype and device checks every reader makes first (the
    error paths read the tensor's attributes for their messages)."""
    cdef int code = _view_code(v.dtype)
    if code == DT_OTHER or not (mask & (1 << code)):
        raise TypeError(expected(name, f"dtype {_allowed(mask)}", t.dtype))
    if v.device.device_type != kDLCPU:
        raise ValueError(expected(name, "a CPU tensor", f"device {t.device}"))
    return code


cdef inline char* _data_or(intptr_t p, void* dummy) noexcept:
    """``p``, or a non-NULL dummy for an empty tensor (never dereferenced, but NULL is the
    error return of the checks)."""
    return <char*>p if p != 0 else <char*>dummy


cdef char* _check_view(object t, str name, int mask, int ndim, int* code_out,
                       Py_ssize_t* shape_out, DLTensor* v) except NULL:
    """``check_tensor`` on the DLPack view of an exact ``torch.Tensor`` (same checks, same
    errors as the attribute reader)."""
    cdef int code = _view_kind(t, name, mask, v)
    cdef int64_t numel
    cdef int i
    if not _view_contiguous(v, &numel):
        raise ValueError(expected(name, "a contiguous tensor", f"strides {t.stride()}"))
    _check_not_negated(t, name, code)
    if ndim >= 0:
        if v.ndim != ndim:
            raise TypeError(expected(name, f"a {ndim}-D tensor", f"shape {tuple(t.shape)}"))
        for i in range(ndim):
            shape_out[i] = <Py_ssize_t>v.shape[i]
    else:
        shape_out[0] = <Py_ssize_t>numel
        if ndim == -2:
            shape_out[1] = v.ndim
            shape_out[2] = <Py_ssize_t>v.shape[v.ndim - 1] if v.ndim > 0 else 1
    if code_out != NULL:
        code_out[0] = code
    return _data_or(<intptr_t>v.data + <intptr_t>v.byte_offset, shape_out)


cdef char* _check_refused(object t, str name, int mask, int ndim, int* code_out,
                          Py_ssize_t* shape_out) except NULL:
    """The exchange API refused an exact tensor. If the ordinary checks refuse it too, their
    error stands; if they would accept it, torch has a reason not to hand out its memory as a
    plain strided view: raise, naming the argument and giving torch's reason."""
    cdef PyObject* kind = NULL
    cdef PyObject* value = NULL
    cdef PyObject* tb = NULL
    PyErr_Fetch(&kind, &value, &tb)
    reason = "" if value == NULL else str(<object>value)
    Py_XDECREF(kind)
    Py_XDECREF(value)
    Py_XDECREF(tb)
    _check_attrs(t, name, mask, ndim, code_out, shape_out)
    raise ValueError(expected(name, "a tensor torch lets a kernel read in place",
                              reason or "refused by torch"))


cdef char* _check_attrs(object t, str name, int mask, int ndim, int* code_out,
                        Py_ssize_t* shape_out) except NULL:
    """``check_tensor`` through torch's attribute getters (subclasses, a torch without the
    exchange API, or a tensor the API refused). A tensor torch cannot describe as a dense
    strided buffer (sparse, nested, ...) is refused naming the argument, whichever of torch's
    metadata reads gives up first."""
    try:
        _require_dense(t, name)
        return _check_attrs_dense(t, name, mask, ndim, code_out, shape_out)
    except RuntimeError as exc:
        raise _not_dense(name, exc) from exc


cdef int _require_dense(object t, str name) except -1:
    if not isinstance(t, _Tensor):
        raise TypeError(expected(name, "a torch.Tensor", type(t).__name__))
    if t.layout is not _strided:
        raise ValueError(expected(name, "a dense strided tensor", f"layout {t.layout}"))
    return 0


cdef object _not_dense(str name, object exc):
    """torch gave up describing the tensor's buffer (a nested tensor, a sparse CSR one, ...)."""
    return ValueError(expected(name, "a dense strided tensor",
                               f"one torch cannot describe as such ({exc})"))


cdef char* _check_attrs_dense(object t, str name, int mask, int ndim, int* code_out,
                              Py_ssize_t* shape_out) except NULL:
    cdef int code
    cdef object dtype
    cdef bint direct = _direct(t)
    dtype = _get_dtype.get(t, _get_dtype.closure) if direct else t.dtype
    code = dtype_code(dtype)
    if code == DT_OTHER or not (mask & (1 << code)):
        raise TypeError(expected(name, f"dtype {_allowed(mask)}", dtype))
    if not (_get_is_cpu.get(t, _get_is_cpu.closure) if direct else t.is_cpu):
        raise ValueError(expected(name, "a CPU tensor", f"device {t.device}"))
    if not (_is_contiguous(t, _no_args, NULL) if direct else t.is_contiguous()):
        raise ValueError(expected(name, "a contiguous tensor", f"strides {t.stride()}"))
    _check_not_negated(t, name, code)
    if direct and (ndim == 1 or ndim < 0) and _get_ndim.get(t, _get_ndim.closure) == 1:
        # 1-D (asked for, or any ndim accepted): size(0), which is also numel, from the length
        # slot without building a torch.Size
        shape_out[0] = _length(t)
        if ndim == -2:
            shape_out[1] = 1
            shape_out[2] = shape_out[0]
    else:
        _check_shape(t, name, ndim, direct, shape_out)
    if code_out != NULL:
        code_out[0] = code
    return _data_or(<intptr_t>(_data_ptr(t, NULL) if direct else t.data_ptr()), shape_out)


cdef int _check_shape(object t, str name, int ndim, bint direct, Py_ssize_t* shape_out) except -1:
    cdef object shape
    cdef Py_ssize_t i, n, numel
    shape = _get_shape.get(t, _get_shape.closure) if direct else t.shape
    if not isinstance(shape, tuple):
        # a subclass's ``shape`` may be any sequence; the macros below need a tuple
        try:
            shape = tuple(shape)
        except TypeError:
            raise TypeError(expected(name, "a tensor whose shape is a sequence",
                                     type(shape).__name__)) from None
    n = PyTuple_GET_SIZE(shape)
    if ndim >= 0:
        if n != ndim:
            raise TypeError(expected(name, f"a {ndim}-D tensor", f"shape {tuple(shape)}"))
        for i in range(n):
            shape_out[i] = <Py_ssize_t>(<object>PyTuple_GET_ITEM(shape, i))
    else:
        numel = 1
        for i in range(n):
            numel *= <Py_ssize_t>(<object>PyTuple_GET_ITEM(shape, i))
        shape_out[0] = numel
        if ndim == -2:
            shape_out[1] = n
            shape_out[2] = <Py_ssize_t>(<object>PyTuple_GET_ITEM(shape, n - 1)) if n > 0 else 1
    return 0


cdef char* check_table(object t, str name, int mask, Py_ssize_t* shape_out,
                       Py_ssize_t* row_stride_out, int* code_out) except NULL:
    """Validate a 2-D table whose columns are unit-stride and whose rows may be any distance
    apart (a column slice of a wider buffer); return its data pointer.

    shape_out: 2 slots (rows, cols). row_stride_out: elements between rows (``cols`` when the
    table is contiguous). Errors name ``name``, as ``check_tensor``'s do.
    """
    cdef DLTensor view
    cdef int code
    if _view != NULL and Py_TYPE(t) == _tensor_type:
        if _view(<void*>t, &view) != 0:
            return _check_refused(t, name, mask, 2, code_out, shape_out)   # always raises
        code = _view_kind(t, name, mask, &view)
        if view.ndim != 2:
            raise TypeError(expected(name, "a 2-D tensor", f"shape {tuple(t.shape)}"))
        shape_out[0] = <Py_ssize_t>view.shape[0]
        shape_out[1] = <Py_ssize_t>view.shape[1]
        # torch calls an empty or one-row table contiguous whatever its strides say
        if view.strides == NULL or shape_out[0] == 0 or shape_out[1] == 0:
            row_stride_out[0] = shape_out[1]
        else:
            if shape_out[1] > 1 and view.strides[1] != 1:
                raise ValueError(expected(name, "contiguous rows (stride(1) == 1)",
                                          f"strides {t.stride()}"))
            row_stride_out[0] = (shape_out[1] if shape_out[0] == 1
                                 else <Py_ssize_t>view.strides[0])
        if code_out != NULL:
            code_out[0] = code
        return _data_or(<intptr_t>view.data + <intptr_t>view.byte_offset, shape_out)
    try:
        _require_dense(t, name)
        return _check_table_attrs(t, name, mask, shape_out, row_stride_out, code_out)
    except RuntimeError as exc:
        raise _not_dense(name, exc) from exc


cdef char* _check_table_attrs(object t, str name, int mask, Py_ssize_t* shape_out,
                              Py_ssize_t* row_stride_out, int* code_out) except NULL:
    cdef int code
    cdef object strides
    code = dtype_code(t.dtype)
    if code == DT_OTHER or not (mask & (1 << code)):
        raise TypeError(expected(name, f"dtype {_allowed(mask)}", t.dtype))
    if not t.is_cpu:
        raise ValueError(expected(name, "a CPU tensor", f"device {t.device}"))
    shape = t.shape
    if len(shape) != 2:
        raise TypeError(expected(name, "a 2-D tensor", f"shape {tuple(shape)}"))
    shape_out[0] = shape[0]
    shape_out[1] = shape[1]
    if t.is_contiguous():
        row_stride_out[0] = shape_out[1]
    else:
        strides = t.stride()
        if shape_out[1] > 1 and strides[1] != 1:
            raise ValueError(expected(name, "contiguous rows (stride(1) == 1)",
                                      f"strides {strides}"))
        row_stride_out[0] = strides[0]
    if code_out != NULL:
        code_out[0] = code
    return _data_or(<intptr_t>t.data_ptr(), shape_out)


cdef IBuf check_index(object t, str name, int ndim, Py_ssize_t* shape_out) except *:
    """``check_tensor`` for an int32/int64 index buffer, returned as an ``IBuf``."""
    cdef IBuf b
    cdef int code = 0
    b.ptr = check_tensor(t, name, M_INDEX, ndim, &code, shape_out)
    b.wide = code == DT_INT64
    return b


cdef char* check_rowed(object t, str name, int mask, Py_ssize_t row, str row_name,
                       int* code_out, Py_ssize_t* numel_out) except NULL:
    """A buffer the kernel reads as rows of ``row`` elements from its base pointer (an output
    ``[B, K + 1]``, probabilities ``[T, V]``); its element count goes to ``numel_out[0]``.

    Any contiguous tensor is such a buffer (a Triton kernel sees only the pointer), except a 2-D
    one whose rows have another length: its own rows are not the rows the kernel reads, so the
    launch would be wrong wherever it landed. Whether it is large enough is the caller's check.
    """
    cdef Py_ssize_t shp[3]
    cdef char* p = check_tensor(t, name, mask, -2, code_out, shp)
    if shp[1] == 2 and shp[2] != row and shp[0] > 0:
        raise ValueError(expected(name, f"rows of {row_name} = {row} elements",
                                  f"shape {tuple(t.shape)}"))
    numel_out[0] = shp[0]
    return p


# -- the exchange-API reader ----------------------------------------------------------------------

cdef view_fn _view = NULL          # torch's dltensor_from_py_object_no_sync, once verified
cdef bint _view_strides = False    # and its strides are torch's, size-1 dimensions' too
cdef object _exchange_capsule = None   # keeps the API's capsule (and so the struct) alive


def _check_view_reader():
    """Enable the DLPack view reader if torch offers it (v1.x, x >= 3) and it agrees with the
    attribute reads on every sample tensor: dtype, device, contiguity, shape, data pointer."""
    global _view, _exchange_capsule, _view_strides
    cdef ExchangeAPI* api
    cdef view_fn fn
    cdef DLTensor v
    cdef int64_t numel
    cdef int i
    _view = NULL
    _view_strides = False
    capsule = getattr(_Tensor, "__dlpack_c_exchange_api__", None)
    if capsule is None or not PyCapsule_IsValid(capsule, b"dlpack_exchange_api"):
        return False
    api = <ExchangeAPI*>PyCapsule_GetPointer(capsule, b"dlpack_exchange_api")
    if api == NULL or api.major != 1 or api.minor < 3 or api.dltensor_from_py_object_no_sync == NULL:
        return False
    fn = api.dltensor_from_py_object_no_sync
    base = torch.arange(24, dtype=torch.int64)
    samples = [
        base, base[3:], base[::2], base.view(2, 3, 4), base.view(2, 3, 4)[:, 1:, :],
        base.view(4, 6).t(), base.view(4, 6)[:, :1], base.view(24, 1), base[5:6].view(1, 1),
        torch.zeros(0, dtype=torch.int32), torch.zeros(3, 0, dtype=torch.int64),
        torch.tensor(7, dtype=torch.int32), torch.zeros(5, dtype=torch.int32)[1:],
        torch.zeros(4, dtype=torch.float32), torch.zeros(4, dtype=torch.float64)[2:],
        torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.uint8),
        torch.zeros(4, dtype=torch.int8), torch.zeros(4, dtype=torch.float16),
        torch.zeros(4, dtype=torch.bfloat16), torch.zeros(2, 3, dtype=torch.float32).expand(4, 2, 3),
        torch.zeros(3, requires_grad=True), base.view(4, 6)[1:2, 1:4], base.view(2, 12)[:1],
        torch.zeros(5, 7)[:, 3:4], torch.zeros(1, 1, dtype=torch.int32),
    ]
    strides = True
    for t in samples:
        if Py_TYPE(t) != _tensor_type or fn(<void*>t, &v) != 0:
            PyErr_Clear()
            return False
        if _view_code(v.dtype) != dtype_code(t.dtype) or (v.device.device_type == kDLCPU) != t.is_cpu:
            return False
        if _view_contiguous(&v, &numel) != t.is_contiguous() or numel != t.numel():
            return False
        if tuple([v.shape[i] for i in range(v.ndim)]) != tuple(t.shape):
            return False
        if t.numel() and <intptr_t>v.data + <intptr_t>v.byte_offset != t.data_ptr():
            return False
        # a DLPack producer may normalise a size-1 dimension's stride: trusted only if not
        strides = strides and v.strides != NULL and tuple(
            [v.strides[i] for i in range(v.ndim)]) == tuple(t.stride())
    _exchange_capsule = capsule
    _view = fn
    _view_strides = strides
    return True


cdef object dim_stride(object t, int d):
    """``t.stride(d)`` (0 where ``t`` has no dimension ``d``): from the DLPack view where its
    strides were found to be torch's (``_check_view_reader``) -- ~4x cheaper than the method
    call, which a launch checking twenty tables pays twenty times -- else asked of ``t``."""
    cdef DLTensor view
    if _view != NULL and _view_strides and Py_TYPE(t) == _tensor_type:
        if _view(<void*>t, &view) == 0:
            if view.strides != NULL:
                return view.strides[d] if 0 <= d < view.ndim else 0
        else:
            PyErr_Clear()
    if getattr(t, "ndim", 0) <= d:
        return 0
    return t.stride(d)


def _dim_stride(t, int d):
    """``dim_stride`` from Python (tests)."""
    return dim_stride(t, d)


def _view_strides_trusted():
    """Whether ``dim_stride`` reads the DLPack view's strides (tests)."""
    return bool(_view_strides)


def _view_reader_enabled():
    """Whether exact tensors are read through the DLPack exchange API (for tests)."""
    return _view != NULL


def _set_view_reader(bint enabled):
    """Turn the DLPack view reader off or (re-verified) on; returns whether it is on (tests)."""
    global _view, _view_strides
    if not enabled:
        _view = NULL
        _view_strides = False
        return False
    return _check_view_reader()


_check_view_reader()


def _inspect(t, str name="t", int mask=M_ANY, int ndim=-1):
    """``check_tensor`` from Python, for tests: ``(dtype code, shape or (numel,), data pointer)``
    or the error the kernels would raise."""
    cdef Py_ssize_t shape[8]
    cdef int code = 0
    if ndim > 8:
        raise ValueError(expected("ndim", "<= 8", ndim))
    p = <intptr_t>check_tensor(t, name, mask, ndim, &code, shape)
    dims = tuple([shape[i] for i in range(ndim if ndim >= 0 else 1)])
    return code, dims, (p if p != <intptr_t>shape else 0)


def _inspect_table(t, str name="t", int mask=M_ANY):
    """``check_table`` from Python, for tests: ``(dtype code, (rows, cols), row stride,
    data pointer)`` or the error the kernels would raise."""
    cdef Py_ssize_t shape[2]
    cdef Py_ssize_t stride = 0
    cdef int code = 0
    p = <intptr_t>check_table(t, name, mask, shape, &stride, &code)
    return code, (shape[0], shape[1]), stride, (p if p != <intptr_t>shape else 0)
