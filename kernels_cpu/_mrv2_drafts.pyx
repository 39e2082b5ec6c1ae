# cython: language_level=3, cdivision=True
"""CPU versions of Model Runner V2's drafter kernels (``vllm/v1/worker/gpu/spec_decode/``).

* ``standalone_ar_prepare_prefill_inputs_kernel`` -- the ``draft_model`` speculator's
  (``StandaloneARSpeculator``) step-0 input layout;
* ``ngram_scan_kernel``, ``ngram_finalize_kernel`` -- the ``ngram`` speculator's
  (``NgramGPUSpeculator``) suffix search and draft gather;
* ``target_dependent_ar_prepare_prefill_inputs_kernel``,
  ``target_dependent_ar_prepare_decode_inputs_kernel``,
  ``target_dependent_ar_update_draft_inputs_kernel`` -- the EAGLE/EAGLE3/MTP speculators'
  (``TargetDependentARSpeculator``) input kernels.

Each of these Triton kernels takes its request count only from its launch grid (one program
per request; the ngram scan also one per block of candidate positions), so each CPU kernel
takes the grid as the keyword-only ``grid`` (``kernels_cpu.GridLauncher`` supplies it).

Every function runs in three steps, as ``_spec_decode`` does: metadata checks; a ``nogil``
pass over the values that decide where the kernel reads or writes (offsets, request-state
indices, lengths), raising before anything is written; the compute pass, one request (or one
scan block) per iteration, on an OpenMP team when the launch is large enough. Index buffers
are int32 or int64 each on its own; values are stored in the output's width with the
truncation Triton's store applies.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

import torch

from fastdispatch._capi cimport PY_SSIZE_T_MAX

from kernels_cpu._buffers cimport IBuf, iget, iset, check_index, check_table, check_tensor
from kernels_cpu._checks cimport (
    as_flag, as_int, expected, first_decrease, index_at_least, need_count, need_min,
    need_table_rows, order_error,
)
from kernels_cpu._tables cimport Rows, check_rows, run_rows_for

from kernels_cpu._grid import normalize_grid


cdef inline int64_t _wrap_inc(int64_t v, bint wide) noexcept nogil:
    """``v + 1`` in the buffer's own width with two's-complement wrap (as the GPU adds)."""
    if wide:
        return <int64_t>(<uint64_t>v + 1u)
    return <int32_t>(<uint32_t>v + 1u)


cdef inline int64_t _min(int64_t a, int64_t b) noexcept nogil:
    return a if a < b else b


cdef inline int64_t _max(int64_t a, int64_t b) noexcept nogil:
    return a if a > b else b


cdef Py_ssize_t _programs(object grid, int axis) except -1:
    """Programs on ``axis`` of the launch grid (a 1-3 tuple of ints; missing axes are 1)."""
    cdef tuple g
    if type(grid) is tuple and len(<tuple>grid) == 3:
        g = <tuple>grid
        if type(g[0]) is int and type(g[1]) is int and type(g[2]) is int:
            if g[0] >= 0 and g[1] >= 0 and g[2] >= 0:
                return g[axis]
    return normalize_grid(grid, {})[axis]


cdef int _state_error(str map_name, Py_ssize_t at, int64_t v, str name, Py_ssize_t have) except -1:
    raise IndexError(expected(f"{map_name}[{at}]", f"a request-state index of {name}, in "
                              f"[0, {have})", v))


# ---------------------------------------------------------------------------------------------
# standalone_ar_prepare_prefill_inputs_kernel
# ---------------------------------------------------------------------------------------------

cdef struct SarArgs:
    IBuf tin
    IBuf tpos
    IBuf last
    IBuf idx
    IBuf oin
    IBuf opos
    IBuf lti
    IBuf oqsl
    IBuf osl
    IBuf qsl
    IBuf sl
    IBuf rej
    int64_t mml


cdef void _sar_row(const void* p, Py_ssize_t i) noexcept nogil:
    cdef const SarArgs* a = <const SarArgs*>p
    cdef int64_t qs = iget(a.qsl, i)
    cdef int64_t qn = iget(a.qsl, i + 1)
    cdef int64_t num_valid = qn - qs - iget(a.rej, i)
    # the correction token is cast to int32 before it is stored (``.to(tl.int32)``)
    cdef int64_t corr = <int32_t>iget(a.last, iget(a.idx, i))
    cdef int64_t start = iget(a.tpos, qs)
    cdef int64_t out_start = qs + i
    cdef int64_t total = qn - qs + 1
    cdef int64_t cap = a.mml - 1
    cdef int64_t j, tok, ns
    for j in range(total):
        if j < num_valid:
            tok = iget(a.tin, qs + j)
        elif j == num_valid:
            tok = corr
        else:
            tok = 0                     # a rejected slot: the masked load's ``other``
        iset(a.oin, out_start + j, tok)
        iset(a.opos, out_start + j, _min(start + j, cap))
    iset(a.lti, i, out_start + num_valid)
    iset(a.oqsl, i, out_start)
    ns = _wrap_inc(iget(a.sl, i), a.sl.wide)
    iset(a.osl, i, _min(ns, a.mml))


cdef enum SarBad:
    SAR_OK = 0
    SAR_STATE = 1       # idx_mapping value outside last_sampled
    SAR_IDS = 2         # a token read beyond target_input_ids


cdef int _sar_check(const SarArgs* a, Py_ssize_t R, Py_ssize_t n_last, Py_ssize_t n_tin,
                    Py_ssize_t* at) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t rs, qs, qn, nv, reach
    for i in range(R):
        rs = iget(a.idx, i)
        if rs < 0 or rs >= n_last:
            at[0] = i
            return SAR_STATE
        qs = iget(a.qsl, i)
        qn = iget(a.qsl, i + 1)
        nv = _min(qn - qs - iget(a.rej, i), qn - qs + 1)   # tokens read from the target
        if nv > 0:
            reach = qs + nv
            if reach > n_tin:
                at[0] = i
                return SAR_IDS
    return SAR_OK


def standalone_ar_prepare_prefill_inputs_kernel(
    target_input_ids_ptr, target_positions_ptr, last_sampled_ptr, idx_mapping_ptr,
    out_input_ids_ptr, out_positions_ptr, last_token_indices_ptr, out_query_start_loc_ptr,
    out_seq_lens_ptr, query_start_loc_ptr, seq_lens_ptr, num_rejected_ptr, max_num_reqs,
    max_model_len, BLOCK_SIZE=None, *, grid,
):
    """The draft model's step-0 inputs: each request's query expanded by one slot.

    Request ``i`` (of ``R`` = the grid's programs) is laid out at ``out_start = qsl[i] + i``:
    its ``num_valid = query_len - num_rejected`` accepted target tokens, then the correction
    token (``last_sampled[idx_mapping[i]]`` cast to int32), then 0 for each rejected slot;
    positions ``min(positions[qsl[i]] + j, max_model_len - 1)``. Also per request: the last
    accepted slot (``last_token_indices``), ``out_start`` (the expanded query start) and
    ``min(seq_len + 1, max_model_len)``; the last request pads ``out_query_start_loc`` to
    ``max_num_reqs + 1`` entries with the expanded total and zeroes ``out_seq_lens`` and
    ``last_token_indices`` up to ``max_num_reqs``.

    ``query_start_loc_ptr`` must be non-negative and non-decreasing (the expanded rows of two
    requests would overlap otherwise); every ``idx_mapping`` value a row of ``last_sampled``;
    ``target_positions_ptr`` holds each request's first position (read even for an empty
    query). ``BLOCK_SIZE`` does not change the result.
    """
    cdef SarArgs a
    cdef Py_ssize_t R = _programs(grid, 0)
    cdef Py_ssize_t mnr, n_last, n_tin, n_tpos, at, bad, k
    cdef Py_ssize_t shp[1]
    cdef int64_t total_expanded
    mnr = as_int(max_num_reqs, "max_num_reqs")
    a.mml = as_int(max_model_len, "max_model_len")
    a.tin = check_index(target_input_ids_ptr, "target_input_ids_ptr", -1, shp)
    n_tin = shp[0]
    a.tpos = check_index(target_positions_ptr, "target_positions_ptr", -1, shp)
    n_tpos = shp[0]
    a.last = check_index(last_sampled_ptr, "last_sampled_ptr", -1, shp)
    n_last = shp[0]
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", R, "one per request")
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", R + 1 if R else 0,
                           "num_reqs + 1")
    a.sl = index_at_least(seq_lens_ptr, "seq_lens_ptr", R, "one per request")
    a.rej = index_at_least(num_rejected_ptr, "num_rejected_ptr", R, "one per request")
    if R == 0:                      # no program: nothing is read or written
        for t, name in ((out_input_ids_ptr, "out_input_ids_ptr"),
                        (out_positions_ptr, "out_positions_ptr"),
                        (last_token_indices_ptr, "last_token_indices_ptr"),
                        (out_query_start_loc_ptr, "out_query_start_loc_ptr"),
                        (out_seq_lens_ptr, "out_seq_lens_ptr")):
            check_index(t, name, -1, shp)
        return
    with nogil:
        bad = first_decrease(a.qsl, R + 1)
    if bad >= 0:
        order_error("query_start_loc_ptr", a.qsl, bad)
    need_count("target_positions_ptr", n_tpos, iget(a.qsl, R - 1) + 1,
               "each request's first position, at query_start_loc")
    total_expanded = iget(a.qsl, R) + R
    a.oin = index_at_least(out_input_ids_ptr, "out_input_ids_ptr", total_expanded,
                           "query_start_loc[num_reqs] + num_reqs")
    a.opos = index_at_least(out_positions_ptr, "out_positions_ptr", total_expanded,
                            "query_start_loc[num_reqs] + num_reqs")
    a.lti = index_at_least(last_token_indices_ptr, "last_token_indices_ptr", max(R, mnr),
                           "max(num_reqs, max_num_reqs)")
    a.oqsl = index_at_least(out_query_start_loc_ptr, "out_query_start_loc_ptr",
                            max(R + 1, mnr + 1), "max(num_reqs, max_num_reqs) + 1")
    a.osl = index_at_least(out_seq_lens_ptr, "out_seq_lens_ptr", max(R, mnr),
                           "max(num_reqs, max_num_reqs)")
    with nogil:
        bad = _sar_check(&a, R, n_last, n_tin, &at)
    if bad == SAR_STATE:
        _state_error("idx_mapping_ptr", at, iget(a.idx, at), "last_sampled_ptr", n_last)
    if bad == SAR_IDS:
        raise ValueError(expected("target_input_ids_ptr", f"the accepted tokens of request "
                                  f"{at} (up to query_start_loc[{at}] + query_len - "
                                  f"num_rejected)", f"{n_tin} elements"))
    run_rows_for(_sar_row, &a, R, total_expanded * 2)
    # the last program's padding (for CUDA graphs)
    iset(a.oqsl, R, total_expanded)
    for k in range(R + 1, mnr + 1):
        iset(a.oqsl, k, total_expanded)
    for k in range(R, mnr):
        iset(a.osl, k, 0)
        iset(a.lti, k, 0)


# ---------------------------------------------------------------------------------------------
# ngram_scan_kernel
# ---------------------------------------------------------------------------------------------

cdef struct ScanArgs:
    Rows tok
    IBuf idx
    IBuf tlen
    IBuf nsam
    Rows scratch
    int64_t Lp1
    int64_t min_n
    int64_t max_n
    int64_t block_l
    Py_ssize_t n_blocks


cdef inline bint _scanned(int64_t ns, int64_t seq, int64_t min_n, int64_t blk,
                          int64_t block_l) noexcept nogil:
    """Whether program (request, ``blk``) searches: an eligible row (a token was sampled, the
    sequence holds ``MIN_N`` tokens) and a block that starts at or before the last candidate
    match position ``seq - MIN_N - 1``."""
    return ns > 0 and seq >= min_n and blk * block_l <= seq - min_n - 1


cdef void _scan_block(const void* p, Py_ssize_t k) noexcept nogil:
    cdef const ScanArgs* a = <const ScanArgs*>p
    cdef Py_ssize_t b = k // a.n_blocks
    cdef int64_t blk = k % a.n_blocks
    cdef int64_t rs = iget(a.idx, b)
    cdef int64_t seq = iget(a.tlen, rs)
    cdef int64_t ns = iget(a.nsam, b)
    cdef Py_ssize_t off = b * a.scratch.stride + blk
    cdef int64_t pos, last, n, j, best, block_best = 0
    cdef Py_ssize_t row
    cdef bint match
    if not _scanned(ns, seq, a.min_n, blk, a.block_l):
        iset(a.scratch.buf, off, 0)
        return
    row = rs * a.tok.stride
    # Per position, the longest n whose n-gram there equals the sequence's last n tokens
    # (vLLM packs (n, pos) as n * (L + 1) + pos + 1 and keeps the last n that matched, i.e. the
    # longest: searched from the longest down). Tokens compare as int32 (``.to(tl.int32)``).
    # The suffix tokens a match compares sit at seq - n + j >= pos + 1 >= 1, never at the
    # masked -1 slots of vLLM's suffix register.
    for pos in range(blk * a.block_l, blk * a.block_l + a.block_l):
        best = 0
        n = a.max_n
        while n >= a.min_n:
            last = seq - n - 1
            if pos >= 0 and pos <= last:
                match = True
                for j in range(n):
                    if <int32_t>iget(a.tok.buf, row + pos + j) != \
                            <int32_t>iget(a.tok.buf, row + seq - n + j):
                        match = False
                        break
                if match:
                    best = n * a.Lp1 + pos + 1
                    break
            n -= 1
        if best > block_best:
            block_best = best
    iset(a.scratch.buf, off, block_best)


cdef Py_ssize_t _scan_check(const ScanArgs* a, Py_ssize_t B, Py_ssize_t n_tlen,
                            int* what) noexcept nogil:
    """First request whose launch would read out of bounds (``what``: 1 its request-state
    index is outside total_len, 2 outside the token table, 3 its sequence is longer than a
    token row), else -1."""
    cdef Py_ssize_t b
    cdef int64_t rs, seq
    for b in range(B):
        rs = iget(a.idx, b)
        if rs < 0 or rs >= n_tlen:
            what[0] = 1
            return b
        seq = iget(a.tlen, rs)
        if a.n_blocks > 0 and a.max_n >= 1 and _scanned(iget(a.nsam, b), seq, a.min_n, 0,
                                                         a.block_l):
            if rs >= a.tok.rows:
                what[0] = 2
                return b
            if seq > a.tok.cols:
                what[0] = 3
                return b
    return -1


def ngram_scan_kernel(
    token_ids_ptr, token_ids_stride, idx_mapping_ptr, total_len_ptr, num_sampled_ptr,
    scratch_ptr, scratch_stride, L, MIN_N, MAX_N, MAX_N_PO2, BLOCK_L, *, grid,
):
    """The ngram drafter's search: per (request, block of ``BLOCK_L`` candidate positions),
    the best packed score ``n * (L + 1) + pos + 1`` of a position ``pos`` whose n-gram equals
    the request's last ``n`` tokens (``MIN_N <= n <= MAX_N``, the longest n per position, the
    largest score per block), 0 for no match, an ineligible request (nothing sampled, fewer
    than ``MIN_N`` tokens) or a block past the last candidate. Written to
    ``scratch[b, blk]``.

    The grid is ``(B, n_blocks)``: one scratch slot per program, so the scratch table needs
    ``B`` rows of at least ``n_blocks`` columns. A searched request's state index must be a
    row of the token table and its ``total_len`` at most the row's length.
    """
    cdef ScanArgs a
    cdef Py_ssize_t B = _programs(grid, 0)
    cdef Py_ssize_t NB = _programs(grid, 1)
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n_tlen, bad
    cdef int what = 0
    cdef int64_t max_n_po2
    cdef int64_t L64 = as_int(L, "L")
    a.min_n = as_int(MIN_N, "MIN_N")
    a.max_n = as_int(MAX_N, "MAX_N")
    max_n_po2 = as_int(MAX_N_PO2, "MAX_N_PO2")
    a.block_l = as_int(BLOCK_L, "BLOCK_L")
    need_min("MIN_N", a.min_n, 0)
    need_min("MAX_N", a.max_n, 0)
    need_min("MAX_N_PO2", max_n_po2, max(a.max_n, 1), "max(MAX_N, 1)")
    need_min("BLOCK_L", a.block_l, 1)
    a.Lp1 = L64 + 1
    a.n_blocks = NB
    a.tok = check_rows(token_ids_ptr, "token_ids_ptr", token_ids_stride, "token_ids_stride")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per request")
    a.tlen = check_index(total_len_ptr, "total_len_ptr", -1, shp)
    n_tlen = shp[0]
    a.nsam = index_at_least(num_sampled_ptr, "num_sampled_ptr", B, "one per request")
    a.scratch = check_rows(scratch_ptr, "scratch_ptr", scratch_stride, "scratch_stride")
    if B == 0 or NB == 0:
        return
    need_table_rows("scratch_ptr", a.scratch.rows, B, "one per request")
    if a.scratch.cols < NB:
        raise ValueError(expected("scratch_ptr", f"rows of at least n_blocks = {NB} columns "
                                  "(the grid's second axis)", f"{a.scratch.cols}"))
    with nogil:
        bad = _scan_check(&a, B, n_tlen, &what)
    if bad >= 0:
        _ngram_row_error(what, bad, &a.idx, &a.tlen, n_tlen, a.tok)
    run_rows_for(_scan_block, &a, B * NB, B * NB * a.block_l * (a.max_n + 1))


cdef int _ngram_row_error(int what, Py_ssize_t b, IBuf* idx, IBuf* tlen, Py_ssize_t n_tlen,
                          Rows tok) except -1:
    cdef int64_t rs = iget(idx[0], b)
    if what == 1:
        _state_error("idx_mapping_ptr", b, rs, "total_len_ptr", n_tlen)
    if what == 2:
        raise IndexError(expected(f"idx_mapping_ptr[{b}]", f"a row of token_ids_ptr, in "
                                  f"[0, {tok.rows})", rs))
    raise ValueError(expected(f"total_len_ptr[{rs}]", f"at most the token row's length "
                              f"{tok.cols} (request {b} reads that many tokens)",
                              iget(tlen[0], rs)))


# ---------------------------------------------------------------------------------------------
# ngram_finalize_kernel
# ---------------------------------------------------------------------------------------------

cdef struct FinArgs:
    Rows tok
    IBuf idx
    IBuf tlen
    IBuf nsam
    IBuf last
    Rows scratch
    IBuf drafts
    int64_t L
    int64_t n_blocks
    bint pad_zero       # N_BLOCKS < N_BLOCKS_PO2: the masked lanes' 0 joins the max
    int64_t K


cdef inline void _fin_plan(const FinArgs* a, Py_ssize_t b, int64_t* start,
                           int64_t* valid) noexcept nogil:
    """Request ``b``'s draft start and how many of its K slots gather a token (the rest take
    the last sampled token)."""
    cdef Py_ssize_t base = b * a.scratch.stride
    cdef int64_t score = 0, v, k, s1, best_n, best_pos, avail
    cdef int64_t rs = iget(a.idx, b)
    cdef bint first = not a.pad_zero
    for k in range(a.n_blocks):
        v = iget(a.scratch.buf, base + k)
        if first or v > score:
            score = v
            first = False
    if score > 0 and iget(a.nsam, b) > 0:
        s1 = score - 1
        best_n = s1 // (a.L + 1)
        best_pos = s1 - best_n * (a.L + 1)
        start[0] = best_pos + best_n
        avail = iget(a.tlen, rs) - start[0]
        valid[0] = _max(_min(avail, a.K), 0)
    else:
        start[0] = 0
        valid[0] = 0


cdef void _fin_row(const void* p, Py_ssize_t b) noexcept nogil:
    cdef const FinArgs* a = <const FinArgs*>p
    cdef int64_t rs = iget(a.idx, b)
    cdef int64_t last_tok = iget(a.last, rs)
    cdef int64_t start, valid, k
    cdef Py_ssize_t row = rs * a.tok.stride
    _fin_plan(a, b, &start, &valid)
    for k in range(a.K):
        if k < valid:
            iset(a.drafts, b * a.K + k, iget(a.tok.buf, row + _min(start + k, a.L - 1)))
        else:
            iset(a.drafts, b * a.K + k, last_tok)


cdef Py_ssize_t _fin_check(const FinArgs* a, Py_ssize_t B, Py_ssize_t n_tlen,
                           Py_ssize_t n_last, int* what, int64_t* at) noexcept nogil:
    """First request whose launch would read out of bounds (``what``: 1 state index outside
    total_len, 4 outside last_sampled, 2 outside the token table, 3 a gathered token outside
    its row, at ``at``), else -1."""
    cdef Py_ssize_t b
    cdef int64_t rs, start, valid, lo, hi
    for b in range(B):
        rs = iget(a.idx, b)
        if rs < 0 or rs >= n_tlen:
            what[0] = 1
            return b
        if rs >= n_last:
            what[0] = 4
            return b
        _fin_plan(a, b, &start, &valid)
        if valid > 0:
            if rs >= a.tok.rows:
                what[0] = 2
                return b
            lo = _min(start, a.L - 1)
            hi = _min(start + valid - 1, a.L - 1)
            if lo < 0 or hi >= a.tok.cols:
                what[0] = 3
                at[0] = lo if lo < 0 else hi
                return b
    return -1


def ngram_finalize_kernel(
    token_ids_ptr, token_ids_stride, idx_mapping_ptr, total_len_ptr, num_sampled_ptr,
    last_sampled_ptr, scratch_ptr, scratch_stride, drafts_ptr, L, N_BLOCKS, K, K_PO2,
    N_BLOCKS_PO2, *, grid,
):
    """The ngram drafter's drafts: per request, the best score over its ``N_BLOCKS`` scratch
    slots decodes to (n, pos); the ``K`` tokens after the match, ``token[min(pos + n + k,
    L - 1)]`` while ``pos + n + k < total_len``, the rest (and every slot of a request without
    a match or without a sampled token) the request's last sampled token. Written flat to
    ``drafts[b * K + k]``.

    The grid is ``(B,)``. ``K_PO2``/``N_BLOCKS_PO2`` are the kernel's lane counts: they must
    cover ``K``/``N_BLOCKS`` (vLLM's next powers of two); where ``N_BLOCKS_PO2`` exceeds
    ``N_BLOCKS`` the masked lanes' 0 takes part in the maximum, as in the kernel.
    """
    cdef FinArgs a
    cdef Py_ssize_t B = _programs(grid, 0)
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n_tlen, n_last, bad
    cdef int what = 0
    cdef int64_t at = 0, k_po2, nb_po2
    a.L = as_int(L, "L")
    a.n_blocks = as_int(N_BLOCKS, "N_BLOCKS")
    a.K = as_int(K, "K")
    k_po2 = as_int(K_PO2, "K_PO2")
    nb_po2 = as_int(N_BLOCKS_PO2, "N_BLOCKS_PO2")
    need_min("L", a.L, 0)
    need_min("N_BLOCKS", a.n_blocks, 0)
    need_min("K", a.K, 0)
    need_min("K_PO2", k_po2, max(a.K, 1), "max(K, 1)")
    need_min("N_BLOCKS_PO2", nb_po2, max(a.n_blocks, 1), "max(N_BLOCKS, 1)")
    a.pad_zero = a.n_blocks < nb_po2
    a.tok = check_rows(token_ids_ptr, "token_ids_ptr", token_ids_stride, "token_ids_stride")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per request")
    a.tlen = check_index(total_len_ptr, "total_len_ptr", -1, shp)
    n_tlen = shp[0]
    a.nsam = index_at_least(num_sampled_ptr, "num_sampled_ptr", B, "one per request")
    a.last = check_index(last_sampled_ptr, "last_sampled_ptr", -1, shp)
    n_last = shp[0]
    a.scratch = check_rows(scratch_ptr, "scratch_ptr", scratch_stride, "scratch_stride")
    a.drafts = index_at_least(drafts_ptr, "drafts_ptr", B * a.K, "num_reqs * K")
    if B == 0:
        return
    if a.n_blocks > 0:
        need_table_rows("scratch_ptr", a.scratch.rows, B, "one per request")
        if a.scratch.cols < a.n_blocks:
            raise ValueError(expected("scratch_ptr", f"rows of at least N_BLOCKS = "
                                      f"{a.n_blocks} columns", f"{a.scratch.cols}"))
    with nogil:
        bad = _fin_check(&a, B, n_tlen, n_last, &what, &at)
    if bad >= 0:
        if what == 4:
            _state_error("idx_mapping_ptr", bad, iget(a.idx, bad), "last_sampled_ptr", n_last)
        if what == 3:
            raise IndexError(expected("token_ids_ptr", f"a token row holding column {at} "
                                      f"(request {bad}'s draft; L = {a.L})",
                                      f"rows of {a.tok.cols}"))
        _ngram_row_error(what, bad, &a.idx, &a.tlen, n_tlen, a.tok)
    run_rows_for(_fin_row, &a, B, B * (a.K + a.n_blocks))


# ---------------------------------------------------------------------------------------------
# target_dependent_ar_prepare_prefill_inputs_kernel (EAGLE, EAGLE3, MTP)
# ---------------------------------------------------------------------------------------------

cdef struct TpfArgs:
    IBuf lti
    IBuf step
    IBuf din
    IBuf dpos
    IBuf dqsl
    IBuf dsl
    IBuf tin
    IBuf tpos
    IBuf idx
    IBuf last
    IBuf nxt
    IBuf nsam
    IBuf rej
    IBuf qsl
    IBuf sl


cdef void _tpf_row(const void* p, Py_ssize_t i) noexcept nogil:
    cdef const TpfArgs* a = <const TpfArgs*>p
    cdef int64_t rs = iget(a.idx, i)
    cdef int64_t qs = iget(a.qsl, i)
    cdef int64_t ql = iget(a.qsl, i + 1) - qs - iget(a.rej, i)
    cdef int64_t nxt, j
    if iget(a.nsam, i) > 0:
        nxt = <int32_t>iget(a.last, rs)      # ``.to(tl.int32)``
    else:
        nxt = iget(a.nxt, rs)                # chunked prefill: the next prompt token
    for j in range(1, ql):                   # the target's tokens shifted left by one
        iset(a.din, qs + j - 1, iget(a.tin, qs + j))
    iset(a.lti, i, qs + ql - 1)
    iset(a.din, qs + ql - 1, nxt)
    for j in range(ql):
        iset(a.dpos, qs + j, iget(a.tpos, qs + j))
    iset(a.dqsl, i, qs)
    iset(a.dsl, i, iget(a.sl, i))


cdef enum TpfBad:
    TPF_OK = 0
    TPF_REJ = 1         # num_rejected outside [0, query_len - 1]
    TPF_LAST = 2        # state index outside last_sampled (a request that sampled)
    TPF_NEXT = 3        # state index outside next_prefill_tokens (a chunked prefill)


cdef int _tpf_check(const TpfArgs* a, Py_ssize_t R, Py_ssize_t n_last, Py_ssize_t n_next,
                    Py_ssize_t* at) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t rs, q, r
    for i in range(R):
        q = iget(a.qsl, i + 1) - iget(a.qsl, i)
        r = iget(a.rej, i)
        if r < 0 or r > q - 1:
            at[0] = i
            return TPF_REJ
        rs = iget(a.idx, i)
        if iget(a.nsam, i) > 0:
            if rs < 0 or rs >= n_last:
                at[0] = i
                return TPF_LAST
        elif rs < 0 or rs >= n_next:
            at[0] = i
            return TPF_NEXT
    return TPF_OK


def target_dependent_ar_prepare_prefill_inputs_kernel(
    last_token_indices_ptr, draft_current_step_ptr, draft_input_ids_ptr, draft_positions_ptr,
    draft_query_start_loc_ptr, draft_seq_lens_ptr, target_input_ids_ptr, target_positions_ptr,
    idx_mapping_ptr, last_sampled_ptr, next_prefill_tokens_ptr, num_sampled_ptr,
    num_rejected_ptr, query_start_loc_ptr, seq_lens_ptr, max_num_reqs, BLOCK_SIZE=None, *,
    grid,
):
    """The EAGLE/MTP drafter's prefill inputs, in the target's own layout.

    Per request ``i`` (of ``R`` = the grid's programs), over its ``query_len - num_rejected``
    kept tokens from ``qsl[i]``: the target's input ids shifted left by one, then the next
    token in the last kept slot -- the last sampled token (cast to int32) when the request
    sampled one, else the next prompt token of a chunked prefill (``next_prefill_tokens``,
    read flat: row 0 of vLLM's ``[lookahead, max_num_reqs]`` table); the target's positions;
    the last kept slot (``last_token_indices``), ``qsl[i]`` and ``seq_len``. The last request
    resets ``draft_current_step`` to 0 and pads the query starts (with its query end), the
    seq_lens and last-token indices (with 0) up to ``max_num_reqs``.

    ``query_start_loc_ptr`` must be non-negative and non-decreasing and each request keep at
    least one token (``0 <= num_rejected <= query_len - 1``): otherwise the last-token write
    lands in another request's slots (or before the buffer). ``BLOCK_SIZE`` does not change
    the result.
    """
    cdef TpfArgs a
    cdef Py_ssize_t R = _programs(grid, 0)
    cdef Py_ssize_t mnr, n_last, n_next, at, bad, k, end
    cdef Py_ssize_t shp[1]
    cdef int64_t q_end
    mnr = as_int(max_num_reqs, "max_num_reqs")
    a.lti = check_index(last_token_indices_ptr, "last_token_indices_ptr", -1, shp)
    a.step = check_index(draft_current_step_ptr, "draft_current_step_ptr", -1, shp)
    a.din = check_index(draft_input_ids_ptr, "draft_input_ids_ptr", -1, shp)
    a.dpos = check_index(draft_positions_ptr, "draft_positions_ptr", -1, shp)
    a.dqsl = check_index(draft_query_start_loc_ptr, "draft_query_start_loc_ptr", -1, shp)
    a.dsl = check_index(draft_seq_lens_ptr, "draft_seq_lens_ptr", -1, shp)
    a.tin = check_index(target_input_ids_ptr, "target_input_ids_ptr", -1, shp)
    a.tpos = check_index(target_positions_ptr, "target_positions_ptr", -1, shp)
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", R, "one per request")
    a.last = check_index(last_sampled_ptr, "last_sampled_ptr", -1, shp)
    n_last = shp[0]
    a.nxt = check_index(next_prefill_tokens_ptr, "next_prefill_tokens_ptr", -1, shp)
    n_next = shp[0]
    a.nsam = index_at_least(num_sampled_ptr, "num_sampled_ptr", R, "one per request")
    a.rej = index_at_least(num_rejected_ptr, "num_rejected_ptr", R, "one per request")
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", R + 1 if R else 0,
                           "num_reqs + 1")
    a.sl = index_at_least(seq_lens_ptr, "seq_lens_ptr", R, "one per request")
    if R == 0:                      # no program: nothing is read or written
        return
    with nogil:
        bad = first_decrease(a.qsl, R + 1)
    if bad >= 0:
        order_error("query_start_loc_ptr", a.qsl, bad)
    with nogil:
        bad = _tpf_check(&a, R, n_last, n_next, &at)
    if bad == TPF_REJ:
        raise ValueError(expected(f"num_rejected_ptr[{at}]", f"a count in [0, query_len - 1 = "
                                  f"{iget(a.qsl, at + 1) - iget(a.qsl, at) - 1}] (a request "
                                  "keeps at least one token)", iget(a.rej, at)))
    if bad == TPF_LAST:
        _state_error("idx_mapping_ptr", at, iget(a.idx, at), "last_sampled_ptr", n_last)
    if bad == TPF_NEXT:
        _state_error("idx_mapping_ptr", at, iget(a.idx, at), "next_prefill_tokens_ptr", n_next)
    # the kept tokens end where the last request's do (offsets are non-decreasing)
    end = iget(a.qsl, R) - iget(a.rej, R - 1)
    for name, t in (("target_input_ids_ptr", target_input_ids_ptr),
                    ("target_positions_ptr", target_positions_ptr),
                    ("draft_input_ids_ptr", draft_input_ids_ptr),
                    ("draft_positions_ptr", draft_positions_ptr)):
        index_at_least(t, name, end, "the last request's kept tokens")
    index_at_least(last_token_indices_ptr, "last_token_indices_ptr", max(R, mnr),
                   "max(num_reqs, max_num_reqs)")
    index_at_least(draft_seq_lens_ptr, "draft_seq_lens_ptr", max(R, mnr),
                   "max(num_reqs, max_num_reqs)")
    index_at_least(draft_query_start_loc_ptr, "draft_query_start_loc_ptr", max(R, mnr + 1),
                   "max(num_reqs, max_num_reqs + 1)")
    index_at_least(draft_current_step_ptr, "draft_current_step_ptr", 1)
    run_rows_for(_tpf_row, &a, R, end * 2)
    # the last program's reset and padding (for CUDA graphs)
    iset(a.step, 0, 0)
    q_end = iget(a.qsl, R)
    for k in range(R, mnr + 1):
        iset(a.dqsl, k, q_end)
    for k in range(R, mnr):
        iset(a.dsl, k, 0)
        iset(a.lti, k, 0)


# ---------------------------------------------------------------------------------------------
# target_dependent_ar_prepare_decode_inputs_kernel
# ---------------------------------------------------------------------------------------------

cdef IBuf _strided_rows(object t, str name, object stride, str stride_name, Py_ssize_t need,
                        Py_ssize_t* stride_out) except *:
    """An int32/int64 buffer read at ``ptr + i * stride`` for ``i < need``: a 1-D view of any
    stride (a column of a wider table, as vLLM's ``draft_tokens[:, 0]``; ``stride`` its
    ``stride(0)``), or a table/flat buffer as ``check_rows`` reads one."""
    cdef IBuf b
    cdef Rows r
    cdef int64_t st
    cdef Py_ssize_t shp[1]
    if isinstance(t, torch.Tensor) and t.dim() == 1 and not t.is_contiguous():
        st = as_int(stride, stride_name)
        b = check_index(t.as_strided((1,), (1,)), name, -1, shp)   # its dtype and device
        if t.shape[0] > 1 and st != t.stride(0):
            raise ValueError(expected(stride_name, f"{name}.stride(0) = {t.stride(0)}", st))
        need_count(name, t.shape[0], need, "one per request")
        stride_out[0] = st
        return b
    r = check_rows(t, name, stride, stride_name)
    if need > 0:
        need_table_rows(name, r.rows, need, "one per request")
        if r.cols < 1:
            raise ValueError(expected(name, "rows of at least one element", "empty rows"))
    stride_out[0] = r.stride
    return r.buf


cdef struct TdcArgs:
    IBuf drafts
    Py_ssize_t dstride
    IBuf tsl
    IBuf rej
    IBuf ids
    IBuf pos
    IBuf ssp
    IBuf sl
    int64_t mml
    bint advance


cdef void _tdc_row(const void* p, Py_ssize_t i) noexcept nogil:
    cdef const TdcArgs* a = <const TdcArgs*>p
    cdef int64_t seq
    iset(a.ids, i, iget(a.drafts, i * a.dstride))
    iset(a.ssp, i, _wrap_inc(iget(a.ssp, i), a.ssp.wide))
    seq = iget(a.tsl, i) - iget(a.rej, i)
    if a.advance:
        iset(a.pos, i, _min(_wrap_inc(iget(a.pos, i), a.pos.wide), a.mml - 1))
        seq = _min(seq + 1, a.mml)
    iset(a.sl, i, seq)


def target_dependent_ar_prepare_decode_inputs_kernel(
    draft_tokens_ptr, draft_tokens_stride, target_seq_lens_ptr, num_rejected_ptr, input_ids_ptr,
    positions_ptr, sample_src_positions_ptr, query_start_loc_ptr, seq_lens_ptr, max_model_len,
    max_num_reqs, BLOCK_SIZE=None, ADVANCE_DRAFT_POSITIONS=None, *, grid,
):
    """The EAGLE/MTP drafter's first decode step: per request ``i`` (the grid is ``R + 1``
    programs), the first draft token (``draft_tokens[i * stride]``) becomes its input id, its
    sampling position advances by one, and its seq_len is ``target_seq_len - num_rejected``
    -- under ``ADVANCE_DRAFT_POSITIONS`` (default True) plus one, capped at ``max_model_len``,
    with its position advanced and capped at ``max_model_len - 1``. The extra program writes
    the one-token query starts ``min(b, R)`` for ``b <= max_num_reqs`` and zeroes seq_lens
    from ``R`` to ``max_num_reqs``. ``BLOCK_SIZE`` does not change the result.
    """
    cdef TdcArgs a
    cdef IBuf qsl
    cdef Py_ssize_t G = _programs(grid, 0)
    cdef Py_ssize_t R = G - 1 if G > 0 else 0
    cdef Py_ssize_t mnr, k
    a.mml = as_int(max_model_len, "max_model_len")
    mnr = as_int(max_num_reqs, "max_num_reqs")
    a.advance = as_flag(ADVANCE_DRAFT_POSITIONS, "ADVANCE_DRAFT_POSITIONS", 1)
    a.drafts = _strided_rows(draft_tokens_ptr, "draft_tokens_ptr", draft_tokens_stride,
                             "draft_tokens_stride", R, &a.dstride)
    a.tsl = index_at_least(target_seq_lens_ptr, "target_seq_lens_ptr", R, "one per request")
    a.rej = index_at_least(num_rejected_ptr, "num_rejected_ptr", R, "one per request")
    a.ids = index_at_least(input_ids_ptr, "input_ids_ptr", R, "one per request")
    a.pos = index_at_least(positions_ptr, "positions_ptr", R if a.advance else 0,
                           "one per request")
    a.ssp = index_at_least(sample_src_positions_ptr, "sample_src_positions_ptr", R,
                           "one per request")
    a.sl = index_at_least(seq_lens_ptr, "seq_lens_ptr", max(R, mnr) if G else 0,
                          "max(num_reqs, max_num_reqs)")
    qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", mnr + 1 if G else 0,
                         "max_num_reqs + 1")
    if G == 0:
        return
    run_rows_for(_tdc_row, &a, R, R * 4)
    for k in range(mnr + 1):
        iset(qsl, k, k if k < R else R)
    for k in range(R, mnr):
        iset(a.sl, k, 0)


# ---------------------------------------------------------------------------------------------
# target_dependent_ar_update_draft_inputs_kernel
# ---------------------------------------------------------------------------------------------

cdef enum:
    M_HIDDEN = (1 << 3) | (1 << 4) | (1 << 8) | (1 << 9)   # float32/64, float16, bfloat16


cdef struct FRows:
    char* ptr
    Py_ssize_t rows       # rows of ``width`` elements the launch may address
    Py_ssize_t stride     # elements between rows
    Py_ssize_t itemsize
    int code


cdef int _float_rows(object t, str name, object stride, str stride_name, int64_t width,
                     FRows* f) except -1:
    """A float table read or written at ``ptr + i * stride + [0, width)``: a 2-D tensor of its
    own rows (columns unit-stride, ``stride`` its ``stride(0)`` when it has more than one row,
    at least ``width`` columns), or a contiguous buffer of any other shape holding the rows
    that fit."""
    cdef Py_ssize_t shp[2]
    cdef Py_ssize_t st0, n
    cdef int64_t st = as_int(stride, stride_name)
    need_min(stride_name, st, 0)
    if isinstance(t, torch.Tensor) and t.dim() == 2:
        f.ptr = check_table(t, name, M_HIDDEN, shp, &st0, &f.code)
        if shp[0] > 1 and shp[1] > 0 and st != st0:
            raise ValueError(expected(stride_name, f"{name}.stride(0) = {st0}", st))
        if shp[1] < width:
            raise ValueError(expected(name, f"rows of at least hidden_size = {width} elements",
                                      f"shape {tuple(t.shape)}"))
        f.rows = shp[0]
    else:
        f.ptr = check_tensor(t, name, M_HIDDEN, -1, &f.code, shp)
        n = shp[0]
        if n < width:
            f.rows = 0
        elif st == 0:
            f.rows = PY_SSIZE_T_MAX
        else:
            f.rows = (n - width) // st + 1
    f.stride = st
    f.itemsize = 4 if f.code == 3 else 8 if f.code == 4 else 2
    return 0


cdef struct TudArgs:
    IBuf out
    Py_ssize_t ostride
    IBuf ids
    IBuf pos
    IBuf ssp
    IBuf sl
    IBuf drafts
    int64_t step
    char* dst
    const char* src
    Py_ssize_t dst_stride       # bytes
    Py_ssize_t src_stride       # bytes
    Py_ssize_t row_bytes        # 0: rows are copied (converted) outside the loop
    int64_t mml
    bint more                   # not the last step: update the next forward's inputs
    bint advance


cdef void _tud_row(const void* p, Py_ssize_t i) noexcept nogil:
    cdef const TudArgs* a = <const TudArgs*>p
    cdef int64_t tok = iget(a.drafts, i)
    iset(a.out, i * a.ostride + a.step, tok)
    if not a.more:
        return
    iset(a.ssp, i, _wrap_inc(iget(a.ssp, i), a.ssp.wide))
    iset(a.ids, i, tok)
    if a.row_bytes > 0:
        memcpy(a.dst + i * a.dst_stride, a.src + i * a.src_stride, a.row_bytes)
    if a.advance:
        iset(a.pos, i, _min(_wrap_inc(iget(a.pos, i), a.pos.wide), a.mml - 1))
        iset(a.sl, i, _min(_wrap_inc(iget(a.sl, i), a.sl.wide), a.mml))


def target_dependent_ar_update_draft_inputs_kernel(
    output_draft_tokens_ptr, output_draft_tokens_stride, next_input_hidden_states_ptr,
    next_input_hidden_states_stride, input_ids_ptr, positions_ptr, sample_src_positions_ptr,
    seq_lens_ptr, draft_tokens_ptr, current_draft_step_ptr, hidden_states_ptr,
    hidden_states_stride, hidden_size, max_model_len, num_speculative_steps, BLOCK_SIZE=None,
    ADVANCE_DRAFT_POSITIONS=None, *, grid,
):
    """One EAGLE/MTP draft step's bookkeeping, per request ``i`` (of ``R`` = the grid): the
    sampled token goes to ``output_draft_tokens[i, step]`` (``step`` read from
    ``current_draft_step_ptr``); unless this was the last step (``step >= num_speculative_steps
    - 1``) it also becomes the next input id, the sampling position advances, the request's
    hidden-state row (``hidden_size`` elements) is copied to the next input's -- converted as a
    store converts when the dtypes differ -- and under ``ADVANCE_DRAFT_POSITIONS`` (default
    True) position and seq_len advance, capped at ``max_model_len - 1`` and ``max_model_len``.

    ``step`` must address a column of the output table's rows (0 <= step, and below its
    width for a 2-D table). The next input's rows may not overlap each other (a stride below
    ``hidden_size``). ``BLOCK_SIZE`` does not change the result.
    """
    _update_draft_inputs(
        output_draft_tokens_ptr, output_draft_tokens_stride, next_input_hidden_states_ptr,
        next_input_hidden_states_stride, input_ids_ptr, positions_ptr, sample_src_positions_ptr,
        seq_lens_ptr, draft_tokens_ptr, current_draft_step_ptr, hidden_states_ptr,
        hidden_states_stride, hidden_size, max_model_len, False, num_speculative_steps,
        ADVANCE_DRAFT_POSITIONS, grid)


def target_dependent_ar_update_draft_inputs_mml_ptr_kernel(
    output_draft_tokens_ptr, output_draft_tokens_stride, next_input_hidden_states_ptr,
    next_input_hidden_states_stride, input_ids_ptr, positions_ptr, sample_src_positions_ptr,
    seq_lens_ptr, draft_tokens_ptr, current_draft_step_ptr, hidden_states_ptr,
    hidden_states_stride, hidden_size, max_model_len_ptr, num_speculative_steps,
    BLOCK_SIZE=None, ADVANCE_DRAFT_POSITIONS=None, *, grid,
):
    """vLLM 0.34's form of ``target_dependent_ar_update_draft_inputs_kernel``: the length cap
    is read from a one-element tensor (``max_model_len_ptr``, read only where a position
    advances), so that a CUDA graph need not bake it in. Otherwise the same kernel."""
    _update_draft_inputs(
        output_draft_tokens_ptr, output_draft_tokens_stride, next_input_hidden_states_ptr,
        next_input_hidden_states_stride, input_ids_ptr, positions_ptr, sample_src_positions_ptr,
        seq_lens_ptr, draft_tokens_ptr, current_draft_step_ptr, hidden_states_ptr,
        hidden_states_stride, hidden_size, max_model_len_ptr, True, num_speculative_steps,
        ADVANCE_DRAFT_POSITIONS, grid)


cdef int _update_draft_inputs(
    object output_draft_tokens_ptr, object output_draft_tokens_stride,
    object next_input_hidden_states_ptr, object next_input_hidden_states_stride,
    object input_ids_ptr, object positions_ptr, object sample_src_positions_ptr,
    object seq_lens_ptr, object draft_tokens_ptr, object current_draft_step_ptr,
    object hidden_states_ptr, object hidden_states_stride, object hidden_size,
    object max_model_len, bint mml_in_tensor, object num_speculative_steps,
    object ADVANCE_DRAFT_POSITIONS, object grid,
) except -1:
    """Both forms: ``max_model_len`` is the int, or (``mml_in_tensor``) the tensor holding it."""
    cdef TudArgs a
    cdef IBuf step_buf, mml_buf
    cdef Rows out
    cdef FRows dst, src
    cdef Py_ssize_t R = _programs(grid, 0)
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t n_mml = 0
    cdef int64_t H, nsteps
    H = as_int(hidden_size, "hidden_size")
    need_min("hidden_size", H, 0)
    if mml_in_tensor:
        mml_buf = check_index(max_model_len, "max_model_len_ptr", -1, shp)
        n_mml = shp[0]
        a.mml = 0
    else:
        a.mml = as_int(max_model_len, "max_model_len")
    nsteps = as_int(num_speculative_steps, "num_speculative_steps")
    a.advance = as_flag(ADVANCE_DRAFT_POSITIONS, "ADVANCE_DRAFT_POSITIONS", 1)
    out = check_rows(output_draft_tokens_ptr, "output_draft_tokens_ptr",
                     output_draft_tokens_stride, "output_draft_tokens_stride")
    a.out = out.buf
    a.ostride = out.stride
    a.drafts = index_at_least(draft_tokens_ptr, "draft_tokens_ptr", R, "one per request")
    a.ids = check_index(input_ids_ptr, "input_ids_ptr", -1, shp)
    a.pos = check_index(positions_ptr, "positions_ptr", -1, shp)
    a.ssp = check_index(sample_src_positions_ptr, "sample_src_positions_ptr", -1, shp)
    a.sl = check_index(seq_lens_ptr, "seq_lens_ptr", -1, shp)
    step_buf = index_at_least(current_draft_step_ptr, "current_draft_step_ptr", 1)
    _float_rows(next_input_hidden_states_ptr, "next_input_hidden_states_ptr",
                next_input_hidden_states_stride, "next_input_hidden_states_stride", H, &dst)
    _float_rows(hidden_states_ptr, "hidden_states_ptr", hidden_states_stride,
                "hidden_states_stride", H, &src)
    if R == 0:
        return 0
    a.step = iget(step_buf, 0)
    need_table_rows("output_draft_tokens_ptr", out.rows, R, "one per request")
    if a.step < 0 or a.step >= out.cols:
        raise IndexError(expected("current_draft_step_ptr", f"a step in [0, {out.cols}) (a "
                                  "column of output_draft_tokens_ptr)", a.step))
    a.more = a.step < nsteps - 1
    a.row_bytes = 0
    if a.more:
        index_at_least(input_ids_ptr, "input_ids_ptr", R, "one per request")
        index_at_least(sample_src_positions_ptr, "sample_src_positions_ptr", R,
                       "one per request")
        if a.advance:
            index_at_least(positions_ptr, "positions_ptr", R, "one per request")
            index_at_least(seq_lens_ptr, "seq_lens_ptr", R, "one per request")
            if mml_in_tensor:
                need_count("max_model_len_ptr", n_mml, 1)
                a.mml = iget(mml_buf, 0)
        if H > 0:
            need_table_rows("hidden_states_ptr", src.rows, R, "one per request")
            need_table_rows("next_input_hidden_states_ptr", dst.rows, R, "one per request")
            if R > 1 and dst.stride < H:
                raise ValueError(expected("next_input_hidden_states_stride",
                                          f">= hidden_size = {H} (rows written may not "
                                          "overlap)", dst.stride))
            if dst.code == src.code:
                a.dst = dst.ptr
                a.src = src.ptr
                a.dst_stride = dst.stride * dst.itemsize
                a.src_stride = src.stride * src.itemsize
                a.row_bytes = H * dst.itemsize
            else:                   # another dtype: converted as ``tl.store`` converts
                torch.as_strided(next_input_hidden_states_ptr, (R, H), (dst.stride, 1)).copy_(
                    torch.as_strided(hidden_states_ptr, (R, H), (src.stride, 1)))
    run_rows_for(_tud_row, &a, R, R * (4 + (a.row_bytes >> 3)))
    return 0
