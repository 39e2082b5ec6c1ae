"""vLLM 0.34's draft logits cache kernels on CPU (``kernels_cpu._mrv2_spec``:
``assign_rows_kernel``, ``stale_drafts_kernel``), which lay out and check a batch-sharded cache.

Beside the parity tests against vLLM 0.34's own kernels (``test_mrv2_parity.py``, from 0.34's
wheel where the sources under test are older): the parity cases (``fdkit.mrv2.spec``) against
plain-Python readings of the kernels, the persistent tables compared whole and the outputs
poisoned between guards; bad launches refused naming the argument with every buffer as it was;
an empty grid writes nothing.
"""

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu as K
from fdkit.cases import guard_violations
from fdkit.mrv2 import spec as cases
from tests._fuzz import fuzz_settings

INDEX = (torch.int32, torch.int64)
NAMES = ("assign_rows_kernel", "stale_drafts_kernel")


def _covered(kw, count, grid):
    return max(0, min(kw[count], grid[0] * kw["BLOCK_SIZE"]))


def _ref_assign(kw, grid):
    shards, me = kw["NUM_SHARDS"], kw["SHARD_IDX"]
    for b in range(_covered(kw, "num_reqs", grid)):
        s = int(kw["idx_mapping_ptr"][b])
        kw["shard_mapping_ptr"][s] = b % shards
        kw["row_mapping_ptr"][s] = b // shards if b % shards == me else -1
        if b % shards == me:
            kw["inverse_row_mapping_ptr"][b // shards] = s


def _ref_stale(kw, grid):
    mapping = kw["row_mapping_ptr"]
    for t in range(_covered(kw, "num_logits", grid)):
        s = int(kw["expanded_idx_mapping_ptr"][t])
        row = s if mapping is None else (int(mapping[s]) if s >= 0 else -1)
        holder = int(kw["inverse_row_mapping_ptr"][row]) if row >= 0 else -1
        pos = int(kw["expanded_local_pos_ptr"][t])
        kw["stale_ptr"][t] = pos > 0 and (row < 0 or holder != s)


REFERENCES = {"assign_rows_kernel": _ref_assign, "stale_drafts_kernel": _ref_stale}


def _make(name, seed, idx):
    return cases.CASES[name](random.Random(seed), idx, "small")


def _grid(case):
    return tuple(case.grid) + (1,) * (3 - len(case.grid))


@pytest.mark.parametrize("name", NAMES)
@fuzz_settings(100, deep_examples=5000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), idx=st.sampled_from(INDEX), positional=st.booleans())
def test_matches_the_reference(name, seed, idx, positional):
    case = _make(name, seed, idx)
    kw, got = case.build()
    if positional:
        getattr(K, name)(*kw.values(), grid=_grid(case))
    else:
        getattr(K, name)(**kw, grid=_grid(case))
    ref_kw, want = case.build()
    REFERENCES[name](ref_kw, _grid(case))
    for key in got:
        assert torch.equal(got[key], want[key]), (
            f"{case}: {key}\nkernel:    {got[key].tolist()}\nreference: {want[key].tolist()}"
        )
    assert not guard_violations(case, got), case


def test_a_sharded_step_then_its_stale_drafts():
    """Two ranks: rank 1 caches batch positions 1 and 3 (slots 0 and 2) at rows 0 and 1; a
    request whose row went to another since, or that has no row here, has stale drafts (its
    bonus row never)."""
    shard = torch.full((6,), -9, dtype=torch.int32)
    rows = torch.full((6,), -9, dtype=torch.int32)
    inverse = torch.full((3,), -9, dtype=torch.int32)
    K.assign_rows_kernel(torch.tensor([4, 0, 5, 2]), shard, rows, inverse, 4, 2, 1, 1024, grid=(1,))
    assert shard.tolist() == [1, -9, 1, -9, 0, 0]
    assert rows.tolist() == [0, -9, 1, -9, -1, -1]
    assert inverse.tolist() == [0, 2, -9]
    rows[5] = 0  # slot 5 thinks it has row 0, which slot 0 holds now
    stale = torch.zeros(6, dtype=torch.bool)
    eim = torch.tensor([0, 0, 5, 5, 4, 4])
    elp = torch.tensor([0, 1, 0, 1, 0, 1])
    K.stale_drafts_kernel(stale, eim, elp, rows, inverse, 6, 1024, grid=(1,))
    assert stale.tolist() == [False, False, False, True, False, True]


# -- refusals ------------------------------------------------------------------------------------


def _assign_args():
    return dict(
        idx_mapping_ptr=torch.tensor([2, 0, 1]),
        shard_mapping_ptr=torch.full((4,), -9, dtype=torch.int32),
        row_mapping_ptr=torch.full((4,), -9, dtype=torch.int32),
        inverse_row_mapping_ptr=torch.full((2,), -9, dtype=torch.int32),
        num_reqs=3,
        NUM_SHARDS=2,
        SHARD_IDX=0,
        BLOCK_SIZE=4,
    )


