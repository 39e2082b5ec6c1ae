"""kernels_cpu's Model Runner V2 input kernels vs plain-Python references, and their refusals.

The launches are the parity cases (``fdkit.mrv2.inputs``: random valid launches of the shapes
vLLM makes, int32/int64 index buffers, column-sliced tables, poisoned guarded outputs, state
buffers compared whole); here each is run through the kernel and through a loop-by-loop Python
reading of vLLM's Triton kernel, including what the interpreter cannot run (context
parallelism in the slot mappings). Bad launches must raise naming the argument with every
buffer as it was; empty grids and empty queries write nothing; the result does not depend on
the thread count.
"""

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu as K
from fdkit import guards
from fdkit._case import Out, Ptrs, Slice
from fdkit.cases import guard_violations
from fdkit.mrv2 import inputs as cases
from tests._fuzz import fuzz_settings
from tests._spec_helpers import threads

INDEX = (torch.int32, torch.int64)
NAMES = tuple(cases.CASES)


# -- plain-Python readings of vLLM's kernels -----------------------------------------------------


def _flat(t):
    return t.reshape(-1) if t.is_contiguous() else None


def _get(t, stride, r, c):
    return int(t[r, c]) if t.dim() == 2 else int(_flat(t)[r * stride + c])


def _set(t, stride, r, c, v):
    if t.dim() == 2:
        t[r, c] = v
    else:
        _flat(t)[r * stride + c] = v


def _i(t, i):
    return int(t.reshape(-1)[i])


def _put(t, i, v):
    t.reshape(-1)[i] = v


def _ref_prepare_prefill(kw, grid, _):
    look = min(max(kw["num_lookahead"], 0), kw["LOOKAHEAD_BLOCK"])
    for b in range(grid[0]):
        r = _i(kw["idx_mapping_ptr"], b)
        pl, nc = _i(kw["prefill_lens_ptr"], r), _i(kw["num_computed_tokens_ptr"], r)
        if nc >= pl:
            continue
        qs = _i(kw["query_start_loc_ptr"], b)
        ql = _i(kw["query_start_loc_ptr"], b + 1) - qs
        table, stride = kw["all_token_ids_ptr"], kw["all_token_ids_stride"]
        for j in range(ql):
            _put(kw["input_ids_ptr"], qs + j, _get(table, stride, r, nc + j))
        for k in range(look):
            pos = nc + ql + k
            v = _get(table, stride, r, pos) if pos < pl else 0
            _set(kw["next_prefill_tokens_ptr"], kw["next_prefill_tokens_stride"], k, r, v)


def _ref_pos_seq_lens(kw, grid, _):
    R = grid[0] - 1
    for j in range(R, kw["max_num_reqs"]):
        _put(kw["seq_lens_ptr"], j, 0)
    for b in range(R):
        nc = _i(kw["num_computed_tokens_ptr"], _i(kw["idx_mapping_ptr"], b))
        qs = _i(kw["query_start_loc_ptr"], b)
        ql = _i(kw["query_start_loc_ptr"], b + 1) - qs
        _put(kw["seq_lens_ptr"], b, nc + ql)
        for j in range(ql):
            _put(kw["pos_ptr"], qs + j, nc + j)


def _ref_combine(kw, grid, _):
    cap, nns = kw["BLOCK_SIZE"], kw["NUM_NEW_SAMPLED_TOKENS"]
    for b in range(grid[0]):
        r = _i(kw["idx_mapping_ptr"], b)
        cs = _i(kw["cu_num_logits_ptr"], b)
        nl = _i(kw["cu_num_logits_ptr"], b + 1) - cs
        qe = _i(kw["query_start_loc_ptr"], b + 1)
        for j in range(min(nl, cap)):
            _put(kw["logits_indices_ptr"], cs + j, qe - nl + j)
        seq, pl = _i(kw["seq_lens_ptr"], b), _i(kw["prefill_len_ptr"], r)
        if seq <= pl:
            continue
        if nns > 0 and seq - nl >= pl:
            _put(kw["input_ids_ptr"], qe - nl, _i(kw["last_sampled_tokens_ptr"], r))
        nd = nl - nns
        for j in range(min(max(nd, 0), cap)):
            v = _get(kw["draft_tokens_ptr"], kw["draft_tokens_stride"], r, j)
            _put(kw["input_ids_ptr"], qe - nd + j, v)


