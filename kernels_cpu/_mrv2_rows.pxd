# cython: language_level=3
"""The launch grid and the logits-shaped tables of Model Runner V2's sampler kernels.

vLLM's sampler kernels (``vllm/v1/worker/gpu/sample/``) address a ``[tokens, vocab]`` buffer as
``ptr + token * stride + column`` with the stride passed as its own argument, and take the
number of tokens only from the launch grid. ``check_frows`` reads such a table of any dtype
mask (the float logits, an int32 packed bitmask, the int64 per-block argmax), the way
``_tables.check_rows`` reads an index table: a 2-D tensor is a table of its own rows (the
stride argument must be its ``stride(0)`` when it has more than one row), anything else a
contiguous flat buffer. ``need_frows`` then says whether the rows and columns a launch touches
are inside it.
"""
from libc.stdint cimport int64_t, uint16_t, uint32_t
from libc.string cimport memcpy

from kernels_cpu._buffers cimport (
    DT_BFLOAT16, DT_FLOAT16, DT_FLOAT32, DT_FLOAT64, IBuf, check_table, check_tensor, expected,
    iget,
)
from kernels_cpu._checks cimport as_int, need_min


cdef enum:
    M_FLOAT16 = 1 << DT_FLOAT16
    M_BFLOAT16 = 1 << DT_BFLOAT16
    M_LOGITS = (1 << DT_FLOAT32) | M_FLOAT16 | M_BFLOAT16      # logits as vLLM may pass them


cdef struct FRows:
    char* ptr
    int code              # dtype code (``_buffers.DT_*``)
    bint flat             # a flat buffer: ``numel`` bounds every read
    Py_ssize_t rows       # 2-D: its rows; flat: unused
    Py_ssize_t cols       # 2-D: its columns; flat: unused
    Py_ssize_t numel      # flat: its elements
    Py_ssize_t stride     # the caller's stride argument (elements between rows)


cdef inline FRows check_frows(object t, str name, int mask, object stride,
                              str stride_name) except *:
    """``t`` read at ``ptr + row * stride + col`` (module docstring); ``stride`` >= 0."""
    cdef FRows r
    cdef Py_ssize_t shape[3]
    cdef Py_ssize_t st0
    cdef int code = 0
    cdef int64_t st = as_int(stride, stride_name)
    need_min(stride_name, st, 0)
    r.stride = <Py_ssize_t>st
    if getattr(t, "ndim", None) == 2:
        r.ptr = check_table(t, name, mask, shape, &st0, &code)
        r.flat = False
        r.rows = shape[0]
        r.cols = shape[1]
        r.numel = shape[0] * shape[1]
        if r.rows > 1 and r.cols > 0 and st != st0:
            raise ValueError(expected(stride_name, f"{name}.stride(0) = {st0}", st))
    else:
        r.ptr = check_tensor(t, name, mask, -1, &code, shape)
        r.flat = True
        r.rows = 0
        r.cols = 0
        r.numel = shape[0]
    r.code = code
    return r


cdef inline int need_frows(FRows* r, str name, Py_ssize_t rows, Py_ssize_t cols,
                           bint written, str why) except -1:
    """Rows ``[0, rows)``, columns ``[0, cols)`` of ``r`` exist; rows that are ``written``
    must not overlap one another (a stride below ``cols``)."""
    if rows <= 0 or cols <= 0:
        return 0
    if written and rows > 1 and r.stride < cols:
        raise ValueError(expected(name, f"rows that do not overlap (stride >= {cols})",
                                  f"stride {r.stride}"))
    if r.flat:
        if (rows - 1) * r.stride + cols > r.numel:
            raise ValueError(expected(name, f"{rows} rows of {cols} elements, {r.stride} apart "
                                      f"({why}): {(rows - 1) * r.stride + cols} elements",
                                      r.numel))
    elif r.rows < rows or r.cols < cols:
        raise ValueError(expected(name, f"at least {rows} rows of {cols} columns ({why})",
                                  f"shape ({r.rows}, {r.cols})"))
    return 0


