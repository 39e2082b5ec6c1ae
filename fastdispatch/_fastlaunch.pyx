# cython: language_level=3, binding=True
"""Fast launches of real Triton kernels: the compiled hot path of ``fastdispatch.fast_launch``.

Read ``fastdispatch/_fastlaunch_planner.py`` first: it explains what the key holds, why it is
safe (every new key is launched and verified against Triton's own binder by the shared slow path,
``KernelState.launch_slow``; every new cache entry's first launch learns the launcher's inner
call, ``KernelState.first_launch``) and what goes to Triton's path. This module does, in C, what
the twin's ``FastLaunch.launch`` (``_fastlaunch_py.py``) does for a launch our cache can serve
-- bind the arguments into a stack array, derive the key (one feature byte per parameter, a tail
for constexprs, options and knobs), look the compiled kernel up and call its launcher -- and
hands everything else to the shared slow path.

One read is cheaper here than in the twin, with the same result: when Triton's driver reads
the device with ``torch.cuda.current_device`` and torch's CUDA state is initialised, the device
comes from ``torch._C._cuda_getDevice()``, which is what that function returns after its (then
no-op) lazy-init check. An exact ``torch.Tensor``'s ``.dtype`` and ``data_ptr()`` are torch's
own C getter and method, called directly (no attribute lookup, no bound method) while
``torch.Tensor`` is unchanged (its type version tag); a reader through torch's DLPack exchange API
(one C call per tensor) was measured on the H200 host and was no faster with torch 2.11
(``docs/gpu_launch.md``).

Triton is never imported here: the shared ``_Triton`` imports it lazily, so the extension
builds and imports without Triton or a GPU.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.list cimport PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.string cimport memcmp, memcpy

from . import _fastlaunch_planner as _cold

from ._capi cimport (
    METH_KEYWORDS, METH_NOARGS, METH_VARARGS, PyGetSetDef, PyGetSetDescr_Type,
    PyGetSetDescrObject, PyLong_AsUnsignedLongLongMask, PyMethodDef, PyMethodDescr_Type,
    PyMethodDescrObject, _TypeTag, getter_fn, noargs_fn,
)
from ._capi cimport _PyObject_Call_raw as PyObject_Call

__all__ = ["FastLaunch", "direct_tensor_reads"]

cdef enum:
    CODE_NONE = 0x01
    CODE_BOOL = 0x02
    CODE_FLOAT = 0x03
    CODE_CONSTEXPR = 0x04
    CODE_TUPLE = 0x05
    CODE_INT = 0x10
    CODE_TENSOR = 0x20
    MAX_PARAMS = 256
    MAX_TAIL = 1024
    # feature bytes of one key: at most two per parameter, plus what tuple arguments take --
    # a tuple's codes may reach TUPLE_LIMIT and no further, so the parameters after the last
    # tuple (two bytes each at most) always fit and the per-parameter path needs no bound check
    MAX_CODES = 6 * MAX_PARAMS
    TUPLE_LIMIT = MAX_CODES - 2 * MAX_PARAMS
    MAX_NEST = 8  # tuples inside tuples the key walk can hold (the planner's MAX_DEPTH, at most)

cdef object _MISSING = _cold._MISSING
cdef dict _DTYPE_INDEX = _cold._DTYPE_INDEX
cdef object _dtype_index = _cold.dtype_index
cdef object _tagged = _cold._tagged
cdef type _int = int
cdef type _bool = bool
cdef type _float = float
cdef type _str = str
cdef type _tuple = tuple
cdef Py_ssize_t _MAX_TUPLE = _cold.MAX_TUPLE
cdef int _MAX_DEPTH = _cold.MAX_DEPTH
if not 0 < _MAX_DEPTH <= MAX_NEST:
    raise ImportError(f"fastdispatch._fastlaunch: MAX_DEPTH {_MAX_DEPTH} outside 1..{MAX_NEST}")

# -- tensor reads through torch's own C getters ----------------------------------------------------
# ``t.dtype`` and ``t.data_ptr()`` of an exact ``torch.Tensor`` call two C functions of torch's
# (a getset getter, a METH_NOARGS method); reaching them costs an attribute lookup and, for the
# method, a bound-method call. We call the same functions directly, while ``torch.Tensor``'s type
# version tag is the one under which both names were seen to resolve to those descriptors (any
# change to the class changes the tag: looked up again then).

cdef PyTypeObject* _tensor_type = NULL
cdef unsigned int _tensor_tag = 0
cdef PyGetSetDef* _get_dtype = NULL
cdef noargs_fn _data_ptr = NULL


cdef bint _verify_slots() except -1:
    global _tensor_type, _tensor_tag, _get_dtype, _data_ptr
    _tensor_tag = 0
    import torch

    _tensor_type = <PyTypeObject*>torch.Tensor
    cdef dict base = dict(torch._C.TensorBase.__dict__)
    for name in ("dtype", "data_ptr"):
        if getattr(torch.Tensor, name, None) is not base.get(name):
            return False
    d = base["dtype"]
    m = base["data_ptr"]
    if Py_TYPE(d) != &PyGetSetDescr_Type or Py_TYPE(m) != &PyMethodDescr_Type:
        return False
    cdef PyMethodDef* md = (<PyMethodDescrObject*><PyObject*>m).d_method
    if (md.ml_flags & (METH_NOARGS | METH_VARARGS | METH_KEYWORDS)) != METH_NOARGS:
        return False
    _get_dtype = (<PyGetSetDescrObject*><PyObject*>d).d_getset
    _data_ptr = md.ml_meth
    _tensor_tag = (<_TypeTag*>_tensor_type).tp_version_tag
    return _tensor_tag != 0


cdef bint _direct_on = True


def direct_tensor_reads(bint enabled=True):
    """Turn the direct tensor reads (see above) off, or on again (re-checked against
    ``torch.Tensor`` now); returns whether they are on. Off, tensors are read by attribute."""
    global _direct_on
    _direct_on = enabled
    return enabled and _verify_slots()


cdef inline bint _direct(object t) except -1:
    if not _direct_on or <PyTypeObject*>Py_TYPE(t) != _tensor_type or _tensor_type == NULL:
        return False
    if _tensor_tag != 0 and (<_TypeTag*>_tensor_type).tp_version_tag == _tensor_tag:
        return True
    return _verify_slots()

cdef class _GridLaunch:
    """``fl[grid]``: the callable Triton's ``kernel[grid]`` returns."""

    cdef readonly FastLaunch owner
    cdef readonly object grid

    def __cinit__(self, FastLaunch owner, object grid):
        self.owner = owner
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return self.owner._launch(self.grid, args, kwargs)


