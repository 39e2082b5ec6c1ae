"""Model Runner V2's drafter kernels (``kernels_cpu._mrv2_drafts``) against plain references.

The references below are the Triton kernels read line by line in Python over the same buffers
(one program at a time); every case of ``fdkit.mrv2.drafts`` (int32 and int64 index buffers,
guarded outputs) is launched through both and every buffer, guards included, compared bit for
bit. Then the refusals: a bad argument is named in the error and nothing is written.
"""

import random

import pytest
import torch
from _fuzz import fuzz_settings
from _spec_helpers import threads
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu
from fdkit import mrv2
from fdkit.cases import guard_violations
from kernels_cpu import contracts

IDX = [torch.int32, torch.int64]


def _i32(v):
    """``v`` cast to int32 as Triton's ``.to(tl.int32)`` casts (two's-complement truncation)."""
    return (int(v) + 2**31) % 2**32 - 2**31


def _store(buf, i, v):
    """``buf.view(-1)[i] = v`` as a Triton store converts an integer to the buffer's width."""
    if buf.dtype == torch.int32:
        v = _i32(v)
    buf.view(-1)[i] = v


def _inc(v, dtype):
    """``v + 1`` in the buffer's width (an int32 buffer's value wraps)."""
    return _i32(int(v) + 1) if dtype == torch.int32 else int(v) + 1


# -- references -------------------------------------------------------------------------------


def ref_standalone_ar_prepare_prefill_inputs_kernel(kw, grid):
    R = grid[0]
    flat = {k: v.view(-1) for k, v in kw.items() if isinstance(v, torch.Tensor)}
    qsl, mml = flat["query_start_loc_ptr"], kw["max_model_len"]
    total_expanded = None
    for i in range(R):
        rs = int(flat["idx_mapping_ptr"][i])
        qs, qn = int(qsl[i]), int(qsl[i + 1])
        num_valid = qn - qs - int(flat["num_rejected_ptr"][i])
        corr = _i32(flat["last_sampled_ptr"][rs])
        start = int(flat["target_positions_ptr"][qs])
        out_start, total = qs + i, qn - qs + 1
        for j in range(total):
            tok = int(flat["target_input_ids_ptr"][qs + j]) if j < num_valid else 0
            tok = corr if j == num_valid else tok
            _store(flat["out_input_ids_ptr"], out_start + j, tok)
            _store(flat["out_positions_ptr"], out_start + j, min(start + j, mml - 1))
        _store(flat["last_token_indices_ptr"], i, out_start + num_valid)
        _store(flat["out_query_start_loc_ptr"], i, out_start)
        seq = _inc(flat["seq_lens_ptr"][i], flat["seq_lens_ptr"].dtype)
        _store(flat["out_seq_lens_ptr"], i, min(seq, mml))
        total_expanded = out_start + total
    if R:
        mnr = kw["max_num_reqs"]
        for k in range(R, mnr + 1):
            _store(flat["out_query_start_loc_ptr"], k, total_expanded)
        for k in range(R, mnr):
            _store(flat["out_seq_lens_ptr"], k, 0)
            _store(flat["last_token_indices_ptr"], k, 0)


def _row(kw, name, stride_name, r):
    """Row ``r`` of a table argument as the kernel addresses it: ``ptr + r * stride``."""
    t = kw[name]
    return torch.as_strided(
        t,
        (t.numel() if t.dim() < 2 else t.shape[1],),
        (1,),
        t.storage_offset() + r * kw[stride_name],
    )


def ref_ngram_scan_kernel(kw, grid):
    B, NB = grid[0], grid[1]
    L1, lo, hi, BL = kw["L"] + 1, kw["MIN_N"], kw["MAX_N"], kw["BLOCK_L"]
    for b in range(B):
        rs = int(kw["idx_mapping_ptr"].view(-1)[b])
        seq = int(kw["total_len_ptr"].view(-1)[rs])
        ns = int(kw["num_sampled_ptr"].view(-1)[b])
        out = _row(kw, "scratch_ptr", "scratch_stride", b)
        toks = [_i32(t) for t in _row(kw, "token_ids_ptr", "token_ids_stride", rs)[:seq]]
        for blk in range(NB):
            if not (ns > 0 and seq >= lo and blk * BL <= seq - lo - 1):
                out[blk] = 0
                continue
            block_best = 0
            for pos in range(blk * BL, (blk + 1) * BL):
                best = 0
                for n in range(lo, hi + 1):  # the last n that matches wins, as in the kernel
                    if 0 <= pos <= seq - n - 1 and toks[pos : pos + n] == toks[seq - n : seq]:
                        best = n * L1 + pos + 1
                block_best = max(block_best, best)
            out[blk] = block_best