def _ref_num_sampled(kw, grid, _):
    for b in range(grid[0]):
        r = _i(kw["idx_mapping_ptr"], b)
        chunked = _i(kw["seq_lens_ptr"], b) < _i(kw["prefill_len_ptr"], r)
        ns = 0 if chunked else _i(kw["num_sampled_ptr"], b)
        _put(kw["num_sampled_ptr"], b, ns)
        nl = _i(kw["cu_num_logits_ptr"], b + 1) - _i(kw["cu_num_logits_ptr"], b)
        _put(kw["num_rejected_ptr"], b, 0 if chunked else nl - ns)


def _ref_post_update(kw, grid, _):
    nd = kw.get("num_draft_tokens", 0)
    if kw.get("draft_tokens_ptr") is not None:
        for b in range(grid[0]):
            r = _i(kw["idx_mapping_ptr"], b)
            for i in range(nd if r >= 0 else 0):
                _put(kw["draft_tokens_out_ptr"], r * nd + i, _i(kw["draft_tokens_ptr"], b * nd + i))
    samp, sstride = kw["sampled_tokens_ptr"], kw["sampled_tokens_stride"]
    bins = kw["output_bin_counts_ptr"]
    for b in range(grid[0]):
        r = _i(kw["idx_mapping_ptr"], b)
        if r < 0:
            continue
        total = _i(kw["total_len_ptr"], r)
        ns = _i(kw["num_sampled_ptr"], b)
        if ns > 0:
            _put(kw["last_sampled_tokens_ptr"], r, _get(samp, sstride, b, ns - 1))
            _put(kw["total_len_ptr"], r, total + ns)
        for i in range(ns):
            tok = _get(samp, sstride, b, i)
            _set(kw["all_token_ids_ptr"], kw["all_token_ids_stride"], r, total + i, tok)
            if bins is not None:
                stride = kw["output_bin_counts_stride"]
                _set(bins, stride, r, tok, _get(bins, stride, r, tok) + 1)
        qsl = kw["query_start_loc_ptr"]
        ql = 0 if qsl is None else _i(qsl, b + 1) - _i(qsl, b)
        delta = ql - _i(kw["num_rejected_ptr"], b)
        if delta:
            _put(kw["num_computed_tokens_ptr"], r, _i(kw["num_computed_tokens_ptr"], r) + delta)


def _ref_post_update_computed(kw, grid, _):
    for b in range(grid[0]):
        r = _i(kw["idx_mapping_ptr"], b)
        ql = _i(kw["query_start_loc_ptr"], b + 1) - _i(kw["query_start_loc_ptr"], b)
        _put(kw["num_computed_tokens_ptr"], r, _i(kw["num_computed_tokens_ptr"], r) + ql)


def _ref_expand(kw, grid, _):
    for b in range(grid[0]):
        s = _i(kw["cu_num_logits_ptr"], b)
        n = min(_i(kw["cu_num_logits_ptr"], b + 1) - s, kw["BLOCK_SIZE"])
        for j in range(n):
            _put(kw["expanded_idx_mapping_ptr"], s + j, _i(kw["idx_mapping_ptr"], b))
            _put(kw["expanded_local_pos_ptr"], s + j, j)


