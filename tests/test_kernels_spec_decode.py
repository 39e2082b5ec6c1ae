"""kernels_cpu speculative-decoding kernels vs their plain-torch references.

Random valid launches (hypothesis) over sizes and edge cases -- 0 and 1 requests, cudagraph
padding rows, max_model_len clamps, parallel-drafting slots, shift_input_ids on/off,
HAS_NUM_REJECTED on/off, row-strided tables -- with int32 and int64 buffers drawn independently
per argument, outputs poisoned and surrounded by guard regions. Then every class of bad input:
it must raise the named exception and write nothing. Then thread-count invariance.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu as K
from fdkit.guards import POISON_INT
from fdkit.reference import spec_decode as R
from tests._fuzz import fuzz_settings
from tests._spec_helpers import (
    INDEX_DTYPES,
    Guarded,
    assert_same_buffers,
    bad_arg,
    bad_at,
    check_bad_input,
    launch_args,
    run_both,
    set_arg,
    threads,
)

dts = st.sampled_from(INDEX_DTYPES)
SETTINGS = fuzz_settings(120, deadline=None)


def ints(draw, n, lo, hi):
    return draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))


def cumsum(first, lens):
    out = [first]
    for n in lens:
        out.append(out[-1] + n)
    return out


def positions_arg(draw, pos):
    """``[N]`` positions, or ``[3, N]`` M-RoPE positions whose row 0 holds them."""
    if draw(st.booleans()):
        return Guarded((len(pos),), draw(dts), pos)
    rows = pos + [p + 1000 for p in pos] + [p + 2000 for p in pos]
    return Guarded((3, len(pos)), draw(dts), rows)


# ------------------------------------------------------------------------------------------
# case strategies (dicts in the kernels' argument order, so positional launches bind too)
# ------------------------------------------------------------------------------------------


@st.composite
def eagle_step_cases(draw, max_b=6):
    b = draw(st.integers(0, max_b))
    padding = draw(st.integers(0, 3))
    bs = draw(st.sampled_from([1, 2, 3, 4, 16]))
    mml = draw(st.integers(1, 64))
    cols = draw(st.integers(1, 8))
    extra = draw(st.sampled_from([0, 0, 3]))
    rows = b + draw(st.integers(0, 2))
    return dict(
        positions_ptr=Guarded((b,), draw(dts), ints(draw, b, -1, mml + 3)),
        block_table_ptr=Guarded(
            (rows, cols), draw(dts), ints(draw, rows * cols, 0, 500), extra_cols=extra
        ),
        block_table_stride=cols + extra,
        seq_lens_ptr=Guarded((b,), draw(dts), ints(draw, b, 0, 100)),
        out_clamped_positions_ptr=Guarded((b,), draw(dts)),
        out_slot_mapping_ptr=Guarded((b + padding,), draw(dts)),
        block_size=bs,
        max_model_len=mml,
        n_blocks_per_req=draw(st.integers(1, cols)),
        PAD_ID=draw(st.sampled_from([-1, -1, 0, 12345])),
        batch_size=b,
    )


@st.composite
def prepare_inputs_cases(draw, max_n=8):
    n = draw(st.integers(0, max_n))
    slack = draw(st.integers(0, 2))
    drafts = ints(draw, n, 0, 4)
    valid = [draw(st.integers(0, d + 1)) for d in drafts]
    qlens = [d + 1 + draw(st.integers(0, 3)) for d in drafts]
    return dict(
        cu_num_draft_tokens_ptr=Guarded(
            (n + slack,), draw(dts), cumsum(0, drafts)[1:] + [0] * slack
        ),
        valid_sampled_tokens_count_ptr=Guarded((n,), draw(dts), valid),
        query_start_loc_gpu_ptr=Guarded(
            (n + 1,), draw(dts), cumsum(draw(st.integers(0, 3)), qlens)
        ),
        token_indices_to_sample_ptr=Guarded((n + slack,), draw(dts)),
        num_rejected_tokens_gpu_ptr=Guarded((n,), draw(dts)),
        num_reqs=n,
    )


@st.composite
def next_token_cases(draw, max_n=8, max_w=6):
    n = draw(st.integers(0, max_n))
    w = draw(st.integers(0, max_w))
    cols = w + draw(st.integers(0, 2))
    extra = draw(st.sampled_from([0, 0, 2]))
    vocab = draw(st.integers(1, 50))
    toks = [draw(st.one_of(st.just(-1), st.integers(-3, vocab + 2))) for _ in range(n * cols)]
    return dict(
        sampled_token_ids_ptr=Guarded((n, cols), draw(dts), toks, extra_cols=extra),
        discard_request_mask_ptr=Guarded(
            (n,), torch.bool, draw(st.lists(st.booleans(), min_size=n, max_size=n)), poison=False
        ),
        backup_next_token_ids_ptr=Guarded((n,), draw(dts), ints(draw, n, 0, vocab - 1)),
        next_token_ids_ptr=Guarded((n,), draw(dts)),
        valid_sampled_tokens_count_ptr=Guarded((n,), draw(dts)),
        vocab_size=vocab,
        num_sampled_tokens_per_req=w,
        num_reqs=n,
        stride_sampled_token_ids=cols + extra,
        BLOCK_SIZE_TOKENS=draw(st.sampled_from([None, 1 << max(w - 1, 0).bit_length()])),
    )


@st.composite
def eagle_copy_cases(draw, max_r=5, max_len=6):
    r_n = draw(st.integers(0, max_r))
    shift = draw(st.booleans())
    p = draw(st.integers(1 if shift else 0, 4))
    lens = ints(draw, r_n, 0, max_len)
    rej = [draw(st.integers(0, max(n - 1, 0))) for n in lens]
    qsl = cumsum(draw(st.integers(0, 2)), lens)
    qel = [qsl[i] + lens[i] - 1 - rej[i] for i in range(r_n)]
    extra = draw(st.integers(0, 2))
    if r_n and lens[-1] == 0:
        extra = max(extra, 1)  # a trailing empty request still needs a start position
    t = qsl[-1] + extra
    n_out = qsl[-1] + r_n * (p - 1 if shift else p) + draw(st.integers(0, 3))
    slack = draw(st.integers(0, 2))
    hidden_map = Guarded((t + slack,), draw(dts))
    if not shift and draw(st.booleans()):
        hidden_map = None
    return dict(
        target_token_ids_ptr=Guarded((t,), draw(dts), ints(draw, t, 0, 999)),
        target_positions_ptr=positions_arg(draw, ints(draw, t, 0, 100)),
        next_token_ids_ptr=Guarded((r_n,), draw(dts), ints(draw, r_n, 0, 999)),
        out_input_ids_ptr=Guarded((n_out,), draw(dts)),
        out_positions_ptr=Guarded((n_out,), draw(dts)),
        out_is_rejected_token_mask_ptr=Guarded((n_out,), torch.bool),
        out_is_masked_token_mask_ptr=Guarded((n_out,), torch.bool),
        out_new_token_indices_ptr=Guarded((r_n * p + slack,), draw(dts)),
        out_hidden_state_mapping_ptr=hidden_map,
        query_start_loc_ptr=Guarded((r_n + 1,), draw(dts), qsl),
        query_end_loc_ptr=Guarded((r_n,), draw(dts), qel),
        padding_token_id=draw(st.sampled_from([0, 7])),
        parallel_drafting_token_id=draw(st.sampled_from([5, 1000])),
        total_input_tokens=t,
        num_padding_slots_per_request=p,
        shift_input_ids=shift,
        BLOCK_SIZE_TOKENS=draw(st.sampled_from([None, 16])),
    )


@st.composite
def dflash_cases(draw, max_r=5, max_len=6):
    r_n = draw(st.integers(0, max_r))
    has_rej = draw(st.booleans())
    s = draw(st.integers(0, 4))
    q = draw(st.integers(0, s + 1))
    bs = draw(st.sampled_from([1, 2, 3, 4, 8]))
    lens = ints(draw, r_n, 1, max_len)
    rej = [draw(st.integers(0, n - 1)) if has_rej else 0 for n in lens]
    qsl = cumsum(draw(st.integers(0, 2)), lens)
    t = qsl[-1] + draw(st.integers(0, 2))
    pos = ints(draw, t, 0, 40)
    strided = draw(st.booleans())
    if strided:  # the clamp to stride - 1 would leave the columns: size them to the data
        need = 1
        for i in range(r_n):
            last = pos[qsl[i + 1] - rej[i] - 1] + q
            need = max(
                [need, last // bs + 1] + [pos[j] // bs + 1 for j in range(qsl[i], qsl[i + 1])]
            )
        cols, extra = need, draw(st.integers(1, 3))
    else:  # contiguous: the kernel's clamp keeps any position inside the row
        cols, extra = draw(st.integers(1, 8)), 0
    rows = r_n + draw(st.integers(0, 2))
    if has_rej:
        num_rej = Guarded((r_n,), draw(dts), rej)
    else:
        num_rej = draw(st.sampled_from([0, None, "tensor"]))
        if num_rej == "tensor":
            num_rej = Guarded((r_n,), draw(dts), ints(draw, r_n, 0, 100))
    ctx_n = t + draw(st.integers(0, 2))
    q_n = r_n * q + draw(st.integers(0, 2))
    return dict(
        next_token_ids_ptr=Guarded((r_n,), draw(dts), ints(draw, r_n, 0, 999)),
        target_positions_ptr=positions_arg(draw, pos),
        out_input_ids_ptr=Guarded((q_n,), draw(dts)),
        out_context_positions_ptr=Guarded((ctx_n,), draw(dts)),
        out_query_positions_ptr=Guarded((q_n,), draw(dts)),
        out_context_slot_mapping_ptr=Guarded((ctx_n,), draw(dts)),
        out_query_slot_mapping_ptr=Guarded((q_n,), draw(dts)),
        out_token_indices_ptr=Guarded((r_n * s + draw(st.integers(0, 2)),), draw(dts)),
        block_table_ptr=Guarded(
            (rows, cols), draw(dts), ints(draw, rows * cols, 0, 300), extra_cols=extra
        ),
        block_table_stride=cols + extra,
        query_start_loc_ptr=Guarded((r_n + 1,), draw(dts), qsl),
        num_rejected_tokens_ptr=num_rej,
        parallel_drafting_token_id=draw(st.sampled_from([3, 4242])),
        block_size=bs,
        num_query_per_req=q,
        num_speculative_tokens=s,
        total_input_tokens=t,
        BLOCK_SIZE=draw(st.sampled_from([None, 8])),
        HAS_NUM_REJECTED=has_rej,
    )


KERNELS = {
    "eagle_step": (
        K.eagle_step_slot_mapping_metadata_kernel,
        R.eagle_step_slot_mapping_metadata_kernel,
        eagle_step_cases,
    ),
    "prepare_inputs": (
        K.eagle_prepare_inputs_padded_kernel,
        R.eagle_prepare_inputs_padded_kernel,
        prepare_inputs_cases,
    ),
    "next_token": (
        K.eagle_prepare_next_token_padded_kernel,
        R.eagle_prepare_next_token_padded_kernel,
        next_token_cases,
    ),
    "eagle_copy": (
        K.copy_and_expand_eagle_inputs_kernel,
        R.copy_and_expand_eagle_inputs_kernel,
        eagle_copy_cases,
    ),
    "dflash": (
        K.copy_and_expand_dflash_inputs_kernel,
        R.copy_and_expand_dflash_inputs_kernel,
        dflash_cases,
    ),
}


# ------------------------------------------------------------------------------------------
# differential tests
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", list(KERNELS))
@SETTINGS
@given(data=st.data(), positional=st.booleans())
def test_matches_reference(which, data, positional):
    kernel, reference, cases = KERNELS[which]
    case = data.draw(cases())
    mine, ref = run_both(kernel, reference, case, positional=positional)
    assert_same_buffers(mine, ref)


@pytest.mark.parametrize("which", list(KERNELS))
@fuzz_settings(25, deep_examples=1000, deadline=None)  # large cases, launched twice
@given(data=st.data())
def test_thread_count_invariance(which, data):
    """1 and 2 threads (with every launch forced parallel) give the same bytes."""
    kernel, reference, cases = KERNELS[which]
    sizes = {
        "eagle_step": dict(max_b=40),
        "prepare_inputs": dict(max_n=40),
        "next_token": dict(max_n=40),
        "eagle_copy": dict(max_r=24, max_len=40),
        "dflash": dict(max_r=24, max_len=40),
    }[which]
    case = data.draw(cases(**sizes))
    with threads(1):
        one, ref = run_both(kernel, reference, case)
    with threads(2):
        two, _ = run_both(kernel, reference, case)
    assert_same_buffers(one, ref)
    assert_same_buffers(two, ref)


def test_eagle_step_clamps_and_pads():
    """A hand-checked launch: clamp at max_model_len, padding rows, seq_len capped."""
    table = [10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33]
    case = step_case(positions=[0, 5, 14], table=table, seq_lens=[1, 6, 15], slots=5)
    K.eagle_step_slot_mapping_metadata_kernel(**launch_args(case))
    assert case["out_clamped_positions_ptr"].view.tolist() == [1, 6, 0]
    assert case["out_slot_mapping_ptr"].view.tolist() == [10 * 4 + 1, 21 * 4 + 2, -1, -1, -1]
    assert case["seq_lens_ptr"].view.tolist() == [2, 7, 1]


def test_eagle_copy_hand_checked():
    """Two requests, 1 rejected token in the second, 2 padding slots, no shift."""
    case = copy_case(shift=False)
    K.copy_and_expand_eagle_inputs_kernel(**launch_args(case))
    v = {k: g.view.tolist() for k, g in case.items() if isinstance(g, Guarded)}
    assert v["out_input_ids_ptr"] == [11, 12, 99, -5, 21, 22, 98, -5, 0]
    assert v["out_positions_ptr"] == [7, 8, 9, 10, 3, 4, 5, 6, 0]
    assert v["out_is_rejected_token_mask_ptr"] == [False] * 8 + [True]
    assert v["out_is_masked_token_mask_ptr"] == [False, False, False, True] * 2 + [False]
    assert v["out_new_token_indices_ptr"] == [2, 3, 6, 7]
    assert v["out_hidden_state_mapping_ptr"] == [POISON_INT] * 5  # untouched without shift


# ------------------------------------------------------------------------------------------
# bad input: named exception, nothing written
# ------------------------------------------------------------------------------------------


def step_case(positions=(0, 5, 9), table=range(12), seq_lens=(1, 6, 10), slots=4):
    """Three requests of a 3 x 4 block table (block size 4, max_model_len 15), ``slots``
    slot-mapping entries (past the third: padding)."""
    return dict(
        positions_ptr=Guarded((3,), torch.int64, list(positions)),
        block_table_ptr=Guarded((3, 4), torch.int32, list(table)),
        block_table_stride=4,
        seq_lens_ptr=Guarded((3,), torch.int32, list(seq_lens)),
        out_clamped_positions_ptr=Guarded((3,), torch.int64),
        out_slot_mapping_ptr=Guarded((slots,), torch.int64),
        block_size=4,
        max_model_len=15,
        n_blocks_per_req=4,
        PAD_ID=-1,
        batch_size=3,
    )


def prep_case():
    return dict(
        cu_num_draft_tokens_ptr=Guarded((3,), torch.int32, [2, 2, 5]),
        valid_sampled_tokens_count_ptr=Guarded((3,), torch.int32, [1, 1, 4]),
        query_start_loc_gpu_ptr=Guarded((4,), torch.int32, [0, 3, 4, 8]),
        token_indices_to_sample_ptr=Guarded((3,), torch.int32),
        num_rejected_tokens_gpu_ptr=Guarded((3,), torch.int32),
        num_reqs=3,
    )


def next_case():
    return dict(
        sampled_token_ids_ptr=Guarded((3, 4), torch.int32, [1, 2, -1, -1] * 3),
        discard_request_mask_ptr=Guarded((3,), torch.bool, [False, True, False], poison=False),
        backup_next_token_ids_ptr=Guarded((3,), torch.int32, [7, 8, 9]),
        next_token_ids_ptr=Guarded((3,), torch.int32),
        valid_sampled_tokens_count_ptr=Guarded((3,), torch.int32),
        vocab_size=10,
        num_sampled_tokens_per_req=4,
        num_reqs=3,
        stride_sampled_token_ids=4,
        BLOCK_SIZE_TOKENS=4,
    )


def copy_case(shift=True):
    return dict(
        target_token_ids_ptr=Guarded((5,), torch.int32, [11, 12, 21, 22, 23]),
        target_positions_ptr=Guarded((5,), torch.int64, [7, 8, 3, 4, 5]),
        next_token_ids_ptr=Guarded((2,), torch.int32, [99, 98]),
        out_input_ids_ptr=Guarded((9,), torch.int32),
        out_positions_ptr=Guarded((9,), torch.int64),
        out_is_rejected_token_mask_ptr=Guarded((9,), torch.bool),
        out_is_masked_token_mask_ptr=Guarded((9,), torch.bool),
        out_new_token_indices_ptr=Guarded((4,), torch.int32),
        out_hidden_state_mapping_ptr=Guarded((5,), torch.int32),
        query_start_loc_ptr=Guarded((3,), torch.int32, [0, 2, 5]),
        query_end_loc_ptr=Guarded((2,), torch.int32, [1, 3]),
        padding_token_id=0,
        parallel_drafting_token_id=-5,
        total_input_tokens=5,
        num_padding_slots_per_request=2,
        shift_input_ids=shift,
    )


def dflash_case():
    return dict(
        next_token_ids_ptr=Guarded((2,), torch.int32, [99, 98]),
        target_positions_ptr=Guarded((5,), torch.int64, [7, 8, 3, 4, 5]),
        out_input_ids_ptr=Guarded((6,), torch.int32),
        out_context_positions_ptr=Guarded((5,), torch.int64),
        out_query_positions_ptr=Guarded((6,), torch.int64),
        out_context_slot_mapping_ptr=Guarded((5,), torch.int64),
        out_query_slot_mapping_ptr=Guarded((6,), torch.int64),
        out_token_indices_ptr=Guarded((4,), torch.int32),
        block_table_ptr=Guarded((2, 4), torch.int32, list(range(8))),
        block_table_stride=4,
        query_start_loc_ptr=Guarded((3,), torch.int32, [0, 2, 5]),
        num_rejected_tokens_ptr=Guarded((2,), torch.int32, [0, 1]),
        parallel_drafting_token_id=-5,
        block_size=4,
        num_query_per_req=3,
        num_speculative_tokens=2,
        total_input_tokens=5,
        BLOCK_SIZE=8,
        HAS_NUM_REJECTED=True,
    )


def _narrow_table(case):
    """A row-strided 2-column view: the kernel's clamp (to stride - 1) would leave the row."""
    case["block_table_ptr"] = torch.arange(16, dtype=torch.int32).view(2, 8)[:, :2]
    case["block_table_stride"] = 8


