# cython: language_level=3
"""CPU versions of Model Runner V2's other logits kernels: logit bias (allowed tokens, biases,
min-tokens stop masking), bad words, the structured-output bitmask, the logprob kernels (top-k
log-softmax, ranks, the logprob token-id table) and the NaN count.

They touch a few entries per row or scan a row once; rows run on an OpenMP team when there is
enough work (``threads_for``), each row or (row, block) tile writing only its own entries. The
rules are ``_mrv2_sample``'s: the grid gives the count, each argument's reads and writes are
checked before anything is written, float arithmetic is the kernel's (the log-softmax's
``exp``/``log`` from the C library: an ulp or so from numpy's).
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY, expf, logf, fmaxf
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport malloc, free

from kernels_cpu._buffers cimport (
    DT_BOOL, DT_FLOAT32, DT_INT64, IBuf, M_BOOL, M_FLOAT32, M_INDEX, M_INT32, check_tensor,
    iget, iset,
)
from kernels_cpu._checks cimport as_flag, as_int, expected, index_at_least, need_count, need_min
from kernels_cpu._mrv2_rows cimport (
    M_LOGITS, FRows, _block_size, _cdiv, _cols, _request, check_frows, load_f32, need_frows,
    parse_grid,
)
from kernels_cpu._parallel cimport threads_for


cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int fd_thread_id(void) { return omp_get_thread_num(); }
    #else
    static int fd_thread_id(void) { return 0; }
    #endif
    """
    int _thread_id "fd_thread_id"() noexcept nogil


cdef inline IBuf _ibuf(FRows* r) noexcept:
    cdef IBuf b
    b.ptr = r.ptr
    b.wide = r.code == DT_INT64
    return b


cdef inline Py_ssize_t _count(object t, str name, int mask) except -1:
    """Elements of a contiguous buffer (checked)."""
    cdef Py_ssize_t shp[1]
    check_tensor(t, name, mask, -1, NULL, shp)
    return shp[0]


cdef inline int _ids_in(IBuf b, Py_ssize_t base, Py_ssize_t n, int64_t V, str name) except -1:
    """``b[base : base + n]`` are token ids in ``[0, V)`` (the columns a kernel indexes)."""
    cdef Py_ssize_t k
    cdef int64_t v
    for k in range(n):
        v = iget(b, base + k)
        if v < 0 or v >= V:
            raise ValueError(expected(f"{name}[{base + k}]", f"a token id in [0, {V})", v))
    return 0


# -- _bias_kernel --------------------------------------------------------------------------------

cdef struct BiasArgs:
    float* logits
    Py_ssize_t ls
    Py_ssize_t V
    IBuf mapping
    IBuf n_allowed
    IBuf allowed
    Py_ssize_t allowed_s
    IBuf n_bias
    IBuf bias_ids
    Py_ssize_t bias_ids_s
    const float* bias
    Py_ssize_t bias_s
    IBuf pos
    IBuf min_lens
    IBuf n_stop
    IBuf restore
    IBuf stop
    Py_ssize_t stop_s
    Py_ssize_t bs
    bint check_all_masked


cdef inline Py_ssize_t _lanes(int64_t n, Py_ssize_t bs) noexcept nogil:
    """Lanes ``k < n`` of ``tl.arange(0, BLOCK_SIZE)``."""
    if n <= 0:
        return 0
    return n if n < bs else bs


