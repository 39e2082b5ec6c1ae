# cython: language_level=3
"""Thread-count policy for the kernels' OpenMP regions.

Rules (in order):

* Built without OpenMP (e.g. Apple clang): always 1 -- ``openmp_enabled()`` says so.
* In a process created by ``fork()`` (the flag is inherited by its own children too): 1, for
  good. GNU libgomp keeps a per-thread pool of worker threads once a parallel region has run
  -- ours or torch's, they share it. A forked child inherits the pool's bookkeeping but not its
  threads, and its next parallel region waits forever for them. Nothing public tells whether
  the parent had started a pool, so a forked child runs every loop serially (the serial branch
  never enters an OpenMP region and needs no runtime). Processes started by spawn or
  forkserver -- vLLM's CPU platform selects spawn for its workers -- are unaffected.
* Called from inside an OpenMP parallel region (e.g. from one of torch's own intra-op threads):
  1, to avoid nested oversubscription.
* The team size is the ``kernels_cpu.set_num_threads(n)`` setting if one was made, else torch's
  (``torch.get_num_threads()``), so ``torch.set_num_threads`` governs both by default.
* Work below the serial threshold of that team size (``parallel_threshold()``, in
  element-visits): 1, so small launches pay no team start-up.

The threshold is decided, not guessed: the first time a team of ``n`` threads is considered, the
cost of starting an (empty) parallel region of ``n`` threads and the cost of one serial
element-visit are measured (minimum over repeats, after a warm-up), and the threshold is the
work at which ``n`` threads beat one thread by a clear margin:
``work * t_elem > MARGIN * (t_region + work * t_elem / n)``. The region's minimum is over 16
timed regions: a burst within a small time budget at each launch that considers the team until
16 have been timed (one burst, normally), then remembered -- a burst the host stalled (threads
waiting milliseconds for a core) does not decide the team's threshold for good.
``set_parallel_threshold(work)`` pins it instead (``None``: calibrated again).

Torch's thread count costs a Python call (~50 ns) per launch if asked for every time. Under
torch's OpenMP backend ``torch.get_num_threads()`` *is* ``omp_get_max_threads()`` of the calling
thread once torch has initialised that thread's setting, which its first call does. So the first
launch in each OS thread asks torch (through Python) and later launches read the OpenMP value
(a few ns) -- which follows every later ``torch.set_num_threads`` in that thread, because that is
where torch writes it. Whether that identity holds for the torch in this process is checked at
import (the two are compared after changing torch's setting); if it does not, every launch asks
torch.
"""
import torch

cdef extern from *:
    """
    #include <time.h>
    #ifdef _OPENMP
    #include <omp.h>
    #define FD_HAVE_OPENMP 1
    static int fd_in_parallel(void) { return omp_in_parallel(); }
    static int fd_omp_max_threads(void) { return omp_get_max_threads(); }
    #else
    #define FD_HAVE_OPENMP 0
    static int fd_in_parallel(void) { return 0; }
    static int fd_omp_max_threads(void) { return 1; }
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

    /* Whether torch has initialised this OS thread's OpenMP setting (see the module). */
    #if defined(_MSC_VER)
    static __declspec(thread) int fd_thread_ready = 0;
    #else
    static __thread int fd_thread_ready = 0;
    #endif
    static int fd_get_thread_ready(void) { return fd_thread_ready; }
    static void fd_set_thread_ready(void) { fd_thread_ready = 1; }

    static double fd_now_ns(void) {
    #if defined(CLOCK_MONOTONIC) && !defined(_WIN32)
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
    #else
        return (double)clock() * (1e9 / CLOCKS_PER_SEC);
    #endif
    }

    /* Start-up and join of an empty parallel region of n threads, ns: minimum over at most
       reps regions, stopping once budget_ns have been spent (a loaded host, where a woken
       thread can wait milliseconds for a core, must not stall the launch that calibrates);
       *done: how many were timed (at least one). */
    static double fd_region_ns(int n, int reps, double budget_ns, int* done) {
    #ifdef _OPENMP
        double best = 1e30, t0, t, start = fd_now_ns();
        int r;
        volatile int sink = 0;
        for (r = 0; r < reps; r++) {
            t0 = fd_now_ns();
            #pragma omp parallel num_threads(n)
            { if (omp_get_thread_num() < 0) sink = 1; }
            t = fd_now_ns() - t0;
            if (t < best) best = t;
            if (t0 + t - start > budget_ns) { r++; break; }
        }
        (void)sink;
        *done = r;
        return best;
    #else
        (void)n; (void)reps; (void)budget_ns;
        *done = reps;
        return 0.0;
    #endif
    }

    /* One serial element-visit of the kernels' kind (read an index, branch, write), ns:
       minimum over reps of a pass over n int64 elements. */
    static double fd_visit_ns(long long *buf, long long n, int reps) {
        volatile long long *b = buf;   /* every read and write happens, in order */
        double best = 1e30, t0, t;
        long long i, acc;
        int r;
        for (r = 0; r < reps; r++) {
            acc = 0;
            t0 = fd_now_ns();
            for (i = 0; i < n; i++) {
                long long v = b[i];
                if (v > acc) acc = v; else acc += 1;
                b[i] = acc & 7;
            }
            t = fd_now_ns() - t0;
            if (t < best) best = t;
        }
        return best / (double)n;
    }
    """
    int FD_HAVE_OPENMP
    int fd_in_parallel() nogil
    int fd_omp_max_threads() nogil
    int fd_forked
    int fd_watch_fork()
    int fd_get_thread_ready() nogil
    void fd_set_thread_ready() nogil
    double fd_region_ns(int n, int reps, double budget_ns, int* done) nogil
    double fd_visit_ns(long long* buf, long long n, int reps) nogil