def _ref_gather(kw, grid, tables):
    src, dst = tables["src_block_table_ptrs"], tables["dst_block_table_ptrs"]
    for g in range(grid[0]):
        stride = _i(kw["block_table_strides"], g)
        for b in range(grid[1]):
            row = dst[g].reshape(-1)[b * stride : (b + 1) * stride]
            if b >= kw["num_reqs"]:
                row.zero_()
                continue
            r = _i(kw["batch_idx_to_req_idx"], b)
            nb = _get(kw["num_blocks_ptr"], kw["num_blocks_stride"], g, r)
            row[:nb] = src[g].reshape(-1)[r * stride : r * stride + nb]
            if kw.get("MASK_SLIDING_WINDOW"):
                reach = _i(kw["sliding_window_reach_ptr"], g)
                if reach > 0 and nb > 0:
                    first = _i(kw["num_computed_tokens_ptr"], r) - reach
                    row[: min(max(first, 0) // _i(kw["block_sizes_ptr"], g), nb)] = 0


def _ref_slots(kw, grid, tables):
    cp, inter, rank, pad = kw["CP_SIZE"], kw["CP_INTERLEAVE"], kw["cp_rank"], kw["PAD_ID"]
    out, ostride = kw["slot_mappings_ptr"], kw["slot_mappings_stride"]
    R = grid[1] - 1
    qsl = kw["query_start_loc"]
    for g in range(grid[0]):
        for i in range(_i(qsl, R), kw["max_num_tokens"]):
            _set(out, ostride, g, i, pad)
        table = tables["block_table_ptrs"][g].reshape(-1)
        bts, kbs = _i(kw["block_table_strides"], g), _i(kw["block_sizes"], g)
        enabled = bool(kw["slot_mapping_enabled"][g])
        for b in range(R):
            r = _i(kw["idx_mapping"], b)
            for i in range(_i(qsl, b), _i(qsl, b + 1)):
                p = _i(kw["pos"], i)
                lp, local = p, True
                if cp != 1 and bool(kw["dcp_sharded"][g]):
                    vbs = kbs * cp
                    vbo = p % vbs
                    local = (vbo // inter) % cp == rank
                    lp = (p // vbs) * kbs + (vbo // (inter * cp)) * inter + vbo % inter
                if not (enabled and r >= 0 and local):
                    slot = pad
                else:
                    slot = int(table[r * bts + lp // kbs]) * kbs + lp % kbs
                _set(out, ostride, g, i, slot)


def _ref_apply_write(kw, grid, tables):
    multi = kw["MULTI_GROUP"]
    contents = kw["write_contents_ptr"].reshape(-1)
    for w in range(grid[0]):
        cs = _i(kw["write_cu_lens_ptr"], w - 1) if w else 0
        ce = _i(kw["write_cu_lens_ptr"], w)
        row, start = _i(kw["write_indices_ptr"], w), _i(kw["write_starts_ptr"], w)
        if multi:
            g = _i(kw["write_group_ids_ptr"], w)
            out, stride = tables["output_ptr"][g], _i(kw["output_stride"], g)
        else:
            out, stride = kw["output_ptr"], kw["output_stride"]
        for j in range(ce - cs):
            v = contents[cs + j]
            _set(out, stride, row, start + j, v.to(out.dtype).item())


def _ref_prompt_logprobs(kw, grid, _):
    for b in range(grid[0]):
        r = _i(kw["idx_mapping_ptr"], b)
        qs = _i(kw["query_start_loc_ptr"], b)
        ql = _i(kw["query_start_loc_ptr"], b + 1) - qs
        nc = _i(kw["num_computed_tokens_ptr"], r)
        for j in range(ql):
            v = _get(kw["all_token_ids_ptr"], kw["all_token_ids_stride"], r, nc + 1 + j)
            _put(kw["prompt_logprobs_token_ids_ptr"], qs + j, v)


REFERENCES = {
    "prepare_prefill_inputs_kernel": _ref_prepare_prefill,
    "prepare_pos_seq_lens_kernel": _ref_pos_seq_lens,
    "combine_sampled_and_draft_tokens_kernel": _ref_combine,
    "get_num_sampled_and_rejected_kernel": _ref_num_sampled,
    "post_update_kernel": _ref_post_update,
    "post_update_with_drafts_kernel": _ref_post_update,
    "post_update_num_computed_tokens_kernel": _ref_post_update_computed,
    "expand_idx_mapping_kernel": _ref_expand,
    "gather_block_tables_kernel": _ref_gather,
    "gather_block_tables_windowed_kernel": _ref_gather,
    "compute_slot_mappings_kernel": _ref_slots,
    "apply_write_kernel": _ref_apply_write,
    "prompt_logprobs_token_ids_kernel": _ref_prompt_logprobs,
}


# -- running a case ------------------------------------------------------------------------------


def _grid(case):
    return tuple(case.grid) + (1,) * (3 - len(case.grid))


def _tables(case, compared):
    """The tensors behind each raw-address argument, as the kernel sees them."""
    out = {}
    for name, spec in case.args.items():
        if isinstance(spec, Ptrs):
            views = []
            for i, m in enumerate(spec.members):
                backing = compared[f"{name}[{i}]"]
                views.append(
                    guards.view_of(backing, m.shape, m.row_stride)
                    if isinstance(m, Out)
                    else backing
                )
            out[name] = views
    return out


def _make(name, seed, idx, **extra):
    return cases.CASES[name](random.Random(seed), idx, "small", **extra)


def _run(case, positional=False):
    kw, compared = case.build()
    fn = getattr(K, case.kernel)
    if positional:
        fn(*kw.values(), grid=_grid(case))
    else:
        fn(**kw, grid=_grid(case))
    return kw, compared


def _check_against_reference(case, positional=False):
    _, got = _run(case, positional)
    kw, want = case.build()
    REFERENCES[case.kernel](kw, _grid(case), _tables(case, want))
    assert got.keys() == want.keys()
    for key in got:
        assert torch.equal(got[key], want[key]), (
            f"{case}: {key}\nkernel:    {got[key].tolist()}\nreference: {want[key].tolist()}"
        )
    assert not guard_violations(case, got), case


@pytest.mark.parametrize("name", NAMES)
@fuzz_settings(60, deep_examples=2000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), idx=st.sampled_from(INDEX), positional=st.booleans())
def test_matches_the_reference(name, seed, idx, positional):
    # 0.32's forms, whichever vLLM sources are found
    extra = {switch: False for base, switch in FORMS_034.values() if base == name}
    _check_against_reference(_make(name, seed, idx, **extra), positional)


#: vLLM 0.34's forms: (the 0.32 kernel's case generator, its switch to the 0.34 form)
FORMS_034 = {
    "post_update_with_drafts_kernel": ("post_update_kernel", "drafts"),
    "gather_block_tables_windowed_kernel": ("gather_block_tables_kernel", "window"),
}


@pytest.mark.parametrize("form", tuple(FORMS_034))
@fuzz_settings(60, deep_examples=2000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), idx=st.sampled_from(INDEX), positional=st.booleans())
def test_vllm_034_forms_match_the_reference(form, seed, idx, positional):
    name, switch = FORMS_034[form]
    case = _make(name, seed, idx, **{switch: True})
    assert case.kernel == form
    _check_against_reference(case, positional)


@fuzz_settings(150, deep_examples=3000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), idx=st.sampled_from(INDEX), cp=st.sampled_from((2, 3, 4)))
def test_slot_mappings_under_context_parallelism(seed, idx, cp):
    """What the interpreter cannot run: CP_SIZE > 1, sharded and unsharded groups."""
    _check_against_reference(_make("compute_slot_mappings_kernel", seed, idx, cp=cp))


@pytest.mark.parametrize("name", NAMES)
def test_the_result_does_not_depend_on_the_thread_count(name):
    for seed in range(12):
        case = _make(name, seed, torch.int64)
        _, one = _run(case)
        with threads(2, threshold=0):
            _, two = _run(case)
        for key in one:
            assert torch.equal(one[key], two[key]), (case, key)


# -- empty launches -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("empty_axis", [0, 1, 2])
def test_an_empty_grid_writes_nothing(name, empty_axis):
    for seed in range(8):
        case = _make(name, seed, torch.int32)
        grid = list(_grid(case))
        grid[empty_axis] = 0
        kw, after = case.build()
        _, before = case.build()
        getattr(K, name)(**kw, grid=tuple(grid))
        for key in after:
            assert torch.equal(after[key], before[key]), (case, key)


def test_empty_queries_write_only_their_sequence_lengths():
    nct = torch.tensor([5, 9, 2], dtype=torch.int32)
    pos = torch.full((4,), -3, dtype=torch.int64)
    seq = torch.full((5,), -3, dtype=torch.int32)
    K.prepare_pos_seq_lens_kernel(
        pos, seq, torch.tensor([2, 0]), torch.tensor([1, 1, 1]), nct, 4, 1024, grid=(3,)
    )
    assert pos.tolist() == [-3] * 4
    assert seq.tolist() == [2, 5, 0, 0, -3]


def test_a_skipped_request_of_post_update_is_not_read():
    """idx_mapping < 0: nothing of that program is read, not even a count that would reach
    past the sampled tokens' row."""
    nct = torch.tensor([3, 4])
    last = torch.tensor([7, 7])
    total = torch.tensor([1, 2])
    all_ids = torch.zeros(2, 4, dtype=torch.int32)
    K.post_update_kernel(
        torch.tensor([-1, 1]),
        nct,
        last,
        None,
        0,
        torch.tensor([[5, 6], [8, 9]]),
        2,
        torch.tensor([10**6, 1]),
        torch.tensor([10**6, 0]),
        torch.tensor([0, 5, 6]),
        all_ids,
        4,
        total,
        grid=(2,),
    )
    assert nct.tolist() == [3, 5]
    assert last.tolist() == [7, 8]
    assert total.tolist() == [1, 3]
    assert all_ids.tolist() == [[0, 0, 0, 0], [0, 0, 8, 0]]


# -- refusals --------------------------------------------------------------------------------------


def _refused(case, mutate, exc, name):
    kw, compared = case.build()
    mutate(kw)
    before = {key: t.clone() for key, t in compared.items()}
    with pytest.raises(exc, match=name):
        getattr(K, case.kernel)(**kw, grid=_grid(case))
    for key in compared:
        assert torch.equal(compared[key], before[key]), f"{key} written before the refusal"


def _first(name, want, idx=torch.int32):
    """The first seed whose case satisfies ``want(case)``."""
    for seed in range(500):
        case = _make(name, seed, idx)
        if want(case):
            return case
    raise AssertionError(f"no case of {name} satisfies the condition")


def _poke(key, i, value):
    def mutate(kw):
        kw[key].reshape(-1)[i] = value

    return mutate


def _set_arg(key, value):
    def mutate(kw):
        kw[key] = value

    return mutate


def _nonempty(case):
    return case.grid[0] > 0 and all(case.grid)


def _prefilling(case):
    a = case.args
    for b in range(case.grid[0]):
        r = int(a["idx_mapping_ptr"][b])
        q = int(a["query_start_loc_ptr"][b + 1]) - int(a["query_start_loc_ptr"][b])
        if int(a["num_computed_tokens_ptr"][r]) < int(a["prefill_lens_ptr"][r]) and q > 0:
            return True
    return False


@pytest.mark.parametrize("idx", INDEX)
def test_prepare_prefill_inputs_refusals(idx):
    name = "prepare_prefill_inputs_kernel"
    case = _first(name, _prefilling, idx)
    _refused(case, _poke("idx_mapping_ptr", 0, -1), IndexError, "idx_mapping_ptr")
    _refused(case, _poke("idx_mapping_ptr", 0, 10**6), IndexError, "prefill_lens_ptr")
    _refused(
        case, _set_arg("input_ids_ptr", torch.zeros(0, dtype=idx)), IndexError, "input_ids_ptr"
    )
    _refused(case, _set_arg("idx_mapping_ptr", torch.zeros(0, dtype=idx)), ValueError, "idx_mapp")
    _refused(
        case,
        _set_arg("query_start_loc_ptr", case.args["query_start_loc_ptr"].float()),
        TypeError,
        "query_start_loc_ptr",
    )
    _refused(case, _set_arg("all_token_ids_stride", 10**4), ValueError, "all_token_ids_stride")
    _refused(case, _set_arg("LOOKAHEAD_BLOCK", 0), ValueError, "LOOKAHEAD_BLOCK")
    _refused(case, _set_arg("num_lookahead", 1.0), TypeError, "num_lookahead")


def test_grid_refusals():
    case = _first("post_update_kernel", _nonempty)
    kw, _ = case.build()
    with pytest.raises(ValueError, match="grid"):
        K.post_update_kernel(**kw, grid=(case.grid[0], 2, 1))
    with pytest.raises(TypeError, match="grid"):
        K.post_update_kernel(**kw, grid=case.grid[0])
    with pytest.raises(ValueError, match="grid"):
        K.post_update_kernel(**kw, grid=(-1,))
    with pytest.raises(TypeError, match="grid"):
        K.post_update_kernel(**kw)


def test_update_kernels_refuse_a_state_index_twice():
    nct = torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match="idx_mapping_ptr"):
        K.post_update_num_computed_tokens_kernel(
            torch.tensor([2, 2]), nct, torch.tensor([0, 1, 3]), grid=(2,)
        )
    assert nct.tolist() == [1, 2, 3]
    case = _first(
        "post_update_kernel", lambda c: c.grid[0] >= 2 and c.args["idx_mapping_ptr"][0] >= 0
    )
    first = int(case.args["idx_mapping_ptr"][0])
    _refused(case, _poke("idx_mapping_ptr", 1, first), ValueError, "idx_mapping_ptr")


def _samples(case):
    return any(
        int(case.args["num_sampled_ptr"][b]) > 0 and int(case.args["idx_mapping_ptr"][b]) >= 0
        for b in range(case.grid[0])
    )


def test_post_update_refusals():
    case = _first(
        "post_update_kernel", lambda c: _samples(c) and c.args["output_bin_counts_ptr"] is not None
    )
    b = next(
        b
        for b in range(case.grid[0])
        if int(case.args["num_sampled_ptr"][b]) > 0 and int(case.args["idx_mapping_ptr"][b]) >= 0
    )
    r = int(case.args["idx_mapping_ptr"][b])

    def big_total(kw):
        kw["total_len_ptr"].reshape(-1)[r] = 10**5

    _refused(case, big_total, IndexError, "all_token_ids_ptr")

    def bad_token(kw):
        t = kw["sampled_tokens_ptr"]
        t[b, 0] = 10**6

    _refused(case, bad_token, IndexError, "output_bin_counts_ptr")
    _refused(case, _poke("num_sampled_ptr", b, 10**3), IndexError, "sampled_tokens_ptr")


def test_combine_refuses_draft_tokens_outside_the_row():
    def drafting(c):
        a = c.args
        for b in range(c.grid[0]):
            r = int(a["idx_mapping_ptr"][b])
            nl = int(a["cu_num_logits_ptr"][b + 1]) - int(a["cu_num_logits_ptr"][b])
            if (
                int(a["seq_lens_ptr"][b]) > int(a["prefill_len_ptr"][r])
                and nl - a["NUM_NEW_SAMPLED_TOKENS"] > 0
            ):
                return True
        return False

    case = _first("combine_sampled_and_draft_tokens_kernel", drafting)
    _refused(
        case,
        _set_arg("draft_tokens_ptr", torch.zeros(0, dtype=torch.int64)),
        IndexError,
        "draft_tokens_ptr",
    )
    _refused(case, _set_arg("NUM_NEW_SAMPLED_TOKENS", 2), ValueError, "NUM_NEW_SAMPLED_TOKENS")
    _refused(case, _set_arg("BLOCK_SIZE", 0), ValueError, "BLOCK_SIZE")


def test_block_table_kernels_refuse_what_the_addresses_cannot_hold():
    def real_rows(c):
        return all(c.grid) and c.args["num_reqs"] > 0 and int(c.args["block_table_strides"][0]) > 0

    case = _first("gather_block_tables_kernel", real_rows)
    _refused(case, _poke("batch_idx_to_req_idx", 0, -1), IndexError, "batch_idx_to_req_idx")
    _refused(case, _poke("block_table_strides", 0, -1), ValueError, "block_table_strides")

    def too_many_blocks(kw):
        r = int(kw["batch_idx_to_req_idx"][0])
        nb = kw["num_blocks_ptr"]
        nb[0, r] = 10**4

    _refused(case, too_many_blocks, IndexError, "num_blocks_ptr")
    _refused(case, _poke("dst_block_table_ptrs", 0, 0), ValueError, "dst_block_table_ptrs")
    _refused(
        case,
        _set_arg("src_block_table_ptrs", torch.zeros(1, dtype=torch.float64)),
        TypeError,
        "src_block_table_ptrs",
    )

    def tokens(c):
        a = c.args
        return (
            all(c.grid)
            and any(
                int(a["idx_mapping"][b]) >= 0
                and int(a["query_start_loc"][b + 1]) > int(a["query_start_loc"][b])
                for b in range(c.grid[1] - 1)
            )
            and bool(a["slot_mapping_enabled"].all())
        )

    case = _first("compute_slot_mappings_kernel", tokens)
    _refused(
        case,
        _set_arg("block_table_strides", torch.zeros(case.grid[0], dtype=torch.int64)),
        IndexError,
        "block_table_strides",
    )
    _refused(case, _set_arg("pos", case.args["pos"] * 0 - 1), IndexError, "pos")
    _refused(
        case,
        _set_arg("block_table_ptrs", torch.zeros(case.grid[0], dtype=torch.int64)),
        ValueError,
        "block_table_ptrs",
    )
    _refused(case, _set_arg("max_num_tokens", 10**5), IndexError, "slot_mappings_ptr")
    _refused(case, _set_arg("CP_SIZE", 0), ValueError, "CP_SIZE")


def test_apply_write_refusals():
    def single(c):
        if c.args["MULTI_GROUP"]:
            return False
        out = c.args["output_ptr"]
        rows = (out.base if isinstance(out, Slice) else out).shape[0]
        return c.grid[0] > 0 and int(c.args["write_cu_lens_ptr"][0]) > 0 and rows > 1

    case = _first("apply_write_kernel", single)
    _refused(case, _poke("write_starts_ptr", 0, 100), IndexError, "output_ptr")
    _refused(case, _poke("write_indices_ptr", 0, 100), IndexError, "output_ptr")
    _refused(case, _poke("write_indices_ptr", 0, -1), IndexError, "write_indices_ptr")
    _refused(case, _poke("write_cu_lens_ptr", 0, 10**4), IndexError, "write_contents_ptr")
    _refused(case, _set_arg("output_stride", 10**3), ValueError, "output_stride")

    def multi(c):
        return c.args["MULTI_GROUP"] and c.grid[0] > 0 and int(c.args["write_cu_lens_ptr"][0]) > 0

    case = _first("apply_write_kernel", multi)
    _refused(case, _poke("write_group_ids_ptr", 0, 99), IndexError, "write_group_ids_ptr")
    _refused(case, _poke("write_starts_ptr", 0, 100), IndexError, "output_stride")
    _refused(case, _set_arg("write_group_ids_ptr", None), ValueError, "write_group_ids_ptr")
    _refused(
        case, _set_arg("output_ptr", torch.zeros(4, dtype=torch.int64)), ValueError, "output_ptr"
    )


def test_prompt_logprobs_reads_one_past_a_row_only_where_the_table_holds_it():
    table = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    out = torch.full((3,), -1, dtype=torch.int64)
    # request state 1 computed 1 of 4 tokens, query of 3: reads columns 2, 3 and 4 (row 2's 0th)
    K.prompt_logprobs_token_ids_kernel(
        out, torch.tensor([0, 3]), torch.tensor([1]), torch.tensor([0, 1, 0]), table, 4, grid=(1,)
    )
    assert out.tolist() == [6, 7, 8]
    out.fill_(-1)
    with pytest.raises(IndexError, match="all_token_ids_ptr"):  # the last row: nothing after it
        K.prompt_logprobs_token_ids_kernel(
            out,
            torch.tensor([0, 3]),
            torch.tensor([2]),
            torch.tensor([0, 0, 1]),
            table,
            4,
            grid=(1,),
        )
    assert out.tolist() == [-1, -1, -1]


def test_vllm_034_forms_refusals():
    def drafting(c):
        a = c.args
        return (
            a["draft_tokens_ptr"] is not None
            and a["num_draft_tokens"] > 0
            and any(int(a["idx_mapping_ptr"][b]) >= 0 for b in range(c.grid[0]))
        )

    for seed in range(500):
        case = _make("post_update_kernel", seed, torch.int64, drafts=True)
        if drafting(case):
            break
    _refused(
        case,
        _set_arg("draft_tokens_out_ptr", torch.zeros(0, dtype=torch.int64)),
        IndexError,
        "draft_tokens_out_ptr",
    )
    _refused(
        case,
        _set_arg("draft_tokens_ptr", torch.zeros(0, dtype=torch.int64)),
        IndexError,
        "draft_tokens_ptr",
    )
    _refused(case, _set_arg("draft_tokens_out_ptr", None), ValueError, "draft_tokens_out_ptr")

    def windowed(c):
        a = c.args
        return (
            all(c.grid)
            and a["MASK_SLIDING_WINDOW"]
            and a["num_reqs"] > 0
            and int(a["sliding_window_reach_ptr"][0]) > 0
        )

    for seed in range(500):
        case = _make("gather_block_tables_kernel", seed, torch.int32, window=True)
        if windowed(case):
            break
    _refused(case, _poke("block_sizes_ptr", 0, 0), ValueError, "block_sizes_ptr")
    _refused(
        case,
        _set_arg("sliding_window_reach_ptr", torch.zeros(0, dtype=torch.int32)),
        ValueError,
        "sliding_window_reach_ptr",
    )