cdef void _bias_row(const BiasArgs* a, Py_ssize_t t, float* scratch) noexcept nogil:
    cdef int64_t r = iget(a.mapping, t), tok
    cdef Py_ssize_t n, k, c
    cdef float* row = a.logits + t * a.ls
    cdef float m
    # allowed token ids: everything else becomes -inf (saved values restored after)
    n = _lanes(iget(a.n_allowed, r), a.bs)
    if n > 0:
        for k in range(n):
            scratch[k] = row[iget(a.allowed, r * a.allowed_s + k)]
        for c in range(a.V):
            row[c] = -INFINITY
        for k in range(n):
            row[iget(a.allowed, r * a.allowed_s + k)] = scratch[k]
    # logit bias: all gathered, then stored in lane order (a repeated id: the last lane's sum)
    n = _lanes(iget(a.n_bias, r), a.bs)
    if n > 0:
        for k in range(n):
            scratch[k] = row[iget(a.bias_ids, r * a.bias_ids_s + k)] + a.bias[r * a.bias_s + k]
        for k in range(n):
            row[iget(a.bias_ids, r * a.bias_ids_s + k)] = scratch[k]
    # min tokens: stop tokens masked until the request reaches min_len
    n = _lanes(iget(a.n_stop, r), a.bs)
    if n > 0 and iget(a.pos, t) + 1 < iget(a.min_lens, r):
        if a.check_all_masked and iget(a.restore, r) != 0:
            for k in range(n):
                scratch[k] = row[iget(a.stop, r * a.stop_s + k)]
            for k in range(n):
                row[iget(a.stop, r * a.stop_s + k)] = -INFINITY
            m = -INFINITY
            for c in range(a.V):
                m = fmaxf(m, row[c])
            if m == -INFINITY:       # every token masked: give the stop tokens back
                for k in range(n):
                    if -INFINITY < scratch[k] < INFINITY:
                        row[iget(a.stop, r * a.stop_s + k)] = scratch[k]
        else:
            for k in range(n):
                row[iget(a.stop, r * a.stop_s + k)] = -INFINITY