from libc.stdlib cimport malloc, free

from kernels_cpu._buffers cimport expected

cdef enum:
    MAX_TEAM = 256          # team sizes calibrated one by one; larger teams use the last one
    MIN_THRESHOLD = 1024    # never parallel below this, whatever the measurement says
    MAX_THRESHOLD = 1 << 24
    DEFAULT_THRESHOLD = 1 << 16   # used where nothing can be measured (no OpenMP)

# A parallel team must beat the serial loop by this factor before it is used: the measurement
# is of an empty region on an idle team, a real one also moves the working set between cores.
cdef double MARGIN = 1.5

cdef int _setting = 0               # 0: follow torch's thread count
cdef Py_ssize_t _pinned = -1        # >= 0: set_parallel_threshold's value
cdef Py_ssize_t _calibrated[MAX_TEAM + 1]   # 0: not settled yet
# A team's region time is the minimum over REGION_SAMPLES timed regions, gathered over as many
# launches as it takes (each one a burst within a budget): one burst on a host that stalled it
# -- a team's threads waiting milliseconds for cores -- must not decide for the process's
# lifetime that the team never pays (a B1 row of a 128k vocabulary then ran on one thread of 16)
cdef double _region_min[MAX_TEAM + 1]      # ns; the minimum so far (0: none yet)
cdef int _region_count[MAX_TEAM + 1]
cdef enum:
    REGION_SAMPLES = 16
cdef double _visit_ns = 0.0
cdef object _torch_threads = torch.get_num_threads
cdef bint _omp_follows_torch = False

if fd_watch_fork() != 0:
    raise ImportError("kernels_cpu: pthread_atfork failed; cannot make forked children safe")

cdef void _forget_calibration() noexcept:
    cdef int k
    for k in range(MAX_TEAM + 1):
        _calibrated[k] = 0
        _region_min[k] = 0.0
        _region_count[k] = 0


_forget_calibration()


def _check_omp_follows_torch():
    """Whether ``omp_get_max_threads()`` reads torch's thread count here (module docstring).

    Compared in this thread across two different torch settings (restored afterwards); any
    disagreement -- another threading backend, a second OpenMP runtime -- turns the shortcut off.
    """
    global _omp_follows_torch
    _omp_follows_torch = False
    if not FD_HAVE_OPENMP:
        return False
    before = int(_torch_threads())
    try:
        ok = fd_omp_max_threads() == before
        for n in (1, 2, before):
            torch.set_num_threads(n)
            ok = ok and fd_omp_max_threads() == int(_torch_threads()) == n
    finally:
        torch.set_num_threads(before)
    _omp_follows_torch = bool(ok)
    if _omp_follows_torch:
        fd_set_thread_ready()
    return _omp_follows_torch


_check_omp_follows_torch()


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
        raise ValueError(expected("n", "a positive int or None", repr(n)))
    _setting = n


cdef inline int _team() noexcept:
    """The team size a large launch would use now (before the work threshold)."""
    cdef int n
    if _setting > 0:
        return _setting
    if _omp_follows_torch and fd_get_thread_ready():
        n = fd_omp_max_threads()
        return n if n > 0 else 1
    try:
        n = _torch_threads()
    except Exception:
        return 1
    if _omp_follows_torch:
        fd_set_thread_ready()     # torch has initialised this thread's setting just now
    return n if n > 0 else 1


def get_num_threads():
    """The thread count a large launch would use now."""
    if not FD_HAVE_OPENMP or fd_forked:
        return 1
    return _team()


def set_parallel_threshold(work):
    """Pin the smallest work size (element-visits) that runs multi-threaded; ``None`` returns
    to the calibrated threshold of each team size."""
    global _pinned
    if work is None:
        _pinned = -1
        return
    if not isinstance(work, int) or isinstance(work, bool) or work < 0:
        raise ValueError(expected("work", "an int >= 0 or None", repr(work)))
    _pinned = work


