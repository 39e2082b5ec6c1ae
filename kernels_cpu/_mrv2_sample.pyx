# cython: language_level=3
"""CPU versions of Model Runner V2's hot sampler kernels (``vllm/v1/worker/gpu/sample/``):
temperature, Gumbel sampling, min-p, penalties and the penalties' bincount.

They run on ``[tokens, V]`` float32 logits with ``V`` = 128k-256k, a handful of rows (one
request with four drafts: 5 rows) or many. Each keeps the Triton kernel's program structure --
a program is a (token, vocabulary block) tile -- and runs the tiles on an OpenMP team: the
tiles of one long row spread over the threads as well as the rows do, so no row layout leaves
threads idle. Every tile writes only its own columns (or its own per-block output slot), so the
result never depends on the thread count or the schedule.

Float arithmetic is the kernel's, operation for operation, in its dtype and order (float32
where it is float32; no contraction into FMAs, the build says ``-ffp-contract=off``). The one
place results may differ in the last bits is a transcendental: ``log`` comes from the C
library, whose float32 ``logf`` and numpy's (the Triton interpreter's) disagree in the last ulp
for about one input in five -- a Gumbel score or a min-p threshold may then differ by an ulp,
and a token only where two scores are that close.

What a launch may pass: the number of tokens comes from the grid (``grid[0]``; vLLM's buffers
are persistent and longer), the vocabulary blocks from ``grid[1]`` with the kernel's
``BLOCK_SIZE``; index buffers are int32 or int64, any mix; a request index out of its buffers,
a row or column outside a table, is refused (naming the argument) before anything is written.
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY, NAN, fabs, fabsf, fmaxf, log, logf
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from kernels_cpu._buffers cimport (
    DT_BFLOAT16, DT_FLOAT16, DT_FLOAT32, DT_FLOAT64, DT_INT32, DT_INT64, IBuf, M_FLOAT32,
    M_INDEX, M_INT32, M_REAL, check_tensor, iget, iset,
)
from kernels_cpu._checks cimport (
    as_flag, as_int, expected, index_at_least, need_count, need_min,
)
from kernels_cpu._murmur3 cimport murmur3_hash32, murmur3_uniform32, murmur3_uniform64
from kernels_cpu._mrv2_gumbel_argmax cimport (
    NOISE32_UP, NOISE64_UP, fill_noise_bounds, gumbel_block_argmax32, murmur3_prefix, noise32_of,
    noise_bucket, uniforms32_at,
)
from kernels_cpu._mrv2_rows cimport (
    M_BFLOAT16, M_FLOAT16, M_LOGITS, FRows, _block_size, _cdiv, _cols, _request, check_frows,
    load_f32, load_real, need_frows, parse_grid,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._rowmax cimport fd_first_equal


cdef enum:
    M_CACHE = M_FLOAT32 | (1 << DT_FLOAT64) | M_FLOAT16 | M_BFLOAT16
    # min-p's row chunk: two passes over a row split into chunks of this many columns, so one
    # long row spreads over the team (128k columns: 8 chunks)
    MINP_CHUNK = 16384


# -- _temperature_kernel -------------------------------------------------------------------------

cdef struct TempArgs:
    float* logits
    Py_ssize_t stride
    IBuf mapping
    const char* temp
    int temp_code
    Py_ssize_t V
    Py_ssize_t nb
    Py_ssize_t bs


cdef inline void _temperature_tile(const TempArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t t = tile // a.nb, b = tile % a.nb, c, c0, c1
    cdef float temp = load_real(a.temp, a.temp_code, iget(a.mapping, t))
    cdef float* row
    if temp == <float>0.0 or temp == <float>1.0:
        return
    c0 = b * a.bs
    c1 = c0 + a.bs if c0 + a.bs < a.V else a.V
    row = a.logits + t * a.stride
    for c in range(c0, c1):
        row[c] = row[c] / temp


def temperature_kernel(logits_ptr, logits_stride, expanded_idx_mapping_ptr, temperature_ptr,
                       vocab_size, BLOCK_SIZE, *, grid):
    """``logits[t, :] /= temperature[mapping[t]]`` in float32, except at temperature 0 (greedy)
    and 1; grid ``(tokens, vocabulary blocks of BLOCK_SIZE)``."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t N, t, last = 0, tiles, tile, cols
    cdef TempArgs a
    cdef float temp
    cdef int nt
    parse_grid(grid, 2, g)
    N = g[0]
    a.V = as_int(vocab_size, "vocab_size")
    a.bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    a.nb = g[1]
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_FLOAT32, logits_stride,
                                "logits_stride")
    a.mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                               "one per token of the grid")
    a.temp = check_tensor(temperature_ptr, "temperature_ptr", M_REAL, -1, &a.temp_code, shp)
    cols = _cols(a.V, a.nb, a.bs)
    for t in range(N):
        temp = load_real(a.temp, a.temp_code, _request(a.mapping, t, shp[0], "temperature_ptr",
                                                       "expanded_idx_mapping_ptr"))
        if temp != <float>0.0 and temp != <float>1.0:
            last = t + 1
    need_frows(&lg, "logits_ptr", last, cols, True, "the tokens the grid scales")
    if last == 0 or cols == 0:
        return
    a.logits = <float*>lg.ptr
    a.stride = lg.stride
    a.V = cols
    a.nb = _cdiv(cols, a.bs)            # blocks past the vocabulary store nothing
    tiles = last * a.nb
    nt = threads_for(last * cols)
    with nogil:
        if nt <= 1:
            for tile in range(tiles):
                _temperature_tile(&a, tile)
        else:
            for tile in prange(tiles, num_threads=nt, schedule="dynamic"):
                _temperature_tile(&a, tile)


# -- _min_p_kernel -------------------------------------------------------------------------------

cdef extern from *:
    """
    #include <math.h>
    /* The largest of x[0:n] with NaN ignored, -inf when nothing beats it: tl.maximum's
     * (maxnumf) result. Written as `x > m ? x : m` over 8 independent lanes -- a NaN x never
     * replaces a lane, m never becomes NaN -- so GCC turns it into packed max instructions
     * (x86 maxps has exactly these semantics); max is exact, so the lane split cannot change
     * the value (only which of +0/-0 is kept, which no use of it can tell apart here). */
    static float fd_max_ignoring_nan(const float* x, Py_ssize_t n) {
        float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        Py_ssize_t i, j;
        float r = -INFINITY;
        for (i = 0; i + 8 <= n; i += 8)
            for (j = 0; j < 8; j++)
                m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
        for (; i < n; i++)
            r = x[i] > r ? x[i] : r;
        for (j = 0; j < 8; j++)
            r = m[j] > r ? m[j] : r;
        return r;
    }
    /* x[c] = -inf where x[c] < t (NaN stays): an unconditional select-and-store, which
     * vectorises, instead of a branch around the store. */
    static void fd_below_to_neg_inf(float* x, Py_ssize_t n, float t) {
        Py_ssize_t i;
        for (i = 0; i < n; i++)
            x[i] = x[i] < t ? -INFINITY : x[i];
    }
    """
    float _max_ignoring_nan "fd_max_ignoring_nan"(const float* x, Py_ssize_t n) noexcept nogil
    void _below_to_neg_inf "fd_below_to_neg_inf"(float* x, Py_ssize_t n, float t) noexcept nogil


