# cython: language_level=3
"""CPU versions of Model Runner V2's input kernels: what every step launches around the model.

vLLM's V2 runner (``vllm/v1/worker/gpu/``) prepares each step's inputs with small Triton
kernels: the prefill tokens and lookahead (``_prepare_prefill_inputs_kernel``), positions and
sequence lengths (``_prepare_pos_seq_lens_kernel``), the last sampled and draft tokens in the
input ids (``_combine_sampled_and_draft_tokens_kernel``), the sampled/rejected counts
(``_get_num_sampled_and_rejected_kernel``), the post-step bookkeeping (``_post_update_kernel``,
``_post_update_num_computed_tokens_kernel``), the per-logit request map
(``_expand_idx_mapping_kernel``), the block tables and slot mappings of every KV-cache group
(``_gather_block_tables_kernel``, ``_compute_slot_mappings_kernel``), the staged writes into
persistent buffers (``_apply_write_kernel``) and the prompt-logprob targets
(``_prompt_logprobs_token_ids_kernel``). Each function here takes the Triton kernel's arguments
under its names and in its order.

Why every one takes ``grid``: none of these kernels is told how many requests it serves -- each
program is one request (``tl.program_id(0)``) and vLLM launches ``num_reqs`` of them, while the
buffers are the runner's persistent ones, sized for ``max_num_reqs``. The count is therefore the
launch grid's (keyword-only ``grid``, a tuple of 1-3 ints; ``kernels_cpu.GridLauncher`` supplies
it), never a buffer's length. A grid with an empty axis launches nothing: nothing is read or
written. Extra programs on an axis the kernel does not read repeat a program; that is accepted
where a repeat writes the same values and refused where it would apply an update twice.

The same two steps as the other kernel modules: first every element a launch reads or writes is
checked against its buffer (request-state indices against the per-request buffers, token ranges
against the flat buffers, columns against the tables), raising an exception that names the
argument before anything is written; then a ``nogil`` pass writes in place at the caller's
dtypes (``IBuf``: int32 and int64 in any mix; stores truncate as Triton's stores do). Requests
are independent (vLLM's ``idx_mapping`` has one entry per live request), so the passes run on
an OpenMP team when the work is worth one (``threads_for``); the two update kernels, which add
to per-request state, refuse a request index given twice (two programs would race on it).

vLLM 0.34 changed two signatures: ``post_update_with_drafts_kernel`` (the drafts copied to the
state rows first) and ``gather_block_tables_windowed_kernel`` (entries below a sliding window
nulled) are those forms, sharing their 0.32 kernel's code; ``_apply_write_kernel`` kept its
arguments (only its grid changed), and ``apply_write_kernel`` serves both releases.

Raw addresses (``block_table_ptrs``, the multi-group ``_apply_write_kernel``): vLLM hands the
per-group tables as a tensor of ``data_ptr()`` values, read as int32 rows (``_load_ptr``). As
for ``batch_memcpy_kernel`` they are the caller's promise -- nothing can check what they point
at -- so only what the arguments do bound is checked: non-null addresses where a row is touched,
columns inside the row (the group's stride), request indices >= 0 and inside the tensors that
are passed (the per-group block counts).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, calloc
from libc.string cimport memcpy, memset

import torch

from kernels_cpu._buffers cimport (
    DT_FLOAT32, DT_INT32, DT_INT64, M_BOOL, M_FLOAT32, M_INDEX, M_INT64, M_UINT64, IBuf,
    check_table, check_tensor, iget, iset,
)
from fastdispatch._capi cimport PY_SSIZE_T_MAX
from kernels_cpu._checks cimport (
    as_flag, as_int, bool_at_least, expected, index_at_least, need_count, need_min,
)
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._tables cimport Rows, check_rows, row_fn, run_rows, run_rows_for

cdef object _Tensor = torch.Tensor


# -- the grid and the checks the kernels share ---------------------------------------------------

cdef int _grid(object grid, int64_t* g) except -1:
    """The launch grid as three non-negative axes (missing ones 1)."""
    cdef Py_ssize_t i, n
    if not isinstance(grid, (tuple, list)):
        raise TypeError(expected("grid", "a tuple of 1 to 3 ints", type(grid).__name__))
    n = len(grid)
    if n < 1 or n > 3:
        raise ValueError(expected("grid", "a tuple of 1 to 3 ints", repr(grid)))
    for i in range(3):
        g[i] = as_int(grid[i], "grid") if i < n else 1
        need_min("grid", g[i], 0)
    return 0


cdef int64_t _programs(object grid, int axes, bint repeat_ok) except -1:
    """The programs a kernel over the first ``axes`` grid axes runs: the product of those axes,
    0 when any axis is empty. Programs repeated along the other axes are refused unless a
    repeat writes the same values (``repeat_ok``)."""
    cdef int64_t g[3]
    cdef int64_t used = 1, rest = 1
    cdef int i
    _grid(grid, g)
    for i in range(3):
        if i < axes:
            used *= g[i]
        else:
            rest *= g[i]
    if rest == 0:
        return 0
    if rest > 1 and not repeat_ok:
        raise ValueError(expected("grid", f"{axes} axis (one program per request; more would "
                                  "apply the update twice)", repr(tuple(grid))))
    return used


cdef inline int _state(str idx_name, Py_ssize_t b, int64_t r, str buf, Py_ssize_t n) except -1:
    """Request-state index ``r`` (``idx_name[b]``) addresses an element of ``buf`` (``n``)."""
    if r < 0:
        raise IndexError(expected(f"{idx_name}[{b}]", "a request-state index >= 0", r))
    if r >= n:
        raise IndexError(expected(buf, f"at least {r + 1} elements ({idx_name}[{b}] = {r})", n))
    return 0


cdef inline int _span(str name, int64_t start, int64_t stop, Py_ssize_t n, str why,
                      int64_t x=0, int64_t y=0, int64_t z=0) except -1:
    """Elements ``[start, stop)`` of a flat buffer of ``n`` (nothing when empty). ``why`` is a
    template of ``x``, ``y``, ``z``, formatted only for the error: these checks run per request
    on every launch, and building their messages would cost more than the kernel."""
    if stop <= start or (start >= 0 and stop <= n):
        return 0
    why = why.format(x, y, z)
    if start < 0:
        raise IndexError(expected(name, f"elements from >= 0 ({why})", f"[{start}, {stop})"))
    if stop > n:
        raise IndexError(expected(name, f"at least {stop} elements ({why})", n))
    return 0


cdef inline int _row_cols(str name, Rows* t, int64_t r, int64_t c0, int64_t c1, str why,
                          int64_t x=0, int64_t y=0, int64_t z=0) except -1:
    """Columns ``[c0, c1)`` of row ``r`` (>= 0) of table ``t`` (nothing when empty); ``why`` as
    for ``_span``."""
    if c1 <= c0 or (r < t.rows and c0 >= 0 and c1 <= t.cols):
        return 0
    why = why.format(x, y, z)
    if r >= t.rows:
        raise IndexError(expected(name, f"at least {r + 1} rows ({why})", f"{t.rows} rows"))
    if c0 < 0 or c1 > t.cols:
        raise IndexError(expected(name, f"columns [{c0}, {c1}) of row {r} ({why})",
                                  f"{t.cols} columns"))
    return 0


cdef inline int64_t _cap(object block, str name) except? -2:
    """A block constexpr that caps what a program writes (``tl.arange(0, BLOCK)`` lanes):
    an int >= 1, or None for no cap (-1)."""
    cdef int64_t v
    if block is None:
        return -1
    v = as_int(block, name)
    need_min(name, v, 1)
    return v


cdef inline int64_t _capped(int64_t n, int64_t cap) noexcept nogil:
    return n if cap < 0 or n < cap else cap


cdef uint8_t* _distinct(IBuf idx, Py_ssize_t B, Py_ssize_t n, str name, bint skip_negative,
                        str buf) except NULL:
    """Check that ``idx[0:B]`` addresses ``n`` request states once each (negative entries
    skipped when ``skip_negative``); returns a scratch array to free (the seen marks)."""
    cdef uint8_t* seen = <uint8_t*>calloc(n + 1, 1)
    cdef Py_ssize_t b
    cdef int64_t r
    if seen == NULL:
        raise MemoryError()
    try:
        for b in range(B):
            r = iget(idx, b)
            if r < 0 and skip_negative:
                continue
            _state(name, b, r, buf, n)
            if seen[r]:
                raise ValueError(expected(name, "each request-state index once (two programs "
                                          "would race on its state)", f"{r} again at [{b}]"))
            seen[r] = 1
    except BaseException:
        free(seen)
        raise
    return seen


# ---------------------------------------------------------------------------------------------
# prepare_prefill_inputs_kernel
# ---------------------------------------------------------------------------------------------

cdef struct PrefillArgs:
    IBuf ids
    IBuf idx
    IBuf qsl
    IBuf plen
    IBuf nct
    Rows nxt
    Rows all
    int64_t look          # lookahead tokens stored: min(num_lookahead, LOOKAHEAD_BLOCK)


cdef void _prefill_row(const void* p, Py_ssize_t b) noexcept nogil:
    cdef const PrefillArgs* a = <const PrefillArgs*>p
    cdef int64_t r = iget(a.idx, b), pl = iget(a.plen, r), nc = iget(a.nct, r)
    cdef int64_t qs, ql, j, pos
    if nc >= pl:
        return
    qs = iget(a.qsl, b)
    ql = iget(a.qsl, b + 1) - qs
    cdef int64_t base = r * a.all.stride + nc
    for j in range(ql):
        iset(a.ids, qs + j, iget(a.all.buf, base + j))
    for j in range(a.look):
        pos = nc + ql + j
        iset(a.nxt.buf, j * a.nxt.stride + r,
             iget(a.all.buf, r * a.all.stride + pos) if pos < pl else 0)


def prepare_prefill_inputs_kernel(
    input_ids_ptr, next_prefill_tokens_ptr, next_prefill_tokens_stride, num_lookahead,
    idx_mapping_ptr, query_start_loc_ptr, all_token_ids_ptr, all_token_ids_stride,
    prefill_lens_ptr, num_computed_tokens_ptr, BLOCK_SIZE=None, LOOKAHEAD_BLOCK=None, *, grid,
):
    """Input ids of the prefilling requests, and the next prompt tokens after this chunk.

    Program ``b`` of ``grid[0]`` serves request state ``r = idx_mapping[b]``; a request whose
    ``num_computed_tokens[r] >= prefill_lens[r]`` is not prefilling and is left alone. Otherwise
    its query ``[query_start_loc[b], query_start_loc[b + 1])`` gets the prompt tokens
    ``all_token_ids[r, nc:nc + query_len]``, and row ``k`` of ``next_prefill_tokens`` (column
    ``r``) gets the token at ``nc + query_len + k`` for ``k < min(num_lookahead,
    LOOKAHEAD_BLOCK)`` -- 0 past the prefill. ``LOOKAHEAD_BLOCK`` (the Triton kernel's lane
    count) caps the lookahead as it does there; None: no cap. ``BLOCK_SIZE`` does not change
    the result.
    """
    cdef PrefillArgs a
    cdef Py_ssize_t shp[1]
    cdef Py_ssize_t B, n_ids, n_plen, n_nct, b
    cdef int64_t look, cap, r, pl, nc, qs, ql, lim
    B = _programs(grid, 1, True)
    look = as_int(num_lookahead, "num_lookahead")
    cap = _cap(LOOKAHEAD_BLOCK, "LOOKAHEAD_BLOCK")
    a.look = _capped(look if look > 0 else 0, cap)
    a.ids = index_at_least(input_ids_ptr, "input_ids_ptr", 0)
    n_ids = input_ids_ptr.numel()
    a.nxt = check_rows(next_prefill_tokens_ptr, "next_prefill_tokens_ptr",
                       next_prefill_tokens_stride, "next_prefill_tokens_stride")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", B + 1 if B else 0,
                           "grid[0] + 1")
    a.all = check_rows(all_token_ids_ptr, "all_token_ids_ptr", all_token_ids_stride,
                       "all_token_ids_stride")
    a.plen = index_at_least(prefill_lens_ptr, "prefill_lens_ptr", 0)
    n_plen = prefill_lens_ptr.numel()
    a.nct = index_at_least(num_computed_tokens_ptr, "num_computed_tokens_ptr", 0)
    n_nct = num_computed_tokens_ptr.numel()
    cdef int64_t work = 0
    for b in range(B):
        r = iget(a.idx, b)
        _state("idx_mapping_ptr", b, r, "prefill_lens_ptr", n_plen)
        _state("idx_mapping_ptr", b, r, "num_computed_tokens_ptr", n_nct)
        pl = iget(a.plen, r)
        nc = iget(a.nct, r)
        if nc >= pl:
            continue
        qs = iget(a.qsl, b)
        ql = iget(a.qsl, b + 1) - qs
        _span("input_ids_ptr", qs, qs + ql, n_ids, "query_start_loc_ptr[{0}:{1}]", b, b + 2)
        _row_cols("all_token_ids_ptr", &a.all, r, nc, nc + ql,
                  "the query tokens of idx_mapping_ptr[{0}] = {1}", b, r)
        lim = pl if pl < nc + ql + a.look else nc + ql + a.look   # lookahead read below pl
        _row_cols("all_token_ids_ptr", &a.all, r, nc + ql, lim,
                  "the lookahead tokens of idx_mapping_ptr[{0}] = {1}", b, r)
        if a.look > 0:
            if a.look > a.nxt.rows:
                raise IndexError(expected("next_prefill_tokens_ptr",
                                          f"at least {a.look} rows (the lookahead tokens)",
                                          f"{a.nxt.rows} rows"))
            _row_cols("next_prefill_tokens_ptr", &a.nxt, a.look - 1, r, r + 1,
                      "column idx_mapping_ptr[{0}] = {1}", b, r)
        work += (ql if ql > 0 else 0) + a.look
    run_rows_for(_prefill_row, &a, B, work)


# ---------------------------------------------------------------------------------------------
# prepare_pos_seq_lens_kernel
# ---------------------------------------------------------------------------------------------

cdef struct PosArgs:
    IBuf pos
    IBuf seq
    IBuf idx
    IBuf qsl
    IBuf nct
    Py_ssize_t R          # requests: grid[0] - 1
    int64_t pad_end       # seq_lens[R:pad_end] = 0


cdef void _pos_row(const void* p, Py_ssize_t b) noexcept nogil:
    cdef const PosArgs* a = <const PosArgs*>p
    cdef int64_t r, nc, qs, ql, j
    if b == a.R:
        for j in range(a.R, a.pad_end):
            iset(a.seq, j, 0)
        return
    r = iget(a.idx, b)
    nc = iget(a.nct, r)
    qs = iget(a.qsl, b)
    ql = iget(a.qsl, b + 1) - qs
    iset(a.seq, b, nc + ql)
    for j in range(ql):
        iset(a.pos, qs + j, nc + j)


def prepare_pos_seq_lens_kernel(
    pos_ptr, seq_lens_ptr, idx_mapping_ptr, query_start_loc_ptr, num_computed_tokens_ptr,
    max_num_reqs, BLOCK_SIZE=None, *, grid,
):
    """Positions and sequence lengths of ``R = grid[0] - 1`` requests, and the padding.

    Program ``b < R`` (request state ``r = idx_mapping[b]``): ``seq_lens[b] = nc + query_len``
    and ``pos[query_start + j] = nc + j`` over its query, with ``nc = num_computed_tokens[r]``.
    The last program zeroes ``seq_lens[R:max_num_reqs]`` (CUDA-graph padding).
    """
    cdef PosArgs a
    cdef Py_ssize_t P, b, n_pos, n_seq, n_nct
    cdef int64_t mnr, r, qs, ql, work = 0
    P = _programs(grid, 1, True)
    mnr = as_int(max_num_reqs, "max_num_reqs")
    a.pos = index_at_least(pos_ptr, "pos_ptr", 0)
    n_pos = pos_ptr.numel()
    a.seq = index_at_least(seq_lens_ptr, "seq_lens_ptr", 0)
    n_seq = seq_lens_ptr.numel()
    a.R = P - 1 if P > 0 else 0
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", a.R, "grid[0] - 1")
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", P, "grid[0]")
    a.nct = index_at_least(num_computed_tokens_ptr, "num_computed_tokens_ptr", 0)
    n_nct = num_computed_tokens_ptr.numel()
    a.pad_end = mnr if P > 0 else 0
    _span("seq_lens_ptr", a.R, a.pad_end, n_seq, "the padding up to max_num_reqs")
    _span("seq_lens_ptr", 0, a.R, n_seq, "one per request: grid[0] - 1")
    for b in range(a.R):
        r = iget(a.idx, b)
        _state("idx_mapping_ptr", b, r, "num_computed_tokens_ptr", n_nct)
        qs = iget(a.qsl, b)
        ql = iget(a.qsl, b + 1) - qs
        _span("pos_ptr", qs, qs + ql, n_pos, "query_start_loc_ptr[{0}:{1}]", b, b + 2)
        work += ql if ql > 0 else 0
    run_rows_for(_pos_row, &a, P, work)


# ---------------------------------------------------------------------------------------------
# combine_sampled_and_draft_tokens_kernel
# ---------------------------------------------------------------------------------------------

cdef struct CombineArgs:
    IBuf ids
    IBuf idx
    IBuf last
    IBuf qsl
    IBuf seq
    IBuf plen
    Rows draft
    IBuf cu
    IBuf out
    int64_t cap           # BLOCK_SIZE lanes (-1: none)
    int64_t nns           # NUM_NEW_SAMPLED_TOKENS


cdef void _combine_row(const void* p, Py_ssize_t b) noexcept nogil:
    cdef const CombineArgs* a = <const CombineArgs*>p
    cdef int64_t r = iget(a.idx, b), cs = iget(a.cu, b), nl = iget(a.cu, b + 1) - cs
    cdef int64_t nd = nl - a.nns, qe = iget(a.qsl, b + 1), ls = qe - nl, j, n
    cdef int64_t seq, pl
    n = _capped(nl, a.cap)
    for j in range(n):
        iset(a.out, cs + j, ls + j)
    seq = iget(a.seq, b)
    pl = iget(a.plen, r)
    if seq <= pl:
        return
    if a.nns > 0 and seq - nl >= pl:
        iset(a.ids, ls, iget(a.last, r))
    if nd > 0:
        n = _capped(nd, a.cap)
        for j in range(n):
            iset(a.ids, qe - nd + j, iget(a.draft.buf, r * a.draft.stride + j))


def combine_sampled_and_draft_tokens_kernel(
    input_ids_ptr, idx_mapping_ptr, last_sampled_tokens_ptr, query_start_loc_ptr, seq_lens_ptr,
    prefill_len_ptr, draft_tokens_ptr, draft_tokens_stride, cu_num_logits_ptr,
    logits_indices_ptr, BLOCK_SIZE=None, NUM_NEW_SAMPLED_TOKENS=1, *, grid,
):
    """Logits indices of every request, and its last sampled and draft tokens in the input ids.

    Program ``b`` (request state ``r = idx_mapping[b]``) has ``n = cu_num_logits[b + 1] -
    cu_num_logits[b]`` logits, the last ``n`` tokens of its query: ``logits_indices[cu[b] + j] =
    query_end - n + j``. Unless it is still prefilling (``seq_lens[b] <= prefill_len[r]``), the
    first of them gets ``last_sampled_tokens[r]`` (when NUM_NEW_SAMPLED_TOKENS is 1 and it lies
    past the prompt) and the last ``n - NUM_NEW_SAMPLED_TOKENS`` get ``draft_tokens[r, :]``.
    ``BLOCK_SIZE`` (the Triton kernel's lane count) caps both as it does there; None: no cap.
    """
    cdef CombineArgs a
    cdef Py_ssize_t B, b, n_ids, n_last, n_plen, n_out
    cdef int64_t r, cs, nl, nd, qe, ls, seq, pl, work = 0
    B = _programs(grid, 1, True)
    a.cap = _cap(BLOCK_SIZE, "BLOCK_SIZE")
    a.nns = as_int(NUM_NEW_SAMPLED_TOKENS, "NUM_NEW_SAMPLED_TOKENS")
    if a.nns != 0 and a.nns != 1:
        raise ValueError(expected("NUM_NEW_SAMPLED_TOKENS", "0 or 1", a.nns))
    a.ids = index_at_least(input_ids_ptr, "input_ids_ptr", 0)
    n_ids = input_ids_ptr.numel()
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    a.last = index_at_least(last_sampled_tokens_ptr, "last_sampled_tokens_ptr", 0)
    n_last = last_sampled_tokens_ptr.numel()
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", B + 1 if B else 0,
                           "grid[0] + 1")
    a.seq = index_at_least(seq_lens_ptr, "seq_lens_ptr", B, "one per program")
    a.plen = index_at_least(prefill_len_ptr, "prefill_len_ptr", 0)
    n_plen = prefill_len_ptr.numel()
    a.draft = check_rows(draft_tokens_ptr, "draft_tokens_ptr", draft_tokens_stride,
                         "draft_tokens_stride")
    a.cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", B + 1 if B else 0,
                          "grid[0] + 1")
    a.out = index_at_least(logits_indices_ptr, "logits_indices_ptr", 0)
    n_out = logits_indices_ptr.numel()
    for b in range(B):
        r = iget(a.idx, b)
        _state("idx_mapping_ptr", b, r, "prefill_len_ptr", n_plen)
        cs = iget(a.cu, b)
        nl = iget(a.cu, b + 1) - cs
        _span("logits_indices_ptr", cs, cs + _capped(nl, a.cap), n_out,
              "cu_num_logits_ptr[{0}:{1}]", b, b + 2)
        work += nl if nl > 0 else 0
        seq = iget(a.seq, b)
        pl = iget(a.plen, r)
        if seq <= pl:
            continue
        qe = iget(a.qsl, b + 1)
        ls = qe - nl
        if a.nns > 0 and seq - nl >= pl:
            _state("idx_mapping_ptr", b, r, "last_sampled_tokens_ptr", n_last)
            _span("input_ids_ptr", ls, ls + 1, n_ids,
                  "the last sampled token of request {0}", b)
        nd = nl - a.nns
        if nd > 0:
            _span("input_ids_ptr", qe - nd, qe - nd + _capped(nd, a.cap), n_ids,
                  "the draft tokens of request {0}", b)
            _row_cols("draft_tokens_ptr", &a.draft, r, 0, _capped(nd, a.cap),
                      "the draft tokens of idx_mapping_ptr[{0}] = {1}", b, r)
    run_rows_for(_combine_row, &a, B, work)


# ---------------------------------------------------------------------------------------------
# get_num_sampled_and_rejected_kernel
# ---------------------------------------------------------------------------------------------

def get_num_sampled_and_rejected_kernel(
    num_sampled_ptr, num_rejected_ptr, seq_lens_ptr, cu_num_logits_ptr, idx_mapping_ptr,
    prefill_len_ptr, *, grid,
):
    """Per request ``b`` (state ``r = idx_mapping[b]``): a chunked prefill (``seq_lens[b] <
    prefill_len[r]``) samples and rejects nothing; otherwise ``num_rejected[b] = num_logits -
    num_sampled[b]`` with ``num_logits = cu_num_logits[b + 1] - cu_num_logits[b]``.
    ``num_sampled`` is updated in place (0 for a chunked prefill)."""
    cdef Py_ssize_t B, b, n_plen
    cdef int64_t r, ns, nl
    cdef bint chunked
    B = _programs(grid, 1, True)
    cdef IBuf sampled = index_at_least(num_sampled_ptr, "num_sampled_ptr", B, "one per program")
    cdef IBuf rejected = index_at_least(num_rejected_ptr, "num_rejected_ptr", B,
                                        "one per program")
    cdef IBuf seq = index_at_least(seq_lens_ptr, "seq_lens_ptr", B, "one per program")
    cdef IBuf cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", B + 1 if B else 0,
                                  "grid[0] + 1")
    cdef IBuf idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    cdef IBuf plen = index_at_least(prefill_len_ptr, "prefill_len_ptr", 0)
    n_plen = prefill_len_ptr.numel()
    for b in range(B):
        _state("idx_mapping_ptr", b, iget(idx, b), "prefill_len_ptr", n_plen)
    with nogil:
        for b in range(B):
            r = iget(idx, b)
            chunked = iget(seq, b) < iget(plen, r)
            ns = 0 if chunked else iget(sampled, b)
            iset(sampled, b, ns)
            nl = iget(cu, b + 1) - iget(cu, b)
            iset(rejected, b, 0 if chunked else nl - ns)


# ---------------------------------------------------------------------------------------------
# post_update_kernel
# ---------------------------------------------------------------------------------------------

def post_update_kernel(
    idx_mapping_ptr, num_computed_tokens_ptr, last_sampled_tokens_ptr, output_bin_counts_ptr,
    output_bin_counts_stride, sampled_tokens_ptr, sampled_tokens_stride, num_sampled_ptr,
    num_rejected_ptr, query_start_loc_ptr, all_token_ids_ptr, all_token_ids_stride,
    total_len_ptr, *, grid,
):
    """The step's bookkeeping per request ``b`` with state ``r = idx_mapping[b]`` (``r < 0``:
    skipped).

    The ``n = num_sampled[b]`` sampled tokens (row ``b`` of ``sampled_tokens``) are appended to
    ``all_token_ids[r]`` at ``total_len[r]``, counted in ``output_bin_counts[r]`` (when given),
    the last becomes ``last_sampled_tokens[r]`` and ``total_len[r]`` grows by ``n``; then
    ``num_computed_tokens[r]`` grows by ``query_len - num_rejected[b]`` (``query_len`` 0
    without ``query_start_loc_ptr``). A state index given twice is refused (its programs race).
    """
    _post_update(idx_mapping_ptr, num_computed_tokens_ptr, last_sampled_tokens_ptr,
                 output_bin_counts_ptr, output_bin_counts_stride, sampled_tokens_ptr,
                 sampled_tokens_stride, num_sampled_ptr, num_rejected_ptr, query_start_loc_ptr,
                 all_token_ids_ptr, all_token_ids_stride, total_len_ptr, None, None, 0, grid)


def post_update_with_drafts_kernel(
    idx_mapping_ptr, num_computed_tokens_ptr, last_sampled_tokens_ptr, output_bin_counts_ptr,
    output_bin_counts_stride, sampled_tokens_ptr, sampled_tokens_stride, num_sampled_ptr,
    num_rejected_ptr, query_start_loc_ptr, all_token_ids_ptr, all_token_ids_stride,
    total_len_ptr, draft_tokens_ptr, draft_tokens_out_ptr, num_draft_tokens, *, grid,
):
    """vLLM 0.34's form of ``post_update_kernel``: first, when ``draft_tokens_ptr`` is given,
    the ``num_draft_tokens`` drafts of request ``b`` (``draft_tokens[b * n:(b + 1) * n]``) are
    copied to its state's row, ``draft_tokens_out[r * n:(r + 1) * n]``; then the same
    bookkeeping as ``post_update_kernel``."""
    _post_update(idx_mapping_ptr, num_computed_tokens_ptr, last_sampled_tokens_ptr,
                 output_bin_counts_ptr, output_bin_counts_stride, sampled_tokens_ptr,
                 sampled_tokens_stride, num_sampled_ptr, num_rejected_ptr, query_start_loc_ptr,
                 all_token_ids_ptr, all_token_ids_stride, total_len_ptr, draft_tokens_ptr,
                 draft_tokens_out_ptr, num_draft_tokens, grid)


cdef int _post_update(
    object idx_mapping_ptr, object num_computed_tokens_ptr, object last_sampled_tokens_ptr,
    object output_bin_counts_ptr, object output_bin_counts_stride, object sampled_tokens_ptr,
    object sampled_tokens_stride, object num_sampled_ptr, object num_rejected_ptr,
    object query_start_loc_ptr, object all_token_ids_ptr, object all_token_ids_stride,
    object total_len_ptr, object draft_tokens_ptr, object draft_tokens_out_ptr,
    object num_draft_tokens, object grid,
) except -1:
    """Both forms of the post-step update: checks, then the serial ``nogil`` pass."""
    cdef Py_ssize_t B, b, n_nct, n_last, n_tot, n_dout = 0
    cdef int64_t r, ns, tl, i, tok, ql, nd = 0
    cdef bint counts = output_bin_counts_ptr is not None, has_q = query_start_loc_ptr is not None
    cdef bint drafts = draft_tokens_ptr is not None
    cdef Rows bins
    cdef IBuf din, dout
    B = _programs(grid, 1, False)
    cdef IBuf idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    cdef IBuf nct = index_at_least(num_computed_tokens_ptr, "num_computed_tokens_ptr", 0)
    n_nct = num_computed_tokens_ptr.numel()
    cdef IBuf last = index_at_least(last_sampled_tokens_ptr, "last_sampled_tokens_ptr", 0)
    n_last = last_sampled_tokens_ptr.numel()
    if counts:
        bins = check_rows(output_bin_counts_ptr, "output_bin_counts_ptr",
                          output_bin_counts_stride, "output_bin_counts_stride")
    else:
        as_int(output_bin_counts_stride, "output_bin_counts_stride")
    cdef Rows samp = check_rows(sampled_tokens_ptr, "sampled_tokens_ptr", sampled_tokens_stride,
                                "sampled_tokens_stride")
    cdef IBuf nsamp = index_at_least(num_sampled_ptr, "num_sampled_ptr", B, "one per program")
    cdef IBuf nrej = index_at_least(num_rejected_ptr, "num_rejected_ptr", B, "one per program")
    cdef IBuf qsl
    if has_q:
        qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", B + 1 if B else 0,
                             "grid[0] + 1")
    cdef Rows all = check_rows(all_token_ids_ptr, "all_token_ids_ptr", all_token_ids_stride,
                               "all_token_ids_stride")
    cdef IBuf total = index_at_least(total_len_ptr, "total_len_ptr", 0)
    n_tot = total_len_ptr.numel()
    nd = as_int(num_draft_tokens, "num_draft_tokens")
    if drafts and nd > 0:
        din = index_at_least(draft_tokens_ptr, "draft_tokens_ptr", 0)
        if draft_tokens_out_ptr is None:
            raise ValueError(expected("draft_tokens_out_ptr", "a tensor with draft_tokens_ptr",
                                      None))
        dout = index_at_least(draft_tokens_out_ptr, "draft_tokens_out_ptr", 0)
        n_dout = draft_tokens_out_ptr.numel()
    else:
        drafts = False
    free(_distinct(idx, B, n_tot, "idx_mapping_ptr", True, "total_len_ptr"))
    for b in range(B):
        r = iget(idx, b)
        if r < 0:
            continue
        if drafts:
            _span("draft_tokens_ptr", b * nd, (b + 1) * nd, draft_tokens_ptr.numel(),
                  "num_draft_tokens = {0} per request, request {1}", nd, b)
            _span("draft_tokens_out_ptr", r * nd, (r + 1) * nd, n_dout,
                  "num_draft_tokens = {0} per request state, idx_mapping_ptr[{1}] = {2}",
                  nd, b, r)
        ql = iget(qsl, b + 1) - iget(qsl, b) if has_q else 0
        if ql != iget(nrej, b):             # num_computed_tokens[r] is read and written
            _state("idx_mapping_ptr", b, r, "num_computed_tokens_ptr", n_nct)
        ns = iget(nsamp, b)
        if ns > 0:
            _state("idx_mapping_ptr", b, r, "last_sampled_tokens_ptr", n_last)
            _row_cols("sampled_tokens_ptr", &samp, b, 0, ns, "num_sampled_ptr[{0}] = {1}", b, ns)
            tl = iget(total, r)
            _row_cols("all_token_ids_ptr", &all, r, tl, tl + ns,
                      "total_len_ptr[{0}] = {1} and num_sampled_ptr[{2}]", r, tl, b)
            if counts:
                for i in range(ns):
                    tok = iget(samp.buf, b * samp.stride + i)
                    _row_cols("output_bin_counts_ptr", &bins, r, tok, tok + 1,
                              "sampled_tokens_ptr[{0}, {1}] = {2}", b, i, tok)
    with nogil:
        for b in range(B):
            r = iget(idx, b)
            if r < 0:
                continue
            if drafts:
                for i in range(nd):
                    iset(dout, r * nd + i, iget(din, b * nd + i))
            tl = iget(total, r)
            ns = iget(nsamp, b)
            if ns > 0:
                iset(last, r, iget(samp.buf, b * samp.stride + ns - 1))
                iset(total, r, tl + ns)
            for i in range(ns):
                tok = iget(samp.buf, b * samp.stride + i)
                iset(all.buf, r * all.stride + tl + i, tok)
                if counts:
                    iset(bins.buf, r * bins.stride + tok, iget(bins.buf, r * bins.stride + tok) + 1)
            ql = iget(qsl, b + 1) - iget(qsl, b) if has_q else 0
            ql = ql - iget(nrej, b)
            if ql != 0:
                iset(nct, r, iget(nct, r) + ql)
    return 0


# ---------------------------------------------------------------------------------------------
# post_update_num_computed_tokens_kernel
# ---------------------------------------------------------------------------------------------

def post_update_num_computed_tokens_kernel(
    idx_mapping_ptr, num_computed_tokens_ptr, query_start_loc_ptr, *, grid,
):
    """``num_computed_tokens[idx_mapping[b]] += query_len`` of request ``b``, for every program;
    a state index given twice is refused (its programs race)."""
    cdef Py_ssize_t B, b, n_nct
    B = _programs(grid, 1, False)
    cdef IBuf idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    cdef IBuf nct = index_at_least(num_computed_tokens_ptr, "num_computed_tokens_ptr", 0)
    n_nct = num_computed_tokens_ptr.numel()
    cdef IBuf qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr",
                                   B + 1 if B else 0, "grid[0] + 1")
    free(_distinct(idx, B, n_nct, "idx_mapping_ptr", False, "num_computed_tokens_ptr"))
    cdef int64_t r
    with nogil:
        for b in range(B):
            r = iget(idx, b)
            iset(nct, r, iget(nct, r) + iget(qsl, b + 1) - iget(qsl, b))


# ---------------------------------------------------------------------------------------------
# expand_idx_mapping_kernel
# ---------------------------------------------------------------------------------------------

cdef struct ExpandArgs:
    IBuf idx
    IBuf out
    IBuf local
    IBuf cu
    int64_t cap


cdef void _expand_row(const void* p, Py_ssize_t b) noexcept nogil:
    cdef const ExpandArgs* a = <const ExpandArgs*>p
    cdef int64_t s = iget(a.cu, b), n = _capped(iget(a.cu, b + 1) - s, a.cap), j
    cdef int64_t v = iget(a.idx, b)
    for j in range(n):
        iset(a.out, s + j, v)
        iset(a.local, s + j, j)


def expand_idx_mapping_kernel(
    idx_mapping_ptr, expanded_idx_mapping_ptr, expanded_local_pos_ptr, cu_num_logits_ptr,
    BLOCK_SIZE=None, *, grid,
):
    """Per request ``b``: its ``n = cu_num_logits[b + 1] - cu_num_logits[b]`` logits get
    ``expanded_idx_mapping = idx_mapping[b]`` and ``expanded_local_pos = 0..n-1``.
    ``BLOCK_SIZE`` (the Triton kernel's lane count) caps ``n`` as it does there; None: no cap.
    """
    cdef ExpandArgs a
    cdef Py_ssize_t B, b, n_out, n_loc
    cdef int64_t s, n, work = 0
    B = _programs(grid, 1, True)
    a.cap = _cap(BLOCK_SIZE, "BLOCK_SIZE")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    a.out = index_at_least(expanded_idx_mapping_ptr, "expanded_idx_mapping_ptr", 0)
    n_out = expanded_idx_mapping_ptr.numel()
    a.local = index_at_least(expanded_local_pos_ptr, "expanded_local_pos_ptr", 0)
    n_loc = expanded_local_pos_ptr.numel()
    a.cu = index_at_least(cu_num_logits_ptr, "cu_num_logits_ptr", B + 1 if B else 0,
                          "grid[0] + 1")
    for b in range(B):
        s = iget(a.cu, b)
        n = _capped(iget(a.cu, b + 1) - s, a.cap)
        _span("expanded_idx_mapping_ptr", s, s + n, n_out, "cu_num_logits_ptr[{0}:{1}]", b, b + 2)
        _span("expanded_local_pos_ptr", s, s + n, n_loc, "cu_num_logits_ptr[{0}:{1}]", b, b + 2)
        work += n if n > 0 else 0
    run_rows_for(_expand_row, &a, B, work)


# ---------------------------------------------------------------------------------------------
# raw addresses: the per-group tables of the block-table kernels
# ---------------------------------------------------------------------------------------------

cdef IBuf _addresses(object t, str name, Py_ssize_t need) except *:
    """A contiguous int64/uint64 tensor of raw addresses, one per KV-cache group (vLLM
    allocates uint64); at least ``need`` of them."""
    cdef IBuf b
    cdef Py_ssize_t shp[1]
    b.ptr = check_tensor(t, name, M_INT64 | M_UINT64, -1, NULL, shp)
    b.wide = True                      # read as 64-bit patterns either way
    need_count(name, shp[0], need, "one per KV-cache group: grid[0]")
    return b


cdef inline int32_t* _table_at(IBuf ptrs, int64_t g) noexcept nogil:
    """Group ``g``'s int32 table (an int64 read of a uint64 address keeps its bits)."""
    return <int32_t*><size_t>iget(ptrs, g)


cdef int _nonnull(IBuf ptrs, int64_t g, str name) except -1:
    if iget(ptrs, g) == 0:
        raise ValueError(expected(f"{name}[{g}]", "a non-null address (the group's table is "
                                  "read or written)", 0))
    return 0


# ---------------------------------------------------------------------------------------------
# gather_block_tables_kernel
# ---------------------------------------------------------------------------------------------

cdef struct GatherArgs:
    IBuf idx
    IBuf src
    IBuf dst
    IBuf strides
    Rows nblk
    int64_t num_reqs
    Py_ssize_t P          # programs per group (grid[1])
    bint window           # vLLM 0.34: null the entries below each group's sliding window
    IBuf nct              # ... from the request's computed tokens,
    IBuf reach            # ... the group's window reach (<= 0: no window)
    IBuf bsz              # ... and block size


cdef void _gather_unit(const void* p, Py_ssize_t u) noexcept nogil:
    cdef const GatherArgs* a = <const GatherArgs*>p
    cdef int64_t g = u // a.P, b = u - g * a.P
    cdef int64_t stride = iget(a.strides, g), r, nb
    cdef int32_t* dst = _table_at(a.dst, g) + b * stride
    if b >= a.num_reqs:
        if stride > 0:
            memset(dst, 0, <size_t>stride * sizeof(int32_t))
        return
    r = iget(a.idx, b)
    nb = iget(a.nblk.buf, g * a.nblk.stride + r)
    if nb <= 0:
        return
    cdef int64_t nnull = _nulled(a, g, r)
    if nnull > nb:
        nnull = nb
    if nnull > 0:
        memset(dst, 0, <size_t>nnull * sizeof(int32_t))
    if nb > nnull:
        memcpy(dst + nnull, _table_at(a.src, g) + r * stride + nnull,
               <size_t>(nb - nnull) * sizeof(int32_t))


cdef inline int64_t _nulled(const GatherArgs* a, int64_t g, int64_t r) noexcept nogil:
    """Leading block-table entries of request state ``r`` in group ``g`` below the sliding
    window of its first scheduled token: ``max(num_computed - reach, 0) // block_size``."""
    cdef int64_t reach, first
    if not a.window:
        return 0
    reach = iget(a.reach, g)
    if reach <= 0:
        return 0
    first = iget(a.nct, r) - reach
    return (first if first > 0 else 0) // iget(a.bsz, g)


def gather_block_tables_kernel(
    batch_idx_to_req_idx, src_block_table_ptrs, dst_block_table_ptrs, block_table_strides,
    num_blocks_ptr, num_blocks_stride, num_reqs, BLOCK_SIZE=None, *, grid,
):
    """The block tables of this step's requests, gathered per KV-cache group.

    Program ``(g, b)`` of ``grid[:2]``: row ``b`` of group ``g``'s int32 table at
    ``dst_block_table_ptrs[g]`` (rows ``block_table_strides[g]`` apart, that many columns) gets
    the first ``num_blocks[g, r]`` block ids of row ``r = batch_idx_to_req_idx[b]`` of the table
    at ``src_block_table_ptrs[g]``; a padding row (``b >= num_reqs``) is zeroed whole. The
    tables are raw addresses (the caller's promise); checked: a block count within the row
    (``<= stride``), ``r >= 0`` and inside ``num_blocks_ptr``'s rows, non-null addresses.
    """
    _gather(batch_idx_to_req_idx, src_block_table_ptrs, dst_block_table_ptrs,
            block_table_strides, num_blocks_ptr, num_blocks_stride, num_reqs, None, None, None,
            False, grid)


def gather_block_tables_windowed_kernel(
    batch_idx_to_req_idx, src_block_table_ptrs, dst_block_table_ptrs, block_table_strides,
    num_blocks_ptr, num_blocks_stride, num_reqs, num_computed_tokens_ptr,
    sliding_window_reach_ptr, block_sizes_ptr, MASK_SLIDING_WINDOW=None, BLOCK_SIZE=None, *,
    grid,
):
    """vLLM 0.34's form of ``gather_block_tables_kernel``: under ``MASK_SLIDING_WINDOW`` the
    leading entries of a gathered row that no query of the step can attend -- ``max(
    num_computed_tokens[r] - sliding_window_reach[g], 0) // block_sizes[g]`` of them, for a
    group with a window (reach > 0) -- are written as 0 (the null block) instead of copied.
    Without the flag (default) the three extra buffers are not read."""
    _gather(batch_idx_to_req_idx, src_block_table_ptrs, dst_block_table_ptrs,
            block_table_strides, num_blocks_ptr, num_blocks_stride, num_reqs,
            num_computed_tokens_ptr, sliding_window_reach_ptr, block_sizes_ptr,
            as_flag(MASK_SLIDING_WINDOW, "MASK_SLIDING_WINDOW", 0), grid)


cdef int _gather(
    object batch_idx_to_req_idx, object src_block_table_ptrs, object dst_block_table_ptrs,
    object block_table_strides, object num_blocks_ptr, object num_blocks_stride,
    object num_reqs, object num_computed_tokens_ptr, object sliding_window_reach_ptr,
    object block_sizes_ptr, bint window, object grid,
) except -1:
    """Both forms of the gather: checks, then the (group, row) units."""
    cdef GatherArgs a
    cdef int64_t g[3]
    cdef int64_t G, P, n_req, gi, b, r, nb, stride, reach, work = 0
    cdef Py_ssize_t n_nct = 0
    _grid(grid, g)
    G = g[0]
    P = g[1]
    if g[2] == 0:
        G = 0
    a.num_reqs = as_int(num_reqs, "num_reqs")
    n_req = a.num_reqs if a.num_reqs < P else P
    if n_req < 0 or G == 0:
        n_req = 0
    a.idx = index_at_least(batch_idx_to_req_idx, "batch_idx_to_req_idx", n_req,
                           "min(num_reqs, grid[1])")
    a.src = _addresses(src_block_table_ptrs, "src_block_table_ptrs", G if n_req else 0)
    a.dst = _addresses(dst_block_table_ptrs, "dst_block_table_ptrs", G if P else 0)
    a.strides = index_at_least(block_table_strides, "block_table_strides", G if P else 0,
                               "one per KV-cache group: grid[0]")
    a.nblk = check_rows(num_blocks_ptr, "num_blocks_ptr", num_blocks_stride, "num_blocks_stride")
    a.window = window
    if window:
        a.nct = index_at_least(num_computed_tokens_ptr, "num_computed_tokens_ptr", 0)
        n_nct = num_computed_tokens_ptr.numel()
        a.reach = index_at_least(sliding_window_reach_ptr, "sliding_window_reach_ptr",
                                 G if n_req else 0, "one per KV-cache group: grid[0]")
        a.bsz = index_at_least(block_sizes_ptr, "block_sizes_ptr", G if n_req else 0,
                               "one per KV-cache group: grid[0]")
    a.P = P
    if P == 0 or G == 0:
        return 0
    for gi in range(G):
        stride = iget(a.strides, gi)
        if stride < 0:
            raise ValueError(expected(f"block_table_strides[{gi}]", ">= 0", stride))
        if stride > 0:
            _nonnull(a.dst, gi, "dst_block_table_ptrs")
        work += P * stride
        reach = iget(a.reach, gi) if window and n_req else 0
        if reach > 0 and iget(a.bsz, gi) < 1:
            raise ValueError(expected(f"block_sizes_ptr[{gi}]", ">= 1 (a group with a window)",
                                      iget(a.bsz, gi)))
        for b in range(n_req):
            r = iget(a.idx, b)
            if r < 0:
                raise IndexError(expected(f"batch_idx_to_req_idx[{b}]",
                                          "a request-state index >= 0", r))
            _row_cols("num_blocks_ptr", &a.nblk, gi, r, r + 1,
                      "batch_idx_to_req_idx[{0}] = {1} of group {2}", b, r, gi)
            nb = iget(a.nblk.buf, gi * a.nblk.stride + r)
            if nb > stride:
                raise IndexError(expected(f"num_blocks_ptr[{gi}, {r}]",
                                          f"at most block_table_strides[{gi}] = {stride} "
                                          "blocks (a row of the table)", nb))
            if nb > 0:
                _nonnull(a.src, gi, "src_block_table_ptrs")
                if window:
                    _state("batch_idx_to_req_idx", b, r, "num_computed_tokens_ptr", n_nct)
    run_rows_for(_gather_unit, &a, G * P, work)
    return 0


# ---------------------------------------------------------------------------------------------
# compute_slot_mappings_kernel
# ---------------------------------------------------------------------------------------------

cdef struct SlotsArgs:
    IBuf idx
    IBuf qsl
    IBuf pos
    IBuf ptrs
    IBuf strides
    IBuf bsz
    const uint8_t* enabled
    const uint8_t* sharded
    Rows out
    int64_t max_tokens
    int64_t rank
    int64_t cp
    int64_t inter
    int64_t pad
    bint bsz32            # block sizes are int32: Triton multiplies block ids by them in int32
    bint pos32            # ... and positions too: the whole slot is int32 arithmetic
    Py_ssize_t P          # programs per group: requests + 1


cdef inline int64_t _slot(const SlotsArgs* a, int32_t* bt, int64_t bts, int64_t kbs, bint en,
                          bint sh, int64_t r, int64_t p) noexcept nogil:
    """The slot of position ``p`` of request state ``r`` (>= 0) in one group."""
    cdef int64_t lp = p, vbs, vbi, vbo, bi, bo, prod
    cdef bint local = True
    if not en:
        return a.pad
    if a.cp != 1:
        vbs = kbs * a.cp
        vbi = p // vbs
        vbo = p % vbs
        local = (vbo // a.inter) % a.cp == a.rank
        if sh:
            lp = vbi * kbs + (vbo // (a.inter * a.cp)) * a.inter + vbo % a.inter
        else:
            local = True
        if not local:
            return a.pad
    bi = lp // kbs
    bo = lp % kbs
    prod = <int64_t>bt[r * bts + bi] * kbs
    if a.bsz32:
        prod = <int32_t>prod
        if a.pos32:
            return <int32_t>(prod + bo)
    return prod + bo


cdef void _slots_unit(const void* p, Py_ssize_t u) noexcept nogil:
    cdef const SlotsArgs* a = <const SlotsArgs*>p
    cdef int64_t g = u // a.P, b = u - g * a.P, i, s, e, r, bts = 0, kbs = 0
    cdef int64_t base = g * a.out.stride
    cdef bint en, sh = False
    cdef int32_t* bt = NULL
    if b == a.P - 1:
        for i in range(iget(a.qsl, b), a.max_tokens):
            iset(a.out.buf, base + i, a.pad)
        return
    r = iget(a.idx, b)
    s = iget(a.qsl, b)
    e = iget(a.qsl, b + 1)
    en = a.enabled[g] != 0
    if a.cp != 1:
        sh = a.sharded[g] != 0
    if r < 0 or not en:
        for i in range(s, e):
            iset(a.out.buf, base + i, a.pad)
        return
    bt = _table_at(a.ptrs, g)
    bts = iget(a.strides, g)
    kbs = iget(a.bsz, g)
    for i in range(s, e):
        iset(a.out.buf, base + i, _slot(a, bt, bts, kbs, True, sh, r, iget(a.pos, i)))


def compute_slot_mappings_kernel(
    max_num_tokens, idx_mapping, query_start_loc, pos, block_table_ptrs, block_table_strides,
    block_sizes, slot_mapping_enabled, dcp_sharded, slot_mappings_ptr, slot_mappings_stride,
    cp_rank, CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1, TRITON_BLOCK_SIZE=None, *, grid,
):
    """The slot of every scheduled token in every KV-cache group, then the padding.

    Program ``(g, b)``, ``b < R = grid[1] - 1`` (request state ``r = idx_mapping[b]``): each
    token ``i`` of its query gets ``block_table_g[r, p // B] * B + p % B`` with ``p = pos[i]``
    and ``B = block_sizes[g]`` -- under context parallelism (``CP_SIZE > 1``) ``p`` is first
    mapped to this rank's local position when the group is ``dcp_sharded`` and tokens another
    rank stores get ``PAD_ID``; ``PAD_ID`` for every token of a dummy request (``r < 0``) and of
    a group whose ``slot_mapping_enabled`` is False. Program ``(g, R)`` fills ``[query_start_loc[R],
    max_num_tokens)`` with ``PAD_ID``. Row ``g`` of ``slot_mappings_ptr`` holds group ``g``.
    Block tables are raw int32 addresses (``block_table_ptrs``, rows ``block_table_strides[g]``
    apart): a block index inside the row and a non-null address are checked, not the row count.
    """
    cdef SlotsArgs a
    cdef int64_t g[3]
    cdef int64_t G, P, R, gi, b, i, s, e, r, p, bts, kbs, vbs, vbo, lp, bi, work = 0
    cdef Py_ssize_t n_pos
    cdef int code = 0
    cdef Py_ssize_t shp[1]
    _grid(grid, g)
    G = g[0] if g[2] else 0
    P = g[1]
    a.max_tokens = as_int(max_num_tokens, "max_num_tokens")
    a.rank = as_int(cp_rank, "cp_rank")
    a.cp = as_int(CP_SIZE, "CP_SIZE")
    a.inter = as_int(CP_INTERLEAVE, "CP_INTERLEAVE")
    a.pad = as_int(PAD_ID, "PAD_ID")
    need_min("CP_SIZE", a.cp, 1)
    need_min("CP_INTERLEAVE", a.inter, 1)
    R = P - 1 if P > 0 else 0
    if G == 0 or P == 0:
        G = 0
        R = 0
    a.idx = index_at_least(idx_mapping, "idx_mapping", R, "grid[1] - 1")
    a.qsl = index_at_least(query_start_loc, "query_start_loc", P if G else 0, "grid[1]")
    a.pos = index_at_least(pos, "pos", 0)
    n_pos = pos.numel()
    a.ptrs = _addresses(block_table_ptrs, "block_table_ptrs", G if R else 0)
    a.strides = index_at_least(block_table_strides, "block_table_strides", G if R else 0,
                               "one per KV-cache group: grid[0]")
    a.bsz = index_at_least(block_sizes, "block_sizes", G if R else 0,
                           "one per KV-cache group: grid[0]")
    a.bsz32 = not a.bsz.wide
    a.pos32 = not a.pos.wide
    a.enabled = <const uint8_t*>bool_at_least(slot_mapping_enabled, "slot_mapping_enabled",
                                              G if R else 0, "one per KV-cache group: grid[0]")
    a.sharded = <const uint8_t*>bool_at_least(dcp_sharded, "dcp_sharded",
                                              G if (R and a.cp != 1) else 0,
                                              "one per KV-cache group: grid[0]")
    a.out = check_rows(slot_mappings_ptr, "slot_mappings_ptr", slot_mappings_stride,
                       "slot_mappings_stride")
    a.P = P
    if G == 0:
        return
    for gi in range(G):
        s = iget(a.qsl, R)
        _row_cols("slot_mappings_ptr", &a.out, gi, s, a.max_tokens,
                  "the padding from query_start_loc[{0}] to max_num_tokens of group {1}", R, gi)
        work += a.max_tokens - s if a.max_tokens > s else 0
        if R == 0:
            continue
        en = a.enabled[gi] != 0
        bts = iget(a.strides, gi)
        kbs = iget(a.bsz, gi)
        if en:
            if kbs < 1:
                raise ValueError(expected(f"block_sizes[{gi}]", ">= 1", kbs))
            if bts < 0:
                raise ValueError(expected(f"block_table_strides[{gi}]", ">= 0", bts))
        for b in range(R):
            s = iget(a.qsl, b)
            e = iget(a.qsl, b + 1)
            if e <= s:
                continue
            _row_cols("slot_mappings_ptr", &a.out, gi, s, e,
                      "the tokens query_start_loc[{0}:{1}] of group {2}", b, b + 2, gi)
            _span("pos", s, e, n_pos, "query_start_loc[{0}:{1}]", b, b + 2)
            work += e - s
            r = iget(a.idx, b)
            if r < 0 or not en:
                continue
            _nonnull(a.ptrs, gi, "block_table_ptrs")
            for i in range(s, e):
                p = iget(a.pos, i)
                if p < 0:
                    raise IndexError(expected(f"pos[{i}]", "a position >= 0", p))
                lp = p
                if a.cp != 1 and a.sharded[gi]:
                    vbs = kbs * a.cp
                    vbo = p % vbs
                    if (vbo // a.inter) % a.cp != a.rank:
                        continue
                    lp = (p // vbs) * kbs + (vbo // (a.inter * a.cp)) * a.inter + vbo % a.inter
                bi = lp // kbs
                if bi >= bts:
                    raise IndexError(expected(f"block_table_strides[{gi}]",
                                              f"a row holding block {bi} (pos[{i}] = {p}, "
                                              f"idx_mapping[{b}] = {r})", bts))
    run_rows_for(_slots_unit, &a, G * P, work)


# ---------------------------------------------------------------------------------------------
# apply_write_kernel
# ---------------------------------------------------------------------------------------------

cdef struct WriteArgs:
    char* out             # single-group output (NULL: MULTI_GROUP)
    int out_code
    int64_t out_stride
    IBuf ptrs             # MULTI_GROUP: int32 tables by address
    IBuf strides
    IBuf groups
    IBuf rows_idx
    IBuf starts
    IBuf cu
    const char* content
    int content_code


cdef inline void _put(char* dst, int dst_code, int64_t i, const char* src, int src_code,
                      int64_t j) noexcept nogil:
    """``dst[i] = src[j]``, converted as Triton's store converts (ints truncate, floats to ints
    round toward zero)."""
    cdef int64_t v
    cdef float f
    if src_code == DT_FLOAT32:
        f = (<const float*>src)[j]
        if dst_code == DT_FLOAT32:
            (<float*>dst)[i] = f
        elif dst_code == DT_INT32:
            (<int32_t*>dst)[i] = <int32_t>f
        else:
            (<int64_t*>dst)[i] = <int64_t>f
        return
    v = (<const int64_t*>src)[j] if src_code == DT_INT64 else (<const int32_t*>src)[j]
    if dst_code == DT_FLOAT32:
        (<float*>dst)[i] = <float>v
    elif dst_code == DT_INT32:
        (<int32_t*>dst)[i] = <int32_t>v
    else:
        (<int64_t*>dst)[i] = v


cdef inline int _width(int code) noexcept nogil:
    return 8 if code == DT_INT64 else 4


cdef void _write_unit(const void* p, Py_ssize_t w) noexcept nogil:
    cdef const WriteArgs* a = <const WriteArgs*>p
    cdef int64_t row = iget(a.rows_idx, w), start = iget(a.starts, w), j, g
    cdef int64_t cs = iget(a.cu, w - 1) if w > 0 else 0, n = iget(a.cu, w) - cs
    cdef char* dst
    cdef int code
    cdef int64_t off
    if n <= 0:
        return
    if a.out != NULL:
        dst = a.out
        code = a.out_code
        off = row * a.out_stride + start
    else:
        g = iget(a.groups, w)
        dst = <char*>_table_at(a.ptrs, g)
        code = DT_INT32
        off = row * iget(a.strides, g) + start
    if code == a.content_code:
        memcpy(dst + off * _width(code), a.content + cs * _width(code), <size_t>n * _width(code))
        return
    for j in range(n):
        _put(dst, code, off + j, a.content, a.content_code, cs + j)


def apply_write_kernel(
    output_ptr, output_stride, write_indices_ptr, write_starts_ptr, write_contents_ptr,
    write_cu_lens_ptr, write_group_ids_ptr, BLOCK_SIZE=None, MULTI_GROUP=None, *, grid,
):
    """Staged writes into a persistent buffer: write ``w`` of ``grid[0]`` copies contents
    ``[write_cu_lens[w - 1], write_cu_lens[w])`` (from 0 for the first) to row
    ``write_indices[w]`` of the output, from column ``write_starts[w]``.

    The output is ``output_ptr`` itself, rows ``output_stride`` apart (int32, int64 or float32);
    under ``MULTI_GROUP`` (default: ``write_group_ids_ptr`` given) it is group
    ``write_group_ids[w]``'s int32 table at address ``output_ptr[g]``, rows ``output_stride[g]``
    apart (a tensor of strides). Contents are converted to the output's dtype as Triton's store
    converts. Checked: every write inside its row (and, for a tensor output, inside its rows),
    contents inside ``write_contents_ptr``; addresses are the caller's promise (non-null).
    Writes run in order (a later write to the same elements wins; on a GPU they would race).

    vLLM 0.34 keeps the arguments but splits each write over the grid's second axis (program
    ``(w, k)`` stores elements ``[k * BLOCK_SIZE, (k + 1) * BLOCK_SIZE)``, launched with
    enough ``k`` for the longest write), where 0.32 loops over them in one program: both
    write every element, and so does this kernel, whatever the second axis.
    """
    cdef WriteArgs a
    cdef Py_ssize_t n, w, n_content, n_groups = 0, n_strides = 0
    cdef int64_t row, start, cs, ce, gid, stride, work = 0
    cdef bint multi
    cdef Rows tab
    cdef Py_ssize_t shp[2]
    cdef Py_ssize_t rows = 0, cols = 0
    cdef int code = 0
    n = _programs(grid, 1, True)
    multi = as_flag(MULTI_GROUP, "MULTI_GROUP", write_group_ids_ptr is not None)
    a.rows_idx = index_at_least(write_indices_ptr, "write_indices_ptr", n, "one per write")
    a.starts = index_at_least(write_starts_ptr, "write_starts_ptr", n, "one per write")
    a.content = check_tensor(write_contents_ptr, "write_contents_ptr", M_INDEX | M_FLOAT32, -1,
                             &a.content_code, shp)
    n_content = shp[0]
    a.cu = index_at_least(write_cu_lens_ptr, "write_cu_lens_ptr", n, "one per write")
    if multi:
        a.out = NULL
        if write_group_ids_ptr is None:
            raise ValueError(expected("write_group_ids_ptr", "a tensor under MULTI_GROUP", None))
        a.groups = index_at_least(write_group_ids_ptr, "write_group_ids_ptr", n, "one per write")
        a.ptrs = _address_list(output_ptr, "output_ptr", &n_groups)
        a.strides = index_at_least(output_stride, "output_stride", 0)
        n_strides = output_stride.numel()
    else:
        a.out_stride = as_int(output_stride, "output_stride")
        need_min("output_stride", a.out_stride, 0)
        a.out = _output_table(output_ptr, a.out_stride, &a.out_code, &rows, &cols)
    for w in range(n):
        cs = iget(a.cu, w - 1) if w > 0 else 0
        ce = iget(a.cu, w)
        if ce <= cs:
            continue
        _span("write_contents_ptr", cs, ce, n_content, "write_cu_lens_ptr[{0}] = {1}", w, ce)
        row = iget(a.rows_idx, w)
        start = iget(a.starts, w)
        if row < 0:
            raise IndexError(expected(f"write_indices_ptr[{w}]", "a row >= 0", row))
        if start < 0:
            raise IndexError(expected(f"write_starts_ptr[{w}]", "a column >= 0", start))
        if multi:
            gid = iget(a.groups, w)
            if gid < 0 or gid >= n_groups or gid >= n_strides:
                raise IndexError(expected(f"write_group_ids_ptr[{w}]",
                                          f"a group with an address and a stride in [0, "
                                          f"{min(n_groups, n_strides)})", gid))
            stride = iget(a.strides, gid)
            if start + (ce - cs) > stride:
                raise IndexError(expected(f"output_stride[{gid}]",
                                          f"a row holding columns [{start}, {start + ce - cs}) "
                                          f"(write {w})", stride))
            _nonnull(a.ptrs, gid, "output_ptr")
        else:
            if row >= rows:
                raise IndexError(expected("output_ptr", f"at least {row + 1} rows "
                                          f"(write_indices_ptr[{w}] = {row})", f"{rows} rows"))
            if start + (ce - cs) > cols:
                raise IndexError(expected("output_ptr", f"columns [{start}, {start + ce - cs}) "
                                          f"of row {row} (write {w})", f"{cols} columns"))
        work += ce - cs
    _run_writes(&a, n, work)


cdef void _run_writes(const WriteArgs* a, Py_ssize_t n, int64_t work):
    """Writes in order, serially: overlapping writes then end as the last one says; split
    across threads only when large (vLLM's writes are disjoint rows or row ranges)."""
    cdef Py_ssize_t w
    cdef int nt = threads_for(work)
    with nogil:
        if nt <= 1:
            for w in range(n):
                _write_unit(a, w)
        else:
            run_rows(_write_unit, a, n, nt)


cdef IBuf _address_list(object t, str name, Py_ssize_t* n) except *:
    cdef IBuf b
    b.ptr = check_tensor(t, name, M_INT64 | M_UINT64, -1, NULL, n)
    b.wide = True
    return b


cdef char* _output_table(object t, int64_t stride, int* code, Py_ssize_t* rows,
                         Py_ssize_t* cols) except NULL:
    """The single-group output: a 2-D table of its own rows (``output_stride`` its
    ``stride(0)`` when it has more than one row; a column slice of a wider buffer is fine), or
    a contiguous tensor of any other shape read flat as whole rows of ``output_stride`` (a 1-D
    buffer of ``n`` with stride 1: ``n`` rows of one element)."""
    cdef Py_ssize_t shp[2]
    cdef Py_ssize_t st0, n
    cdef char* p
    if isinstance(t, _Tensor) and t.dim() == 2:
        p = check_table(t, "output_ptr", M_INDEX | M_FLOAT32, shp, &st0, code)
        rows[0] = shp[0]
        cols[0] = shp[1]
        if shp[0] > 1 and shp[1] > 0 and stride != st0:
            raise ValueError(expected("output_stride", f"output_ptr.stride(0) = {st0}", stride))
        return p
    p = check_tensor(t, "output_ptr", M_INDEX | M_FLOAT32, -1, code, shp)
    n = shp[0]
    if n == 0:
        rows[0] = 0
        cols[0] = 0
    elif stride == 0:
        rows[0] = PY_SSIZE_T_MAX        # every row is the first
        cols[0] = n
    elif n <= stride:
        rows[0] = 1
        cols[0] = n
    else:
        rows[0] = n // stride           # whole rows; a partial last one is not addressed
        cols[0] = stride
    return p


# ---------------------------------------------------------------------------------------------
# prompt_logprobs_token_ids_kernel
# ---------------------------------------------------------------------------------------------

cdef struct PromptArgs:
    IBuf out
    IBuf qsl
    IBuf idx
    IBuf nct
    Rows all


cdef void _prompt_row(const void* p, Py_ssize_t b) noexcept nogil:
    cdef const PromptArgs* a = <const PromptArgs*>p
    cdef int64_t r = iget(a.idx, b), qs = iget(a.qsl, b), ql = iget(a.qsl, b + 1) - qs, j
    cdef int64_t base = r * a.all.stride + iget(a.nct, r) + 1
    for j in range(ql):
        iset(a.out, qs + j, iget(a.all.buf, base + j))


def prompt_logprobs_token_ids_kernel(
    prompt_logprobs_token_ids_ptr, query_start_loc_ptr, idx_mapping_ptr, num_computed_tokens_ptr,
    all_token_ids_ptr, all_token_ids_stride, BLOCK_SIZE=None, *, grid,
):
    """The token each query position's prompt logprob is for: the next one.

    Program ``b`` (request state ``r = idx_mapping[b]``, ``nc = num_computed_tokens[r]``):
    ``out[query_start + j] = all_token_ids[r, nc + 1 + j]`` over its query. The last of them
    may be one past the row (a chunk that ends the row has no next token; its logprob is
    discarded): as in the Triton kernel that reads the element after the row -- the next row's
    first of a contiguous table -- and is refused only where no such element is in the table.
    """
    cdef PromptArgs a
    cdef Py_ssize_t B, b, n_out, n_nct
    cdef int64_t r, qs, ql, nc, c, work = 0
    B = _programs(grid, 1, True)
    a.out = index_at_least(prompt_logprobs_token_ids_ptr, "prompt_logprobs_token_ids_ptr", 0)
    n_out = prompt_logprobs_token_ids_ptr.numel()
    a.qsl = index_at_least(query_start_loc_ptr, "query_start_loc_ptr", B + 1 if B else 0,
                           "grid[0] + 1")
    a.idx = index_at_least(idx_mapping_ptr, "idx_mapping_ptr", B, "one per program")
    a.nct = index_at_least(num_computed_tokens_ptr, "num_computed_tokens_ptr", 0)
    n_nct = num_computed_tokens_ptr.numel()
    a.all = check_rows(all_token_ids_ptr, "all_token_ids_ptr", all_token_ids_stride,
                       "all_token_ids_stride")
    for b in range(B):
        r = iget(a.idx, b)
        _state("idx_mapping_ptr", b, r, "num_computed_tokens_ptr", n_nct)
        qs = iget(a.qsl, b)
        ql = iget(a.qsl, b + 1) - qs
        if ql <= 0:
            continue
        _span("prompt_logprobs_token_ids_ptr", qs, qs + ql, n_out,
              "query_start_loc_ptr[{0}:{1}]", b, b + 2)
        nc = iget(a.nct, r)
        c = nc + ql            # the last column read
        if (c == a.all.cols and a.all.stride == a.all.cols and r + 1 < a.all.rows
                and nc + 1 >= 0):
            _row_cols("all_token_ids_ptr", &a.all, r, nc + 1, c,
                      "the next tokens of idx_mapping_ptr[{0}] = {1}", b, r)
        else:
            _row_cols("all_token_ids_ptr", &a.all, r, nc + 1, c + 1,
                      "the next tokens of idx_mapping_ptr[{0}] = {1}", b, r)
        work += ql
    run_rows_for(_prompt_row, &a, B, work)
