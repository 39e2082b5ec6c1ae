# cython: language_level=3
"""CPU versions of vLLM's four rejection-sampling Triton kernels.

``expand_kernel``, ``rejection_greedy_sample_kernel``, ``rejection_random_sample_kernel`` and
``sample_recovered_tokens_kernel`` take the Triton kernels' arguments under the same names and in
the same order (so ``kernel[grid](**kwargs)`` launches and positional launches both bind), plus the
launch-only constexprs, which are accepted and either honoured or derived.

Every function is a thin validating wrapper around a ``nogil`` loop:

1. *Validate everything first* -- tensor types, dtypes, CPU, contiguity, that every element the
   kernel reads or writes lies inside its buffer, the cumulative offsets (non-negative,
   non-decreasing, each request within ``max_spec_len``), the token ids the kernel indexes memory
   with, and that the output does not overlap the buffers whose values steer indexing. A
   violation raises ``TypeError``/``ValueError``/``IndexError`` naming the argument, before
   anything is written.
2. *Then write*, in place, at the caller's dtypes: int32/int64 buffers are read and written directly
   (``IBuf``), never through int64 temporaries.

Numerics follow the Triton source: the target argmax is truncated to int32 before the greedy
compare; the random accept test divides in float32 and compares the quotient with the float64
uniform in float64; recovered-token scores are ``prob * inv_q`` in ``inv_q``'s dtype, and the
argmax returns the lowest index among equal maxima (NaN scores never win; ``max(t - d, 0)`` maps a
NaN difference to 0 as the GPU's ``maxnum`` does).

What a launch may pass is what the Triton kernel accepts (docs/kernel_contracts.md, per argument):
a Triton kernel sees each buffer as a base pointer and computes flat offsets itself, so any
contiguous tensor holding the elements it touches is valid whatever its shape -- ``[T]`` or
``[T, 1]`` draft ids, a ``[B * (K + 1)]`` output, a 0-d bonus for one request, buffers longer than
the launch uses (their tail is never touched). The request count ``B`` is the length of the
offsets (``input_ptr`` for ``expand_kernel``: the launch grid of vLLM's callers); the token count
is ``cu[B - 1]``. Refused, naming the argument: a buffer that would be read or written out of
bounds, a dtype or device the kernel cannot honour, a non-contiguous tensor (its flat offsets would
not be its elements), offsets that decrease, and a request longer than ``max_spec_len`` (its row
would spill into the next). Arguments a mode does not read (uniforms and rates outside
SYNTHETIC_MODE, draft probs under NO_DRAFT_PROBS, rows of requests the kernel skips) are not
checked, as the kernel ignores them. Draft ids < 0 are legal (they
are rejected) and ids >= vocab are refused only where the kernel would read memory with them.
One known difference from an NVIDIA GPU: the float32 quotient of the random accept test is IEEE
(as in the Triton interpreter), while the GPU's fp32 ``/`` may be a faster, non-correctly-rounded
division, so an accept decision exactly at an ulp boundary can differ there.

Threads: loops over requests (and, for recovered tokens, over (token, vocab-chunk) units) run with
OpenMP when ``threads_for(work)`` says the work is worth a team; results never depend on the thread
count (each unit's result is written to its own slot and reduced in a fixed order).
"""
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint8_t, INT32_MIN, INT32_MAX
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY
from cpython.number cimport PyNumber_Index

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, isize, check_tensor, check_index, check_rowed,
    DT_FLOAT32, DT_FLOAT64, DT_INT32, DT_INT64,
    M_BOOL, M_FLOAT32, M_REAL, M_INDEX,
)
from kernels_cpu._checks cimport (
    Extent, as_flag, as_int, bool_at_least, expected, index_at_least, last_with_drafts,
    measure_offsets, need_count, need_min, need_rows, no_overlap, offset_start,
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

ctypedef fused expand_t:
    float
    int32_t
    int64_t

ctypedef fused score_t:
    float
    double


# ---------------------------------------------------------------------------------------------
# small shared pieces
# ---------------------------------------------------------------------------------------------

cdef struct RBuf:
    # a float32 or float64 buffer read as double: exact for both, so one loop serves both dtypes
    char* ptr
    bint wide

cdef inline double rget(RBuf b, Py_ssize_t i) noexcept nogil:
    if b.wide:
        return (<double*>b.ptr)[i]
    return (<float*>b.ptr)[i]


cdef inline RBuf _real_at_least(object t, str name, Py_ssize_t need, str why) except *:
    """A contiguous float32/float64 buffer of any shape holding at least ``need`` elements,
    read flat as double."""
    cdef RBuf b
    cdef Py_ssize_t shp[1]
    cdef int code = 0
    b.ptr = check_tensor(t, name, M_REAL, -1, &code, shp)
    need_count(name, shp[0], need, why)
    b.wide = code == DT_FLOAT64
    return b


# ---------------------------------------------------------------------------------------------
# expand_kernel
# ---------------------------------------------------------------------------------------------

cdef inline void _expand_row(expand_t* out, const expand_t* inp, IBuf cu, Py_ssize_t i,
                             expand_t rfrom, bint can_match, expand_t rto,
                             int64_t cap) noexcept nogil:
    cdef int64_t s = offset_start(cu, i), j
    cdef int64_t n = iget(cu, i) - s
    cdef expand_t v = inp[i]
    if n > cap:
        n = cap         # the Triton kernel stores tl.arange(0, MAX_NUM_TOKENS) lanes at most
    if can_match and v == rfrom:
        v = rto
    for j in range(n):
        out[s + j] = v


cdef void _expand_loop(expand_t* out, const expand_t* inp, IBuf cu, Py_ssize_t B,
                       expand_t rfrom, bint can_match, expand_t rto, int64_t cap,
                       int nt) noexcept nogil:
    cdef Py_ssize_t i
    if nt <= 1:
        for i in range(B):
            _expand_row(out, inp, cu, i, rfrom, can_match, rto, cap)
    else:
        for i in prange(B, nogil=True, num_threads=nt, schedule="static"):
            _expand_row(out, inp, cu, i, rfrom, can_match, rto, cap)


cdef int64_t _int_value(object x, str name) except? -1:
    """``x`` as an exact int64 (ints, integral floats, anything with ``__index__``)."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    try:
        return PyNumber_Index(x)
    except TypeError:
        raise TypeError(expected(name, "an integer for an integer buffer", repr(x))) from None
    except OverflowError:
        raise ValueError(expected(name, "a value that fits in int64", repr(x))) from None


cdef float _float_value(object x, str name) except? -1:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(expected(name, "a number", repr(x))) from None


def expand_kernel(output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to,
                  MAX_NUM_TOKENS=None):
    """``output[cu[i-1]:cu[i]] = input[i]``, with ``replace_from`` mapped to ``replace_to``.

    output/input: contiguous, any shape, same dtype (float32, int32 or int64); one request per
    ``input_ptr`` element (vLLM launches one program per input element); cu: int32/int64 with at
    least one entry per request. As in the Triton kernel, at most ``MAX_NUM_TOKENS`` (when given)
    elements are written per request, and ``output_ptr`` needs only the elements written (a
    longer one keeps its tail); the comparison is done in the buffer's dtype (float32 for float
    buffers, exact integers otherwise).
    """
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t B, T, cap, i, end
    cdef int64_t s0, n0
    cdef int code_o = 0, code_i = 0
    cdef Extent ext
    cdef char* po = check_tensor(output_ptr, "output_ptr", (1 << DT_FLOAT32) | M_INDEX, -1,
                                 &code_o, shp)
    T = shp[0]
    cdef char* pi = check_tensor(input_ptr, "input_ptr", (1 << DT_FLOAT32) | M_INDEX, -1,
                                 &code_i, shp)
    B = shp[0]
    if code_i != code_o:
        raise TypeError(expected("input_ptr", f"output_ptr's dtype {output_ptr.dtype}",
                                 input_ptr.dtype))
    cdef IBuf cu = index_at_least(cu_num_tokens_ptr, "cu_num_tokens_ptr", B,
                                  "one per input_ptr element")
    if MAX_NUM_TOKENS is None:
        cap = -1
    else:
        cap = as_int(MAX_NUM_TOKENS, "MAX_NUM_TOKENS")
        need_min("MAX_NUM_TOKENS", cap, 0)
    measure_offsets(cu, B, -1, NULL, -1, "cu_num_tokens_ptr", &ext)
    end = 0
    for i in range(B):
        s0 = offset_start(cu, i)
        n0 = iget(cu, i) - s0
        if cap >= 0 and n0 > cap:
            n0 = cap
        if n0 > 0 and s0 + n0 > end:
            end = s0 + n0
    need_count("output_ptr", T, end, "the tokens cu_num_tokens_ptr gives the requests")
    T = end
    cdef int isz = 4 if code_o != DT_INT64 else 8
    no_overlap("output_ptr", po, T * isz, "cu_num_tokens_ptr", cu.ptr, B * isize(cu))

    cdef int64_t f_i, t_i
    cdef float f_f, t_f
    cdef bint can_match = True
    cdef int nt = threads_for(T + B)
    if code_o == DT_FLOAT32:
        f_f = _float_value(replace_from, "replace_from")
        t_f = _float_value(replace_to, "replace_to")
        _expand_loop(<float*>po, <float*>pi, cu, B, f_f, True, t_f, T if cap < 0 else cap, nt)
        return
    f_i = _int_value(replace_from, "replace_from")
    t_i = _int_value(replace_to, "replace_to")
    if code_o == DT_INT32:
        if t_i < INT32_MIN or t_i > INT32_MAX:
            raise ValueError(expected("replace_to", "a value that fits the int32 output_ptr", t_i))
        can_match = INT32_MIN <= f_i <= INT32_MAX
        _expand_loop(<int32_t*>po, <int32_t*>pi, cu, B, <int32_t>f_i, can_match, <int32_t>t_i,
                     T if cap < 0 else cap, nt)
    else:
        _expand_loop(<int64_t*>po, <int64_t*>pi, cu, B, f_i, True, t_i, T if cap < 0 else cap, nt)


# ---------------------------------------------------------------------------------------------
# rejection_greedy_sample_kernel / rejection_random_sample_kernel
# ---------------------------------------------------------------------------------------------

cdef struct RejectArgs:
    IBuf out
    IBuf cu
    IBuf draft
    IBuf argmax         # greedy: target argmax ids
    IBuf bonus
    IBuf recovered      # random: recovered ids
    const uint8_t* is_greedy   # NULL: every request greedy (greedy kernel only)
    RBuf uniform
    RBuf rates
    const float* draft_probs   # NULL: NO_DRAFT_PROBS
    const float* target_probs
    Py_ssize_t row              # max_spec_len + 1
    int64_t vocab
    bint synthetic


cdef inline Py_ssize_t _row_span(const RejectArgs* a, Py_ssize_t i, int64_t* s,
                                 int64_t* n) noexcept nogil:
    """Request ``i``'s first draft token and draft count; returns its output row's first
    slot."""
    s[0] = offset_start(a.cu, i)
    n[0] = iget(a.cu, i) - s[0]
    return i * a.row


cdef void _greedy_row(const RejectArgs* a, Py_ssize_t i) noexcept nogil:
    cdef int64_t s, n, pos, d, tok
    cdef int32_t tgt
    cdef bint rejected = False, accepted
    if a.is_greedy != NULL and not a.is_greedy[i]:
        return
    cdef Py_ssize_t base = _row_span(a, i, &s, &n)
    for pos in range(n):
        d = iget(a.draft, s + pos)
        tgt = <int32_t>iget(a.argmax, s + pos)     # the kernel's .to(tl.int32)
        if a.synthetic:
            # -1 pads drafts that must be rejected
            accepted = rget(a.uniform, s + pos) < rget(a.rates, pos) and d >= 0
            tok = d if accepted else tgt
            rejected = not accepted
        else:
            tok = tgt
            rejected = d != tgt
        iset(a.out, base + pos, tok)
        if rejected:
            return
    iset(a.out, base + n, iget(a.bonus, i))


cdef void _random_row(const RejectArgs* a, Py_ssize_t i) noexcept nogil:
    cdef int64_t s, n, pos, d
    cdef Py_ssize_t k
    cdef double u
    cdef float dp, tp, ratio
    cdef bint accepted
    if a.is_greedy[i]:
        return
    cdef Py_ssize_t base = _row_span(a, i, &s, &n)
    for pos in range(n):
        d = iget(a.draft, s + pos)
        u = rget(a.uniform, s + pos)
        if d < 0 or (not a.synthetic and d >= a.vocab):
            # -1 pads drafts that must be rejected; ids >= vocab were refused by validation and
            # are rejected here too rather than read out of bounds
            accepted = False
        elif a.synthetic:
            accepted = u < rget(a.rates, pos)
        else:
            k = (s + pos) * a.vocab + d
            dp = 1.0 if a.draft_probs == NULL else a.draft_probs[k]
            tp = a.target_probs[k]
            # a zero draft probability is rejected (avoids NaN); the quotient is float32 and
            # is compared with the float64 uniform in float64, as the GPU kernel does
            if dp > 0:
                ratio = tp / dp
                accepted = <double>ratio >= u
            else:
                accepted = False
        if accepted:
            iset(a.out, base + pos, d)
        else:
            iset(a.out, base + pos, iget(a.recovered, s + pos))
            return
    iset(a.out, base + n, iget(a.bonus, i))


cdef void _run_rows(const RejectArgs* a, Py_ssize_t B, bint greedy, int nt) noexcept nogil:
    cdef Py_ssize_t i
    if nt <= 1:
        if greedy:
            for i in range(B):
                _greedy_row(a, i)
        else:
            for i in range(B):
                _random_row(a, i)
        return
    if greedy:
        for i in prange(B, nogil=True, num_threads=nt, schedule="static"):
            _greedy_row(a, i)
    else:
        for i in prange(B, nogil=True, num_threads=nt, schedule="static"):
            _random_row(a, i)


# Below this many elements a single-threaded greedy pass runs with the GIL held: releasing and
# re-taking it costs about as much as the pass itself (~0.1 us), for no concurrency worth having.
cdef enum:
    KEEP_GIL_WORK = 4096


cdef str _RATES_WHY = "one per draft position of the longest request"


cdef inline int _required(object t, str name, str when) except -1:
    """An argument the launch's mode reads may not be None."""
    if t is None:
        raise ValueError(expected(name, f"a tensor {when}", None))
    return 0


