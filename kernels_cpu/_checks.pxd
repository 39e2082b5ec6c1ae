# cython: language_level=3
"""The argument checks every kernel module shares, and the one place their messages are built.

Message style (numpy/torch-like), the argument first: ``<argument>: expected <what>, got <what>``,
built by ``_buffers.expected`` (cimport it from here), e.g. ``bonus_token_ids_ptr: expected at
least 2 elements (one per request), got 1`` or ``block_size: expected >= 1, got 0``. Every
function here reads metadata or validated buffers only and raises before anything is written.

All of them are ``cdef inline``: a module shares them by ``cimport`` (no runtime module behind
this file, as for ``_philox.pxd``).
"""
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int64_t

from kernels_cpu._buffers cimport (
    DT_BOOL, IBuf, M_BOOL, M_FLOAT32, check_index, check_rowed, check_tensor, dtype_code,
    expected, iget,
)


# -- scalars: the one parser of integer and flag arguments --------------------------------------

cdef inline str kind_of(object v):
    """What a refused scalar was, for its message: the type's name, with the dtype of a tensor."""
    dt = getattr(v, "dtype", None)
    if dt is not None and hasattr(v, "dim"):
        return f"a {dt} tensor"
    return type(v).__name__


cdef inline bint _is_bool_dtype(object v):
    dt = getattr(v, "dtype", None)
    return dt is not None and (dtype_code(dt) == DT_BOOL or type(v).__name__ in ("bool_", "bool"))


cdef inline int64_t as_int(object v, str name) except? -1:
    """An integer launch argument (a Triton ``int``/constexpr): a Python or numpy integer or a
    0-d integer tensor; not a bool, not a float -- not even an integral one, since Triton
    specialises a float argument as ``fp32`` and the kernel would compute with it as such.
    Refused: ``<name>: expected an int, got <type>``."""
    cdef int64_t out
    if type(v) is int:                  # the common case: no protocol lookups
        try:
            out = v
            return out
        except OverflowError:
            raise ValueError(expected(name, "an int that fits in int64", v)) from None
    if isinstance(v, bool) or isinstance(v, float):
        raise TypeError(expected(name, "an int", type(v).__name__))
    try:
        i = PyNumber_Index(v)
    except TypeError:
        raise TypeError(expected(name, "an int", kind_of(v))) from None
    if type(i) is bool or _is_bool_dtype(v):
        raise TypeError(expected(name, "an int", kind_of(v)))
    try:
        out = i
    except OverflowError:
        raise ValueError(expected(name, "an int that fits in int64", i)) from None
    return out


cdef inline int as_flag(object v, str name, int default) except -1:
    """A boolean launch flag (a ``tl.constexpr`` bool of the Triton kernel): ``True``/``False``,
    an integer 0 or 1 (a numpy or 0-d tensor one too), or ``None`` for ``default`` (what the
    other arguments imply). Anything else is refused -- a string, a float, 2 -- rather than
    read by truthiness: ``<name>: expected a bool, got <what>``."""
    if v is True or v is False:
        return v is True
    if v is None:
        return default
    if isinstance(v, float) or isinstance(v, str) or isinstance(v, bytes):
        raise TypeError(expected(name, "a bool", type(v).__name__))
    if _is_bool_dtype(v):
        if hasattr(v, "numel") and v.numel() != 1:
            raise TypeError(expected(name, "a bool", f"{kind_of(v)} of {v.numel()} elements"))
        return bool(v)
    try:
        i = PyNumber_Index(v)
    except TypeError:
        raise TypeError(expected(name, "a bool", kind_of(v))) from None
    if i != 0 and i != 1:
        raise ValueError(expected(name, "a bool (or 0/1)", repr(v)))
    return i == 1


cdef inline int need_count(str name, Py_ssize_t have, Py_ssize_t need, str why=None) except -1:
    """``name`` holds at least ``need`` elements (``why``: which ones the launch touches)."""
    if have < need:
        raise ValueError(expected(name, f"at least {need} elements" if why is None
                                  else f"at least {need} elements ({why})", have))
    return 0