def ref_ngram_finalize_kernel(kw, grid):
    L, NB, K = kw["L"], kw["N_BLOCKS"], kw["K"]
    drafts = kw["drafts_ptr"].view(-1)
    for b in range(grid[0]):
        rs = int(kw["idx_mapping_ptr"].view(-1)[b])
        lanes = [int(v) for v in _row(kw, "scratch_ptr", "scratch_stride", b)[:NB]]
        if NB < kw["N_BLOCKS_PO2"]:
            lanes.append(0)  # a masked lane's ``other``
        score = max(lanes)
        seq = int(kw["total_len_ptr"].view(-1)[rs])
        ok = score > 0 and int(kw["num_sampled_ptr"].view(-1)[b]) > 0
        n = (score - 1) // (L + 1) if score > 0 else 0
        start = (score - 1 - n * (L + 1)) + n if score > 0 else 0
        row = _row(kw, "token_ids_ptr", "token_ids_stride", rs)
        for k in range(K):
            if ok and k < max(seq - start, 0):
                v = int(row[min(start + k, L - 1)])
            else:
                v = int(kw["last_sampled_ptr"].view(-1)[rs])
            _store(drafts, b * K + k, v)


def ref_target_dependent_ar_prepare_prefill_inputs_kernel(kw, grid):
    R = grid[0]
    f = {k: v.view(-1) for k, v in kw.items() if isinstance(v, torch.Tensor)}
    qsl = f["query_start_loc_ptr"]
    for i in range(R):
        rs = int(f["idx_mapping_ptr"][i])
        qs, qe = int(qsl[i]), int(qsl[i + 1])
        ql = qe - qs - int(f["num_rejected_ptr"][i])
        if int(f["num_sampled_ptr"][i]) > 0:
            nxt = _i32(f["last_sampled_ptr"][rs])
        else:
            nxt = int(f["next_prefill_tokens_ptr"][rs])
        for j in range(1, ql):
            _store(f["draft_input_ids_ptr"], qs + j - 1, int(f["target_input_ids_ptr"][qs + j]))
        _store(f["last_token_indices_ptr"], i, qs + ql - 1)
        _store(f["draft_input_ids_ptr"], qs + ql - 1, nxt)
        for j in range(ql):
            _store(f["draft_positions_ptr"], qs + j, int(f["target_positions_ptr"][qs + j]))
        _store(f["draft_query_start_loc_ptr"], i, qs)
        _store(f["draft_seq_lens_ptr"], i, int(f["seq_lens_ptr"][i]))
    if R:
        mnr = kw["max_num_reqs"]
        _store(f["draft_current_step_ptr"], 0, 0)
        for k in range(R, mnr + 1):
            _store(f["draft_query_start_loc_ptr"], k, int(qsl[R]))
        for k in range(R, mnr):
            _store(f["draft_seq_lens_ptr"], k, 0)
            _store(f["last_token_indices_ptr"], k, 0)


def ref_target_dependent_ar_prepare_decode_inputs_kernel(kw, grid):
    R = grid[0] - 1
    f = {k: v.view(-1) for k, v in kw.items() if isinstance(v, torch.Tensor) and v.dim() < 2}
    drafts = kw["draft_tokens_ptr"]
    drafts = torch.as_strided(drafts, (max(R, 0),), (kw["draft_tokens_stride"],))
    mml, advance = kw["max_model_len"], kw["ADVANCE_DRAFT_POSITIONS"]
    for i in range(R):
        _store(f["input_ids_ptr"], i, int(drafts[i]))
        ssp = f["sample_src_positions_ptr"]
        _store(ssp, i, _inc(ssp[i], ssp.dtype))
        seq = int(f["target_seq_lens_ptr"][i]) - int(f["num_rejected_ptr"][i])
        if advance:
            pos = f["positions_ptr"]
            _store(pos, i, min(_inc(pos[i], pos.dtype), mml - 1))
            seq = min(seq + 1, mml)
        _store(f["seq_lens_ptr"], i, seq)
    if R >= 0:
        for b in range(kw["max_num_reqs"] + 1):
            _store(f["query_start_loc_ptr"], b, min(b, R))
        for b in range(R, kw["max_num_reqs"]):
            _store(f["seq_lens_ptr"], b, 0)