cdef struct MinPArgs:
    float* logits
    Py_ssize_t stride
    IBuf mapping
    const char* min_p
    int min_p_code
    Py_ssize_t V
    Py_ssize_t chunks
    float* partial          # [N, chunks]: each chunk's largest (NaN-ignoring) logit


cdef inline void _min_p_max(MinPArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t t = tile // a.chunks, k = tile % a.chunks, c, c1
    cdef float m = -INFINITY
    cdef const float* row
    if load_real(a.min_p, a.min_p_code, iget(a.mapping, t)) == <float>0.0:
        return
    row = a.logits + t * a.stride
    c1 = (k + 1) * MINP_CHUNK
    if c1 > a.V:
        c1 = a.V
    m = _max_ignoring_nan(row + k * MINP_CHUNK, c1 - k * MINP_CHUNK)
    a.partial[tile] = m


cdef inline void _min_p_apply(MinPArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t t = tile // a.chunks, k = tile % a.chunks, c, c1
    cdef float mp = load_real(a.min_p, a.min_p_code, iget(a.mapping, t))
    cdef float m = -INFINITY, threshold
    cdef float* row
    if mp == <float>0.0:
        return
    for c in range(a.chunks):
        m = fmaxf(a.partial[t * a.chunks + c], m)
    threshold = m + logf(mp)
    row = a.logits + t * a.stride
    c1 = (k + 1) * MINP_CHUNK
    if c1 > a.V:
        c1 = a.V
    _below_to_neg_inf(row + k * MINP_CHUNK, c1 - k * MINP_CHUNK, threshold)


def min_p_kernel(logits_ptr, logits_stride, expanded_idx_mapping_ptr, min_p_ptr, vocab_size,
                 BLOCK_SIZE, *, grid):
    """Per token with ``p = min_p[mapping[t]] != 0``: logits below ``max + log(p)`` become
    -inf (the row's largest logit, NaN ignored as ``tl.maximum`` ignores it; the threshold in
    float32). Grid ``(tokens,)``; the block size does not change the result."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t N, t, last = 0, tiles, tile
    cdef MinPArgs a
    cdef int nt
    parse_grid(grid, 1, g)
    N = g[0]
    a.V = as_int(vocab_size, "vocab_size")
    _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_FLOAT32, logits_stride,
                                "logits_stride")
    a.mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                               "one per token of the grid")
    a.min_p = check_tensor(min_p_ptr, "min_p_ptr", M_REAL, -1, &a.min_p_code, shp)
    for t in range(N):
        if load_real(a.min_p, a.min_p_code, _request(a.mapping, t, shp[0], "min_p_ptr",
                                                     "expanded_idx_mapping_ptr")) != 0:
            last = t + 1
    need_frows(&lg, "logits_ptr", last, a.V, True, "the tokens with a min-p")
    if last == 0 or a.V <= 0:
        return
    a.logits = <float*>lg.ptr
    a.stride = lg.stride
    a.chunks = _cdiv(a.V, MINP_CHUNK)
    tiles = last * a.chunks
    a.partial = <float*>malloc(tiles * sizeof(float))
    if a.partial == NULL:
        raise MemoryError()
    nt = threads_for(2 * last * a.V)
    try:
        with nogil:
            if nt <= 1 or tiles == 1:
                for tile in range(tiles):
                    _min_p_max(&a, tile)
                for tile in range(tiles):
                    _min_p_apply(&a, tile)
            else:
                for tile in prange(tiles, num_threads=nt, schedule="static"):
                    _min_p_max(&a, tile)
                for tile in prange(tiles, num_threads=nt, schedule="static"):
                    _min_p_apply(&a, tile)
    finally:
        free(a.partial)


# -- _penalties_kernel ---------------------------------------------------------------------------

cdef struct PenArgs:
    float* logits
    Py_ssize_t stride
    IBuf mapping
    IBuf token_ids
    IBuf local_pos
    const float* rep
    const float* freq
    const float* pres
    const int32_t* prompt_mask
    Py_ssize_t mask_stride
    Py_ssize_t mask_words       # cdiv(V, 32): words the kernel may load
    IBuf counts
    Py_ssize_t counts_stride
    Py_ssize_t V
    Py_ssize_t nb
    Py_ssize_t bs


cdef inline void _penalties_tile(const PenArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t t = tile // a.nb, b = tile % a.nb, c, c0, c1, k, j, n = 0
    cdef int64_t r = iget(a.mapping, t), pos, tok
    cdef float rep = a.rep[r], freq = a.freq[r], pres = a.pres[r], x, inv_rep
    cdef bint use_rep = rep != <float>1.0, out_hit, prompt_hit
    cdef int64_t cnt
    cdef int64_t* drafts = NULL
    cdef int32_t word
    cdef float* row
    if not (use_rep or freq != <float>0.0 or pres != <float>0.0):
        return
    c0 = b * a.bs
    c1 = c0 + a.bs if c0 + a.bs < a.V else a.V
    if c0 >= c1:
        return
    # the request's earlier draft tokens in this block (token_ids[t - pos + 1 .. t]), sorted:
    # each adds one to its column's count, as the kernel's loop over prev_pos does
    pos = iget(a.local_pos, t)
    if pos > 0:
        drafts = <int64_t*>malloc(pos * sizeof(int64_t))
        if drafts == NULL:
            return                      # not reached in practice; validated sizes are small
        for k in range(pos):
            tok = iget(a.token_ids, t - pos + k + 1)
            if c0 <= tok < c1:
                j = n
                while j > 0 and drafts[j - 1] > tok:
                    drafts[j] = drafts[j - 1]
                    j -= 1
                drafts[j] = tok
                n += 1
    row = a.logits + t * a.stride
    # 1.0 / scale is 1.0 / rep where the token was seen and 1.0 / 1.0 = 1.0 elsewhere: one
    # division per tile instead of one per element, the same float32 values
    inv_rep = <float>1.0 / rep
    k = 0
    cdef const int32_t* counts32 = (<const int32_t*>a.counts.ptr) + r * a.counts_stride
    cdef const int64_t* counts64 = (<const int64_t*>a.counts.ptr) + r * a.counts_stride
    cdef bint wide = a.counts.wide
    for c in range(c0, c1):
        cnt = counts64[c] if wide else counts32[c]
        while k < n and drafts[k] == c:
            cnt += 1
            k += 1
        if not wide:
            cnt = <int32_t>cnt          # the kernel's int32 sum wraps
        out_hit = cnt > 0
        x = row[c]
        if use_rep:
            word = a.prompt_mask[r * a.mask_stride + (c >> 5)]
            prompt_hit = ((word >> (c & 31)) & 1) != 0
            if prompt_hit or out_hit:
                x = x * (inv_rep if x > <float>0.0 else rep)
            else:
                x = x * <float>1.0
        x = x - freq * <float>cnt
        x = x - pres * (<float>1.0 if out_hit else <float>0.0)
        row[c] = x
    free(drafts)


def penalties_kernel(logits_ptr, logits_stride, expanded_idx_mapping_ptr, token_ids_ptr,
                     expanded_local_pos_ptr, repetition_penalty_ptr, frequency_penalty_ptr,
                     presence_penalty_ptr, prompt_bin_mask_ptr, prompt_bin_mask_stride,
                     output_bin_counts_ptr, output_bin_counts_stride, vocab_size, BLOCK_SIZE,
                     *, grid):
    """Repetition, frequency and presence penalties, per (token, vocabulary block) of the grid,
    for tokens whose request has any: counts are the request's output counts plus its earlier
    draft tokens of this step (``token_ids[t - pos + 1 .. t]``, ``pos`` its local position);
    the repetition penalty divides positive logits and multiplies the others where the token
    is in the prompt (the packed bitmask) or the counts."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t N, t, last = 0, tiles, tile, cols, nrep, nfreq, npres, tok_end = 0
    cdef Py_ssize_t rows_needed = 0, mask_rows = 0, words
    cdef int64_t r, pos
    cdef PenArgs a
    cdef int nt
    cdef float rep
    parse_grid(grid, 2, g)
    N = g[0]
    a.V = as_int(vocab_size, "vocab_size")
    a.bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE", True)
    a.nb = g[1]
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_FLOAT32, logits_stride,
                                "logits_stride")
    a.mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                               "one per token of the grid")
    a.token_ids = index_at_least(token_ids_ptr, "token_ids_ptr", 0)
    check_tensor(token_ids_ptr, "token_ids_ptr", M_INDEX, -1, NULL, shp)
    cdef Py_ssize_t ntok = shp[0]
    a.local_pos = index_at_least(expanded_local_pos_ptr, "expanded_local_pos_ptr", 0)
    check_tensor(expanded_local_pos_ptr, "expanded_local_pos_ptr", M_INDEX, -1, NULL, shp)
    cdef Py_ssize_t npos = shp[0]
    a.rep = <const float*>check_tensor(repetition_penalty_ptr, "repetition_penalty_ptr",
                                       M_FLOAT32, -1, NULL, shp)
    nrep = shp[0]
    a.freq = <const float*>check_tensor(frequency_penalty_ptr, "frequency_penalty_ptr",
                                        M_FLOAT32, -1, NULL, shp)
    nfreq = shp[0]
    a.pres = <const float*>check_tensor(presence_penalty_ptr, "presence_penalty_ptr",
                                        M_FLOAT32, -1, NULL, shp)
    npres = shp[0]
    cdef FRows pm = check_frows(prompt_bin_mask_ptr, "prompt_bin_mask_ptr", M_INT32,
                                prompt_bin_mask_stride, "prompt_bin_mask_stride")
    cdef FRows oc = check_frows(output_bin_counts_ptr, "output_bin_counts_ptr", M_INDEX,
                                output_bin_counts_stride, "output_bin_counts_stride")
    cols = _cols(a.V, a.nb, a.bs)
    words = _cdiv(cols, 32)             # the packed words the blocks load (< cdiv(V, 32))
    for t in range(N):
        r = _request(a.mapping, t, nrep, "repetition_penalty_ptr", "expanded_idx_mapping_ptr")
        _request(a.mapping, t, nfreq, "frequency_penalty_ptr", "expanded_idx_mapping_ptr")
        _request(a.mapping, t, npres, "presence_penalty_ptr", "expanded_idx_mapping_ptr")
        rep = a.rep[r]
        if not (rep != 1 or a.freq[r] != 0 or a.pres[r] != 0) or cols == 0:
            continue
        last = t + 1
        if r + 1 > rows_needed:
            rows_needed = r + 1
        if rep != 1 and r + 1 > mask_rows:
            mask_rows = r + 1
        need_count("expanded_local_pos_ptr", npos, t + 1, "one per token with a penalty")
        pos = iget(a.local_pos, t)
        if pos > 0:
            if pos > t + 1:
                raise ValueError(expected(f"expanded_local_pos_ptr[{t}]",
                                          f"a local position <= the token index {t} + 1", pos))
            tok_end = t + 1
    need_count("token_ids_ptr", ntok, tok_end, "the draft tokens before each local position")
    need_frows(&lg, "logits_ptr", last, cols, True, "the tokens with a penalty")
    need_frows(&oc, "output_bin_counts_ptr", rows_needed, cols, False,
               "a row per request with a penalty")
    need_frows(&pm, "prompt_bin_mask_ptr", mask_rows, words, False,
               "a row of cdiv(vocab_size, 32) words per request with a repetition penalty")
    if last == 0:
        return
    a.logits = <float*>lg.ptr
    a.stride = lg.stride
    a.prompt_mask = <const int32_t*>pm.ptr
    a.mask_stride = pm.stride
    a.mask_words = words
    a.counts.ptr = oc.ptr
    a.counts.wide = oc.code == DT_INT64
    a.counts_stride = oc.stride
    a.V = cols
    a.nb = _cdiv(cols, a.bs)            # blocks past the vocabulary store nothing
    tiles = last * a.nb
    nt = threads_for(2 * last * cols)
    with nogil:
        if nt <= 1:
            for tile in range(tiles):
                _penalties_tile(&a, tile)
        else:
            for tile in prange(tiles, num_threads=nt, schedule="dynamic"):
                _penalties_tile(&a, tile)