def bias_kernel(logits_ptr, logits_stride, vocab_size, expanded_idx_mapping_ptr,
                num_allowed_token_ids_ptr, allowed_token_ids_ptr, allowed_token_ids_stride,
                num_logit_bias_ptr, bias_token_ids_ptr, bias_token_ids_stride, bias_ptr,
                bias_stride, pos_ptr, min_lens_ptr, num_stop_token_ids_ptr,
                restore_when_all_masked_ptr, stop_token_ids_ptr, stop_token_ids_stride,
                BLOCK_SIZE, LOGITS_BLOCK_SIZE, CHECK_ALL_MASKED_ROWS, *, grid):
    """Per token of the grid, in the kernel's order: keep only the request's allowed token ids
    (its first ``min(n, BLOCK_SIZE)``), add its logit biases, and while ``pos + 1 < min_len``
    mask its stop tokens -- under CHECK_ALL_MASKED_ROWS, for a request asking for it, giving
    their finite logits back when that leaves the whole row at -inf."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t N, t, most = 1, n, need_rows = 0, nt
    cdef int64_t r
    cdef BiasArgs a
    cdef float* scratch
    parse_grid(grid, 1, g)
    N = g[0]
    a.V = as_int(vocab_size, "vocab_size")
    need_min("vocab_size", a.V, 0)
    a.bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    _block_size(LOGITS_BLOCK_SIZE, "LOGITS_BLOCK_SIZE")
    a.check_all_masked = as_flag(CHECK_ALL_MASKED_ROWS, "CHECK_ALL_MASKED_ROWS", 0)
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_FLOAT32, logits_stride,
                                "logits_stride")
    a.mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                               "one per token of the grid")
    a.pos = index_at_least(pos_ptr, "pos_ptr", N, "one per token of the grid")
    a.n_allowed = index_at_least(num_allowed_token_ids_ptr, "num_allowed_token_ids_ptr", 0)
    cdef Py_ssize_t c_allowed = _count(num_allowed_token_ids_ptr, "num_allowed_token_ids_ptr",
                                       M_INDEX)
    a.n_bias = index_at_least(num_logit_bias_ptr, "num_logit_bias_ptr", 0)
    cdef Py_ssize_t c_bias = _count(num_logit_bias_ptr, "num_logit_bias_ptr", M_INDEX)
    a.n_stop = index_at_least(num_stop_token_ids_ptr, "num_stop_token_ids_ptr", 0)
    cdef Py_ssize_t c_stop = _count(num_stop_token_ids_ptr, "num_stop_token_ids_ptr", M_INDEX)
    a.min_lens = index_at_least(min_lens_ptr, "min_lens_ptr", 0)
    cdef Py_ssize_t c_min = _count(min_lens_ptr, "min_lens_ptr", M_INDEX)
    a.restore = index_at_least(restore_when_all_masked_ptr, "restore_when_all_masked_ptr", 0)
    cdef Py_ssize_t c_restore = _count(restore_when_all_masked_ptr,
                                       "restore_when_all_masked_ptr", M_INDEX)
    cdef FRows al = check_frows(allowed_token_ids_ptr, "allowed_token_ids_ptr", M_INDEX,
                                allowed_token_ids_stride, "allowed_token_ids_stride")
    cdef FRows bi = check_frows(bias_token_ids_ptr, "bias_token_ids_ptr", M_INDEX,
                                bias_token_ids_stride, "bias_token_ids_stride")
    cdef FRows bv = check_frows(bias_ptr, "bias_ptr", M_FLOAT32, bias_stride, "bias_stride")
    cdef FRows st = check_frows(stop_token_ids_ptr, "stop_token_ids_ptr", M_INDEX,
                                stop_token_ids_stride, "stop_token_ids_stride")
    a.allowed = _ibuf(&al)
    a.allowed_s = al.stride
    a.bias_ids = _ibuf(&bi)
    a.bias_ids_s = bi.stride
    a.bias = <const float*>bv.ptr
    a.bias_s = bv.stride
    a.stop = _ibuf(&st)
    a.stop_s = st.stride
    for t in range(N):
        r = _request(a.mapping, t, c_allowed, "num_allowed_token_ids_ptr",
                     "expanded_idx_mapping_ptr")
        _request(a.mapping, t, c_bias, "num_logit_bias_ptr", "expanded_idx_mapping_ptr")
        _request(a.mapping, t, c_stop, "num_stop_token_ids_ptr", "expanded_idx_mapping_ptr")
        _request(a.mapping, t, c_min, "min_lens_ptr", "expanded_idx_mapping_ptr")
        touched = False
        n = _lanes(iget(a.n_allowed, r), a.bs)
        if n > 0:
            need_frows(&al, "allowed_token_ids_ptr", r + 1, n, False, "the allowed ids")
            _ids_in(a.allowed, r * al.stride, n, a.V, "allowed_token_ids_ptr")
            touched = True
        most = n if n > most else most
        n = _lanes(iget(a.n_bias, r), a.bs)
        if n > 0:
            need_frows(&bi, "bias_token_ids_ptr", r + 1, n, False, "the biased ids")
            need_frows(&bv, "bias_ptr", r + 1, n, False, "the biases")
            _ids_in(a.bias_ids, r * bi.stride, n, a.V, "bias_token_ids_ptr")
            touched = True
        most = n if n > most else most
        n = _lanes(iget(a.n_stop, r), a.bs)
        if n > 0 and iget(a.pos, t) + 1 < iget(a.min_lens, r):
            need_frows(&st, "stop_token_ids_ptr", r + 1, n, False, "the stop ids")
            _ids_in(a.stop, r * st.stride, n, a.V, "stop_token_ids_ptr")
            if a.check_all_masked:
                _request(a.mapping, t, c_restore, "restore_when_all_masked_ptr",
                         "expanded_idx_mapping_ptr")
            touched = True
        most = n if n > most else most
        if touched:
            need_rows = t + 1
    need_frows(&lg, "logits_ptr", need_rows, a.V, True, "the tokens with a bias")
    if need_rows == 0:
        return
    a.logits = <float*>lg.ptr
    a.ls = lg.stride
    nt = threads_for(need_rows * (a.V + most))
    scratch = <float*>malloc(most * (nt if nt > 1 else 1) * sizeof(float))
    if scratch == NULL:
        raise MemoryError()
    with nogil:
        if nt <= 1:
            for t in range(need_rows):
                _bias_row(&a, t, scratch)
        else:
            for t in prange(need_rows, num_threads=nt, schedule="dynamic"):
                _bias_row(&a, t, scratch + _thread_id() * most)
    free(scratch)



# -- _bad_words_kernel ---------------------------------------------------------------------------

def bad_words_kernel(logits_ptr, logits_stride, expanded_idx_mapping_ptr,
                     bad_word_token_ids_ptr, bad_word_token_ids_stride, bad_word_offsets_ptr,
                     bad_word_offsets_stride, num_bad_words_ptr, all_token_ids_ptr,
                     all_token_ids_stride, prompt_len_ptr, total_len_ptr, input_ids_ptr,
                     expanded_local_pos_ptr, *, grid):
    """Per (token, bad word) of the grid: when the request's output so far -- its committed
    output tokens, then this step's draft tokens before the token (``input_ids``) -- ends with
    the bad word's prefix, the bad word's last token gets -inf."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t N, W, t, w, i, nwords
    cdef int64_t r, pos, first, prompt, total, out_len, eff, start, end, prefix, last, ap
    cdef int64_t expected_tok, actual
    cdef bint match
    parse_grid(grid, 2, g)
    N = g[0]
    W = g[1]
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_FLOAT32, logits_stride,
                                "logits_stride")
    cdef IBuf mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                                       "one per token of the grid")
    cdef FRows bw = check_frows(bad_word_token_ids_ptr, "bad_word_token_ids_ptr", M_INDEX,
                                bad_word_token_ids_stride, "bad_word_token_ids_stride")
    cdef FRows bo = check_frows(bad_word_offsets_ptr, "bad_word_offsets_ptr", M_INDEX,
                                bad_word_offsets_stride, "bad_word_offsets_stride")
    cdef IBuf nbw = index_at_least(num_bad_words_ptr, "num_bad_words_ptr", 0)
    cdef Py_ssize_t c_nbw = _count(num_bad_words_ptr, "num_bad_words_ptr", M_INDEX)
    cdef FRows at = check_frows(all_token_ids_ptr, "all_token_ids_ptr", M_INDEX,
                                all_token_ids_stride, "all_token_ids_stride")
    cdef IBuf prompt_len = index_at_least(prompt_len_ptr, "prompt_len_ptr", 0)
    cdef Py_ssize_t c_prompt = _count(prompt_len_ptr, "prompt_len_ptr", M_INDEX)
    cdef IBuf total_len = index_at_least(total_len_ptr, "total_len_ptr", 0)
    cdef Py_ssize_t c_total = _count(total_len_ptr, "total_len_ptr", M_INDEX)
    cdef IBuf input_ids = index_at_least(input_ids_ptr, "input_ids_ptr", 0)
    cdef Py_ssize_t c_input = _count(input_ids_ptr, "input_ids_ptr", M_INDEX)
    cdef IBuf local_pos = index_at_least(expanded_local_pos_ptr, "expanded_local_pos_ptr", 0)
    cdef Py_ssize_t c_local = _count(expanded_local_pos_ptr, "expanded_local_pos_ptr", M_INDEX)
    cdef IBuf bwi = _ibuf(&bw), boi = _ibuf(&bo), ati = _ibuf(&at)
    cdef Py_ssize_t row_cols = lg.cols if not lg.flat else (
        lg.numel if lg.stride == 0 else lg.stride)
    # hits: (token, column) pairs to mask, found in one checked pass, written after it
    hits = []
    for t in range(N):
        r = _request(mapping, t, c_nbw, "num_bad_words_ptr", "expanded_idx_mapping_ptr")
        nwords = iget(nbw, r)
        if nwords > W:
            nwords = W
        if nwords <= 0:
            continue
        _request(mapping, t, c_prompt, "prompt_len_ptr", "expanded_idx_mapping_ptr")
        _request(mapping, t, c_total, "total_len_ptr", "expanded_idx_mapping_ptr")
        need_count("expanded_local_pos_ptr", c_local, t + 1, "one per token with bad words")
        need_frows(&bo, "bad_word_offsets_ptr", r + 1, nwords + 1, False,
                   "num_bad_words + 1 offsets")
        pos = iget(local_pos, t)
        first = t - pos
        prompt = iget(prompt_len, r)
        total = iget(total_len, r)
        out_len = total - prompt
        eff = out_len + pos
        for w in range(nwords):
            start = iget(boi, r * bo.stride + w)
            end = iget(boi, r * bo.stride + w + 1)
            if start < 0 or end <= start:
                raise ValueError(expected(f"bad_word_offsets_ptr[{r}, {w}:{w + 2}]",
                                          "increasing offsets >= 0", (start, end)))
            prefix = end - start - 1
            if prefix > eff:
                continue
            need_frows(&bw, "bad_word_token_ids_ptr", r + 1, end, False, "the bad words")
            last = iget(bwi, r * bw.stride + end - 1)
            match = True
            for i in range(prefix):
                expected_tok = iget(bwi, r * bw.stride + start + i)
                ap = eff - prefix + i
                if ap >= out_len:
                    ap = first + (ap - out_len) + 1
                    if ap < 0 or ap >= c_input:
                        raise ValueError(expected("input_ids_ptr", f"an element {ap} (a draft "
                                                  f"token of token {t})", f"{c_input} elements"))
                    actual = iget(input_ids, ap)
                else:
                    if prompt + ap < 0:
                        raise ValueError(expected(f"prompt_len_ptr[{r}]", "an output inside "
                                                  "the request's row", prompt))
                    need_frows(&at, "all_token_ids_ptr", r + 1, prompt + ap + 1, False,
                               "the request's output tokens")
                    actual = iget(ati, r * at.stride + prompt + ap)
                match = match and expected_tok == actual
            if match:
                if last < 0 or last >= row_cols:
                    raise ValueError(expected(f"bad_word_token_ids_ptr[{r}, {end - 1}]",
                                              f"a token id in [0, {row_cols})", last))
                hits.append((t, last))
    if not hits:
        return
    need_frows(&lg, "logits_ptr", max(h[0] for h in hits) + 1,
               max(h[1] for h in hits) + 1, False, "the rows and columns masked")
    cdef float* logits = <float*>lg.ptr
    for t, last in hits:
        logits[t * lg.stride + last] = -INFINITY