cdef Py_ssize_t _no_output_overlap(RejectArgs* a, Extent* e, bint draft) except -1:
    """The rows written must not overlap the offsets (nor, with ``draft``, the draft ids, which
    steer the random kernel's reads); returns the requests processed."""
    cdef Py_ssize_t B = e.req_end
    cdef Py_ssize_t n_out = e.out_end * isize(a.out)
    no_overlap("output_token_ids_ptr", a.out.ptr, n_out, "cu_num_draft_tokens_ptr", a.cu.ptr,
               B * isize(a.cu))
    if draft:
        no_overlap("output_token_ids_ptr", a.out.ptr, n_out, "draft_token_ids_ptr",
                   a.draft.ptr, e.tok_end * isize(a.draft))
    return B


cdef Py_ssize_t _check_common(RejectArgs* a, object out, object cu, object draft,
                              object is_greedy, Py_ssize_t max_spec_len, int rows,
                              Extent* e) except -1:
    """The buffers both rejection kernels index the same way, and the extent of the requests
    they process (``rows``: 1 greedy, 0 random, as ``measure_offsets``); returns B (the
    offsets' length).

    The output is read as rows of ``max_spec_len + 1`` slots from its base pointer, whatever its
    shape; its size is checked once the offsets say which rows are written. ``is_greedy`` None
    means all greedy (greedy kernel only).
    """
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n_out, n_draft, B
    cdef int code = 0
    cdef str kind
    need_min("max_spec_len", max_spec_len, 0)
    a.row = max_spec_len + 1
    a.out.ptr = check_rowed(out, "output_token_ids_ptr", M_INDEX, a.row, "max_spec_len + 1",
                            &code, &n_out)
    a.out.wide = code == DT_INT64
    a.cu = check_index(cu, "cu_num_draft_tokens_ptr", -1, shp)
    B = shp[0]
    a.draft = check_index(draft, "draft_token_ids_ptr", -1, shp)
    n_draft = shp[0]
    if is_greedy is None and rows == 1:
        a.is_greedy = NULL
    else:
        a.is_greedy = <uint8_t*>bool_at_least(is_greedy, "is_greedy_ptr", B, "one per request")
    measure_offsets(a.cu, B, max_spec_len, a.is_greedy, rows, "cu_num_draft_tokens_ptr", e)
    if n_out < e.out_end or n_draft < e.tok_end:  # (messages formatted only when raised)
        kind = "greedy" if rows == 1 else "random"
        need_count("output_token_ids_ptr", n_out, e.out_end,
                   f"rows of max_spec_len + 1 = {a.row}")
        need_count("draft_token_ids_ptr", n_draft, e.tok_end,
                   f"the draft tokens of the {kind} requests")
    return B


