# cython: language_level=3
"""Model Runner V2's rejection sampler (``vllm/v1/worker/gpu/spec_decode/``) on CPU.

vLLM's ``rejection_sample`` launches, in order: ``_compute_local_logits_stats_kernel`` (per
token and vocabulary block: the target argmax of greedy rows, the target and draft max and
summed exponentials of the others), with block verification ``_compute_cumulative_log_p_kernel``
(per request, the running log joint ratio) and ``_compute_local_residual_mass_kernel`` (per
token and block, the residual mass partials; full draft distributions only), then
``_rejection_kernel`` (per request: accept/reject each draft, the log-sum-exps of the rejected
position), ``_resample_kernel`` (per request and block: a Gumbel-max draw from the residual or,
for a bonus token or a -1 placeholder, the target) and ``_insert_resampled_kernel`` (per
request: the winning block's token, after the accepted drafts). ``rejection_sampler.py`` adds
``_gather_draft_sampled_kernel`` (each logits row's input token and position, -1 for a draft slot
still inside the prefill) and ``_flatten_sampled_kernel`` (the sampled rows packed flat). vLLM
0.34's ``draft_logits.py`` adds ``_assign_rows_kernel`` and ``_stale_drafts_kernel``, which lay
out and check a batch-sharded draft logits cache.

Later releases changed some of these kernels' signatures; each form is a function of its own
over one implementation: 0.33's stats and residual-mass kernels take ``num_logits`` (a bonus
row is one whose next row starts a request), 0.33's rejection FLy's window (and per-step seeds
for block verification), and 0.34's draft-reading kernels the cache's row mapping
(``draft_logits_row_mapping_ptr``), its resampling SKIP_MASKED_BLOCKS.

Each function here takes the Triton kernel's arguments by the same names (a positional launch
binds them in the same order); the ones whose counts come only from the launch grid, or that lay
outputs out per program, take the grid as the keyword-only ``grid``. Every argument is checked
before anything is written (errors name it: ``<argument>: expected ..., got ...``), then the
programs of the grid run as ``nogil`` loops over raw pointers. The per-block kernels run their
``programs = rows x blocks`` in one OpenMP loop, so a launch of few rows (decode) splits the
vocabulary across threads and one of many rows splits the rows.

Floats follow the kernels operation by operation, in their dtype (fp32, or fp64 for USE_FP64):
``x / temp``, ``exp(x - max)``, the block sums in the order numpy's pairwise summation adds them
(the Triton interpreter's ``tl.sum``, vLLM's reference on CPU), ``tl.max``'s NaN-skipping
first-index argmax. The block sums of exponentials use the sampling kernels' vectorisable
``fd_expf`` (``_fastexp.h``, within 1 ulp of libm's for x <= 0); libm's ``expf``/``logf``/
``log1pf`` elsewhere may differ from another math library in the last ulp; every token id is
decided by the same comparisons as the kernel's.
"""
from cython.parallel cimport prange, threadid
from libc.math cimport exp, expf, fabs, log, logf, log1pf, nextafterf, INFINITY, NAN
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, check_table, check_tensor, dim_stride, dtype_code, expected, is_none,
    DT_BOOL, DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16, DT_FLOAT64, DT_INT32, DT_INT64, DT_UINT8,
    M_FLOAT32, M_FLOAT64, M_INDEX,
)
from kernels_cpu._checks cimport as_flag, as_int, index_at_least, need_min, no_overlap, required
from kernels_cpu._philox cimport philox4x32_10
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._rowmax cimport fd_first_equal, fd_max_nan, fd_top2_nan
from kernels_cpu._topk_topp_rows cimport (
    FD_RUN_HOLD, _k_at, _p_at, check_k_at, check_p_at, fd_run_hold, fd_run_row, free_row_scratch,
    load_mask_row_f32_team, row_peeker, row_scratch, row_then, row_top2, run_rows_f32_team,
    run_rows_then_f32_team,
)
from kernels_cpu._mrv2_gumbel_argmax cimport (
    fill_noise_bounds, gumbel_block_argmax32, gumbel_block_argmax64, gumbel_lanes_argmax32,
    kept_lanes,
)

fill_noise_bounds()     # the Gumbel draw's noise bound tables (_mrv2_gumbel_argmax.pxd)

__all__ = [
    "flatten_sampled_kernel",
    "gather_draft_sampled_kernel",
    "compute_local_logits_stats_kernel",
    "compute_local_logits_stats_num_logits_kernel",
    "compute_local_logits_stats_row_mapping_kernel",
    "compute_cumulative_log_p_kernel",
    "compute_cumulative_log_p_row_mapping_kernel",
    "compute_local_residual_mass_kernel",
    "compute_local_residual_mass_num_logits_kernel",
    "compute_local_residual_mass_row_mapping_kernel",
    "rejection_kernel",
    "rejection_fly_kernel",
    "rejection_row_mapping_kernel",
    "resample_kernel",
    "resample_row_mapping_kernel",
    "insert_resampled_kernel",
    "rejection_sample_fused",
    "assign_rows_kernel",
    "stale_drafts_kernel",
]

cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    #include "_fastexp.h"   /* fd_expf: the sampling kernels' vectorisable exp */
    #include "_clones.h"    /* FD_CLONES: baseline, x86-64-v3 and -v4 copies of a hot loop */
    #ifdef _OPENMP
    #include <omp.h>
    static int fd_spec_thread_id(void) { return omp_get_thread_num(); }
    #else
    static int fd_spec_thread_id(void) { return 0; }
    #endif
    /* Two parallel loops with a serial step between them, in one parallel region of nt
       threads: f1 over [0, n1) (static, one unit at a time: round-robin), then mid on one
       thread -- it returns the second loop's count -- then f2 over [0, n2) (static). The
       single's and the first loop's barriers order them: a thread reads nothing of a loop
       before every thread has left it (Cython's prange inside one parallel() block gives no
       barrier after its loop). Without OpenMP the three run in turn. */
    typedef void (*fd_unit_fn)(void *ctx, Py_ssize_t u);
    typedef Py_ssize_t (*fd_mid_fn)(void *ctx);
    static void fd_two_loops(int nt, Py_ssize_t n1, fd_unit_fn f1, fd_mid_fn mid,
                             fd_unit_fn f2, void *ctx) {
        Py_ssize_t n2 = 0;
        #pragma omp parallel num_threads(nt)
        {
            #pragma omp for schedule(static, 1)
            for (Py_ssize_t u = 0; u < n1; u++) f1(ctx, u);
            #pragma omp single
            n2 = mid(ctx);
            #pragma omp for schedule(static)
            for (Py_ssize_t j = 0; j < n2; j++) f2(ctx, j);
        }
    }
    static inline float fd_bits_to_float(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
    /* IEEE half -> float, exactly (every half is a float) */
    static inline float fd_half_to_float(uint16_t h) {
        uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
        uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
        if (e == 0x1Fu) return fd_bits_to_float(sign | 0x7F800000u | (m << 13));
        if (e == 0) {
            float v = (float)m * 5.9604644775390625e-08f;   /* m * 2**-24, exact */
            return sign ? -v : v;
        }
        return fd_bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
    }
    /* The largest number of a[0, n), NaN skipped; -inf when there is none. 32 running
       maxima, a compare-and-select each (no fmaxf: its NaN rule is not the one wanted, and the
       select vectorises without -ffast-math): two AVX-512 or four AVX2 registers, enough
       independent chains to run at the load rate (eight ran ~6x slower); the order of a max
       does not change its value. */
    FD_CLONES static float fd_nanmax(const float *a, Py_ssize_t n) {
        float b[32];
        float m = -INFINITY;
        Py_ssize_t j = 0;
        for (int k = 0; k < 32; k++) b[k] = -INFINITY;
        for (; j + 32 <= n; j += 32)
            for (int k = 0; k < 32; k++) { float v = a[j + k]; b[k] = v > b[k] ? v : b[k]; }
        for (int k = 0; k < 32; k++) m = b[k] > m ? b[k] : m;
        for (; j < n; j++) m = a[j] > m ? a[j] : m;
        return m;
    }
    /* out[j] = a[j] / d, j < n, and the largest of them (NaN skipped): fd_div_into and
       fd_nanmax in one pass, the same lanes */
    FD_CLONES static float fd_div_max(float *out, const float *a, Py_ssize_t n, float d) {
        float b[32];
        float m = -INFINITY;
        Py_ssize_t j = 0;
        for (int k = 0; k < 32; k++) b[k] = -INFINITY;
        for (; j + 32 <= n; j += 32)
            for (int k = 0; k < 32; k++) {
                float v = a[j + k] / d;
                out[j + k] = v;
                b[k] = v > b[k] ? v : b[k];
            }
        for (int k = 0; k < 32; k++) m = b[k] > m ? b[k] : m;
        for (; j < n; j++) {
            float v = a[j] / d;
            out[j] = v;
            m = v > m ? v : m;
        }
        return m;
    }
    /* One leaf (8 <= n <= 128) of fd_pairwise_sumexp: eight interleaved sums of the
       exponentials, folded as np.sum folds them; a leaf all -inf sums to the +0.0 its zeros
       give, without computing them (a NaN is not -inf: computed) -- most of a row top-k/top-p
       has masked. A leaf whose every value is <= a finite m (no NaN: the block's maximum
       m, as the programs pass it) has each a[j] - m <= 0 and not NaN, where fd_expf_nonpos is
       fd_expf's float without its guards (a few of some 30 vector operations a value); any
       other leaf takes fd_expf. */
    FD_CLONES static float fd_leaf_sumexp(const float *a, Py_ssize_t n, float m) {
        float e[128], r[8];
        uint32_t live = 0;
        int bad = 0;
        /* any value that is not -inf (a NaN included): its bits differ from -inf's -- an
           integer OR, which vectorises; and any that is not <= m (NaN, or above m): one
           unordered comparison */
        for (Py_ssize_t j = 0; j < n; j++) {
            uint32_t u;
            memcpy(&u, a + j, 4);
            live |= u ^ 0xff800000u;
            bad |= !(a[j] <= m);
        }
        if (!live) return 0.0f;
        if (!bad && m > -INFINITY && m < INFINITY) {
            for (Py_ssize_t j = 0; j < n; j++) e[j] = fd_expf_nonpos(a[j] - m);
        } else {
            for (Py_ssize_t j = 0; j < n; j++) e[j] = fd_expf(a[j] - m);
        }
        for (int j = 0; j < 8; j++) r[j] = e[j];
        Py_ssize_t i = 8, lim = n - (n % 8);
        for (; i < lim; i += 8)
            for (int j = 0; j < 8; j++) r[j] = r[j] + e[i + j];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res = res + e[i];
        return res;
    }
    /* The sum of fd_expf(a[j] - m), j < n, as np.sum adds those values
       (_pairwise_sum's tree: runs of < 8 from -0.0, up to 128 in eight interleaved sums,
       longer ones split in halves rounded down to a multiple of 8) -- the same floats, in one
       pass that writes nothing */
    static float fd_pairwise_sumexp(const float *a, Py_ssize_t n, float m) {
        if (n < 8) {
            float res = -0.0f;
            for (Py_ssize_t i = 0; i < n; i++) res = res + fd_expf(a[i] - m);
            return res;
        }
        if (n <= 128) return fd_leaf_sumexp(a, n, m);
        Py_ssize_t n2 = n / 2;
        n2 -= n2 % 8;
        return fd_pairwise_sumexp(a, n2, m) + fd_pairwise_sumexp(a + n2, n - n2, m);
    }
    /* a[j] /= d, j < n */
    FD_CLONES static void fd_div_by(float *a, Py_ssize_t n, float d) {
        for (Py_ssize_t j = 0; j < n; j++) a[j] = a[j] / d;
    }
    /* out[j] = a[j] / d, j < n: a copy and the division in one pass */
    FD_CLONES static void fd_div_into(float *out, const float *a, Py_ssize_t n, float d) {
        for (Py_ssize_t j = 0; j < n; j++) out[j] = a[j] / d;
    }
    /* The masses of a[0:n), each value read as y = a[j] / d (d = 1: as it is, exactly) and
       weighed exp(y - m) against a finite m >= every y (none NaN: the caller's): *z += all of
       them, *above += those of the y > t. Nothing written. Added in sixteen float lanes over
       runs of 256 values (each lane's sum of 16 terms <= 1: within 1e-6 relative of exact),
       the runs' sums in sixteen double lanes -- the float lanes keep the loop in full-width
       vectors (8 double lanes had it at half width, twice the time of the statistics'
       exponentials); the callers' margins on these masses are 1e-4. */
    static inline void fd_masses_run(const float *a, Py_ssize_t n, float d, int divide,
                                     float m, float t, double *zl, double *al) {
        Py_ssize_t j = 0;
        for (; j + 256 <= n; j += 256) {
            float zf[16] = {0.0f}, af[16] = {0.0f};
            for (int i = 0; i < 256; i += 16)
                for (int k = 0; k < 16; k++) {
                    float y = divide ? a[j + i + k] / d : a[j + i + k];
                    float e = fd_expf_nonpos(y - m);
                    zf[k] += e;
                    af[k] += y > t ? e : 0.0f;
                }
            for (int k = 0; k < 16; k++) { zl[k] += zf[k]; al[k] += af[k]; }
        }
        for (; j < n; j++) {
            float y = divide ? a[j] / d : a[j];
            double e = (double)fd_expf_nonpos(y - m);
            zl[0] += e;
            al[0] += y > t ? e : 0.0;
        }
    }
    FD_CLONES static void fd_masses_above(const float *a, Py_ssize_t n, float d, float m,
                                          float t, double *z, double *above) {
        double zl[16] = {0.0}, al[16] = {0.0};
        if (d == 1.0f)
            fd_masses_run(a, n, 1.0f, 0, m, t, zl, al);
        else
            fd_masses_run(a, n, d, 1, m, t, zl, al);
        for (int k = 0; k < 16; k++) { *z += zl[k]; *above += al[k]; }
    }
    """
    int _thread_id "fd_spec_thread_id"() noexcept nogil
    ctypedef void (*fd_unit_fn)(void* ctx, Py_ssize_t u) noexcept nogil
    ctypedef Py_ssize_t (*fd_mid_fn)(void* ctx) noexcept nogil
    void fd_two_loops(int nt, Py_ssize_t n1, fd_unit_fn f1, fd_mid_fn mid, fd_unit_fn f2,
                      void* ctx) noexcept nogil
    float fd_bits_to_float(uint32_t b) noexcept nogil
    float fd_half_to_float(uint16_t h) noexcept nogil
    float fd_expf(float x) noexcept nogil
    float fd_nanmax(const float* a, Py_ssize_t n) noexcept nogil
    float fd_div_max(float* out, const float* a, Py_ssize_t n, float d) noexcept nogil
    float fd_pairwise_sumexp(const float* a, Py_ssize_t n, float m) noexcept nogil
    void fd_div_by(float* a, Py_ssize_t n, float d) noexcept nogil
    void fd_div_into(float* out, const float* a, Py_ssize_t n, float d) noexcept nogil
    void fd_masses_above(const float* a, Py_ssize_t n, float d, float m, float t, double* z,
                         double* above) noexcept nogil


cdef enum:
    M_BYTE = (1 << DT_UINT8) | (1 << DT_BOOL)
    M_HALF = (1 << DT_FLOAT16) | (1 << DT_BFLOAT16)
    M_LOGITS = M_FLOAT32 | M_HALF
    M_REAL = M_FLOAT32 | M_FLOAT64
    ROW_VISITS = 8      # element-visits per value of a row the one pass walks
    AHEAD = 3           # Lazy.done: a row whose draft _accept_ahead accepted (not processed)
    AHEAD_ROWS = 0      # _accept_ahead's batching (_set_ahead_batching): row by row,
    AHEAD_REST = 1      # the first row alone then the rest together,
    AHEAD_ALL = 2       # every row together
    DRAW_LANES = 256    # the fewest lanes above -inf a masked row's draw makes room for
    PEEK_BYTES = 8 << 20  # target rows up to this size are peeked before they are loaded
    STREAM_BYTES = 64 << 20  # and those past this size too, their masks streamed to memory


# -- float helpers: the kernels' reductions ----------------------------------------------------

cdef float _pairwise_sum(const float* a, Py_ssize_t n) noexcept nogil:
    """``np.sum`` of an fp32 array, in its order: runs of < 8 from -0.0, up to 128 in eight
    interleaved partial sums, longer ones split in halves rounded down to a multiple of 8."""
    cdef Py_ssize_t i, j, n2
    cdef float r[8]
    cdef float res
    if n < 8:
        res = -0.0
        for i in range(n):
            res = res + a[i]
        return res
    if n <= 128:
        for j in range(8):
            r[j] = a[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] = r[j] + a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res = res + a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, n2) + _pairwise_sum(a + n2, n - n2)


cdef inline Py_ssize_t _argmax(const float* a, Py_ssize_t n, float* best_out) noexcept nogil:
    """``tl.max(a, return_indices=True)`` as the interpreter computes it (``nanmax``,
    ``nanargmax``): the max ignores NaN, the index counts a NaN as -inf -- the first index of
    the max, so a block of NaN and -inf only is index 0; a block of no number gives NaN at 0.
    The max is found first (vectorised), then its first index; the value returned is the
    element's own (of a max of 0.0 and -0.0, the first one's)."""
    cdef Py_ssize_t j = 0
    cdef float m = fd_nanmax(a, n)
    if m == -INFINITY:                          # NaN and -inf only: every lane ties at -inf
        while j < n and a[j] != m:
            j += 1
        best_out[0] = m if j < n else NAN
        return 0
    while a[j] != m:
        j += 1
    best_out[0] = a[j]
    return j


cdef inline float _nanmax_of(const float* a, Py_ssize_t n, float m) noexcept nogil:
    """``_nanmax`` given ``fd_nanmax(a, n)`` (``m``)."""
    cdef Py_ssize_t j
    if m == -INFINITY:
        for j in range(n):
            if a[j] == m:
                return m
        return NAN
    return m


cdef inline float _nanmax(const float* a, Py_ssize_t n) noexcept nogil:
    """``tl.max(a)`` as the interpreter computes it (``nanmax``): the max ignoring NaN, -inf
    for a block of NaN and -inf, NaN for a block of no number -- ``_argmax``'s value without
    the search for its index."""
    return _nanmax_of(a, n, fd_nanmax(a, n))


cdef inline float _sumexp_of(const float* a, Py_ssize_t n, float m, float* sumexp) noexcept nogil:
    """``_max_sumexp`` given the max ``m`` (``_nanmax``); ``a`` is not written."""
    if m > -INFINITY:
        sumexp[0] = fd_pairwise_sumexp(a, n, m)
    else:
        sumexp[0] = 0.0
    return m


cdef inline float _max_sumexp(const float* a, Py_ssize_t n, float* sumexp) noexcept nogil:
    """vLLM's ``_compute_max_and_sumexp``: the max and, when it is > -inf, the sum of
    ``exp(a - max)`` (``fd_expf``'s, added in ``_pairwise_sum``'s order, in one pass:
    ``fd_pairwise_sumexp``), else 0."""
    return _sumexp_of(a, n, _nanmax(a, n), sumexp)


cdef inline float _block_max_sumexp(const Tab* t, Py_ssize_t base, Py_ssize_t nv, Py_ssize_t BS,
                                    bint scaled, bint pad_scaled, float temp, float* buf,
                                    float* sumexp) noexcept nogil:
    """A stats program's block of ``t`` from ``base`` (``nv`` valid values, -inf to ``BS``),
    divided by ``temp`` where ``scaled`` (the padding too where ``pad_scaled``: the program's
    order): ``_max_sumexp`` of it as the program lays it out in ``buf``. A whole float32
    block is read in place (unscaled) or divided into ``buf`` with its maximum found in the
    same pass; any other goes through ``buf`` as laid out."""
    cdef const float* src
    cdef Py_ssize_t j
    if t.code == DT_FLOAT32 and nv == BS:
        src = (<const float*>t.p) + base
        if not scaled:
            return _max_sumexp(src, BS, sumexp)
        return _sumexp_of(buf, BS, _nanmax_of(buf, BS, fd_div_max(buf, src, BS, temp)), sumexp)
    cdef float pad = -INFINITY
    _ldrow(t, base, nv, buf)
    if scaled:
        fd_div_by(buf, nv, temp)
        if pad_scaled:
            pad = pad / temp      # each padding value divided alike: one division
    for j in range(nv, BS):
        buf[j] = pad
    return _max_sumexp(buf, BS, sumexp)


cdef inline float _min_zero(float v) noexcept nogil:
    """``tl.minimum(v, 0.0)``: Triton's default (``propagate_nan=NONE``) is ``fmin``, so a NaN
    ``v`` gives 0."""
    if v < 0.0:
        return v
    return 0.0


cdef inline float _max_zero(float v) noexcept nogil:
    """``tl.maximum(v, 0.0)``: ``fmax``, a NaN ``v`` gives 0."""
    if v > 0.0:
        return v
    return 0.0


# -- tables: a base pointer read with the kernel's own strides ------------------------------------

cdef struct Tab:
    char* p
    int code            # element dtype
    Py_ssize_t s0, s1   # element strides the kernel uses (its stride arguments)
    Py_ssize_t n0, n1   # rows and steps a shaped table holds; n0 = -1: a flat buffer
    Py_ssize_t cols     # columns of a shaped table
    Py_ssize_t numel    # elements of a flat buffer
    # the one-pass verification's target logits (``rejection_sample_fused``): raw rows, each
    # read as the temperature kernel would have left it (divided by its request's
    # temperature unless that is 0 or 1)
    bint by_temp


cdef inline bint _holds(const Tab* t, int64_t i0, int64_t i1, int64_t ncols) noexcept nogil:
    """Whether ``ncols`` columns from row ``i0`` (step ``i1``) lie in the table."""
    cdef int64_t off
    if ncols <= 0:
        return True
    if i0 < 0 or i1 < 0:
        return False
    if t.n0 >= 0:
        return i0 < t.n0 and i1 < t.n1 and ncols <= t.cols
    off = i0 * t.s0 + i1 * t.s1
    return off >= 0 and off + ncols <= t.numel


cdef inline float _ldf(const Tab* t, Py_ssize_t off) noexcept nogil:
    """Element ``off`` of a float table as fp32 (``.to(tl.float32)``)."""
    if t.code == DT_FLOAT32:
        return (<const float*>t.p)[off]
    if t.code == DT_BFLOAT16:
        return fd_bits_to_float((<uint32_t>(<const uint16_t*>t.p)[off]) << 16)
    if t.code == DT_FLOAT16:
        return fd_half_to_float((<const uint16_t*>t.p)[off])
    return <float>(<const double*>t.p)[off]


cdef inline void _ldrow(const Tab* t, Py_ssize_t off, Py_ssize_t n, float* out) noexcept nogil:
    """``out[j] = _ldf(t, off + j)``, ``j < n``: one loop per dtype, so each vectorises."""
    cdef Py_ssize_t j
    cdef const uint16_t* h
    if t.code == DT_FLOAT32:
        memcpy(out, (<const float*>t.p) + off, n * sizeof(float))
    elif t.code == DT_BFLOAT16:
        h = (<const uint16_t*>t.p) + off
        for j in range(n):
            out[j] = fd_bits_to_float((<uint32_t>h[j]) << 16)
    elif t.code == DT_FLOAT16:
        h = (<const uint16_t*>t.p) + off
        for j in range(n):
            out[j] = fd_half_to_float(h[j])
    else:
        for j in range(n):
            out[j] = <float>(<const double*>t.p)[off + j]


cdef inline double _ldd(const Tab* t, Py_ssize_t off) noexcept nogil:
    if t.code == DT_FLOAT64:
        return (<const double*>t.p)[off]
    return <double>_ldf(t, off)


cdef inline void _stf(const Tab* t, Py_ssize_t off, double v) noexcept nogil:
    """Store into a float32/float64 table, converting as a Triton store does."""
    if t.code == DT_FLOAT64:
        (<double*>t.p)[off] = v
    else:
        (<float*>t.p)[off] = <float>v


cdef inline int64_t _ldi(const Tab* t, Py_ssize_t off) noexcept nogil:
    if t.code == DT_INT64:
        return (<const int64_t*>t.p)[off]
    return (<const int*>t.p)[off]


cdef inline void _sti(const Tab* t, Py_ssize_t off, int64_t v) noexcept nogil:
    if t.code == DT_INT64:
        (<int64_t*>t.p)[off] = v
    else:
        (<int*>t.p)[off] = <int>v


cdef inline Py_ssize_t _off(const Tab* t, int64_t i0, int64_t i1) noexcept nogil:
    return i0 * t.s0 + i1 * t.s1


cdef inline bint _scaled(const Tab* t, float temp) noexcept nogil:
    """Whether a row of ``t`` read for a request at ``temp`` is divided by it: a ``by_temp``
    table, as vLLM's ``_temperature_kernel`` leaves a row (it returns early at 0 and 1)."""
    return t.by_temp and temp != 0.0 and temp != 1.0