# -- _bincount_kernel ----------------------------------------------------------------------------

def bincount_kernel(expanded_idx_mapping_ptr, all_token_ids_ptr, all_token_ids_stride,
                    prompt_len_ptr, prefill_len_ptr, prompt_bin_mask_ptr, prompt_bin_mask_stride,
                    output_bin_counts_ptr, output_bin_counts_stride, BLOCK_SIZE, *, grid):
    """Per (request of the mapping, block of BLOCK_SIZE positions) of the grid, up to the
    request's prefill length: set the prompt tokens' bits in ``prompt_bin_mask`` (32 per int32
    word) and count the output tokens (``prompt_len <= position < prefill_len``) in
    ``output_bin_counts``. The kernel's atomics commute, so one serial pass gives their result
    (the kernel runs once per new request, not per step)."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t N, nb, bs, t, j, j0, j1
    cdef int64_t r, prefill, prompt, tok
    parse_grid(grid, 2, g)
    N = g[0]
    nb = g[1]
    bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    cdef IBuf mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                                       "one per token of the grid")
    cdef FRows at = check_frows(all_token_ids_ptr, "all_token_ids_ptr", M_INDEX,
                                all_token_ids_stride, "all_token_ids_stride")
    cdef IBuf all_ids
    all_ids.ptr = at.ptr
    all_ids.wide = at.code == DT_INT64
    cdef IBuf prompt_len = index_at_least(prompt_len_ptr, "prompt_len_ptr", 0)
    check_tensor(prompt_len_ptr, "prompt_len_ptr", M_INDEX, -1, NULL, shp)
    cdef Py_ssize_t n_prompt = shp[0]
    cdef IBuf prefill_len = index_at_least(prefill_len_ptr, "prefill_len_ptr", 0)
    check_tensor(prefill_len_ptr, "prefill_len_ptr", M_INDEX, -1, NULL, shp)
    cdef Py_ssize_t n_prefill = shp[0]
    cdef FRows pm = check_frows(prompt_bin_mask_ptr, "prompt_bin_mask_ptr", M_INT32,
                                prompt_bin_mask_stride, "prompt_bin_mask_stride")
    cdef FRows oc = check_frows(output_bin_counts_ptr, "output_bin_counts_ptr", M_INDEX,
                                output_bin_counts_stride, "output_bin_counts_stride")
    cdef IBuf counts
    counts.ptr = oc.ptr
    counts.wide = oc.code == DT_INT64
    cdef int32_t* mask = <int32_t*>pm.ptr
    cdef int64_t lo, hi, plo, phi, olo, ohi, end
    # every read and write of the launch is checked first; then the writes are made
    for t in range(N):
        r = _request(mapping, t, n_prefill, "prefill_len_ptr", "expanded_idx_mapping_ptr")
        prefill = iget(prefill_len, r)
        if prefill <= 0 or nb == 0:
            continue
        prompt = iget(prompt_len, _request(mapping, t, n_prompt, "prompt_len_ptr",
                                           "expanded_idx_mapping_ptr"))
        end = _reach(prefill, nb, bs)   # one past the last position of a running block
        # prompt tokens: [0, min(prompt, end)); output tokens: [max(prompt, 0), min(prefill, end))
        hi = prompt if prompt < end else end
        if (prefill if prefill < end else end) > hi:
            hi = prefill if prefill < end else end
        need_frows(&at, "all_token_ids_ptr", r + 1, hi, False, "the request's prefill")
        plo, phi = _min_max(all_ids, r * at.stride, 0, prompt if prompt < end else end)
        olo, ohi = _min_max(all_ids, r * at.stride, prompt if prompt > 0 else 0,
                            prefill if prefill < end else end)
        if plo < 0 or olo < 0:
            raise ValueError(expected(f"all_token_ids_ptr[{r}]", "token ids >= 0",
                                      min(plo, olo)))
        if phi >= 0:
            need_frows(&pm, "prompt_bin_mask_ptr", r + 1, phi // 32 + 1, False,
                       f"the word of prompt token {phi}")
        if ohi >= 0:
            need_frows(&oc, "output_bin_counts_ptr", r + 1, ohi + 1, False,
                       f"the column of output token {ohi}")
    with nogil:
        for t in range(N):
            r = iget(mapping, t)
            prefill = iget(prefill_len, r)
            if prefill <= 0 or nb == 0:
                continue
            prompt = iget(prompt_len, r)
            end = _reach(prefill, nb, bs)
            j1 = prompt if prompt < end else end
            for j in range(0, j1):
                tok = iget(all_ids, r * at.stride + j)
                mask[r * pm.stride + tok // 32] |= <int32_t>(<uint32_t>1 << <uint32_t>(tok % 32))
            j0 = prompt if prompt > 0 else 0
            j1 = prefill if prefill < end else end
            for j in range(j0, j1):
                tok = iget(all_ids, r * at.stride + j)
                if counts.wide:
                    (<int64_t*>counts.ptr)[r * oc.stride + tok] += 1
                else:
                    (<int32_t*>counts.ptr)[r * oc.stride + tok] = <int32_t>(
                        <uint32_t>(<int32_t*>counts.ptr)[r * oc.stride + tok] + 1)


cdef inline int64_t _reach(int64_t prefill, Py_ssize_t nb, Py_ssize_t bs) noexcept nogil:
    """One past the last position the running blocks cover: a block ``b < nb`` runs while
    ``b * bs < prefill``, so ``min(nb, cdiv(prefill, bs)) * bs``."""
    cdef int64_t blocks = (prefill + bs - 1) // bs
    if blocks > nb:
        blocks = nb
    return blocks * bs


cdef inline (int64_t, int64_t) _min_max(IBuf b, Py_ssize_t base, int64_t j0,
                                        int64_t j1) noexcept nogil:
    """Smallest and largest of ``b[base + j0 : base + j1]`` (0, -1 when empty)."""
    cdef int64_t lo = 0, hi = -1, v
    cdef Py_ssize_t j
    if j1 <= j0:
        return lo, hi
    lo = iget(b, base + j0)
    hi = lo
    for j in range(j0 + 1, j1):
        v = iget(b, base + j)
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    return lo, hi


# -- _gumbel_sample_kernel -----------------------------------------------------------------------

cdef enum:
    # Bounds on the Gumbel noise the kernel can draw (module docstring of the kernel below):
    # float32, u in [2**-33, 1]: -log(-log1p(-u)) lies in [-2.82, 22.9];
    # float64, u in [2**-54, 1 - 2**-53]: -log(-log(u)) lies in [-3.62, 36.8].
    G32_LOW = -3
    G32_HIGH = 24
    G64_LOW = -4
    G64_HIGH = 40


cdef enum:
    UNIFORM_CHUNK = 256          # lanes whose uniforms one loop computes (vectorises)


cdef inline double _noise64(int64_t seed, int64_t pos, uint32_t key) noexcept nogil:
    return -log(-log(murmur3_uniform64(seed, pos, key)))


# The noise bound tables (``_mrv2_gumbel_argmax.pxd``: why a lane's uniform bounds its noise).
fill_noise_bounds()


def noise_bound_slack(Py_ssize_t first, Py_ssize_t count, Py_ssize_t step):
    """Self-check of the bound tables over the hash values ``first, first + step, ...``
    (``count`` of them): the largest ``noise - bound`` in float32 and float64 (both must be
    negative; the float64 one over the 53-bit draws ``(r << 21) | 0x1FFFFF`` and ``r << 21``,
    the ends of each value's 2**21 neighbours)."""
    cdef Py_ssize_t i
    cdef uint32_t r
    cdef uint64_t r53
    cdef float u32, worst32 = -INFINITY
    cdef double u64, worst64 = -INFINITY, d
    cdef int side
    with nogil:
        for i in range(count):
            r = <uint32_t>(first + i * step)
            u32 = (<float><int>(r >> 16) * <float>1.52587890625e-05
                   + (<float><int>(r & 0xFFFF) + <float>0.5) * <float>2.3283064365386963e-10)
            worst32 = fmaxf(worst32, noise32_of(u32) - NOISE32_UP[noise_bucket(u32)])
            for side in range(2):
                r53 = (<uint64_t>r << 21) | (<uint64_t>0x1FFFFF if side else 0)
                u64 = (<double>r53 + 0.5) * 1.1102230246251565e-16
                if u64 == 1.0:
                    u64 = u64 - 1.1102230246251565e-16
                d = -log(-log(u64)) - NOISE64_UP[noise_bucket(u64)]
                if d > worst64:
                    worst64 = d
    return worst32, worst64


cdef struct GumbelArgs:
    IBuf local_argmax
    Py_ssize_t argmax_stride
    char* local_max
    int local_max_code
    Py_ssize_t max_stride
    char* cache
    Py_ssize_t cache_s0
    Py_ssize_t cache_s1
    IBuf cache_col
    const char* source
    Py_ssize_t source_stride
    int elem                     # bytes per cached element
    const char* logits
    int logits_code
    Py_ssize_t logits_stride
    IBuf mapping
    IBuf seeds
    IBuf pos
    const char* temp
    int temp_code
    Py_ssize_t V
    Py_ssize_t nb
    Py_ssize_t bs
    bint drafting
    bint apply_temp
    bint fp64
    bint per_token_col
    # vLLM 0.34's form: a draft-logits row per request state (NULL: the state itself), a
    # [tokens, V] float32 bias added first, the cache column mixed into the seed, and the
    # (biased) logits themselves cached when there is no separate source
    const char* row_map
    bint row_map_wide
    const float* bias
    Py_ssize_t bias_stride
    bint step_seed


cdef Py_ssize_t _draw32(const GumbelArgs* a, const char* row, const float* bias, Py_ssize_t c0,
                        Py_ssize_t n, float temp, bint scale, uint32_t prefix, float low,
                        bint* seen_out, float* best_out) noexcept nogil:
    """The float32 Gumbel-max draw over lanes ``c0 .. c0 + n - 1`` of ``row``: index (from
    ``c0``) and score of the winner, as the dense per-lane loop of :func:`_gumbel_tile` finds
    them. ``low`` is a score the block's winner reaches for sure (its largest logit plus the
    smallest noise). Chunk by chunk: the scores before noise, the uniforms and each lane's
    noise bound in branch-free loops the compiler vectorises; then the logarithms of only
    the lanes whose bound beats the best score so far (module notes on the bucket bounds)."""
    cdef float xs[UNIFORM_CHUNK]
    cdef float u[UNIFORM_CHUNK]
    cdef float bnd[UNIFORM_CHUNK]
    cdef int32_t lanes[UNIFORM_CHUNK]
    cdef float best = -INFINITY, x, v, thr
    cdef Py_ssize_t best_j = -1, s, m, i, q, k
    cdef bint seen = False
    cdef const float* src
    s = -UNIFORM_CHUNK
    while s + UNIFORM_CHUNK < n:
        s += UNIFORM_CHUNK
        m = n - s if n - s < UNIFORM_CHUNK else UNIFORM_CHUNK
        if a.logits_code == DT_FLOAT32:
            src = (<const float*>row) + c0 + s
            if bias != NULL:
                for i in range(m):
                    xs[i] = src[i] + bias[c0 + s + i]
            else:
                memcpy(xs, src, m * sizeof(float))
        else:
            for i in range(m):
                xs[i] = load_f32(row, a.logits_code, c0 + s + i)
        if scale:
            for i in range(m):
                xs[i] = xs[i] / temp
        # The lanes that can still win: logit plus the largest noise reaching the block's sure
        # score and, once a number was seen, the best score so far. The rest (a top-k/top-p
        # row's -inf lanes, a real model's long tail) are neither hashed nor scored. NaN lanes
        # stay (their comparison is false): they score as -inf, as the dense loop scores them.
        thr = low
        if seen and best > thr:
            thr = best
        k = 0
        for i in range(m):
            lanes[k] = <int32_t>i
            k += not (xs[i] + <float>G32_HIGH < thr)
        if k == 0:
            continue
        uniforms32_at(prefix, <uint32_t>(c0 + s), lanes, k, u)
        for q in range(k):
            bnd[q] = xs[lanes[q]] + NOISE32_UP[noise_bucket(u[q])]
        for q in range(k):
            if seen and bnd[q] <= best:
                continue        # cannot beat the best score so far (a NaN bound falls through)
            i = lanes[q]
            x = xs[i]
            v = x
            if x == x and x != -INFINITY:
                v = x + noise32_of(u[q])
            if v != v:          # the index reduction counts a NaN as -inf
                v = -INFINITY
            else:
                seen = True
            if v > best or best_j < 0:
                best = v
                best_j = s + i
    seen_out[0] = seen
    best_out[0] = best
    return best_j


cdef enum:
    DRAW_BUF = 1024     # the largest block _block_draw32 divides by a temperature on its stack


cdef inline void _block_draw32(const GumbelArgs* a, const float* x, Py_ssize_t c0, Py_ssize_t n,
                               float temp, bint scale, int64_t seed, int64_t pos,
                               Py_ssize_t* best_j, float* best, bint* seen) noexcept nogil:
    """A float32 block's noisy draw over its ``n`` lanes from column ``c0`` (no bias;
    ``scale``: divided by ``temp``, positive and finite, first): the one pass's block draw
    (``gumbel_block_argmax32``: the same hash, noise and first largest score, lanes that cannot
    win neither hashed nor scored, the lane lists vectorised). Its result read as
    ``_gumbel_tile``'s loops leave theirs: where nothing scored above -inf it is index 0, NaN
    where every lane is NaN (``seen`` False), else -inf."""
    cdef float buf[DRAW_BUF]
    cdef Py_ssize_t j
    cdef const float* src = x
    if scale:
        for j in range(n):
            buf[j] = x[j] / temp
        src = buf
    best_j[0] = gumbel_block_argmax32(src, n, a.bs, c0, seed, pos, True, best)
    seen[0] = best[0] == best[0]


cdef inline void _gumbel_tile(const GumbelArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t t = tile // a.nb, b = tile % a.nb, j, c0, n, best_j = -1
    cdef bint seen = False       # a lane that is not NaN
    cdef int64_t r = iget(a.mapping, t), seed = 0, pos, col
    cdef bint valid = r >= 0
    cdef float temp = load_real(a.temp, a.temp_code, r) if valid else <float>0.0
    cdef const char* row = a.logits + t * a.logits_stride * (
        4 if a.logits_code == DT_FLOAT32 else 2)
    cdef float x, m32 = -INFINITY, best32 = -INFINITY, low32 = -INFINITY, v32
    cdef double m64 = -INFINITY, best64 = -INFINITY, low64 = -INFINITY, v64, u64
    cdef bint noisy = temp != <float>0.0
    cdef bint scale = noisy and a.apply_temp
    cdef bint fast = False      # a float32 row, no bias, a positive finite temperature if any
    cdef Py_ssize_t dense       # the lanes the dense loop below scores
    cdef uint32_t prefix
    c0 = b * a.bs
    n = a.V - c0 if a.V - c0 < a.bs else a.bs       # valid lanes of this block (may be <= 0)
    if n < 0:
        n = 0
    dense = n
    cdef int64_t crow = r
    cdef const float* bias = NULL
    if a.bias != NULL:
        bias = a.bias + t * a.bias_stride
    if a.cache != NULL:
        col = iget(a.cache_col, t if a.per_token_col else 0)
        if a.row_map != NULL:
            crow = -1
            if valid:
                crow = ((<const int64_t*>a.row_map)[r] if a.row_map_wide
                        else (<const int32_t*>a.row_map)[r])
        if crow >= 0 and n > 0:
            # the logits before temperature: the source's (its dtype), or with no source the
            # sampled logits themselves (bias added, the logits' dtype -- float32 then)
            if a.source != NULL:
                memcpy(a.cache + (crow * a.cache_s0 + col * a.cache_s1 + c0) * a.elem,
                       a.source + (t * a.source_stride + c0) * a.elem, n * a.elem)
            elif bias == NULL:
                memcpy(a.cache + (crow * a.cache_s0 + col * a.cache_s1 + c0) * a.elem,
                       row + c0 * a.elem, n * a.elem)
            else:
                for j in range(n):
                    (<float*>a.cache)[crow * a.cache_s0 + col * a.cache_s1 + c0 + j] = (
                        (<const float*>row)[c0 + j] + bias[c0 + j])
    if valid:
        seed = iget(a.seeds, r)
    if a.cache != NULL and a.step_seed:
        seed = seed ^ <int64_t>(<uint64_t>col << 32)          # spec_step_seed(seed, col)
    pos = iget(a.pos, t)
    if a.drafting:
        pos = <int64_t>(<uint64_t>pos + (<uint64_t>1 << 30))    # _DRAFT_NOISE_SALT
    prefix = murmur3_prefix(seed, pos)
    if (noisy and not a.fp64 and a.logits_code == DT_FLOAT32 and bias == NULL
            and (not scale or (temp > 0 and temp < INFINITY and a.bs <= DRAW_BUF))):
        _block_draw32(a, (<const float*>row) + c0, c0, n, temp, scale, seed, pos, &best_j,
                      &best32, &seen)
        dense = 0
        noisy = False           # drawn: the loops below have nothing left to do
    if noisy:
        # Only a lane whose logit plus the largest noise reaches the block's largest logit
        # plus the smallest noise can win: the others' scores are computed for nothing.
        fast = (a.logits_code == DT_FLOAT32 and bias == NULL
                and (not scale or (temp > 0 and temp < INFINITY)))
        if fast:
            # dividing by a positive temperature rounds monotonically: the largest quotient
            # is the largest logit's
            m32 = _max_ignoring_nan((<const float*>row) + c0, n)
            if scale:
                m32 = m32 / temp
        else:
            for j in range(n):
                x = load_f32(row, a.logits_code, c0 + j)
                if bias != NULL:
                    x = x + bias[c0 + j]
                if scale:
                    x = x / temp
                m32 = fmaxf(x, m32)
        if a.fp64:
            low64 = <double>m32 + G64_LOW
        else:
            low32 = m32 + <float>G32_LOW
    if noisy and not a.fp64 and m32 == -INFINITY and fast:
        # no lane above -inf (a top-k/top-p row's masked block): each scores -inf (-inf plus a
        # finite noise) or NaN (read as -inf), so the first lane wins at -inf without a hash;
        # a lane that is not NaN is a -inf one
        seen = n > 0 and fd_first_equal((<const float*>row) + c0, n, -INFINITY) < n
        if n > 0:
            best_j = 0
        dense = 0
    elif noisy and not a.fp64:
        best_j = _draw32(a, row, bias, c0, n, temp, scale, prefix, low32, &seen, &best32)
        dense = 0
    for j in range(dense):
        x = load_f32(row, a.logits_code, c0 + j)
        if bias != NULL:
            x = x + bias[c0 + j]
        if scale:
            x = x / temp
        if a.fp64:
            v64 = x
            if noisy and x == x and x != -INFINITY:
                if v64 + G64_HIGH < low64:
                    continue
                u64 = murmur3_uniform64(seed, pos, <uint32_t>(c0 + j))
                if best_j >= 0 and v64 + NOISE64_UP[noise_bucket(u64)] <= best64:
                    continue            # cannot beat the block's best (bucket bound, above)
                v64 = v64 + -log(-log(u64))
            if v64 != v64:              # the index reduction counts a NaN as -inf
                v64 = -INFINITY
            else:
                seen = True
            if v64 > best64 or best_j < 0:
                best64 = v64
                best_j = j
        else:                           # temperature 0: the plain argmax
            v32 = x
            if v32 != v32:
                v32 = -INFINITY
            else:
                seen = True
            if v32 > best32 or best_j < 0:
                best32 = v32
                best_j = j
    # masked lanes (past the vocabulary) hold -inf and win nothing, not even an empty block's
    # lane 0; a block of NaNs only scores NaN
    if best_j < 0:
        best_j = 0
    if not seen and n == a.bs:              # every lane NaN, whichever loop scored them
        best32 = NAN
        best64 = NAN
    iset(a.local_argmax, t * a.argmax_stride + b, c0 + best_j)
    if a.fp64:
        v64 = best64
    else:
        v64 = best32
    if a.local_max_code == DT_FLOAT64:
        (<double*>a.local_max)[t * a.max_stride + b] = v64
    else:
        (<float*>a.local_max)[t * a.max_stride + b] = <float>v64


import torch

cdef dict _DTYPES = {torch.float32: DT_FLOAT32, torch.float64: DT_FLOAT64,
                     torch.float16: DT_FLOAT16, torch.bfloat16: DT_BFLOAT16}


cdef int _elem_size(int code) noexcept:
    if code == DT_FLOAT64:
        return 8
    if code == DT_FLOAT32:
        return 4
    return 2


cdef _gumbel_unmapped(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
                      logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
                      logits_cache_col_ptr, logits_cache_source_ptr,
                      logits_cache_source_stride, logits_ptr, logits_stride,
                      expanded_idx_mapping_ptr, seeds_ptr, pos_ptr, temp_ptr, vocab_size,
                      BLOCK_SIZE, IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64, PER_TOKEN_COL,
                      bint step_seed, grid):
    """0.32's and 0.33's forms (no bias, no cache row mapping, a separate cache source)."""
    if logits_cache_ptr is not None and logits_cache_source_ptr is None:
        raise ValueError(expected("logits_cache_source_ptr", "a tensor with logits_cache_ptr",
                                  None))
    _gumbel(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
            logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
            logits_cache_col_ptr, logits_cache_source_ptr, logits_cache_source_stride, None,
            logits_ptr, logits_stride, None, 0, expanded_idx_mapping_ptr, seeds_ptr, pos_ptr,
            temp_ptr, vocab_size, BLOCK_SIZE, IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64,
            PER_TOKEN_COL, False, step_seed, grid)


def gumbel_sample_kernel(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
                         logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
                         logits_cache_col_ptr, logits_cache_source_ptr,
                         logits_cache_source_stride, logits_ptr, logits_stride,
                         expanded_idx_mapping_ptr, seeds_ptr, pos_ptr, temp_ptr, vocab_size,
                         BLOCK_SIZE, IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64, PER_TOKEN_COL,
                         *, grid):
    """Per (token, vocabulary block) of the grid: the block's Gumbel-max winner and its score
    (``local_argmax[t, b]``, ``local_max[t, b]``), as ``gumbel_block_argmax`` computes them.

    A token whose request (``mapping[t]``, -1: none) has temperature 0 takes the plain argmax;
    otherwise each logit (divided by the temperature under APPLY_TEMPERATURE) gets the noise
    ``-log(-log1p(-u))`` in float32 or ``-log(-log(u))`` in float64 (USE_FP64) of the
    request's murmur3 stream at (seed, position [+ 2**30 when IS_DRAFTING], token id), and
    the largest score wins, the lowest index on ties; the score ignores NaN and the index
    counts a NaN as -inf (as the interpreter's ``nanmax``/``nanargmax``: a block of NaN and
    -inf scores -inf at its first lane; one of NaNs only scores NaN at lane 0). With ``logits_cache_ptr``, a valid request's block of
    ``logits_cache_source`` is copied to its cache row ``col`` (``logits_cache_col[t]`` under
    PER_TOKEN_COL, else ``[0]``) first.

    A logit ``x`` whose best possible score ``x + max noise`` is below the block's largest
    logit plus the smallest noise cannot win and gets no noise drawn: the noise is bounded
    (``G32_*``/``G64_*``) and rounding is monotonic, so the winner is the same.
    """
    _gumbel_unmapped(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
                  logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
                  logits_cache_col_ptr, logits_cache_source_ptr, logits_cache_source_stride,
                  logits_ptr, logits_stride, expanded_idx_mapping_ptr, seeds_ptr, pos_ptr,
                  temp_ptr, vocab_size, BLOCK_SIZE, IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64,
                  PER_TOKEN_COL, False, grid)


def gumbel_sample_step_seed_kernel(local_argmax_ptr, local_argmax_stride, local_max_ptr,
                                   local_max_stride, logits_cache_ptr, logits_cache_stride_0,
                                   logits_cache_stride_1, logits_cache_col_ptr,
                                   logits_cache_source_ptr, logits_cache_source_stride,
                                   logits_ptr, logits_stride, expanded_idx_mapping_ptr,
                                   seeds_ptr, pos_ptr, temp_ptr, vocab_size, BLOCK_SIZE,
                                   IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64, PER_TOKEN_COL, *,
                                   grid):
    """vLLM 0.33's ``_gumbel_sample_kernel``: ``gumbel_sample_kernel``'s arguments and
    semantics, with the cache column mixed into the seed (``seed ^ col << 32``, its module's
    ``spec_step_seed``) whenever there is a cache, so each speculative step draws its own
    noise, as 0.34's form does."""
    _gumbel_unmapped(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
                  logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
                  logits_cache_col_ptr, logits_cache_source_ptr, logits_cache_source_stride,
                  logits_ptr, logits_stride, expanded_idx_mapping_ptr, seeds_ptr, pos_ptr,
                  temp_ptr, vocab_size, BLOCK_SIZE, IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64,
                  PER_TOKEN_COL, True, grid)


def gumbel_sample_biased_kernel(local_argmax_ptr, local_argmax_stride, local_max_ptr,
                                local_max_stride, logits_cache_ptr, logits_cache_stride_0,
                                logits_cache_stride_1, logits_cache_col_ptr,
                                logits_cache_source_ptr, logits_cache_source_stride,
                                logits_cache_row_mapping_ptr, logits_ptr, logits_stride,
                                bias_ptr, bias_stride, expanded_idx_mapping_ptr, seeds_ptr,
                                pos_ptr, temp_ptr, vocab_size, BLOCK_SIZE, IS_DRAFTING,
                                APPLY_TEMPERATURE, USE_FP64, PER_TOKEN_COL, HAS_BIAS, *, grid):
    """vLLM 0.34's ``_gumbel_sample_kernel``: ``gumbel_sample_kernel`` with a float32
    ``bias`` row added to the logits first (HAS_BIAS), the cache row of a request state from
    ``logits_cache_row_mapping`` (-1: none; ``None``: the state itself), the cache column
    mixed into the seed (``seed ^ col << 32``) whenever there is a cache, and -- with no
    ``logits_cache_source`` -- the (biased) logits themselves cached."""
    _gumbel(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
            logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
            logits_cache_col_ptr, logits_cache_source_ptr, logits_cache_source_stride,
            logits_cache_row_mapping_ptr, logits_ptr, logits_stride, bias_ptr, bias_stride,
            expanded_idx_mapping_ptr, seeds_ptr, pos_ptr, temp_ptr, vocab_size, BLOCK_SIZE,
            IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64, PER_TOKEN_COL, HAS_BIAS, True, grid)


cdef _gumbel(local_argmax_ptr, local_argmax_stride, local_max_ptr, local_max_stride,
             logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
             logits_cache_col_ptr, logits_cache_source_ptr, logits_cache_source_stride,
             row_mapping, logits_ptr, logits_stride, bias_ptr, bias_stride,
             expanded_idx_mapping_ptr, seeds_ptr, pos_ptr, temp_ptr, vocab_size, BLOCK_SIZE,
             IS_DRAFTING, APPLY_TEMPERATURE, USE_FP64, PER_TOKEN_COL, HAS_BIAS, bint step_seed,
             grid):
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t shp[3]
    cdef Py_ssize_t N, t, tiles, tile, cols, n_temp, n_seeds, rows_valid = 0, n_cols
    cdef int64_t r, col
    cdef GumbelArgs a
    cdef int nt, code = 0
    cdef FRows bs_rows
    parse_grid(grid, 2, g)
    N = g[0]
    a.nb = g[1]
    a.V = as_int(vocab_size, "vocab_size")
    a.bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    a.drafting = as_flag(IS_DRAFTING, "IS_DRAFTING", 0)
    a.apply_temp = as_flag(APPLY_TEMPERATURE, "APPLY_TEMPERATURE", 0)
    a.fp64 = as_flag(USE_FP64, "USE_FP64", 0)
    a.per_token_col = as_flag(PER_TOKEN_COL, "PER_TOKEN_COL", 0)
    cols = _cols(a.V, a.nb, a.bs)
    cdef FRows la = check_frows(local_argmax_ptr, "local_argmax_ptr", M_INDEX,
                                local_argmax_stride, "local_argmax_stride")
    cdef FRows lm = check_frows(local_max_ptr, "local_max_ptr", M_REAL, local_max_stride,
                                "local_max_stride")
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_LOGITS, logits_stride,
                                "logits_stride")
    a.mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                               "one per token of the grid")
    a.pos = index_at_least(pos_ptr, "pos_ptr", N, "one per token of the grid")
    a.seeds = index_at_least(seeds_ptr, "seeds_ptr", 0)
    check_tensor(seeds_ptr, "seeds_ptr", M_INDEX, -1, NULL, shp)
    n_seeds = shp[0]
    a.temp = check_tensor(temp_ptr, "temp_ptr", M_REAL, -1, &a.temp_code, shp)
    n_temp = shp[0]
    for t in range(N):
        r = iget(a.mapping, t)
        if r >= 0:
            _request(a.mapping, t, n_temp, "temp_ptr", "expanded_idx_mapping_ptr")
            _request(a.mapping, t, n_seeds, "seeds_ptr", "expanded_idx_mapping_ptr")
    need_frows(&la, "local_argmax_ptr", N, a.nb, True, "a slot per token and block")
    need_frows(&lm, "local_max_ptr", N, a.nb, True, "a slot per token and block")
    need_frows(&lg, "logits_ptr", N, cols, False, "the tokens of the grid")
    a.cache = NULL
    a.source = NULL
    a.row_map = NULL
    a.bias = NULL
    a.step_seed = step_seed
    cdef Py_ssize_t n_map = 0
    if as_flag(HAS_BIAS, "HAS_BIAS", 0):
        if lg.code != DT_FLOAT32:
            raise TypeError(expected("logits_ptr", "float32 logits with a bias (the sum is "
                                     "rounded to the logits' dtype)", logits_ptr.dtype))
        bs_rows = check_frows(bias_ptr, "bias_ptr", M_FLOAT32, bias_stride, "bias_stride")
        need_frows(&bs_rows, "bias_ptr", N, cols, False, "a bias row per token")
        a.bias = <const float*>bs_rows.ptr
        a.bias_stride = bs_rows.stride
    if logits_cache_ptr is not None and row_mapping is not None:
        a.row_map = check_tensor(row_mapping, "logits_cache_row_mapping_ptr", M_INDEX, -1,
                                 &code, shp)
        a.row_map_wide = code == DT_INT64
        n_map = shp[0]
    if logits_cache_ptr is not None:
        _check_cache(&a, logits_cache_ptr, logits_cache_stride_0, logits_cache_stride_1,
                     logits_cache_col_ptr, logits_cache_source_ptr, logits_cache_source_stride,
                     N, cols, logits_ptr, lg.code, n_map)
    if N == 0 or a.nb == 0:
        return
    a.local_argmax.ptr = la.ptr
    a.local_argmax.wide = la.code == DT_INT64
    a.argmax_stride = la.stride
    a.local_max = lm.ptr
    a.local_max_code = lm.code
    a.max_stride = lm.stride
    a.logits = lg.ptr
    a.logits_code = lg.code
    a.logits_stride = lg.stride
    tiles = N * a.nb
    nt = threads_for(16 * N * (cols + a.nb))
    with nogil:
        if nt <= 1:
            for tile in range(tiles):
                _gumbel_tile(&a, tile)
        else:
            for tile in prange(tiles, num_threads=nt, schedule="dynamic"):
                _gumbel_tile(&a, tile)