cdef inline int need_rows(str name, Py_ssize_t have, Py_ssize_t rows, Py_ssize_t row,
                          str row_name, object t) except -1:
    """``name`` (the tensor ``t``) holds ``rows`` rows of ``row`` elements from its base
    pointer; the message gives its shape."""
    if have < rows * row:
        raise ValueError(expected(name, f"at least {rows} rows of {row_name} = {row} "
                                  f"({rows * row} elements)", f"shape {tuple(t.shape)}"))
    return 0


cdef inline int need_min(str name, int64_t value, int64_t low, str low_name=None) except -1:
    """An integer argument must be >= ``low`` (``low_name``: what ``low`` stands for)."""
    if value < low:
        raise ValueError(expected(name, f">= {low}" if low_name is None
                                  else f">= {low_name} = {low}", value))
    return 0


cdef inline IBuf index_at_least(object t, str name, Py_ssize_t need, str why=None) except *:
    """A contiguous int32/int64 buffer of any shape, checked, holding at least ``need``
    elements."""
    cdef Py_ssize_t shp[1]
    cdef IBuf b = check_index(t, name, -1, shp)
    need_count(name, shp[0], need, why)
    return b


cdef inline int required(object t, str name, str when) except -1:
    """An argument the launch's mode reads may not be None."""
    if t is None:
        raise ValueError(expected(name, f"a tensor {when}", None))
    return 0


cdef inline int prob_rows(object t, str name, Py_ssize_t T, Py_ssize_t V,
                          const float** out) except -1:
    """A float32 probability buffer read as ``T`` rows of ``vocab_size`` (``ptr + t * V + v``),
    as the rejection kernels and the recovered-token kernel read theirs."""
    cdef Py_ssize_t shp[1]
    out[0] = <const float*>check_rowed(t, name, M_FLOAT32, V, "vocab_size", NULL, shp)
    need_rows(name, shp[0], T, V, "vocab_size", t)
    return 0


cdef inline int no_overlap(str name, char* a, Py_ssize_t na, str other, char* b,
                           Py_ssize_t nb) except -1:
    """The ``na`` bytes written at ``a`` (argument ``name``) must not overlap the ``nb`` bytes at
    ``b`` (argument ``other``) whose values steer the kernel."""
    if na > 0 and nb > 0 and a < b + nb and b < a + na:
        raise ValueError(expected(name, f"memory that does not overlap {other}",
                                  "an overlap"))
    return 0


# -- inclusive cumulative offsets ---------------------------------------------------------------

cdef inline int64_t offset_start(IBuf cu, Py_ssize_t i) noexcept nogil:
    """Where request ``i`` starts in inclusive cumulative offsets ``cu``."""
    return 0 if i == 0 else iget(cu, i - 1)


cdef inline Py_ssize_t last_with_drafts(IBuf cu, Py_ssize_t B) noexcept nogil:
    """One past the last request of ``cu[0:B]`` with at least one token (0 when none has):
    the Triton grids read per-request rows of these requests only."""
    cdef Py_ssize_t i, last = 0
    for i in range(B):
        if iget(cu, i) > offset_start(cu, i):
            last = i + 1
    return last


cdef inline Py_ssize_t first_decrease(IBuf b, Py_ssize_t n) noexcept nogil:
    """Index of the first entry of ``b[0:n]`` smaller than its predecessor (or than 0 at i=0).

    Returns -1 when ``b[0:n]`` is non-negative and non-decreasing -- the shape every offset
    array (``query_start_loc``, inclusive cumulative counts) must have before a kernel may use
    it to index memory.
    """
    cdef Py_ssize_t i
    cdef int64_t prev = 0, v
    for i in range(n):
        v = iget(b, i)
        if v < prev:
            return i
        prev = v
    return -1


cdef inline int order_error(str name, IBuf b, Py_ssize_t at) except -1:
    """Raise for offsets ``b`` whose entry ``at`` is negative (``at == 0``) or smaller than its
    predecessor (what ``first_decrease`` finds)."""
    if at == 0:
        raise ValueError(expected(name, "non-negative offsets", f"[0] = {iget(b, 0)}"))
    raise ValueError(expected(name, "non-decreasing offsets",
                              f"[{at - 1}] = {iget(b, at - 1)}, [{at}] = {iget(b, at)}"))


cdef enum:
    OFFSETS_OK = 0
    OFFSETS_ORDER = 1     # an entry below its predecessor (the first one: below 0)
    OFFSETS_TOTAL = 2     # the last entry beyond the total it may reach


