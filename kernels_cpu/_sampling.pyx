# cython: language_level=3
"""CPU versions of vLLM's rejection-sampling Triton kernels: the greedy and random rejection walks.

``rejection_greedy_sample_kernel`` and ``rejection_random_sample_kernel`` live here, their two
companions in their own modules (``expand_kernel`` in ``_expand.pyx``,
``sample_recovered_tokens_kernel`` in ``_recovered.pyx``); the rules below are all four's. Each
takes the Triton kernel's arguments under the same names and in the same order (so
``kernel[grid](**kwargs)`` launches and positional launches both bind), plus the launch-only
constexprs, which are accepted and either honoured or derived.

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
from libc.stdint cimport int32_t, int64_t, uint8_t

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, isize, check_tensor, check_index, check_rowed,
    DT_FLOAT64, DT_INT64, M_REAL, M_INDEX,
)
from kernels_cpu._checks cimport (
    Extent, as_flag, as_int, bool_at_least, expected, index_at_least, measure_offsets,
    need_count, need_min, no_overlap, offset_start, prob_rows, required,
)
from kernels_cpu._parallel cimport threads_for

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
        required(uniform_probs_ptr, "uniform_probs_ptr", "when SYNTHETIC_MODE is set")
        required(synthetic_conditional_rates_ptr, "synthetic_conditional_rates_ptr",
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
        prob_rows(target_probs_ptr, "target_probs_ptr", T, V, &a.target_probs)
        if no_draft:
            a.draft_probs = NULL
        elif draft_probs_ptr is None:
            required(None, "draft_probs_ptr", "unless NO_DRAFT_PROBS is set")
        else:
            prob_rows(draft_probs_ptr, "draft_probs_ptr", T, V, &a.draft_probs)
    a.bonus = index_at_least(bonus_token_ids_ptr, "bonus_token_ids_ptr", e.req_end,
                             "one per request")
    a.recovered = index_at_least(recovered_token_ids_ptr, "recovered_token_ids_ptr", T,
                                 "one per draft token of the random requests")
    a.uniform = _real_at_least(uniform_probs_ptr, "uniform_probs_ptr", T,
                               "one per draft token of the random requests")
    if a.synthetic:
        required(synthetic_conditional_rates_ptr, "synthetic_conditional_rates_ptr",
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