def _stale_args():
    return dict(
        stale_ptr=torch.zeros(3, dtype=torch.bool),
        expanded_idx_mapping_ptr=torch.tensor([0, 1, 1]),
        expanded_local_pos_ptr=torch.tensor([0, 0, 1]),
        row_mapping_ptr=torch.tensor([1, 0], dtype=torch.int32),
        inverse_row_mapping_ptr=torch.tensor([1, 0], dtype=torch.int32),
        num_logits=3,
        BLOCK_SIZE=4,
    )


def _i32(values):
    return torch.tensor(values, dtype=torch.int32)


def _i64(values):
    return torch.tensor(values, dtype=torch.int64)


_EIM = "expanded_idx_mapping_ptr"
_INV = "inverse_row_mapping_ptr"


REFUSALS = [
    ("assign_rows_kernel", dict(idx_mapping_ptr=torch.tensor([2, 0])), "idx_mapping_ptr"),
    ("assign_rows_kernel", dict(idx_mapping_ptr=torch.tensor([2, 4, 1])), r"idx_mapping_ptr\[1\]"),
    ("assign_rows_kernel", dict(idx_mapping_ptr=torch.tensor([2, -1, 1])), r"idx_mapping_ptr\[1\]"),
    ("assign_rows_kernel", dict(idx_mapping_ptr=torch.tensor([2, 0, 2])), r"idx_mapping_ptr\[2\]"),
    ("assign_rows_kernel", dict(row_mapping_ptr=_i32([0, 0])), r"idx_mapping_ptr\[0\]"),
    ("assign_rows_kernel", dict(inverse_row_mapping_ptr=_i32([0])), "inverse_row_mapping_ptr"),
    ("assign_rows_kernel", dict(shard_mapping_ptr=torch.zeros(4)), "shard_mapping_ptr"),
    ("assign_rows_kernel", dict(NUM_SHARDS=0), "NUM_SHARDS"),
    ("assign_rows_kernel", dict(BLOCK_SIZE=3), "BLOCK_SIZE"),
    ("assign_rows_kernel", dict(num_reqs=3.0), "num_reqs"),
    ("stale_drafts_kernel", dict(stale_ptr=torch.zeros(2, dtype=torch.bool)), "stale_ptr"),
    ("stale_drafts_kernel", dict(stale_ptr=torch.zeros(3, dtype=torch.int32)), "stale_ptr"),
    ("stale_drafts_kernel", dict(expanded_local_pos_ptr=_i64([0, 0])), "expanded_local_pos_ptr"),
    ("stale_drafts_kernel", dict(expanded_idx_mapping_ptr=_i64([0, 2, 1])), rf"{_EIM}\[1\]"),
    ("stale_drafts_kernel", dict(row_mapping_ptr=_i32([1, 2])), r"row_mapping_ptr\[1\]"),
    ("stale_drafts_kernel", dict(row_mapping_ptr=None, **{_EIM: _i64([0, 2, 1])}), rf"{_EIM}\[1\]"),
    ("stale_drafts_kernel", {_INV: torch.ones(2)}, _INV),
]  # fmt: skip

MAKERS = {"assign_rows_kernel": _assign_args, "stale_drafts_kernel": _stale_args}


@pytest.mark.parametrize("name, change, refused", REFUSALS)
def test_bad_launches_are_refused_naming_the_argument(name, change, refused):
    args = {**MAKERS[name](), **change}
    tensors = {k: v for k, v in args.items() if isinstance(v, torch.Tensor)}
    before = {k: v.clone() for k, v in tensors.items()}
    with pytest.raises((TypeError, ValueError), match=f"^{refused}:"):
        getattr(K, name)(**args, grid=(1,))
    for key, t in tensors.items():
        assert torch.equal(t, before[key]), key


def test_outputs_over_what_the_launch_reads_are_refused():
    args = _assign_args()
    args["inverse_row_mapping_ptr"] = args["row_mapping_ptr"][2:]
    with pytest.raises(ValueError, match="^inverse_row_mapping_ptr:.*row_mapping_ptr"):
        K.assign_rows_kernel(**args, grid=(1,))
    args = _stale_args()
    args["stale_ptr"] = args["inverse_row_mapping_ptr"].view(torch.uint8)[:3]
    with pytest.raises(ValueError, match="^stale_ptr:.*inverse_row_mapping_ptr"):
        K.stale_drafts_kernel(**args, grid=(1,))


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_grid_writes_nothing(name):
    for seed in range(8):
        case = _make(name, seed, torch.int64)
        kw, after = case.build()
        _, before = case.build()
        getattr(K, name)(**kw, grid=(0,))
        for key in after:
            assert torch.equal(after[key], before[key]), (case, key)