cdef inline int bounded_offsets(IBuf b, Py_ssize_t n, int64_t total,
                                Py_ssize_t* at) noexcept nogil:
    """Verdict on offsets ``b[0:n]``: non-negative, non-decreasing and ending at most at
    ``total`` (``OFFSETS_OK``), else the ``OFFSETS_*`` code with the offending entry in ``at``;
    ``offsets_error`` raises for it."""
    cdef Py_ssize_t r = first_decrease(b, n)
    if r >= 0:
        at[0] = r
        return OFFSETS_ORDER
    if n > 0 and iget(b, n - 1) > total:
        at[0] = n - 1
        return OFFSETS_TOTAL
    return OFFSETS_OK


cdef inline int offsets_error(int bad, str name, IBuf b, Py_ssize_t at, str total_name,
                              int64_t total) except -1:
    """Raise for a ``bounded_offsets`` verdict other than ``OFFSETS_OK``."""
    if bad == OFFSETS_ORDER:
        order_error(name, b, at)
    if bad == OFFSETS_TOTAL:
        raise ValueError(expected(f"{name}[{at}]", f"<= {total_name} = {total}", iget(b, at)))
    return 0


cdef inline int need_table_rows(str name, Py_ssize_t have, Py_ssize_t need, str why) except -1:
    """A table (``_tables.Rows``) must have at least ``need`` rows."""
    if have < need:
        raise ValueError(expected(name, f"at least {need} rows ({why})", have))
    return 0


cdef inline int need_within(str name, int64_t value, int64_t low, int64_t high,
                            str high_name) except -1:
    """An integer argument must lie in ``[low, high]`` (``high_name`` says what ``high`` is)."""
    if value < low or value > high:
        raise ValueError(expected(name, f"a value in [{low}, {high_name} = {high}]", value))
    return 0


cdef struct Extent:
    # What a launch touches, from its offsets (rows the kernel skips excluded)
    Py_ssize_t most       # largest per-request count
    Py_ssize_t tok_end    # one past the last token position read
    Py_ssize_t out_end    # one past the last output slot that may be written ([B, K + 1] rows)
    Py_ssize_t req_end    # one past the last request processed


cdef inline int measure_offsets(IBuf cu, Py_ssize_t B, Py_ssize_t K, const unsigned char* greedy,
                                int rows, str cu_name, Extent* e) except -1:
    """Check inclusive cumulative offsets and measure what a launch over them touches.

    ``cu`` must be non-negative and non-decreasing over all ``B`` entries (every program reads
    its predecessor's end). ``rows`` picks the requests the kernel processes: -1 all, 1 the
    greedy ones (all when ``greedy`` is NULL), 0 the non-greedy ones. A processed request may
    have at most ``K`` tokens when ``K >= 0`` (its output row has ``K + 1`` slots).
    """
    cdef Py_ssize_t i
    cdef int64_t prev = 0, c, n
    e.most = 0
    e.tok_end = 0
    e.out_end = 0
    e.req_end = 0
    for i in range(B):
        c = iget(cu, i)
        if c < prev:
            order_error(cu_name, cu, i)
        n = c - prev
        if rows < 0 or (greedy == NULL and rows == 1) or (
                greedy != NULL and (greedy[i] != 0) == (rows == 1)):
            if K >= 0 and n > K:
                raise ValueError(expected(cu_name, f"at most max_spec_len = {K} tokens per "
                                          f"request", f"{n} for request {i}"))
            if n > e.most:
                e.most = n
            if n > 0:
                e.tok_end = c
            if K >= 0:
                e.out_end = i * (K + 1) + n + 1
            e.req_end = i + 1
        prev = c
    return 0


cdef inline char* bool_at_least(object t, str name, Py_ssize_t need, str why=None,
                                Py_ssize_t* length=NULL) except NULL:
    """A contiguous bool buffer of any shape, checked, holding at least ``need`` elements (its
    element count to ``length`` when given)."""
    cdef Py_ssize_t shp[1]
    cdef char* p = check_tensor(t, name, M_BOOL, -1, NULL, shp)
    need_count(name, shp[0], need, why)
    if length != NULL:
        length[0] = shp[0]
    return p