cdef class FastLaunch:
    """A Triton kernel launched through our key and cache; see ``_fastlaunch_py.FastLaunch``.

    ``fl[grid](*args, **kw)`` and ``fl.run(*args, grid=..., warmup=..., **kw)`` behave as the
    kernel's; ``arg_names``/``constexprs``/``params`` are the kernel's, so launch owners and the
    registry treat it as a kernel; other attributes are the kernel's own.
    """

    cdef readonly object kernel
    cdef readonly object fn
    cdef readonly object arg_names
    cdef readonly object constexprs
    cdef readonly object params
    cdef readonly object state
    cdef readonly object passthrough
    # copies of the state's fields, read once
    cdef object _jit
    cdef dict _cache
    cdef dict _index
    cdef tuple _names
    cdef tuple _defaults
    cdef bytes _constexpr
    cdef Py_ssize_t _n
    cdef object _driver_cfg
    cdef object _runtime
    cdef object _hookchain
    cdef object _tensor
    cdef object _parameter
    cdef tuple _readers
    cdef bint _disabled
    cdef bint _stages_knob
    cdef object _torch_current_device
    cdef object _torch_get_device
    cdef object _torch_cuda
    cdef tuple _memo  # (key, entry) of the last launch served from the cache
    cdef object _last_grid
    cdef object _last_gl

    def __init__(self, kernel):
        self.kernel = kernel
        self.fn = kernel
        self.arg_names = getattr(kernel, "arg_names", None)
        self.state, self.passthrough = _cold.support(kernel)  # shared with the twin
        if self.state is None:
            return
        st = self.state
        if len(st.names) > MAX_PARAMS:
            st.disabled = f"more than {MAX_PARAMS} parameters"
        self.constexprs = kernel.constexprs
        self.params = kernel.params
        self._jit = kernel
        self._cache = st.cache
        self._index = st.index
        self._names = st.names
        self._defaults = st.defaults
        self._constexpr = bytes(bytearray(st.is_constexpr))
        self._n = len(st.names)
        T = _cold._Triton
        self._driver_cfg = T.driver_cfg
        self._runtime = st.runtime
        self._hookchain = T.HookChain
        self._tensor = T.Tensor
        self._parameter = T.Parameter
        self._stages_knob = st.runtime is not None and hasattr(
            st.runtime, "add_stages_inspection_hook"
        )
        import torch

        self._torch_cuda = torch.cuda
        self._torch_current_device = getattr(torch.cuda, "current_device", None)
        self._torch_get_device = getattr(torch._C, "_cuda_getDevice", None)
        if _tensor_type == NULL:
            _verify_slots()
        self._refresh()

    cdef inline void _refresh(self):
        st = self.state
        self._readers = st.knob_readers
        self._disabled = st.disabled is not None

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    def __repr__(self):
        return f"fast_launch({self.kernel!r})"

    def __getitem__(self, grid):
        # the same grid object (a constant tuple at a call site) gets the same launch object
        if grid is self._last_grid:
            return self._last_gl
        gl = _GridLaunch(self, grid)
        self._last_gl = gl
        self._last_grid = grid
        return gl

    def run(self, *args, grid, warmup, **kwargs):
        if warmup or self.state is None:
            return self.kernel.run(*args, grid=grid, warmup=warmup, **kwargs)
        return self._launch(grid, args, kwargs)

    def stats(self):
        """This kernel's fast-launch record (``_fastlaunch_planner.state_stats``): whether the
        fast path serves it, the entries cached, Triton's own launches, and every fallback by
        reason; a pass-through says why it is one."""
        if self.state is None:
            return {
                "kernel": repr(self.kernel), "fast_path": False, "pass_through": self.passthrough
            }
        return _cold.state_stats(self.state)

    def _derive_key(self, device, vals, opts):
        """The compiled key derivation from Python (for tests): ``vals`` every parameter's
        value, ``opts`` a list of ``(name, value)`` options. None: not one we key on."""
        cdef PyObject* v[MAX_PARAMS]
        cdef Py_ssize_t i
        if self.state is None or len(vals) != self._n:
            raise ValueError("vals must hold one value per kernel parameter")
        vals = tuple(vals)
        for i in range(self._n):
            v[i] = PyTuple_GET_ITEM(vals, i)
        return self._key(device, v, list(opts) or None, None)

    cdef object _slow(self, object grid, tuple args, dict kwargs, object key, str why):
        self._memo = None
        try:
            return self.state.launch_slow(grid, args, kwargs, key, why)
        finally:
            self._refresh()

    cdef bint _hooks_clear(self) except -1:
        rt = self._runtime
        h = rt.launch_enter_hook
        if h is not None and (type(h) is not self._hookchain or h.calls):
            return False
        h = rt.launch_exit_hook
        if h is not None and (type(h) is not self._hookchain or h.calls):
            return False
        if self._stages_knob and rt.add_stages_inspection_hook is not None:
            return False
        jit = self._jit
        hooks = jit.pre_run_hooks
        if type(hooks) is not list or PyList_GET_SIZE(hooks):
            return False
        cdef dict used = jit.used_global_vals
        cdef Py_ssize_t pos = 0
        cdef PyObject* k
        cdef PyObject* v
        cdef PyObject* cur
        while PyDict_Next(used, &pos, &k, &v):
            name = (<tuple>k)[0]
            val = (<tuple>v)[0]
            g = (<tuple>v)[1]
            cur = PyDict_GetItem(g, name)
            if cur == NULL or (<object>cur is not val and <object>cur != val):
                return False
        return True

    cdef object _launch(self, object grid, tuple args, dict kwargs):
        if self.state is None:
            if kwargs:
                return self.kernel[grid](*args, **kwargs)
            return self.kernel[grid](*args)
        if self._disabled:
            return self._slow(grid, args, kwargs, None, "disabled")
        drv = self._driver_cfg._active
        if drv is None:
            return self._slow(grid, args, kwargs, None, "no active driver yet")
        if not self._hooks_clear():
            return self._slow(grid, args, kwargs, None, "hooks set or globals changed")

        cdef Py_ssize_t n = self._n
        cdef Py_ssize_t nargs = PyTuple_GET_SIZE(args)
        cdef Py_ssize_t i
        cdef PyObject* vals[MAX_PARAMS]  # borrowed: args, kwargs and defaults outlive the launch
        if nargs > n:
            return self._slow(grid, args, kwargs, None, "too many arguments")
        for i in range(nargs):
            vals[i] = PyTuple_GET_ITEM(args, i)
        for i in range(nargs, n):
            vals[i] = NULL
        cdef list opts = None
        cdef Py_ssize_t pos = 0
        cdef PyObject* pk
        cdef PyObject* pv
        cdef PyObject* pidx
        cdef Py_ssize_t idx
        if kwargs:
            while PyDict_Next(kwargs, &pos, &pk, &pv):
                pidx = PyDict_GetItem(self._index, <object>pk)
                if pidx == NULL:
                    if opts is None:
                        opts = []
                    opts.append((<object>pk, <object>pv))
                    continue
                idx = <Py_ssize_t><object>pidx
                if idx < nargs:
                    return self._slow(grid, args, kwargs, None, "an argument given twice")
                vals[idx] = pv
        for i in range(nargs, n):
            if vals[i] == NULL:
                vals[i] = PyTuple_GET_ITEM(self._defaults, i)
                if <object>vals[i] is _MISSING:
                    return self._slow(grid, args, kwargs, None, "a missing argument")

        gd = drv.get_current_device
        if gd is self._torch_current_device and self._torch_cuda._initialized:
            device = self._torch_get_device()
        else:
            device = gd()
        cdef tuple memo = self._memo  # held here: another thread may replace the attribute
        key = self._key(device, vals, opts, memo)
        if key is None:
            return self._slow(grid, args, kwargs, None, "a value we do not key on")
        cdef PyObject* pentry
        cdef tuple entry
        if memo is not None and key is memo:
            key = <object>PyTuple_GET_ITEM(memo, 0)
            entry = <tuple>PyTuple_GET_ITEM(memo, 1)
        else:
            pentry = PyDict_GetItem(self._cache, key)
            if pentry == NULL:
                return self._slow(grid, args, kwargs, key, "a new key")
            entry = <tuple>pentry
            self._memo = (key, entry)
        if getattr(self._jit, "hash", None) is not <object>PyTuple_GET_ITEM(entry, 4):
            return self._slow(grid, args, kwargs, key, "the kernel's source changed")

        cdef Py_ssize_t size
        if type(grid) is tuple or type(grid) is list:
            g = grid
        elif callable(grid):
            g = grid(dict(zip(self._names, [<object>vals[i] for i in range(n)])))
        else:
            return self._slow(grid, args, kwargs, None, "a grid that is neither a sequence nor callable")
        size = len(g)
        stream = drv.get_current_stream(device)
        direct = <object>PyTuple_GET_ITEM(entry, 5)
        cdef tuple middle = <tuple>PyTuple_GET_ITEM(entry, 6)
        cdef Py_ssize_t nm = PyTuple_GET_SIZE(middle) if direct is not False and direct is not None else 0
        cdef Py_ssize_t head = 5 + nm + 4
        cdef tuple call = PyTuple_New(head + n)
        _set_new(call, 0, g[0])
        _set_new(call, 1, g[1] if size > 1 else 1)
        _set_new(call, 2, g[2] if size > 2 else 1)
        _set_new(call, 3, stream)
        _set_new(call, 4, <object>PyTuple_GET_ITEM(entry, 1))
        for i in range(nm):
            _set_new(call, 5 + i, <object>PyTuple_GET_ITEM(middle, i))
        _set_new(call, 5 + nm, <object>PyTuple_GET_ITEM(entry, 2))
        _set_new(call, 6 + nm, None)
        _set_new(call, 7 + nm, None)
        _set_new(call, 8 + nm, None)
        for i in range(n):
            _set_new(call, head + i, <object>vals[i])
        if direct is None:  # this entry's first launch: learns the launcher's inner call
            self._memo = None
            self.state.first_launch(key, entry, call)
        elif direct is False:
            PyObject_Call(<object>PyTuple_GET_ITEM(entry, 0), call, NULL)
        else:
            PyObject_Call(direct, call, NULL)
        return <object>PyTuple_GET_ITEM(entry, 3)

    cdef object _key(self, object device, PyObject** vals, list opts, tuple memo):
        """Our key (``_fastlaunch_planner.derive_key`` in C), or None.

        The features go to a stack buffer and the tail items (borrowed) to stack arrays first;
        when they equal the key of ``memo`` (``(key, entry)`` of the last launch, compared as a
        dict would compare the two keys), ``memo`` itself is returned and no key is built.
        """
        cdef Py_ssize_t n = self._n
        cdef unsigned char buf[MAX_CODES]
        cdef PyObject* tobj[MAX_TAIL]
        cdef long long tbits[MAX_TAIL]
        cdef Py_ssize_t j = 0
        cdef Py_ssize_t nt = 0
        cdef Py_ssize_t i = 0
        cdef const unsigned char* cx = self._constexpr
        cdef list keep = None
        cdef object v
        cdef object t
        cdef long long iv
        cdef unsigned long long uv
        cdef int overflow
        cdef int rng
        cdef double dv
        cdef PyObject* pidx
        cdef tuple tv
        # the tuple arguments being walked (borrowed: held by vals or by their outer tuple),
        # and the next element's index in each; empty for a launch without tuples
        cdef PyObject* walk[MAX_NEST]
        cdef Py_ssize_t walk_at[MAX_NEST]
        cdef int depth = 0
        cdef bint constexpr
        while True:
            if depth == 0:
                if i == n:
                    break
                v = <object>vals[i]
                constexpr = cx[i]
                i += 1
            elif walk_at[depth - 1] < PyTuple_GET_SIZE(<object>walk[depth - 1]):
                v = <object>PyTuple_GET_ITEM(<object>walk[depth - 1], walk_at[depth - 1])
                walk_at[depth - 1] += 1
                constexpr = False
                if j + 2 > TUPLE_LIMIT:
                    return None
            else:
                depth -= 1
                continue
            t = type(v)
            if constexpr:
                if nt + 2 > MAX_TAIL:
                    return None
                if t is _int or t is _bool or t is _str or v is None:
                    tobj[nt] = <PyObject*>t
                    tobj[nt + 1] = <PyObject*>v
                elif t is _float:
                    dv = v
                    tobj[nt] = <PyObject*>t
                    tobj[nt + 1] = NULL
                    memcpy(&tbits[nt + 1], &dv, 8)
                else:
                    tv = _tagged(v)
                    if tv is None:
                        return None
                    if keep is None:
                        keep = []
                    keep.append(tv)
                    tobj[nt] = PyTuple_GET_ITEM(tv, 0)
                    tobj[nt + 1] = PyTuple_GET_ITEM(tv, 1)
                nt += 2
                buf[j] = CODE_CONSTEXPR
                j += 1
            elif t is self._tensor or t is self._parameter:
                if _direct(v):
                    dt = _get_dtype.get(v, _get_dtype.closure)
                    uv = PyLong_AsUnsignedLongLongMask(_data_ptr(v, NULL))
                else:
                    dt = v.dtype
                    uv = PyLong_AsUnsignedLongLongMask(v.data_ptr())
                pidx = PyDict_GetItem(_DTYPE_INDEX, dt)
                if pidx == NULL:
                    di = _dtype_index(dt)
                    if di is None:
                        return None
                else:
                    di = <object>pidx
                buf[j] = CODE_TENSOR | ((uv & 15) == 0)
                buf[j + 1] = <unsigned char><long>di
                j += 2
            elif t is _int:
                iv = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow == 0:
                    if -2147483648 <= iv <= 2147483647:
                        rng = 0
                    else:
                        rng = 1
                    buf[j] = CODE_INT | (rng << 2) | ((iv == 1) << 1) | ((iv & 15) == 0)
                elif overflow > 0 and _fits_u64(v):
                    uv = PyLong_AsUnsignedLongLong(v)
                    buf[j] = CODE_INT | (2 << 2) | ((uv & 15) == 0)
                else:
                    return None
                j += 1
            elif v is None:
                buf[j] = CODE_NONE
                j += 1
            elif t is _bool:
                buf[j] = CODE_BOOL
                j += 1
            elif t is _float:
                buf[j] = CODE_FLOAT
                j += 1
            elif t is _tuple:
                # its count, then its elements' codes, walked by this same loop
                if depth >= _MAX_DEPTH or PyTuple_GET_SIZE(v) > _MAX_TUPLE or j + 2 > TUPLE_LIMIT:
                    return None
                buf[j] = CODE_TUPLE
                buf[j + 1] = <unsigned char>PyTuple_GET_SIZE(v)
                j += 2
                walk[depth] = <PyObject*>v
                walk_at[depth] = 0
                depth += 1
            else:
                return None
        if opts is not None:
            for item in opts:
                if nt + 3 > MAX_TAIL:
                    return None
                tv = _tagged((<tuple>item)[1])
                if tv is None:
                    return None
                if keep is None:
                    keep = []
                keep.append(tv)
                tobj[nt] = PyTuple_GET_ITEM(<tuple>item, 0)
                tobj[nt + 1] = PyTuple_GET_ITEM(tv, 0)
                tobj[nt + 2] = PyTuple_GET_ITEM(tv, 1)
                if type(<object>tobj[nt + 2]) is _int and <object>tobj[nt + 1] is _float:
                    tbits[nt + 2] = <object>tobj[nt + 2]
                    tobj[nt + 2] = NULL
                nt += 3
        cdef tuple readers = self._readers
        cdef Py_ssize_t nr = PyTuple_GET_SIZE(readers)
        cdef tuple rd
        cdef tuple key
        cdef PyObject* stored
        cdef bint same = False
        if memo is not None:
            key = <tuple>PyTuple_GET_ITEM(memo, 0)
            same = (
                PyTuple_GET_SIZE(key) == 2 + nr + nt
                and _same(PyTuple_GET_ITEM(key, 0), <PyObject*>device)
                and PyBytes_GET_SIZE(<object>PyTuple_GET_ITEM(key, 1)) == j
                and memcmp(PyBytes_AS_STRING(<object>PyTuple_GET_ITEM(key, 1)), buf, j) == 0
            )
            i = 0
            while same and i < nr:
                rd = <tuple>PyTuple_GET_ITEM(readers, i)
                kv = getattr(<object>PyTuple_GET_ITEM(rd, 0), <object>PyTuple_GET_ITEM(rd, 1))
                stored = PyTuple_GET_ITEM(key, 2 + i)
                same = type(kv) is type(<object>stored) and _same(stored, <PyObject*>kv)
                i += 1
            i = 0
            while same and i < nt:
                stored = PyTuple_GET_ITEM(key, 2 + nr + i)
                if tobj[i] == NULL:
                    same = type(<object>stored) is _int and <long long><object>stored == tbits[i]
                else:
                    same = _same(stored, tobj[i])
                i += 1
            if same:
                return memo
        key = PyTuple_New(2 + nr + nt)
        _set_new(key, 0, device)
        _set_new(key, 1, PyBytes_FromStringAndSize(<char*>buf, j))
        for i in range(nr):
            rd = <tuple>PyTuple_GET_ITEM(readers, i)
            kv = getattr(<object>PyTuple_GET_ITEM(rd, 0), <object>PyTuple_GET_ITEM(rd, 1))
            if not (kv is None or type(kv) is _bool or type(kv) is _str):
                return None
            _set_new(key, 2 + i, kv)
        for i in range(nt):
            if tobj[i] == NULL:
                _set_new(key, 2 + nr + i, tbits[i])
            else:
                _set_new(key, 2 + nr + i, <object>tobj[i])
        return key


cdef inline bint _same(PyObject* a, PyObject* b) except -1:
    # the comparison a dict makes between two keys' items: identity, else ==
    return a == b or <object>a == <object>b


cdef inline bint _fits_u64(object v):
    # 2**63 <= v <= 2**64 - 1 (v > 2**63 - 1 already known)
    return v <= 18446744073709551615


cdef inline void _set_new(tuple t, Py_ssize_t i, object v):
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)
