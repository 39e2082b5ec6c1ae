# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled launch path: ``KernelOverride``, its launcher, the binding planner and the launch owner.

``_core_py.py`` is this module in plain Python, step for step (read it first); this file adds
only what makes it fast:

* everything that can be decided before a launch is decided at construction, as C tables
  (kernel argument -> call slot, slot defaults, impl-only slots pre-filled) built from the
  shared bind check (``_bindcheck.bind_layout``), so both backends bind identically;
* ``override[grid]`` returns one cached launcher object, never a new bound method, and the
  launcher, the override and the owner get a direct ``tp_call`` (Cython's generic
  ``*args, **kwargs`` wrapper would re-check and copy the kwargs dict the interpreter just built);
* a launch walks the kwargs dict's entry table directly (``PyDict_Next`` where the layout is not
  known), recognises each key by one pointer comparison against the name object seen at the
  same dict position last time (argument names are interned, as are the literal keys of a call
  or of a dispatch function's dict), drops each value into its slot of a stack array and calls
  the impl once with ``PyObject_Vectorcall`` -- no tuple, no dict, no generator; once a launch
  has bound every slot from its keys alone, the next launch with the very same key objects in
  the same order (the usual case: one call site, one dict literal) only compares pointers and
  places values (``exact_n``);
* the launch owner completes its binding plan straight into that array: the intermediate
  kwargs dict of vLLM's chain is never built when the kernel is an override, and its plan is
  found by comparing the launch keys with the last ones (``PlanCache``), not by hashing.

Every slot holds an owned reference while the impl runs (values are increfed as they are
placed and released after the call), so an impl that mutates the caller's dict cannot free an
argument under us. No Python code runs while the entry table is walked (keys there are exact
str, compared by pointer or by ``PyUnicode_Compare``).
"""
from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.long cimport PyLong_AsSsize_t
from cpython.object cimport PyObject, PyTypeObject, ternaryfunc
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_Compare
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import inspect
import sys

from ._capi cimport call_kw, call_kw_raw

from ._bindcheck import (
    MISSING,
    OMIT,
    TRITON_LAUNCH_OPTIONS,
    bind_layout,
    kernel_arg_names,
    kernel_defaults,
)

cdef extern from "Python.h":
    # The C macros on raw pointers: Cython's Py_INCREF(<object> p) adds a temporary reference.
    void _incref "Py_INCREF" (PyObject* o)
    void _decref "Py_DECREF" (PyObject* o)
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf, PyObject* kwnames)
    size_t PY_VECTORCALL_ARGUMENTS_OFFSET
    object PyObject_GenericGetDict(object o, void* context)


cdef extern from *:
    """
    #define __fd_tuple_items(t) (((PyTupleObject *)(t))->ob_item)

    /* Direct read of a dict's entry table. PyDict_Next costs ~50 instructions per item on
     * CPython 3.11, more than the rest of a launch's per-argument work; a combined dict whose
     * keys are all exact str (every kwargs dict, every dict literal with name keys) stores its
     * entries as (key, value) pairs in insertion order, which is what PyDict_Next walks. The
     * layout below is CPython's (Include/internal/pycore_dict.h) for 3.11-3.13 with the GIL; on
     * any other interpreter, or for split/general dicts, the caller falls back to PyDict_Next.
     * The module also cross-checks this reader against PyDict_Next at import and disables it
     * on any disagreement. */
    typedef struct { PyObject *key; PyObject *value; } __fd_entry;
    #if !defined(PYPY_VERSION) && !defined(Py_LIMITED_API) && !defined(Py_GIL_DISABLED) \
        && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
    typedef struct {
        Py_ssize_t dk_refcnt;
        uint8_t dk_log2_size;
        uint8_t dk_log2_index_bytes;
        uint8_t dk_kind;
        uint32_t dk_version;
        Py_ssize_t dk_usable;
        Py_ssize_t dk_nentries;
        char dk_indices[];
    } __fd_dictkeys;
    static int __fd_dict_layout_known = 1;
    static inline __fd_entry *__fd_dict_entries(PyObject *d, Py_ssize_t *n) {
        PyDictObject *mp = (PyDictObject *)d;
        __fd_dictkeys *k;
        if (mp->ma_values != NULL) return NULL;
        k = (__fd_dictkeys *)mp->ma_keys;
        if (k->dk_kind != 1) return NULL;  /* DICT_KEYS_UNICODE */
        *n = k->dk_nentries;
        return (__fd_entry *)(&k->dk_indices[(size_t)1 << k->dk_log2_index_bytes]);
    }
    #else
    static int __fd_dict_layout_known = 0;
    static inline __fd_entry *__fd_dict_entries(PyObject *d, Py_ssize_t *n) { (void)d; *n = 0; return NULL; }
    #endif
    """
    PyObject** _tuple_items "__fd_tuple_items" (object t)
    ctypedef struct _entry "__fd_entry":
        PyObject* key
        PyObject* value
    _entry* _raw_dict_entries "__fd_dict_entries" (object d, Py_ssize_t* n)
    int _dict_layout_known "__fd_dict_layout_known"


# Set at import by _check_dict_reader(): use the direct entry reader only if it agrees with
# PyDict_Next on a range of dicts.
cdef bint _fast_dict = False


cdef inline _entry* _dict_entries(dict d, Py_ssize_t* n) noexcept:
    """The entry table of ``d`` when it can be walked directly, else NULL (use PyDict_Next)."""
    if not _fast_dict:
        return NULL
    return _raw_dict_entries(d, n)


def _check_dict_reader():
    """Compare the direct entry reader with PyDict_Next; enable it only if they agree."""
    global _fast_dict
    cdef _entry* entries
    cdef Py_ssize_t n = 0, i, position = 0
    cdef PyObject* key
    cdef PyObject* value
    _fast_dict = False
    if not _dict_layout_known:
        return False
    samples = [{}, dict(a=1), {"x": 1, "y_ptr": None, "BLOCK": 3}]
    big = {f"k{i}": i for i in range(100)}
    for i in range(0, 100, 3):
        del big[f"k{i}"]
    big["late"] = object()
    samples.append(big)
    samples.append(dict(**{"p": 1, "q": 2}))
    for d in samples:
        entries = _raw_dict_entries(d, &n)
        if entries == NULL:
            return False
        direct = [(<object> entries[i].key, <object> entries[i].value)
                  for i in range(n) if entries[i].value != NULL]
        walked = []
        position = 0
        while PyDict_Next(d, &position, &key, &value):
            walked.append((<object> key, <object> value))
        if len(direct) != len(walked) or any(
                a[0] is not b[0] or a[1] is not b[1] for a, b in zip(direct, walked)):
            return False
    _fast_dict = True
    return True


_check_dict_reader()


cdef inline dict _dict_of(object o):
    # Cython forbids ``self.__dict__`` inside a class that declares it; this is the same dict.
    return <dict> PyObject_GenericGetDict(o, NULL)

__all__ = [
    "KernelOverride",
    "Launcher",
    "LaunchArgumentError",
    "LaunchBindingPlan",
    "LaunchOwner",
    "PlanCache",
    "kernel_dispatcher",
    "launch_binding_plan",
    "launch_owner",
    "owner_call_method",
    "prepare_launch_kwargs",
    "_kernel_arg_names",
]

_kernel_arg_names = kernel_arg_names

# Slots up to this count live on the C stack; larger impl calls allocate (no kernel comes close).
cdef enum:
    STACK_SLOTS = 48


class LaunchArgumentError(TypeError, RuntimeError):
    """A launch's arguments do not fit the kernel (unexpected or missing names).

    A ``TypeError`` (wrong call) and, for code written against vLLM -- whose override raises
    ``RuntimeError`` for unexpected launch arguments -- also a ``RuntimeError``.
    """


def _describe(kernel):
    return getattr(kernel, "__qualname__", None) or getattr(kernel, "__name__", None) or repr(kernel)


cdef Py_ssize_t* _index_array(object values) except NULL:
    cdef Py_ssize_t n = len(values)
    cdef Py_ssize_t* out = <Py_ssize_t*> malloc((n if n > 0 else 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t i
    if out == NULL:
        raise MemoryError()
    for i in range(n):
        out[i] = values[i]
    return out


cdef PyObject** _object_array(Py_ssize_t n) except NULL:
    cdef PyObject** out = <PyObject**> malloc((n if n > 0 else 1) * sizeof(PyObject*))
    if out == NULL:
        raise MemoryError()
    memset(out, 0, (n if n > 0 else 1) * sizeof(PyObject*))
    return out


cdef inline void _put(PyObject** slots, Py_ssize_t s, PyObject* value, Py_ssize_t* filled) noexcept:
    """Store an owned reference to ``value`` in slot ``s``; count slots filled the first time."""
    _incref(value)
    if slots[s] != NULL:
        _decref(slots[s])
    else:
        filled[0] += 1
    slots[s] = value


cdef inline void _release(PyObject** slots, Py_ssize_t n) noexcept:
    cdef Py_ssize_t s
    for s in range(n):
        if slots[s] != NULL:
            _decref(slots[s])
            slots[s] = NULL


cdef object _NOT_EXACT = object()  # ``_launch_exact``'s "does not apply"


cdef class KernelOverride:
    """Stands in for a Triton kernel and routes launches to ``impl``.

    Attributes mirror vLLM's: ``arg_names`` (the original kernel's), ``constexprs``, ``func`` (the
    impl), ``__name__`` (the impl's), ``__module__`` (the kernel's), ``_forward_by_name``.

    ``override[grid](**kwargs)`` -- a launch keyed by the kernel's argument names -- calls the impl
    with each argument in the slot the bind layout gives it (by name when the impl uses the
    kernel's names, else positionally in kernel order). ``grid`` is ignored, as in vLLM: a CPU impl
    loops over the index space itself. Triton launch options (``num_warps`` ...) are dropped.
    Positional launch arguments (``override[grid](*args)``) and ``override(*args, **kwargs)``
    pass straight through to the impl.
    """

    def __cinit__(self, *args, **kwargs):
        self.arg_slots = NULL
        self.slot_args = NULL
        self.all_index = NULL
        self.seen_key = NULL
        self.seen_slot = NULL
        self.template = NULL
        self.defaults = NULL
        self.omit = NULL

    def __init__(self, kernel, impl):
        arg_names = kernel_arg_names(kernel)
        kdefaults = kernel_defaults(kernel)
        kernel_name = _describe(kernel)
        layout = bind_layout(arg_names, impl, kdefaults,
                             f"kernel {kernel_name!r} by impl {_describe(impl)!r}")
        if self.launcher is not None:
            raise TypeError("KernelOverride is already initialised")
        self.impl = impl
        self.names = arg_names
        _dict_of(self)["constexprs"] = getattr(kernel, "constexprs", None)
        _dict_of(self)["func"] = impl
        _dict_of(self)["__name__"] = getattr(impl, "__name__", "kernel_override")
        _dict_of(self)["__module__"] = getattr(kernel, "__module__", "")
        _dict_of(self)["_forward_by_name"] = layout.forward_by_name
        _dict_of(self)["_kernel_defaults"] = kdefaults
        _dict_of(self)["_kernel_name"] = kernel_name
        _dict_of(self)["_layout"] = layout
        self._init_tables(layout)
        self.launcher = Launcher.__new__(Launcher)
        self.launcher.override = self

    def _init_tables(self, layout):
        cdef Py_ssize_t i, s
        for name in self.names:
            if not isinstance(name, str):
                raise TypeError(f"kernel argument names must be str, got {name!r}")
        # Exact, interned str: launch keys (interned literals) then match by pointer, and a
        # name lookup never runs Python-level __eq__/__hash__.
        names = [sys.intern(str.__str__(name)) for name in self.names]
        options = sorted(TRITON_LAUNCH_OPTIONS - set(names))
        self.all_names = tuple(names + options)
        self.name_index = {name: i for i, name in enumerate(self.all_names)}
        self.nargs = len(names)
        self.npos = layout.npos
        self.nslots = layout.npos + len(layout.kwnames)
        self.kwnames = layout.kwnames if layout.kwnames else None
        self.arg_slots = _index_array(layout.arg_slots)
        self.slot_args = _index_array(layout.slot_args)
        self.all_index = _index_array(list(range(self.nargs)) + [-2] * len(options))
        self.ncache = len(self.all_names)
        self.seen_key = _object_array(self.ncache)  # owned exact str keys; NULL = nothing yet
        self.seen_slot = _index_array([-1] * self.ncache)
        self.template = _object_array(self.nslots)
        self.defaults = _object_array(self.nslots)
        self.omit = <char*> malloc(self.nslots if self.nslots > 0 else 1)
        if self.omit == NULL:
            raise MemoryError()
        for s in range(self.nslots):
            d = layout.slot_defaults[s]
            self.omit[s] = d is OMIT
            if d is MISSING or d is OMIT:
                continue
            Py_INCREF(d)
            self.defaults[s] = <PyObject*> d
            if self.slot_args[s] < 0:
                Py_INCREF(d)
                self.template[s] = <PyObject*> d
                self.has_template = True

    def __dealloc__(self):
        if self.template != NULL:
            _release(self.template, self.nslots)
            free(self.template)
        if self.defaults != NULL:
            _release(self.defaults, self.nslots)
            free(self.defaults)
        free(self.arg_slots)
        free(self.slot_args)
        free(self.all_index)
        if self.seen_key != NULL:
            _release(self.seen_key, self.ncache)
        free(self.seen_key)
        free(self.seen_slot)
        free(self.omit)

    @property
    def arg_names(self):
        return self.names

    @property
    def _impl(self):
        return self.impl

    def __getitem__(self, grid):
        return self.launcher

    def __call__(self, *args, **kwargs):
        return self.impl(*args, **kwargs)

    def __repr__(self):
        return f"<KernelOverride {_dict_of(self).get('_kernel_name')} -> {_describe(self.impl)}>"

    def __reduce__(self):
        raise TypeError("KernelOverride cannot be pickled: register the impl in each process")

    # -- launch machinery ------------------------------------------------------------------------

    def _launch_kwargs(self, kwargs):
        """``override[grid](**kwargs)``: route a launch keyed by kernel argument names."""
        return _launch_by_kwargs(self, kwargs)

    cdef Py_ssize_t slot_of(self, PyObject* key, Py_ssize_t position) noexcept:
        """Call slot for launch key ``key`` (-2: a Triton launch option, -1: not an argument).

        The slow path of a launch. A key equal to the one seen at this dict position last time
        (a key built at run time: a new object, or another object than the interned name) takes
        that key's slot after one string comparison -- no hashing; anything else is a dict
        lookup by name. The key object itself is then remembered for this position (an owned
        reference to an exact str, so no Python code can run when it is let go), and the next
        launch with the same key objects in the same order -- literal keys, or keys a caller
        built once and reuses -- recognises each by one pointer comparison.
        """
        cdef Py_ssize_t a, s
        cdef PyObject* found
        cdef PyObject* seen
        cdef PyObject* remember
        if position < self.ncache:
            seen = self.seen_key[position]
            if (seen != NULL and PyUnicode_CheckExact(<object> key)
                    and PyUnicode_Compare(<object> seen, <object> key) == 0):
                s = self.seen_slot[position]
                _incref(key)
                self.seen_key[position] = key
                _decref(seen)
                self.exact_n = 0
                return s
        if not PyUnicode_CheckExact(<object> key):
            if not isinstance(<object> key, str):
                return -1
        found = PyDict_GetItem(self.name_index, <object> key)
        if found == NULL:
            return -1
        a = PyLong_AsSsize_t(<object> found)
        s = self.all_index[a]
        if s >= 0:
            s = self.arg_slots[s]
        if position < self.ncache:
            # a str subclass is not kept (its release could run Python code): its interned name is
            remember = key if PyUnicode_CheckExact(<object> key) else PyTuple_GET_ITEM(
                self.all_names, a)
            _incref(remember)
            seen = self.seen_key[position]
            self.seen_slot[position] = s
            self.seen_key[position] = remember
            if seen != NULL:
                _decref(seen)
            self.exact_n = 0
        return s

    cdef object launch(self, dict kwargs, LaunchBindingPlan plan, tuple input_values):
        """Fill the call slots from ``kwargs`` (and ``plan``'s inputs and strides), call the impl.

        ``plan``/``input_values`` are None for a plain ``override[grid](**kwargs)`` launch.
        """
        cdef PyObject* stack[STACK_SLOTS + 1]
        cdef PyObject** buf = stack
        cdef PyObject** slots
        cdef Py_ssize_t nslots = self.nslots
        cdef Py_ssize_t filled = 0
        cdef Py_ssize_t position = 0, j = 0, a, s, k
        cdef Py_ssize_t npos = self.npos
        cdef Py_ssize_t total
        cdef PyObject* key
        cdef PyObject* value
        cdef PyObject* kwnames = NULL
        cdef list unexpected = None
        cdef list missing
        cdef _entry* entries
        cdef Py_ssize_t nentries = 0, e
        cdef Py_ssize_t ncache = self.ncache
        cdef bint exact = False
        if nslots > STACK_SLOTS:
            buf = <PyObject**> malloc((nslots + 1) * sizeof(PyObject*))
            if buf == NULL:
                raise MemoryError()
        slots = buf + 1  # one free slot in front: PY_VECTORCALL_ARGUMENTS_OFFSET
        if self.kwnames is not None:
            kwnames = <PyObject*> self.kwnames
        if self.has_template:
            for s in range(nslots):
                slots[s] = self.template[s]
                if slots[s] != NULL:
                    _incref(slots[s])
        else:
            memset(slots, 0, nslots * sizeof(PyObject*))
        try:
            if kwargs is not None:
                # One walk over the launch's (key, value) pairs: the dict's entry table where
                # its layout is known, else PyDict_Next; each pair goes through _take.
                entries = _dict_entries(kwargs, &nentries)
                exact = (entries != NULL and plan is None and nslots == self.nargs
                         and not self.has_template)
                e = 0
                while True:
                    if entries != NULL:
                        if e == nentries:
                            break
                        key = entries[e].key
                        value = entries[e].value
                        e += 1
                        if value == NULL:  # deleted entry
                            exact = False
                            continue
                    elif not PyDict_Next(kwargs, &position, &key, &value):
                        break
                    s = _take(self, key, value, j, slots, &filled)
                    j += 1
                    if s < 0:
                        exact = False
                        if s == -1:
                            if unexpected is None:
                                unexpected = []
                            unexpected.append(<object> key)
                if exact and filled == nslots and j == nslots and j <= ncache:
                    # every key was an argument, recognised at its position: next time the
                    # same keys in the same order take _launch_exact
                    self.exact_n = j
            if plan is not None:
                for k in range(plan.n_input_fill):
                    _put(slots, self.arg_slots[plan.input_fill_arg[k]],
                         PyTuple_GET_ITEM(input_values, plan.input_fill_index[k]), &filled)
                for k in range(plan.n_stride_fill):
                    if plan.stride_fill_input[k] >= 0:
                        source = <object> PyTuple_GET_ITEM(input_values, plan.stride_fill_input[k])
                    else:
                        source = kwargs[plan.stride_fill[k][1]]
                    stride = source.stride(plan.stride_fill_dim[k])
                    _put(slots, self.arg_slots[plan.stride_fill_arg[k]], <PyObject*> stride, &filled)
            if unexpected is not None:
                raise LaunchArgumentError(
                    f"Override for {_dict_of(self)['__name__']!r} (kernel "
                    f"{_dict_of(self)['_kernel_name']!r}) received unexpected launch arguments: "
                    f"{unexpected}; kernel arguments are {list(self.names)}"
                )
            if filled != self.nargs:
                total = nslots
                if self.kwnames is None:
                    # Unknown impl signature: omitted trailing positional arguments stay omitted.
                    while npos > 0 and slots[npos - 1] == NULL and self.omit[npos - 1]:
                        npos -= 1
                    total = npos
                missing = None
                for s in range(total):
                    if slots[s] == NULL:
                        if self.defaults[s] == NULL:
                            if missing is None:
                                missing = []
                            missing.append(self.names[self.slot_args[s]])
                        else:
                            slots[s] = self.defaults[s]
                            _incref(slots[s])
                if missing is not None:
                    raise LaunchArgumentError(
                        f"Override for {_dict_of(self)['__name__']!r} (kernel "
                        f"{_dict_of(self)['_kernel_name']!r}) is missing launch arguments without "
                        f"a default: {missing}"
                    )
            return PyObject_Vectorcall(self.impl, slots, <size_t> npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                       kwnames)
        finally:
            _release(slots, nslots)
            if buf != stack:
                free(buf)


cdef inline Py_ssize_t _take(KernelOverride ov, PyObject* key, PyObject* value, Py_ssize_t j,
                            PyObject** slots, Py_ssize_t* filled) noexcept:
    """One launch pair at dict position ``j``: its slot (the key seen at this position last time,
    by pointer, else ``slot_of``), with an owned reference to ``value`` placed there. Returns the
    slot, or -2 (a launch option, dropped) / -1 (not an argument)."""
    cdef Py_ssize_t s
    if j < ov.ncache and ov.seen_key[j] == key:
        s = ov.seen_slot[j]
    else:
        s = ov.slot_of(key, j)
    if s >= 0:
        _put(slots, s, value, filled)
    return s


cdef object _launch_exact(KernelOverride ov, dict kwargs):
    """The common launch, in a frame of its own: the same keys in the same order as the last
    complete launch (``exact_n``), each a kernel argument filling one slot.

    Why apart from ``launch``: that method's frame (its locals, its stack buffer, its error paths)
    costs more than this whole path. Every key is checked by pointer and each value owned as it
    is placed, so an impl that mutates the caller's dict cannot free an argument under us. Returns
    ``_NOT_EXACT``, having done and owned nothing, whenever the launch is not of this kind.
    """
    cdef PyObject* stack[STACK_SLOTS + 1]
    cdef PyObject** slots = stack + 1  # one free slot in front: PY_VECTORCALL_ARGUMENTS_OFFSET
    cdef Py_ssize_t n = ov.exact_n, nentries = 0, e
    cdef PyObject** seen_key = ov.seen_key
    cdef Py_ssize_t* seen_slot = ov.seen_slot
    cdef PyObject* kwnames = NULL
    cdef PyObject* value
    cdef _entry* entries
    if n == 0 or n > STACK_SLOTS:
        return _NOT_EXACT
    entries = _dict_entries(kwargs, &nentries)
    if entries == NULL or nentries != n:
        return _NOT_EXACT
    for e in range(n):
        value = entries[e].value
        if entries[e].key != seen_key[e] or value == NULL:
            # Not this kind of launch: give back what was taken (the dict still holds each
            # value, so no count reaches zero and no Python code runs).
            while e > 0:
                e -= 1
                _decref(slots[seen_slot[e]])
            return _NOT_EXACT
        _incref(value)
        slots[seen_slot[e]] = value
    # exact_n == nslots and the n keys filled n distinct slots: slots[:n] are all set and owned
    if ov.kwnames is not None:
        kwnames = <PyObject*> ov.kwnames
    try:
        return PyObject_Vectorcall(ov.impl, slots, <size_t> ov.npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   kwnames)
    finally:
        for e in range(n):
            _decref(slots[e])


cdef inline object _launch_by_kwargs(KernelOverride ov, dict kwargs):
    """``override[grid](**kwargs)``: the exact path when it applies, else the full ``launch``."""
    if kwargs is not None:
        result = _launch_exact(ov, kwargs)
        if result is not _NOT_EXACT:
            return result
    return ov.launch(kwargs, None, None)


cdef class Launcher:
    """What ``override[grid]`` returns: one per override, reused by every launch."""

    def __call__(self, *args, **kwargs):
        # Python-visible form; calls go through ``_launcher_tp_call`` (installed below).
        if args:
            return self.override.impl(*args, **kwargs)
        return _launch_by_kwargs(self.override, kwargs)

    def __repr__(self):
        return f"<launcher of {self.override!r}>"


# -- binding plan --------------------------------------------------------------------------------


cdef class LaunchBindingPlan:
    """How one owner's dispatch inputs and launch kwargs become the kernel's launch kwargs.

    ``input_targets``: ``(input index, kernel argument)`` pairs; ``stride_targets``:
    ``(kernel argument, source argument, dim)`` triples -- the same fields as vLLM's plan. The
    remaining attributes are the same facts as indices into ``arg_names``, for the launch path.
    """

    def __cinit__(self, *args, **kwargs):
        self.input_fill_index = NULL
        self.input_fill_arg = NULL
        self.stride_fill_arg = NULL
        self.stride_fill_input = NULL
        self.stride_fill_dim = NULL

    def __init__(self, arg_names, input_names, launch_names):
        self.arg_names = tuple(arg_names)
        self.input_names = tuple(input_names)
        self.launch_names = tuple(launch_names)
        arg_set = set(self.arg_names)
        launch_set = set(self.launch_names)

        def target_for(name):
            pointer = f"{name}_ptr"
            for candidate in (name, pointer, name.upper(), pointer.upper()):
                if candidate in arg_set:
                    return candidate
            return None

        input_targets = []
        for index, name in enumerate(self.input_names):
            target = target_for(name)
            if target is not None and target not in launch_set:
                input_targets.append((index, target))
        bound = launch_set | {target for _, target in input_targets}
        stride_targets = []
        for target in self.arg_names:
            if target in bound:
                continue
            name, sep, dim = target.rpartition("_stride")
            if not sep:
                name, sep, dim = target.rpartition("_STRIDE")
            dim = dim[1:] if dim.startswith("_") else dim
            if sep and (not dim or (dim.isascii() and dim.isdigit())):
                source = name if name in bound else (f"{name}_PTR" if sep == "_STRIDE" else f"{name}_ptr")
                if source in bound:
                    stride_targets.append((target, source, int(dim or 0)))
        self.input_targets = tuple(input_targets)
        self.stride_targets = tuple(stride_targets)

        # Index form. Two inputs may reach one target; as with sequential assignment, the last wins.
        last = {}
        for index, target in input_targets:
            last[target] = index
        arg_index = {name: i for i, name in enumerate(self.arg_names)}
        self.input_fill = tuple((index, arg_index[target]) for index, target in input_targets
                                if last[target] == index)
        # Stride source: -1 - input index when bound from an input, else the launch kwarg name.
        stride_fill = []
        for target, source, dim in stride_targets:
            src = source if source in launch_set else -1 - last[source]
            stride_fill.append((arg_index[target], src, dim))
        self.stride_fill = tuple(stride_fill)
        # ``kernel``/``_runtime_launcher`` among the completed launch kwargs change how the launch
        # happens (vLLM pops them after binding): such launches take the generic path.
        completed = bound | {target for target, _, _ in stride_targets}
        self.generic = bool(completed & {"kernel", "_runtime_launcher", "_runtime_launcher_arg_count"})

        self.n_input_fill = len(self.input_fill)
        self.input_fill_index = _index_array([index for index, _ in self.input_fill])
        self.input_fill_arg = _index_array([arg for _, arg in self.input_fill])
        self.n_stride_fill = len(self.stride_fill)
        self.stride_fill_arg = _index_array([arg for arg, _, _ in self.stride_fill])
        self.stride_fill_input = _index_array(
            [-1 if isinstance(src, str) else -1 - src for _, src, _ in self.stride_fill])
        self.stride_fill_dim = _index_array([dim for _, _, dim in self.stride_fill])

    def __dealloc__(self):
        free(self.input_fill_index)
        free(self.input_fill_arg)
        free(self.stride_fill_arg)
        free(self.stride_fill_input)
        free(self.stride_fill_dim)

    def __repr__(self):
        return (f"LaunchBindingPlan(input_targets={self.input_targets}, "
                f"stride_targets={self.stride_targets})")


_plans = {}


def launch_binding_plan(arg_names, input_names, launch_names=()):
    """The (cached) binding plan for a kernel, a dispatch signature and a set of launch kwargs.

    Dispatch input ``x`` binds to the kernel argument ``x``, ``x_ptr``, ``X`` or ``X_PTR`` (first
    that exists) unless the dispatch function passed that argument explicitly (explicit launch
    kwargs win). Unbound kernel arguments ``x_stride``/``x_stride_<d>`` (``X_STRIDE``...) take
    ``.stride(d)`` of the bound ``x`` (or ``x_ptr``). Same rules as vLLM's plan.
    """
    key = (tuple(arg_names), tuple(input_names), tuple(launch_names))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans.setdefault(key, LaunchBindingPlan(*key))
    return plan


cdef class PlanCache:
    """Remembers the last plan of one launch site, so a repeated launch skips hashing.

    ``lookup`` returns the plan for ``(arg_names, input_names, keys of launch_kwargs)``; it hits
    when ``arg_names`` and ``input_names`` are the same objects and the launch kwargs have the
    same keys in the same order as last time.
    """

    def lookup(self, arg_names, input_names, launch_kwargs):
        return self.lookup_c(arg_names, input_names, launch_kwargs)

    cdef LaunchBindingPlan lookup_c(self, tuple arg_names, tuple input_names, dict launch_kwargs):
        cdef LaunchBindingPlan plan = self.plan
        cdef Py_ssize_t position = 0, j = 0
        cdef PyObject* key
        cdef PyObject* value
        cdef PyObject* cached
        cdef _entry* entries
        cdef Py_ssize_t nentries = 0, e
        if (plan is not None and plan.arg_names is arg_names and plan.input_names is input_names
                and len(launch_kwargs) == PyTuple_GET_SIZE(self.keys)):
            entries = _dict_entries(launch_kwargs, &nentries)
            if entries != NULL:
                for e in range(nentries):
                    if entries[e].value == NULL:
                        continue
                    key = entries[e].key
                    cached = PyTuple_GET_ITEM(self.keys, j)
                    j += 1
                    # Keys here are exact str: compare without running any Python code, since
                    # the entry table must not change under us.
                    if key != cached and not (PyUnicode_CheckExact(<object> cached)
                                              and PyUnicode_Compare(<object> key, <object> cached) == 0):
                        break
                else:
                    return plan
            else:
                while PyDict_Next(launch_kwargs, &position, &key, &value):
                    cached = PyTuple_GET_ITEM(self.keys, j)
                    j += 1
                    if key != cached and (<object> key) != (<object> cached):
                        break
                else:
                    return plan
        keys = tuple(launch_kwargs)
        plan = launch_binding_plan(arg_names, input_names, keys)
        # Keep the caller's tuples so identity checks hit next time.
        if plan.arg_names is not arg_names or plan.input_names is not input_names:
            plan = LaunchBindingPlan(arg_names, input_names, keys)
        self.plan = plan
        self.keys = keys
        return plan


def prepare_launch_kwargs(arg_names, input_names, input_values, launch_kwargs):
    """vLLM's ``_prepare_launch_kwargs``: complete ``launch_kwargs`` in place and return it.

    ``arg_names``: the kernel's argument names; ``input_names``/``input_values``: the dispatch
    function's parameter names and the values of this call (defaults filled in);
    ``launch_kwargs``: the dict the dispatch function returned (pass a copy: it is mutated).
    Adds each bound input under its kernel argument name, then each ``*_stride[_d]`` argument as
    ``launch_kwargs[source].stride(d)``; explicit launch kwargs are never overwritten.
    """
    cdef LaunchBindingPlan plan = launch_binding_plan(arg_names, input_names, tuple(launch_kwargs))
    for index, target in plan.input_targets:
        launch_kwargs[target] = input_values[index]
    for target, source, dim in plan.stride_targets:
        launch_kwargs[target] = launch_kwargs[source].stride(dim)
    return launch_kwargs


cdef tuple _unpack_spec(object spec):
    if type(spec) is tuple or type(spec) is list:
        if len(spec) == 3:
            return (spec[0], spec[1], spec[2])
        if len(spec) == 2:
            return (spec[0], spec[1], None)
    raise TypeError(
        "a dispatch function must return (grid, launch_kwargs) or (grid, launch_kwargs, outputs), "
        f"got {type(spec).__name__}"
    )


cdef object _launch_generic(kernel, arg_names, grid, launch_kwargs, input_names, input_values,
                            outputs):
    kwargs = prepare_launch_kwargs(arg_names, input_names, input_values, dict(launch_kwargs))
    kernel = kwargs.pop("kernel", None) or kernel
    runtime_launcher = kwargs.pop("_runtime_launcher", None)
    runtime_launcher_arg_count = kwargs.pop("_runtime_launcher_arg_count", 0)
    if grid is None:
        return outputs
    if runtime_launcher is not None:
        regular_args = [kwargs.pop(name) for name in arg_names[:runtime_launcher_arg_count]]
        runtime_launcher(kernel, grid, *regular_args, **kwargs)
    elif hasattr(type(kernel), "__getitem__"):
        kernel[grid](**kwargs)
    else:
        # A plain function (Triton absent, no override): call it with the launch kwargs.
        kernel(**kwargs)
    return outputs


cdef object launch_owner_c(object kernel, object arg_names, object spec, tuple input_names,
                           object input_values, PlanCache cache):
    cdef LaunchBindingPlan plan
    cdef KernelOverride override
    cdef Py_ssize_t nspec
    cdef object grid, launch_kwargs, outputs = None
    if type(spec) is tuple and (PyTuple_GET_SIZE(spec) == 2 or PyTuple_GET_SIZE(spec) == 3):
        nspec = PyTuple_GET_SIZE(spec)
        grid = <object> PyTuple_GET_ITEM(spec, 0)
        launch_kwargs = <object> PyTuple_GET_ITEM(spec, 1)
        if nspec == 3:
            outputs = <object> PyTuple_GET_ITEM(spec, 2)
    else:
        grid, launch_kwargs, outputs = _unpack_spec(spec)
    if type(launch_kwargs) is not dict:
        launch_kwargs = dict(launch_kwargs)
    if type(arg_names) is not tuple:
        arg_names = tuple(arg_names)
    if type(input_values) is not tuple:
        input_values = tuple(input_values)
    if len(input_values) != len(input_names):
        raise ValueError(
            f"{len(input_values)} dispatch input values for {len(input_names)} input names")
    if cache is not None:
        plan = cache.lookup_c(arg_names, input_names, launch_kwargs)
    else:
        plan = launch_binding_plan(arg_names, input_names, tuple(launch_kwargs))
    if type(kernel) is KernelOverride and not plan.generic:
        override = <KernelOverride> kernel
        if override.names is arg_names or override.names == arg_names:
            if grid is None:
                return outputs
            override.launch(launch_kwargs, plan, input_values)
            return outputs
    return _launch_generic(kernel, arg_names, grid, launch_kwargs, input_names, input_values,
                           outputs)


def launch_owner(kernel, arg_names, spec, input_names, input_values, PlanCache cache=None):
    """vLLM's ``launch``: run one launch described by a dispatch function's result.

    ``kernel``: what the owner launches (its ``.kernel``: a Triton kernel, a
    :class:`KernelOverride`, anything subscriptable by grid); ``arg_names``: its argument names
    (the owner's ``_kernel_arg_names``); ``spec``: ``(grid, launch_kwargs)`` or
    ``(grid, launch_kwargs, outputs)``; ``input_names``/``input_values``: the dispatch parameters
    and this call's values; ``cache``: an optional :class:`PlanCache` kept per launch site.

    Semantics (vLLM's): the launch kwargs are completed as by :func:`prepare_launch_kwargs`
    (on a copy -- ``spec``'s dict is not modified); a ``kernel`` entry replaces the kernel,
    ``_runtime_launcher``/``_runtime_launcher_arg_count`` entries route the launch through
    ``runtime_launcher(kernel, grid, *first_args, **rest)``; ``grid=None`` skips the launch;
    otherwise ``kernel[grid](**kwargs)`` -- or ``kernel(**kwargs)`` when the kernel is not
    subscriptable (a plain Python function standing in for a kernel when Triton is absent).
    Returns ``outputs`` (``None`` for a 2-tuple).
    When ``kernel`` is a :class:`KernelOverride` with these ``arg_names`` the launch goes to the
    impl directly from the plan, with the same result.
    """
    return launch_owner_c(kernel, arg_names, spec, tuple(input_names), input_values, cache)


def owner_call_method(fallback, dict plan_caches not None, *, str kernel_attr not None,
                      str dispatch_attr not None, str names_attr not None,
                      str defaults_attr not None, str warming_attr not None):
    """A compiled ``__call__`` for a foreign launch owner class that keeps its launch in its
    instance ``__dict__``: the kernel, a dispatch function, the dispatch function's parameter
    names (a tuple) and their defaults (a dict) -- stored under the given attribute names.

    Why: an owner's own ``__call__`` is the per-launch glue between the caller and
    :func:`launch_owner`; written in Python it costs as much as a small CPU kernel. The function
    returned is a method (it binds like a ``def``), to be set as the class's ``__call__``.

    ``owner(*args, **kwargs)``: when the kernel is a :class:`KernelOverride`, there is a
    dispatch function and the owner's ``warming_attr`` is false, runs ``spec =
    dispatch(*args, **kwargs)``, completes the inputs (positional ``args``, then each remaining
    parameter from ``kwargs`` or the defaults) and launches
    ``launch_owner(kernel, kernel.arg_names, spec, names, values, cache)``, with one
    :class:`PlanCache` per owner kept in ``plan_caches`` (``id(owner)`` -> ``(owner, cache)``).
    Anything else is ``fallback(owner, *args, **kwargs)`` (the class's original ``__call__``).
    """

    def __call__(self, *args, **kwargs):
        cdef dict d = _dict_of(self)
        cdef object kernel = d.get(kernel_attr)
        cdef object dispatch = d.get(dispatch_attr)
        cdef object names, values, defaults, hit, key
        cdef PlanCache cache
        cdef Py_ssize_t nargs, i
        if type(kernel) is not KernelOverride or dispatch is None or getattr(self, warming_attr):
            return fallback(self, *args, **kwargs)
        spec = call_kw(dispatch, args, kwargs if kwargs else None)
        names = d[names_attr]
        if type(names) is not tuple:
            names = tuple(names)
        values = args
        nargs = PyTuple_GET_SIZE(args)
        if nargs != PyTuple_GET_SIZE(names):
            defaults = d[defaults_attr]
            values = args + tuple([kwargs[name] if name in kwargs else defaults[name]
                                   for name in names[nargs:]])
        key = id(self)
        hit = plan_caches.get(key)
        if type(hit) is not tuple or PyTuple_GET_SIZE(hit) != 2 or (<tuple> hit)[0] is not self:
            hit = plan_caches[key] = (self, PlanCache())
        cache = <PlanCache?> (<tuple> hit)[1]
        return launch_owner_c(kernel, (<KernelOverride> kernel).names, spec, names, values, cache)

    return __call__


# -- launch owner --------------------------------------------------------------------------------


cdef class LaunchOwner:
    """Owns one kernel and the dispatch function that configures its launches.

    ``owner(*args, **kwargs)`` runs the dispatch function, binds its inputs to the kernel's
    arguments (:func:`launch_binding_plan`) and launches ``owner.kernel[grid](**kwargs)``.
    Like vLLM's launch owner, ``kernel`` lives in the instance ``__dict__`` and the kernel's
    argument names are cached there as ``_kernel_arg_names``: the rebinding pass swaps the one
    and drops the other. Unknown attributes are read from the kernel (vLLM's owners do the same),
    so an owner can stand where its kernel is expected (``owner.arg_names``, ``owner[grid]``).
    """

    def __init__(self, kernel, dispatch, warmup_inputs=None):
        parameters = tuple(inspect.signature(dispatch).parameters.values())
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            raise TypeError(
                f"dispatch function {_describe(dispatch)!r} must have explicit parameters "
                "(no *args/**kwargs): their names bind to kernel arguments"
            )
        _dict_of(self)["kernel"] = kernel
        self.dispatch_fn = dispatch
        self.dispatch_names = tuple(p.name for p in parameters)
        self.dispatch_defaults = {
            p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty
        }
        self.plan_cache = PlanCache()
        _dict_of(self)["_warmup_inputs_fn"] = warmup_inputs

    @property
    def _dispatch_fn(self):
        return self.dispatch_fn

    @property
    def _dispatch_arg_names(self):
        return self.dispatch_names

    @property
    def _dispatch_defaults(self):
        return self.dispatch_defaults

    @property
    def _plan_cache(self):
        return self.plan_cache

    @property
    def _kernel_arg_names(self):
        names = _dict_of(self).get("_kernel_arg_names")
        if names is None:
            names = kernel_arg_names(_dict_of(self)["kernel"])
            _dict_of(self)["_kernel_arg_names"] = names
        return names

    def __call__(self, *args, **kwargs):
        return _owner_call(self, args, kwargs if kwargs else None)

    def launch(self, launch_spec, inputs):
        """vLLM's ``launch(spec, inputs)``: launch a spec with a mapping of dispatch inputs."""
        return launch_owner_c(_dict_of(self)["kernel"], self._kernel_arg_names, launch_spec,
                              tuple(inputs), tuple(inputs.values()), None)

    def register_warmup(self, *args, **kwargs):
        """Accepted for compatibility with vLLM's owners; there is nothing to compile ahead."""
        return None

    def __getitem__(self, grid):
        return _dict_of(self)["kernel"][grid]

    def __getattr__(self, name):
        d = _dict_of(self)
        if name == "kernel" or "kernel" not in d:
            raise AttributeError(name)
        return getattr(d["kernel"], name)

    def __repr__(self):
        return f"<LaunchOwner {_describe(self.dispatch_fn)} kernel={_dict_of(self).get('kernel')!r}>"


def kernel_dispatcher(*, kernel, warmup_inputs=None):
    """Decorate a dispatch function returning ``(grid, launch_kwargs[, outputs])`` into an owner.

    Keyword-compatible with vLLM's ``triton_kernel_dispatcher_with_warmup(kernel=...,
    warmup_inputs=...)``; ``warmup_inputs`` is kept but unused (there is no JIT to warm).
    """
    from functools import update_wrapper

    def decorate(dispatch):
        owner = LaunchOwner(kernel, dispatch, warmup_inputs)
        update_wrapper(owner, dispatch, updated=())
        return owner

    return decorate


# -- call slots ----------------------------------------------------------------------------------
# Cython's generic ``def __call__(self, *args, **kwargs)`` wrapper checks every keyword and copies
# the kwargs dict before our code runs. ``launcher(**kw)`` already receives a fresh dict from the
# interpreter, so these types get a direct ``tp_call`` that hands the dict over untouched. The
# ``def __call__`` methods above stay as the documented, introspectable form; both do the same.

cdef object _launcher_tp_call(PyObject* self, PyObject* args, PyObject* kwds):
    cdef KernelOverride override = (<Launcher> self).override
    if override is None or override.launcher is None:
        raise TypeError("launcher is not bound to an initialised KernelOverride")
    if PyTuple_GET_SIZE(<object> args) != 0:
        return call_kw_raw(override.impl, <tuple> args, kwds)
    return _launch_by_kwargs(override, <dict> kwds if kwds != NULL else None)


cdef object _override_tp_call(PyObject* self, PyObject* args, PyObject* kwds):
    return call_kw_raw((<KernelOverride> self).impl, <tuple> args, kwds)


cdef object _owner_tp_call(PyObject* self, PyObject* args, PyObject* kwds):
    return _owner_call(<LaunchOwner> self, <tuple> args, <dict> kwds if kwds != NULL else None)


cdef object _owner_call(LaunchOwner owner, tuple values, dict kwargs):
    """Dispatch, complete the inputs from the dispatch function's defaults, then launch with the
    kernel and cached argument names the owner's instance dict holds now (the rebinding pass
    swaps ``kernel`` there and drops ``_kernel_arg_names``)."""
    cdef tuple names = owner.dispatch_names
    cdef PyObject* found
    spec = call_kw(owner.dispatch_fn, values, kwargs)
    if PyTuple_GET_SIZE(values) != PyTuple_GET_SIZE(names):
        defaults = owner.dispatch_defaults
        values = values + tuple(
            kwargs[name] if kwargs is not None and name in kwargs else defaults[name]
            for name in names[PyTuple_GET_SIZE(values):]
        )
    d = _dict_of(owner)
    found = PyDict_GetItem(d, "kernel")
    if found == NULL:
        raise AttributeError("kernel")
    kernel = <object> found
    found = PyDict_GetItem(d, "_kernel_arg_names")
    if found != NULL and <object> found is not None:
        arg_names = <object> found
    else:
        arg_names = owner._kernel_arg_names
    return launch_owner_c(kernel, arg_names, spec, names, values, owner.plan_cache)


(<PyTypeObject*> Launcher).tp_call = <ternaryfunc> _launcher_tp_call
(<PyTypeObject*> LaunchOwner).tp_call = <ternaryfunc> _owner_tp_call
(<PyTypeObject*> KernelOverride).tp_call = <ternaryfunc> _override_tp_call