cdef int _check_cache(GumbelArgs* a, object cache, object s0, object s1, object col_t,
                      object source, object source_stride, Py_ssize_t N, Py_ssize_t cols,
                      object logits, int logits_code, Py_ssize_t n_map) except -1:
    """The logits cache: ``cache[req, col, :cols]`` written from ``source[t, :cols]`` for every
    token of a valid request; same dtype, rows, columns and slots inside their tensors."""
    cdef Py_ssize_t shp[3]
    cdef int code = 0, src_code
    cdef int64_t st0 = as_int(s0, "logits_cache_stride_0")
    cdef int64_t st1 = as_int(s1, "logits_cache_stride_1")
    cdef int64_t r, col, end, most = 0
    cdef Py_ssize_t t, n_col
    if col_t is None:
        raise ValueError(expected("logits_cache_col_ptr", "a tensor with logits_cache_ptr",
                                  None))
    cdef FRows src
    if source is not None:
        src = check_frows(source, "logits_cache_source_ptr", M_CACHE, source_stride,
                          "logits_cache_source_stride")
    else:                       # the sampled logits themselves are cached
        src.code = logits_code
        source = logits
    cdef bint three_d = getattr(cache, "ndim", None) == 3
    if three_d:
        # a [R, C, V] table, possibly a view: the strides the caller passes must be its own
        code = _DTYPES.get(getattr(cache, "dtype", None), -1)
        if code < 0 or not (M_CACHE & (1 << code)):
            raise TypeError(expected("logits_cache_ptr", "float32, float64, float16 or bfloat16",
                                     getattr(cache, "dtype", type(cache).__name__)))
        if not cache.is_cpu:
            raise ValueError(expected("logits_cache_ptr", "a CPU tensor", cache.device))
        strides = cache.stride()
        if cache.shape[2] > 1 and strides[2] != 1:
            raise ValueError(expected("logits_cache_ptr", "unit-stride rows (stride(2) == 1)",
                                      f"strides {strides}"))
        if (cache.shape[0] > 1 and st0 != strides[0]) or (cache.shape[1] > 1 and
                                                          st1 != strides[1]):
            raise ValueError(expected("logits_cache_stride_0",
                                      f"logits_cache_ptr's strides {tuple(strides[:2])}",
                                      (st0, st1)))
        a.cache = <char*><Py_ssize_t>cache.data_ptr()
    else:
        a.cache = check_tensor(cache, "logits_cache_ptr", M_CACHE, -1, &code, shp)
    if code != src.code:
        raise TypeError(expected("logits_cache_source_ptr", f"logits_cache_ptr's dtype "
                                 f"{cache.dtype}", source.dtype))
    need_min("logits_cache_stride_0", st0, 0)
    need_min("logits_cache_stride_1", st1, 0)
    a.cache_col = index_at_least(col_t, "logits_cache_col_ptr", N if a.per_token_col else 1,
                                 "one per token under PER_TOKEN_COL, else one")
    if source is not logits:
        need_frows(&src, "logits_cache_source_ptr", N, cols, False, "the tokens of the grid")
    for t in range(N):
        r = iget(a.mapping, t)
        if r < 0 or cols == 0:
            continue
        if a.row_map != NULL:
            if r >= n_map:
                raise ValueError(expected("logits_cache_row_mapping_ptr", f"an entry for "
                                          f"request state {r}", f"{n_map} entries"))
            r = ((<const int64_t*>a.row_map)[r] if a.row_map_wide
                 else (<const int32_t*>a.row_map)[r])
            if r < 0:
                continue
        col = iget(a.cache_col, t if a.per_token_col else 0)
        if col < 0:
            raise ValueError(expected("logits_cache_col_ptr", "columns >= 0", col))
        if three_d and (r >= cache.shape[0] or col >= cache.shape[1]
                                 or cols > cache.shape[2]):
            raise ValueError(expected("logits_cache_ptr", f"a row {r}, column {col} of "
                                      f"{cols} elements", f"shape {tuple(cache.shape)}"))
        end = r * st0 + col * st1 + cols
        if end > most:
            most = end
    if not three_d:
        need_count("logits_cache_ptr", shp[0], most, "the cached rows")
    a.cache_s0 = st0
    a.cache_s1 = st1
    if source is not logits:
        a.source = src.ptr
        a.source_stride = src.stride
    a.elem = _elem_size(code)
    return 0