def rejection_greedy_sample_kernel(output_token_ids_ptr, cu_num_draft_tokens_ptr,
                                   draft_token_ids_ptr, target_argmax_ptr, bonus_token_ids_ptr,
                                   is_greedy_ptr, max_spec_len,
                                   uniform_probs_ptr=None, synthetic_conditional_rates_ptr=None,
                                   SYNTHETIC_MODE=None):
    """Greedy rejection: per greedy request, copy the target argmax up to and including the first
    draft mismatch; if every draft matched, append the bonus token at position ``n``.

    SYNTHETIC_MODE (default: whether rates are given) accepts position ``pos`` when
    ``uniform < rates[pos]`` and the draft id is >= 0. ``is_greedy_ptr`` None means all greedy.
    One request per ``cu_num_draft_tokens_ptr`` entry; every buffer may have any contiguous
    shape holding the elements the greedy requests touch (module docstring).
    """
    cdef Py_ssize_t K = as_int(max_spec_len, "max_spec_len")
    cdef RejectArgs a
    cdef Py_ssize_t B, T
    cdef Extent e
    cdef int nt
    _check_common(&a, output_token_ids_ptr, cu_num_draft_tokens_ptr, draft_token_ids_ptr,
                  is_greedy_ptr, K, 1, &e)
    T = e.tok_end
    a.argmax = index_at_least(target_argmax_ptr, "target_argmax_ptr", T,
                              "one per draft token of the greedy requests")
    a.bonus = index_at_least(bonus_token_ids_ptr, "bonus_token_ids_ptr", e.req_end,
                             "one per request")
    a.synthetic = as_flag(SYNTHETIC_MODE, "SYNTHETIC_MODE",
                          synthetic_conditional_rates_ptr is not None)
    if a.synthetic:
        _required(uniform_probs_ptr, "uniform_probs_ptr", "when SYNTHETIC_MODE is set")
        _required(synthetic_conditional_rates_ptr, "synthetic_conditional_rates_ptr",
                  "when SYNTHETIC_MODE is set")
        a.uniform = _real_at_least(uniform_probs_ptr, "uniform_probs_ptr", T,
                                   "one per draft token of the greedy requests")
        a.rates = _real_at_least(synthetic_conditional_rates_ptr,
                                 "synthetic_conditional_rates_ptr", e.most, _RATES_WHY)
    B = _no_output_overlap(&a, &e, False)
    nt = threads_for(T + B)
    if nt <= 1 and T + B <= KEEP_GIL_WORK:
        _run_rows(&a, B, True, nt)   # a few hundred ns of work: not worth a GIL hand-off
    else:
        with nogil:
            _run_rows(&a, B, True, nt)