# -- _apply_grammar_bitmask_kernel ---------------------------------------------------------------

cdef struct MaskArgs:
    float* logits
    Py_ssize_t ls
    const int64_t* rows       # the logits row of each bitmask row, -1: inactive
    const int32_t* bitmask
    Py_ssize_t bms
    Py_ssize_t V
    Py_ssize_t nb
    Py_ssize_t bs


cdef inline void _mask_tile(const MaskArgs* a, Py_ssize_t tile) noexcept nogil:
    cdef Py_ssize_t i = tile // a.nb, b = tile % a.nb, c, c1
    cdef int64_t row = a.rows[i]
    cdef const int32_t* words
    cdef float* out
    if row < 0:
        return
    c1 = (b + 1) * a.bs if (b + 1) * a.bs < a.V else a.V
    words = a.bitmask + i * a.bms
    out = a.logits + row * a.ls
    for c in range(b * a.bs, c1):
        if (c >> 5) >= a.bms or ((<uint32_t>words[c >> 5] >> (c & 31)) & 1) == 0:
            out[c] = -INFINITY


def apply_grammar_bitmask_kernel(logits_ptr, logits_stride, logits_indices_ptr,
                                 cu_num_logits_ptr, bitmask_ptr, bitmask_stride, vocab_size,
                                 MASK_STRIDE, BLOCK_SIZE, *, grid):
    """Per (bitmask row, vocabulary block) of the grid: the row's logits ``cu[req] + position``
    (``logits_indices = req * MASK_STRIDE + position``, inactive when ``position`` is past the
    request's logits) get -inf wherever the row's packed bit is 0."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t M, i, tiles, tile, cols, words, last_row = 0, nt
    cdef int64_t mapping, req, p, li, n
    cdef MaskArgs a
    parse_grid(grid, 2, g)
    M = g[0]
    a.V = as_int(vocab_size, "vocab_size")
    a.bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE", True)
    cdef int64_t ms = as_int(MASK_STRIDE, "MASK_STRIDE")
    need_min("MASK_STRIDE", ms, 1)
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_FLOAT32, logits_stride,
                                "logits_stride")
    cdef IBuf indices = index_at_least(logits_indices_ptr, "logits_indices_ptr", M,
                                       "one per bitmask row of the grid")
    cdef IBuf cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", 0)
    cdef Py_ssize_t c_cu = _count(cu_num_logits_ptr, "cu_num_logits_ptr", M_INDEX)
    cdef FRows bm = check_frows(bitmask_ptr, "bitmask_ptr", M_INT32, bitmask_stride,
                                "bitmask_stride")
    cols = _cols(a.V, g[1], a.bs)
    words = _cdiv(cols, 32)
    # the kernel loads the words below the stride only; a masked load reads 0 (Triton's
    # default ``other``, on a GPU as in the interpreter): the columns past a bitmask narrower
    # than the logits (a tokenizer's vocabulary below the model's) are masked
    need_frows(&bm, "bitmask_ptr", M, words if words < bm.stride else bm.stride, False,
               "a row of words per bitmask row")
    rows = <int64_t*>malloc((M if M > 0 else 1) * sizeof(int64_t))
    if rows == NULL:
        raise MemoryError()
    try:
        for i in range(M):
            mapping = iget(indices, i)
            if mapping < 0:
                raise ValueError(expected(f"logits_indices_ptr[{i}]", "an index >= 0", mapping))
            req = mapping // ms
            p = mapping % ms
            if c_cu < req + 2:          # (the message is formatted only when it is raised)
                need_count("cu_num_logits_ptr", c_cu, req + 2, f"request {req} and its end")
            li = iget(cu, req)
            n = iget(cu, req + 1) - li
            if p < n and cols > 0:
                rows[i] = li + p
                if li + p < 0:
                    raise ValueError(expected(f"cu_num_logits_ptr[{req}]", "offsets >= 0", li))
                if li + p + 1 > last_row:
                    last_row = li + p + 1
            else:
                rows[i] = -1
        need_frows(&lg, "logits_ptr", last_row, cols, False, "the rows the bitmasks mask")
        if last_row == 0:
            return
        a.logits = <float*>lg.ptr
        a.ls = lg.stride
        a.rows = rows
        a.bitmask = <const int32_t*>bm.ptr
        a.bms = bm.stride
        a.V = cols
        a.nb = _cdiv(cols, a.bs)
        tiles = M * a.nb
        nt = threads_for(M * cols)
        with nogil:
            if nt <= 1:
                for tile in range(tiles):
                    _mask_tile(&a, tile)
            else:
                for tile in prange(tiles, num_threads=nt, schedule="static"):
                    _mask_tile(&a, tile)
    finally:
        free(rows)


# -- logprob.py: _topk_log_softmax_kernel, _ranks_kernel, _fill_logprob_token_ids_kernel ---------

cdef inline float _row_max(const char* p, int code, Py_ssize_t base, Py_ssize_t V) noexcept nogil:
    """The row's largest logit, NaN ignored. One loop per dtype, not one ``fmaxf`` reduction
    over ``load_f32``: GCC 12 for aarch64 stops with an internal error vectorising that
    reduction of a per-element dtype switch (the float32 loop is a plain vector reduction)."""
    cdef float m = -INFINITY, x
    cdef Py_ssize_t c
    cdef const float* row
    if code == DT_FLOAT32:
        row = (<const float*>p) + base
        for c in range(V):
            m = fmaxf(row[c], m)
        return m
    for c in range(V):
        x = load_f32(p, code, base + c)
        if x > m:
            m = x
    return m


def topk_log_softmax_kernel(output_ptr, logits_ptr, logits_stride, topk_ids_ptr,
                            topk_ids_stride, topk, vocab_size, BLOCK_SIZE, TOPK_BLOCK_SIZE, *,
                            grid):
    """Per row of the grid: ``logits[ids] - max - log(sum(exp(logits - max)))`` in float32 for
    the row's ``topk`` ids, to ``output[row * topk + k]``; the max ignores NaN, the sum runs
    block by block of BLOCK_SIZE as the kernel's does."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t N, t, k, c, c1, V, K, bs, nt, j
    cdef float m, se, blk, lse
    parse_grid(grid, 1, g)
    N = g[0]
    V = as_int(vocab_size, "vocab_size")
    K = as_int(topk, "topk")
    need_min("topk", K, 0)
    bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    _block_size(TOPK_BLOCK_SIZE, "TOPK_BLOCK_SIZE")
    cdef Py_ssize_t shp[1]
    cdef float* out = <float*>check_tensor(output_ptr, "output_ptr", M_FLOAT32, -1, NULL, shp)
    cdef Py_ssize_t n_out = shp[0]
    need_count("output_ptr", n_out, N * K, "topk per row of the grid")
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_LOGITS, logits_stride,
                                "logits_stride")
    cdef FRows ids = check_frows(topk_ids_ptr, "topk_ids_ptr", M_INDEX, topk_ids_stride,
                                 "topk_ids_stride")
    need_frows(&lg, "logits_ptr", N, V, False, "the rows of the grid")
    need_frows(&ids, "topk_ids_ptr", N, K, False, "topk ids per row")
    cdef IBuf idb = _ibuf(&ids)
    for t in range(N):
        _ids_in(idb, t * ids.stride, K, V, "topk_ids_ptr")
    cdef const char* p = lg.ptr
    cdef int code = lg.code
    cdef Py_ssize_t ls = lg.stride, iss = ids.stride
    nt = threads_for(3 * N * V)
    with nogil:
        for t in prange(N, num_threads=nt if nt > 1 else 1, schedule="static"):
            m = _row_max(p, code, t * ls, V)
            se = 0
            for j in range(_cdiv(V, bs)):
                c = j * bs
                c1 = c + bs if c + bs < V else V
                blk = 0
                for k in range(c, c1):
                    blk = blk + expf(load_f32(p, code, t * ls + k) - m)
                se = se + blk
            lse = logf(se)
            for k in range(K):
                out[t * K + k] = load_f32(p, code, t * ls + iget(idb, t * iss + k)) - m - lse


