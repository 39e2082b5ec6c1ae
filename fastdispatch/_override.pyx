# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled ``KernelOverride`` and its launcher: ``override[grid](**kwargs)`` -> ``impl(...)``.

``_core_py.py`` holds this module's hot path in plain Python, step for step (read it first);
this file adds only what makes it fast:

* everything that can be decided before a launch is decided at construction, as C tables
  (kernel argument -> call slot, slot defaults, impl-only slots pre-filled) built from the
  shared bind check (``_bindcheck.bind_layout``), so both backends bind identically;
* ``override[grid]`` returns one cached launcher object, never a new bound method, through a
  direct ``mp_subscript``; the launcher and the override get a direct ``tp_call`` (Cython's
  generic ``*args, **kwargs`` wrapper would re-check and copy the kwargs dict the interpreter
  just built);
* a launch walks the kwargs dict's entry table directly (``PyDict_Next`` where the layout is not
  known), recognises each key by one pointer comparison against the key object seen at the same
  dict position last time -- an interned literal, or a key built at run time and reused: the
  object itself is remembered -- drops each value into its slot of a stack array and calls the
  impl once with ``PyObject_Vectorcall``: no tuple, no dict, no generator. Once a launch has
  bound every slot from its keys alone, the next launch with the very same key objects in the
  same order (the usual case: one call site, one dict) only compares pointers and places values
  (``exact_n``, ``_launch_exact``).