cdef object _probs_rows(object t, str name, Py_ssize_t T, Py_ssize_t V, const float** out):
    """A float32 probability buffer read as ``T`` rows of ``vocab_size`` (``ptr + t * V + v``)."""
    cdef Py_ssize_t shp[1]
    out[0] = <const float*>check_rowed(t, name, M_FLOAT32, V, "vocab_size", NULL, shp)
    need_rows(name, shp[0], T, V, "vocab_size", t)


def rejection_random_sample_kernel(output_token_ids_ptr, cu_num_draft_tokens_ptr,
                                   draft_token_ids_ptr, draft_probs_ptr, target_probs_ptr,
                                   bonus_token_ids_ptr, recovered_token_ids_ptr,
                                   uniform_probs_ptr, is_greedy_ptr, max_spec_len,
                                   vocab_size, synthetic_conditional_rates_ptr=None,
                                   NO_DRAFT_PROBS=None, SYNTHETIC_MODE=None):
    """Random rejection: per non-greedy request, accept draft ``d`` at each position while
    ``draft_prob > 0 and target_prob / draft_prob >= uniform`` (draft_prob = 1 with
    NO_DRAFT_PROBS; in SYNTHETIC_MODE ``uniform < rates[pos]``); a draft id < 0 is rejected. The
    first rejection writes the recovered id and stops; if all are accepted the bonus token is
    appended at position ``n``.

    NO_DRAFT_PROBS defaults to ``draft_probs_ptr is None``; SYNTHETIC_MODE to whether rates are
    given. Draft ids must be < ``vocab_size`` wherever the kernel reads probabilities with them.
    """
    cdef Py_ssize_t K = as_int(max_spec_len, "max_spec_len")
    cdef Py_ssize_t V = as_int(vocab_size, "vocab_size")
    cdef RejectArgs a
    cdef Py_ssize_t B, T, i
    cdef int64_t t, end, d
    cdef Extent e
    cdef bint no_draft
    cdef int nt
    B = _check_common(&a, output_token_ids_ptr, cu_num_draft_tokens_ptr, draft_token_ids_ptr,
                      is_greedy_ptr, K, 0, &e)
    T = e.tok_end
    need_min("vocab_size", V, 0)
    a.vocab = V
    a.synthetic = as_flag(SYNTHETIC_MODE, "SYNTHETIC_MODE",
                          synthetic_conditional_rates_ptr is not None)
    no_draft = as_flag(NO_DRAFT_PROBS, "NO_DRAFT_PROBS", draft_probs_ptr is None)
    if a.synthetic:
        a.target_probs = NULL       # synthetic acceptance reads no probabilities
        a.draft_probs = NULL
    else:
        _probs_rows(target_probs_ptr, "target_probs_ptr", T, V, &a.target_probs)
        if no_draft:
            a.draft_probs = NULL
        elif draft_probs_ptr is None:
            _required(None, "draft_probs_ptr", "unless NO_DRAFT_PROBS is set")
        else:
            _probs_rows(draft_probs_ptr, "draft_probs_ptr", T, V, &a.draft_probs)
    a.bonus = index_at_least(bonus_token_ids_ptr, "bonus_token_ids_ptr", e.req_end,
                             "one per request")
    a.recovered = index_at_least(recovered_token_ids_ptr, "recovered_token_ids_ptr", T,
                                 "one per draft token of the random requests")
    a.uniform = _real_at_least(uniform_probs_ptr, "uniform_probs_ptr", T,
                               "one per draft token of the random requests")
    if a.synthetic:
        _required(synthetic_conditional_rates_ptr, "synthetic_conditional_rates_ptr",
                  "when SYNTHETIC_MODE is set")
        a.rates = _real_at_least(synthetic_conditional_rates_ptr,
                                 "synthetic_conditional_rates_ptr", e.most, _RATES_WHY)
    else:
        # the accept test reads probs[token, draft id]: every id a random request may reach
        # must be < vocab_size (ids < 0 are padding and rejected without a read)
        for i in range(B):
            if a.is_greedy[i]:
                continue
            end = iget(a.cu, i)
            t = offset_start(a.cu, i)
            while t < end:
                d = iget(a.draft, t)
                if d >= V:
                    raise IndexError(expected(f"draft_token_ids_ptr[{t}]",
                                              f"an id < vocab_size = {V}", d))
                t += 1
    B = _no_output_overlap(&a, &e, True)
    nt = threads_for(T + B)
    with nogil:
        _run_rows(&a, B, False, nt)


# ---------------------------------------------------------------------------------------------
# sample_recovered_tokens_kernel
# ---------------------------------------------------------------------------------------------

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
    _probs_rows(target_probs_ptr, "target_probs_ptr", T, V, &a.target)
    if a.mask_draft:
        a.draft = NULL
    elif draft_probs_ptr is None:
        _required(None, "draft_probs_ptr", "unless NO_DRAFT_PROBS is set")
    else:
        _probs_rows(draft_probs_ptr, "draft_probs_ptr", T, V, &a.draft)
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