cdef inline int parse_grid(object grid, int axes, Py_ssize_t* out) except -1:
    """The launch grid, a tuple of 1-3 non-negative ints (missing axes 1), into ``out[0:3]``;
    axes past the ``axes`` the kernel reads must be 1 (another program on them would redo the
    in-place work). An axis of 0 launches nothing: ``out[0]`` is then 0."""
    cdef int k
    cdef int64_t g
    if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3:
        raise TypeError(expected("grid", "a tuple of 1 to 3 ints", repr(grid)))
    for k in range(3):
        if k < len(grid):
            g = as_int(grid[k], "grid")
            if g < 0:
                raise ValueError(expected("grid", "non-negative axes", repr(grid)))
        else:
            g = 1
        if k >= axes and g > 1:
            raise ValueError(expected("grid", f"1 program on axis {k} (the kernel reads "
                                      f"{axes} axes)", repr(grid)))
        out[k] = <Py_ssize_t>g
    if out[1] == 0 or out[2] == 0:       # no program runs at all
        out[0] = 0
    return 0


# -- element loads and the small checks the sampler kernels share ---------------------------------

cdef inline float _half_to_float(uint16_t h) noexcept nogil:
    """IEEE binary16 -> binary32, exactly (subnormals, infinities and NaNs included)."""
    cdef uint32_t sign = (<uint32_t>(h & 0x8000)) << 16
    cdef uint32_t exp = (h >> 10) & 0x1F
    cdef uint32_t man = h & 0x3FF
    cdef uint32_t bits
    cdef float f
    if exp == 0x1F:
        bits = sign | 0x7F800000 | (man << 13)
    elif exp != 0:
        bits = sign | ((exp + 112) << 23) | (man << 13)
    elif man == 0:
        bits = sign
    else:
        f = <float>man * <float>5.960464477539063e-08        # man * 2**-24, exact
        memcpy(&bits, &f, 4)
        bits |= sign
    memcpy(&f, &bits, 4)
    return f


cdef inline float load_f32(const char* p, int code, Py_ssize_t i) noexcept nogil:
    """Element ``i`` of a float32/bfloat16/float16 buffer, as the kernel's ``.to(tl.float32)``
    reads it (exact widening)."""
    cdef uint32_t bits
    cdef float f
    if code == DT_FLOAT32:
        return (<const float*>p)[i]
    if code == DT_BFLOAT16:
        bits = (<uint32_t>(<const uint16_t*>p)[i]) << 16
        memcpy(&f, &bits, 4)
        return f
    return _half_to_float((<const uint16_t*>p)[i])


cdef inline float load_real(const char* p, int code, Py_ssize_t i) noexcept nogil:
    """Element ``i`` of a float32/float64 buffer ``.to(tl.float32)`` (float64 rounded once)."""
    if code == DT_FLOAT64:
        return <float>(<const double*>p)[i]
    return (<const float*>p)[i]


cdef inline Py_ssize_t _cdiv(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return (a + b - 1) // b


cdef inline int64_t _request(IBuf mapping, Py_ssize_t t, Py_ssize_t have, str name,
                             str mapping_name) except? -1:
    """``mapping[t]``, a request index the kernel loads ``name`` at: in ``[0, have)``."""
    cdef int64_t r = iget(mapping, t)
    if r < 0 or r >= have:
        raise ValueError(expected(f"{mapping_name}[{t}]", f"a request index in [0, {have}) "
                                  f"({name} has {have} elements)", r))
    return r


cdef inline int _block_size(object value, str name, bint pow2_32=False) except -1:
    cdef int64_t bs = as_int(value, name)
    if pow2_32:
        if bs < 32 or (bs & (bs - 1)) != 0:
            raise ValueError(expected(name, "a power of two >= 32 (32 mask bits per word)", bs))
    else:
        need_min(name, bs, 1)
    return <int>bs if bs < (1 << 30) else (1 << 30)


cdef inline Py_ssize_t _cols(Py_ssize_t V, Py_ssize_t nb, Py_ssize_t bs) noexcept nogil:
    """Columns the ``nb`` blocks of ``bs`` reach in a row of ``V``."""
    if nb <= 0 or V <= 0:
        return 0
    if nb > V // bs + 1:
        return V
    return V if nb * bs > V else nb * bs
