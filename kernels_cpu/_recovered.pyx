# cython: language_level=3
"""CPU version of vLLM's ``sample_recovered_tokens_kernel``: the recovered token of every draft
position, ``argmax_v prob[v] * inv_q[request, v]``.

One of the rejection sampler's kernels; the rules every one of them follows (validate everything
first, then write in place at the caller's dtypes; what a launch may pass; the numerics of the
scores) are written once, in ``_sampling.pyx``'s docstring. The scan is vectorised by
construction (the C helpers below) and split into (token, vocab-chunk) units under OpenMP; each
unit writes its own slot and the chunks are reduced in a fixed order, so the result never
depends on the thread count.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, isize, check_index, check_rowed, DT_FLOAT64, M_REAL,
)
from kernels_cpu._checks cimport (
    Extent, as_flag, as_int, index_at_least, last_with_drafts, measure_offsets, need_count,
    need_min, need_rows, no_overlap, offset_start, prob_rows, required,
)
from kernels_cpu._parallel cimport threads_for


cdef extern from *:
    """
    /* Largest of max(t - d, 0) * q (or t * q when d is NULL) over [0, n), n a multiple of 32;
     * NaN scores never win; -inf when nothing beats -inf. Written with GCC/clang vector
     * extensions so it vectorises by construction (branch-free compare-select), independently
     * of the auto-vectoriser's mood, with four independent running maxima so the compare-select
     * latency chain does not bound the loop; on x86-64 Linux GCC also builds an AVX2 clone
     * chosen at load time. Scores are bit-identical to the scalar expression in _score_at
     * (same IEEE operations; nothing to contract into an FMA). */
    #include <math.h>
    #include <string.h>
    #include <stddef.h>
    #include <stdint.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \\
        && !defined(FD_NO_CLONES)
    #define FD_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define FD_CLONES
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    typedef float fd_v8f __attribute__((vector_size(32)));
    typedef int32_t fd_v8i __attribute__((vector_size(32)));
    typedef float fd_v4f __attribute__((vector_size(16)));
    typedef int32_t fd_v4i __attribute__((vector_size(16)));
    typedef double fd_v4d __attribute__((vector_size(32)));
    typedef int64_t fd_v4l __attribute__((vector_size(32)));

    /* lane = x > lane ? x : lane, elementwise (NaN x keeps lane) */
    #define FD_KEEP_MAX(lane, x, VI, VF) do { VI gt_ = (x) > (lane); \
        (lane) = (VF)(((VI)(x) & gt_) | ((VI)(lane) & ~gt_)); } while (0)

    /* one step of W elements at offset o into accumulator acc */
    #define FD_STEP_F32(acc, o) do { fd_v8f vt_, vd_, vq_, p_; \
        memcpy(&vt_, t + i + (o), sizeof vt_); memcpy(&vq_, q + i + (o), sizeof vq_); \
        if (d != NULL) { memcpy(&vd_, d + i + (o), sizeof vd_); p_ = vt_ - vd_; \
                         p_ = (fd_v8f)((fd_v8i)p_ & (p_ > zero)); } else { p_ = vt_; } \
        p_ = p_ * vq_; FD_KEEP_MAX(acc, p_, fd_v8i, fd_v8f); } while (0)

    #define FD_STEP_F64(acc, o) do { fd_v4f vt_, vd_, p_; fd_v4d vq_, x_; \
        memcpy(&vt_, t + i + (o), sizeof vt_); memcpy(&vq_, q + i + (o), sizeof vq_); \
        if (d != NULL) { memcpy(&vd_, d + i + (o), sizeof vd_); p_ = vt_ - vd_; \
                         p_ = (fd_v4f)((fd_v4i)p_ & (p_ > zero)); } else { p_ = vt_; } \
        x_ = __builtin_convertvector(p_, fd_v4d) * vq_; FD_KEEP_MAX(acc, x_, fd_v4l, fd_v4d); \
        } while (0)

    /* NAME: the largest score over [0, n), n a multiple of 4 * W, in four independent running
     * maxima of W lanes (VACC accumulators, VI their same-width integer vector, VZ the float
     * vector STEP compares with zero); one definition for the float32 and float64 scores. */
    #define FD_DEFINE_MAX(NAME, QT, VZ, VACC, VI, STEP, W) \
    FD_CLONES static QT NAME(const float* t, const float* d, const QT* q, ptrdiff_t n) { \
        const VZ zero = {0}; \
        VACC a0, a1, a2, a3; \
        ptrdiff_t i; \
        QT m = -INFINITY; \
        int l; \
        for (l = 0; l < W; l++) a0[l] = -INFINITY; \
        a1 = a0; a2 = a0; a3 = a0; \
        for (i = 0; i < n; i += 4 * W) { \
            STEP(a0, 0); STEP(a1, W); STEP(a2, 2 * W); STEP(a3, 3 * W); \
        } \
        FD_KEEP_MAX(a0, a1, VI, VACC); \
        FD_KEEP_MAX(a2, a3, VI, VACC); \
        FD_KEEP_MAX(a0, a2, VI, VACC); \
        for (l = 0; l < W; l++) m = a0[l] > m ? a0[l] : m; \
        return m; \
    }

    FD_DEFINE_MAX(fd_max_f32, float, fd_v8f, fd_v8f, fd_v8i, FD_STEP_F32, 8)
    FD_DEFINE_MAX(fd_max_f64, double, fd_v4f, fd_v4d, fd_v4l, FD_STEP_F64, 4)
    #else  /* no vector extensions: plain loops */
    #define FD_DEFINE_MAX_PLAIN(NAME, QT) \
    static QT NAME(const float* t, const float* d, const QT* q, ptrdiff_t n) { \
        QT m = -INFINITY, x; float p; ptrdiff_t i; \
        for (i = 0; i < n; i++) { \
            p = d ? t[i] - d[i] : t[i]; \
            if (d) p = p > 0 ? p : 0.0f; \
            x = p * q[i]; m = x > m ? x : m; \
        } \
        return m; \
    }
    FD_DEFINE_MAX_PLAIN(fd_max_f32, float)
    FD_DEFINE_MAX_PLAIN(fd_max_f64, double)
    #endif
    """
    float fd_max_f32(const float* t, const float* d, const float* q, Py_ssize_t n) noexcept nogil
    double fd_max_f64(const float* t, const float* d, const double* q,
                      Py_ssize_t n) noexcept nogil

ctypedef fused score_t:
    float
    double


cdef enum:
    SCAN_BLOCK = 2048    # vocab entries per block: the unit searched again when it holds the max
    LANES = 32           # the vector helpers' step (a multiple of their f32 and f64 strides)
    MIN_CHUNK = 8192     # smallest vocab chunk handed to a thread on its own

cdef struct RecoverArgs:
    const float* target
    const float* draft        # NULL: NO_DRAFT_PROBS (the draft id's own prob is masked to 0)
    const char* inv_q         # float or double, [B, V]
    IBuf draft_ids
    bint mask_draft
    const Py_ssize_t* req     # token -> request
    Py_ssize_t V
    Py_ssize_t chunk
    Py_ssize_t nchunks
    double* best              # per (token, chunk): best score, or -inf
    Py_ssize_t* where         # per (token, chunk): its lowest index, -1 when none beat -inf


cdef inline score_t _score_at(const float* t, const float* d, const score_t* q, Py_ssize_t i,
                              int64_t masked) noexcept nogil:
    """One score, exactly as the vector loops in ``_scan`` compute it."""
    cdef float p
    if d != NULL:
        p = t[i] - d[i]
        p = p if p > 0 else <float>0.0
    else:
        p = <float>0.0 if i == masked else t[i]
    return p * q[i]


cdef void _scan(const float* t, const float* d, const score_t* q, Py_ssize_t lo, Py_ssize_t hi,
                int64_t masked, double* best_out, Py_ssize_t* where_out) noexcept nogil:
    """First index of the largest score over [lo, hi) of one row; NaN scores never win.

    Per block, the vector helper finds the block's maximum (max is exact, so the lane order
    does not matter); only a block that raises the running maximum is searched again for its
    first index, recomputing its scores bit for bit with ``_score_at``. The one block holding
    a masked draft id, and each block's tail, take the scalar path.
    """
    cdef score_t best = -INFINITY, m, x
    cdef Py_ssize_t b0 = lo, n, nfull, j, i, where = -1
    while b0 < hi:
        n = hi - b0
        if n > SCAN_BLOCK:
            n = SCAN_BLOCK
        m = -INFINITY
        if d == NULL and b0 <= masked < b0 + n:
            nfull = 0
        else:
            nfull = n - n % LANES
            if score_t is float:
                m = fd_max_f32(t + b0, d + b0 if d != NULL else NULL, q + b0, nfull)
            else:
                m = fd_max_f64(t + b0, d + b0 if d != NULL else NULL, q + b0, nfull)
        for j in range(nfull, n):
            x = _score_at(t, d, q, b0 + j, masked)
            m = x if x > m else m
        if m > best:
            best = m
            i = b0      # m is one of this block's scores, recomputed bit for bit
            while i < b0 + n - 1 and _score_at(t, d, q, i, masked) != m:
                i += 1
            where = i
        b0 += n
    best_out[0] = best
    where_out[0] = where


cdef void _recover_unit(const RecoverArgs* a, const score_t* inv_q, Py_ssize_t u) noexcept nogil:
    cdef Py_ssize_t tok = u // a.nchunks
    cdef Py_ssize_t lo = (u % a.nchunks) * a.chunk
    cdef Py_ssize_t hi = lo + a.chunk
    cdef Py_ssize_t V = a.V
    cdef int64_t masked = iget(a.draft_ids, tok) if a.mask_draft else -1
    cdef const float* drow = NULL
    if a.draft != NULL:
        drow = a.draft + tok * V
    if hi > V:
        hi = V
    _scan(a.target + tok * V, drow, inv_q + a.req[tok] * V, lo, hi, masked, &a.best[u],
          &a.where[u])


cdef void _recover_all(const RecoverArgs* a, const score_t* inv_q, Py_ssize_t units,
                       int nt) noexcept nogil:
    cdef Py_ssize_t u
    if nt <= 1:
        for u in range(units):
            _recover_unit(a, inv_q, u)
    else:
        # dynamic: a unit is tens of microseconds, and a thread that is descheduled (or slowed
        # by a neighbour) then delays the launch by one unit, not by its whole static share.
        # No chunksize: OpenMP's dynamic default is 1, and a chunksize temporary would be
        # unused (a compiler warning) in a build without OpenMP.
        for u in prange(units, nogil=True, num_threads=nt, schedule="dynamic"):
            _recover_unit(a, inv_q, u)


def sample_recovered_tokens_kernel(output_token_ids_ptr, cu_num_draft_tokens_ptr,
                                   draft_token_ids_ptr, draft_probs_ptr, target_probs_ptr,
                                   inv_q_ptr, vocab_size, BLOCK_SIZE=None,
                                   NO_DRAFT_PROBS=None, USE_FP64_GUMBEL=None):
    """Recovered token per draft position: ``argmax_v prob[v] * inv_q[req, v]`` with
    ``prob = max(target - draft, 0)``, or the target with the draft id's own entry masked to 0
    under NO_DRAFT_PROBS (default: ``draft_probs_ptr is None``). The lowest index wins ties; the
    result is clamped to ``vocab_size - 1``.

    Scores are computed in ``inv_q``'s dtype (float32, or float64 for fp64 Gumbel noise), which
    is all USE_FP64_GUMBEL changes in the Triton kernel; it and BLOCK_SIZE are accepted and do
    not alter the result. Every position of every request is computed (the Triton grid covers
    ``max_spec_len`` positions per request, which callers size to the longest request).
    """
    cdef Py_ssize_t V = as_int(vocab_size, "vocab_size")
    cdef RecoverArgs a
    cdef Py_ssize_t shp[2]
    cdef Py_ssize_t B, T, i, units, tok, c, u, where, last
    cdef int64_t s, e
    cdef int code = 0, nt
    cdef double best
    cdef Extent ext
    cdef Py_ssize_t n_out
    cdef IBuf out = check_index(output_token_ids_ptr, "output_token_ids_ptr", -1, shp)
    n_out = shp[0]
    cdef IBuf cu = check_index(cu_num_draft_tokens_ptr, "cu_num_draft_tokens_ptr", -1, shp)
    B = shp[0]
    measure_offsets(cu, B, -1, NULL, -1, "cu_num_draft_tokens_ptr", &ext)
    T = ext.tok_end
    need_count("output_token_ids_ptr", n_out, T, "one per draft token")
    a.mask_draft = as_flag(NO_DRAFT_PROBS, "NO_DRAFT_PROBS", draft_probs_ptr is None)
    if a.mask_draft:
        # the draft ids are read only to mask their own probability
        a.draft_ids = index_at_least(draft_token_ids_ptr, "draft_token_ids_ptr", T,
                                     "one per draft token")
    else:
        a.draft_ids.ptr = NULL
        a.draft_ids.wide = False
    need_min("vocab_size", V, 0)
    a.V = V
    prob_rows(target_probs_ptr, "target_probs_ptr", T, V, &a.target)
    if a.mask_draft:
        a.draft = NULL
    elif draft_probs_ptr is None:
        required(None, "draft_probs_ptr", "unless NO_DRAFT_PROBS is set")
    else:
        prob_rows(draft_probs_ptr, "draft_probs_ptr", T, V, &a.draft)
    a.inv_q = check_rowed(inv_q_ptr, "inv_q_ptr", M_REAL, V, "vocab_size", &code, shp)
    # rows of requests with drafts are read (the Triton grid exits early for the others)
    last = last_with_drafts(cu, B)
    need_rows("inv_q_ptr", shp[0], last, V, "vocab_size", inv_q_ptr)
    no_overlap("output_token_ids_ptr", out.ptr, T * isize(out), "cu_num_draft_tokens_ptr", cu.ptr,
               B * isize(cu))
    if T == 0:
        return

    nt = threads_for(T * V)
    a.nchunks = 1
    if nt > 1 and T < 4 * nt and V >= 2 * MIN_CHUNK:
        a.nchunks = min((4 * nt + T - 1) // T, V // MIN_CHUNK)
    a.chunk = (V + a.nchunks - 1) // a.nchunks
    units = T * a.nchunks
    cdef char* mem = <char*>malloc(T * sizeof(Py_ssize_t) + units * (sizeof(double) +
                                                                     sizeof(Py_ssize_t)))
    if mem == NULL:
        raise MemoryError()
    try:
        a.best = <double*>mem
        a.where = <Py_ssize_t*>(mem + units * sizeof(double))
        a.req = <Py_ssize_t*>(mem + units * (sizeof(double) + sizeof(Py_ssize_t)))
        for i in range(B):
            e = iget(cu, i)
            s = offset_start(cu, i)
            while s < e:
                (<Py_ssize_t*>a.req)[s] = i
                s += 1
        with nogil:
            if code == DT_FLOAT64:
                _recover_all(&a, <const double*>a.inv_q, units, nt)
            else:
                _recover_all(&a, <const float*>a.inv_q, units, nt)
            # fixed-order reduction over chunks: the earliest chunk wins ties
            for tok in range(T):
                best = -INFINITY
                where = -1
                for c in range(a.nchunks):
                    u = tok * a.nchunks + c
                    if a.where[u] >= 0 and a.best[u] > best:
                        best = a.best[u]
                        where = a.where[u]
                if where < 0:
                    where = 0
                if where > V - 1:
                    where = V - 1
                iset(out, tok, where)
    finally:
        free(mem)
