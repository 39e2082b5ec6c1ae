# cython: language_level=3
"""Random rejection sampling that draws its own noise: no ``[B, V]`` exponential tensor.

vLLM's random path samples each recovered token as ``argmax_v prob[v] / E[v]`` with ``E`` a
materialised ``[B, V]`` Exp(1) tensor (``q.exponential_()``); on CPU drawing that tensor is 85-90 %
of the step. The kernels here draw the noise inside the vocabulary loop from a counter-based
generator (Philox-4x32-10, ``_philox.pxd``), so the only memory traffic is one read of each
probability row that is actually needed.

Exponential race by blocks (why it is exact)
--------------------------------------------
Sampling ``v ~ p / sum(p)`` by Gumbel-max is a race of exponential clocks: ``A_v = E_v / p_v`` with
``E_v`` iid Exp(1), the winner is ``argmin A_v``. Split the vocabulary into fixed blocks of
``BLOCK`` = 256 ids. The first arrival inside block ``b`` is ``min_{v in b} A_v ~ Exp(P_b)`` with
``P_b = sum_{v in b} p_v``, and *which* id in the block arrives first is independent of when, with
probability ``p_v / P_b``. So drawing one ``E_b`` per block, taking ``b* = argmax_b P_b / E_b``
(= argmin ``E_b / P_b``) and then ``v ~ p / P_b*`` inside ``b*`` (one more uniform) has exactly the
per-element Gumbel-max distribution -- with 1/256 of the random numbers. The inner loop is then a
plain vectorisable block sum (32 float lanes, fixed order: deterministic), which runs at memory
speed; the generator runs once per four blocks.

Precision: block sums are float32 (relative error ~1e-6, i.e. total variation ~1e-6 to the exact
law); ``E_b = -log((x + 0.5) 2**-32)`` and the scores ``P_b / E_b`` are float64 (``E_b`` in
(1.2e-10, 22.9], never 0, so scores are finite); the in-block choice accumulates in float64 with a
53-bit uniform. Only candidate blocks pay for the ``log``: since ``-log(u) >= 1 - u``, a block whose
``P_b <= best * (1 - u)`` cannot win and is skipped after one multiply (about ``ln(#blocks)``
blocks per row take the ``log``); the result is identical to evaluating every block.

Random stream (a pure function, so results do not depend on threads or chunking)
------------------------------------------------------------------------------
Per request a 64-bit key and a 32-bit stream id (``seeds[r] = (key, stream)``). Counters, with
``j`` the position inside the request:

* ``(b // 4, j, stream, 0)`` -> word ``b % 4`` is the exponential of block ``b``;
* ``(0, j, stream, 1)``      -> words 0-1: the accept uniform; words 2-3: the in-block uniform.

Work is split into (row, chunk of blocks) items run under OpenMP; each item writes its own best
(score, block) and the items are reduced in index order with a strict ``>``, so ties go to the
lowest block and the result is the same at any thread count and any chunk size.

Entry points
------------
* ``recovered_tokens``: the recovered token of every draft position (what vLLM's
  ``sample_recovered_tokens`` computes); ``sample_recovered_tokens_kernel_fused`` is the same with
  vLLM's kernel signature (keys from ``inv_q``'s first bytes, values ignored).
* ``rejection_sample_step``: a whole step on probabilities -- accept walk, then a recovered token
  only at each request's first rejection (one row per request instead of all ``T``), bonus.
* ``rejection_sample_step_logits``: the same on logits with the softmax folded in: a row is
  normalised (max, then block sums of ``exp(l - max)``) only when the walk reaches it, with a
  vectorised float32 ``exp`` (< 2 ulp); no probability tensor is written. Requests walk in
  parallel.

Every float operation in the C loops is compiled without fma contraction, and the sums have a
fixed order, so the AVX-512, AVX2 and baseline clones produce the same bits: same seeds, same
tokens on any x86-64 machine and thread count.

Semantics that follow vLLM's kernels: a draft id < 0 is rejected; accept when ``draft_prob > 0``
and ``target_prob / draft_prob >= u`` (ratio and compare in float64; ``draft_prob = 1`` without
draft probs); the recovered distribution is ``max(target - draft, 0)``, or ``target`` with the
draft id masked when there are no draft probs (negative or NaN entries count as 0); an all-zero row
yields id 0. Greedy rows take the first maximum of their score row (the first NaN, as
``torch.argmax``).
"""
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.math cimport log, INFINITY

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, isize, check_tensor, check_index, check_rowed,
    DT_FLOAT32, DT_FLOAT64, DT_INT64, M_BOOL, M_FLOAT32, M_INDEX, M_INT64, M_REAL,
)
from kernels_cpu._checks cimport (
    Extent, as_flag, as_int, bool_at_least, expected, index_at_least, last_with_drafts, measure_offsets,
    need_count, need_min, need_rows, no_overlap, offset_start,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._philox cimport (
    philox4x32_10, u01_float, u01_open, u53_open, exp_open, exp_float,
)

#: blocks per parallel work item; any value gives the same tokens (tests vary it)
cdef Py_ssize_t _chunk_blocks = 64


# ---------------------------------------------------------------------------------------------
# inner loops
# ---------------------------------------------------------------------------------------------

cdef extern from *:
    """
    /* Block sums in FD_LANES float lanes: lane j accumulates elements j, j + FD_LANES, ... in
       order, then lanes are folded by halving. Every ISA computes exactly these additions (the
       lanes are independent), so the result is the same on SSE2, AVX2 and AVX-512 builds: the
       clones below only change how many lanes one instruction carries. */
    /* No a*b+c -> fma contraction anywhere in this module: the AVX2/AVX-512 clones and the
       baseline code must round every operation identically (same tokens on every machine). */
    #if defined(__clang__)
    #pragma STDC FP_CONTRACT OFF
    #elif defined(__GNUC__)
    #pragma GCC optimize ("fp-contract=off")
    #endif
    #include <string.h>
    #if defined(__GNUC__)
    #define FD_INLINE static inline __attribute__((always_inline))
    #else
    #define FD_INLINE static inline
    #endif
    #define FD_LANES 32
    #define FD_BLOCK 256
    #if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__x86_64__) \
        && defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
    #define FD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
    #else
    #define FD_CLONES
    #endif

    static inline float fd_fold(float* acc) {
        for (int w = FD_LANES / 2; w >= 1; w /= 2)
            for (int j = 0; j < w; j++)
                acc[j] = acc[j] + acc[j + w];
        return acc[0];
    }

    /* sum of max(t, 0) over n <= FD_BLOCK values; NaN counts as 0 */
    FD_INLINE float fd_sum_pos_inl(const float* t, Py_ssize_t n) {
        float acc[FD_LANES] = {0};
        Py_ssize_t i = 0;
        for (; i + FD_LANES <= n; i += FD_LANES)
            for (int j = 0; j < FD_LANES; j++) {
                float x = t[i + j];
                acc[j] += x > 0.0f ? x : 0.0f;
            }
        for (int j = 0; j < n - i; j++) {
            float x = t[i + j];
            acc[j] += x > 0.0f ? x : 0.0f;
        }
        return fd_fold(acc);
    }

    /* sum of max(t - q, 0) over n <= FD_BLOCK values; NaN counts as 0 */
    FD_INLINE float fd_sum_resid_inl(const float* t, const float* q,
                                                                       Py_ssize_t n) {
        float acc[FD_LANES] = {0};
        Py_ssize_t i = 0;
        for (; i + FD_LANES <= n; i += FD_LANES)
            for (int j = 0; j < FD_LANES; j++) {
                float x = t[i + j] - q[i + j];
                acc[j] += x > 0.0f ? x : 0.0f;
            }
        for (int j = 0; j < n - i; j++) {
            float x = t[i + j] - q[i + j];
            acc[j] += x > 0.0f ? x : 0.0f;
        }
        return fd_fold(acc);
    }

    FD_CLONES static float fd_sum_pos(const float* t, Py_ssize_t n) {
        return fd_sum_pos_inl(t, n);
    }

    /* P[k] = block sum of block k of t[0:n) (blocks of FD_BLOCK, the last one may be short):
       one call per run of blocks keeps the loop hot and the per-block cost at a few adds. */
    FD_CLONES static void fd_block_sums(const float* t, const float* q, Py_ssize_t n, float* P) {
        Py_ssize_t k = 0, lo = 0;
        if (q) {
            for (; lo < n; lo += FD_BLOCK, k++)
                P[k] = fd_sum_resid_inl(t + lo, q + lo, n - lo < FD_BLOCK ? n - lo : FD_BLOCK);
        } else {
            for (; lo < n; lo += FD_BLOCK, k++)
                P[k] = fd_sum_pos_inl(t + lo, n - lo < FD_BLOCK ? n - lo : FD_BLOCK);
        }
    }

    #include "_fastexp.h"   /* fd_expf */

    static float fd_expf_scalar(float x) { return fd_expf(x); }

    /* maximum of l[0:n), NaN ignored (-inf when there is nothing else) */
    FD_CLONES static float fd_max(const float* l, Py_ssize_t n) {
        float m[FD_LANES];
        Py_ssize_t i = 0;
        for (int j = 0; j < FD_LANES; j++) m[j] = -INFINITY;
        for (; i + FD_LANES <= n; i += FD_LANES)
            for (int j = 0; j < FD_LANES; j++) {
                float x = l[i + j];
                m[j] = x > m[j] ? x : m[j];
            }
        for (int j = 0; j < n - i; j++) {
            float x = l[i + j];
            m[j] = x > m[j] ? x : m[j];
        }
        float best = m[0];
        for (int j = 1; j < FD_LANES; j++) best = m[j] > best ? m[j] : best;
        return best;
    }

    /* mass of one logit: exp(l - m) (no draft probs; unnormalised, the race is scale-free) or
       max(exp(l - m) * invz - q, 0) */
    static inline float fd_exp_mass(float l, float q, float m, float invz, int resid) {
        float e = fd_expf(l - m);
        float x = resid ? e * invz - q : e;
        return x > 0.0f ? x : 0.0f;
    }

    /* fd_block_sums for logits: masses exp(l - m), or max(exp(l - m) * invz - q, 0) with q */
    FD_CLONES static void fd_block_sums_exp(const float* l, const float* q, Py_ssize_t n,
                                            float m, float invz, float* P) {
        Py_ssize_t k = 0, lo = 0;
        for (; lo < n; lo += FD_BLOCK, k++) {
            Py_ssize_t len = n - lo < FD_BLOCK ? n - lo : FD_BLOCK, i = 0;
            const float* b = l + lo;
            float acc[FD_LANES] = {0};
            if (q) {
                const float* c = q + lo;
                for (; i + FD_LANES <= len; i += FD_LANES)
                    for (int j = 0; j < FD_LANES; j++)
                        acc[j] += fd_exp_mass(b[i + j], c[i + j], m, invz, 1);
                for (int j = 0; j < len - i; j++)
                    acc[j] += fd_exp_mass(b[i + j], c[i + j], m, invz, 1);
            } else {
                for (; i + FD_LANES <= len; i += FD_LANES)
                    for (int j = 0; j < FD_LANES; j++)
                        acc[j] += fd_exp_mass(b[i + j], 0.0f, m, invz, 0);
                for (int j = 0; j < len - i; j++)
                    acc[j] += fd_exp_mass(b[i + j], 0.0f, m, invz, 0);
            }
            P[k] = fd_fold(acc);
        }
    }

    /* index of the first maximum of t[lo:hi] (of the first NaN if any, as torch.argmax) */
    FD_CLONES static Py_ssize_t fd_argmax(const float* t, Py_ssize_t lo, Py_ssize_t hi) {
        float m[FD_LANES];
        int nan[FD_LANES];
        Py_ssize_t i = lo;
        int nans = 0;
        float best;
        for (int j = 0; j < FD_LANES; j++) { m[j] = -INFINITY; nan[j] = 0; }
        for (; i + FD_LANES <= hi; i += FD_LANES)
            for (int j = 0; j < FD_LANES; j++) {
                float x = t[i + j];
                m[j] = x > m[j] ? x : m[j];
                nan[j] += x != x;
            }
        for (int j = 0; j < hi - i; j++) {
            float x = t[i + j];
            m[j] = x > m[j] ? x : m[j];
            nan[j] += x != x;
        }
        best = m[0];
        for (int j = 0; j < FD_LANES; j++) {
            nans += nan[j];
            if (m[j] > best) best = m[j];
        }
        for (i = lo; i < hi; i++)
            if (nans ? t[i] != t[i] : t[i] == best)
                return i;
        return lo;   /* unreachable: some element is the maximum */
    }
    """
    int FD_LANES
    int FD_BLOCK
    float _sum_target "fd_sum_pos"(const float* t, Py_ssize_t n) noexcept nogil
    void _block_sums "fd_block_sums"(const float* t, const float* q, Py_ssize_t n,
                                     float* P) noexcept nogil
    Py_ssize_t _argmax "fd_argmax"(const float* t, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil
    float _expf "fd_expf_scalar"(float x) noexcept nogil
    float _row_max "fd_max"(const float* l, Py_ssize_t n) noexcept nogil
    void _block_sums_exp "fd_block_sums_exp"(const float* l, const float* q, Py_ssize_t n,
                                             float m, float invz, float* P) noexcept nogil


cdef inline double _mass(Job* job, Py_ssize_t i) noexcept nogil:
    cdef float x
    if i == job.skip:
        return 0.0
    if job.logits:
        x = _expf(job.t[i] - job.m)
        if job.q != NULL:
            x = x * job.invz - job.q[i]
    else:
        x = job.t[i] - job.q[i] if job.q != NULL else job.t[i]
    return x if x > 0 else 0.0


cdef void _race_chunk(Job* job, Py_ssize_t V, Py_ssize_t b0, Py_ssize_t b1,
                      Part* out) noexcept nogil:
    """Best block score P_b / E_b over blocks [b0, b1) (strict >: lowest block on ties)."""
    cdef float P[RUN]
    cdef float tmp[BLOCK]
    cdef uint32_t w[4]
    cdef Py_ssize_t b, r0, r1, lo, hi, n, quad = -1
    cdef double best = -1.0, s
    cdef int64_t idx = -1
    cdef uint32_t x
    r0 = b0
    while r0 < b1:                                # runs of at most RUN blocks
        r1 = r0 + RUN if r0 + RUN < b1 else b1
        lo = r0 * BLOCK
        hi = r1 * BLOCK if r1 * BLOCK < V else V
        if job.logits:
            _block_sums_exp(job.t + lo, job.q + lo if job.q != NULL else NULL, hi - lo,
                            job.m, job.invz, P)
        else:
            _block_sums(job.t + lo, job.q + lo if job.q != NULL else NULL, hi - lo, P)
        if job.skip >= lo and job.skip < hi:      # the masked draft id: that block again, without it
            b = job.skip // BLOCK
            n = V - b * BLOCK if V - b * BLOCK < BLOCK else BLOCK
            memcpy(tmp, job.t + b * BLOCK, n * sizeof(float))
            if job.logits:
                tmp[job.skip - b * BLOCK] = -INFINITY
                _block_sums_exp(tmp, NULL, n, job.m, job.invz, &P[b - r0])
            else:
                tmp[job.skip - b * BLOCK] = 0
                P[b - r0] = _sum_target(tmp, n)
        for b in range(r0, r1):
            if (b >> 2) != quad:
                quad = b >> 2
                philox4x32_10(<uint32_t>quad, job.pos, job.stream, PURPOSE_BLOCKS,
                              job.k0, job.k1, w)
            x = w[b & 3]
            # E = -log(u) >= 1 - u: P / E > best needs P > best * (1 - u) (slack covers rounding)
            if best < 0 or P[b - r0] > best * u01_open(<uint32_t>0xFFFFFFFFU - x) * (1.0 - 1e-9):
                s = P[b - r0] / exp_open(x)
                if s > best:
                    best = s
                    idx = b
        r0 = r1
    out.score = best
    out.idx = idx


cdef inline void _argmax_chunk(const float* t, Py_ssize_t lo, Py_ssize_t hi,
                               Part* out) noexcept nogil:
    """First maximum of t[lo:hi] (the first NaN if any, as torch.argmax)."""
    cdef Py_ssize_t i = _argmax(t, lo, hi)
    out.score = t[i]
    out.idx = i


cdef void _run_item(Job* jobs, Part* parts, Py_ssize_t item, Py_ssize_t nchunks,
                    Py_ssize_t nblocks, Py_ssize_t V, Py_ssize_t cb) noexcept nogil:
    cdef Job* job = &jobs[item // nchunks]
    cdef Py_ssize_t c = item % nchunks
    cdef Py_ssize_t b0 = c * cb
    cdef Py_ssize_t b1 = b0 + cb
    if b1 > nblocks:
        b1 = nblocks
    if job.kind == KIND_RECOVER:
        _race_chunk(job, V, b0, b1, &parts[item])
    else:
        _argmax_chunk(job.t, b0 * BLOCK, b1 * BLOCK if b1 * BLOCK < V else V, &parts[item])


cdef int64_t _pick_in_block(Job* job, Py_ssize_t V, int64_t b) noexcept nogil:
    """The id inside block b, drawn with probability mass / block mass (float64)."""
    cdef uint32_t w[4]
    cdef Py_ssize_t lo = b * BLOCK
    cdef Py_ssize_t hi = lo + BLOCK if lo + BLOCK < V else V
    cdef Py_ssize_t i, last = -1
    cdef double total = 0.0, c = 0.0, m, target
    for i in range(lo, hi):
        total += _mass(job, i)
    philox4x32_10(0, job.pos, job.stream, PURPOSE_STEP, job.k0, job.k1, w)
    target = u53_open(w[2], w[3]) * total
    for i in range(lo, hi):
        m = _mass(job, i)
        if m > 0:
            c += m
            last = i
            if c > target:
                return i
    return last if last >= 0 else lo


cdef void _finish(Job* job, Part* parts, Py_ssize_t nchunks, Py_ssize_t V) noexcept nogil:
    cdef Py_ssize_t c
    cdef double best
    cdef int64_t idx = -1
    if job.kind == KIND_RECOVER:
        best = -1.0
        for c in range(nchunks):
            if parts[c].idx >= 0 and parts[c].score > best:
                best = parts[c].score
                idx = parts[c].idx
        job.token = _pick_in_block(job, V, idx) if idx >= 0 else 0
    else:
        best = -INFINITY
        for c in range(nchunks):
            if parts[c].score != parts[c].score:
                idx = parts[c].idx
                break
            if idx < 0 or parts[c].score > best:
                best = parts[c].score
                idx = parts[c].idx
        job.token = idx


cdef int _run_jobs(Job* jobs, Py_ssize_t njobs, Py_ssize_t V, int nt) noexcept nogil:
    """Fill every job's token. Returns -1 when out of memory."""
    cdef Py_ssize_t cb = _chunk_blocks
    cdef Py_ssize_t nblocks = (V + BLOCK - 1) // BLOCK
    cdef Py_ssize_t nchunks = (nblocks + cb - 1) // cb
    cdef Py_ssize_t nitems = njobs * nchunks
    cdef Py_ssize_t i
    if njobs == 0:
        return 0
    cdef Part* parts = <Part*>malloc(nitems * sizeof(Part))
    if parts == NULL:
        return -1
    if nt <= 1 or nitems == 1:
        for i in range(nitems):
            _run_item(jobs, parts, i, nchunks, nblocks, V, cb)
    else:
        for i in prange(nitems, num_threads=nt, schedule="dynamic"):
            _run_item(jobs, parts, i, nchunks, nblocks, V, cb)
    for i in range(njobs):
        _finish(&jobs[i], parts + i * nchunks, nchunks, V)
    free(parts)
    return 0


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------

cdef Py_ssize_t _check_offsets(IBuf cu, Py_ssize_t B, Py_ssize_t T, Py_ssize_t K,
                               str name, str t_name="draft_token_ids") except -1:
    """Inclusive cumulative offsets: >= 0, non-decreasing, each count <= K (K >= 0), ending at
    most at T (the elements ``t_name`` holds; a longer buffer keeps its tail). Returns the
    largest count."""
    cdef Extent e
    measure_offsets(cu, B, K, NULL, -1, name, &e)
    if T < e.tok_end:  # (the message is formatted only when it is raised)
        need_count(t_name, T, e.tok_end, f"{name} ends at {e.tok_end}")
    return e.most


cdef Py_ssize_t _total(IBuf cu, Py_ssize_t B) noexcept:
    """The draft tokens of a batch, ``cu[B - 1]`` (0 for no requests); checked by
    ``_check_offsets``."""
    return <Py_ssize_t>iget(cu, B - 1) if B > 0 else 0


cdef int check_step_rows(StepRows* s, object output_token_ids, object cu_num_draft_tokens,
                         object draft_token_ids, object max_spec_len) except -1:
    """The arguments every whole-step entry point (``rejection_sample_step*``,
    ``spec_sample_step``) reads first, checked once here: ``max_spec_len`` >= 0, the output as
    ``B`` rows of ``max_spec_len + 1`` slots, the offsets and the draft ids they index."""
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n_out
    cdef int code = 0
    cdef int64_t K = as_int(max_spec_len, "max_spec_len")
    need_min("max_spec_len", K, 0)
    s.width = K + 1
    s.out.ptr = check_rowed(output_token_ids, "output_token_ids", M_INDEX, s.width,
                            "max_spec_len + 1", &code, &n_out)
    s.out.wide = code == DT_INT64
    s.cu = check_index(cu_num_draft_tokens, "cu_num_draft_tokens", -1, shp)
    s.B = shp[0]
    need_rows("output_token_ids", n_out, s.B, s.width, "max_spec_len + 1", output_token_ids)
    s.draft = check_index(draft_token_ids, "draft_token_ids", -1, shp)
    s.most = _check_offsets(s.cu, s.B, shp[0], K, "cu_num_draft_tokens")
    s.T = _total(s.cu, s.B)
    no_output_overlap(s, "cu_num_draft_tokens", s.cu.ptr, s.B * isize(s.cu))
    no_output_overlap(s, "draft_token_ids", s.draft.ptr, s.T * isize(s.draft))
    return 0


cdef int no_output_overlap(const StepRows* s, str name, const char* p, Py_ssize_t nbytes) except -1:
    """The output rows must not overlap ``nbytes`` at ``p`` (argument ``name``), which steer the
    step."""
    no_overlap("output_token_ids", s.out.ptr, s.B * s.width * isize(s.out), name, <char*>p,
               nbytes)
    return 0


cdef int _check_ids(IBuf ids, Py_ssize_t n, Py_ssize_t V, str name) except -1:
    """Draft ids must be < V (negative ids are legal: padding, always rejected)."""
    cdef Py_ssize_t i
    cdef int64_t v
    for i in range(n):
        v = iget(ids, i)
        if v >= V:
            raise IndexError(expected(f"{name}[{i}]", f"an id < the vocab size {V}", v))
    return 0


cdef const float* _probs(object t, str name, Py_ssize_t T, Py_ssize_t V) except NULL:
    """float32 rows of ``V`` from the base pointer, at least ``T`` of them."""
    cdef Py_ssize_t n
    cdef char* p = check_rowed(t, name, M_FLOAT32, V, "the vocabulary size", NULL, &n)
    need_rows(name, n, T, V, "the vocabulary size", t)
    return <const float*>p


cdef Py_ssize_t _vocab(object t, str name) except -1:
    """The vocabulary size of a ``[tokens, vocab]`` score matrix (its last dimension)."""
    cdef Py_ssize_t shp[2]
    check_tensor(t, name, M_FLOAT32, 2, NULL, shp)
    return shp[1]


cdef const int64_t* _seeds(object t, str name, Py_ssize_t B) except NULL:
    cdef Py_ssize_t shp[2]
    cdef char* p = check_tensor(t, name, M_INT64, 2, NULL, shp)
    if shp[0] != B or shp[1] != 2:
        raise ValueError(expected(name, f"shape ({B}, 2) (key, stream)",
                                  f"shape {tuple(t.shape)}"))
    return <const int64_t*>p


# ---------------------------------------------------------------------------------------------
# recovered tokens for every draft position
# ---------------------------------------------------------------------------------------------

cdef int _recover_all(IBuf out, IBuf cu, IBuf draft, const float* q, const float* t,
                      const int64_t* seeds, Py_ssize_t B, Py_ssize_t T, Py_ssize_t V) except -1:
    cdef Job* jobs = <Job*>malloc((T if T > 0 else 1) * sizeof(Job))
    cdef Py_ssize_t r, k, s, e
    cdef int rc, nt
    if jobs == NULL:
        raise MemoryError()
    with nogil:
        for r in range(B):
            s = offset_start(cu, r)
            e = iget(cu, r)
            for k in range(s, e):
                _set_key(&jobs[k], seeds, r, <uint32_t>(k - s))
                jobs[k].kind = KIND_RECOVER
                jobs[k].t = t + k * V
                jobs[k].q = q + k * V if q != NULL else NULL
                jobs[k].skip = -1 if q != NULL else iget(draft, k)
                jobs[k].token = 0
    nt = threads_for(T * V)
    with nogil:
        rc = _run_jobs(jobs, T, V, nt)
        if rc == 0:
            for k in range(T):
                iset(out, k, jobs[k].token)
    free(jobs)
    if rc != 0:
        raise MemoryError()
    return 0


def recovered_tokens(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                     target_probs, seeds):
    """Recovered token of every draft position, noise drawn in the loop (no inv_q).

    output_token_ids [T] (int32/int64, written), cu_num_draft_tokens [B], draft_token_ids [T],
    draft_probs [T, V] float32 or None, target_probs [T, V] float32, seeds [B, 2] int64
    ``(key, stream)`` per request. Token at (request r, position j) ~ normalize(max(target -
    draft, 0)) of its row (or target with the draft id masked when draft_probs is None).
    """
    _recovered(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
               target_probs, seeds, _vocab(target_probs, "target_probs"), "output_token_ids",
               "cu_num_draft_tokens", "draft_token_ids", "draft_probs", "target_probs")


cdef int _recovered(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                    target_probs, seeds, Py_ssize_t V, str out_name, str cu_name,
                    str draft_name, str dprobs_name, str tprobs_name) except -1:
    """``recovered_tokens`` with the vocabulary size given (the kernel drop-in passes its
    ``vocab_size``) and the argument names of the caller's signature for its errors. Every
    buffer is read flat from its base pointer (module docstring of ``_sampling``)."""
    cdef Py_ssize_t shp[1]
    cdef IBuf out = check_index(output_token_ids, out_name, -1, shp)
    cdef Py_ssize_t n_out = shp[0]
    cdef IBuf cu = check_index(cu_num_draft_tokens, cu_name, -1, shp)
    cdef Py_ssize_t B = shp[0]
    cdef IBuf draft = check_index(draft_token_ids, draft_name, -1, shp)
    cdef Py_ssize_t n_draft = shp[0]
    _check_offsets(cu, B, n_draft, -1, cu_name, draft_name)
    cdef Py_ssize_t T = _total(cu, B)
    need_count(out_name, n_out, T, "one per draft token")
    if V < 1 and T > 0:
        raise ValueError(expected(tprobs_name, "at least one vocab column", "none"))
    cdef const float* t = _probs(target_probs, tprobs_name, T, V)
    cdef const float* q = NULL
    if draft_probs is not None:
        q = _probs(draft_probs, dprobs_name, T, V)
    cdef const int64_t* sd = _seeds(seeds, "seeds", B)
    _check_ids(draft, T, V, draft_name)
    no_overlap(out_name, out.ptr, T * isize(out), draft_name, draft.ptr,
               T * isize(draft))
    _recover_all(out, cu, draft, q, t, sd, B, T, V)
    return 0


def sample_recovered_tokens_kernel_fused(output_token_ids_ptr, cu_num_draft_tokens_ptr,
                                         draft_token_ids_ptr, draft_probs_ptr, target_probs_ptr,
                                         inv_q_ptr, vocab_size, BLOCK_SIZE=None,
                                         NO_DRAFT_PROBS=None, USE_FP64_GUMBEL=None):
    """Drop-in for vLLM's ``sample_recovered_tokens_kernel`` that ignores ``inv_q``'s values.

    The noise is drawn in the loop instead; each request's key is the first 8 bytes of its
    ``inv_q`` row, so a request whose ``inv_q`` came from its own seeded generator stays
    reproducible (the caller still pays for drawing ``inv_q``: to avoid that, replace vLLM's
    Python ``sample_recovered_tokens`` -- see ``fastdispatch.ops.fused``).
    """
    cdef Py_ssize_t shp[1]
    cdef int code = 0
    cdef Py_ssize_t B, V, n_q, r, last = 0
    cdef IBuf cu = check_index(cu_num_draft_tokens_ptr, "cu_num_draft_tokens_ptr", -1, shp)
    B = shp[0]
    V = as_int(vocab_size, "vocab_size")
    need_min("vocab_size", V, 0)
    check_rowed(target_probs_ptr, "target_probs_ptr", M_FLOAT32, V, "vocab_size", NULL, shp)
    cdef char* pq = check_rowed(inv_q_ptr, "inv_q_ptr", M_REAL, V, "vocab_size", &code, &n_q)
    last = last_with_drafts(cu, B)  # the Triton grid reads inv_q rows of requests with drafts
    need_rows("inv_q_ptr", n_q, last, V, "vocab_size", inv_q_ptr)
    if as_flag(NO_DRAFT_PROBS, "NO_DRAFT_PROBS", draft_probs_ptr is None) != (
            draft_probs_ptr is None):
        raise ValueError(expected("NO_DRAFT_PROBS", "a flag that agrees with draft_probs_ptr",
                                  NO_DRAFT_PROBS))
    import torch
    seeds = torch.zeros((B, 2), dtype=torch.int64)
    cdef int64_t* sd = <int64_t*><char*><Py_ssize_t>seeds.data_ptr()
    cdef uint64_t key
    cdef uint32_t lo, hi
    for r in range(last):
        if V == 0:
            key = 0
        elif code == DT_FLOAT64:
            memcpy(&key, pq + r * V * 8, 8)
        else:
            lo = 0
            hi = 0
            memcpy(&lo, pq + r * V * 4, 4)
            if V > 1:
                memcpy(&hi, pq + r * V * 4 + 4, 4)
            key = (<uint64_t>hi << 32) | lo
        sd[2 * r] = <int64_t>key
    _recovered(output_token_ids_ptr, cu_num_draft_tokens_ptr, draft_token_ids_ptr,
               draft_probs_ptr, target_probs_ptr, seeds, V, "output_token_ids_ptr",
               "cu_num_draft_tokens_ptr", "draft_token_ids_ptr", "draft_probs_ptr",
               "target_probs_ptr")


# ---------------------------------------------------------------------------------------------
# the whole step
# ---------------------------------------------------------------------------------------------

cdef inline int _early_verdict(const float* rates, Py_ssize_t j, double u,
                               int64_t d) noexcept nogil:
    """The accept decision at position ``j`` where no probability is read: 1 accept, 0 reject
    (synthetic mode: ``u < rates[j]`` and ``d >= 0``; else a draft id < 0 is rejected), -1 when
    the probabilities decide (``_accepts``)."""
    if rates != NULL:
        return 1 if u < rates[j] and d >= 0 else 0
    if d < 0:
        return 0
    return -1


cdef inline void _argmax_job(Job* job, const float* row) noexcept nogil:
    """A greedy job: the first maximum of ``row``."""
    job.kind = KIND_ARGMAX
    job.t = row
    job.q = NULL
    job.skip = -1


cdef int _step(IBuf out, Py_ssize_t width, IBuf cu, IBuf draft, const float* q, const float* t,
               IBuf bonus, const uint8_t* greedy, const float* gs, const float* rates,
               const int64_t* seeds, Py_ssize_t B, Py_ssize_t T, Py_ssize_t V) except -1:
    """Accept walk -> one row job per needed token -> parallel rows -> write outputs.

    Per request, ``state[r]`` = number of accepted drafts ``a`` and ``job_of[r]`` the job giving
    the token at position ``a`` (-1: all accepted, bonus). Greedy rows without synthetic mode
    need the argmax of every position to walk, so they get one job per position.
    """
    cdef Job* jobs = <Job*>malloc((T + B + 1) * sizeof(Job))
    cdef int64_t* acc = <int64_t*>malloc((B + 1) * sizeof(int64_t))
    cdef int64_t* job_of = <int64_t*>malloc((B + 1) * sizeof(int64_t))
    cdef Py_ssize_t r, j, s, n, row, nj = 0, a
    cdef int64_t d, tok
    cdef double u, dp
    cdef bint is_g, ok
    cdef int verdict
    cdef int rc = 0, nt
    if jobs == NULL or acc == NULL or job_of == NULL:
        free(jobs)
        free(acc)
        free(job_of)
        raise MemoryError()
    with nogil:
        for r in range(B):
            s = offset_start(cu, r)
            n = iget(cu, r) - s
            is_g = greedy != NULL and greedy[r] != 0
            job_of[r] = -1
            a = 0
            if is_g and rates == NULL:
                # plain greedy: argmax of every position (the walk needs them all)
                job_of[r] = nj
                for j in range(n):
                    row = s + j
                    _set_key(&jobs[nj], seeds, r, <uint32_t>j)
                    _argmax_job(&jobs[nj], gs + row * V)
                    nj += 1
                acc[r] = -1                    # resolved after the jobs ran
                continue
            for j in range(n):
                row = s + j
                d = iget(draft, row)
                u = _accept_uniform(seeds, r, <uint32_t>j)
                verdict = _early_verdict(rates, j, u, d)
                if verdict >= 0:
                    ok = verdict == 1
                else:
                    dp = q[row * V + d] if q != NULL else 1.0
                    ok = _accepts(u, dp, t[row * V + d])
                if not ok:
                    job_of[r] = nj
                    _set_key(&jobs[nj], seeds, r, <uint32_t>j)
                    if is_g:                   # synthetic greedy: the target argmax
                        _argmax_job(&jobs[nj], gs + row * V)
                    else:
                        jobs[nj].kind = KIND_RECOVER
                        jobs[nj].t = t + row * V
                        jobs[nj].q = q + row * V if q != NULL else NULL
                        jobs[nj].skip = -1 if q != NULL else d
                    nj += 1
                    break
                a += 1
            acc[r] = a
    nt = threads_for(nj * V)
    with nogil:
        rc = _run_jobs(jobs, nj, V, nt)
        if rc == 0:
            for r in range(B):
                s = offset_start(cu, r)
                n = iget(cu, r) - s
                if acc[r] < 0:                 # plain greedy walk
                    for j in range(n):
                        tok = jobs[job_of[r] + j].token
                        iset(out, r * width + j, tok)
                        if tok != iget(draft, s + j):
                            break
                    else:
                        iset(out, r * width + n, iget(bonus, r))
                    continue
                for j in range(acc[r]):
                    iset(out, r * width + j, iget(draft, s + j))
                if job_of[r] >= 0:
                    iset(out, r * width + acc[r], jobs[job_of[r]].token)
                else:
                    iset(out, r * width + n, iget(bonus, r))
    free(jobs)
    free(acc)
    free(job_of)
    if rc != 0:
        raise MemoryError()
    return 0


cdef struct StepArgs:
    # A validated rejection-sampling step (``rejection_sample_step`` and its logits twin).
    IBuf out
    IBuf cu
    IBuf draft
    IBuf bonus
    Py_ssize_t B, width, T, V
    const float* scores     # target probabilities, or target logits
    const float* q          # draft probabilities or NULL
    const uint8_t* greedy   # NULL: every request random
    const int64_t* seeds
    const float* rates      # synthetic acceptance rates or NULL


cdef int _check_step(StepArgs* a, output_token_ids, cu_num_draft_tokens, draft_token_ids,
                     draft_probs, scores, str scores_name, bonus_token_ids, is_greedy, seeds,
                     object max_spec_len, synthetic_rates) except -1:
    """Validate a whole step's arguments (both entry points) before anything is written."""
    cdef Py_ssize_t shp[1]
    cdef StepRows rows
    check_step_rows(&rows, output_token_ids, cu_num_draft_tokens, draft_token_ids, max_spec_len)
    a.out, a.cu, a.draft = rows.out, rows.cu, rows.draft
    a.B, a.T, a.width = rows.B, rows.T, rows.width
    cdef Py_ssize_t B = a.B, most = rows.most
    a.V = _vocab(scores, scores_name)
    if a.V < 1 and a.T > 0:
        raise ValueError(expected(scores_name, "at least one vocab column", "none"))
    a.scores = _probs(scores, scores_name, a.T, a.V)
    a.q = NULL
    if draft_probs is not None:
        a.q = _probs(draft_probs, "draft_probs", a.T, a.V)
    a.bonus = index_at_least(bonus_token_ids, "bonus_token_ids", B)
    a.greedy = NULL
    if is_greedy is not None:
        a.greedy = <const uint8_t*>bool_at_least(is_greedy, "is_greedy", B)
    a.seeds = _seeds(seeds, "seeds", B)
    a.rates = NULL
    if synthetic_rates is not None:
        a.rates = <const float*>check_tensor(synthetic_rates, "synthetic_rates", M_FLOAT32, -1,
                                             NULL, shp)
        need_count("synthetic_rates", shp[0], most,
                   "one per draft position of the longest request")
    _check_ids(a.draft, a.T, a.V, "draft_token_ids")
    no_output_overlap(&rows, "bonus_token_ids", a.bonus.ptr, B * isize(a.bonus))
    return 0


def rejection_sample_step(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                          target_probs, bonus_token_ids, is_greedy, greedy_scores, seeds,
                          max_spec_len, synthetic_rates=None):
    """One whole rejection-sampling step (greedy and random requests), noise drawn in the loop.

    output_token_ids [B, max_spec_len + 1] int32/int64, pre-filled by the caller (-1); only the
    emitted slots are written. cu_num_draft_tokens [B]; draft_token_ids [T]; draft_probs [T, V]
    float32 or None; target_probs [T, V] float32 (read only for random requests); bonus_token_ids
    with B elements; is_greedy [B] bool or None (None: every request is random); greedy_scores
    [T, V] float32 whose row argmax is a greedy request's target token (None: target_probs);
    seeds [B, 2] int64 (key, stream); synthetic_rates: float32 acceptance rate per position or
    None (vLLM's synthetic mode: accept when ``u < rate[j]`` and the draft id is >= 0).

    Only the rows that decide an emitted token are read: for a random request, the accept test
    reads two floats per position and the recovered token is computed only at the first
    rejection; greedy requests read their score rows.
    """
    cdef StepArgs a
    _check_step(&a, output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                target_probs, "target_probs", bonus_token_ids, is_greedy, seeds, max_spec_len,
                synthetic_rates)
    cdef const float* gs = a.scores
    if greedy_scores is not None:
        gs = _probs(greedy_scores, "greedy_scores", a.T, a.V)
    _step(a.out, a.width, a.cu, a.draft, a.q, a.scores, a.bonus, a.greedy, gs, a.rates, a.seeds,
          a.B, a.T, a.V)


# ---------------------------------------------------------------------------------------------
# the whole step on logits: the softmax is folded into the walk
# ---------------------------------------------------------------------------------------------

cdef void _row_norm(const float* l, Py_ssize_t V, float* m_out, float* invz_out) noexcept nogil:
    """Row max ``m`` and ``1 / sum(exp(l - m))`` (block sums added in block order: exact same
    value at any thread count)."""
    cdef float P[RUN]
    cdef float m = _row_max(l, V)
    cdef double z = 0.0
    cdef Py_ssize_t lo = 0, hi, k
    while lo < V:
        hi = lo + RUN * BLOCK if lo + RUN * BLOCK < V else V
        _block_sums_exp(l + lo, NULL, hi - lo, m, 1.0, P)
        for k in range((hi - lo + BLOCK - 1) // BLOCK):
            z += P[k]
        lo = hi
    m_out[0] = m
    invz_out[0] = <float>(1.0 / z)      # z = 0 only for an all -inf/NaN row: every mass is 0


cdef int64_t race_logits(const int64_t* seeds, Py_ssize_t r, uint32_t pos, const float* row,
                         const float* q, int64_t skip, float m, float invz,
                         Py_ssize_t V) noexcept nogil:
    """The token request ``r``'s race draws at position ``pos`` from a logits row normalised by
    ``_row_norm`` (``m``, ``invz``): against ``max(softmax - q, 0)`` with a draft row ``q``, else
    the softmax without id ``skip`` (-1: none)."""
    cdef Job job
    cdef Part part
    _set_key(&job, seeds, r, pos)
    job.kind = KIND_RECOVER
    job.t = row
    job.q = q
    job.skip = skip
    job.logits = True
    job.m = m
    job.invz = invz
    _race_chunk(&job, V, 0, (V + BLOCK - 1) // BLOCK, &part)
    return _pick_in_block(&job, V, part.idx) if part.idx >= 0 else 0


cdef Py_ssize_t argmax_row(const float* t, Py_ssize_t n) noexcept nogil:
    """First maximum of ``t[0:n)`` (the first NaN if any, as ``torch.argmax``)."""
    return _argmax(t, 0, n)


cdef float expf32(float x) noexcept nogil:
    """The kernels' vectorisable float32 ``exp`` (< 2 ulp, for x <= 0)."""
    return _expf(x)


cdef void _walk_logits(Py_ssize_t r, IBuf out, Py_ssize_t width, IBuf cu, IBuf draft,
                       const float* q, const float* l, IBuf bonus, const uint8_t* greedy,
                       const float* rates, const int64_t* seeds, Py_ssize_t V) noexcept nogil:
    """One request's walk: each row is normalised only when the walk reaches it."""
    cdef Py_ssize_t s = offset_start(cu, r)
    cdef Py_ssize_t n = iget(cu, r) - s
    cdef Py_ssize_t j, row
    cdef bint is_g = greedy != NULL and greedy[r] != 0
    cdef bint ok, normed
    cdef int verdict
    cdef int64_t d, tok
    cdef const float* lrow
    cdef float m = 0, invz = 1
    cdef double u, dp, tp
    for j in range(n):
        row = s + j
        d = iget(draft, row)
        lrow = l + row * V
        normed = False
        if is_g and rates == NULL:
            tok = _argmax(lrow, 0, V)
            iset(out, r * width + j, tok)
            if tok != d:
                return
            continue
        u = _accept_uniform(seeds, r, <uint32_t>j)
        verdict = _early_verdict(rates, j, u, d)
        if verdict >= 0:
            ok = verdict == 1
        else:
            _row_norm(lrow, V, &m, &invz)
            normed = True
            dp = q[row * V + d] if q != NULL else 1.0
            tp = _expf(lrow[d] - m) * invz
            ok = _accepts(u, dp, tp)
        if ok:
            iset(out, r * width + j, d)
            continue
        if is_g:
            tok = _argmax(lrow, 0, V)
        else:
            if not normed:
                _row_norm(lrow, V, &m, &invz)
            tok = race_logits(seeds, r, <uint32_t>j, lrow, q + row * V if q != NULL else NULL,
                              -1 if q != NULL else d, m, invz, V)
        iset(out, r * width + j, tok)
        return
    iset(out, r * width + n, iget(bonus, r))


def rejection_sample_step_logits(output_token_ids, cu_num_draft_tokens, draft_token_ids,
                                 draft_probs, target_logits, bonus_token_ids, is_greedy, seeds,
                                 max_spec_len, synthetic_rates=None):
    """``rejection_sample_step`` on logits: no probability tensor is ever written.

    Random requests sample against ``softmax(target_logits)``, computed row by row only where
    the walk needs it (the accept test reads ``p[draft]``, a rejection samples its recovered
    token from the same row, normalised with the same max and sum); greedy requests take the
    first argmax of their logits rows, as vLLM's greedy path. The exponentials use a vectorised
    float32 ``exp`` (< 2 ulp), so probabilities agree with ``torch.softmax`` to float rounding.
    Requests are walked in parallel (one thread per request at a time).
    """
    cdef StepArgs a
    _check_step(&a, output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                target_logits, "target_logits", bonus_token_ids, is_greedy, seeds, max_spec_len,
                synthetic_rates)
    cdef IBuf out = a.out, cu = a.cu, draft = a.draft, bonus = a.bonus
    cdef Py_ssize_t B = a.B, width = a.width, T = a.T, V = a.V
    cdef const float* q = a.q
    cdef const float* l = a.scores
    cdef const uint8_t* greedy = a.greedy
    cdef const float* rates = a.rates
    cdef const int64_t* sd = a.seeds
    cdef int nt = threads_for(T * V)
    cdef Py_ssize_t r
    if nt > B:
        nt = <int>B
    with nogil:
        if nt <= 1:
            for r in range(B):
                _walk_logits(r, out, width, cu, draft, q, l, bonus, greedy, rates, sd, V)
        else:
            for r in prange(B, num_threads=nt, schedule="dynamic"):
                _walk_logits(r, out, width, cu, draft, q, l, bonus, greedy, rates, sd, V)


def _expf_values(x):
    """The kernels' float32 ``exp`` (defined for x <= 0) applied to a float32 tensor (tests)."""
    import torch
    cdef Py_ssize_t shp[1]
    cdef const float* p = <const float*>check_tensor(x, "x", M_FLOAT32, 1, NULL, shp)
    res = torch.empty(shp[0], dtype=torch.float32)
    cdef float* o = <float*><char*><Py_ssize_t>res.data_ptr()
    cdef Py_ssize_t i
    for i in range(shp[0]):
        o[i] = _expf(p[i])
    return res


# ---------------------------------------------------------------------------------------------
# the generator, visible for tests
# ---------------------------------------------------------------------------------------------

def philox4x32(counter, key):
    """Philox-4x32-10 of a 4-word counter and 2-word key (ints < 2**32) -> 4 ints."""
    cdef uint32_t w[4]
    c = [int(x) for x in counter]
    k = [int(x) for x in key]
    if len(c) != 4 or len(k) != 2:
        raise ValueError(expected("counter" if len(c) != 4 else "key",
                                  "4 words" if len(c) != 4 else "2 words",
                                  len(c) if len(c) != 4 else len(k)))
    for x in c + k:
        if not 0 <= x < 2 ** 32:
            raise ValueError(expected("counter" if x in c else "key",
                                      "32-bit unsigned words", x))
    philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1], w)
    return (w[0], w[1], w[2], w[3])


def philox_words(out, counter, key):
    """Fill int64 ``out`` [n, 4] with Philox words of counters (c0 + i, c1, c2, c3), i < n."""
    cdef Py_ssize_t shp[2]
    cdef int64_t* o = <int64_t*>check_tensor(out, "out", M_INT64, 2, NULL, shp)
    if shp[1] != 4:
        raise ValueError(expected("out", "4 columns", shp[1]))
    cdef uint32_t w[4]
    cdef uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3]
    cdef uint32_t k0 = key[0], k1 = key[1]
    cdef Py_ssize_t i
    cdef int j
    with nogil:
        for i in range(shp[0]):
            philox4x32_10(<uint32_t>(c0 + i), c1, c2, c3, k0, k1, w)
            for j in range(4):
                o[4 * i + j] = w[j]


def variates(words, kind):
    """Apply a ``_philox`` helper to int64 ``words`` (values < 2**32), as float64.

    kind: 'u01_float' (float32 on (0, 1]), 'u01_open', 'exp_open', 'exp_float'.
    """
    import torch
    cdef Py_ssize_t shp[1]
    cdef int64_t* w = <int64_t*>check_tensor(words, "words", M_INT64, 1, NULL, shp)
    res = torch.empty(shp[0], dtype=torch.float64)
    cdef double* o = <double*><char*><Py_ssize_t>res.data_ptr()
    cdef Py_ssize_t i
    cdef int k = {"u01_float": 0, "u01_open": 1, "exp_open": 2, "exp_float": 3}[kind]
    for i in range(shp[0]):
        if k == 0:
            o[i] = u01_float(<uint32_t>w[i])
        elif k == 1:
            o[i] = u01_open(<uint32_t>w[i])
        elif k == 2:
            o[i] = exp_open(<uint32_t>w[i])
        else:
            o[i] = exp_float(<uint32_t>w[i])
    return res


def block_exponentials(key, stream, pos, nblocks):
    """The Exp(1) variates the race gives blocks 0..nblocks-1 of (key, stream, position)."""
    import torch
    cdef uint32_t w[4]
    cdef uint64_t k = key & 0xFFFFFFFFFFFFFFFF
    res = torch.empty(nblocks, dtype=torch.float64)
    cdef double* o = <double*><char*><Py_ssize_t>res.data_ptr()
    cdef Py_ssize_t b
    for b in range(nblocks):
        philox4x32_10(<uint32_t>(b >> 2), <uint32_t>pos, <uint32_t>stream, PURPOSE_BLOCKS,
                      <uint32_t>k, <uint32_t>(k >> 32), w)
        o[b] = exp_open(w[b & 3])
    return res


def step_uniforms(key, stream, pos):
    """(accept uniform, in-block uniform) of (key, stream, position), both on (0, 1)."""
    cdef uint32_t w[4]
    cdef uint64_t k = key & 0xFFFFFFFFFFFFFFFF
    philox4x32_10(0, <uint32_t>pos, <uint32_t>stream, PURPOSE_STEP, <uint32_t>k,
                  <uint32_t>(k >> 32), w)
    return u53_open(w[0], w[1]), u53_open(w[2], w[3])


def _set_chunk_blocks(n):
    """Blocks per parallel work item (tests: results must not depend on it). Returns the old."""
    global _chunk_blocks
    if n < 1:
        raise ValueError(expected("n", ">= 1", n))
    old = _chunk_blocks
    _chunk_blocks = n
    return old


BLOCK_SIZE = BLOCK
if FD_BLOCK != BLOCK:   # the C block-sum loop and the race must agree on the block size
    raise ImportError(f"kernels_cpu._fused: FD_BLOCK {FD_BLOCK} != BLOCK {BLOCK}")