cdef int _table(object t, str name, int mask, int ndim, object st0, str n0, object st1, str n1,
                Tab* out) except -1:
    """A table the kernel reads or writes as ``ptr + i0 * st0 (+ i1 * st1) + col``: a tensor
    of ``ndim`` dimensions (columns unit-stride, each stride argument equal to the tensor's
    stride where that dimension has more than one entry), or a contiguous tensor of any other
    shape read flat. ``st1``/``n1`` only for ``ndim`` 3."""
    cdef Py_ssize_t shp[3]
    cdef Py_ssize_t rs = 0
    cdef int code = 0
    out.s0 = as_int(st0, n0)
    out.s1 = as_int(st1, n1) if ndim == 3 else 0
    out.n0 = -1
    out.n1 = 1
    out.cols = 0
    out.numel = 0
    out.by_temp = False
    nd = getattr(t, "ndim", None)
    if nd == ndim and ndim == 2:
        out.p = check_table(t, name, mask, shp, &rs, &code)
        if shp[0] > 1 and shp[1] > 0 and rs != out.s0:
            raise ValueError(expected(n0, f"{name}.stride(0) = {rs}", out.s0))
        out.n0 = shp[0]
        out.cols = shp[1]
    elif nd == ndim and ndim == 3:
        code = dtype_code(t.dtype)
        if not (mask & (1 << code)):
            check_tensor(t, name, mask, -1, &code, shp)     # raises the dtype error
        if t.device.type != "cpu":
            raise ValueError(expected(name, "a CPU tensor", f"device {t.device}"))
        size, st = tuple(t.shape), t.stride()
        if size[2] > 1 and st[2] != 1 and size[0] * size[1] > 0:
            raise ValueError(expected(name, "contiguous rows (stride(2) == 1)", f"strides {st}"))
        if size[0] > 1 and size[1] * size[2] > 0 and st[0] != out.s0:
            raise ValueError(expected(n0, f"{name}.stride(0) = {st[0]}", out.s0))
        if size[1] > 1 and size[0] * size[2] > 0 and st[1] != out.s1:
            raise ValueError(expected(n1, f"{name}.stride(1) = {st[1]}", out.s1))
        if t.is_conj() or t.is_neg():
            raise ValueError(expected(name, "a tensor without a lazy negation", "one"))
        out.p = <char*><size_t>t.data_ptr()
        out.n0 = size[0]
        out.n1 = size[1]
        out.cols = size[2]
    else:
        out.p = check_tensor(t, name, mask, -1, &code, shp)
        out.numel = shp[0]
    out.code = code
    return 0


cdef int _need(const Tab* t, str name, int64_t i0, int64_t i1, int64_t ncols, str what) except -1:
    """Refuses a table that does not hold ``ncols`` columns from row ``i0`` (step ``i1``). Its
    message is built before the call: the per-row callers test ``_holds`` first, so that a
    launch of many rows does not format one message per row for nothing."""
    if not _holds(t, i0, i1, ncols):
        raise ValueError(expected(name, f"a table holding {what}",
                                  _extent(t)))
    return 0


cdef str _extent(const Tab* t):
    if t.n0 >= 0:
        return f"{t.n0} rows" + (f" of {t.n1} steps" if t.n1 != 1 else "") + f" of {t.cols}"
    return f"{t.numel} elements read flat"


cdef int _no_overlap_rows(const Tab* t, str name, str sname, int64_t rows, int64_t cols) except -1:
    """An output written as ``rows`` rows of ``cols`` must not have rows that overlap."""
    if rows > 1 and cols > 0 and t.s0 < cols:
        raise ValueError(expected(sname, f">= {cols} (rows of {name} that do not overlap)",
                                  t.s0))
    return 0


cdef inline int64_t _grid_axis(object grid, int axis, str name) except? -1:
    """Programs along ``axis`` of the launch grid (0 when any axis is empty: nothing runs)."""
    g = tuple(grid)
    if not 1 <= len(g) <= 3:
        raise ValueError(expected("grid", "1 to 3 axes", len(g)))
    cdef int64_t v, total = 1, want = 0
    cdef int i
    for i in range(len(g)):
        v = as_int(g[i], "grid")
        if v < 0:
            raise ValueError(expected("grid", "non-negative axes", g))
        total *= v
        if i == axis:
            want = v
    if axis >= len(g):
        want = 1
    return want if total > 0 else 0


cdef float _as_float(object v, str name) except? -1.0:
    """A float launch argument (a Triton fp32 scalar): a Python or numpy number, or a 0-d
    tensor; not a bool. Rounded to fp32, as Triton passes it."""
    if isinstance(v, bool) or v is None or isinstance(v, (str, bytes)):
        raise TypeError(expected(name, "a number", type(v).__name__))
    try:
        return <float>float(v)
    except (TypeError, ValueError):
        raise TypeError(expected(name, "a number", type(v).__name__)) from None


cdef inline int _pow2(int64_t v, str name) except -1:
    if v < 1 or (v & (v - 1)) != 0:
        raise ValueError(expected(name, "a power of two (a tl.arange length)", v))
    return 0


cdef struct Real:
    const char* p
    bint dbl


cdef inline double _ldrd(Real r, Py_ssize_t i) noexcept nogil:
    """A float32/float64 value in its own precision (a comparison with it promotes to it)."""
    if r.dbl:
        return (<const double*>r.p)[i]
    return (<const float*>r.p)[i]


cdef inline float _ldr(Real r, Py_ssize_t i) noexcept nogil:
    """A float32/float64 per-request value, ``.to(tl.float32)``."""
    if r.dbl:
        return <float>(<const double*>r.p)[i]
    return (<const float*>r.p)[i]


cdef int _real(object t, str name, Py_ssize_t need, str why, Real* out) except -1:
    cdef Py_ssize_t shp[1]
    cdef int code = 0
    out.p = check_tensor(t, name, M_REAL, -1, &code, shp)
    out.dbl = code == DT_FLOAT64
    if shp[0] < need:
        raise ValueError(expected(name, f"at least {need} elements ({why})", shp[0]))
    return 0


cdef Py_ssize_t _numel(object t, str name, int mask) except -1:
    cdef Py_ssize_t shp[1]
    check_tensor(t, name, mask, -1, NULL, shp)
    return shp[0]


cdef inline int _team(Py_ssize_t work, Py_ssize_t programs) noexcept:
    cdef int n = threads_for(work)
    if n > programs:
        n = <int>programs if programs > 0 else 1
    return n


# -- _flatten_sampled_kernel ----------------------------------------------------------------------

def flatten_sampled_kernel(flat_sampled_ptr, sampled_ptr, sampled_stride, num_sampled_ptr,
                           cu_num_logits_ptr, *, grid):
    """Program ``r`` of ``grid[0]`` copies the first ``num_sampled[r]`` tokens of row ``r`` of
    ``sampled`` to ``flat_sampled[cu[r]:]``: the accepted tokens packed as the logits rows
    they came from (for logprobs)."""
    cdef int64_t R = _grid_axis(grid, 0, "grid")
    cdef Tab s
    cdef IBuf flat, ns, cu
    cdef int64_t r, i, n, start, flat_need = 0
    _table(sampled_ptr, "sampled_ptr", M_INDEX, 2, sampled_stride, "sampled_stride", None, "",
           &s)
    ns = index_at_least(num_sampled_ptr, "num_sampled_ptr", R, "one per request of the grid")
    cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", R, "one per request of the grid")
    for r in range(R):
        n = iget(ns, r)
        if n <= 0:
            continue
        start = iget(cu, r)
        if start < 0:
            raise ValueError(expected("cu_num_logits_ptr", "non-negative offsets",
                                      f"[{r}] = {start}"))
        if not _holds(&s, r, 0, n):
            _need(&s, "sampled_ptr", r, 0, n, f"row {r}'s {n} sampled tokens")
        if start + n > flat_need:
            flat_need = start + n
    flat = index_at_least(flat_sampled_ptr, "flat_sampled_ptr", flat_need,
                          "every request's tokens at its offset")
    with nogil:
        for r in range(R):
            n = iget(ns, r)
            start = iget(cu, r)
            for i in range(n):
                iset(flat, start + i, _ldi(&s, _off(&s, r, 0) + i))


# -- _gather_draft_sampled_kernel -----------------------------------------------------------------

def gather_draft_sampled_kernel(draft_sampled_ptr, pos_ptr, input_ids_ptr, positions_ptr,
                                logits_indices_ptr, expanded_idx_mapping_ptr,
                                expanded_local_pos_ptr, prefill_len_ptr, num_logits,
                                BLOCK_SIZE=None):
    """For each of ``num_logits`` rows: its input token and position (``logits_indices`` names
    the token), the token -1 for a draft slot (local position > 0) whose step starts inside
    the request's prefill (``pos - local_pos < prefill_len``): a placeholder to reject."""
    cdef int64_t N = as_int(num_logits, "num_logits")
    cdef IBuf out, pos, ids, positions, li, eim, elp, pl
    cdef Py_ssize_t n_ids, n_pos, n_pl
    cdef int64_t b, t, rs, p, lp
    if BLOCK_SIZE is not None:
        need_min("BLOCK_SIZE", as_int(BLOCK_SIZE, "BLOCK_SIZE"), 1)
    if N < 0:
        N = 0       # a negative count launches no program (cdiv <= 0)
    li = index_at_least(logits_indices_ptr, "logits_indices_ptr", N, "one per logits row")
    eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                         "one per logits row")
    elp = index_at_least(expanded_local_pos_ptr, "expanded_local_pos_ptr", N,
                         "one per logits row")
    n_ids = _numel(input_ids_ptr, "input_ids_ptr", M_INDEX)
    n_pos = _numel(positions_ptr, "positions_ptr", M_INDEX)
    n_pl = _numel(prefill_len_ptr, "prefill_len_ptr", M_INDEX)
    ids = index_at_least(input_ids_ptr, "input_ids_ptr", 0)
    positions = index_at_least(positions_ptr, "positions_ptr", 0)
    pl = index_at_least(prefill_len_ptr, "prefill_len_ptr", 0)
    for b in range(N):
        t = iget(li, b)
        if t < 0 or t >= n_ids or t >= n_pos:
            raise ValueError(expected("logits_indices_ptr",
                                      f"token indices in [0, {min(n_ids, n_pos)}) (input_ids_ptr"
                                      f" and positions_ptr hold {n_ids} and {n_pos})",
                                      f"[{b}] = {t}"))
        rs = iget(eim, b)
        if rs < 0 or rs >= n_pl:
            raise ValueError(expected("expanded_idx_mapping_ptr",
                                      f"request slots in [0, {n_pl}) (prefill_len_ptr's length)",
                                      f"[{b}] = {rs}"))
    out = index_at_least(draft_sampled_ptr, "draft_sampled_ptr", N, "one per logits row")
    pos = index_at_least(pos_ptr, "pos_ptr", N, "one per logits row")
    with nogil:
        for b in range(N):
            t = iget(li, b)
            p = iget(positions, t)
            lp = iget(elp, b)
            rs = iget(eim, b)
            if lp > 0 and p - lp < iget(pl, rs):
                iset(out, b, -1)
            else:
                iset(out, b, iget(ids, t))
            iset(pos, b, p)


# -- _compute_local_logits_stats_kernel -----------------------------------------------------------

cdef inline int64_t _mapped_row(bint has_rowmap, IBuf rowmap, int64_t rs) noexcept nogil:
    """The draft logits row of request slot ``rs``: the slot itself, or (0.34's row mapping,
    a sharded cache) ``max(row_mapping[rs], 0)`` -- a slot without a row reads row 0, as the
    kernels' ``tl.maximum(draft_logits_row(...), 0)`` does."""
    cdef int64_t row
    if not has_rowmap:
        return rs
    row = iget(rowmap, rs)
    return row if row > 0 else 0


cdef struct Bonus:
    # Which rows are bonus rows (no stats, no residual): 0.27-0.32, a local position at or
    # past ``num_speculative_steps``; 0.33+, a row whose next row starts a request (local
    # position 0) or is past ``num_logits`` -- adaptive verification can end a request early
    bint by_next
    int64_t K                   # num_speculative_steps (0.27-0.32)
    int64_t num_logits          # 0.33+
    IBuf elp


cdef inline bint _is_bonus(const Bonus* b, int64_t li) noexcept nogil:
    if b.by_next:
        return li + 1 >= b.num_logits or iget(b.elp, li + 1) == 0
    return iget(b.elp, li) >= b.K


cdef int _bonus_rule(Bonus* b, object expanded_local_pos_ptr, object count, bint by_next,
                     int64_t L, int64_t own) except -1:
    """Parse the bonus rule's count (``num_speculative_steps``, or 0.33+'s ``num_logits``) and
    check the local positions the launch reads: the first ``own`` rows' own, and with 0.33+'s
    rule each row's next one below ``num_logits``."""
    cdef int64_t need = own
    b.by_next = by_next
    b.K = 0
    b.num_logits = 0
    if by_next:
        b.num_logits = as_int(count, "num_logits")
        if b.num_logits > 1 and min(L + 1, b.num_logits) > need:
            need = min(L + 1, b.num_logits)
    else:
        b.K = as_int(count, "num_speculative_steps")
    b.elp = index_at_least(expanded_local_pos_ptr, "expanded_local_pos_ptr", need,
                           "the local positions of the grid's rows" if by_next else
                           "one per row of the grid" if own == L else
                           "one per row of the grid but the last")
    return 0


cdef int _need_row_mapping(bint has_rowmap, Py_ssize_t n_map, int64_t rs) except -1:
    """A request slot whose draft logits are read has an entry in the row mapping."""
    if has_rowmap and rs >= n_map:
        raise ValueError(expected("draft_logits_row_mapping_ptr",
                                  f"an entry for request slot {rs}", f"{n_map} elements"))
    return 0


cdef struct Stats:
    Tab tam, tmax, tsum, dmax, dsum, tgt, drf
    IBuf eim
    Bonus bonus
    Real temp
    int64_t V, BS, NB
    bint has_draft
    bint has_rowmap
    IBuf rowmap
    # the one pass (``_accept_ahead``): per row, its draft blocks already computed (NULL: none)
    const unsigned char* drafted


cdef inline Py_ssize_t _valid(int64_t V, int64_t block, int64_t BS) noexcept nogil:
    """Unmasked entries of vocabulary block ``block`` (``block * BS + j < V``)."""
    cdef int64_t n = V - block * BS
    if n < 0:
        return 0
    return n if n < BS else BS


cdef void _stats_program(const Stats* a, int64_t li, int64_t b, float* buf) noexcept nogil:
    cdef int64_t rs, j, nv, base
    cdef float temp, m, s
    cdef Py_ssize_t idx
    if _is_bonus(&a.bonus, li):
        return                                  # bonus token: no stats needed
    rs = iget(a.eim, li)
    temp = _ldr(a.temp, rs)
    nv = _valid(a.V, b, a.BS)
    base = _off(&a.tgt, li, 0) + b * a.BS
    if temp == 0.0:
        _ldrow(&a.tgt, base, nv, buf)
        for j in range(nv, a.BS):
            buf[j] = -INFINITY
        idx = _argmax(buf, a.BS, &m)
        _sti(&a.tam, _off(&a.tam, li, 0) + b, b * a.BS + idx)
        _stf(&a.tmax, _off(&a.tmax, li, 0) + b, m)
        return
    # the target's values divided before the -inf padding, the draft's with it (the kernel's
    # order)
    m = _block_max_sumexp(&a.tgt, base, nv, a.BS, _scaled(&a.tgt, temp), False, temp, buf, &s)
    _stf(&a.tmax, _off(&a.tmax, li, 0) + b, m)
    _stf(&a.tsum, _off(&a.tsum, li, 0) + b, s)
    if a.has_draft and (a.drafted == NULL or not a.drafted[li]):
        _stats_draft_block(a, li, b, buf)


cdef void _stats_draft_block(const Stats* a, int64_t li, int64_t b, float* buf) noexcept nogil:
    """A non-greedy row's draft block ``b``: ``_stats_program``'s draft half (the draft's values
    divided by the temperature, its -inf padding too: the kernel's order)."""
    cdef int64_t rs = iget(a.eim, li)
    cdef float m, s
    cdef Py_ssize_t base = (_off(&a.drf, _mapped_row(a.has_rowmap, a.rowmap, rs),
                                 iget(a.bonus.elp, li)) + b * a.BS)
    m = _block_max_sumexp(&a.drf, base, _valid(a.V, b, a.BS), a.BS, True, True,
                          _ldr(a.temp, rs), buf, &s)
    _stf(&a.dmax, _off(&a.dmax, li, 0) + b, m)
    _stf(&a.dsum, _off(&a.dsum, li, 0) + b, s)


def compute_local_logits_stats_kernel(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, num_speculative_steps, BLOCK_SIZE,
        HAS_DRAFT_LOGITS=None, *, grid):
    """Program ``(t, b)`` of ``grid``, for a draft row ``t`` (local position <
    ``num_speculative_steps``): vocabulary block ``b`` (``BLOCK_SIZE`` wide, masked at
    ``vocab_size``) of target row ``t`` -- a greedy row (temperature 0) its max and first
    argmax, any other row its max and ``sum(exp(x - max))`` (0 when the max is -inf), and with
    HAS_DRAFT_LOGITS (default: draft logits given) the same of the request's draft logits at
    that step divided by the temperature."""
    _local_logits_stats(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, None, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, num_speculative_steps, False,
        BLOCK_SIZE, HAS_DRAFT_LOGITS, grid)


def compute_local_logits_stats_num_logits_kernel(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, num_logits, BLOCK_SIZE,
        HAS_DRAFT_LOGITS=None, *, grid):
    """vLLM 0.33's ``_compute_local_logits_stats_kernel``: as
    ``compute_local_logits_stats_kernel``, a bonus row being one whose next row starts a
    request (local position 0) or lies at or past ``num_logits`` (adaptive verification may
    end a request before ``num_speculative_steps``)."""
    _local_logits_stats(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, None, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, num_logits, True, BLOCK_SIZE,
        HAS_DRAFT_LOGITS, grid)


def compute_local_logits_stats_row_mapping_kernel(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_logits_row_mapping_ptr,
        expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr, vocab_size, num_logits,
        BLOCK_SIZE, HAS_DRAFT_LOGITS=None, *, grid):
    """vLLM 0.34's ``_compute_local_logits_stats_kernel``: 0.33's
    (``compute_local_logits_stats_num_logits_kernel``), the draft logits of request slot ``s``
    read from cache row ``max(row_mapping[s], 0)`` when ``draft_logits_row_mapping_ptr`` is
    given (a sharded cache), from row ``s`` when None."""
    _local_logits_stats(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_logits_row_mapping_ptr,
        expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr, vocab_size, num_logits,
        True, BLOCK_SIZE, HAS_DRAFT_LOGITS, grid)