def ref_target_dependent_ar_update_draft_inputs_kernel(kw, grid):
    f = {k: v.view(-1) for k, v in kw.items() if isinstance(v, torch.Tensor) and v.dim() < 2}
    step = int(kw["current_draft_step_ptr"])
    mml, advance, H = kw["max_model_len"], kw["ADVANCE_DRAFT_POSITIONS"], kw["hidden_size"]
    for i in range(grid[0]):
        tok = int(f["draft_tokens_ptr"][i])
        _row(kw, "output_draft_tokens_ptr", "output_draft_tokens_stride", i)[step] = tok
        if step >= kw["num_speculative_steps"] - 1:
            continue
        ssp = f["sample_src_positions_ptr"]
        _store(ssp, i, _inc(ssp[i], ssp.dtype))
        _store(f["input_ids_ptr"], i, tok)
        dst = _row(kw, "next_input_hidden_states_ptr", "next_input_hidden_states_stride", i)
        dst[:H] = _row(kw, "hidden_states_ptr", "hidden_states_stride", i)[:H]
        if advance:
            pos, seq = f["positions_ptr"], f["seq_lens_ptr"]
            _store(pos, i, min(_inc(pos[i], pos.dtype), mml - 1))
            _store(seq, i, min(_inc(seq[i], seq.dtype), mml))


REFERENCES = {
    "standalone_ar_prepare_prefill_inputs_kernel": ref_standalone_ar_prepare_prefill_inputs_kernel,
    "ngram_scan_kernel": ref_ngram_scan_kernel,
    "ngram_finalize_kernel": ref_ngram_finalize_kernel,
    "target_dependent_ar_prepare_prefill_inputs_kernel": (
        ref_target_dependent_ar_prepare_prefill_inputs_kernel
    ),
    "target_dependent_ar_prepare_decode_inputs_kernel": (
        ref_target_dependent_ar_prepare_decode_inputs_kernel
    ),
    "target_dependent_ar_update_draft_inputs_kernel": (
        ref_target_dependent_ar_update_draft_inputs_kernel
    ),
}
KERNELS = sorted(REFERENCES)


def _run_both(name, seed, idx):
    case = mrv2.make_case(name, seed, idx)
    grid = tuple(case.grid) + (1,) * (3 - len(case.grid))
    ours_kw, ours = case.build()
    ref_kw, ref = case.build()
    getattr(kernels_cpu, name)(**ours_kw, grid=grid)
    REFERENCES[name](ref_kw, grid)
    for buf in ref:
        assert torch.equal(ours[buf], ref[buf]), f"{case}: {buf}\n{ours[buf]}\n{ref[buf]}"
    assert not guard_violations(case, ours), case
    return case