# -- the random stream, for the tests that hold it to vLLM's -------------------------------------

def _murmur3_draws(seeds, positions, keys, hashes, uniform32, uniform64):
    """``murmur3_hash32(seed, pos, key)``, ``murmur3_uniform32`` and ``murmur3_uniform64`` of
    ``_murmur3.pxd`` for each element (int64 seeds/positions, int64 keys taken as uint32), into
    ``hashes`` (int64), ``uniform32`` (float32) and ``uniform64`` (float64): the stream the
    Gumbel kernel draws from, compared bit for bit with vLLM's own functions by the tests."""
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n, i
    cdef const int64_t* s = <const int64_t*>check_tensor(seeds, "seeds", 1 << DT_INT64, -1,
                                                          NULL, shp)
    n = shp[0]
    cdef const int64_t* p = <const int64_t*>check_tensor(positions, "positions", 1 << DT_INT64,
                                                          -1, NULL, shp)
    need_count("positions", shp[0], n)
    cdef const int64_t* k = <const int64_t*>check_tensor(keys, "keys", 1 << DT_INT64, -1, NULL,
                                                          shp)
    need_count("keys", shp[0], n)
    cdef int64_t* h = <int64_t*>check_tensor(hashes, "hashes", 1 << DT_INT64, -1, NULL, shp)
    need_count("hashes", shp[0], n)
    cdef float* u32 = <float*>check_tensor(uniform32, "uniform32", M_FLOAT32, -1, NULL, shp)
    need_count("uniform32", shp[0], n)
    cdef double* u64 = <double*>check_tensor(uniform64, "uniform64", 1 << DT_FLOAT64, -1, NULL,
                                             shp)
    need_count("uniform64", shp[0], n)
    for i in range(n):
        h[i] = murmur3_hash32(s[i], p[i], <uint32_t>k[i], 0)
        u32[i] = murmur3_uniform32(s[i], p[i], <uint32_t>k[i])
        u64[i] = murmur3_uniform64(s[i], p[i], <uint32_t>k[i])
