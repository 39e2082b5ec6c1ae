# cython: language_level=3
"""Thread-count policy for the kernels' OpenMP regions.

Rules (in order):

* Built without OpenMP (e.g. Apple clang): always 1 -- ``openmp_enabled()`` says so.
* Work below the serial threshold (``parallel_threshold()``, in element-visits): 1, so tiny
  launches pay no thread-team start-up.
* Called from inside an OpenMP parallel region (e.g. from one of torch's own intra-op threads):
  1, to avoid nested oversubscription.
* Otherwise the ``kernels_cpu.set_num_threads(n)`` setting if one was made, else
  ``torch.get_num_threads()`` -- so ``torch.set_num_threads`` governs both by default.
"""
import torch

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define FD_HAVE_OPENMP 1
    static int fd_in_parallel(void) { return omp_in_parallel(); }
    #else
    #define FD_HAVE_OPENMP 0
    static int fd_in_parallel(void) { return 0; }
    #endif
    """
    int FD_HAVE_OPENMP
    int fd_in_parallel() nogil

cdef int _setting = 0               # 0: follow torch.get_num_threads()
cdef Py_ssize_t _threshold = 1 << 16
cdef object _torch_threads = torch.get_num_threads


def openmp_enabled():
    """True when this build's kernels run their loops with OpenMP."""
    return bool(FD_HAVE_OPENMP)


def set_num_threads(n=None):
    """Set the kernels' thread count; ``None`` follows ``torch.get_num_threads()`` again."""
    global _setting
    if n is None:
        _setting = 0
        return
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int or None, got {n!r}")
    _setting = n


def get_num_threads():
    """The thread count a large launch would use now."""
    if not FD_HAVE_OPENMP:
        return 1
    return _setting if _setting > 0 else int(_torch_threads())


def set_parallel_threshold(Py_ssize_t work):
    """Smallest work size (element-visits) that runs multi-threaded; below it loops are serial."""
    global _threshold
    if work < 0:
        raise ValueError("work must be >= 0")
    _threshold = work


def parallel_threshold():
    return _threshold


cdef int threads_for(Py_ssize_t work) noexcept:
    cdef int n
    if not FD_HAVE_OPENMP or work < _threshold or fd_in_parallel():
        return 1
    if _setting > 0:
        return _setting
    try:
        n = _torch_threads()
    except Exception:
        return 1
    return n if n > 0 else 1
