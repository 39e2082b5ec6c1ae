# cython: language_level=3
"""C-level view of torch buffers shared by every kernel module.

A kernel's Python wrapper validates its tensors once (device, dtype, contiguity, shape) with the
``check_*`` helpers below, turning each into a raw pointer; the ``nogil`` loop then only sees
pointers. Index/token buffers may be int32 or int64 independently of each other, so instead of a
fused type per buffer (2**n specialisations) they travel as an ``IBuf`` -- pointer plus width --
and are read/written with ``iget``/``iset``: the width branch is loop-invariant and perfectly
predicted. Fused types are used where one buffer's dtype selects the hot loop (float data).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t

ctypedef fused index_t:
    int32_t
    int64_t

ctypedef fused real_t:
    float
    double

# dtype codes (cheap to compare inside nogil code)
cdef enum:
    DT_OTHER = 0
    DT_INT32 = 1
    DT_INT64 = 2
    DT_FLOAT32 = 3
    DT_FLOAT64 = 4
    DT_BOOL = 5
    DT_UINT8 = 6
    DT_INT8 = 7
    DT_FLOAT16 = 8
    DT_BFLOAT16 = 9
    DT_UINT64 = 10     # raw addresses (vLLM allocates its pointer tables as uint64)

# allowed-dtype masks for check_tensor (bit i set <=> dtype code i accepted)
cdef enum:
    M_INT32 = 1 << 1
    M_INT64 = 1 << 2
    M_FLOAT32 = 1 << 3
    M_FLOAT64 = 1 << 4
    M_BOOL = 1 << 5
    M_UINT64 = 1 << 10
    M_INDEX = (1 << 1) | (1 << 2)
    M_REAL = (1 << 3) | (1 << 4)
    M_ANY = 0x7fffffff

cdef struct IBuf:
    char* ptr
    bint wide       # True: int64 elements, False: int32 elements

cdef inline int64_t iget(IBuf b, Py_ssize_t i) noexcept nogil:
    if b.wide:
        return (<int64_t*>b.ptr)[i]
    return (<int32_t*>b.ptr)[i]

cdef inline void iset(IBuf b, Py_ssize_t i, int64_t v) noexcept nogil:
    if b.wide:
        (<int64_t*>b.ptr)[i] = v
    else:
        (<int32_t*>b.ptr)[i] = <int32_t>v

cdef inline Py_ssize_t isize(IBuf b) noexcept nogil:
    """Bytes per element of an index buffer (8 for int64, 4 for int32)."""
    return 8 if b.wide else 4

cdef inline str expected(str name, str what, object got):
    """The one format of every ``kernels_cpu`` argument error, the argument first (numpy/torch
    style): ``<name>: expected <what>, got <got>``. The shared checks are in ``_checks.pxd``."""
    return f"{name}: expected {what}, got {got}"

cdef int dtype_code(object dtype) noexcept
cdef str dtype_name(int code)

cdef object dim_stride(object t, int d)
cdef char* check_tensor(object t, str name, int mask, int ndim, int* code_out,
                        Py_ssize_t* shape_out) except NULL
cdef char* check_table(object t, str name, int mask, Py_ssize_t* shape_out,
                       Py_ssize_t* row_stride_out, int* code_out) except NULL
cdef IBuf check_index(object t, str name, int ndim, Py_ssize_t* shape_out) except *
cdef char* check_rowed(object t, str name, int mask, Py_ssize_t row, str row_name,
                       int* code_out, Py_ssize_t* numel_out) except NULL
cdef bint is_none(object t) noexcept