cdef Py_ssize_t _work_at(int n, double region) noexcept:
    """The threshold of a team of ``n`` whose empty region costs ``region`` ns."""
    cdef double gain, work
    # parallel wins by MARGIN when work * visit > MARGIN * (region + work * visit / n)
    gain = 1.0 - MARGIN / n
    if gain <= 0 or _visit_ns <= 0:
        work = MAX_THRESHOLD
    else:
        work = MARGIN * region / (_visit_ns * gain)
    if work < MIN_THRESHOLD:
        work = MIN_THRESHOLD
    if work > MAX_THRESHOLD:
        work = MAX_THRESHOLD
    return <Py_ssize_t>work


cdef void _add_region(int k, double region, int count) noexcept:
    """Fold ``count`` timed regions of minimum ``region`` ns into team ``k``'s calibration;
    settled (remembered for good) once REGION_SAMPLES have been timed."""
    if _region_count[k] == 0 or region < _region_min[k]:
        _region_min[k] = region
    _region_count[k] += count
    if _region_count[k] >= REGION_SAMPLES:
        _calibrated[k] = _work_at(k, _region_min[k])


cdef Py_ssize_t _calibrate(int n) noexcept:
    """The threshold of a team of ``n`` (>= 2) threads: a burst of timed regions more, until
    the team's calibration has settled, then the remembered value."""
    global _visit_ns
    cdef int k = n if n <= MAX_TEAM else MAX_TEAM
    cdef int done = 0
    cdef double region
    cdef long long* buf
    cdef long long i, m = 1 << 14
    if _calibrated[k] > 0:
        return _calibrated[k]
    if _visit_ns <= 0:
        buf = <long long*>malloc(m * sizeof(long long))
        if buf == NULL:
            return DEFAULT_THRESHOLD
        for i in range(m):
            buf[i] = i & 7
        _visit_ns = fd_visit_ns(buf, m, 5)
        free(buf)
        if _visit_ns <= 0:
            _visit_ns = 0.25
    if _region_count[k] == 0:
        fd_region_ns(n, 2, 1e6, &done)   # warm-up: create the team's threads
    region = fd_region_ns(n, 25, 2e6, &done)
    _add_region(k, region, done)
    if _calibrated[k] > 0:
        return _calibrated[k]
    return _work_at(k, _region_min[k])


def _record_regions(int n, double region_ns, int count):
    """Fold ``count`` regions of minimum ``region_ns`` into team ``n``'s calibration, as a
    burst of the calibration does (tests: a stalled first burst)."""
    if not 2 <= n <= MAX_TEAM or count < 1 or not region_ns > 0:
        raise ValueError(expected("n, region_ns, count", "2 <= n <= 256, > 0, >= 1",
                                  f"{n}, {region_ns}, {count}"))
    _add_region(n, region_ns, count)


def _forget():
    """Forget every team's calibration (tests)."""
    _forget_calibration()


cdef inline Py_ssize_t _threshold(int n) noexcept:
    if _pinned >= 0:
        return _pinned
    if not FD_HAVE_OPENMP or n <= 1:
        return DEFAULT_THRESHOLD
    if n <= MAX_TEAM and _calibrated[n] > 0:
        return _calibrated[n]
    return _calibrate(n)


def parallel_threshold():
    """The smallest work (element-visits) that runs multi-threaded with the current team size:
    the pinned value, else the calibrated one (measured now if not yet)."""
    if fd_forked:
        return _pinned if _pinned >= 0 else DEFAULT_THRESHOLD
    return int(_threshold(_team() if FD_HAVE_OPENMP else 1))


def _calibration():
    """What the calibration measured: ``{"visit_ns": ..., "thresholds": {team: work}}`` (the
    settled teams), ``"settling": {team: (regions timed, minimum ns)}`` (the others)."""
    return {
        "visit_ns": _visit_ns,
        "thresholds": {k: _calibrated[k] for k in range(2, MAX_TEAM + 1) if _calibrated[k] > 0},
        "settling": {
            k: (_region_count[k], _region_min[k])
            for k in range(2, MAX_TEAM + 1)
            if _calibrated[k] == 0 and _region_count[k] > 0
        },
        "pinned": _pinned if _pinned >= 0 else None,
        "omp_follows_torch": bool(_omp_follows_torch),
    }


cdef int threads_for(Py_ssize_t work) noexcept:
    cdef int n
    if not FD_HAVE_OPENMP or fd_forked or (work < MIN_THRESHOLD and _pinned < 0):
        return 1
    if fd_in_parallel():
        return 1
    n = _team()
    if n <= 1 or work < _threshold(n):
        return 1
    return n
