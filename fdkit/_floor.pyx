# cython: language_level=3
"""Measuring instruments: the part of a launch ``x[grid](**kw)`` that no launcher can remove.

Why this exists: a launch is written ``override[grid](**kw)``. Before any launcher code runs,
CPython 3.11 executes ``BUILD_MAP 0; DICT_MERGE; CALL_FUNCTION_EX`` -- it copies the caller's
kwargs dict into a new one, calls through ``PyObject_Call``, and frees the copy afterwards. And
a launcher written in C that ends in a Python implementation calls it through
``PyObject_Vectorcall``, which enters a fresh evaluation loop; a direct ``impl(a0, ..., a9)``
written in Python is an inlined ``CALL`` and cheaper. Both costs belong to the interpreter, not
to the launcher, and they are not small next to a 10-argument no-op. To say how fast a launcher
is, one has to measure them, side by side, in the same run:

* ``NullLauncher(impl, args)``: ``nl[grid](**kw)`` ignores ``grid`` and ``kw`` and calls
  ``impl(*args)`` with the stored tuple (one ``PyObject_Vectorcall``). It is a launcher that does
  no binding work at all, so it is the floor for any launcher that ends in a Python call: a
  correct one has to read ``kw`` on top of this. ``bench/launch_overhead.py`` and the ``launch``
  suite of ``python -m bench`` show it next to ``fastdispatch.KernelOverride``.
* ``NullSink()``: ``ns[grid](**kw)`` returns ``None`` without calling anything: the caller's
  part alone (subscript, dict copy, call, free).

Both get a direct ``tp_call``, as ``_core``'s launcher does, so that they are measured through
exactly the call path a launch takes. Neither has a pure-Python twin: a floor written in Python
would not be one.
"""
from cpython.object cimport PyObject, PyTypeObject, ternaryfunc
from cpython.tuple cimport PyTuple_GET_SIZE

from fastdispatch._capi cimport PyObject_Vectorcall, PyTupleObject

__all__ = ["NullLauncher", "NullSink"]


cdef class NullLauncher:
    """``nl[grid](**kw)`` -> ``impl(*args)``: a launcher with no binding work (see the module)."""

    cdef readonly object impl
    cdef readonly tuple args

    def __init__(self, impl, args):
        if not callable(impl):
            raise TypeError(f"impl must be callable, got {type(impl).__name__}")
        if type(args) is not tuple:
            raise TypeError(f"args must be a tuple, got {type(args).__name__}")
        self.impl = impl
        self.args = args

    def __getitem__(self, grid):
        return self

    def __call__(self, *args, **kwargs):
        # Python-visible form; calls go through ``_null_launcher_call`` (installed below).
        return self.impl(*self.args)

    def __repr__(self):
        return f"<NullLauncher {self.impl!r} with {PyTuple_GET_SIZE(self.args)} args>"


cdef class NullSink:
    """``ns[grid](**kw)`` -> ``None``: the caller's part of a launch alone (see the module)."""

    def __getitem__(self, grid):
        return self

    def __call__(self, *args, **kwargs):
        return None

    def __repr__(self):
        return "<NullSink>"


cdef object _null_launcher_call(PyObject* self, PyObject* args, PyObject* kwds):
    cdef NullLauncher nl = <NullLauncher> self
    cdef tuple stored = nl.args
    return PyObject_Vectorcall(nl.impl, (<PyTupleObject*> stored).ob_item,
                               <size_t> PyTuple_GET_SIZE(stored), NULL)


cdef object _null_sink_call(PyObject* self, PyObject* args, PyObject* kwds):
    return None


(<PyTypeObject*> NullLauncher).tp_call = <ternaryfunc> _null_launcher_call
(<PyTypeObject*> NullSink).tp_call = <ternaryfunc> _null_sink_call
