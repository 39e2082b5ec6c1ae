# cython: language_level=3
"""The whole speculative sampling step, each sampled row of the logits read once, where it lies.

vLLM's ``RejectionSampler.forward`` on CPU gathers the bonus and the target rows of ``logits``
into new tensors, converts the targets to float32 and clones them, runs a full ``Sampler`` over
the bonus rows (temperature, top-k/top-p, a noise draw for every element), divides the targets
by their temperature, masks them to top-k/top-p (a sort of every row), and only then walks the
drafts -- six passes over ``[T + B, V]`` floats before the first accept test.

``spec_sample_step`` walks each request once. A row is touched only when the walk reaches it:

* it is read from ``logits`` through ``target_logits_indices``/``bonus_logits_indices`` (any
  row stride, fp32/fp16/bf16) and divided by the request's temperature into a float32 working
  row of this thread (``V`` floats: it stays in the core's cache for what follows);
* the request's top-k/top-p mask is applied to that working row (``_topk_topp``'s row mask:
  selection, not a sort; the kept-set rules are written there), so the threshold never costs a
  pass over the logits in memory and nothing is written to ``logits``;
* the accept test reads ``p[draft]`` of the masked, normalised row; a rejection draws its
  recovered token from the same working row by ``_race``'s exponential race (same Philox
  stream, same exactness argument); after the last accepted draft the bonus row is sampled the
  same way at position ``n`` of the request's stream.

Greedy requests take the first maximum of their raw rows (targets: ``is_greedy``; bonus:
``bonus_greedy`` -- vLLM decides the two with different rules, so the caller passes both), as
vLLM's argmax of the float32 rows. Rows after a request's first rejection are never read.

Semantics are vLLM's (``rejection_sample`` on ``apply_sampling_constraints``' output, and the
``Sampler`` for the bonus row): temperature divides in float32; top-k before top-p; a draft id
< 0 is rejected; accept when ``draft_prob > 0`` and ``target_prob / draft_prob >= u``; the
recovered law is ``max(p - q, 0)`` or ``p`` without the draft id (no draft probs). Requests run
in parallel above the calibrated work threshold; the tokens do not depend on the thread count.
"""
from cython.parallel cimport prange, parallel
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from kernels_cpu._buffers cimport (
    IBuf, iget, iset, isize, check_table, check_tensor, check_index, expected, is_none,
    DT_FLOAT32, DT_FLOAT64, DT_FLOAT16, DT_BFLOAT16, DT_INT64, M_FLOAT32, M_FLOAT64,
)
from kernels_cpu._checks cimport bool_at_least, index_at_least, offset_start
from kernels_cpu._fused cimport (
    StepRows, check_step_rows, no_output_overlap, _check_ids, _probs, _seeds,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._race cimport (
    _accept_uniform, _accepts, _row_norm, race_logits, argmax_row, expf32,
)
from kernels_cpu._topk_topp_rows cimport (
    check_k_at, check_p_at, free_row_scratch, mask_row_f32, row_scratch, widen_row,
)

cdef enum:
    M_LOGITS = (1 << DT_FLOAT32) | (1 << DT_FLOAT16) | (1 << DT_BFLOAT16)


cdef struct Step:
    # A validated step: every pointer checked, every index in range.
    IBuf out, cu, draft, tidx, bidx, k
    Py_ssize_t B, width, T, V, N
    const char* logits
    Py_ssize_t row_bytes     # distance between logits rows, in bytes
    int code                 # logits dtype code
    const float* q           # draft probabilities or NULL
    const float* temp        # per-request temperature or NULL (1)
    const uint8_t* greedy    # per-request: targets by argmax (NULL: none)
    const uint8_t* bgreedy   # per-request: bonus by argmax (NULL: none)
    const char* p            # per-request top-p or NULL
    bint p_dbl
    bint has_k
    const int64_t* seeds


cdef inline const char* _row(Step* a, int64_t i) noexcept nogil:
    return a.logits + i * a.row_bytes


cdef int64_t _greedy_token(Step* a, const char* src, float* buf) noexcept nogil:
    """First maximum of a raw row (fp16/bf16 widened first: torch argmaxes the float32 row)."""
    if a.code == DT_FLOAT32:
        return argmax_row(<const float*>src, a.V)
    widen_row(src, a.code, a.V, buf)
    return argmax_row(buf, a.V)


cdef void _load(Step* a, Py_ssize_t r, const char* src, float* buf, void* tk) noexcept nogil:
    """``buf`` = the row divided by request ``r``'s temperature, masked to its top-k/top-p."""
    cdef Py_ssize_t i, V = a.V
    cdef float t = a.temp[r] if a.temp != NULL else 1.0
    cdef const float* x
    cdef int64_t k = iget(a.k, r) if a.has_k else V
    cdef double p = 1.0
    if a.p != NULL:
        p = (<const double*>a.p)[r] if a.p_dbl else (<const float*>a.p)[r]
    if a.code == DT_FLOAT32:
        x = <const float*>src
        if t == 1.0:
            memcpy(buf, x, V * sizeof(float))
        else:
            for i in range(V):
                buf[i] = x[i] / t
    else:
        widen_row(src, a.code, V, buf)
        if t != 1.0:
            for i in range(V):
                buf[i] = buf[i] / t
    if k < V or p < 1.0:
        mask_row_f32(buf, V, k, p, tk)


cdef void _walk(Step* a, Py_ssize_t r, float* buf, void* tk) noexcept nogil:
    """Request ``r``: its drafts until the first rejection, then its recovered or bonus token."""
    cdef Py_ssize_t s = offset_start(a.cu, r)
    cdef Py_ssize_t n = iget(a.cu, r) - s
    cdef Py_ssize_t j, t, V = a.V, base = r * a.width
    cdef bint g = a.greedy != NULL and a.greedy[r] != 0
    cdef bint ok, loaded
    cdef int64_t d, tok
    cdef const char* src
    cdef const float* qrow
    cdef float m = 0, invz = 1
    cdef double u, dp, tp
    for j in range(n):
        t = s + j
        d = iget(a.draft, t)
        src = _row(a, iget(a.tidx, t))
        if g:
            tok = _greedy_token(a, src, buf)
            iset(a.out, base + j, tok)
            if tok != d:
                return
            continue
        u = _accept_uniform(a.seeds, r, <uint32_t>j)
        qrow = a.q + t * V if a.q != NULL else NULL
        loaded = False
        ok = False
        if d >= 0:
            _load(a, r, src, buf, tk)
            _row_norm(buf, V, &m, &invz)
            loaded = True
            dp = qrow[d] if qrow != NULL else 1.0
            tp = expf32(buf[d] - m) * invz
            ok = _accepts(u, dp, tp)
        if ok:
            iset(a.out, base + j, d)
            continue
        if not loaded:
            _load(a, r, src, buf, tk)
            _row_norm(buf, V, &m, &invz)
        tok = race_logits(a.seeds, r, <uint32_t>j, buf, qrow, -1 if qrow != NULL else d, m,
                          invz, V)
        iset(a.out, base + j, tok)
        return
    src = _row(a, iget(a.bidx, r))
    if a.bgreedy != NULL and a.bgreedy[r] != 0:
        tok = _greedy_token(a, src, buf)
    else:
        _load(a, r, src, buf, tk)
        _row_norm(buf, V, &m, &invz)
        tok = race_logits(a.seeds, r, <uint32_t>n, buf, NULL, -1, m, invz, V)
    iset(a.out, base + n, tok)


cdef int _run(Step* a, int nt) noexcept nogil:
    """Walk every request on up to ``nt`` threads; returns -1 when a thread's working memory
    could not be allocated."""
    cdef Py_ssize_t r
    cdef float* buf = NULL
    cdef void* tk = NULL
    cdef int failed[1]     # shared by the threads (a scalar assigned in the block is private)
    failed[0] = 0
    if a.B == 0:
        return 0
    if nt > a.B:
        nt = <int>a.B
    if nt <= 1:
        buf = <float*>malloc((a.V if a.V > 0 else 1) * sizeof(float))
        tk = row_scratch(a.V)
        if buf == NULL or tk == NULL:
            failed[0] = 1
        else:
            for r in range(a.B):
                _walk(a, r, buf, tk)
        free(buf)
        free_row_scratch(tk)
    else:
        with parallel(num_threads=nt):
            buf = <float*>malloc((a.V if a.V > 0 else 1) * sizeof(float))
            tk = row_scratch(a.V)
            if buf == NULL or tk == NULL:
                failed[0] = 1
            for r in prange(a.B, schedule="dynamic"):
                if buf != NULL and tk != NULL:
                    _walk(a, r, buf, tk)
            free(buf)
            free_row_scratch(tk)
    return -1 if failed[0] else 0


cdef int _check_rows(IBuf idx, Py_ssize_t n, Py_ssize_t N, str name) except -1:
    """Row indices into ``logits`` must lie in ``[0, N)``."""
    cdef Py_ssize_t i
    cdef int64_t v
    for i in range(n):
        v = iget(idx, i)
        if v < 0 or v >= N:
            raise IndexError(expected(f"{name}[{i}]", f"a row of logits in [0, {N})", v))
    return 0


cdef int _check_step(Step* a, output_token_ids, logits, target_logits_indices,
                     bonus_logits_indices, cu_num_draft_tokens, draft_token_ids, draft_probs,
                     temperature, is_greedy, bonus_greedy, top_k, top_p, seeds,
                     max_spec_len) except -1:
    cdef Py_ssize_t shp[2]
    cdef Py_ssize_t r, rstride
    cdef int code = 0
    cdef const float* tp
    cdef StepRows rows
    check_step_rows(&rows, output_token_ids, cu_num_draft_tokens, draft_token_ids, max_spec_len)
    a.out, a.cu, a.draft = rows.out, rows.cu, rows.draft
    a.B, a.T, a.width = rows.B, rows.T, rows.width
    cdef Py_ssize_t B = a.B
    a.logits = check_table(logits, "logits", M_LOGITS, shp, &rstride, &code)
    a.N = shp[0]
    a.V = shp[1]
    a.code = code
    a.row_bytes = rstride * (4 if code == DT_FLOAT32 else 2)
    if a.V < 1 and B > 0:
        raise ValueError(expected("logits", "at least one vocab column", "none"))
    a.tidx = index_at_least(target_logits_indices, "target_logits_indices", a.T,
                            "one per draft token")
    _check_rows(a.tidx, a.T, a.N, "target_logits_indices")
    a.bidx = index_at_least(bonus_logits_indices, "bonus_logits_indices", B, "one per request")
    _check_rows(a.bidx, B, a.N, "bonus_logits_indices")
    a.q = NULL
    if not is_none(draft_probs):
        a.q = _probs(draft_probs, "draft_probs", a.T, a.V)
    _check_ids(a.draft, a.T, a.V, "draft_token_ids")
    a.greedy = NULL
    if not is_none(is_greedy):
        a.greedy = <const uint8_t*>bool_at_least(is_greedy, "is_greedy", B, "one per request")
    a.bgreedy = NULL
    if not is_none(bonus_greedy):
        a.bgreedy = <const uint8_t*>bool_at_least(bonus_greedy, "bonus_greedy", B,
                                                  "one per request")
    a.temp = NULL
    if not is_none(temperature):
        tp = <const float*>check_tensor(temperature, "temperature", M_FLOAT32, -1, NULL, shp)
        if shp[0] < B:
            raise ValueError(expected("temperature", f"at least {B} elements (one per request)",
                                      shp[0]))
        for r in range(B):
            # read only by a request sampled at random (targets or bonus)
            if (a.greedy == NULL or not a.greedy[r] or a.bgreedy == NULL
                    or not a.bgreedy[r]) and not tp[r] > 0:
                raise ValueError(expected("temperature", "values > 0 for requests sampled at "
                                          "random", f"temperature[{r}] = {tp[r]}"))
        a.temp = tp
    a.has_k = False
    if not is_none(top_k):
        a.k = check_index(top_k, "top_k", -1, shp)
        if shp[0] < B:
            raise ValueError(expected("top_k", f"at least {B} elements (one per request)", shp[0]))
        for r in range(B):
            check_k_at(a.k.ptr, a.k.wide, r, "top_k")
        a.has_k = True
    a.p = NULL
    if not is_none(top_p):
        a.p = check_tensor(top_p, "top_p", M_FLOAT32 | M_FLOAT64, -1, &code, shp)
        a.p_dbl = code == DT_FLOAT64
        if shp[0] < B:
            raise ValueError(expected("top_p", f"at least {B} elements (one per request)", shp[0]))
        for r in range(B):
            check_p_at(a.p, a.p_dbl, r, "top_p")
    a.seeds = _seeds(seeds, "seeds", B)
    no_output_overlap(&rows, "target_logits_indices", a.tidx.ptr, a.T * isize(a.tidx))
    no_output_overlap(&rows, "bonus_logits_indices", a.bidx.ptr, B * isize(a.bidx))
    return 0


def spec_sample_step(output_token_ids, logits, target_logits_indices, bonus_logits_indices,
                     cu_num_draft_tokens, draft_token_ids, draft_probs, temperature, is_greedy,
                     bonus_greedy, top_k, top_p, seeds, max_spec_len):
    """One speculative sampling step straight from ``logits``: accept, recover, bonus.

    output_token_ids [B, max_spec_len + 1] int32/int64, pre-filled by the caller (-1); the
    emitted slots are written. logits [N, V] fp32/fp16/bf16, unit column stride, rows any
    distance apart, never written; target_logits_indices [T] and bonus_logits_indices [B]: the
    rows of each draft position and of each request's bonus token; cu_num_draft_tokens [B]
    inclusive offsets; draft_token_ids [T] (ids < 0 are rejected); draft_probs [T, V] float32
    or None (no draft probabilities: the draft id is left out of the recovered law);
    temperature [B] float32 or None (1), read for requests sampled at random (> 0 there);
    is_greedy [B] bool or None: targets by argmax; bonus_greedy [B] bool or None: bonus tokens
    by argmax; top_k [B] int32/int64 (>= 1; >= V keeps the row) or None; top_p [B]
    float32/float64 in (0, 1] or None; seeds [B, 2] int64 (key, stream) as ``_fused``'s.

    Everything is checked before the first write; errors name the argument.
    """
    cdef Step a
    _check_step(&a, output_token_ids, logits, target_logits_indices, bonus_logits_indices,
                cu_num_draft_tokens, draft_token_ids, draft_probs, temperature, is_greedy,
                bonus_greedy, top_k, top_p, seeds, max_spec_len)
    cdef int rc
    cdef int nt = threads_for((a.T + a.B) * a.V)
    with nogil:
        rc = _run(&a, nt)
    if rc != 0:
        raise MemoryError("spec_sample_step: working rows could not be allocated")
