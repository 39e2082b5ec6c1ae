# cython: language_level=3
"""Thread-count policy for the kernels' OpenMP regions.

Rules (in order):

* Built without OpenMP (e.g. Apple clang): always 1 -- ``openmp_enabled()`` says so.
* Work below the serial threshold (``parallel_threshold()``, in element-visits): 1, so tiny
  launches pay no thread-team start-up.
* Called from inside an OpenMP parallel region (e.g. from one of torch's own intra-op threads):
  1, to avoid nested oversubscription.
* In a process created by ``fork()`` (the flag is inherited by its own children too): 1, for
  good. GNU libgomp keeps a per-thread pool of worker threads once a parallel region has run
  -- ours or torch's, they share it. A forked child inherits the pool's bookkeeping but not its
  threads, and its next parallel region waits forever for them. Nothing public tells whether
  the parent had started a pool, so a forked child runs every loop serially (the serial branch
  never enters an OpenMP region and needs no runtime). Processes started by spawn or
  forkserver -- vLLM's CPU platform selects spawn for its workers -- are unaffected.
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

    /* Set in the child of every fork() -- os.fork, multiprocessing's fork start method, or a
       fork from C code -- through pthread_atfork, so no Python hook can be bypassed. */
    static volatile int fd_forked = 0;
    #if defined(_OPENMP) && !defined(_WIN32)
    #include <pthread.h>
    static void fd_mark_forked(void) { fd_forked = 1; }
    static int fd_watch_fork(void) { return pthread_atfork(NULL, NULL, fd_mark_forked); }
    #else
    static int fd_watch_fork(void) { return 0; }
    #endif
    """
    int FD_HAVE_OPENMP
    int fd_in_parallel() nogil
    int fd_forked
    int fd_watch_fork()

cdef int _setting = 0               # 0: follow torch.get_num_threads()
cdef Py_ssize_t _threshold = 1 << 16
cdef object _torch_threads = torch.get_num_threads

if fd_watch_fork() != 0:
    raise ImportError("kernels_cpu: pthread_atfork failed; cannot make forked children safe")


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
    if not FD_HAVE_OPENMP or fd_forked:
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
    if not FD_HAVE_OPENMP or fd_forked or work < _threshold or fd_in_parallel():
        return 1
    if _setting > 0:
        return _setting
    try:
        n = _torch_threads()
    except Exception:
        return 1
    return n if n > 0 else 1