def test_every_drafts_kernel_has_a_reference():
    assert set(KERNELS) == set(mrv2.drafts.CASES)


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("name", KERNELS)
@fuzz_settings(60, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_matches_the_reference(name, idx, seed):
    _run_both(name, seed, idx)


@pytest.mark.parametrize("name", KERNELS)
def test_launched_through_the_grid_launcher(name):
    """``GridLauncher`` hands the kernel Triton's grid; without a grid the launch is refused."""
    case = mrv2.make_case(name, 7, torch.int64)
    kw, got = case.build()
    ref_kw, want = case.build()
    launcher = kernels_cpu.GridLauncher(getattr(kernels_cpu, name))
    launcher[case.grid](**kw, num_warps=4)
    REFERENCES[name](ref_kw, tuple(case.grid) + (1,) * (3 - len(case.grid)))
    for buf in want:
        assert torch.equal(got[buf], want[buf]), buf
    with pytest.raises(TypeError, match="grid"):
        launcher(**kw)


# -- refusals ---------------------------------------------------------------------------------


def _refused(name, case, exc, match, **changes):
    """The launch with ``changes`` raises ``exc`` matching ``match``; no buffer changed."""
    kw, bufs = case.build()
    grid = changes.pop("grid", tuple(case.grid) + (1,) * (3 - len(case.grid)))
    kw.update(changes)
    before = {k: v.clone() for k, v in bufs.items()}
    with pytest.raises(exc, match=match):
        getattr(kernels_cpu, name)(**kw, grid=grid)
    for k, v in bufs.items():
        assert torch.equal(v, before[k]), f"{k} written by a refused launch"


def _case_with(name, pred, idx=torch.int64):
    for seed in range(500):
        case = mrv2.make_case(name, seed, idx)
        if pred(case):
            return case
    raise AssertionError(f"no case of {name} fits")


SAR = "standalone_ar_prepare_prefill_inputs_kernel"


def test_standalone_refusals():
    case = _case_with(SAR, lambda c: c.grid[0] >= 2)
    args = case.args
    R = case.grid[0]
    qsl = args["query_start_loc_ptr"].clone()
    qsl[1] = int(qsl[2]) + 1
    _refused(
        SAR,
        case,
        ValueError,
        "query_start_loc_ptr: expected non-decreasing",
        query_start_loc_ptr=qsl,
    )
    bad = args["idx_mapping_ptr"].clone()
    bad[1] = args["last_sampled_ptr"].numel()
    _refused(SAR, case, IndexError, r"idx_mapping_ptr\[1\]", idx_mapping_ptr=bad)
    bad[1] = -1
    _refused(SAR, case, IndexError, r"idx_mapping_ptr\[1\]", idx_mapping_ptr=bad)
    _refused(
        SAR,
        case,
        ValueError,
        "out_input_ids_ptr: expected at least",
        out_input_ids_ptr=torch.zeros(
            int(args["query_start_loc_ptr"][R]) + R - 1, dtype=torch.int64
        ),
    )
    _refused(
        SAR,
        case,
        ValueError,
        "out_query_start_loc_ptr: expected at least",
        out_query_start_loc_ptr=torch.zeros(args["max_num_reqs"], dtype=torch.int64),
    )
    _refused(
        SAR,
        case,
        ValueError,
        "seq_lens_ptr: expected at least",
        seq_lens_ptr=torch.zeros(R - 1, dtype=torch.int64),
    )
    _refused(
        SAR,
        case,
        TypeError,
        "idx_mapping_ptr: expected dtype",
        idx_mapping_ptr=args["idx_mapping_ptr"].float(),
    )
    _refused(SAR, case, TypeError, "max_model_len: expected an int", max_model_len=8.0)
    ids = args["target_input_ids_ptr"][: int(args["query_start_loc_ptr"][R - 1])]
    _refused(SAR, case, ValueError, "target_input_ids_ptr: expected", target_input_ids_ptr=ids)
    pos = args["target_positions_ptr"][: int(args["query_start_loc_ptr"][R - 1])]
    _refused(
        SAR, case, ValueError, "target_positions_ptr: expected at least", target_positions_ptr=pos
    )
    _refused(SAR, case, ValueError, "`grid`", grid=(-1,))


def test_standalone_empty_grid_writes_nothing():
    case = _case_with(SAR, lambda c: c.grid[0] >= 1)
    kw, bufs = case.build()
    before = {k: v.clone() for k, v in bufs.items()}
    kernels_cpu.standalone_ar_prepare_prefill_inputs_kernel(**kw, grid=(0, 1, 1))
    for k, v in bufs.items():
        assert torch.equal(v, before[k]), k


def test_standalone_mixed_index_dtypes():
    """Each index buffer is read and written in its own width."""
    rng = random.Random(3)
    case = _case_with(SAR, lambda c: c.grid[0] >= 2)
    grid = tuple(case.grid) + (1,) * (3 - len(case.grid))
    kw, ours = case.build()
    ref_kw, ref = case.build()
    for k in ("target_positions_ptr", "idx_mapping_ptr", "num_rejected_ptr"):
        if rng.random() < 0.9:
            kw[k], ref_kw[k] = kw[k].int(), ref_kw[k].int()
    kernels_cpu.standalone_ar_prepare_prefill_inputs_kernel(**kw, grid=grid)
    ref_standalone_ar_prepare_prefill_inputs_kernel(ref_kw, grid)
    for buf in ref:
        assert torch.equal(ours[buf], ref[buf]), buf


SCAN, FIN = "ngram_scan_kernel", "ngram_finalize_kernel"


def _searched(case):
    """A scan case where some request is searched (something sampled, long enough)."""
    a = case.args
    if case.grid[0] < 1:
        return False
    rs = int(a["idx_mapping_ptr"][0])
    seq = int(a["total_len_ptr"][rs])
    return int(a["num_sampled_ptr"][0]) > 0 and seq >= a["MIN_N"] + 1


def test_ngram_scan_refusals():
    case = _case_with(SCAN, _searched)
    a = case.args
    B, NB = case.grid
    tl = a["total_len_ptr"].clone()
    tl[int(a["idx_mapping_ptr"][0])] = 10**6
    _refused(SCAN, case, ValueError, r"total_len_ptr\[\d+\]: expected at most", total_len_ptr=tl)
    idx = a["idx_mapping_ptr"].clone()
    idx[0] = a["total_len_ptr"].numel()
    _refused(SCAN, case, IndexError, r"idx_mapping_ptr\[0\]", idx_mapping_ptr=idx)
    _refused(SCAN, case, ValueError, "MAX_N_PO2: expected >=", MAX_N_PO2=a["MAX_N"] - 1 or 0)
    _refused(SCAN, case, ValueError, "BLOCK_L: expected >= 1", BLOCK_L=0)
    _refused(SCAN, case, ValueError, "scratch_ptr: expected rows of at least", grid=(B, NB + 100))
    short = torch.zeros(B - 1, NB, dtype=torch.int64)
    _refused(
        SCAN,
        case,
        ValueError,
        "scratch_ptr: expected at least",
        scratch_ptr=short,
        scratch_stride=max(NB, 1),
    )
    _refused(SCAN, case, ValueError, "token_ids_stride: expected", token_ids_stride=-1)


def test_ngram_finalize_refusals():
    case = _case_with(FIN, lambda c: c.grid[0] >= 1)
    a = case.args
    B = case.grid[0]
    _refused(
        FIN,
        case,
        ValueError,
        "drafts_ptr: expected at least",
        drafts_ptr=torch.zeros(B * a["K"] - 1, dtype=torch.int64),
    )
    _refused(FIN, case, ValueError, "K_PO2: expected >=", K_PO2=a["K"] + 1, K=a["K"] + 2)
    _refused(
        FIN,
        case,
        ValueError,
        "N_BLOCKS_PO2: expected >=",
        N_BLOCKS_PO2=a["N_BLOCKS"] - 1 if a["N_BLOCKS"] > 1 else 0,
    )
    last = a["last_sampled_ptr"].view(-1)[: int(a["idx_mapping_ptr"].max())]
    _refused(FIN, case, IndexError, "last_sampled_ptr", last_sampled_ptr=last)
    _refused(FIN, case, ValueError, "L: expected >= 0", L=-1)
    _refused(
        FIN,
        case,
        TypeError,
        "scratch_ptr: expected dtype",
        scratch_ptr=torch.zeros(B, a["N_BLOCKS"]),
    )


def test_ngram_finalize_gathers_past_the_row_refused():
    """A score whose draft start lies beyond a short token row: refused naming the table."""
    case = _case_with(FIN, lambda c: c.grid[0] >= 1 and c.args["N_BLOCKS"] >= 1)
    a = dict(case.args)
    kw, bufs = case.build()
    L = a["L"]
    rs = int(a["idx_mapping_ptr"][0])
    tl = kw["total_len_ptr"].clone()
    tl[rs] = L
    scratch = torch.zeros(case.grid[0], a["N_BLOCKS"], dtype=torch.int64)
    scratch[0, 0] = 1 * (L + 1) + (L - 3) + 1  # n = 1 at pos L - 3: gathers L - 2, L - 1
    ns = torch.ones(case.grid[0], dtype=torch.int64)
    tokens = kw["token_ids_ptr"][:, : L - 2]
    with pytest.raises(IndexError, match="token_ids_ptr: expected a token row holding"):
        kernels_cpu.ngram_finalize_kernel(
            **{
                **kw,
                "token_ids_ptr": tokens,
                "total_len_ptr": tl,
                "scratch_ptr": scratch,
                "scratch_stride": scratch.stride(0),
                "num_sampled_ptr": ns,
            },
            grid=(case.grid[0], 1, 1),
        )


def test_ngram_scan_matches_across_a_block_boundary_and_int32_cast():
    """A hand-made row: the longest match wins per position, the best block score is kept,
    and tokens equal only as int32 match (the kernel compares ``.to(tl.int32)`` values)."""
    L, BL = 16, 4
    # the sequence (12 tokens) ends with 1, 2, 3: matches of n = 3 at pos 1 and 5 (n = 2 at
    # pos 2 and 6 score less); pos 9 is the suffix itself, past the last candidate
    tokens = torch.tensor([[7, 1, 2, 3, 9, 1, 2, 3, 5, 1, 2, 3, 0, 0, 0, 0]], dtype=torch.int64)
    scratch = torch.full((1, 4), -1, dtype=torch.int64)
    args = (tokens, L, torch.tensor([0]), torch.tensor([12]), torch.tensor([1]), scratch, 4, L)
    kernels_cpu.ngram_scan_kernel(*args, 2, 3, 4, BL, grid=(1, 4))
    assert scratch.tolist() == [[3 * 17 + 1 + 1, 3 * 17 + 5 + 1, 0, 0]]
    # a last token equal to 3 only as int32: the same matches
    tokens[0, 11] = 2**32 + 3
    scratch.fill_(-1)
    kernels_cpu.ngram_scan_kernel(*args, 2, 3, 4, BL, grid=(1, 4))
    assert scratch.tolist() == [[3 * 17 + 1 + 1, 3 * 17 + 5 + 1, 0, 0]]


TPF = "target_dependent_ar_prepare_prefill_inputs_kernel"
TDC = "target_dependent_ar_prepare_decode_inputs_kernel"
TUD = "target_dependent_ar_update_draft_inputs_kernel"


def test_target_dependent_prefill_refusals():
    case = _case_with(TPF, lambda c: c.grid[0] >= 2)
    a = case.args
    R = case.grid[0]
    qsl = a["query_start_loc_ptr"]
    rej = a["num_rejected_ptr"].clone()
    rej[1] = int(qsl[2]) - int(qsl[1])  # no token kept: the last-token write leaves the request
    _refused(TPF, case, ValueError, r"num_rejected_ptr\[1\]: expected", num_rejected_ptr=rej)
    rej[1] = -1
    _refused(TPF, case, ValueError, r"num_rejected_ptr\[1\]: expected", num_rejected_ptr=rej)
    bad = qsl.clone()
    bad[1] = int(qsl[2]) + 1
    _refused(
        TPF,
        case,
        ValueError,
        "query_start_loc_ptr: expected non-decreasing",
        query_start_loc_ptr=bad,
    )
    idx = a["idx_mapping_ptr"].clone()
    idx[0] = 10**6
    name = "last_sampled_ptr" if int(a["num_sampled_ptr"][0]) > 0 else "next_prefill_tokens_ptr"
    _refused(
        TPF, case, IndexError, f"idx_mapping_ptr\\[0\\]: expected .*{name}", idx_mapping_ptr=idx
    )
    end = int(qsl[R]) - int(a["num_rejected_ptr"][R - 1])
    _refused(
        TPF,
        case,
        ValueError,
        "draft_positions_ptr: expected at least",
        draft_positions_ptr=torch.zeros(end - 1, dtype=torch.int64),
    )
    _refused(
        TPF,
        case,
        ValueError,
        "draft_current_step_ptr: expected at least 1",
        draft_current_step_ptr=torch.zeros(0, dtype=torch.int64),
    )
    _refused(
        TPF,
        case,
        ValueError,
        "draft_query_start_loc_ptr: expected at least",
        draft_query_start_loc_ptr=torch.zeros(a["max_num_reqs"], dtype=torch.int64),
    )


def test_target_dependent_decode_reads_a_column_view():
    """vLLM passes ``draft_tokens[:num_reqs, 0]``: a 1-D view whose elements are a row apart."""
    case = _case_with(TDC, lambda c: c.grid[0] >= 3)
    kw, ours = case.build()
    ref_kw, ref = case.build()
    K = kw["draft_tokens_stride"]
    R = case.grid[0] - 1
    table = kw["draft_tokens_ptr"].as_strided((R, K), (K, 1))
    kw["draft_tokens_ptr"] = table[:, 0]
    assert not kw["draft_tokens_ptr"].is_contiguous()
    kernels_cpu.target_dependent_ar_prepare_decode_inputs_kernel(**kw, grid=(R + 1, 1, 1))
    ref_target_dependent_ar_prepare_decode_inputs_kernel(ref_kw, (R + 1, 1, 1))
    for buf in ref:
        assert torch.equal(ours[buf], ref[buf]), buf
    _refused(
        TDC,
        case,
        ValueError,
        "draft_tokens_stride: expected draft_tokens_ptr.stride",
        draft_tokens_ptr=table[:, 0],
        draft_tokens_stride=K + 1,
    )


def test_target_dependent_decode_refusals():
    case = _case_with(TDC, lambda c: c.grid[0] >= 3)
    a = case.args
    R = case.grid[0] - 1
    _refused(
        TDC,
        case,
        ValueError,
        "input_ids_ptr: expected at least",
        input_ids_ptr=torch.zeros(R - 1, dtype=torch.int64),
    )
    _refused(
        TDC,
        case,
        ValueError,
        "query_start_loc_ptr: expected at least",
        query_start_loc_ptr=torch.zeros(a["max_num_reqs"], dtype=torch.int64),
    )
    _refused(
        TDC, case, ValueError, "ADVANCE_DRAFT_POSITIONS: expected a bool", ADVANCE_DRAFT_POSITIONS=2
    )
    _refused(
        TDC,
        case,
        ValueError,
        "draft_tokens_ptr: expected at least",
        draft_tokens_ptr=torch.zeros(R - 1, 1, dtype=torch.int64),
        draft_tokens_stride=1,
    )


def test_target_dependent_update_refusals():
    case = _case_with(
        TUD,
        lambda c: (
            c.grid[0] >= 2
            and int(c.args["current_draft_step_ptr"]) < c.args["num_speculative_steps"] - 1
        ),
    )
    a = case.args
    R = case.grid[0]
    steps = a["num_speculative_steps"]
    _refused(
        TUD,
        case,
        IndexError,
        "current_draft_step_ptr: expected a step in",
        current_draft_step_ptr=torch.tensor(steps, dtype=torch.int64),
    )
    _refused(
        TUD,
        case,
        IndexError,
        "current_draft_step_ptr: expected a step in",
        current_draft_step_ptr=torch.tensor(-1, dtype=torch.int64),
    )
    H = a["hidden_size"]
    _refused(
        TUD,
        case,
        ValueError,
        "hidden_states_ptr: expected at least",
        hidden_states_ptr=torch.zeros(R - 1, H),
        hidden_states_stride=H,
    )
    _refused(
        TUD,
        case,
        ValueError,
        "next_input_hidden_states_ptr: expected rows of at least",
        next_input_hidden_states_ptr=torch.zeros(R, H - 1 if H > 1 else 0),
        next_input_hidden_states_stride=max(H - 1, 1),
    )
    _refused(
        TUD,
        case,
        TypeError,
        "hidden_states_ptr: expected dtype",
        hidden_states_ptr=torch.zeros(R, H, dtype=torch.int32),
        hidden_states_stride=H,
    )
    flat = torch.zeros(R * H, dtype=torch.float32)
    if H > 1:
        _refused(
            TUD,
            case,
            ValueError,
            "next_input_hidden_states_stride: expected >=",
            next_input_hidden_states_ptr=flat,
            next_input_hidden_states_stride=H - 1,
        )
    _refused(
        TUD,
        case,
        ValueError,
        "seq_lens_ptr: expected at least",
        seq_lens_ptr=torch.zeros(R - 1, dtype=torch.int64),
        ADVANCE_DRAFT_POSITIONS=True,
    )


def test_target_dependent_update_last_step_writes_only_the_output():
    case = _case_with(
        TUD,
        lambda c: (
            c.grid[0] >= 1
            and int(c.args["current_draft_step_ptr"]) == c.args["num_speculative_steps"] - 1
        ),
    )
    kw, bufs = case.build()
    before = {k: v.clone() for k, v in bufs.items()}
    kernels_cpu.target_dependent_ar_update_draft_inputs_kernel(**kw, grid=(case.grid[0], 1, 1))
    changed = {k for k in bufs if not torch.equal(bufs[k], before[k])}
    assert changed == {"output_draft_tokens_ptr"}


def test_target_dependent_update_rounds_a_converted_row_to_nearest_even():
    """float32 hidden states into a bfloat16 input row round as the compiled kernel's store
    does (to nearest even, torch's conversion) -- not as Triton's interpreter, which truncates
    this one conversion, so the parity cases leave it out."""
    R, H = 3, 64
    src = torch.randn(R, H, generator=torch.Generator().manual_seed(5))
    src[0, :4] = torch.tensor([1.00390625, 1.01171875, -1.00390625, 3.0e38])  # ties, overflow
    dst = torch.zeros(R, H, dtype=torch.bfloat16)
    out = torch.zeros(R, 2, dtype=torch.int64)
    ints = [torch.zeros(R, dtype=torch.int64) for _ in range(4)]
    kernels_cpu.target_dependent_ar_update_draft_inputs_kernel(
        out, 2, dst, H, *ints, torch.arange(R), torch.tensor(0), src, H, H, 100, 2, grid=(R,)
    )
    assert torch.equal(dst, src.to(torch.bfloat16))
    truncated = (src.view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
    assert not torch.equal(dst, truncated)


def test_the_max_model_len_ptr_form_reads_the_cap_from_a_tensor():
    """vLLM 0.34's signature: the same kernel, with the cap in a one-element tensor (read only
    where a position advances: a last step or ADVANCE_DRAFT_POSITIONS=False needs none)."""
    for seed in range(40):
        case = mrv2.make_case(TUD, seed, torch.int64)
        grid = tuple(case.grid) + (1,) * (3 - len(case.grid))
        kw, ours = case.build()
        ref_kw, ref = case.build()
        kw["max_model_len_ptr"] = torch.tensor([kw.pop("max_model_len")], dtype=torch.int32)
        kernels_cpu.target_dependent_ar_update_draft_inputs_mml_ptr_kernel(**kw, grid=grid)
        ref_target_dependent_ar_update_draft_inputs_kernel(ref_kw, grid)
        for buf in ref:
            assert torch.equal(ours[buf], ref[buf]), (case, buf)
    case = _case_with(
        TUD,
        lambda c: (
            c.grid[0] >= 1
            and c.args["ADVANCE_DRAFT_POSITIONS"]
            and int(c.args["current_draft_step_ptr"]) < c.args["num_speculative_steps"] - 1
        ),
    )
    kw, bufs = case.build()
    del kw["max_model_len"]
    before = {k: v.clone() for k, v in bufs.items()}
    with pytest.raises(ValueError, match="max_model_len_ptr: expected at least 1"):
        kernels_cpu.target_dependent_ar_update_draft_inputs_mml_ptr_kernel(
            **kw, max_model_len_ptr=torch.zeros(0, dtype=torch.int32), grid=(case.grid[0],)
        )
    for k, v in bufs.items():
        assert torch.equal(v, before[k]), k
    assert (
        kernels_cpu.impl_for(
            TUD,
            [a.name for a in contracts.contract(TUD).args][:13]
            + ["max_model_len_ptr"]
            + [a.name for a in contracts.contract(TUD).args][14:],
        )
        is kernels_cpu.target_dependent_ar_update_draft_inputs_mml_ptr_kernel
    )


@pytest.mark.parametrize("name", KERNELS)
def test_an_openmp_team_gives_the_serial_result(name):
    """Every launch on a team of 4 (parallel threshold 0): requests, and the ngram scan's
    (request, block) programs, are independent, so any schedule gives the reference's result."""
    with threads(4):
        for seed in range(12):
            _run_both(name, seed, IDX[seed % 2])


def test_ngram_scan_of_a_long_row_on_a_team():
    """One request of a few thousand tokens split into many blocks across threads."""
    g = torch.Generator().manual_seed(11)
    L, BL = 3000, 128
    tokens = torch.randint(0, 4, (2, L), generator=g, dtype=torch.int32)
    NB = -(-L // BL)
    kw = dict(
        token_ids_ptr=tokens,
        token_ids_stride=L,
        idx_mapping_ptr=torch.tensor([1, 0]),
        total_len_ptr=torch.tensor([L - 7, L], dtype=torch.int32),
        num_sampled_ptr=torch.tensor([1, 2], dtype=torch.int32),
        scratch_ptr=torch.full((2, NB), -1, dtype=torch.int64),
        scratch_stride=NB,
        L=L,
        MIN_N=2,
        MAX_N=5,
        MAX_N_PO2=8,
        BLOCK_L=BL,
    )
    ref_kw = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    with threads(4):
        kernels_cpu.ngram_scan_kernel(**kw, grid=(2, NB))
    ref_ngram_scan_kernel(ref_kw, (2, NB, 1))
    assert torch.equal(kw["scratch_ptr"], ref_kw["scratch_ptr"])
    assert (kw["scratch_ptr"] > 0).any()
