# cython: language_level=3
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
from kernels_cpu._parallel cimport threads_for
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


cdef IBuf _state_rows(object t, str name, int64_t most, Py_ssize_t* have) except *:
    """A buffer indexed by request-state index (``idx_mapping``'s values): ``most`` is the
    largest index the launch reads (-1: none)."""
    cdef Py_ssize_t shp[1]
    cdef IBuf b = check_index(t, name, -1, shp)
    have[0] = shp[0]
    return b


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
    cdef Py_ssize_t mnr, n_last, n_tin, at, bad, k
    cdef Py_ssize_t shp[1]
    cdef int64_t total_expanded
    mnr = as_int(max_num_reqs, "max_num_reqs")
    a.mml = as_int(max_model_len, "max_model_len")
    a.tin = check_index(target_input_ids_ptr, "target_input_ids_ptr", -1, shp)
    n_tin = shp[0]
    a.tpos = check_index(target_positions_ptr, "target_positions_ptr", -1, shp)
    a.last = _state_rows(last_sampled_ptr, "last_sampled_ptr", -1, &n_last)
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
    need_count("target_positions_ptr", shp[0], iget(a.qsl, R - 1) + 1,
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