cdef _local_logits_stats(
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, target_logits_ptr, target_logits_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_logits_row_mapping_ptr,
        expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr, vocab_size, bonus_count,
        bint by_next, BLOCK_SIZE, HAS_DRAFT_LOGITS, grid, Stats* into=NULL):
    """The stats launch; with ``into``, its arguments checked and parsed there, nothing run."""
    cdef Stats a
    cdef int64_t L = _grid_axis(grid, 0, "grid"), NB = _grid_axis(grid, 1, "grid")
    cdef int64_t li, step, rs, P, p
    cdef Py_ssize_t n_temp, n_map = 0
    cdef float temp
    cdef bint any_greedy = False, any_random = False
    cdef float* scratch
    cdef int nt
    if L == 0 or NB == 0:
        L = NB = 0
    a.V = as_int(vocab_size, "vocab_size")
    _bonus_rule(&a.bonus, expanded_local_pos_ptr, bonus_count, by_next, L, 0 if by_next else L)
    a.BS = as_int(BLOCK_SIZE, "BLOCK_SIZE")
    _pow2(a.BS, "BLOCK_SIZE")
    a.NB = NB
    a.has_draft = as_flag(HAS_DRAFT_LOGITS, "HAS_DRAFT_LOGITS", not is_none(draft_logits_ptr))
    if a.has_draft:
        required(draft_logits_ptr, "draft_logits_ptr", "with HAS_DRAFT_LOGITS")
    a.has_rowmap = a.has_draft and not is_none(draft_logits_row_mapping_ptr)
    a.rowmap.ptr = NULL
    a.rowmap.wide = False
    a.drafted = NULL
    if a.has_rowmap:
        n_map = _numel(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr", M_INDEX)
        a.rowmap = index_at_least(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr",
                                  0)
    a.eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", L,
                           "one per row of the grid")
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    _real(temp_ptr, "temp_ptr", 0, "", &a.temp)
    _table(target_logits_ptr, "target_logits_ptr", M_LOGITS, 2, target_logits_stride,
           "target_logits_stride", None, "", &a.tgt)
    if a.has_draft:
        _table(draft_logits_ptr, "draft_logits_ptr", M_LOGITS, 3, draft_logits_stride_0,
               "draft_logits_stride_0", draft_logits_stride_1, "draft_logits_stride_1", &a.drf)
    # the columns a row's blocks read: up to vocab_size, within the grid's blocks
    cdef int64_t cols = min(a.V, NB * a.BS) if a.V > 0 else 0
    for li in range(L):
        if _is_bonus(&a.bonus, li):
            continue
        step = iget(a.bonus.elp, li)
        rs = iget(a.eim, li)
        if rs < 0 or rs >= n_temp:
            raise ValueError(expected("expanded_idx_mapping_ptr",
                                      f"request slots in [0, {n_temp}) (temp_ptr's length)",
                                      f"[{li}] = {rs}"))
        if not _holds(&a.tgt, li, 0, cols):
            _need(&a.tgt, "target_logits_ptr", li, 0, cols, f"row {li}'s {cols} columns")
        temp = _ldr(a.temp, rs)
        if temp == 0.0:
            any_greedy = True
        else:
            any_random = True
            if a.has_draft:
                _need_row_mapping(a.has_rowmap, n_map, rs)
                if not _holds(&a.drf, _mapped_row(a.has_rowmap, a.rowmap, rs), step, cols):
                    _need(&a.drf, "draft_logits_ptr", _mapped_row(a.has_rowmap, a.rowmap, rs),
                          step, cols, f"request slot {rs}, step {step}: {cols} columns")
    # outputs: rows of the grid's blocks
    _table(target_local_max_ptr, "target_local_max_ptr", M_FLOAT32, 2, target_local_max_stride,
           "target_local_max_stride", None, "", &a.tmax)
    _table(target_local_argmax_ptr, "target_local_argmax_ptr", M_INDEX, 2,
           target_local_argmax_stride, "target_local_argmax_stride", None, "", &a.tam)
    _table(target_local_sumexp_ptr, "target_local_sumexp_ptr", M_FLOAT32, 2,
           target_local_sumexp_stride, "target_local_sumexp_stride", None, "", &a.tsum)
    if a.has_draft:
        _table(draft_local_max_ptr, "draft_local_max_ptr", M_FLOAT32, 2, draft_local_max_stride,
               "draft_local_max_stride", None, "", &a.dmax)
        _table(draft_local_sumexp_ptr, "draft_local_sumexp_ptr", M_FLOAT32, 2,
               draft_local_sumexp_stride, "draft_local_sumexp_stride", None, "", &a.dsum)
    for li in range(L):
        if _is_bonus(&a.bonus, li):
            continue
        temp = _ldr(a.temp, iget(a.eim, li))
        if not _holds(&a.tmax, li, 0, NB):
            _need(&a.tmax, "target_local_max_ptr", li, 0, NB, f"row {li}'s {NB} blocks")
        if temp == 0.0:
            if not _holds(&a.tam, li, 0, NB):
                _need(&a.tam, "target_local_argmax_ptr", li, 0, NB, f"row {li}'s {NB} blocks")
        else:
            if not _holds(&a.tsum, li, 0, NB):
                _need(&a.tsum, "target_local_sumexp_ptr", li, 0, NB, f"row {li}'s {NB} blocks")
            if a.has_draft:
                if not _holds(&a.dmax, li, 0, NB):
                    _need(&a.dmax, "draft_local_max_ptr", li, 0, NB, f"row {li}'s {NB} blocks")
                if not _holds(&a.dsum, li, 0, NB):
                    _need(&a.dsum, "draft_local_sumexp_ptr", li, 0, NB, f"row {li}'s {NB} blocks")
    _no_overlap_rows(&a.tmax, "target_local_max_ptr", "target_local_max_stride", L, NB)
    if any_greedy:
        _no_overlap_rows(&a.tam, "target_local_argmax_ptr", "target_local_argmax_stride", L, NB)
    if any_random:
        _no_overlap_rows(&a.tsum, "target_local_sumexp_ptr", "target_local_sumexp_stride", L,
                         NB)
        if a.has_draft:
            _no_overlap_rows(&a.dmax, "draft_local_max_ptr", "draft_local_max_stride", L, NB)
            _no_overlap_rows(&a.dsum, "draft_local_sumexp_ptr", "draft_local_sumexp_stride", L,
                             NB)
    if into != NULL:
        into[0] = a
        return
    P = L * NB
    if P == 0:
        return
    nt = _team(P * a.BS, P)
    scratch = <float*>malloc(nt * a.BS * sizeof(float))
    if scratch == NULL:
        raise MemoryError()
    try:
        with nogil:
            if nt == 1:
                for p in range(P):
                    _stats_program(&a, p // NB, p % NB, scratch)
            else:
                for p in prange(P, num_threads=nt, schedule="static"):
                    _stats_program(&a, p // NB, p % NB, scratch + threadid() * a.BS)
    finally:
        free(scratch)


# -- the global reductions over a row's blocks ----------------------------------------------------

cdef struct Lse:
    Tab mx, se          # local max, local sum of exponentials [rows, blocks]
    int64_t nb, padded  # vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS


cdef float _global_lse(const Lse* l, int64_t row, float* buf) noexcept nogil:
    """vLLM's ``_compute_global_logsumexp``: over ``padded`` blocks (those >= ``nb`` masked to
    max -inf, sum 0), ``gmax + log(sum(sumexp * exp(max - gmax)))``."""
    cdef int64_t b, n = l.padded, real = l.nb if l.nb < l.padded else l.padded
    cdef float gm
    cdef Py_ssize_t o = _off(&l.mx, row, 0), os = _off(&l.se, row, 0)
    for b in range(real):
        buf[b] = _ldf(&l.mx, o + b)
    for b in range(real, n):
        buf[b] = -INFINITY
    gm = _nanmax(buf, n)
    for b in range(real):
        buf[b] = _ldf(&l.se, os + b) * expf(buf[b] - gm)
    for b in range(real, n):
        buf[b] = <float>0.0 * expf(-INFINITY - gm)
    return gm + logf(_pairwise_sum(buf, n))


cdef int _lse_tables(Lse* l, object mx, str mxn, object mxs, str mxsn, object se, str sen,
                     object ses, str sesn, int64_t nb, int64_t padded) except -1:
    _table(mx, mxn, M_FLOAT32, 2, mxs, mxsn, None, "", &l.mx)
    _table(se, sen, M_FLOAT32, 2, ses, sesn, None, "", &l.se)
    l.nb = nb
    l.padded = padded
    return 0


cdef int _need_lse(const Lse* l, str mxn, str sen, int64_t row) except -1:
    cdef int64_t real = min(l.nb, l.padded)
    if not _holds(&l.mx, row, 0, real):
        _need(&l.mx, mxn, row, 0, real, f"row {row}'s {real} blocks")
    if not _holds(&l.se, row, 0, real):
        _need(&l.se, sen, row, 0, real, f"row {row}'s {real} blocks")
    return 0


cdef struct LogProbs:
    Tab tgt, drf
    Lse tl, dl
    bint has_draft
    bint has_rowmap     # vLLM 0.34: the draft logits cache row of a request slot
    IBuf rowmap


cdef inline int64_t _draft_row(const LogProbs* g, int64_t rs) noexcept nogil:
    """The draft logits row of request slot ``rs`` (``_mapped_row``)."""
    return _mapped_row(g.has_rowmap, g.rowmap, rs)


cdef inline float _draft_logprob(const LogProbs* g, int64_t token, bint valid, int64_t li,
                                 int64_t rs, int64_t step, float temp, float* buf,
                                 float* dlse) noexcept nogil:
    """``_logprobs``' draft half: the draft log-probability of ``token`` at row ``li`` (its
    draft logits at ``step``, divided by the temperature) and, into ``dlse``, its log-sum-exp."""
    cdef float draft_logit = -INFINITY
    if valid:
        draft_logit = _ldf(&g.drf, _off(&g.drf, _draft_row(g, rs), step) + token)
    draft_logit = draft_logit / temp
    dlse[0] = _global_lse(&g.dl, li, buf)
    return draft_logit - dlse[0]


cdef inline void _logprobs(const LogProbs* g, int64_t token, bint valid, int64_t li, int64_t rs,
                           int64_t step, float temp, float* buf, float* tlp, float* dlp,
                           float* tlse, float* dlse) noexcept nogil:
    """vLLM's ``_compute_global_logprobs_and_logsumexp`` for one token: the target and draft
    log-probabilities of ``token`` at row ``li`` and their log-sum-exps (one-hot draft: 0, 0);
    a token not ``valid`` (0.33+'s mask: a -1 placeholder) reads logits -inf."""
    cdef float target_logit = _ldf(&g.tgt, _off(&g.tgt, li, 0) + token) if valid else -INFINITY
    if valid and _scaled(&g.tgt, temp):
        target_logit = target_logit / temp
    tlse[0] = _global_lse(&g.tl, li, buf)
    tlp[0] = target_logit - tlse[0]
    if g.has_draft:
        dlp[0] = _draft_logprob(g, token, valid, li, rs, step, temp, buf, dlse)
    else:
        dlp[0] = 0.0
        dlse[0] = 0.0


# -- _compute_cumulative_log_p_kernel -------------------------------------------------------------

cdef struct Cum:
    LogProbs g
    Tab out
    IBuf ds, cu, idx
    Real temp


cdef void _cum_program(const Cum* a, int64_t r, float* buf) noexcept nogil:
    cdef int64_t rs = iget(a.idx, r), start = iget(a.cu, r), nd, step, li, tok
    cdef float temp = _ldr(a.temp, rs), log_p = 0.0, tlp, dlp, tlse, dlse
    nd = iget(a.cu, r + 1) - start - 1
    if temp == 0.0:
        return
    for step in range(nd):
        li = start + step
        tok = iget(a.ds, li + 1)
        if tok >= 0:
            _logprobs(&a.g, tok, True, li, rs, step, temp, buf, &tlp, &dlp, &tlse, &dlse)
            log_p = _min_zero(log_p + (tlp - dlp))
        _stf(&a.out, li, log_p)


cdef int _request_checks(IBuf cu, IBuf idx, int64_t R, Py_ssize_t n_temp, str idx_name) except -1:
    cdef int64_t r, rs, start, end
    for r in range(R):
        rs = iget(idx, r)
        if rs < 0 or rs >= n_temp:
            raise ValueError(expected(idx_name, f"request slots in [0, {n_temp}) (temp_ptr's "
                                      f"length)", f"[{r}] = {rs}"))
        start = iget(cu, r)
        end = iget(cu, r + 1)
        if end - start > 1 and start < 0:
            raise ValueError(expected("cu_num_logits_ptr", "non-negative offsets",
                                      f"[{r}] = {start}"))
    return 0


cdef int _token_in(const Tab* t, str name, int64_t row, int64_t i1, int64_t tok, str tname,
                   int64_t at) except -1:
    """Token ``tok`` (of ``tname[at]``) indexes row ``row`` (step ``i1``) of ``name``."""
    if tok < 0 or not _holds(t, row, i1, tok + 1):
        raise ValueError(expected(tname, f"token ids that index {name} ({_extent(t)}) at row "
                                  f"{row}", f"[{at}] = {tok}"))
    return 0


def compute_cumulative_log_p_kernel(
        cumulative_log_p_ptr, target_logits_ptr, target_logits_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr, temp_ptr,
        vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS=None, *, grid):
    """Program ``r`` of ``grid[0]``, for a non-greedy request: ``log_p`` over its draft rows,
    ``log_p = min(log_p + log p(d) - log q(d), 0)`` for each draft ``d`` >= 0 (one-hot draft:
    ``log q = 0``), stored at every draft row (a -1 placeholder carries the last value)."""
    _cumulative_log_p(
        cumulative_log_p_ptr, target_logits_ptr, target_logits_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        None, draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr, temp_ptr,
        vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS, grid)


def compute_cumulative_log_p_row_mapping_kernel(
        cumulative_log_p_ptr, target_logits_ptr, target_logits_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_logits_row_mapping_ptr, draft_local_max_ptr, draft_local_max_stride,
        draft_local_sumexp_ptr, draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr,
        temp_ptr, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS=None, *, grid):
    """vLLM 0.34's ``_compute_cumulative_log_p_kernel``: as ``compute_cumulative_log_p_kernel``,
    the draft logits of request slot ``s`` read from cache row ``max(row_mapping[s], 0)`` when
    ``draft_logits_row_mapping_ptr`` is given (a sharded cache), from row ``s`` when None."""
    _cumulative_log_p(
        cumulative_log_p_ptr, target_logits_ptr, target_logits_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_logits_row_mapping_ptr, draft_local_max_ptr, draft_local_max_stride,
        draft_local_sumexp_ptr, draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr,
        temp_ptr, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS, grid)


cdef _cumulative_log_p(
        cumulative_log_p_ptr, target_logits_ptr, target_logits_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_logits_row_mapping_ptr, draft_local_max_ptr, draft_local_max_stride,
        draft_local_sumexp_ptr, draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr,
        temp_ptr, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS, grid):
    cdef Cum a
    cdef Py_ssize_t n_map = 0
    cdef int64_t R = _grid_axis(grid, 0, "grid")
    cdef int64_t nb = as_int(vocab_num_blocks, "vocab_num_blocks")
    cdef int64_t padded = as_int(PADDED_VOCAB_NUM_BLOCKS, "PADDED_VOCAB_NUM_BLOCKS")
    cdef int64_t r, rs, start, end, step, li, tok, out_need = 0, ds_need = 0
    cdef Py_ssize_t n_temp
    cdef float* scratch
    cdef int nt
    _pow2(padded, "PADDED_VOCAB_NUM_BLOCKS")
    a.g.has_draft = as_flag(HAS_DRAFT_LOGITS, "HAS_DRAFT_LOGITS", not is_none(draft_logits_ptr))
    if a.g.has_draft:
        required(draft_logits_ptr, "draft_logits_ptr", "with HAS_DRAFT_LOGITS")
    a.g.has_rowmap = a.g.has_draft and not is_none(draft_logits_row_mapping_ptr)
    if a.g.has_rowmap:
        n_map = _numel(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr", M_INDEX)
        a.g.rowmap = index_at_least(draft_logits_row_mapping_ptr,
                                    "draft_logits_row_mapping_ptr", 0)
    a.cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", R + 1 if R else 0,
                          "one more than the requests of the grid")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", R, "one per request of the grid")
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    _real(temp_ptr, "temp_ptr", 0, "", &a.temp)
    _request_checks(a.cu, a.idx, R, n_temp, "idx_mapping_ptr")
    if a.g.has_rowmap:
        for r in range(R):
            rs = iget(a.idx, r)
            if _ldr(a.temp, rs) != 0.0 and rs >= n_map:
                raise ValueError(expected("draft_logits_row_mapping_ptr",
                                          f"an entry for request slot {rs}", f"{n_map} elements"))
    _table(target_logits_ptr, "target_logits_ptr", M_LOGITS, 2, target_logits_stride,
           "target_logits_stride", None, "", &a.g.tgt)
    _lse_tables(&a.g.tl, target_local_max_ptr, "target_local_max_ptr", target_local_max_stride,
                "target_local_max_stride", target_local_sumexp_ptr, "target_local_sumexp_ptr",
                target_local_sumexp_stride, "target_local_sumexp_stride", nb, padded)
    if a.g.has_draft:
        _table(draft_logits_ptr, "draft_logits_ptr", M_LOGITS, 3, draft_logits_stride_0,
               "draft_logits_stride_0", draft_logits_stride_1, "draft_logits_stride_1",
               &a.g.drf)
        _lse_tables(&a.g.dl, draft_local_max_ptr, "draft_local_max_ptr",
                    draft_local_max_stride, "draft_local_max_stride", draft_local_sumexp_ptr,
                    "draft_local_sumexp_ptr", draft_local_sumexp_stride,
                    "draft_local_sumexp_stride", nb, padded)
    for r in range(R):
        rs = iget(a.idx, r)
        if _ldr(a.temp, rs) == 0.0:
            continue
        start = iget(a.cu, r)
        end = iget(a.cu, r + 1)
        if end - 1 > out_need:
            out_need = end - 1
        if end > ds_need:
            ds_need = end
    a.ds = index_at_least(draft_sampled_ptr, "draft_sampled_ptr", ds_need,
                          "the token after each draft row of the non-greedy requests")
    for r in range(R):
        rs = iget(a.idx, r)
        if _ldr(a.temp, rs) == 0.0:
            continue
        start = iget(a.cu, r)
        end = iget(a.cu, r + 1)
        for step in range(end - start - 1):
            li = start + step
            tok = iget(a.ds, li + 1)
            if tok < 0:
                continue
            _token_in(&a.g.tgt, "target_logits_ptr", li, 0, tok, "draft_sampled_ptr", li + 1)
            _need_lse(&a.g.tl, "target_local_max_ptr", "target_local_sumexp_ptr", li)
            if a.g.has_draft:
                _token_in(&a.g.drf, "draft_logits_ptr", _draft_row(&a.g, rs), step, tok,
                          "draft_sampled_ptr", li + 1)
                _need_lse(&a.g.dl, "draft_local_max_ptr", "draft_local_sumexp_ptr", li)
    _table(cumulative_log_p_ptr, "cumulative_log_p_ptr", M_FLOAT32, 1, 1, "", None, "", &a.out)
    _need(&a.out, "cumulative_log_p_ptr", 0, 0, out_need, "one per draft row")
    a.out.s0 = 0
    if R == 0:
        return
    nt = _team(R * 64, R)
    scratch = <float*>malloc(nt * padded * sizeof(float))
    if scratch == NULL:
        raise MemoryError()
    try:
        with nogil:
            if nt == 1:
                for r in range(R):
                    _cum_program(&a, r, scratch)
            else:
                for r in prange(R, num_threads=nt, schedule="static"):
                    _cum_program(&a, r, scratch + threadid() * padded)
    finally:
        free(scratch)


# -- _compute_local_residual_mass_kernel ----------------------------------------------------------

cdef struct Resid:
    LogProbs g
    Tab out, clp
    IBuf ds, eim
    Bonus bonus
    Real temp
    int64_t V, BS, NB, L


cdef inline bint _resid_row(const Resid* a, int64_t li) noexcept nogil:
    """Whether row ``li`` has a residual mass: not its request's first row nor its bonus row
    (0.27-0.32: nor the grid's last row)."""
    cdef int64_t step
    if not a.bonus.by_next and li + 1 >= a.L:
        return False
    step = iget(a.bonus.elp, li)
    return step != 0 and not _is_bonus(&a.bonus, li)


cdef void _resid_program(const Resid* a, int64_t li, int64_t b, float* buf,
                         float* small) noexcept nogil:
    cdef int64_t step, rs, j, nv, tb, db
    cdef float temp, tlse, dlse, p, mb, ms, x
    if not _resid_row(a, li):
        return
    step = iget(a.bonus.elp, li)
    if iget(a.ds, li + 1) < 0:
        return
    rs = iget(a.eim, li)
    temp = _ldr(a.temp, rs)
    if temp == 0.0:
        return
    nv = _valid(a.V, b, a.BS)
    tlse = _global_lse(&a.g.tl, li, small)
    dlse = _global_lse(&a.g.dl, li, small)
    p = expf(_ldf(&a.clp, li - 1))
    tb = _off(&a.g.tgt, li, 0) + b * a.BS
    db = _off(&a.g.drf, _draft_row(&a.g, rs), step) + b * a.BS
    for j in range(a.BS):
        if j < nv:
            mb = expf(_ldf(&a.g.tgt, tb + j) - tlse)
            ms = expf(_ldf(&a.g.drf, db + j) / temp - dlse)
        else:
            mb = expf(-INFINITY - tlse)
            ms = expf(-INFINITY / temp - dlse)
        x = p * mb
        buf[j] = _max_zero(x - ms)
    _stf(&a.out, _off(&a.out, li, 0) + b, _pairwise_sum(buf, a.BS))


def compute_local_residual_mass_kernel(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_local_max_ptr,
        draft_local_max_stride, draft_local_sumexp_ptr, draft_local_sumexp_stride,
        draft_sampled_ptr, expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr,
        vocab_size, num_speculative_steps, vocab_num_blocks, BLOCK_SIZE,
        PADDED_VOCAB_NUM_BLOCKS, *, grid):
    """Program ``(t, b)`` of ``grid``, for a row ``t`` that is not its grid's last, neither a
    request's first nor its bonus row, whose next draft is not a -1 placeholder, of a
    non-greedy request: ``sum(max(p * M_b(x) - M_s(x), 0))`` over vocabulary block ``b``, with
    ``p = exp(cumulative_log_p[t - 1])`` and ``M_b``, ``M_s`` the target and draft
    probabilities."""
    _local_residual_mass(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, None, draft_local_max_ptr,
        draft_local_max_stride, draft_local_sumexp_ptr, draft_local_sumexp_stride,
        draft_sampled_ptr, expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr,
        vocab_size, num_speculative_steps, False, vocab_num_blocks, BLOCK_SIZE,
        PADDED_VOCAB_NUM_BLOCKS, grid)


def compute_local_residual_mass_num_logits_kernel(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_local_max_ptr,
        draft_local_max_stride, draft_local_sumexp_ptr, draft_local_sumexp_stride,
        draft_sampled_ptr, expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr,
        vocab_size, num_logits, vocab_num_blocks, BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS, *,
        grid):
    """vLLM 0.33's ``_compute_local_residual_mass_kernel``: as
    ``compute_local_residual_mass_kernel``, a bonus row being one whose next row starts a
    request or lies at or past ``num_logits`` (the grid's last row is no longer skipped by
    itself)."""
    _local_residual_mass(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, None, draft_local_max_ptr,
        draft_local_max_stride, draft_local_sumexp_ptr, draft_local_sumexp_stride,
        draft_sampled_ptr, expanded_idx_mapping_ptr, expanded_local_pos_ptr, temp_ptr,
        vocab_size, num_logits, True, vocab_num_blocks, BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS,
        grid)


def compute_local_residual_mass_row_mapping_kernel(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_logits_row_mapping_ptr,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, draft_sampled_ptr, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, num_logits, vocab_num_blocks, BLOCK_SIZE,
        PADDED_VOCAB_NUM_BLOCKS, *, grid):
    """vLLM 0.34's ``_compute_local_residual_mass_kernel``: 0.33's
    (``compute_local_residual_mass_num_logits_kernel``), the draft logits of request slot
    ``s`` read from cache row ``max(row_mapping[s], 0)`` when ``draft_logits_row_mapping_ptr``
    is given, from row ``s`` when None."""
    _local_residual_mass(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_logits_row_mapping_ptr,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, draft_sampled_ptr, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, num_logits, True, vocab_num_blocks,
        BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS, grid)


cdef _local_residual_mass(
        local_residual_mass_ptr, local_residual_mass_stride, cumulative_log_p_ptr,
        target_logits_ptr, target_logits_stride, target_local_max_ptr, target_local_max_stride,
        target_local_sumexp_ptr, target_local_sumexp_stride, draft_logits_ptr,
        draft_logits_stride_0, draft_logits_stride_1, draft_logits_row_mapping_ptr,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, draft_sampled_ptr, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, vocab_size, bonus_count, bint by_next,
        vocab_num_blocks, BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS, grid):
    cdef Resid a
    cdef int64_t L = _grid_axis(grid, 0, "grid"), NB = _grid_axis(grid, 1, "grid")
    cdef int64_t nb = as_int(vocab_num_blocks, "vocab_num_blocks")
    cdef int64_t padded = as_int(PADDED_VOCAB_NUM_BLOCKS, "PADDED_VOCAB_NUM_BLOCKS")
    cdef int64_t li, step, rs, cols, P, p
    cdef Py_ssize_t n_temp, n_ds, n_map = 0
    cdef float* scratch
    cdef int nt
    cdef list rows = []
    if L == 0 or NB == 0:
        L = NB = 0
    a.L = L
    a.NB = NB
    a.V = as_int(vocab_size, "vocab_size")
    _bonus_rule(&a.bonus, expanded_local_pos_ptr, bonus_count, by_next, L,
                L if by_next else max(L - 1, 0))
    a.BS = as_int(BLOCK_SIZE, "BLOCK_SIZE")
    _pow2(a.BS, "BLOCK_SIZE")
    _pow2(padded, "PADDED_VOCAB_NUM_BLOCKS")
    a.g.has_draft = True
    required(draft_logits_ptr, "draft_logits_ptr", "(the kernel reads the draft logits)")
    a.g.has_rowmap = not is_none(draft_logits_row_mapping_ptr)
    a.g.rowmap.ptr = NULL
    a.g.rowmap.wide = False
    if a.g.has_rowmap:
        n_map = _numel(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr", M_INDEX)
        a.g.rowmap = index_at_least(draft_logits_row_mapping_ptr,
                                    "draft_logits_row_mapping_ptr", 0)
    a.eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr",
                           L if by_next else max(L - 1, 0),
                           "one per row of the grid" if by_next
                           else "one per row of the grid but the last")
    n_ds = _numel(draft_sampled_ptr, "draft_sampled_ptr", M_INDEX)
    a.ds = index_at_least(draft_sampled_ptr, "draft_sampled_ptr", 0)
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    _real(temp_ptr, "temp_ptr", 0, "", &a.temp)
    _table(target_logits_ptr, "target_logits_ptr", M_LOGITS, 2, target_logits_stride,
           "target_logits_stride", None, "", &a.g.tgt)
    _table(draft_logits_ptr, "draft_logits_ptr", M_LOGITS, 3, draft_logits_stride_0,
           "draft_logits_stride_0", draft_logits_stride_1, "draft_logits_stride_1", &a.g.drf)
    _lse_tables(&a.g.tl, target_local_max_ptr, "target_local_max_ptr", target_local_max_stride,
                "target_local_max_stride", target_local_sumexp_ptr, "target_local_sumexp_ptr",
                target_local_sumexp_stride, "target_local_sumexp_stride", nb, padded)
    _lse_tables(&a.g.dl, draft_local_max_ptr, "draft_local_max_ptr", draft_local_max_stride,
                "draft_local_max_stride", draft_local_sumexp_ptr, "draft_local_sumexp_ptr",
                draft_local_sumexp_stride, "draft_local_sumexp_stride", nb, padded)
    _table(cumulative_log_p_ptr, "cumulative_log_p_ptr", M_FLOAT32, 1, 1, "", None, "", &a.clp)
    a.clp.s0 = 0
    _table(local_residual_mass_ptr, "local_residual_mass_ptr", M_FLOAT32, 2,
           local_residual_mass_stride, "local_residual_mass_stride", None, "", &a.out)
    cols = min(a.V, NB * a.BS) if a.V > 0 else 0
    for li in range(L):
        if not _resid_row(&a, li):
            continue
        step = iget(a.bonus.elp, li)
        if li + 1 >= n_ds:
            raise ValueError(expected("draft_sampled_ptr", f"at least {li + 2} elements (the "
                                      f"token after row {li})", n_ds))
        if iget(a.ds, li + 1) < 0:
            continue
        rs = iget(a.eim, li)
        if rs < 0 or rs >= n_temp:
            raise ValueError(expected("expanded_idx_mapping_ptr",
                                      f"request slots in [0, {n_temp}) (temp_ptr's length)",
                                      f"[{li}] = {rs}"))
        if _ldr(a.temp, rs) == 0.0:
            continue
        if not _holds(&a.g.tgt, li, 0, cols):
            _need(&a.g.tgt, "target_logits_ptr", li, 0, cols, f"row {li}'s {cols} columns")
        _need_row_mapping(a.g.has_rowmap, n_map, rs)
        if not _holds(&a.g.drf, _draft_row(&a.g, rs), step, cols):
            _need(&a.g.drf, "draft_logits_ptr", _draft_row(&a.g, rs), step, cols,
                  f"request slot {rs}, step {step}: {cols} columns")
        _need_lse(&a.g.tl, "target_local_max_ptr", "target_local_sumexp_ptr", li)
        _need_lse(&a.g.dl, "draft_local_max_ptr", "draft_local_sumexp_ptr", li)
        if li == 0:     # the kernel would read cumulative_log_p[-1]
            raise ValueError(expected("expanded_local_pos_ptr", "local position 0 at row 0 (a "
                                      "draft row reads the row before it of "
                                      "cumulative_log_p_ptr)", f"[0] = {step}"))
        if not _holds(&a.clp, 0, 0, li):
            _need(&a.clp, "cumulative_log_p_ptr", 0, 0, li, f"the value of row {li - 1}")
        if not _holds(&a.out, li, 0, NB):
            _need(&a.out, "local_residual_mass_ptr", li, 0, NB, f"row {li}'s {NB} blocks")
        rows.append(li)
    if len(rows) > 1:
        _no_overlap_rows(&a.out, "local_residual_mass_ptr", "local_residual_mass_stride", L, NB)
    P = L * NB
    if P == 0:
        return
    nt = _team(P * a.BS, P)
    scratch = <float*>malloc(nt * (a.BS + padded) * sizeof(float))
    if scratch == NULL:
        raise MemoryError()
    try:
        with nogil:
            if nt == 1:
                for p in range(P):
                    _resid_program(&a, p // NB, p % NB, scratch, scratch + a.BS)
            else:
                for p in prange(P, num_threads=nt, schedule="static"):
                    _resid_program(&a, p // NB, p % NB,
                                   scratch + threadid() * (a.BS + padded),
                                   scratch + threadid() * (a.BS + padded) + a.BS)
    finally:
        free(scratch)


# -- _rejection_kernel ----------------------------------------------------------------------------

cdef inline float _tl_rand32(int64_t seed, int64_t offset, bint wide_offset) noexcept nogil:
    """vLLM's ``tl_rand32(seed, offset, includes_zero=False)``: Triton's ``tl.rand`` -- the
    first word of Philox-4x32-10 with counter (offset lo, offset hi (0 for an int32 offset), 0,
    0) and key (seed lo, seed hi) -- as ``uint_to_uniform_float``, floored at 4.6566127342e-10."""
    cdef uint32_t out[4]
    cdef uint32_t hi = <uint32_t>((<uint64_t>offset) >> 32) if wide_offset else 0
    cdef int x
    cdef float u
    philox4x32_10(<uint32_t>offset, hi, 0, 0,
                  <uint32_t>seed, <uint32_t>((<uint64_t>seed) >> 32),
                  out)
    x = <int>out[0]
    if x < 0:
        x = ~x
    u = <float>x * <float>4.6566127342e-10
    if u < <float>4.6566127342e-10:
        u = <float>4.6566127342e-10
    return u


cdef struct Lazy:
    # The one-pass verification's statistics (``rejection_sample_fused``): a row's, all its
    # blocks, computed when the rejection walk first reads them -- the rows past a request's
    # first rejection are never read
    const Stats* st
    int team            # > 1: the row's blocks split across a team (a walk on one thread)
    float* scratch      # a BLOCK_SIZE buffer per thread
    # With top-k/top-p, a row is first processed as vLLM's apply_sampling_params leaves it --
    # fp32, divided by its temperature (unless 0 or 1), masked to its request's top-k then
    # top-p (kp/pp NULL: that mask is not applied to the batch) -- into ``proc``, which the
    # programs read in its place
    float* proc         # [rows, width] fp32; NULL: no processing
    Py_ssize_t width    # the target logits' columns: every one is processed, as vLLM does
    Tab raw             # the raw target logits (by_temp: APPLY_TEMPERATURE)
    IBuf eim
    Real temp
    const char* kp
    const char* pp
    bint kwide, pdbl
    unsigned char* done # per row: 1 processed, 2 with its statistics, AHEAD accepted unread
    unsigned char* drafted  # per row: its draft blocks computed (Stats.drafted; has_draft)
    void** arenas       # the mask's scratch: one per walking thread (a team shares [0])
    float* cmax         # each chunk's maximum, from a row's copy (nch per walking thread)
    int* cnan           # each chunk's NaN flag, from a row's copy (nch per walking thread)
    int64_t* single     # per row: the one token its mask kept by the maximum alone, else -1
    bint peek           # float32 rows: a row after one masked to its top token peeked (_peeks)
    bint stream         # rows too many to lie in cache: such a row's mask streamed to memory
    # a peeked row masked to its top token alone left unwritten but for that token and its
    # draft's (``_lazy_row``, ``_run_rows``; a request's last row: that token alone): where every
    # reader of such a row reads those alone
    bint lean
    IBuf ds             # the drafts (``draft_sampled_ptr``): row li checks ds[li + 1]
    int64_t nds         # their count, at most the rows


cdef float _load_scaled(const Tab* raw, int64_t li, Py_ssize_t c0, Py_ssize_t n,
                        float temp, float* row, int* nan) noexcept nogil:
    """Columns ``[c0, c0 + n)`` of raw row ``li`` into ``row`` as the temperature kernel leaves
    them; their maximum (NaN set aside; ``nan``: whether one occurs), read while they are in
    cache."""
    if raw.code == DT_FLOAT32 and _scaled(raw, temp):
        fd_div_into(row + c0, (<const float*>raw.p) + _off(raw, li, 0) + c0, n, temp)
    else:
        _ldrow(raw, _off(raw, li, 0) + c0, n, row + c0)
        if _scaled(raw, temp):
            fd_div_by(row + c0, n, temp)
    return fd_max_nan(row + c0, n, nan)


def _top2_of(x):
    """``(maximum, has NaN, first index of the maximum, largest other value)`` of a float32
    tensor, by ``fd_top2_nan`` and ``fd_first_equal`` as ``_peek_chunk`` reads a chunk (for
    tests; the index ``len(x)`` where there is none)."""
    cdef Py_ssize_t shp[3]
    cdef const float* p = <const float*>check_tensor(x, "x", M_FLOAT32, 1, NULL, shp)
    cdef int nan = 0
    cdef float m, second
    m = fd_top2_nan(p, shp[0], &nan, &second)
    return m, bool(nan), fd_first_equal(p, shp[0], m), second


cdef struct Load:
    # one row's load for ``load_mask_row_f32_team`` (``_load_chunk``, ``_peek_chunk``)
    const Tab* raw
    int64_t li
    float temp


# bytes of target rows past which a row peeked has its mask streamed to memory (Lazy.stream),
# for the tests that cross it
_STREAM_BYTES = STREAM_BYTES
# and up to which they are peeked whatever the walk (past it, only where it leaves them lean)
_PEEK_BYTES = PEEK_BYTES

# a run's row holds its Load (_run_at)
if sizeof(Load) > FD_RUN_HOLD:
    raise ImportError(f"kernels_cpu._mrv2_spec: a Load takes {sizeof(Load)} bytes, "
                      f"fd_run_row holds {FD_RUN_HOLD}")


cdef float _load_chunk(void* ctx, Py_ssize_t c0, Py_ssize_t length, float* row,
                       int* nan) noexcept nogil:
    cdef Load* a = <Load*>ctx
    return _load_scaled(a.raw, a.li, c0, length, a.temp, row, nan)


cdef float _peek_chunk(void* ctx, Py_ssize_t c0, Py_ssize_t length, int* nan,
                       row_top2* t2) noexcept nogil:
    """``_load_chunk``'s maximum without the copy, for a float32 row at a finite positive
    temperature (``_peeks``): the division keeps the values' order -- a correctly rounded
    quotient is monotone in the dividend -- and their NaN, so the largest loaded value is the
    largest raw value divided, the same float; with ``t2``, the chunk's top two likewise (the
    first raw maximum, the largest other raw value divided)."""
    cdef Load* a = <Load*>ctx
    cdef const float* x = (<const float*>a.raw.p) + _off(a.raw, a.li, 0) + c0
    cdef float m, second
    cdef Py_ssize_t j
    if t2 == NULL:
        m = fd_max_nan(x, length, nan)
    else:
        m = fd_top2_nan(x, length, nan, &second)
        j = fd_first_equal(x, length, m)
        t2.first = c0 + j if j < length else -1
        t2.second = second / a.temp if _scaled(a.raw, a.temp) else second
    if _scaled(a.raw, a.temp):
        m = m / a.temp
    return m


cdef inline bint _peekable(const Lazy* z, int64_t li, float temp) noexcept nogil:
    """``_peeks`` but for the row before it masked to its top token (a run knows it was)."""
    if not z.peek or li == 0 or iget(z.eim, li - 1) != iget(z.eim, li):
        return False
    return not _scaled(&z.raw, temp) or 0.0 < temp < INFINITY


cdef inline bint _peeks(const Lazy* z, int64_t li, float temp) noexcept nogil:
    """Whether row ``li`` is peeked before it is loaded (``load_mask_row_f32_team``): the row
    before it, of the same request, was masked to its top token alone -- a confident model's
    rows come in runs, and such a row is then written once, not copied and masked -- and
    ``_peek_chunk`` holds for it. Only where the batch's target rows are float32 (read raw by
    the peek) and either few (``PEEK_BYTES``, the rows a step's matmul has just written still
    in cache: B1 on the 2-core box 10% faster peeked) or far more than a cache holds
    (``STREAM_BYTES``), where the mask of a row peeked is streamed to memory (``z.stream``:
    non-temporal stores, no read of the lines it writes) -- B64 k4 V128k, 164 MB, 9% faster at
    one and two threads on the 2-core box. Between them (B16's 41 MB) only where the walk
    leaves such a row lean (``z.lean``), read once by the peek and written at two tokens --
    B16 k4 V128k every draft accepted 4.4-4.7 -> 2.6 ms at one thread, 2.2 -> 1.4 ms at two
    on the 2-core box, every first draft rejected unchanged; a row filled there costs as
    much peeked then filled as copied then filled, and less than peeked then streamed (8% at
    two threads); B64 with the mask stored through the cache had been 5% slower peeked."""
    return li > 0 and z.single[li - 1] >= 0 and _peekable(z, li, temp)


cdef inline void _row_args(Lazy* z, int64_t li, Load* a, int64_t* k, double* p) noexcept nogil:
    """Row ``li``'s load (``a``: the raw row and its slot's temperature) and its slot's top-k
    and top-p (``width`` and 1 where the batch has none), as every processing of it takes them."""
    cdef int64_t rs = iget(z.eim, li)
    a.raw = &z.raw
    a.li = li
    a.temp = _ldr(z.temp, rs)
    k[0] = _k_at(z.kp, z.kwide, rs) if z.kp != NULL else z.width
    p[0] = _p_at(z.pp, z.pdbl, rs) if z.pp != NULL else 1.0


cdef void _lazy_row(Lazy* z, int64_t li, row_then then=NULL, void* tctx=NULL,
                    Py_ssize_t nthen=0, int* then_ran=NULL) noexcept nogil:
    """Process row ``li`` into ``proc`` (once): loaded and masked by ``load_mask_row_f32_team``
    -- the copy finds the row's maximum and its chunks', which the mask then need not look for;
    on a team the copy and the mask's passes are one parallel region, and ``then``'s units
    (``load_mask_row_f32_team``'s) follow in it where they can."""
    cdef Load a
    cdef row_peeker peek = NULL
    cdef int64_t k
    cdef double p
    cdef Py_ssize_t nch = (z.width + 8191) // 8192
    cdef Py_ssize_t own = 0 if z.team > 1 else _thread_id() * nch
    if z.proc == NULL or z.done[li]:
        return
    _row_args(z, li, &a, &k, &p)
    cdef bint lean = False
    if _peeks(z, li, a.temp):
        peek = _peek_chunk
        lean = z.lean and a.temp > 0.0
    z.single[li] = load_mask_row_f32_team(
        z.proc + li * z.width, z.width, k, p, z.arenas[_thread_id() if z.team <= 1 else 0],
        z.team, _load_chunk, peek, &a, z.cmax + own, z.cnan + own, z.stream, then, tctx, nthen,
        then_ran, lean)
    if lean:
        _lean_draft(z, li)
    z.done[li] = 1


cdef inline void _lean_draft(Lazy* z, int64_t li) noexcept nogil:
    """Row ``li`` left lean (``load_mask_row_f32_team``'s ``lean``): -inf at the token of the
    draft the walk tests there, unless that is the token it kept. The row's readers: its
    statistics from its token alone (``_stats_single``), the walk's test of its draft (that
    token's value, -inf unless it is the kept one), the draw from its one lane
    (``_res_row_sparse``); a request's last row's, the draw alone -- the walk tests a draft at
    a row only where the next row is of the same request, whatever the local positions say."""
    cdef int64_t ds
    if z.single[li] < 0 or li + 1 >= z.nds or iget(z.eim, li + 1) != iget(z.eim, li):
        return
    ds = iget(z.ds, li + 1)
    if 0 <= ds < z.width and ds != z.single[li]:
        z.proc[li * z.width + ds] = -INFINITY


cdef struct Run:
    # a request's rows as ``_run_rows`` describes them to ``run_rows_f32_team`` (and
    # ``_run_probs`` to ``run_rows_then_f32_team``: its request and the walk's buffer too)
    const Rej* rj
    Lazy* z
    int64_t start, nd, r
    int64_t first       # _run_probs: the request's first row (its drafts' steps count from it)
    float* buf


cdef void _run_at(void* ctx, Py_ssize_t i, fd_run_row* out) noexcept nogil:
    """Row ``i`` of a request's run (``Run``), as ``_lazy_row`` would process it: its slot's
    top-k, top-p and temperature, peeked where ``_peekable`` allows (the run reaches a row
    only after the row before it kept its top token), and the token it must keep for the
    walk to reach the next: its draft (``ds`` of the next row; none past the last draft)."""
    cdef const Run* u = <const Run*>ctx
    cdef Lazy* z = u.z
    cdef int64_t li = u.start + i, ds = -1
    cdef Load* a = <Load*>fd_run_hold(out)
    _row_args(z, li, a, &out.k, &out.p)
    out.ctx = a
    out.row = z.proc + li * z.width
    out.peek = i > 0 and _peekable(z, li, a.temp)
    if i < u.nd:
        ds = iget(u.rj.ds, li + 1)
    out.want = ds if ds >= 0 else -1


cdef void _run_rows(const Rej* rj, Lazy* z, int64_t r) noexcept nogil:
    """Request ``r``'s rows processed up front, in one parallel region of the team that splits
    each (``run_rows_f32_team``), as far as the walk will reach them: the first row, and each
    next one while the row before it kept one token alone and that token is its one-hot
    draft -- whose test then accepts (the target's probability 1), so the walk reads the
    next row. A confident model's accepted step is such a run: its rows had each taken a
    region, whose start on a wide team costs several barriers. Only where the walk tests
    one-hot drafts row by row (``_stats_or_reject``'s case: sampled, no block verification,
    synthetic rates or FLy) and the first draft is real; the rows the run leaves are
    processed by the walk as it reaches them."""
    cdef Run u
    cdef int64_t start = iget(rj.cu, r), i, n
    cdef int64_t nd = iget(rj.cu, r + 1) - start - 1
    if (z.proc == NULL or z.team <= 1 or nd < 1 or z.done[start] or rj.block or rj.synthetic
            or rj.fly != 0 or rj.g.has_draft or not (_ldr(rj.temp, iget(rj.idx, r)) > 0.0)
            or iget(rj.ds, start + 1) < 0):
        return
    u.rj = rj
    u.z = z
    u.start = start
    u.nd = nd
    n = run_rows_f32_team(z.width, nd + 1, z.team, z.arenas[0], _load_chunk, _peek_chunk,
                          _run_at, &u, z.cmax, z.cnan, z.single + start, z.lean)
    for i in range(n):
        if z.lean and i > 0:                # a peeked row (the first is loaded whole)
            _lean_draft(z, start + i)
        z.done[start + i] = 1


cdef void _run_then(void* ctx, Py_ssize_t i, Py_ssize_t b) noexcept nogil:
    """Block ``b`` of the statistics of row ``i`` of a run (``Run``: its ``z`` and ``start``
    alone are read), on the team that masked it -- ``_run_probs``'s rows, and ``_lazy_stats``'s
    one row (a run of it)."""
    cdef const Run* u = <const Run*>ctx
    _stats_program(u.z.st, u.start + i, b, u.z.scratch + _thread_id() * u.z.st.BS)


cdef int _run_test(void* ctx, Py_ssize_t i) noexcept nogil:
    """Whether the walk reads the row after row ``i`` of ``_run_probs``'s run: ``_rej_program``'s
    test of the draft checked there, with draft probabilities (no block verification,
    synthetic rates or FLy; not greedy), from the statistics just computed -- the same
    uniform, log-probabilities and comparison, so the same answer; a -1 placeholder ends the
    walk's verifying."""
    cdef const Run* u = <const Run*>ctx
    cdef const Rej* rj = u.rj
    cdef int64_t li = u.start + i, ds = iget(rj.ds, li + 1), rs = iget(rj.idx, u.r)
    cdef float uu, tlp, dlp, tlse, dlse
    if ds < 0:
        return 0
    uu = _tl_rand32(iget(rj.seed, rs), iget(rj.pos, li), rj.pos.wide)
    _logprobs(&rj.g, ds, True, li, rs, li - u.first, _ldr(rj.temp, rs), u.buf, &tlp, &dlp,
              &tlse, &dlse)
    return tlp > logf(uu) + dlp


cdef void _run_probs(const Rej* rj, Lazy* z, int64_t r, int64_t ahead,
                     float* buf) noexcept nogil:
    """``_run_rows`` for drafts with probabilities: request ``r``'s rows processed up front in
    one parallel region of the team that splits each (``run_rows_then_f32_team``) as far as
    the walk reaches them -- each row masked, then its statistics (the programs' blocks as the
    team's units), then the walk's test of its draft (``_run_test``) deciding whether the next
    row is read; the bonus row masked. Each row had taken a region of its own (its mask with
    its statistics), a wide team's start each, the walk's test between them. Only where the
    walk tests drafts with probabilities row by row (no block verification, synthetic rates or
    FLy), the request samples (temperature > 0), its first draft is real and the batch has no
    top-k (a top-k row takes another path than the run's); the rows the run leaves are
    processed by the walk as it reaches them, and it finds the others' statistics done
    (``done`` 2). The run starts after the request's ``ahead`` rows ``_accept_ahead``
    accepted."""
    cdef Run u
    cdef int64_t start = iget(rj.cu, r) + ahead, i, n
    cdef int64_t nd = iget(rj.cu, r + 1) - start - 1
    if (z.proc == NULL or z.team <= 1 or nd < 1 or z.done[start] or rj.block or rj.synthetic
            or rj.fly != 0 or not rj.g.has_draft or z.kp != NULL
            or not (_ldr(rj.temp, iget(rj.idx, r)) > 0.0) or iget(rj.ds, start + 1) < 0):
        return
    u.rj = rj
    u.z = z
    u.start = start
    u.nd = nd
    u.r = r
    u.first = iget(rj.cu, r)
    u.buf = buf
    n = run_rows_then_f32_team(z.width, nd + 1, z.team, z.arenas[0], _load_chunk, _run_at, &u,
                               _run_then, z.st.NB, _run_test, z.cmax, z.cnan, z.single + start)
    for i in range(n):
        z.done[start + i] = 2 if i < nd else 1


cdef struct Ahead:
    # a target chunk's part of ``_accept_ahead``'s pass: its maximum (NaN set aside), whether it
    # holds a NaN, and (where computed) its masses against that maximum -- all of them, and
    # those ranked above the draft; ``w``: ``exp(m - row max)`` (0 for a chunk of -inf alone),
    # its weight against the row (``_ahead_mid``)
    float m
    int nan
    double z, above, w


cdef inline Py_ssize_t _ahead_len(const Lazy* z, Py_ssize_t c) noexcept nogil:
    """The length of target chunk ``c``: 8192 values, the last fewer."""
    cdef Py_ssize_t rest = z.width - c * 8192
    return rest if rest < 8192 else 8192


cdef inline const float* _ahead_chunk(const Lazy* z, int64_t li, Py_ssize_t c,
                                      Py_ssize_t* n) noexcept nogil:
    """Raw target chunk ``c`` of row ``li``, its length (``_ahead_len``) in ``n``."""
    n[0] = _ahead_len(z, c)
    return (<const float*>z.raw.p) + _off(&z.raw, li, 0) + c * 8192


cdef void _ahead_first(const Stats* st, const Lazy* z, Load* ld, Py_ssize_t c,
                       Ahead* parts, float* buf) noexcept nogil:
    """Unit ``c`` of ``_accept_ahead``'s first loop over row ``ld.li``: below ``st.NB``, the
    draft's block ``c`` (``_stats_draft_block``, where not yet computed); past them, the
    maximum of the target's raw chunk ``c - NB`` as the row's processing would load it
    (``_peek_chunk``: its load, ``ld``, read without the copy)."""
    cdef Ahead* q
    if c < st.NB:
        if not z.drafted[ld.li]:
            _stats_draft_block(st, ld.li, c, buf)
        return
    q = parts + (c - st.NB)
    q.m = _peek_chunk(ld, (c - st.NB) * 8192, _ahead_len(z, c - st.NB), &q.nan, NULL)
    q.z = 0.0
    q.above = 0.0


cdef void _ahead_masses(const Lazy* z, int64_t li, Py_ssize_t c, float d, float xt,
                        int64_t tok, Ahead* parts) noexcept nogil:
    """The masses of the target's raw chunk ``c`` of row ``li`` (read ``/ d``) against its
    maximum (``_ahead_first``'s, finite): all of them, and those ranked above the draft ``tok``
    of value ``xt`` -- larger, or equal at a lower index (top-p's ranking: ties by index,
    lowest first)."""
    cdef Ahead* q = parts + c
    cdef Py_ssize_t n, cut
    cdef const float* x = _ahead_chunk(z, li, c, &n)
    cut = tok - c * 8192
    cut = 0 if cut < 0 else (n if cut > n else cut)
    if cut > 0:                         # before the draft: a tie ranks above it (y >= xt)
        fd_masses_above(x, cut, d, q.m, nextafterf(xt, -INFINITY), &q.z, &q.above)
    if cut < n:                         # the draft and after it: strictly larger alone
        fd_masses_above(x + cut, n - cut, d, q.m, xt, &q.z, &q.above)


cdef bint _ahead_on = True
cdef int _ahead_batching = AHEAD_REST


def _set_accept_ahead(bint on):
    """Whether the one pass accepts drafts ahead (``_accept_ahead``; on by default), for tests
    and measurements of the path it replaces; returns the previous setting. Not thread-safe:
    set it while no call runs."""
    global _ahead_on
    cdef bint was = _ahead_on
    _ahead_on = on
    return was


def _set_ahead_batching(int mode):
    """How ``_accept_ahead`` batches a request's rows into its two parallel loops, for tests and
    measurements: 0 row by row, 1 the first row alone then the rest together (the default), 2
    all together; returns the previous mode. Not thread-safe: set it while no call runs."""
    global _ahead_batching
    cdef int was = _ahead_batching
    if not AHEAD_ROWS <= mode <= AHEAD_ALL:
        raise ValueError(f"_set_ahead_batching: mode must be 0, 1 or 2, got {mode}")
    _ahead_batching = mode
    return was


cdef struct AheadRow:
    # a draft ``_accept_ahead`` may accept: its row's load (the row's slot's temperature), the
    # draft, the divisor the row's processing reads it by, the draft's value so read, the
    # slot's top-p; then (``_ahead_batch``) its maximum, the test's right side, its second-loop
    # units ``[w0, w1)`` and its masses' bounds
    Load ld
    int64_t ds
    float d, xt, m, rhs
    double p, zhi, ahi
    Py_ssize_t w0, w1


cdef struct AheadPass:
    # one batch of ``_accept_ahead``'s rows, as its parallel loops read it
    const Stats* st
    const Lazy* z
    AheadRow* rows
    Ahead* parts        # nch per row
    Py_ssize_t* weigh   # the second loop's units: row * nch + chunk
    Py_ssize_t nch, per # per = NB + nch: a row's units in the first loop


cdef struct AheadCall:
    # one batch of ``_ahead_batch``: its loops' pass, the request, the candidates ``i0 .. i0 +
    # n`` (``a.rows`` from ``i0``), the walker's buffer; ``nq``: the rows the second loop weighs
    AheadPass a
    const Rej* rj
    Lazy* z
    int64_t r, i0, n, nq
    float* buf


cdef void _ahead_u1(void* ctx, Py_ssize_t u) noexcept nogil:
    """Unit ``u`` of a batch's first loop: unit ``u % per`` of its row ``u // per``."""
    cdef const AheadPass* a = &(<AheadCall*>ctx).a
    cdef Py_ssize_t q = u // a.per
    _ahead_first(a.st, a.z, &a.rows[q].ld, u - q * a.per, a.parts + q * a.nch,
                 a.z.scratch + _thread_id() * a.st.BS)


cdef void _ahead_u2(void* ctx, Py_ssize_t j) noexcept nogil:
    """Unit ``j`` of a batch's second loop: the masses of the chunk ``weigh[j]`` names."""
    cdef const AheadPass* a = &(<AheadCall*>ctx).a
    cdef Py_ssize_t q = a.weigh[j] // a.nch
    cdef const AheadRow* w = &a.rows[q]
    _ahead_masses(a.z, w.ld.li, a.weigh[j] - q * a.nch, w.d, w.xt, w.ds, a.parts + q * a.nch)


cdef Py_ssize_t _ahead_mid(void* ctx) noexcept nogil:
    """Between ``_ahead_batch``'s loops (one thread): each row's maximum, the test's right side,
    and the chunks that can weigh -- the second loop's units, their count returned; the others
    at their bound. Stops at a row whose maximum is not finite, or whose verdict the chunk
    maxima already deny (``k.nq``: the rows before it)."""
    cdef AheadCall* k = <AheadCall*>ctx
    cdef AheadPass* a = &k.a
    cdef const Rej* rj = k.rj
    cdef AheadRow* w
    cdef Ahead* parts
    cdef int64_t rs = iget(rj.idx, k.r), q, li
    cdef Py_ssize_t c, nw = 0
    cdef float temp = _ldr(rj.temp, rs), m, uu, dlp, dlse
    cdef double bound, z0, zp
    cdef int nan
    for q in range(k.n):
        k.z.drafted[a.rows[q].ld.li] = 1
    k.nq = 0
    while k.nq < k.n:
        w = &a.rows[k.nq]
        li = w.ld.li
        parts = a.parts + k.nq * a.nch
        m = -INFINITY
        nan = 0
        for c in range(a.nch):
            nan |= parts[c].nan
            if parts[c].m > m:
                m = parts[c].m
        if nan or not (-INFINITY < m < INFINITY) or not (w.xt <= m):
            break
        w.m = m
        uu = _tl_rand32(iget(rj.seed, rs), iget(rj.pos, li), rj.pos.wide)
        dlp = _draft_logprob(&rj.g, w.ds, True, li, rs, k.i0 + k.nq, temp, k.buf, &dlse)
        w.rhs = logf(uu) + dlp
        # every chunk holds its maximum: Z >= z0, and the kept mass Zp >= max(1, p Z) (top-p
        # keeps the row's maximum, and at least p of the mass): a row whose draft the test
        # rejects even at that bound has no sure acceptance -- its masses are not taken
        z0 = 0.0
        for c in range(a.nch):
            parts[c].w = exp(<double>parts[c].m - <double>m) if parts[c].m > -INFINITY else 0.0
            z0 += parts[c].w
        zp = w.p * z0 * (1.0 - 1e-3)
        if not (<double>w.xt - <double>m - log(zp if zp > 1.0 else 1.0) > <double>w.rhs):
            break
        w.zhi = 0.0
        w.ahi = 0.0
        w.w0 = nw
        for c in range(a.nch):
            if not (parts[c].m > -INFINITY):
                continue                        # all -inf: no mass
            bound = <double>_ahead_len(k.z, c) * parts[c].w * (1.0 + 1e-6)
            if bound > 1e-6:
                a.weigh[nw] = k.nq * a.nch + c
                nw += 1
            else:
                w.zhi += bound
                if parts[c].m >= w.xt:
                    w.ahi += bound
        w.w1 = nw
        k.nq += 1
    return nw


cdef int64_t _ahead_batch(const Rej* rj, Lazy* z, int64_t r, const AheadPass* whole, int64_t i0,
                          int64_t n, float* buf) noexcept nogil:
    """Candidates ``i0 .. i0 + n`` of ``_accept_ahead``'s (``whole.rows``; request ``r``'s rows
    from its first) in two parallel loops, one parallel region on a team (``fd_two_loops``):
    the first takes every row's draft blocks and chunk maxima (a draft block and a chunk a unit
    pair, interleaved: the static schedule deals units round-robin), ``_ahead_mid`` between
    them finds the chunks that weigh, the second takes their masses; then the verdicts in
    order. Returns how many of the rows, from the first, are surely accepted."""
    cdef AheadCall k
    cdef AheadRow* w
    cdef Ahead* parts
    cdef int64_t q
    cdef Py_ssize_t units, u, c, j, nw
    cdef double zlo, lz, tlse_hi, tlp_lo
    k.a = whole[0]
    k.a.rows = whole.rows + i0
    k.rj = rj
    k.z = z
    k.r = r
    k.i0 = i0
    k.n = n
    k.buf = buf
    units = n * k.a.per
    if z.team > 1:
        fd_two_loops(z.team, units, _ahead_u1, _ahead_mid, _ahead_u2, &k)
    else:
        for u in range(units):
            _ahead_u1(&k, u)
        nw = _ahead_mid(&k)
        for j in range(nw):
            _ahead_u2(&k, j)
    for q in range(k.nq):
        w = &k.a.rows[q]
        parts = k.a.parts + q * k.a.nch
        zlo = 0.0
        for j in range(w.w0, w.w1):
            c = k.a.weigh[j] - q * k.a.nch
            zlo += parts[c].z * parts[c].w
            w.ahi += parts[c].above * parts[c].w
        w.zhi += zlo
        if w.p < 1.0:
            if not (w.ahi < w.p * zlo * (1.0 - 1e-4)):
                return q                        # the draft may lie outside the top-p set
            w.zhi = min(w.zhi, w.p * w.zhi + exp(<double>w.xt - <double>w.m))
        lz = log(w.zhi * (1.0 + 1e-4))
        tlse_hi = <double>w.m + lz + 1e-4 + 1e-5 * (fabs(<double>w.m) + fabs(lz))
        tlp_lo = <double>w.xt - tlse_hi - 1e-5 * (fabs(<double>w.xt) + fabs(tlse_hi))
        if not (tlp_lo > w.rhs):
            return q
    return k.nq


cdef int64_t _accept_ahead(const Rej* rj, Lazy* z, int64_t r, float* buf) noexcept nogil:
    """Request ``r``'s drafts accepted without processing their rows, from its first on, while
    the test's verdict is sure without them (drafts with probabilities); returns how many.

    With top-p, the test of draft ``t`` at a row reads the processed row's log-sum-exp ``tlse``
    -- ``max + log Zp``, ``Zp`` the mass of the tokens top-p keeps -- and accepts when ``x_t -
    tlse > log(u) + dlp``. Processing a row (its copy, the bucket pass, the mask) and its
    statistics cost several passes over it; bounds from the raw row do instead: with ``Z`` the
    row's whole mass, ``A`` the mass ranked above ``t`` and ``e_t`` its own, ``t`` is kept when
    ``A < p Z``, and then ``Zp <= Z`` and ``Zp < p Z + e_t`` (the last token kept weighs at
    most ``e_t``). So where ``A < p Z`` and ``x_t - (max + log min(Z, p Z + e_t)) > log(u) +
    dlp`` by a margin (1e-4 relative on the masses; 1e-4 plus 1e-5 of the magnitudes on the
    logs -- the float rounding of the kernel's block sums, ``logf`` and subtractions lies far
    below it), the test accepts whatever ``Zp`` exactly is. ``Z`` and ``A`` are bounded chunk
    by chunk (8192 values): a first parallel loop finds each chunk's maximum; a second adds the
    exponentials of the chunks that can weigh (their bound, ``n exp(max_c - max)``, above 1e-6
    of the row maximum's own mass) and the others count at that bound -- a confident model's
    row, its maximum far above the rest, takes one chunk's exponentials, not the row's. The
    draft side (``dlp``, its blocks' statistics) is the test's own, computed as the statistics
    launch computes it, in the first loop beside the chunk maxima, and kept for the walk
    (``drafted``) where the verdict is not sure. Such a row is marked ``AHEAD``: neither
    processed nor its target statistics computed -- nothing reads them: the walk goes on past
    it, and the resampling reads a rejected row's or the bonus row's alone.

    Only where that bound is the test's: drafts with probabilities, sampled (0 < temperature <
    inf), no block verification, synthetic rates or FLy; float32 target rows, as wide as the
    statistics read them (no padded vocabulary), a row with top-p and no top-k (``k >= V``),
    a real draft, no NaN and a finite maximum; the first row that fails any of it, or whose
    verdict is not sure, ends the run (the walk tests it as before). A row whose verdict was
    not sure costs the first loop's pass over its raw values more than before (its draft blocks
    are kept); the second loop's too unless the chunk maxima already deny the bound -- every
    chunk holds its maximum, so ``Z`` is at least their masses and the kept mass at least
    ``max(1, p Z)``: a draft top-p masks, or one far below the drafter's confidence in it, is
    given up there.

    The rows are taken in batches (``_ahead_batch``), a batch's rows sharing its two parallel
    loops: the first row alone, then the rest together. On a wide team a region's start costs
    more than a row's share of its work, and the rows of an accepted step had taken two
    regions each; a row whose verdict is not sure leaves its batch's later rows computed for
    nothing, so the first row -- a rejected first draft, the costly step -- goes alone
    (``_set_ahead_batching``: row by row, or every row together, for measurements)."""
    cdef const Stats* st = z.st
    cdef int64_t start = iget(rj.cu, r), nd = iget(rj.cu, r + 1) - start - 1
    cdef int64_t li, ds, k, n = 0, i0 = 0, size, got, acc = 0, q
    cdef Py_ssize_t nch = (z.width + 8191) // 8192
    cdef float temp, d, xt
    cdef double p
    cdef AheadRow* w
    cdef AheadPass a
    if (not _ahead_on or z.proc == NULL or z.drafted == NULL or rj.block or rj.synthetic
            or rj.fly != 0 or z.raw.code != DT_FLOAT32 or z.width != st.V or nd < 1):
        return 0
    temp = _ldr(rj.temp, iget(rj.idx, r))
    if not (0.0 < temp < INFINITY):
        return 0
    a.rows = <AheadRow*>malloc(nd * sizeof(AheadRow))
    a.parts = <Ahead*>calloc(nd * nch, sizeof(Ahead))
    a.weigh = <Py_ssize_t*>malloc(nd * nch * sizeof(Py_ssize_t))
    if a.rows == NULL or a.parts == NULL or a.weigh == NULL:
        free(a.rows)
        free(a.parts)
        free(a.weigh)
        return 0
    a.st = st
    a.z = z
    a.nch = nch
    a.per = st.NB + nch
    # the candidates: the rows, from the first, whose draft the bound can decide
    while n < nd:
        li = start + n
        ds = iget(rj.ds, li + 1)
        if ds < 0 or ds >= z.width or z.done[li] or _is_bonus(&st.bonus, li):
            break
        # the target side as the row's processing loads it (its slot's temperature, which
        # _peek_chunk's maxima need finite and positive where it divides); the draft side and
        # the uniform as the test takes them (the request's)
        w = &a.rows[n]
        _row_args(z, li, &w.ld, &k, &p)
        if k < z.width or not (p > 0.0):
            break
        d = w.ld.temp if _scaled(&z.raw, w.ld.temp) else <float>1.0
        if not (0.0 < d < INFINITY):
            break
        xt = (<const float*>z.raw.p)[_off(&z.raw, li, 0) + ds] / d
        if not (-INFINITY < xt < INFINITY):
            break
        w.ds = ds
        w.d = d
        w.xt = xt
        w.p = p
        n += 1
    # in batches: a batch's rows share its two parallel regions -- on a wide team each region's
    # start costs more than a row's share of the work -- where a row whose verdict is not sure
    # leaves the batch's later rows computed for nothing (their draft blocks are kept for the
    # walk): the first row alone (a rejected first draft costs what it did row by row), then
    # the others together
    while i0 < n:
        size = 1 if _ahead_batching == AHEAD_ROWS or (i0 == 0 and _ahead_batching == AHEAD_REST) \
            else n - i0
        got = _ahead_batch(rj, z, r, &a, i0, size, buf)
        for q in range(got):
            z.done[start + i0 + q] = AHEAD
        acc += got
        if got < size:
            break
        i0 += size
    free(a.rows)
    free(a.parts)
    free(a.weigh)
    return acc


cdef bint _stats_single(Lazy* z, int64_t li) noexcept nogil:
    """Row ``li``'s statistics where its mask kept one token alone (``z.single``; a non-greedy
    row, one-hot drafts), without reading the row: the block holding it as the program leaves
    it -- the kept value ``v`` (finite: the mask found it so) is the block's maximum, and its sum
    of ``exp(x - v)`` is ``exp(0)`` as ``fd_expf`` gives it, every other lane's
    exponential an exact 0 that the pairwise sum adds exactly -- and every other block, -inf
    alone (the row has no NaN), as the program leaves such a block (max -inf, sum 0). False
    (nothing written) for any other row."""
    cdef const Stats* st = z.st
    cdef int64_t j, b, bj
    cdef Py_ssize_t om, os
    cdef float v
    cdef float one
    if z.proc == NULL or st.has_draft or _is_bonus(&st.bonus, li):
        return False
    j = z.single[li]
    if j < 0 or j >= st.V or not (_ldr(st.temp, iget(st.eim, li)) > 0.0):
        return False
    bj = j // st.BS
    v = z.proc[li * z.width + j]
    one = fd_expf(v - v)
    om = _off(&st.tmax, li, 0)
    os = _off(&st.tsum, li, 0)
    for b in range(st.NB):
        _stf(&st.tmax, om + b, v if b == bj else -INFINITY)
        _stf(&st.tsum, os + b, one if b == bj else 0.0)
    return True


cdef void _lazy_stats(Lazy* z, int64_t li) noexcept nogil:
    """Row ``li``'s statistics, all its blocks, after its processing (``_lazy_row``). On a team,
    with draft probabilities, the blocks are the units of the region that masks the row -- the
    region the programs had started after it, a wide team's several barriers a row -- where
    the row is processed there; a row kept to one token alone does not arise (no one-hot
    draft: ``_stats_single`` answers only for those)."""
    cdef int64_t b, NB = z.st.NB, BS = z.st.BS
    cdef Run q
    cdef int ran = 0
    if z.proc != NULL and z.done[li] == 2:
        return                              # processed with its statistics (_run_probs)
    if z.team > 1 and z.st.has_draft and z.proc != NULL and not z.done[li]:
        q.z = z
        q.start = li
        _lazy_row(z, li, _run_then, &q, NB, &ran)
        if ran:
            return
    _lazy_row(z, li)
    if _stats_single(z, li):
        return
    if z.team > 1:
        for b in prange(NB, num_threads=z.team, schedule="static"):
            _stats_program(z.st, li, b, z.scratch + _thread_id() * BS)
    else:
        for b in range(NB):
            _stats_program(z.st, li, b, z.scratch + _thread_id() * BS)


cdef bint _stats_or_reject(Lazy* z, const Tab* t, int64_t li, int64_t token, float temp,
                           float u) noexcept nogil:
    """Row ``li``'s statistics, block by block, for the rejection test of a one-hot draft
    ``token``; True when the blocks computed so far already make that test reject -- the rest
    of the row's blocks are then not computed (no later program reads them: the walk stops
    there, and a one-hot draft's resampling reads the logits alone).

    The test accepts when ``x_t - lse > log(u)`` (``_logprobs``), ``lse = M + log(S)`` with ``M``
    the row maximum (NaN skipped; one vectorised pass first) and ``S`` the sum of
    ``exp(x - M)``: the blocks' ``sumexp * exp(max - M)`` summed so far bound ``S`` from below,
    so once ``x_t - M - log(partial) < log(u)`` -- by a margin (1e-3 plus a relative 1e-6 of the
    logits, the partial sum also taken 1e-4 low: against the float rounding of the exponentials,
    their sums and the subtractions, all far below it) -- the test rejects whatever the rest of
    the row holds. A draft the row gives no mass at all (``x_t = -inf``: top-k/top-p or a
    logits mask took it) is rejected before any block, on a team too: ``x_t - lse`` is then
    -inf or NaN, never above ``log(u)``. Otherwise (a NaN, an infinite maximum, a bf16/fp16
    row, a probable draft, a team splitting the row) every block is computed, as before: the
    answer never changes."""
    cdef const Stats* st = z.st
    cdef const float* row
    cdef float* buf
    cdef float m, xt, bm
    cdef double need = INFINITY, total = 0.0
    cdef int64_t V = st.V, b
    cdef Py_ssize_t om, os
    _lazy_row(z, li)
    if (t.code == DT_FLOAT32 and temp > 0.0 and u > 0.0 and 0 <= token < V
            and (<const float*>t.p)[_off(t, li, 0) + token] == -INFINITY):
        return True
    if _stats_single(z, li):
        return False                # the draft is the one token kept: the test decides
    if (z.team > 1 or t.code != DT_FLOAT32 or not (temp > 0.0) or not (u > 0.0)
            or not (0 <= token < V)):
        _lazy_stats(z, li)
        return False
    row = (<const float*>t.p) + _off(t, li, 0)
    m = fd_nanmax(row, V)
    xt = row[token]
    if _scaled(t, temp):
        m = m / temp
        xt = xt / temp
    if -INFINITY < m < INFINITY and xt == xt:
        need = <double>xt - <double>m - log(<double>u) + 1e-3 + 1e-6 * (fabs(xt) + fabs(m))
        need = exp(need) if need < log(<double>V) else INFINITY  # S <= V
    buf = z.scratch + _thread_id() * st.BS
    om = _off(&st.tmax, li, 0)
    os = _off(&st.tsum, li, 0)
    for b in range(st.NB):
        _stats_program(st, li, b, buf)
        if need < INFINITY:
            bm = _ldf(&st.tmax, om + b)
            if bm > -INFINITY:
                total += <double>_ldf(&st.tsum, os + b) * exp(<double>bm - <double>m)
            if total * (1.0 - 1e-4) > need:
                return True
    return False


cdef struct Rej:
    LogProbs g
    Tab sampled, tam, resid, clp
    IBuf rej, ds, cu, idx, seed, pos
    Real temp, rates
    Tab trl, drl
    bint synthetic, block
    # vLLM 0.33+: block verification draws each step's uniform from the step's seed
    # (``spec_step_seed``), and FLY_WINDOW_SIZE > 0 defers a rejection at an uncertain target
    # (entropy >= the threshold) until that many further drafts are accepted natively
    bint step_seeds
    int64_t fly
    Real entropy
    float fly_threshold
    Lazy* lazy          # the one pass: each row's statistics computed as the walk reaches it


cdef inline int64_t _global_target_argmax(const Rej* a, int64_t li, float* buf) noexcept nogil:
    """vLLM's ``_compute_global_target_argmax``: the token of the block whose max is the first
    largest (NaN read as -inf)."""
    cdef const Lse* l = &a.g.tl
    cdef int64_t b, n = l.padded, real = l.nb if l.nb < l.padded else l.padded
    cdef float m, v
    cdef Py_ssize_t idx
    cdef Py_ssize_t o = _off(&l.mx, li, 0)
    for b in range(real):
        v = _ldf(&l.mx, o + b)
        buf[b] = -INFINITY if v != v else v
    for b in range(real, n):
        buf[b] = -INFINITY
    idx = _argmax(buf, n, &m)
    return _ldi(&a.tam, _off(&a.tam, li, 0) + idx)


cdef inline float _global_residual_mass(const Rej* a, float pjr, int64_t token, int64_t li,
                                        float* buf) noexcept nogil:
    cdef int64_t b, n = a.g.tl.padded, real = a.g.tl.nb if a.g.tl.nb < n else n
    cdef float tlse, m_b
    cdef Py_ssize_t o
    if a.g.has_draft:
        o = _off(&a.resid, li, 0)
        for b in range(real):
            buf[b] = _ldf(&a.resid, o + b)
        for b in range(real, n):
            buf[b] = 0.0
        return _pairwise_sum(buf, n)
    tlse = _global_lse(&a.g.tl, li, buf)
    m_b = expf(_ldf(&a.g.tgt, _off(&a.g.tgt, li, 0) + token) - tlse)
    return pjr * (<float>1.0 - m_b)


cdef inline bint _fly_can_defer_greedy(const Rej* a, int64_t li, int64_t ds,
                                       bint valid) noexcept nogil:
    """FLy's deferral test of a greedy row: a real draft the target does not rule out."""
    return valid and _ldf(&a.g.tgt, _off(&a.g.tgt, li, 0) + ds) > -INFINITY


cdef void _rej_program(const Rej* a, int64_t r, float* buf) noexcept nogil:
    cdef int64_t rs = iget(a.idx, r), start = iget(a.cu, r), nd, i, li, ds, nxt, ta
    cdef int64_t seed = iget(a.seed, rs), accepted_length = 0, pending = -1, rejected_argmax = 0
    cdef int64_t step_seed
    cdef float temp = _ldr(a.temp, rs), target_lse = 0.0, draft_lse = 0.0, u, h, pjr, rm, denom
    cdef float tlp, dlp, stlse, sdlse
    cdef bint greedy = temp == 0.0, verifying = True, valid, accepted, can_defer, early, ahead
    nd = iget(a.cu, r + 1) - start - 1
    for i in range(nd):
        li = start + i
        ds = iget(a.ds, li + 1)
        valid = ds >= 0
        if ds < 0:
            ds = 0
        if not greedy and a.fly == 0:
            verifying = verifying and valid
        if not verifying:
            continue
        ta = 0
        can_defer = False
        accepted = False
        step_seed = seed
        if a.step_seeds and a.block:
            step_seed = seed ^ <int64_t>(<uint64_t>i << 32)       # spec_step_seed(seed, i)
        u = _tl_rand32(step_seed, iget(a.pos, li), a.pos.wide)
        early = False
        ahead = a.lazy != NULL and a.lazy.proc != NULL and a.lazy.done[li] == AHEAD
        if a.lazy != NULL and not ahead:
            if (not greedy and not a.block and not a.synthetic and a.fly == 0 and valid
                    and not a.g.has_draft):
                early = _stats_or_reject(a.lazy, &a.g.tgt, li, ds, temp, u)
            else:
                _lazy_stats(a.lazy, li)
        if greedy:
            ta = _global_target_argmax(a, li, buf)
            if a.synthetic:
                accepted = <double>u < _ldrd(a.rates, i)
            else:
                accepted = ta == ds
            accepted = accepted and valid
            if a.fly > 0:
                can_defer = _fly_can_defer_greedy(a, li, ds, valid)
        elif a.block:
            pjr = expf(_ldf(&a.clp, li))
            nxt = iget(a.ds, li + 2) if i < nd - 1 else -1
            if nxt >= 0:
                rm = _global_residual_mass(a, pjr, nxt, li + 1, buf)
                denom = rm + <float>1.0 - pjr
                h = rm / denom if denom > 0.0 else <float>1.0
            else:
                h = pjr
            if u <= h:
                accepted_length = i + 1
            _sti(&a.sampled, _off(&a.sampled, r, 0) + i, ds)
        elif ahead:
            accepted = True                     # _accept_ahead's verdict: the test's
            target_lse = NAN                    # not read: the resampling reads a rejected
            draft_lse = NAN                     # row's (tested here) or none
        elif early:
            target_lse = NAN                    # not read: a one-hot draft's resampling
            draft_lse = 0.0                     # reads the logits alone
        else:
            _logprobs(&a.g, ds, valid, li, rs, i, temp, buf, &tlp, &dlp, &stlse, &sdlse)
            if a.fly == 0 or pending < 0:       # FLy: the pending rejection's stats stay
                target_lse = stlse
                draft_lse = sdlse
            if a.synthetic:
                accepted = <double>u < _ldrd(a.rates, i)
            else:
                accepted = tlp > logf(u) + dlp
            if a.fly > 0:
                accepted = accepted and valid
                can_defer = valid and tlp > -INFINITY and dlp > -INFINITY
        if a.block and not greedy:
            continue
        if a.fly > 0:
            if pending >= 0:
                verifying = accepted            # only native acceptance confirms the window
                if accepted and i - pending == a.fly:
                    accepted_length = i + 1
                    pending = -1
            elif accepted:
                accepted_length = i + 1
            else:
                rejected_argmax = ta
                verifying = (can_defer and i + a.fly < nd
                             and _ldrd(a.entropy, li) >= <double>a.fly_threshold)
                if verifying:
                    pending = i
            _sti(&a.sampled, _off(&a.sampled, r, 0) + i, ds)
        else:
            verifying = accepted
            accepted_length += accepted
            _sti(&a.sampled, _off(&a.sampled, r, 0) + i, ta if greedy and not accepted else ds)
    if a.fly > 0 and greedy and accepted_length < nd:
        _sti(&a.sampled, _off(&a.sampled, r, 0) + accepted_length, rejected_argmax)
    iset(a.rej, r, accepted_length)
    if a.block and not greedy and accepted_length < nd:
        target_lse = _global_lse(&a.g.tl, start + accepted_length, buf)
        if a.g.has_draft:
            draft_lse = _global_lse(&a.g.dl, start + accepted_length, buf)
    _stf(&a.trl, r, target_lse)
    _stf(&a.drl, r, draft_lse)


def rejection_kernel(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr, temp_ptr, seed_ptr,
        pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr, local_residual_mass_ptr,
        local_residual_mass_stride, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS,
        HAS_DRAFT_LOGITS=None, SYNTHETIC_MODE=None, USE_BLOCK_VERIFICATION=None, *, grid):
    """Program ``r`` of ``grid[0]``: verify request ``r``'s drafts with ``u = tl.rand(seed,
    pos)`` per position. Greedy (temperature 0): accept while the draft is the target argmax
    (SYNTHETIC_MODE: ``u < rate[i]``), storing the argmax at the first rejection. Otherwise
    (a -1 draft ends verification): ``log p(d) > log u + log q(d)`` (SYNTHETIC_MODE: ``u <
    rate[i]``), or with USE_BLOCK_VERIFICATION the block test ``u <= h`` (Sun et al.), the
    accepted length the last position passing it. Stores the drafts verified, the accepted
    count and the log-sum-exps the resampling of the rejected position needs."""
    _rejection(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1, None,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr, temp_ptr, seed_ptr,
        pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr, local_residual_mass_ptr,
        local_residual_mass_stride, None, None, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS,
        HAS_DRAFT_LOGITS, SYNTHETIC_MODE, USE_BLOCK_VERIFICATION, 0, False, grid)


def rejection_fly_kernel(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr, temp_ptr, seed_ptr,
        pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr, local_residual_mass_ptr,
        local_residual_mass_stride, fly_entropy_ptr, fly_entropy_threshold, vocab_num_blocks,
        PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS=None, SYNTHETIC_MODE=None,
        USE_BLOCK_VERIFICATION=None, FLY_WINDOW_SIZE=None, *, grid):
    """vLLM 0.33's ``_rejection_kernel``: as ``rejection_kernel``, block verification drawing
    step ``i``'s uniform from ``seed ^ i << 32``, and with FLY_WINDOW_SIZE ``w`` > 0 (FLy) a
    rejection of a draft the target does not rule out, at a row whose ``fly_entropy`` is at
    least ``fly_entropy_threshold`` and with ``w`` drafts after it, deferred: the drafts are
    kept when the next ``w`` are accepted natively, else the accepted length stays at the
    rejection (a greedy request's target argmax stored there); a -1 draft is rejected, not
    an end of verification."""
    _rejection(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1, None,
        draft_local_max_ptr, draft_local_max_stride, draft_local_sumexp_ptr,
        draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr, temp_ptr, seed_ptr,
        pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr, local_residual_mass_ptr,
        local_residual_mass_stride, fly_entropy_ptr, fly_entropy_threshold, vocab_num_blocks,
        PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS, SYNTHETIC_MODE, USE_BLOCK_VERIFICATION,
        FLY_WINDOW_SIZE, True, grid)


def rejection_row_mapping_kernel(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_logits_row_mapping_ptr, draft_local_max_ptr, draft_local_max_stride,
        draft_local_sumexp_ptr, draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr,
        temp_ptr, seed_ptr, pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr,
        local_residual_mass_ptr, local_residual_mass_stride, fly_entropy_ptr,
        fly_entropy_threshold, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS=None,
        SYNTHETIC_MODE=None, USE_BLOCK_VERIFICATION=None, FLY_WINDOW_SIZE=None, *, grid):
    """vLLM 0.34's ``_rejection_kernel``: 0.33's (``rejection_fly_kernel``), the draft logits
    of request slot ``s`` read from cache row ``max(row_mapping[s], 0)`` when
    ``draft_logits_row_mapping_ptr`` is given, from row ``s`` when None."""
    _rejection(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_logits_row_mapping_ptr, draft_local_max_ptr, draft_local_max_stride,
        draft_local_sumexp_ptr, draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr,
        temp_ptr, seed_ptr, pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr,
        local_residual_mass_ptr, local_residual_mass_stride, fly_entropy_ptr,
        fly_entropy_threshold, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS,
        SYNTHETIC_MODE, USE_BLOCK_VERIFICATION, FLY_WINDOW_SIZE, True, grid)


cdef _rejection(
        sampled_ptr, sampled_stride, rejected_steps_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, target_logits_stride,
        target_local_argmax_ptr, target_local_argmax_stride, target_local_max_ptr,
        target_local_max_stride, target_local_sumexp_ptr, target_local_sumexp_stride,
        draft_sampled_ptr, draft_logits_ptr, draft_logits_stride_0, draft_logits_stride_1,
        draft_logits_row_mapping_ptr, draft_local_max_ptr, draft_local_max_stride,
        draft_local_sumexp_ptr, draft_local_sumexp_stride, cu_num_logits_ptr, idx_mapping_ptr,
        temp_ptr, seed_ptr, pos_ptr, synthetic_conditional_rates_ptr, cumulative_log_p_ptr,
        local_residual_mass_ptr, local_residual_mass_stride, fly_entropy_ptr,
        fly_entropy_threshold, vocab_num_blocks, PADDED_VOCAB_NUM_BLOCKS, HAS_DRAFT_LOGITS,
        SYNTHETIC_MODE, USE_BLOCK_VERIFICATION, FLY_WINDOW_SIZE, bint v033, grid, Rej* into=NULL):
    """The rejection launch; with ``into``, its arguments checked and parsed there, nothing
    run."""
    cdef Rej a
    cdef int64_t R = _grid_axis(grid, 0, "grid")
    cdef int64_t nb = as_int(vocab_num_blocks, "vocab_num_blocks")
    cdef int64_t padded = as_int(PADDED_VOCAB_NUM_BLOCKS, "PADDED_VOCAB_NUM_BLOCKS")
    cdef int64_t r, rs, start, end, nd, i, li, tok, most = 0, ds_need = 0
    cdef Py_ssize_t n_temp, n_seed, n_map = 0
    cdef float* scratch
    cdef int nt
    cdef bint greedy
    _pow2(padded, "PADDED_VOCAB_NUM_BLOCKS")
    a.lazy = NULL
    a.g.has_draft = as_flag(HAS_DRAFT_LOGITS, "HAS_DRAFT_LOGITS", not is_none(draft_logits_ptr))
    a.g.has_rowmap = a.g.has_draft and not is_none(draft_logits_row_mapping_ptr)
    a.g.rowmap.ptr = NULL
    a.g.rowmap.wide = False
    if a.g.has_rowmap:
        n_map = _numel(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr", M_INDEX)
        a.g.rowmap = index_at_least(draft_logits_row_mapping_ptr,
                                    "draft_logits_row_mapping_ptr", 0)
    a.step_seeds = v033
    a.fly = 0
    if FLY_WINDOW_SIZE is not None:
        a.fly = as_int(FLY_WINDOW_SIZE, "FLY_WINDOW_SIZE")
        need_min("FLY_WINDOW_SIZE", a.fly, 0)
    a.fly_threshold = 0.0
    if a.fly > 0:
        required(fly_entropy_ptr, "fly_entropy_ptr", "with FLY_WINDOW_SIZE > 0")
        a.fly_threshold = _as_float(fly_entropy_threshold, "fly_entropy_threshold")
    a.synthetic = as_flag(SYNTHETIC_MODE, "SYNTHETIC_MODE",
                          not is_none(synthetic_conditional_rates_ptr))
    a.block = as_flag(USE_BLOCK_VERIFICATION, "USE_BLOCK_VERIFICATION",
                      not is_none(cumulative_log_p_ptr))
    if a.g.has_draft:
        required(draft_logits_ptr, "draft_logits_ptr", "with HAS_DRAFT_LOGITS")
    if a.synthetic:
        required(synthetic_conditional_rates_ptr, "synthetic_conditional_rates_ptr",
                 "with SYNTHETIC_MODE")
    if a.block:
        required(cumulative_log_p_ptr, "cumulative_log_p_ptr", "with USE_BLOCK_VERIFICATION")
        if a.g.has_draft:
            required(local_residual_mass_ptr, "local_residual_mass_ptr",
                     "with USE_BLOCK_VERIFICATION and HAS_DRAFT_LOGITS")
    if nb < 1:
        raise ValueError(expected("vocab_num_blocks", ">= 1", nb))
    a.cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", R + 1 if R else 0,
                          "one more than the requests of the grid")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", R, "one per request of the grid")
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    _real(temp_ptr, "temp_ptr", 0, "", &a.temp)
    n_seed = _numel(seed_ptr, "seed_ptr", M_INDEX)
    a.seed = index_at_least(seed_ptr, "seed_ptr", 0)
    _request_checks(a.cu, a.idx, R, min(n_temp, n_seed), "idx_mapping_ptr")
    for r in range(R):
        end = iget(a.cu, r + 1)
        nd = end - iget(a.cu, r) - 1
        if nd > most:
            most = nd
        if nd > 0 and end > ds_need:
            ds_need = end
    a.ds = index_at_least(draft_sampled_ptr, "draft_sampled_ptr", ds_need,
                          "the token after each draft row")
    a.pos = index_at_least(pos_ptr, "pos_ptr", max(ds_need - 1, 0), "one per draft row")
    if a.fly > 0:
        _real(fly_entropy_ptr, "fly_entropy_ptr", max(ds_need - 1, 0), "one per draft row",
              &a.entropy)
    if a.synthetic:
        _real(synthetic_conditional_rates_ptr, "synthetic_conditional_rates_ptr", most,
              "one per draft position of the longest request", &a.rates)
    _table(target_logits_ptr, "target_logits_ptr", M_LOGITS, 2, target_logits_stride,
           "target_logits_stride", None, "", &a.g.tgt)
    _table(target_local_argmax_ptr, "target_local_argmax_ptr", M_INDEX, 2,
           target_local_argmax_stride, "target_local_argmax_stride", None, "", &a.tam)
    _lse_tables(&a.g.tl, target_local_max_ptr, "target_local_max_ptr", target_local_max_stride,
                "target_local_max_stride", target_local_sumexp_ptr, "target_local_sumexp_ptr",
                target_local_sumexp_stride, "target_local_sumexp_stride", nb, padded)
    if a.g.has_draft:
        _table(draft_logits_ptr, "draft_logits_ptr", M_LOGITS, 3, draft_logits_stride_0,
               "draft_logits_stride_0", draft_logits_stride_1, "draft_logits_stride_1",
               &a.g.drf)
        _lse_tables(&a.g.dl, draft_local_max_ptr, "draft_local_max_ptr",
                    draft_local_max_stride, "draft_local_max_stride", draft_local_sumexp_ptr,
                    "draft_local_sumexp_ptr", draft_local_sumexp_stride,
                    "draft_local_sumexp_stride", nb, padded)
    if a.block:
        _table(cumulative_log_p_ptr, "cumulative_log_p_ptr", M_FLOAT32, 1, 1, "", None, "",
               &a.clp)
        a.clp.s0 = 0
        if a.g.has_draft:
            _table(local_residual_mass_ptr, "local_residual_mass_ptr", M_FLOAT32, 2,
                   local_residual_mass_stride, "local_residual_mass_stride", None, "",
                   &a.resid)
    cdef int64_t real = min(nb, padded)
    for r in range(R):
        rs = iget(a.idx, r)
        start = iget(a.cu, r)
        nd = iget(a.cu, r + 1) - start - 1
        greedy = _ldr(a.temp, rs) == 0.0
        for i in range(nd):
            li = start + i
            tok = iget(a.ds, li + 1)
            if greedy:
                if not _holds(&a.tam, li, 0, real):
                    _need(&a.tam, "target_local_argmax_ptr", li, 0, real,
                          f"row {li}'s {real} blocks")
                if not _holds(&a.g.tl.mx, li, 0, real):
                    _need(&a.g.tl.mx, "target_local_max_ptr", li, 0, real,
                          f"row {li}'s {real} blocks")
                if a.fly > 0 and tok >= 0:
                    _token_in(&a.g.tgt, "target_logits_ptr", li, 0, tok, "draft_sampled_ptr",
                              li + 1)
            elif a.block:
                if not _holds(&a.clp, 0, 0, li + 1):
                    _need(&a.clp, "cumulative_log_p_ptr", 0, 0, li + 1, f"row {li}'s value")
                if i < nd - 1 and iget(a.ds, li + 2) >= 0:
                    if a.g.has_draft:
                        if not _holds(&a.resid, li + 1, 0, real):
                            _need(&a.resid, "local_residual_mass_ptr", li + 1, 0, real,
                                  f"row {li + 1}'s {real} blocks")
                    else:
                        _need_lse(&a.g.tl, "target_local_max_ptr", "target_local_sumexp_ptr",
                                  li + 1)
                        _token_in(&a.g.tgt, "target_logits_ptr", li + 1, 0, iget(a.ds, li + 2),
                                  "draft_sampled_ptr", li + 2)
                _need_lse(&a.g.tl, "target_local_max_ptr", "target_local_sumexp_ptr", li)
                if a.g.has_draft:
                    _need_lse(&a.g.dl, "draft_local_max_ptr", "draft_local_sumexp_ptr", li)
            elif tok >= 0 or a.fly > 0:     # FLy verifies past a -1 draft (its logits masked)
                _need_lse(&a.g.tl, "target_local_max_ptr", "target_local_sumexp_ptr", li)
                if a.g.has_draft:
                    _need_lse(&a.g.dl, "draft_local_max_ptr", "draft_local_sumexp_ptr", li)
                if tok < 0:
                    continue
                _token_in(&a.g.tgt, "target_logits_ptr", li, 0, tok, "draft_sampled_ptr", li + 1)
                if a.g.has_draft:
                    _need_row_mapping(a.g.has_rowmap, n_map, rs)
                    _token_in(&a.g.drf, "draft_logits_ptr", _draft_row(&a.g, rs), i, tok,
                              "draft_sampled_ptr", li + 1)
    # outputs
    a.rej = index_at_least(rejected_steps_ptr, "rejected_steps_ptr", R,
                           "one per request of the grid")
    _table(target_rejected_logsumexp_ptr, "target_rejected_logsumexp_ptr", M_FLOAT32, 1, 1, "",
           None, "", &a.trl)
    _table(draft_rejected_logsumexp_ptr, "draft_rejected_logsumexp_ptr", M_FLOAT32, 1, 1, "",
           None, "", &a.drl)
    a.trl.s0 = a.drl.s0 = 0
    _need(&a.trl, "target_rejected_logsumexp_ptr", 0, 0, R, "one per request of the grid")
    _need(&a.drl, "draft_rejected_logsumexp_ptr", 0, 0, R, "one per request of the grid")
    _table(sampled_ptr, "sampled_ptr", M_INDEX, 2, sampled_stride, "sampled_stride", None, "",
           &a.sampled)
    for r in range(R):
        nd = iget(a.cu, r + 1) - iget(a.cu, r) - 1
        if not _holds(&a.sampled, r, 0, nd):
            _need(&a.sampled, "sampled_ptr", r, 0, nd, f"row {r}'s {nd} drafts")
    if R > 1:
        _no_overlap_rows(&a.sampled, "sampled_ptr", "sampled_stride", R, most)
    if into != NULL:
        into[0] = a
        return
    if R == 0:
        return
    nt = _team(R * 256, R)
    scratch = <float*>malloc(nt * padded * sizeof(float))
    if scratch == NULL:
        raise MemoryError()
    try:
        with nogil:
            if nt == 1:
                for r in range(R):
                    _rej_program(&a, r, scratch)
            else:
                for r in prange(R, num_threads=nt, schedule="static"):
                    _rej_program(&a, r, scratch + threadid() * padded)
    finally:
        free(scratch)


# -- _resample_kernel -----------------------------------------------------------------------------

cdef struct Res:
    Tab out_arg, out_max, tgt, drf, clp, trl, drl, ctx
    IBuf rej, cu, eim, ds, seed, pos
    Real temp
    int64_t V, BS, NB, width
    bint has_draft, fp64, block, watermark, dedup
    const unsigned char* wm        # per request slot: watermarked (a bool's byte)
    const unsigned char* skip      # per row: context seen before (DEDUPLICATE_CONTEXTS)
    uint32_t key0, key1
    # vLLM 0.34: the draft logits cache's row of a request slot, and SKIP_MASKED_BLOCKS
    bint has_rowmap, skip_masked
    IBuf rowmap
    # the one pass's: per target row, the one lane its mask kept (else -1; NULL: none known)
    const int64_t* single


cdef inline bint _masked_block(const float* x, Py_ssize_t nv, Py_ssize_t bs) noexcept nogil:
    """SKIP_MASKED_BLOCKS' test, ``tl.max(target block) == -inf``: the max ignores NaN, the
    block's ``bs - nv`` lanes past the vocabulary are -inf, and a block of NaN only has max
    NaN (not skipped)."""
    cdef Py_ssize_t j
    cdef bint number = nv < bs
    for j in range(nv):
        if x[j] > -INFINITY:
            return False
        if x[j] == x[j]:
            number = True
    return number


# vLLM's watermark PRF (vllm/v1/watermarking/prfs/philox.py, the Triton twin in
# vllm/v1/worker/gpu/sample/watermark.py): Philox-4x32-10 over the row's context, then one
# Philox call per group of four tokens.
cdef inline float _uint32_to_uniform(uint32_t value) noexcept nogil:
    """``_uint32_to_uniform``: the top 24 bits ``m``, ``(m + 1) * 2**-24`` in fp32, then the
    float just below it (bits - 1): in (0, 1)."""
    cdef float scaled = <float>((value >> 8) + 1) * <float>5.9604644775390625e-08
    cdef uint32_t bits
    memcpy(&bits, &scaled, 4)
    bits -= 1
    memcpy(&scaled, &bits, 4)
    return scaled


cdef Py_ssize_t _watermark_argmax(const Res* a, const float* logits, Py_ssize_t nv, int64_t b,
                                  int64_t row, float* best_out) noexcept nogil:
    """vLLM's ``philox_gumbel_block_argmax`` over vocabulary block ``b`` of row ``row``: the
    keyed draw ``logit - log(-log(u))`` (NaN logits as -inf), ``u`` from the context's Philox
    state and the token's group of four."""
    cdef uint32_t state[4]
    cdef uint32_t c[4]
    cdef uint32_t out[4]
    cdef int64_t off, i, j, group
    cdef Py_ssize_t base = _off(&a.ctx, row, 0), idx = 0
    cdef float best = NAN, x, v
    state[0] = 0x574D4358         # _CONTEXT_DOMAIN
    state[1] = <uint32_t>a.width
    state[2] = 0
    state[3] = 0
    off = 0
    while off < a.width:
        for i in range(4):
            if off + i < a.width:       # the first word of each four is always in range
                c[i] = <uint32_t>_ldi(&a.ctx, base + off + i)
            else:
                c[i] = <uint32_t>0xFFFFFFFF - <uint32_t>i
        philox4x32_10(state[0] ^ c[0], state[1] ^ c[1], state[2] ^ c[2], state[3] ^ c[3],
                      a.key0 ^ <uint32_t>off, a.key1, out)
        for i in range(4):
            state[i] = out[i]
        off += 4
    for j in range(nv):
        if j % 4 == 0:                  # a block starts on a group (BLOCK_SIZE % 4 == 0)
            group = (b * a.BS + j) // 4
            philox4x32_10(<uint32_t>group, state[0], state[1], state[2], a.key0 ^ state[3],
                          a.key1 ^ <uint32_t>0x574D544B, out)       # _TOKEN_DOMAIN
        x = logits[j]
        if x != x:
            x = -INFINITY
        v = x - logf(-logf(_uint32_to_uniform(out[j % 4])))
        if best != best or v > best:
            best = v
            idx = j
    if best != best:
        best = -INFINITY
        idx = 0
    best_out[0] = best
    return idx


cdef void _res_program(const Res* a, int64_t r, int64_t b, float* buf,
                       float* floor=NULL) noexcept nogil:
    cdef int64_t ri = iget(a.rej, r), start = iget(a.cu, r), end = iget(a.cu, r + 1)
    cdef int64_t rti = start + ri, rs, rdt = 0, j, nv, tb, db
    cdef float temp, tlse, dlse, tlp, dlp, ratio, lpt, best32
    cdef double best64
    cdef bint bonus, valid, noisy
    cdef Py_ssize_t idx
    rs = iget(a.eim, rti)
    temp = _ldr(a.temp, rs)
    bonus = rti == end - 1
    if temp == 0.0 and not bonus:
        return                                  # greedy: the target argmax is already stored
    if not bonus:
        rdt = iget(a.ds, rti + 1)
    valid = rdt >= 0
    nv = _valid(a.V, b, a.BS)
    tb = _off(&a.tgt, rti, 0) + b * a.BS
    _ldrow(&a.tgt, tb, nv, buf)
    if _scaled(&a.tgt, temp):
        fd_div_by(buf, nv, temp)
    if a.skip_masked and _masked_block(buf, nv, a.BS):
        # no target token survives the block, nor does the residual: no draw
        _stf(&a.out_max, _off(&a.out_max, r, 0) + b, -INFINITY)
        _sti(&a.out_arg, _off(&a.out_arg, r, 0) + b, b * a.BS)
        return
    if bonus or not valid:
        pass                                    # the target logits as they are
    elif a.has_draft:
        tlse = _ldf(&a.trl, r)
        dlse = _ldf(&a.drl, r)
        lpt = 0.0
        if a.block and ri > 0:
            lpt = _ldf(&a.clp, rti - 1)
        db = _off(&a.drf, _mapped_row(a.has_rowmap, a.rowmap, rs), ri) + b * a.BS
        for j in range(nv):
            tlp = buf[j] - tlse
            if a.block:
                tlp = tlp + lpt
            dlp = _ldf(&a.drf, db + j) / temp - dlse
            ratio = expf(dlp - tlp)
            buf[j] = tlp + log1pf(-ratio) if ratio < 1.0 else -INFINITY
    else:
        j = rdt - b * a.BS
        if 0 <= j < nv:
            buf[j] = -INFINITY
    if a.watermark and temp != 0.0 and a.wm[rs] != 0 and not (a.dedup and a.skip[rti] != 0):
        # the keyed draw (fixed at fp32 for detector compatibility, widened with USE_FP64)
        idx = _watermark_argmax(a, buf, nv, b, rti, &best32)
        _stf(&a.out_max, _off(&a.out_max, r, 0) + b, best32)
        _sti(&a.out_arg, _off(&a.out_arg, r, 0) + b, b * a.BS + idx)
        return
    # gumbel_block_argmax: the slot's temperature and seed (0 for a slot < 0), no temperature
    noisy = temp != 0.0
    if a.fp64:
        idx = gumbel_block_argmax64(buf, nv, a.BS, b * a.BS, iget(a.seed, rs), iget(a.pos, rti),
                                    noisy, &best64)
        _stf(&a.out_max, _off(&a.out_max, r, 0) + b, best64)
    else:
        idx = gumbel_block_argmax32(buf, nv, a.BS, b * a.BS, iget(a.seed, rs), iget(a.pos, rti),
                                    noisy, &best32, floor[0] if floor != NULL else NAN)
        _stf(&a.out_max, _off(&a.out_max, r, 0) + b, best32)
        if floor != NULL and best32 == best32 and not (best32 <= floor[0]):
            floor[0] = best32
    _sti(&a.out_arg, _off(&a.out_arg, r, 0) + b, b * a.BS + idx)


def resample_kernel(
        resampled_local_argmax_ptr, resampled_local_argmax_stride, resampled_local_max_ptr,
        resampled_local_max_stride, target_logits_ptr, target_logits_stride,
        target_rejected_logsumexp_ptr, draft_logits_ptr, draft_logits_stride_0,
        draft_logits_stride_1, draft_rejected_logsumexp_ptr, rejected_step_ptr,
        cu_num_logits_ptr, expanded_idx_mapping_ptr, draft_sampled_ptr, temp_ptr, seed_ptr,
        pos_ptr, cumulative_log_p_ptr, contexts_ptr, contexts_stride, watermarking_ptr,
        watermarking_skip_mask_ptr, watermark_key_0, watermark_key_1, vocab_size, BLOCK_SIZE,
        HAS_DRAFT_LOGITS=None, USE_FP64=None, USE_BLOCK_VERIFICATION=None, CONTEXT_WIDTH=None,
        WATERMARK=None, DEDUPLICATE_CONTEXTS=None, *, grid):
    """Program ``(r, b)`` of ``grid``: for request ``r``'s rejected (or bonus) row -- unless it
    is greedy and not the bonus row -- the Gumbel-max draw (seeded by the request, keyed by
    token, at the row's position; a plain argmax at temperature 0) over vocabulary block ``b``
    of the residual: ``max(p - q, 0)`` in log space with draft logits (block verification:
    ``p`` scaled by ``p_tau``), the target without the rejected token for a one-hot draft, the
    target itself for a bonus row or a -1 placeholder. With WATERMARK, a watermarked non-greedy
    request (unless DEDUPLICATE_CONTEXTS marks its row's context as seen) draws instead with
    vLLM's keyed Philox PRF over its row's ``CONTEXT_WIDTH`` context words. Stores the block's
    token and noised max (fp64 with USE_FP64)."""
    _resample(
        resampled_local_argmax_ptr, resampled_local_argmax_stride, resampled_local_max_ptr,
        resampled_local_max_stride, target_logits_ptr, target_logits_stride,
        target_rejected_logsumexp_ptr, draft_logits_ptr, draft_logits_stride_0,
        draft_logits_stride_1, None, draft_rejected_logsumexp_ptr, rejected_step_ptr,
        cu_num_logits_ptr, expanded_idx_mapping_ptr, draft_sampled_ptr, temp_ptr, seed_ptr,
        pos_ptr, cumulative_log_p_ptr, contexts_ptr, contexts_stride, watermarking_ptr,
        watermarking_skip_mask_ptr, watermark_key_0, watermark_key_1, vocab_size, BLOCK_SIZE,
        HAS_DRAFT_LOGITS, USE_FP64, USE_BLOCK_VERIFICATION, CONTEXT_WIDTH, WATERMARK,
        DEDUPLICATE_CONTEXTS, False, grid)


def resample_row_mapping_kernel(
        resampled_local_argmax_ptr, resampled_local_argmax_stride, resampled_local_max_ptr,
        resampled_local_max_stride, target_logits_ptr, target_logits_stride,
        target_rejected_logsumexp_ptr, draft_logits_ptr, draft_logits_stride_0,
        draft_logits_stride_1, draft_logits_row_mapping_ptr, draft_rejected_logsumexp_ptr,
        rejected_step_ptr, cu_num_logits_ptr, expanded_idx_mapping_ptr, draft_sampled_ptr,
        temp_ptr, seed_ptr, pos_ptr, cumulative_log_p_ptr, contexts_ptr, contexts_stride,
        watermarking_ptr, watermarking_skip_mask_ptr, watermark_key_0, watermark_key_1,
        vocab_size, BLOCK_SIZE, HAS_DRAFT_LOGITS=None, USE_FP64=None,
        USE_BLOCK_VERIFICATION=None, CONTEXT_WIDTH=None, WATERMARK=None,
        DEDUPLICATE_CONTEXTS=None, SKIP_MASKED_BLOCKS=None, *, grid):
    """vLLM 0.34's ``_resample_kernel``: as ``resample_kernel``, the draft logits of request
    slot ``s`` read from cache row ``max(row_mapping[s], 0)`` when
    ``draft_logits_row_mapping_ptr`` is given (from row ``s`` when None), and with
    SKIP_MASKED_BLOCKS (default False) a block whose target logits are all -inf (NaN
    ignored: top-k/top-p masked it) stores token ``b * BLOCK_SIZE`` and max -inf without a
    draw. The draft row's columns are required whole all the same (the cache is as wide)."""
    _resample(
        resampled_local_argmax_ptr, resampled_local_argmax_stride, resampled_local_max_ptr,
        resampled_local_max_stride, target_logits_ptr, target_logits_stride,
        target_rejected_logsumexp_ptr, draft_logits_ptr, draft_logits_stride_0,
        draft_logits_stride_1, draft_logits_row_mapping_ptr, draft_rejected_logsumexp_ptr,
        rejected_step_ptr, cu_num_logits_ptr, expanded_idx_mapping_ptr, draft_sampled_ptr,
        temp_ptr, seed_ptr, pos_ptr, cumulative_log_p_ptr, contexts_ptr, contexts_stride,
        watermarking_ptr, watermarking_skip_mask_ptr, watermark_key_0, watermark_key_1,
        vocab_size, BLOCK_SIZE, HAS_DRAFT_LOGITS, USE_FP64, USE_BLOCK_VERIFICATION,
        CONTEXT_WIDTH, WATERMARK, DEDUPLICATE_CONTEXTS,
        as_flag(SKIP_MASKED_BLOCKS, "SKIP_MASKED_BLOCKS", 0), grid)


cdef bint _sparse_ok(const Res* a, int64_t r) noexcept nogil:
    """Whether request ``r``'s resampled row is drawn as it is (``_res_row_sparse``): fp32
    scores of the fp32 row, not greedy, not scaled as it is read, no watermark or block
    verification, and no residual of the draft's probabilities."""
    cdef int64_t end = iget(a.cu, r + 1), rti = iget(a.cu, r) + iget(a.rej, r)
    cdef float temp
    if a.fp64 or a.watermark or a.block or a.tgt.code != DT_FLOAT32:
        return False
    temp = _ldr(a.temp, iget(a.eim, rti))
    if temp == 0.0 or _scaled(&a.tgt, temp):
        return False                            # greedy, or a row scaled as it is read
    return rti == end - 1 or not (a.has_draft and iget(a.ds, rti + 1) >= 0)


cdef bint _res_row_sparse(const Res* a, int64_t r, int64_t b0, int64_t b1, float* buf,
                          int32_t* lanes, Py_ssize_t cap) noexcept nogil:
    """Request ``r``'s blocks ``[b0, b1)`` drawn from the lanes above -inf alone, where its
    resampled row is a masked one -- top-k/top-p's processed row keeps a few thousand of 128k
    values -- and the draw reads the target row as it is (no draft probabilities' residual,
    fp32 scores, no watermark; a one-hot draft's token read as -inf): the lanes found by one
    pass of compares (``kept_lanes``, at most ``cap``), the first largest score among them
    (``gumbel_lanes_argmax32``: the block draw's scores), stored in the block that holds it and
    -inf (at the block's first token, as a block of -inf lanes stores it) in the others -- the
    insert's first largest is the block draw's token. False (nothing written) where this does
    not apply, or the row holds a NaN or more than ``cap`` lanes: the blocks are then drawn.
    A row the one pass masked to one lane (``a.single``) has that lane alone, without the
    pass of compares."""
    cdef int64_t ri = iget(a.rej, r), start = iget(a.cu, r), end = iget(a.cu, r + 1)
    cdef int64_t rti = start + ri, rs, ex = -1, c0, c1, b
    cdef float best
    cdef Py_ssize_t n, idx
    cdef const float* row
    if not _sparse_ok(a, r):
        return False
    rs = iget(a.eim, rti)
    if rti != end - 1:
        ex = iget(a.ds, rti + 1)                # a one-hot draft's token: read as -inf
    c0 = b0 * a.BS
    c1 = min(b1 * a.BS, a.V)
    if c1 <= c0:
        return False
    row = (<const float*>a.tgt.p) + _off(&a.tgt, rti, 0) + c0
    if a.single != NULL and a.single[rti] >= 0:
        n = 0
        if c0 <= a.single[rti] < c1:
            lanes[0] = <int32_t>(a.single[rti] - c0)
            n = 1
    else:
        n = kept_lanes(row, c1 - c0, lanes, cap)
    if n < 0:
        return False
    idx = gumbel_lanes_argmax32(row, lanes, n, c0, ex - c0 if ex >= 0 else -1,
                                iget(a.seed, rs), iget(a.pos, rti), buf, &best)
    for b in range(b0, b1):
        _stf(&a.out_max, _off(&a.out_max, r, 0) + b, -INFINITY)
        _sti(&a.out_arg, _off(&a.out_arg, r, 0) + b, b * a.BS)
    if idx >= 0:
        b = (c0 + idx) // a.BS
        _stf(&a.out_max, _off(&a.out_max, r, 0) + b, best)
        _sti(&a.out_arg, _off(&a.out_arg, r, 0) + b, c0 + idx)
    return True


cdef void _res_row(const Res* a, int64_t r, int64_t b0, int64_t b1, float* buf,
                   int32_t* lanes, Py_ssize_t cap) noexcept nogil:
    """Request ``r``'s blocks ``[b0, b1)`` in order, each draw passing over the lanes that
    cannot exceed the best score of the blocks before it in that run: the run's first largest
    score and its token come out as the launch's (a block it passes over whole stores a score
    below that one, which the insert never picks), and so do the row's, over runs that cover
    it -- a run's best is exact, every other block's score lies below one that is. A masked
    row's run looks at its lanes above -inf alone (``_res_row_sparse``)."""
    cdef float floor = NAN
    cdef int64_t b
    if _res_row_sparse(a, r, b0, b1, buf, lanes, cap):
        return
    for b in range(b0, b1):
        _res_program(a, r, b, buf, &floor)


cdef _resample(
        resampled_local_argmax_ptr, resampled_local_argmax_stride, resampled_local_max_ptr,
        resampled_local_max_stride, target_logits_ptr, target_logits_stride,
        target_rejected_logsumexp_ptr, draft_logits_ptr, draft_logits_stride_0,
        draft_logits_stride_1, draft_logits_row_mapping_ptr, draft_rejected_logsumexp_ptr,
        rejected_step_ptr, cu_num_logits_ptr, expanded_idx_mapping_ptr, draft_sampled_ptr,
        temp_ptr, seed_ptr, pos_ptr, cumulative_log_p_ptr, contexts_ptr, contexts_stride,
        watermarking_ptr, watermarking_skip_mask_ptr, watermark_key_0, watermark_key_1,
        vocab_size, BLOCK_SIZE, HAS_DRAFT_LOGITS, USE_FP64, USE_BLOCK_VERIFICATION,
        CONTEXT_WIDTH, WATERMARK, DEDUPLICATE_CONTEXTS, bint skip_masked, grid,
        bint by_temp=False, bint by_row=False):
    """The resampling launch; ``by_row`` (the one pass, where only each request's winner is
    read): each request's blocks in order, in runs (``_res_run``)."""
    cdef Res a
    cdef int64_t R = _grid_axis(grid, 0, "grid"), NB = _grid_axis(grid, 1, "grid")
    cdef int64_t r, ri, start, end, rti, rs, rdt, cols
    cdef Py_ssize_t n_eim, n_temp, n_seed, n_pos, n_ds, n_wm = 0, n_skip = 0, n_map = 0
    cdef Py_ssize_t shp1[1]
    cdef bint bonus
    if R == 0 or NB == 0:
        R = NB = 0
    a.NB = NB
    a.skip_masked = skip_masked
    a.single = NULL
    a.V = as_int(vocab_size, "vocab_size")
    a.BS = as_int(BLOCK_SIZE, "BLOCK_SIZE")
    _pow2(a.BS, "BLOCK_SIZE")
    a.has_draft = as_flag(HAS_DRAFT_LOGITS, "HAS_DRAFT_LOGITS", not is_none(draft_logits_ptr))
    a.block = as_flag(USE_BLOCK_VERIFICATION, "USE_BLOCK_VERIFICATION",
                      not is_none(cumulative_log_p_ptr))
    a.watermark = as_flag(WATERMARK, "WATERMARK", not is_none(contexts_ptr))
    a.dedup = as_flag(DEDUPLICATE_CONTEXTS, "DEDUPLICATE_CONTEXTS",
                      not is_none(watermarking_skip_mask_ptr))
    a.key0 = <uint32_t>(<uint64_t>as_int(watermark_key_0, "watermark_key_0"))
    a.key1 = <uint32_t>(<uint64_t>as_int(watermark_key_1, "watermark_key_1"))
    a.width = 1 if CONTEXT_WIDTH is None else as_int(CONTEXT_WIDTH, "CONTEXT_WIDTH")
    if a.watermark:
        need_min("CONTEXT_WIDTH", a.width, 1)
        required(contexts_ptr, "contexts_ptr", "with WATERMARK")
        required(watermarking_ptr, "watermarking_ptr", "with WATERMARK")
        _table(contexts_ptr, "contexts_ptr", M_INDEX, 2, contexts_stride, "contexts_stride",
               None, "", &a.ctx)
        a.wm = <const unsigned char*>check_tensor(watermarking_ptr, "watermarking_ptr", M_BYTE,
                                                  -1, NULL, shp1)
        n_wm = shp1[0]
        if a.dedup:
            required(watermarking_skip_mask_ptr, "watermarking_skip_mask_ptr",
                     "with DEDUPLICATE_CONTEXTS")
            a.skip = <const unsigned char*>check_tensor(
                watermarking_skip_mask_ptr, "watermarking_skip_mask_ptr", M_BYTE, -1, NULL, shp1)
            n_skip = shp1[0]
        if a.BS % 4 != 0:
            raise ValueError(expected("BLOCK_SIZE", "a multiple of 4 with WATERMARK", a.BS))
    else:
        as_int(contexts_stride, "contexts_stride")
    if a.has_draft:
        required(draft_logits_ptr, "draft_logits_ptr", "with HAS_DRAFT_LOGITS")
    a.has_rowmap = a.has_draft and not is_none(draft_logits_row_mapping_ptr)
    a.rowmap.ptr = NULL
    a.rowmap.wide = False
    if a.has_rowmap:
        n_map = _numel(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr", M_INDEX)
        a.rowmap = index_at_least(draft_logits_row_mapping_ptr, "draft_logits_row_mapping_ptr",
                                  0)
    a.rej = index_at_least(rejected_step_ptr, "rejected_step_ptr", R,
                           "one per request of the grid")
    a.cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", R + 1 if R else 0,
                          "one more than the requests of the grid")
    n_eim = _numel(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", M_INDEX)
    a.eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", 0)
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    _real(temp_ptr, "temp_ptr", 0, "", &a.temp)
    n_seed = _numel(seed_ptr, "seed_ptr", M_INDEX)
    a.seed = index_at_least(seed_ptr, "seed_ptr", 0)
    n_pos = _numel(pos_ptr, "pos_ptr", M_INDEX)
    a.pos = index_at_least(pos_ptr, "pos_ptr", 0)
    n_ds = _numel(draft_sampled_ptr, "draft_sampled_ptr", M_INDEX)
    a.ds = index_at_least(draft_sampled_ptr, "draft_sampled_ptr", 0)
    _table(target_logits_ptr, "target_logits_ptr", M_LOGITS, 2, target_logits_stride,
           "target_logits_stride", None, "", &a.tgt)
    a.tgt.by_temp = by_temp
    if a.has_draft:
        _table(draft_logits_ptr, "draft_logits_ptr", M_LOGITS, 3, draft_logits_stride_0,
               "draft_logits_stride_0", draft_logits_stride_1, "draft_logits_stride_1", &a.drf)
        _table(target_rejected_logsumexp_ptr, "target_rejected_logsumexp_ptr", M_FLOAT32, 1, 1,
               "", None, "", &a.trl)
        _table(draft_rejected_logsumexp_ptr, "draft_rejected_logsumexp_ptr", M_FLOAT32, 1, 1, "",
               None, "", &a.drl)
        a.trl.s0 = a.drl.s0 = 0
    if a.block and a.has_draft:
        required(cumulative_log_p_ptr, "cumulative_log_p_ptr", "with USE_BLOCK_VERIFICATION")
        _table(cumulative_log_p_ptr, "cumulative_log_p_ptr", M_FLOAT32, 1, 1, "", None, "",
               &a.clp)
        a.clp.s0 = 0
    cols = min(a.V, NB * a.BS) if a.V > 0 else 0
    for r in range(R):
        ri = iget(a.rej, r)
        start = iget(a.cu, r)
        end = iget(a.cu, r + 1)
        rti = start + ri
        if rti < 0 or rti >= n_eim:
            raise ValueError(expected("expanded_idx_mapping_ptr", f"an entry for request {r}'s "
                                      f"resampled row {rti}", f"{n_eim} elements"))
        rs = iget(a.eim, rti)
        if rs < 0 or rs >= n_temp or rs >= n_seed:
            raise ValueError(expected("expanded_idx_mapping_ptr",
                                      f"request slots in [0, {min(n_temp, n_seed)}) (temp_ptr's "
                                      f"and seed_ptr's length)", f"[{rti}] = {rs}"))
        bonus = rti == end - 1
        if _ldr(a.temp, rs) == 0.0 and not bonus:
            continue
        if a.watermark and _ldr(a.temp, rs) != 0.0:
            if rs >= n_wm:
                raise ValueError(expected("watermarking_ptr", f"an entry for request slot {rs}",
                                          f"{n_wm} elements"))
            if a.dedup and rti >= n_skip:
                raise ValueError(expected("watermarking_skip_mask_ptr",
                                          f"an entry for row {rti}", f"{n_skip} elements"))
            if not _holds(&a.ctx, rti, 0, a.width):
                _need(&a.ctx, "contexts_ptr", rti, 0, a.width,
                      f"row {rti}'s {a.width} context words")
        if rti >= n_pos:
            raise ValueError(expected("pos_ptr", f"an entry for row {rti}", f"{n_pos} elements"))
        if not _holds(&a.tgt, rti, 0, cols):
            _need(&a.tgt, "target_logits_ptr", rti, 0, cols, f"row {rti}'s {cols} columns")
        rdt = 0
        if not bonus:
            if rti + 1 >= n_ds:
                raise ValueError(expected("draft_sampled_ptr", f"an entry for row {rti + 1}",
                                          f"{n_ds} elements"))
            rdt = iget(a.ds, rti + 1)
        if bonus or rdt < 0 or not a.has_draft:
            continue
        if ri < 0:
            raise ValueError(expected("rejected_step_ptr", "steps >= 0", f"[{r}] = {ri}"))
        _need_row_mapping(a.has_rowmap, n_map, rs)
        if not _holds(&a.drf, _mapped_row(a.has_rowmap, a.rowmap, rs), ri, cols):
            _need(&a.drf, "draft_logits_ptr", _mapped_row(a.has_rowmap, a.rowmap, rs), ri, cols,
                  f"request slot {rs}, step {ri}: {cols} columns")
        if not _holds(&a.trl, 0, 0, r + 1):
            _need(&a.trl, "target_rejected_logsumexp_ptr", 0, 0, r + 1, f"request {r}'s value")
        if not _holds(&a.drl, 0, 0, r + 1):
            _need(&a.drl, "draft_rejected_logsumexp_ptr", 0, 0, r + 1, f"request {r}'s value")
        if a.block and ri > 0:
            if not _holds(&a.clp, 0, 0, rti):
                _need(&a.clp, "cumulative_log_p_ptr", 0, 0, rti, f"row {rti - 1}'s value")
    _table(resampled_local_argmax_ptr, "resampled_local_argmax_ptr", M_INDEX, 2,
           resampled_local_argmax_stride, "resampled_local_argmax_stride", None, "",
           &a.out_arg)
    _table(resampled_local_max_ptr, "resampled_local_max_ptr", M_REAL, 2,
           resampled_local_max_stride, "resampled_local_max_stride", None, "", &a.out_max)
    a.fp64 = as_flag(USE_FP64, "USE_FP64", a.out_max.code == DT_FLOAT64)
    for r in range(R):
        rti = iget(a.cu, r) + iget(a.rej, r)
        if _ldr(a.temp, iget(a.eim, rti)) == 0.0 and rti != iget(a.cu, r + 1) - 1:
            continue
        if not _holds(&a.out_arg, r, 0, NB):
            _need(&a.out_arg, "resampled_local_argmax_ptr", r, 0, NB, f"row {r}'s {NB} blocks")
        if not _holds(&a.out_max, r, 0, NB):
            _need(&a.out_max, "resampled_local_max_ptr", r, 0, NB, f"row {r}'s {NB} blocks")
    _no_overlap_rows(&a.out_arg, "resampled_local_argmax_ptr", "resampled_local_argmax_stride",
                     R, NB)
    _no_overlap_rows(&a.out_max, "resampled_local_max_ptr", "resampled_local_max_stride", R, NB)
    _res_run(&a, R, by_row)


cdef int _res_run(const Res* a, int64_t R, bint by_row) except -1:
    """The resampling programs of ``R`` requests (``a``'s arguments checked): every (request,
    block) program in parallel, or ``by_row`` (only each request's winner is read) each
    request's blocks in order (``_res_row``) -- a request per thread, or, fewer requests than
    threads, each request's blocks in as many runs as its share of the team, a run per thread:
    one long row's draw split across the team with the pruning of a walk in order."""
    cdef int64_t NB = a.NB, P = R * a.NB, r, p, runs, width, cap
    cdef float* scratch
    cdef int32_t* lanes
    cdef int nt
    if P == 0:
        return 0
    nt = _team(P * a.BS * 8, P)
    if by_row and a.single != NULL:
        for r in range(R):
            if a.single[iget(a.cu, r) + iget(a.rej, r)] < 0 or not _sparse_ok(a, r):
                break
        else:
            # every row one lane: a request's draw is its blocks' stores and one hash, a
            # request per thread at most
            nt = _team(R * (NB * 2 + 256), R)
    runs = 1
    if by_row and nt > R:
        runs = min(NB, (nt + R - 1) // R)
    elif by_row:
        nt = <int>min(<int64_t>nt, R)
    width = (NB + runs - 1) // runs
    # a run's lanes above -inf, for a masked row's draw: up to an eighth of the run's values
    # (beyond that the block draw, which prunes lanes as it goes, is the cheaper)
    cap = max(<int64_t>DRAW_LANES, width * a.BS // 8) if by_row else 0
    scratch = <float*>malloc(nt * a.BS * sizeof(float))
    lanes = <int32_t*>malloc(max(nt * cap, 1) * sizeof(int32_t))
    if scratch == NULL or lanes == NULL:
        free(scratch)
        free(lanes)
        raise MemoryError()
    with nogil:
        if by_row:
            if nt == 1:
                for r in range(R):
                    _res_row(a, r, 0, NB, scratch, lanes, cap)
            elif runs > 1:
                # a run per thread, in order: where the runs line up with the 8192-value chunks
                # the team copied and masked (a 128k row on 16 threads), run t's blocks are
                # still in the cache of thread t, which wrote them
                for p in prange(R * runs, num_threads=nt, schedule="static"):
                    _res_row(a, p // runs, (p % runs) * width, min(NB, (p % runs + 1) * width),
                             scratch + threadid() * a.BS, lanes + threadid() * cap, cap)
            else:
                for r in prange(R, num_threads=nt, schedule="dynamic"):
                    _res_row(a, r, 0, NB, scratch + threadid() * a.BS, lanes + threadid() * cap,
                             cap)
        elif nt == 1:
            for p in range(P):
                _res_program(a, p // NB, p % NB, scratch)
        else:
            for p in prange(P, num_threads=nt, schedule="static"):
                _res_program(a, p // NB, p % NB, scratch + threadid() * a.BS)
    free(scratch)
    free(lanes)
    return 0


# -- _insert_resampled_kernel ---------------------------------------------------------------------

def insert_resampled_kernel(sampled_ptr, sampled_stride, num_sampled_ptr,
                            resampled_local_argmax_ptr, resampled_local_argmax_stride,
                            resampled_local_max_ptr, resampled_local_max_stride,
                            resample_num_blocks, cu_num_logits_ptr, expanded_idx_mapping_ptr,
                            temp_ptr, PADDED_RESAMPLE_NUM_BLOCKS, *, grid):
    """Program ``r`` of ``grid[0]``: ``num_sampled[r] += 1`` and -- unless the request is
    greedy and its resampled row is not the bonus row (the target argmax is in place) -- the
    token of the block with the first largest max (NaN read as -inf) at ``sampled[r,
    num_sampled]``."""
    cdef int64_t R = _grid_axis(grid, 0, "grid")
    cdef int64_t nb = as_int(resample_num_blocks, "resample_num_blocks")
    cdef int64_t padded = as_int(PADDED_RESAMPLE_NUM_BLOCKS, "PADDED_RESAMPLE_NUM_BLOCKS")
    cdef int64_t real, r, ns, start, end, rti, rs
    cdef Tab s, am, mx
    cdef IBuf num, cu, eim
    cdef Real temp
    cdef Py_ssize_t n_eim, n_temp
    _pow2(padded, "PADDED_RESAMPLE_NUM_BLOCKS")
    real = min(nb, padded) if nb > 0 else 0
    num = index_at_least(num_sampled_ptr, "num_sampled_ptr", R, "one per request of the grid")
    cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", R + 1 if R else 0,
                        "one more than the requests of the grid")
    n_eim = _numel(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", M_INDEX)
    eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", 0)
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    _real(temp_ptr, "temp_ptr", 0, "", &temp)
    _table(sampled_ptr, "sampled_ptr", M_INDEX, 2, sampled_stride, "sampled_stride", None, "", &s)
    _table(resampled_local_argmax_ptr, "resampled_local_argmax_ptr", M_INDEX, 2,
           resampled_local_argmax_stride, "resampled_local_argmax_stride", None, "", &am)
    _table(resampled_local_max_ptr, "resampled_local_max_ptr", M_REAL, 2,
           resampled_local_max_stride, "resampled_local_max_stride", None, "", &mx)
    for r in range(R):
        ns = iget(num, r)
        start = iget(cu, r)
        end = iget(cu, r + 1)
        rti = start + ns
        if rti < 0 or rti >= n_eim:
            raise ValueError(expected("expanded_idx_mapping_ptr", f"an entry for request {r}'s "
                                      f"resampled row {rti}", f"{n_eim} elements"))
        rs = iget(eim, rti)
        if rs < 0 or rs >= n_temp:
            raise ValueError(expected("expanded_idx_mapping_ptr",
                                      f"request slots in [0, {n_temp}) (temp_ptr's length)",
                                      f"[{rti}] = {rs}"))
        if _ldr(temp, rs) == 0.0 and rti != end - 1:
            continue
        if ns < 0:
            raise ValueError(expected("num_sampled_ptr", "counts >= 0", f"[{r}] = {ns}"))
        if not _holds(&mx, r, 0, max(real, 1)):
            _need(&mx, "resampled_local_max_ptr", r, 0, max(real, 1), f"row {r}'s {real} blocks")
        if not _holds(&am, r, 0, max(real, 1)):
            _need(&am, "resampled_local_argmax_ptr", r, 0, max(real, 1),
                  f"row {r}'s {real} blocks")
        if not _holds(&s, r, 0, ns + 1):
            _need(&s, "sampled_ptr", r, 0, ns + 1, f"row {r}'s slot {ns}")
    with nogil:
        _insert_rows(&s, num, cu, eim, &temp, &am, &mx, R, real)


cdef void _insert_rows(const Tab* s, IBuf num, IBuf cu, IBuf eim, const Real* temp,
                       const Tab* am, const Tab* mx, int64_t R, int64_t real) noexcept nogil:
    """The insert's programs (arguments checked): ``num[r] += 1`` and, unless greedy off the
    bonus row, the token of the first largest of ``real`` block maxima at ``s[r, num[r]]``."""
    cdef int64_t r, ns, rti, rs, b
    cdef Py_ssize_t idx
    cdef double best, v
    for r in range(R):
        ns = iget(num, r)
        rti = iget(cu, r) + ns
        rs = iget(eim, rti)
        iset(num, r, ns + 1)
        if _ldr(temp[0], rs) == 0.0 and rti != iget(cu, r + 1) - 1:
            continue
        idx = 0
        best = -INFINITY
        for b in range(real):
            v = _ldd(mx, _off(mx, r, 0) + b)
            if v > best:
                best = v
                idx = b
        _sti(s, _off(s, r, 0) + ns, _ldi(am, _off(am, r, 0) + idx))



# -- the verification in one pass ----------------------------------------------------------------

def rejection_sample_fused(
        sampled_ptr, num_sampled_ptr, target_logits_ptr, draft_logits_ptr, draft_sampled_ptr,
        cu_num_logits_ptr, pos_ptr, idx_mapping_ptr, expanded_idx_mapping_ptr,
        expanded_local_pos_ptr, temp_ptr, seed_ptr, num_speculative_steps,
        target_local_argmax_ptr, target_local_max_ptr, target_local_sumexp_ptr,
        draft_local_max_ptr, draft_local_sumexp_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, resampled_local_argmax_ptr, resampled_local_max_ptr,
        USE_FP64=False, APPLY_TEMPERATURE=False, top_k_ptr=None, top_p_ptr=None,
        processed_ptr=None):
    """vLLM 0.32's ``rejection_sample`` (``rejection_sampler_utils.py``: Leviathan et al.'s
    test, no synthetic rates, block verification or watermark) after its temperature kernel,
    in one pass: the same programs as the launches of ``compute_local_logits_stats_kernel``,
    ``rejection_kernel``, ``resample_kernel`` and ``insert_resampled_kernel``, with changes
    that leave every value as it was:

    * a row's statistics (all its ``8192``-wide blocks) are computed when the rejection walk
      first reads them, so the rows past a request's first rejection are never read (the
      launch computes every draft row's);
    * with APPLY_TEMPERATURE, ``target_logits_ptr`` holds the raw rows and each is read as
      ``_temperature_kernel`` would have left it in an fp32 copy (divided by its request's
      temperature unless that is 0 or 1): no copy, no pass of its own;
    * with ``top_k_ptr`` and/or ``top_p_ptr`` (per request slot; vLLM's ``top_k``/``top_p``
      states: None where vLLM passes None for the batch), each row the walk reaches -- and
      each request's resampled row -- is first written to ``processed_ptr`` (fp32, the target
      logits' shape, contiguous) as ``apply_sampling_params`` leaves it: the fp32 row, divided
      by the temperature (APPLY_TEMPERATURE), masked by ``top_k_top_p``; the other rows of
      ``processed_ptr`` are not written. A row masked to its top token alone after a peek, in
      a walk of one-hot drafts (sampled, no USE_FP64), is written at that token and, but for a
      request's last row, at its draft's (-inf) alone: nothing reads the rest (its statistics
      and its draw come from that token, the test from the draft's value);
    * with draft probabilities and top-p (no top-k), a draft whose test is sure to accept from
      its raw target row -- the row's mass and the mass ranked above the draft, bounded chunk
      by chunk, bound the processed row's log-sum-exp (``_accept_ahead``) -- is accepted
      without its row processed or its target statistics computed: that row of
      ``processed_ptr`` and of the target statistics is not written, and a request whose
      every draft is so accepted leaves NaN as its rejected log-sum-exps (nothing reads them:
      the bonus row's draw reads the logits alone).

    The tables (``[rows, 8192-blocks]`` statistics, ``[requests]`` log-sum-exps,
    ``[requests, 1024-blocks]`` resampling) are scratch laid out as vLLM's host code lays them
    out; every argument is checked before anything is written, but for the rows only the walk
    picks (the slot after a request's accepted drafts, a rejected draft's row of the draft
    logits), checked after it as the resampling and insert launches check them. Requests run
    on a team each (dynamic: their walks differ in length), or -- fewer requests than threads --
    one after another, each row's blocks split across the team."""
    cdef Stats st
    cdef Rej rj
    cdef Lazy z
    cdef int64_t L, V, R, K, NB, padded, RNB, rpadded, r, start, end
    cdef int nt, outer = 1
    cdef float* scratch = NULL
    cdef float* rbuf = NULL
    cdef bint has_draft = not is_none(draft_logits_ptr)
    cdef bint by_temp = as_flag(APPLY_TEMPERATURE, "APPLY_TEMPERATURE", 0)
    cdef bint fp64 = as_flag(USE_FP64, "USE_FP64", 0)
    cdef Py_ssize_t n_temp, n_seed, n_pos, n_k = 0, n_p = 0
    cdef IBuf cu, eim
    cdef Py_ssize_t shp[3]
    cdef int kcode = 0, pcode = 0
    cdef bint process = not is_none(top_k_ptr) or not is_none(top_p_ptr)
    cdef unsigned char* done = NULL
    cdef unsigned char* drafted = NULL
    cdef float* cmax = NULL
    cdef int* cnan = NULL
    cdef int64_t* single = NULL
    cdef Py_ssize_t nch
    cdef Tab rtab, rtab2
    z.proc = NULL
    z.single = NULL
    z.drafted = NULL
    z.kp = z.pp = NULL
    z.kwide = z.pdbl = False
    z.arenas = NULL
    if getattr(target_logits_ptr, "ndim", None) != 2:
        raise ValueError(expected("target_logits_ptr", "a [num_logits, V] tensor",
                                  f"shape {tuple(getattr(target_logits_ptr, 'shape', ()))}"))
    L, V = target_logits_ptr.shape
    if has_draft:
        if getattr(draft_logits_ptr, "ndim", None) != 3:
            raise ValueError(expected("draft_logits_ptr",
                                      "a [max_num_reqs, num_speculative_steps, V] tensor",
                                      f"shape {tuple(getattr(draft_logits_ptr, 'shape', ()))}"))
        V = min(V, draft_logits_ptr.shape[2])     # a padded target vocabulary (vLLM's rule)
    K = as_int(num_speculative_steps, "num_speculative_steps")
    need_min("num_speculative_steps", K, 0)
    R = _numel(cu_num_logits_ptr, "cu_num_logits_ptr", M_INDEX) - 1
    if R < 0:
        raise ValueError(expected("cu_num_logits_ptr", "num_reqs + 1 offsets", "none"))
    # each request's rows lie in the logits, its bonus row last: the resampling reads any of
    # them, so they are checked here, before the walk writes
    cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", R + 1, "")
    for r in range(R):
        start = iget(cu, r)
        end = iget(cu, r + 1)
        if not 0 <= start < end <= L:
            raise ValueError(expected("cu_num_logits_ptr", f"offsets with 0 <= [r] < [r + 1] <= "
                                      f"{L} (each request's rows, at least its bonus row)",
                                      f"[{r}] = {start}, [{r + 1}] = {end}"))
    eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", L,
                         "one per logits row")
    n_temp = _numel(temp_ptr, "temp_ptr", M_REAL)
    n_seed = _numel(seed_ptr, "seed_ptr", M_INDEX)
    n_pos = _numel(pos_ptr, "pos_ptr", M_INDEX)
    if n_pos < L:
        raise ValueError(expected("pos_ptr", f"at least {L} elements (one per logits row)", n_pos))
    for r in range(L):
        start = iget(eim, r)
        if start < 0 or start >= n_temp or start >= n_seed:
            raise ValueError(expected("expanded_idx_mapping_ptr",
                                      f"request slots in [0, {min(n_temp, n_seed)}) (temp_ptr's "
                                      f"and seed_ptr's length)", f"[{r}] = {start}"))
    if process:
        required(processed_ptr, "processed_ptr", "with top_k_ptr or top_p_ptr")
        _table(target_logits_ptr, "target_logits_ptr", M_LOGITS, 2, _stride0(target_logits_ptr),
               "target_logits_ptr.stride(0)", None, "", &z.raw)
        z.width = z.raw.cols
        # a contiguous [L, width] fp32 tensor apart from the logits: read from its view (the
        # attribute reads, several a call, only for the message of a tensor refused)
        z.proc = <float*>check_tensor(processed_ptr, "processed_ptr", M_FLOAT32, -2, NULL, shp)
        if (shp[1] != 2 or shp[2] != z.width or shp[0] != L * z.width
                or (z.width == 0 and processed_ptr.shape[0] != L)):
            raise ValueError(expected("processed_ptr",
                                      f"a contiguous tensor of target_logits_ptr's shape "
                                      f"{tuple(target_logits_ptr.shape)}",
                                      f"shape {tuple(getattr(processed_ptr, 'shape', ()))}"))
        if L * z.width > 0 and <const char*>z.proc == z.raw.p:
            raise ValueError(expected("processed_ptr", "a buffer apart from target_logits_ptr",
                                      "the same memory"))
        z.eim = eim
        _real(temp_ptr, "temp_ptr", 0, "", &z.temp)
        if not is_none(top_k_ptr):
            z.kp = check_tensor(top_k_ptr, "top_k_ptr", M_INDEX, -1, &kcode, shp)
            n_k = shp[0]
            z.kwide = kcode == DT_INT64
        if not is_none(top_p_ptr):
            z.pp = check_tensor(top_p_ptr, "top_p_ptr", M_FLOAT32 | M_FLOAT64, -1, &pcode, shp)
            n_p = shp[0]
            z.pdbl = pcode == DT_FLOAT64
        for r in range(L):                  # any row may be reached: each one's k and p
            start = iget(eim, r)
            if z.kp != NULL:
                if start >= n_k:
                    raise ValueError(expected("top_k_ptr", f"an entry for request slot {start}",
                                              f"{n_k} elements"))
                check_k_at(z.kp, z.kwide, start, "top_k_ptr")
            if z.pp != NULL:
                if start >= n_p:
                    raise ValueError(expected("top_p_ptr", f"an entry for request slot {start}",
                                              f"{n_p} elements"))
                check_p_at(z.pp, z.pdbl, start, "top_p_ptr")
        z.raw.by_temp = by_temp
        by_temp = False                     # the programs read the processed rows
        target_logits_ptr = processed_ptr
    NB = (V + 8191) // 8192                 # vLLM's VOCAB_BLOCK_SIZE and RESAMPLE_BLOCK_SIZE
    padded = _next_pow2(NB)
    RNB = (V + 1023) // 1024
    rpadded = _next_pow2(RNB)
    _local_logits_stats(
        target_local_argmax_ptr, _stride0(target_local_argmax_ptr), target_local_max_ptr,
        _stride0(target_local_max_ptr), target_local_sumexp_ptr,
        _stride0(target_local_sumexp_ptr), draft_local_max_ptr, _stride0(draft_local_max_ptr),
        draft_local_sumexp_ptr, _stride0(draft_local_sumexp_ptr), target_logits_ptr,
        _stride0(target_logits_ptr), draft_logits_ptr, _stride(draft_logits_ptr, 0),
        _stride(draft_logits_ptr, 1), None, expanded_idx_mapping_ptr, expanded_local_pos_ptr,
        temp_ptr, V, K, False, 8192, has_draft, (L, NB), &st)
    st.tgt.by_temp = by_temp
    _rejection(
        sampled_ptr, _stride0(sampled_ptr), num_sampled_ptr, target_rejected_logsumexp_ptr,
        draft_rejected_logsumexp_ptr, target_logits_ptr, _stride0(target_logits_ptr),
        target_local_argmax_ptr, _stride0(target_local_argmax_ptr), target_local_max_ptr,
        _stride0(target_local_max_ptr), target_local_sumexp_ptr,
        _stride0(target_local_sumexp_ptr), draft_sampled_ptr, draft_logits_ptr,
        _stride(draft_logits_ptr, 0), _stride(draft_logits_ptr, 1), None, draft_local_max_ptr,
        _stride0(draft_local_max_ptr), draft_local_sumexp_ptr, _stride0(draft_local_sumexp_ptr),
        cu_num_logits_ptr, idx_mapping_ptr, temp_ptr, seed_ptr, pos_ptr, None, None, None, 0,
        None, None, NB, padded, has_draft, False, False, None, False, (R,), &rj)
    rj.g.tgt.by_temp = by_temp
    # the resampling tables: checked here, as the launch after the walk checks them again
    _table(resampled_local_argmax_ptr, "resampled_local_argmax_ptr", M_INDEX, 2,
           _stride0(resampled_local_argmax_ptr), "resampled_local_argmax_ptr.stride(0)", None, "",
           &rtab)
    _table(resampled_local_max_ptr, "resampled_local_max_ptr", M_REAL, 2,
           _stride0(resampled_local_max_ptr), "resampled_local_max_ptr.stride(0)", None, "",
           &rtab2)
    if fp64 and rtab2.code != DT_FLOAT64:
        raise ValueError(expected("resampled_local_max_ptr", "float64 with USE_FP64", "float32"))
    for r in range(R):
        if not _holds(&rtab, r, 0, RNB):
            _need(&rtab, "resampled_local_argmax_ptr", r, 0, RNB, f"row {r}'s {RNB} blocks")
        if not _holds(&rtab2, r, 0, RNB):
            _need(&rtab2, "resampled_local_max_ptr", r, 0, RNB, f"row {r}'s {RNB} blocks")
    _no_overlap_rows(&rtab, "resampled_local_argmax_ptr", "resampled_local_argmax_ptr.stride(0)",
                     R, RNB)
    _no_overlap_rows(&rtab2, "resampled_local_max_ptr", "resampled_local_max_ptr.stride(0)", R,
                     RNB)
    if R == 0:
        return
    # the work in element-visits (threads_for's unit): a walked row costs several a value -- its
    # statistics' exponentials, the draw's hashes, with top-k/top-p its copy and the mask's
    # passes -- so one request's 128k row is worth a team, as it is, on any calibration
    nt = threads_for(ROW_VISITS * R * V)
    z.st = &st
    z.team = 1
    z.stream = process and L * z.width * 4 > STREAM_BYTES     # z.width: set with processing
    # the walks where a row kept to one token is read at that token and its draft's alone: a
    # one-hot draft's test (no draft probabilities), a sampled row drawn from its lanes (no
    # USE_FP64), no block verification, synthetic rates or FLy
    cdef bint lean_walk = (not has_draft and not fp64 and not rj.block and not rj.synthetic
                           and rj.fly == 0)
    z.peek = (process and z.raw.code == DT_FLOAT32
              and (L * z.width * 4 <= PEEK_BYTES or z.stream or lean_walk))
    z.lean = z.peek and lean_walk
    z.ds = rj.ds
    z.nds = min(_numel(draft_sampled_ptr, "draft_sampled_ptr", M_INDEX), L)
    if nt > 1 and R >= nt:
        outer = nt
    elif nt > 1:
        z.team = _team(ROW_VISITS * V, NB)
    scratch = <float*>malloc(max(outer, z.team) * 8192 * sizeof(float))
    rbuf = <float*>malloc(outer * padded * sizeof(float))
    if process:
        done = <unsigned char*>calloc(L if L > 0 else 1, 1)
        if has_draft:
            drafted = <unsigned char*>calloc(L if L > 0 else 1, 1)
        nch = (z.width + 8191) // 8192 if z.width > 0 else 1
        # a walking thread's each; a team's run (_run_rows) alternates two rows'
        cmax = <float*>malloc(max(outer, 2) * nch * sizeof(float))
        cnan = <int*>malloc(max(outer, 2) * nch * sizeof(int))
        single = <int64_t*>malloc((L if L > 0 else 1) * sizeof(int64_t))
    if (scratch == NULL or rbuf == NULL
            or (process and (done == NULL or cmax == NULL or cnan == NULL or single == NULL
                             or (has_draft and drafted == NULL)))):
        free(scratch)
        free(rbuf)
        free(done)
        free(drafted)
        free(cmax)
        free(cnan)
        free(single)
        raise MemoryError()
    if process:
        for r in range(L):
            single[r] = -1
    z.scratch = scratch
    z.done = done
    z.drafted = drafted
    st.drafted = drafted                    # the walk's statistics skip blocks computed ahead
    z.cmax = cmax
    z.cnan = cnan
    z.single = single
    rj.lazy = &z
    cdef bint own_arenas = False
    try:
        if process and (z.kp != NULL or z.pp != NULL):
            z.arenas = _take_arenas(outer, V, &own_arenas)
        with nogil:
            if outer > 1:
                for r in prange(R, num_threads=outer, schedule="dynamic"):
                    _walk(&rj, &z, r, rbuf + _thread_id() * padded)
            else:
                for r in range(R):
                    _walk(&rj, &z, r, rbuf)
    finally:
        free(scratch)
        free(rbuf)
        free(done)
        free(drafted)
        st.drafted = NULL
        free(cmax)
        free(cnan)
        _give_arenas(z.arenas, outer, own_arenas)
    # the resampling and the insert, from the arguments as checked above: what their launches
    # would check again holds by those checks, but for the rows the walk picked -- a rejected
    # draft's row of the draft logits, the slot after the accepted drafts -- checked here; where
    # one fails, the launches themselves run and refuse it, naming the argument
    cdef Res res
    try:
        _res_after_walk(&res, &rj, &st, &rtab, &rtab2, V, RNB, has_draft, fp64)
        res.single = single                 # the rows masked to one lane (NULL: none)
        if _walk_rows_held(&res, &rj.sampled, R):
            _res_run(&res, R, True)
            with nogil:
                _insert_rows(&rj.sampled, rj.rej, rj.cu, st.eim, &rj.temp, &rtab, &rtab2, R,
                             RNB)
            return
    finally:
        free(single)
    _resample(
        resampled_local_argmax_ptr, _stride0(resampled_local_argmax_ptr),
        resampled_local_max_ptr, _stride0(resampled_local_max_ptr), target_logits_ptr,
        _stride0(target_logits_ptr), target_rejected_logsumexp_ptr, draft_logits_ptr,
        _stride(draft_logits_ptr, 0), _stride(draft_logits_ptr, 1), None,
        draft_rejected_logsumexp_ptr, num_sampled_ptr, cu_num_logits_ptr,
        expanded_idx_mapping_ptr, draft_sampled_ptr, temp_ptr, seed_ptr, pos_ptr, None, None, 0,
        None, None, 0, 0, V, 1024, has_draft, fp64, False, None, False, False, False, (R, RNB),
        by_temp, True)
    insert_resampled_kernel(
        sampled_ptr, _stride0(sampled_ptr), num_sampled_ptr, resampled_local_argmax_ptr,
        _stride0(resampled_local_argmax_ptr), resampled_local_max_ptr,
        _stride0(resampled_local_max_ptr), RNB, cu_num_logits_ptr, expanded_idx_mapping_ptr,
        temp_ptr, rpadded, grid=(R,))


cdef void _res_after_walk(Res* a, const Rej* rj, const Stats* st, const Tab* out_arg,
                          const Tab* out_max, int64_t V, int64_t NB, bint has_draft,
                          bint fp64) noexcept:
    """The one pass's resampling arguments (vLLM 0.32's: no watermark, block verification or
    row-mapped cache; 1024-wide blocks), from the tables its rejection and statistics checked:
    the rejected steps are the walk's ``num_sampled``."""
    a.out_arg = out_arg[0]
    a.out_max = out_max[0]
    a.tgt = rj.g.tgt
    a.drf = rj.g.drf
    a.trl = rj.trl
    a.drl = rj.drl
    a.rej = rj.rej
    a.cu = rj.cu
    a.eim = st.eim
    a.ds = rj.ds
    a.seed = rj.seed
    a.pos = rj.pos
    a.temp = rj.temp
    a.V = V
    a.BS = 1024
    a.NB = NB
    a.width = 1
    a.has_draft = has_draft
    a.fp64 = fp64
    a.block = a.watermark = a.dedup = a.has_rowmap = a.skip_masked = False
    a.wm = a.skip = NULL
    a.key0 = a.key1 = 0
    a.rowmap.ptr = NULL
    a.rowmap.wide = False
    a.single = NULL


cdef bint _walk_rows_held(const Res* a, const Tab* sampled, int64_t R) noexcept nogil:
    """Whether the rows the walk picked lie in their tables: each request's token slot after
    its accepted drafts in ``sampled``, and, where a drawn draft was rejected, the draft logits'
    row of its slot and step (``_resample``'s and the insert's checks of those rows; the rest of
    theirs hold by the one pass's own)."""
    cdef int64_t r, ri, start, end, rti, rs, cols = min(a.V, a.NB * a.BS) if a.V > 0 else 0
    for r in range(R):
        ri = iget(a.rej, r)
        start = iget(a.cu, r)
        end = iget(a.cu, r + 1)
        rti = start + ri
        rs = iget(a.eim, rti)
        if _ldr(a.temp, rs) == 0.0 and rti != end - 1:
            continue                # greedy: the walk stored the token, the insert counts it
        if not _holds(sampled, r, 0, ri + 1):
            return False
        if not a.has_draft or rti == end - 1 or iget(a.ds, rti + 1) < 0:
            continue
        if not _holds(&a.drf, rs, ri, cols):
            return False
    return True


# The top-k/top-p mask's scratch (a few MB per thread for a 128k row), kept between calls: fresh
# pages on every call cost more than the mask on a team, where page faults serialise. One set,
# taken by one call at a time (the GIL orders the take); a concurrent call allocates its own.
cdef void** _arena_set = NULL
cdef int _arena_count = 0
cdef Py_ssize_t _arena_width = 0
cdef bint _arena_busy = False


cdef void** _take_arenas(int n, Py_ssize_t V, bint* own) except NULL:
    """``n`` scratch arenas for rows of up to ``V`` values: the kept set when free and large
    enough (grown otherwise), else -- another call holds it -- a set of this call's own
    (``own``)."""
    global _arena_set, _arena_count, _arena_width, _arena_busy
    cdef void** arenas
    cdef int i
    if not _arena_busy and _arena_set != NULL and _arena_count >= n and _arena_width >= V:
        _arena_busy = True
        return _arena_set
    arenas = <void**>calloc(n, sizeof(void*))
    if arenas == NULL:
        raise MemoryError()
    for i in range(n):
        arenas[i] = row_scratch(V)
        if arenas[i] == NULL:
            _free_arenas(arenas, n)
            raise MemoryError("rejection_sample_fused: the top-k/top-p scratch allocation failed")
    if _arena_busy:
        own[0] = True
        return arenas
    _free_arenas(_arena_set, _arena_count)
    _arena_set = arenas
    _arena_count = n
    _arena_width = V
    _arena_busy = True
    return arenas


cdef void _free_arenas(void** arenas, int n) noexcept:
    cdef int i
    if arenas == NULL:
        return
    for i in range(n):
        free_row_scratch(arenas[i])
    free(arenas)


cdef void _give_arenas(void** arenas, int n, bint own) noexcept:
    global _arena_busy
    if arenas == NULL:
        return
    if own:
        _free_arenas(arenas, n)
    else:
        _arena_busy = False


cdef inline int64_t _next_pow2(int64_t n) noexcept:
    """``triton.next_power_of_2`` for n >= 1 (the PADDED_* launch constants)."""
    cdef int64_t p = 1
    while p < n:
        p *= 2
    return p


cdef void _walk(const Rej* rj, Lazy* z, int64_t r, float* buf) noexcept nogil:
    """Request ``r``'s walk, then (with processing) its resampled row processed for the draw."""
    _run_rows(rj, z, r)
    _run_probs(rj, z, r, _accept_ahead(rj, z, r, buf), buf)
    _rej_program(rj, r, buf)
    if z.proc != NULL:
        _lazy_row(z, iget(rj.cu, r) + iget(rj.rej, r))


cdef object _stride0(object t):
    """``t.stride(0)`` of a table the caller laid out (0 for one of no dimension)."""
    return _stride(t, 0)


cdef object _stride(object t, int d):
    if is_none(t):
        return 0
    return dim_stride(t, d)


# -- vLLM 0.34's draft logits cache (``draft_logits.py``) -----------------------------------------
#
# A batch-sharded draft logits cache (``DraftLogitsCache(sharded=True)``: each TP rank verifies
# and caches only the requests at batch positions ``b`` with ``b % NUM_SHARDS`` its rank, at
# row ``b // NUM_SHARDS``) is laid out by ``_assign_rows_kernel`` before a draft step writes it,
# and ``_stale_drafts_kernel`` marks the drafts whose row was given to another request since.

cdef int64_t _covered(object count, str name, int64_t programs, int64_t block) except? -1:
    """The entries a 1-D launch of ``programs`` blocks of ``block`` lanes handles below
    ``count``: ``min(count, programs * block)``, 0 when negative."""
    cdef int64_t n = as_int(count, name)
    if n > programs * block:
        n = programs * block
    return n if n > 0 else 0


def assign_rows_kernel(idx_mapping_ptr, shard_mapping_ptr, row_mapping_ptr,
                       inverse_row_mapping_ptr, num_reqs, NUM_SHARDS, SHARD_IDX, BLOCK_SIZE,
                       *, grid):
    """For each batch position ``b`` the grid's programs cover (``BLOCK_SIZE`` each, below
    ``num_reqs``), request slot ``s = idx_mapping[b]`` goes to rank ``b % NUM_SHARDS`` at its
    row ``b // NUM_SHARDS``: ``shard_mapping[s]`` = that rank, ``row_mapping[s]`` = the row
    where the rank is ``SHARD_IDX`` (else -1), and ``inverse_row_mapping[row] = s`` for the
    rows of ``SHARD_IDX``. A slot named twice is refused: its entries would be the last
    program's to store, in no defined order."""
    cdef int64_t G = _grid_axis(grid, 0, "grid")
    cdef int64_t shards = as_int(NUM_SHARDS, "NUM_SHARDS")
    cdef int64_t me = as_int(SHARD_IDX, "SHARD_IDX")
    cdef int64_t bs = as_int(BLOCK_SIZE, "BLOCK_SIZE")
    cdef int64_t n, b, s, most = -1, rows = 0
    cdef Py_ssize_t n_shard, n_row, n_inv, slots
    cdef IBuf idx, shard, row, inv
    cdef unsigned char* seen
    _pow2(bs, "BLOCK_SIZE")
    need_min("NUM_SHARDS", shards, 1)
    n = _covered(num_reqs, "num_reqs", G, bs)
    idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", n,
                         "one per batch position the grid covers")
    n_shard = _numel(shard_mapping_ptr, "shard_mapping_ptr", M_INDEX)
    n_row = _numel(row_mapping_ptr, "row_mapping_ptr", M_INDEX)
    n_inv = _numel(inverse_row_mapping_ptr, "inverse_row_mapping_ptr", M_INDEX)
    shard = index_at_least(shard_mapping_ptr, "shard_mapping_ptr", 0)
    row = index_at_least(row_mapping_ptr, "row_mapping_ptr", 0)
    inv = index_at_least(inverse_row_mapping_ptr, "inverse_row_mapping_ptr", 0)
    slots = min(n_shard, n_row)
    seen = <unsigned char*>calloc(slots if slots > 0 else 1, 1)
    if seen == NULL:
        raise MemoryError()
    try:
        for b in range(n):
            s = iget(idx, b)
            if s < 0 or s >= slots:
                raise ValueError(expected(f"idx_mapping_ptr[{b}]", f"a request slot in [0, "
                                          f"{slots}) (shard_mapping_ptr and row_mapping_ptr "
                                          f"hold {n_shard} and {n_row})", s))
            if seen[s]:
                raise ValueError(expected(f"idx_mapping_ptr[{b}]", "a slot no other batch "
                                          "position names", f"slot {s} again"))
            seen[s] = 1
            most = s if s > most else most
            if b % shards == me:
                rows = b // shards + 1
    finally:
        free(seen)
    if rows > n_inv:
        raise ValueError(expected("inverse_row_mapping_ptr", f"at least {rows} elements (a row "
                                  f"per batch position of rank {me})", n_inv))
    _disjoint(shard, row, inv, most + 1, rows, idx, n)
    with nogil:
        for b in range(n):
            s = iget(idx, b)
            iset(shard, s, b % shards)
            if b % shards == me:
                iset(row, s, b // shards)
                iset(inv, b // shards, s)
            else:
                iset(row, s, -1)


cdef inline Py_ssize_t _bytes(IBuf b, int64_t count) noexcept:
    return count * (8 if b.wide else 4) if count > 0 else 0


cdef int _disjoint(IBuf shard, IBuf row, IBuf inv, int64_t slots, int64_t rows, IBuf idx,
                   int64_t n) except -1:
    """The three tables written may not overlap one another nor the request slots read: what
    a program reads or stores would depend on the order the programs ran in."""
    no_overlap("shard_mapping_ptr", shard.ptr, _bytes(shard, slots), "idx_mapping_ptr", idx.ptr,
               _bytes(idx, n))
    no_overlap("row_mapping_ptr", row.ptr, _bytes(row, slots), "idx_mapping_ptr", idx.ptr,
               _bytes(idx, n))
    no_overlap("inverse_row_mapping_ptr", inv.ptr, _bytes(inv, rows), "idx_mapping_ptr", idx.ptr,
               _bytes(idx, n))
    no_overlap("row_mapping_ptr", row.ptr, _bytes(row, slots), "shard_mapping_ptr", shard.ptr,
               _bytes(shard, slots))
    no_overlap("inverse_row_mapping_ptr", inv.ptr, _bytes(inv, rows), "shard_mapping_ptr",
               shard.ptr, _bytes(shard, slots))
    no_overlap("inverse_row_mapping_ptr", inv.ptr, _bytes(inv, rows), "row_mapping_ptr", row.ptr,
               _bytes(row, slots))
    return 0


cdef inline int64_t _cache_row(IBuf rowmap, bint mapped, int64_t s) noexcept nogil:
    """vLLM's ``draft_logits_row``: request slot ``s``'s row of the draft logits cache -- the
    slot itself (a replicated cache), else ``row_mapping[s]``, -1 for a slot < 0."""
    if not mapped:
        return s
    return iget(rowmap, s) if s >= 0 else -1


def stale_drafts_kernel(stale_ptr, expanded_idx_mapping_ptr, expanded_local_pos_ptr,
                        row_mapping_ptr, inverse_row_mapping_ptr, num_logits, BLOCK_SIZE, *,
                        grid):
    """For each logits row ``t`` the grid's programs cover (``BLOCK_SIZE`` each, below
    ``num_logits``): ``stale[t]`` = a draft row (local position > 0) whose request slot ``s``
    has no cache row here, or whose row was last given to another slot
    (``inverse_row_mapping[row] != s``). ``row_mapping_ptr`` None: the slot is its row."""
    cdef int64_t G = _grid_axis(grid, 0, "grid")
    cdef int64_t bs = as_int(BLOCK_SIZE, "BLOCK_SIZE")
    cdef int64_t n, t, s, r, holder
    cdef Py_ssize_t n_map = 0, n_inv
    cdef Py_ssize_t shp[1]
    cdef IBuf eim, elp, rowmap, inv
    cdef bint mapped = not is_none(row_mapping_ptr)
    cdef char* stale
    _pow2(bs, "BLOCK_SIZE")
    n = _covered(num_logits, "num_logits", G, bs)
    eim = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", n,
                         "one per logits row the grid covers")
    elp = index_at_least(expanded_local_pos_ptr, "expanded_local_pos_ptr", n,
                         "one per logits row the grid covers")
    rowmap.ptr = NULL
    rowmap.wide = False
    if mapped:
        n_map = _numel(row_mapping_ptr, "row_mapping_ptr", M_INDEX)
        rowmap = index_at_least(row_mapping_ptr, "row_mapping_ptr", 0)
    n_inv = _numel(inverse_row_mapping_ptr, "inverse_row_mapping_ptr", M_INDEX)
    inv = index_at_least(inverse_row_mapping_ptr, "inverse_row_mapping_ptr", 0)
    for t in range(n):
        s = iget(eim, t)
        if mapped and s >= n_map:
            raise ValueError(expected(f"expanded_idx_mapping_ptr[{t}]", f"a request slot below "
                                      f"{n_map} (row_mapping_ptr's length)", s))
        r = _cache_row(rowmap, mapped, s)
        if r >= n_inv:
            raise ValueError(expected(f"row_mapping_ptr[{s}]" if mapped
                                      else f"expanded_idx_mapping_ptr[{t}]",
                                      f"a cache row below {n_inv} (inverse_row_mapping_ptr's "
                                      f"length)", r))
    stale = check_tensor(stale_ptr, "stale_ptr", M_BYTE, -1, NULL, shp)
    if shp[0] < n:
        raise ValueError(expected("stale_ptr", f"at least {n} elements (one per logits row the "
                                  f"grid covers)", shp[0]))
    no_overlap("stale_ptr", stale, n, "expanded_idx_mapping_ptr", eim.ptr, _bytes(eim, n))
    no_overlap("stale_ptr", stale, n, "expanded_local_pos_ptr", elp.ptr, _bytes(elp, n))
    no_overlap("stale_ptr", stale, n, "row_mapping_ptr", rowmap.ptr, _bytes(rowmap, n_map))
    no_overlap("stale_ptr", stale, n, "inverse_row_mapping_ptr", inv.ptr, _bytes(inv, n_inv))
    with nogil:
        for t in range(n):
            s = iget(eim, t)
            r = _cache_row(rowmap, mapped, s)
            holder = iget(inv, r) if r >= 0 else -1
            stale[t] = iget(elp, t) > 0 and (r < 0 or holder != s)
