# cython: language_level=3
"""Random rejection sampling that draws its own noise: no ``[B, V]`` exponential tensor.

vLLM's random path samples each recovered token as ``argmax_v prob[v] / E[v]`` with ``E`` a
materialised ``[B, V]`` Exp(1) tensor (``q.exponential_()``); on CPU drawing that tensor is 85-90 %
of the step. The kernels here sample with ``_race``'s exponential race, whose noise is drawn
inside the vocabulary loop (``_race.pyx`` says why the block race is exact and which Philox
counters each draw uses), so the only memory traffic is one read of each probability row that
is actually needed. This module validates a launch and walks its drafts; the race does the
sampling, under OpenMP, with results that do not depend on threads or chunking.

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


Semantics that follow vLLM's kernels: a draft id < 0 is rejected; accept when ``draft_prob > 0``
and ``target_prob / draft_prob >= u`` (ratio and compare in float64; ``draft_prob = 1`` without
draft probs); the recovered distribution is ``max(target - draft, 0)``, or ``target`` with the
draft id masked when there are no draft probs (negative or NaN entries count as 0); an all-zero row
yields id 0. Greedy rows take the first maximum of their score row (the first NaN, as
``torch.argmax``).
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, isize, check_tensor, check_index, check_rowed,
    DT_FLOAT64, DT_INT64, M_FLOAT32, M_INDEX, M_INT64, M_REAL,
)
from kernels_cpu._checks cimport (
    Extent, as_flag, as_int, bool_at_least, expected, index_at_least, last_with_drafts, measure_offsets,
    need_count, need_min, need_rows, no_overlap, offset_start,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._race cimport (
    Job, KIND_ARGMAX, _accept_uniform, _accepts, _recover_job, _row_norm, _run_jobs, _set_key,
    argmax_row, expf32, race_logits,
)

#: blocks per parallel work item; any value gives the same tokens (tests vary it)
cdef Py_ssize_t _chunk_blocks = 64


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
                _recover_job(&jobs[k], t + k * V, q + k * V if q != NULL else NULL,
                             -1 if q != NULL else iget(draft, k))
                jobs[k].token = 0
    nt = threads_for(T * V)
    with nogil:
        rc = _run_jobs(jobs, T, V, nt, _chunk_blocks)
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
                        _recover_job(&jobs[nj], t + row * V, q + row * V if q != NULL else NULL,
                                     -1 if q != NULL else d)
                    nj += 1
                    break
                a += 1
            acc[r] = a
    nt = threads_for(nj * V)
    with nogil:
        rc = _run_jobs(jobs, nj, V, nt, _chunk_blocks)
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
            tok = argmax_row(lrow, V)
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
            tp = expf32(lrow[d] - m) * invz
            ok = _accepts(u, dp, tp)
        if ok:
            iset(out, r * width + j, d)
            continue
        if is_g:
            tok = argmax_row(lrow, V)
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
        o[i] = expf32(p[i])
    return res

def _set_chunk_blocks(n):
    """Blocks per parallel work item (tests: results must not depend on it). Returns the old."""
    global _chunk_blocks
    if n < 1:
        raise ValueError(expected("n", ">= 1", n))
    old = _chunk_blocks
    _chunk_blocks = n
    return old
