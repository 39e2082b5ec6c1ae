# cython: language_level=3
"""The exponential race over probability (or logit) rows, and its random stream.

What ``_fused`` and ``_spec_step`` sample with: a token drawn from one row by a race of
exponential clocks whose noise comes from a counter-based generator (Philox-4x32-10,
``_philox.pxd``) inside the vocabulary loop, so no ``[B, V]`` noise tensor is ever drawn. The
race, its C block-sum loops and its stream are defined here, once, so that every entry point
(``_fused.pyx`` validates a launch and walks its drafts, ``_spec_step.pyx`` the whole step from
the logits) gets the same tokens for the same seeds.

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

Every float operation in the C loops is compiled without fma contraction, and the sums have a
fixed order, so the AVX-512, AVX2 and baseline clones produce the same bits: same seeds, same
tokens on any x86-64 machine and thread count.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.math cimport INFINITY

from kernels_cpu._buffers cimport check_tensor, M_INT64
from kernels_cpu._checks cimport expected
from kernels_cpu._philox cimport (
    philox4x32_10, u01_float, u01_open, u53_open, exp_open, exp_float,
)

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
    #include "_clones.h"    /* FD_CLONES: baseline, x86-64-v3 and -v4 copies of a hot loop */

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


cdef int _run_jobs(Job* jobs, Py_ssize_t njobs, Py_ssize_t V, int nt,
                   Py_ssize_t cb) noexcept nogil:
    """Fill every job's token, ``cb`` blocks per parallel work item (any value gives the same
    tokens). Returns -1 when out of memory."""
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
# one logits row: normalised on demand, raced whole
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
    _recover_job(&job, row, q, skip)
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


BLOCK_SIZE = BLOCK
if FD_BLOCK != BLOCK:   # the C block-sum loop and the race must agree on the block size
    raise ImportError(f"kernels_cpu._race: FD_BLOCK {FD_BLOCK} != BLOCK {BLOCK}")