def ranks_kernel(output_ptr, logits_ptr, logits_stride, token_ids_ptr, vocab_size, BLOCK_SIZE,
                 *, grid):
    """Per row of the grid: how many of its logits are ``>=`` the sampled token's (the padding
    lanes of the last block, -inf, count too when that logit is -inf), to ``output``."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t N, t, c, V, bs, pad, nt
    cdef int32_t n
    cdef float x
    parse_grid(grid, 1, g)
    N = g[0]
    V = as_int(vocab_size, "vocab_size")
    bs = _block_size(BLOCK_SIZE, "BLOCK_SIZE")
    cdef IBuf out = index_at_least(output_ptr, "output_ptr", N, "one per row of the grid")
    cdef IBuf tokens = index_at_least(token_ids_ptr, "token_ids_ptr", N,
                                      "one per row of the grid")
    cdef FRows lg = check_frows(logits_ptr, "logits_ptr", M_LOGITS, logits_stride,
                                "logits_stride")
    need_frows(&lg, "logits_ptr", N, V, False, "the rows of the grid")
    if N > 0:
        _ids_in(tokens, 0, N, V, "token_ids_ptr")
    pad = _cdiv(V, bs) * bs - V if V > 0 else 0
    cdef const char* p = lg.ptr
    cdef int code = lg.code
    cdef Py_ssize_t ls = lg.stride
    nt = threads_for(N * V)
    with nogil:
        for t in prange(N, num_threads=nt if nt > 1 else 1, schedule="static"):
            x = load_f32(p, code, t * ls + iget(tokens, t))
            n = 0
            for c in range(V):
                if load_f32(p, code, t * ls + c) >= x:
                    n = n + 1
            if x == -INFINITY:
                n = n + <int32_t>pad
            iset(out, t, n)


def fill_logprob_token_ids_kernel(out_token_ids_ptr, out_token_ids_stride, out_valid_mask_ptr,
                                  out_valid_mask_stride, sampled_token_ids_ptr,
                                  topk_indices_ptr, topk_indices_stride,
                                  expanded_idx_mapping_ptr, num_per_req_token_ids_ptr,
                                  per_req_token_ids_ptr, per_req_token_ids_stride, NUM_TOPK,
                                  PADDED_COLS, *, grid):
    """Per row of the grid: column 0 the sampled token, then the request's own logprob token
    ids when it has any (``num_per_req[r] > 0``), else the row's top-k ids (``NUM_TOPK``), at
    most ``PADDED_COLS``; the valid mask set where written."""
    cdef Py_ssize_t g[3]
    cdef Py_ssize_t N, t, k, n, width = 1, nt
    cdef int64_t r, nc
    parse_grid(grid, 1, g)
    N = g[0]
    cdef int64_t K = as_int(NUM_TOPK, "NUM_TOPK")
    need_min("NUM_TOPK", K, 0)
    cdef int64_t P = as_int(PADDED_COLS, "PADDED_COLS")
    need_min("PADDED_COLS", P, 1)
    cdef FRows ot = check_frows(out_token_ids_ptr, "out_token_ids_ptr", M_INDEX,
                                out_token_ids_stride, "out_token_ids_stride")
    cdef FRows om = check_frows(out_valid_mask_ptr, "out_valid_mask_ptr", M_BOOL,
                                out_valid_mask_stride, "out_valid_mask_stride")
    cdef IBuf sampled = index_at_least(sampled_token_ids_ptr, "sampled_token_ids_ptr", N,
                                       "one per row of the grid")
    cdef FRows tk = check_frows(topk_indices_ptr, "topk_indices_ptr", M_INDEX,
                                topk_indices_stride, "topk_indices_stride")
    cdef IBuf mapping = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", N,
                                       "one per row of the grid")
    cdef IBuf num = index_at_least(num_per_req_token_ids_ptr, "num_per_req_token_ids_ptr", 0)
    cdef Py_ssize_t c_num = _count(num_per_req_token_ids_ptr, "num_per_req_token_ids_ptr",
                                   M_INDEX)
    cdef FRows pr = check_frows(per_req_token_ids_ptr, "per_req_token_ids_ptr", M_INDEX,
                                per_req_token_ids_stride, "per_req_token_ids_stride")
    cdef int64_t* counts = <int64_t*>malloc((N if N > 0 else 1) * sizeof(int64_t))
    if counts == NULL:
        raise MemoryError()
    try:
        for t in range(N):
            r = _request(mapping, t, c_num, "num_per_req_token_ids_ptr",
                         "expanded_idx_mapping_ptr")
            nc = iget(num, r)
            if nc > 0:
                n = nc if nc < P else P
                need_frows(&pr, "per_req_token_ids_ptr", r + 1, n, False,
                           "the request's logprob token ids")
                counts[t] = -1 - r          # from the request's own ids
            else:
                n = K if K < P else P
                need_frows(&tk, "topk_indices_ptr", t + 1, n, False, "NUM_TOPK ids per row")
                counts[t] = n
            if n + 1 > width:
                width = n + 1
        need_frows(&ot, "out_token_ids_ptr", N, width, True, "1 + the ids of each row")
        need_frows(&om, "out_valid_mask_ptr", N, width, True, "1 + the ids of each row")
        if N == 0:
            return
        _fill_rows(&ot, &om, sampled, &tk, &pr, counts, N, num, P)
    finally:
        free(counts)


cdef void _fill_rows(FRows* ot, FRows* om, IBuf sampled, FRows* tk, FRows* pr,
                     const int64_t* counts, Py_ssize_t N, IBuf num, int64_t P) noexcept:
    cdef IBuf out = _ibuf(ot), topk = _ibuf(tk), per = _ibuf(pr)
    cdef char* valid = om.ptr
    cdef Py_ssize_t t, k, n
    cdef int64_t r, nc
    for t in range(N):
        iset(out, t * ot.stride, iget(sampled, t))
        valid[t * om.stride] = 1
        if counts[t] < 0:
            r = -1 - counts[t]
            nc = iget(num, r)
            n = nc if nc < P else P
            for k in range(n):
                iset(out, t * ot.stride + 1 + k, iget(per, r * pr.stride + k))
                valid[t * om.stride + 1 + k] = 1
        else:
            for k in range(counts[t]):
                iset(out, t * ot.stride + 1 + k, iget(topk, t * tk.stride + k))
                valid[t * om.stride + 1 + k] = 1