Every slot holds an owned reference while the impl runs (values are increfed as they are
placed and released after the call), so an impl that mutates the caller's dict cannot free an
argument under us. No Python code runs while the entry table is walked (keys there are exact
str, compared by pointer or by ``PyUnicode_Compare``). The binding plan the owner passes in is
``_plan.pyx``'s; what a refused launch raises is ``_errors``'.
"""
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_Size
from cpython.long cimport PyLong_AsSsize_t
from cpython.object cimport PyObject, PyTypeObject, ternaryfunc
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_Compare
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import sys

from ._capi cimport _TypeMapping, call_kw_raw, subscriptfunc
from ._plan cimport LaunchBindingPlan
from ._slots cimport (
    PY_VECTORCALL_ARGUMENTS_OFFSET,
    STACK_SLOTS,
    PyObject_Vectorcall,
    _decref,
    _incref,
    _refcnt,
    check_dict_reader,
    dict_entries,
    dict_of,
    entry,
    index_array,
    object_array,
    put,
    release,
)

from ._bindcheck import (
    MISSING,
    OMIT,
    TRITON_LAUNCH_OPTIONS,
    bind_layout,
    grid_launcher,
    impl_arg_names,
    kernel_arg_names,
    kernel_defaults,
    launch_options,
    merge_positional,
    own_grid,
    unchecked_layout,
)
from ._errors import describe, missing_arguments, unexpected_arguments

__all__ = ["KernelOverride", "Launcher"]

check_dict_reader()

cdef object _NOT_EXACT = object()  # ``_launch_exact``'s "does not apply"


cdef class KernelOverride:
    """Stands in for a Triton kernel and routes launches to ``impl``.

    Attributes mirror vLLM's: ``arg_names`` (the original kernel's), ``constexprs``, ``func`` (the
    impl), ``__name__`` (the impl's), ``__module__`` (the kernel's), ``_forward_by_name``.

    ``override[grid](**kwargs)`` -- a launch keyed by the kernel's argument names -- calls the impl
    with each argument in the slot the bind layout gives it (by name when the impl uses the
    kernel's names, else positionally in kernel order). ``grid`` is ignored, as in vLLM: a CPU impl
    loops over the index space itself. Triton launch options (``num_warps`` ...) are dropped.
    Positional launch arguments alone (``override[grid](*args)``) and ``override(*args,
    **kwargs)`` pass straight through to the impl; positional and keyword arguments together
    are bound as one keyed launch (the positional ones first, in kernel order).

    An impl with a ``[grid]`` of its own (vLLM 0.34: a grid-remapping launcher, or a CPU impl that
    needs the grid) takes the launch over: ``override[grid]`` is ``impl[grid]``, so the caller's
    grid reaches it, minus the launch options its launcher cannot take
    (``_bindcheck.grid_launcher``). ``hand_grid=False`` keeps vLLM 0.31-0.33's rule, where such
    an impl is called like any other and the grid is ignored. ``warmup(grid, **kwargs)``
    delegates compile-only warm-up to ``impl.warmup`` and is a no-op without one.
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

    def __init__(self, kernel, impl, *, hand_grid=True):
        arg_names = kernel_arg_names(kernel)
        kdefaults = kernel_defaults(kernel)
        kernel_name = describe(kernel)
        grid = own_grid(impl) if hand_grid else None
        if grid is None:
            layout = bind_layout(arg_names, impl, kdefaults,
                                 f"kernel {kernel_name!r} by impl {describe(impl)!r}")
            by_name = layout.forward_by_name
        else:
            # launches go to impl[grid]; only a direct call reaches the impl itself, unbound
            layout = unchecked_layout(arg_names, kdefaults)
            by_name = impl_arg_names(impl) == tuple(arg_names)
        if self.launcher is not None:
            raise TypeError("KernelOverride is already initialised")
        self.impl = impl
        self.names = arg_names
        self.own_grid = grid
        dict_of(self)["constexprs"] = getattr(kernel, "constexprs", None)
        dict_of(self)["func"] = impl
        dict_of(self)["__name__"] = getattr(impl, "__name__", "kernel_override")
        dict_of(self)["__module__"] = getattr(kernel, "__module__", "")
        dict_of(self)["_forward_by_name"] = by_name
        dict_of(self)["_kernel_defaults"] = kdefaults
        dict_of(self)["_kernel_name"] = kernel_name
        dict_of(self)["_layout"] = layout
        dict_of(self)["_grid_options"] = launch_options(arg_names)
        dict_of(self)["_grid_cache"] = {}
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
        self.arg_slots = index_array(layout.arg_slots)
        self.slot_args = index_array(layout.slot_args)
        self.all_index = index_array(list(range(self.nargs)) + [-2] * len(options))
        self.ncache = len(self.all_names)
        self.seen_key = object_array(self.ncache)  # owned exact str keys; NULL = nothing yet
        self.seen_slot = index_array([-1] * self.ncache)
        self.template = object_array(self.nslots)
        self.defaults = object_array(self.nslots)
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
            release(self.template, self.nslots)
            free(self.template)
        if self.defaults != NULL:
            release(self.defaults, self.nslots)
            free(self.defaults)
        free(self.arg_slots)
        free(self.slot_args)
        free(self.all_index)
        if self.seen_key != NULL:
            release(self.seen_key, self.ncache)
        free(self.seen_key)
        free(self.seen_slot)
        free(self.omit)

    @property
    def arg_names(self):
        return self.names

    @property
    def _impl(self):
        return self.impl

    @property
    def _own_grid(self):
        return self.own_grid

    def __getitem__(self, grid):
        # Python-visible form of ``override[grid]``, which goes to ``_override_subscript``
        # (below) directly.
        return _override_subscript(<PyObject*> self, <PyObject*> grid)

    def warmup(self, grid=None, **kwargs):
        """Compile-only warm-up (vLLM's ``kernel.warmup(grid, **kwargs)``), delegated to the
        impl's own ``warmup``; an impl without one has nothing to compile ahead."""
        warmup = getattr(self.impl, "warmup", None)
        if warmup is None:
            return None
        return warmup(grid=grid, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.impl(*args, **kwargs)

    def __repr__(self):
        return f"<KernelOverride {dict_of(self).get('_kernel_name')} -> {describe(self.impl)}>"

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
        cdef entry* entries
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
                entries = dict_entries(kwargs, &nentries)
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
                    put(slots, self.arg_slots[plan.input_fill_arg[k]],
                         PyTuple_GET_ITEM(input_values, plan.input_fill_index[k]), &filled)
                for k in range(plan.n_stride_fill):
                    if plan.stride_fill_input[k] >= 0:
                        source = <object> PyTuple_GET_ITEM(input_values, plan.stride_fill_input[k])
                    else:
                        source = kwargs[plan.stride_fill[k][1]]
                    stride = source.stride(plan.stride_fill_dim[k])
                    put(slots, self.arg_slots[plan.stride_fill_arg[k]], <PyObject*> stride, &filled)
            if unexpected is not None:
                raise unexpected_arguments(dict_of(self)['__name__'], dict_of(self)['_kernel_name'],
                                           unexpected, self.names)
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
                    raise missing_arguments(dict_of(self)['__name__'],
                                            dict_of(self)['_kernel_name'], missing)
            return PyObject_Vectorcall(self.impl, slots, <size_t> npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                       kwnames)
        finally:
            release(slots, nslots)
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
        put(slots, s, value, filled)
    return s


cdef object _launch_exact(KernelOverride ov, dict kwargs, bint lent):
    """The common launch, in a frame of its own: the same keys in the same order as the last
    complete launch (``exact_n``), each a kernel argument filling one slot.

    Why apart from ``launch``: that method's frame (its locals, its stack buffer, its error paths)
    costs more than this whole path. Every key is checked by pointer before anything is placed.
    Returns ``_NOT_EXACT``, having done and owned nothing, whenever the launch is not of this
    kind.

    Ownership: while the impl runs, each argument must stay alive even if the impl mutates the
    dict the values came from. ``lent``: the launcher's ``tp_call`` found ``kwargs`` with no
    reference but the one its caller lends (``Py_REFCNT == 1``: the fresh dict the interpreter
    builds for ``launcher(**kw)``, which no Python code holds). Then nothing can mutate it until
    we return, and the dict's own references keep every value alive: the values are passed as
    they are. Any other dict (one a caller can still reach, e.g. through ``_launch_kwargs``) has
    each value owned as it is placed and released after the call.
    """
    cdef PyObject* stack[STACK_SLOTS + 1]
    cdef PyObject** slots = stack + 1  # one free slot in front: PY_VECTORCALL_ARGUMENTS_OFFSET
    cdef Py_ssize_t n = ov.exact_n, nentries = 0, e
    cdef PyObject** seen_key = ov.seen_key
    cdef Py_ssize_t* seen_slot = ov.seen_slot
    cdef PyObject* kwnames = NULL
    cdef PyObject* value
    cdef entry* entries
    if n == 0 or n > STACK_SLOTS:
        return _NOT_EXACT
    entries = dict_entries(kwargs, &nentries)
    if entries == NULL or nentries != n:
        return _NOT_EXACT
    for e in range(n):
        value = entries[e].value
        if entries[e].key != seen_key[e] or value == NULL:
            return _NOT_EXACT
        slots[seen_slot[e]] = value
    # exact_n == nslots and the n keys filled n distinct slots: slots[:n] are all set
    if ov.kwnames is not None:
        kwnames = <PyObject*> ov.kwnames
    if lent:
        return PyObject_Vectorcall(ov.impl, slots, <size_t> ov.npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   kwnames)
    for e in range(n):
        _incref(slots[e])
    try:
        return PyObject_Vectorcall(ov.impl, slots, <size_t> ov.npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   kwnames)
    finally:
        for e in range(n):
            _decref(slots[e])


cdef object _launch_mixed(KernelOverride ov, tuple args, dict kwargs):
    """``override[grid](*args, **kwargs)`` with both: one keyed launch (``merge_positional``)."""
    merged = merge_positional(ov.names, args, kwargs, dict_of(ov)["__name__"],
                              dict_of(ov)["_kernel_name"])
    return ov.launch(merged, None, None)


cdef inline object _launch_by_kwargs(KernelOverride ov, dict kwargs, bint lent=False):
    """``override[grid](**kwargs)``: the exact path when it applies, else the full ``launch``."""
    if kwargs is not None:
        result = _launch_exact(ov, kwargs, lent)
        if result is not _NOT_EXACT:
            return result
    return ov.launch(kwargs, None, None)


cdef class Launcher:
    """What ``override[grid]`` returns: one per override, reused by every launch."""

    def __call__(self, *args, **kwargs):
        # Python-visible form; calls go through ``_launcher_tp_call`` (installed below).
        if args:
            if not kwargs:
                return self.override.impl(*args)
            return _launch_mixed(self.override, args, kwargs)
        return _launch_by_kwargs(self.override, kwargs)

    def __repr__(self):
        return f"<launcher of {self.override!r}>"


# -- call slots ----------------------------------------------------------------------------------
# Cython's generic ``def __call__(self, *args, **kwargs)`` wrapper checks every keyword and copies
# the kwargs dict before our code runs. ``launcher(**kw)`` already receives a fresh dict from the
# interpreter, so these types get a direct ``tp_call`` that hands the dict over untouched. The
# ``def __call__`` methods above stay as the documented, introspectable form; both do the same.

cdef object _launcher_tp_call(PyObject* self, PyObject* args, PyObject* kwds):
    # ``lent`` is read before any reference of ours is taken: 1 means only our caller holds it.
    cdef bint lent = kwds != NULL and _refcnt(kwds) == 1
    cdef KernelOverride override = (<Launcher> self).override
    if override is None or override.launcher is None:
        raise TypeError("launcher is not bound to an initialised KernelOverride")
    if PyTuple_GET_SIZE(<object> args) != 0:
        if kwds == NULL or PyDict_Size(<object> kwds) == 0:
            return call_kw_raw(override.impl, <tuple> args, kwds)
        return _launch_mixed(override, <tuple> args, <dict> kwds)
    if kwds == NULL:
        return _launch_by_kwargs(override, None)
    return _launch_by_kwargs(override, <dict> kwds, lent)


cdef object _override_tp_call(PyObject* self, PyObject* args, PyObject* kwds):
    return call_kw_raw((<KernelOverride> self).impl, <tuple> args, kwds)


cdef object _own_grid_launcher(KernelOverride ov, object grid):
    """``override[grid]`` for an impl that takes the grid itself (``own_grid``), kept out of
    ``_override_subscript``, which every launch enters (folded into it, launches read 1-4%
    slower against the floor in alternated runs)."""
    return grid_launcher(ov.own_grid(grid), dict_of(ov)["_grid_options"],
                         dict_of(ov)["_grid_cache"])


cdef object _override_subscript(PyObject* self, PyObject* grid):
    # ``override[grid]``, the first half of every launch: the cached launcher, or where the impl
    # takes the grid itself its launcher for that grid. A slot of its own because Cython's
    # ``__getitem__`` wrapper costs a launch ~20 instructions more than this.
    if (<KernelOverride> self).own_grid is None:
        return (<KernelOverride> self).launcher
    return _own_grid_launcher(<KernelOverride> self, <object> grid)


(<PyTypeObject*> Launcher).tp_call = <ternaryfunc> _launcher_tp_call
(<PyTypeObject*> KernelOverride).tp_call = <ternaryfunc> _override_tp_call
(<_TypeMapping*> <PyTypeObject*> KernelOverride).tp_as_mapping.mp_subscript = <subscriptfunc> _override_subscript