def _huge_queries(case):
    """Required lengths must not overflow into a pass: 2**62 queries per request."""
    case["num_query_per_req"] = case["num_speculative_tokens"] = 2**62


f32 = lambda n: lambda c: torch.zeros(n, dtype=torch.float32)  # noqa: E731
i64 = lambda n: lambda c: torch.zeros(n, dtype=torch.int64)  # noqa: E731
strided = lambda n: lambda c: torch.zeros(2 * n, dtype=torch.int64)[::2]  # noqa: E731
meta = lambda n: lambda c: torch.zeros(n, dtype=torch.int64, device="meta")  # noqa: E731


def _rows(kind, make, *rows):
    """The bad-input rows of one kernel: ``(mutation, exception, argument named)`` each."""
    return [(kind, make, *row) for row in rows]


BAD = [
    # eagle_step_slot_mapping_metadata_kernel
    *_rows(
        "step",
        step_case,
        bad_arg("positions_ptr", f32(3), TypeError),
        bad_arg("positions_ptr", meta(3), ValueError),
        bad_arg("positions_ptr", strided(3), ValueError),
        bad_arg("positions_ptr", i64(2), ValueError),
        bad_arg("positions_ptr", [0, 1, 2], TypeError),
        bad_at("positions_ptr", 1, -2, IndexError),
        bad_arg("seq_lens_ptr", lambda c: torch.zeros(3, dtype=torch.bool), TypeError),
        bad_arg("block_table_stride", 5, ValueError),
        bad_arg("block_table_ptr", lambda c: torch.zeros(4, 3, dtype=torch.int32).t(), ValueError),
        bad_arg("block_table_ptr", lambda c: torch.zeros(2, 4, dtype=torch.int32), ValueError),
        bad_arg("n_blocks_per_req", 5, ValueError),
        bad_arg("n_blocks_per_req", 0, ValueError),
        bad_arg("out_slot_mapping_ptr", i64(2), ValueError),
        bad_arg("out_clamped_positions_ptr", i64(2), ValueError),
        bad_arg("block_size", 0, ValueError),
        bad_arg("max_model_len", 0, ValueError),
        bad_arg("batch_size", 3.0, TypeError),
        bad_arg("batch_size", -1, ValueError),
    ),
    # eagle_prepare_inputs_padded_kernel
    *_rows(
        "prep",
        prep_case,
        bad_at("cu_num_draft_tokens_ptr", 1, 1, ValueError),
        bad_at("cu_num_draft_tokens_ptr", 0, -1, ValueError),
        bad_at("query_start_loc_gpu_ptr", 2, 2, ValueError),
        bad_arg("query_start_loc_gpu_ptr", i64(3), ValueError),
        bad_arg("valid_sampled_tokens_count_ptr", f32(3), TypeError),
        bad_arg("token_indices_to_sample_ptr", i64(2), ValueError),
        bad_arg("num_rejected_tokens_gpu_ptr", strided(3), ValueError),
        bad_arg("num_reqs", -1, ValueError),
    ),
    # eagle_prepare_next_token_padded_kernel
    *_rows(
        "next",
        next_case,
        bad_arg("stride_sampled_token_ids", 5, ValueError),
        bad_arg("num_sampled_tokens_per_req", 5, ValueError),
        bad_arg("BLOCK_SIZE_TOKENS", 2, ValueError),
        (set_arg("num_reqs", 4), ValueError, "sampled_token_ids_ptr"),
        bad_arg("discard_request_mask_ptr", lambda c: torch.zeros(3, dtype=torch.int32), TypeError),
        bad_arg("discard_request_mask_ptr", lambda c: torch.zeros(2, dtype=torch.bool), ValueError),
        bad_arg("backup_next_token_ids_ptr", f32(3), TypeError),
        bad_arg("next_token_ids_ptr", i64(2), ValueError),
        bad_arg("valid_sampled_tokens_count_ptr", meta(3), ValueError),
        bad_arg(
            "sampled_token_ids_ptr", lambda c: torch.zeros(4, 3, dtype=torch.int32).t(), ValueError
        ),
    ),
    # copy_and_expand_eagle_inputs_kernel
    *_rows(
        "copy",
        copy_case,
        bad_at("query_start_loc_ptr", 1, 6, ValueError),
        bad_at("query_start_loc_ptr", 2, 6, ValueError),
        bad_at("query_end_loc_ptr", 1, 5, ValueError),
        bad_at("query_end_loc_ptr", 0, -2, ValueError),
        (set_arg("total_input_tokens", 6), ValueError, "target_token_ids_ptr"),
        bad_arg("total_input_tokens", -1, ValueError),
        (set_arg("num_padding_slots_per_request", 3), ValueError, "out_new_token_indices_ptr"),
        bad_arg("num_padding_slots_per_request", -1, ValueError),
        (set_arg("num_padding_slots_per_request", 2**62), ValueError, "out_new_token_indices_ptr"),
        bad_arg("padding_token_id", 2**63, ValueError),
        bad_arg("out_positions_ptr", i64(6), ValueError),
        bad_arg(
            "out_is_rejected_token_mask_ptr", lambda c: torch.zeros(9, dtype=torch.uint8), TypeError
        ),
        bad_arg(
            "out_is_masked_token_mask_ptr", lambda c: torch.zeros(6, dtype=torch.bool), ValueError
        ),
        bad_arg("out_new_token_indices_ptr", i64(3), ValueError),
        bad_arg("out_hidden_state_mapping_ptr", i64(4), ValueError),
        bad_arg("out_hidden_state_mapping_ptr", None, TypeError),
        bad_arg("next_token_ids_ptr", i64(1), ValueError),
        bad_arg("target_positions_ptr", f32(5), TypeError),
        bad_arg("shift_input_ids", 2, ValueError),
    ),
    *_rows(
        "copy",
        lambda: copy_case(shift=False),
        bad_arg("out_input_ids_ptr", i64(8), ValueError),
    ),
    # copy_and_expand_dflash_inputs_kernel
    *_rows(
        "dflash",
        dflash_case,
        bad_at("query_start_loc_ptr", 1, 6, ValueError),
        (set_arg("total_input_tokens", 4), ValueError, "query_start_loc_ptr"),
        bad_at("target_positions_ptr", 3, -1, IndexError),
        bad_at("num_rejected_tokens_ptr", 0, 2, IndexError),
        bad_at("num_rejected_tokens_ptr", 1, -1, IndexError),
        bad_arg("num_rejected_tokens_ptr", 0, TypeError),
        bad_arg("block_table_stride", 3, ValueError),
        (_narrow_table, IndexError, "block_table_ptr"),
        bad_arg("block_table_ptr", lambda c: torch.zeros(1, 4, dtype=torch.int32), ValueError),
        bad_arg("num_speculative_tokens", 1, ValueError),
        bad_arg("block_size", 0, ValueError),
        (_huge_queries, ValueError, "out_input_ids_ptr"),
        bad_at("target_positions_ptr", 3, 2**63 - 2, IndexError),
        bad_arg("out_context_positions_ptr", i64(4), ValueError),
        bad_arg("out_context_slot_mapping_ptr", f32(5), TypeError),
        bad_arg("out_query_slot_mapping_ptr", i64(5), ValueError),
        bad_arg("out_token_indices_ptr", i64(3), ValueError),
        bad_arg("out_input_ids_ptr", strided(6), ValueError),
        bad_arg("query_start_loc_ptr", i64(0), ValueError),
    ),
]

_FN = {
    "step": K.eagle_step_slot_mapping_metadata_kernel,
    "prep": K.eagle_prepare_inputs_padded_kernel,
    "next": K.eagle_prepare_next_token_padded_kernel,
    "copy": K.copy_and_expand_eagle_inputs_kernel,
    "dflash": K.copy_and_expand_dflash_inputs_kernel,
}


@pytest.mark.parametrize(
    "kind,make,mutate,exc,name", BAD, ids=[f"{b[0]}-{i}-{b[4]}" for i, b in enumerate(BAD)]
)
def test_bad_input_raises_and_writes_nothing(kind, make, mutate, exc, name):
    check_bad_input(_FN[kind], make, mutate, exc, name)


def test_block_index_beyond_row_raises_eagle_step():
    """The kernel clamps to n_blocks_per_req - 1, which validation keeps inside the row."""
    case = step_case()
    case["n_blocks_per_req"] = 2
    case["positions_ptr"].view[0] = 13  # block 3 wanted, clamped to 1: legal
    mine, ref = run_both(
        K.eagle_step_slot_mapping_metadata_kernel, R.eagle_step_slot_mapping_metadata_kernel, case
    )
    assert_same_buffers(mine, ref)
