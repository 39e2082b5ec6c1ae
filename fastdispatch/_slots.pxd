# C-level pieces shared by the compiled launch path (_override, _plan, _owner, _vllm_owner):
# raw reference counting, the impl call, call-slot arrays and the direct reader of a dict's entry
# table. Everything here is ``inline`` (each module gets its own copy; no cross-module call).
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from libc.stdlib cimport malloc
from libc.string cimport memset


from fastdispatch._capi cimport (
    PY_VECTORCALL_ARGUMENTS_OFFSET, PyObject_GenericGetDict, PyObject_Vectorcall, _decref,
    _incref, _refcnt,
)


cdef extern from *:
    """
    #define __fd_tuple_items(t) (((PyTupleObject *)(t))->ob_item)

    /* Direct read of a dict's entry table. PyDict_Next costs ~50 instructions per item on
     * CPython 3.11, more than the rest of a launch's per-argument work; a combined dict whose
     * keys are all exact str (every kwargs dict, every dict literal with name keys) stores its
     * entries as (key, value) pairs in insertion order, which is what PyDict_Next walks. The
     * layout below is CPython's (Include/internal/pycore_dict.h) for 3.11-3.13 with the GIL; on
     * any other interpreter, or for split/general dicts, the caller falls back to PyDict_Next.
     * Each module cross-checks this reader against PyDict_Next at import (check_dict_reader)
     * and leaves it off on any disagreement. */
    typedef struct { PyObject *key; PyObject *value; } __fd_entry;
    static int __fd_fast_dict = 0;
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
    static inline void __fd_set_fast_dict(int on) { __fd_fast_dict = on; }
    """
    PyObject** tuple_items "__fd_tuple_items" (object t)
    ctypedef struct entry "__fd_entry":
        PyObject* key
        PyObject* value
    entry* _raw_dict_entries "__fd_dict_entries" (object d, Py_ssize_t* n)
    int _dict_layout_known "__fd_dict_layout_known"
    int _fast_dict "__fd_fast_dict"
    void _set_fast_dict "__fd_set_fast_dict" (int on)


# Slots up to this count live on the C stack; larger impl calls allocate (no kernel comes close).
cdef enum:
    STACK_SLOTS = 48


cdef inline entry* dict_entries(dict d, Py_ssize_t* n) noexcept:
    """The entry table of ``d`` when it can be walked directly, else NULL (use PyDict_Next)."""
    if not _fast_dict:
        return NULL
    return _raw_dict_entries(d, n)


cdef inline bint check_dict_reader():
    """Compare the direct entry reader with PyDict_Next; enable it only if they agree."""
    cdef entry* entries
    cdef Py_ssize_t n = 0, i, position = 0
    cdef PyObject* key
    cdef PyObject* value
    _set_fast_dict(0)
    if not _dict_layout_known:
        return False
    # (loops, not comprehensions: an inline function of a .pxd cannot hold a generator)
    samples = [{}, dict(a=1), {"x": 1, "y_ptr": None, "BLOCK": 3}, dict(**{"p": 1, "q": 2})]
    big = {}
    for i in range(100):
        big[f"k{i}"] = i
    for i in range(0, 100, 3):
        del big[f"k{i}"]
    big["late"] = object()
    samples.append(big)
    for d in samples:
        entries = _raw_dict_entries(d, &n)
        if entries == NULL:
            return False
        direct = []
        for i in range(n):
            if entries[i].value != NULL:
                direct.append((<object> entries[i].key, <object> entries[i].value))
        walked = []
        position = 0
        while PyDict_Next(d, &position, &key, &value):
            walked.append((<object> key, <object> value))
        if len(direct) != len(walked):
            return False
        for i in range(len(direct)):
            if direct[i][0] is not walked[i][0] or direct[i][1] is not walked[i][1]:
                return False
    _set_fast_dict(1)
    return True


cdef inline dict dict_of(object o):
    # Cython forbids ``self.__dict__`` inside a class that declares it; this is the same dict.
    return <dict> PyObject_GenericGetDict(o, NULL)


cdef inline Py_ssize_t* index_array(object values) except NULL:
    cdef Py_ssize_t n = len(values)
    cdef Py_ssize_t* out = <Py_ssize_t*> malloc((n if n > 0 else 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t i
    if out == NULL:
        raise MemoryError()
    for i in range(n):
        out[i] = values[i]
    return out


cdef inline PyObject** object_array(Py_ssize_t n) except NULL:
    cdef PyObject** out = <PyObject**> malloc((n if n > 0 else 1) * sizeof(PyObject*))
    if out == NULL:
        raise MemoryError()
    memset(out, 0, (n if n > 0 else 1) * sizeof(PyObject*))
    return out


cdef inline void put(PyObject** slots, Py_ssize_t s, PyObject* value, Py_ssize_t* filled) noexcept:
    """Store an owned reference to ``value`` in slot ``s``; count slots filled the first time."""
    _incref(value)
    if slots[s] != NULL:
        _decref(slots[s])
    else:
        filled[0] += 1
    slots[s] = value


cdef inline void release(PyObject** slots, Py_ssize_t n) noexcept:
    cdef Py_ssize_t s
    for s in range(n):
        if slots[s] != NULL:
            _decref(slots[s])
            slots[s] = NULL
