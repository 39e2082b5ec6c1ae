"""Model Runner V2's outputs kernels on CPU (``kernels_cpu._mrv2_outputs``) against plain torch.

``num_nans_kernel``: ``logits[:R, :V].isnan().sum(1)``. ``compact_sampling_mask_kernel``: per
sampled output row, ``isfinite`` of its logits row -- the count, the first ``max_num_kept``
column ids, the little-endian bitmask (``numpy.packbits``); unsampled rows get a 0 count and
nothing else. Launches run serially, across rows and with long rows split across threads (the
results must not depend on how), with int32 and int64 buffers, every float dtype, and the
layouts the kernels take strides for. Refused launches name the argument and write nothing.
"""

import numpy as np
import pytest
import torch
from _fuzz import fuzz_settings
from _spec_helpers import threads
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import kernels_cpu
from kernels_cpu import GridLauncher, compact_sampling_mask_kernel, num_nans_kernel

INDEX = (torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
POISON = -7777
MASK_POISON = 0xA5
_SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _logits(seed, rows, vocab, dtype=torch.float32, pad=0, nan=0.1, ninf=0.5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((rows, vocab + pad), generator=g) * 10
    u = torch.rand(x.shape, generator=g)
    x[u < ninf] = float("-inf")
    x[(u >= ninf) & (u < ninf + 0.01)] = float("inf")
    x[torch.rand(x.shape, generator=g) < nan] = float("nan")
    return x.to(dtype)[:, :vocab]


# -- references -----------------------------------------------------------------------------------


def _ref_nans(logits, rows, vocab):
    return logits[:rows, : max(vocab, 0)].isnan().sum(1)


def _ref_mask(logits, cu, sampled, rows_out, rpr, vocab, kept, ids, mask, counts):
    """Fill ``ids``/``mask``/``counts`` (copies of the poisoned outputs) as the kernel does."""
    for o in range(rows_out):
        req, slot = divmod(o, rpr)
        if slot >= int(sampled[req]):
            counts[o] = 0
            continue
        keep = torch.isfinite(logits[int(cu[req]) + slot, :vocab])
        counts[o] = int(keep.sum())
        where = keep.nonzero().flatten()[: max(kept, 0)]
        ids[o, : len(where)] = where.to(ids.dtype)
        packed = np.packbits(keep.numpy().astype(np.uint8), bitorder="little")
        mask[o, : len(packed)] = torch.from_numpy(packed)


def _mask_launch(logits, cu, sampled, rpr, vocab, kept, idx, ids_pad=0, mask_pad=0):
    """Poisoned outputs for one launch, and the keyword arguments launching it."""
    rows_out = sampled.numel() * rpr
    width = max(min(kept, vocab), 0)
    ids_base = torch.full((rows_out, width + ids_pad), POISON, dtype=idx)
    mask_base = torch.full((rows_out, (vocab + 7) // 8 + mask_pad), MASK_POISON, dtype=torch.uint8)
    ids, mask = ids_base[:, :width], mask_base[:, : (vocab + 7) // 8]
    counts = torch.full((rows_out,), POISON, dtype=idx)
    kw = dict(
        logits_ptr=logits,
        logits_row_stride=logits.stride(0),
        logits_col_stride=logits.stride(1),
        cu_num_logits_ptr=cu,
        num_sampled_tokens_ptr=sampled,
        token_ids_ptr=ids,
        token_ids_row_stride=ids_base.stride(0),
        packed_mask_ptr=mask,
        packed_mask_row_stride=mask_base.stride(0),
        counts_ptr=counts,
        vocab_size=vocab,
        max_num_kept=kept,
        ROWS_PER_REQUEST=rpr,
        BLOCK_SIZE=8192,
    )
    return kw, (ids_base, mask_base, counts), rows_out


def _check_mask(kw, outs, rows_out):
    ids_base, mask_base, counts = outs
    want = [t.clone() for t in outs]
    width = kw["token_ids_ptr"].shape[1]
    nbytes = kw["packed_mask_ptr"].shape[1]
    _ref_mask(
        kw["logits_ptr"],
        kw["cu_num_logits_ptr"],
        kw["num_sampled_tokens_ptr"],
        rows_out,
        kw["ROWS_PER_REQUEST"],
        kw["vocab_size"],
        kw["max_num_kept"],
        want[0][:, :width],
        want[1][:, :nbytes],
        want[2],
    )
    compact_sampling_mask_kernel(**kw, grid=(rows_out,))
    for got, exp, name in zip(outs, want, ("token_ids", "packed_mask", "counts")):
        assert torch.equal(got, exp), name


# -- num_nans_kernel ------------------------------------------------------------------------------


@fuzz_settings(60, deep_examples=2000, **_SETTINGS)
@given(
    rows=st.integers(0, 9),
    extra=st.integers(0, 2),
    vocab=st.integers(-2, 700),
    pad=st.sampled_from((0, 0, 5)),
    dtype=st.sampled_from(FLOATS),
    idx=st.sampled_from(INDEX),
    nan=st.sampled_from((0.0, 0.01, 0.5, 1.0)),
    seed=st.integers(0, 2**31),
)
def test_num_nans_matches_torch(rows, extra, vocab, pad, dtype, idx, nan, seed):
    logits = _logits(seed, rows + extra, max(vocab, 0), dtype, pad, nan)
    out = torch.full((rows + 2,), POISON, dtype=idx)
    num_nans_kernel(logits, logits.stride(0), out, vocab, 8192, grid=(rows,))
    assert torch.equal(out[:rows], _ref_nans(logits, rows, vocab).to(idx))
    assert (out[rows:] == POISON).all()


@pytest.mark.parametrize("team", [(1, None), (2, 0), (4, 0), (7, 0)])
@pytest.mark.parametrize("rows", [1, 2, 3, 9])
def test_num_nans_is_the_same_on_any_team(team, rows):
    """Long rows (V = 128k-256k) cut across threads when rows are few, whole rows when many."""
    n, threshold = team
    vocab = 151_936 if rows < 9 else 70_001
    logits = _logits(rows, rows, vocab, nan=0.003)
    out = torch.full((rows,), POISON, dtype=torch.int32)
    with threads(n, threshold if threshold is not None else 1 << 40):
        num_nans_kernel(logits, logits.stride(0), out, vocab, grid=(rows,))
    assert torch.equal(out, _ref_nans(logits, rows, vocab).int())


def test_num_nans_reads_a_flat_buffer_as_rows_of_the_stride():
    flat = _logits(3, 1, 4 * 50, nan=0.3).reshape(-1)
    out = torch.full((4,), POISON, dtype=torch.int64)
    num_nans_kernel(flat, 50, out, 37, grid=(4, 1, 1))
    assert torch.equal(out, flat.view(4, 50)[:, :37].isnan().sum(1))


def test_num_nans_through_the_grid_launcher():
    logits = _logits(4, 5, 300, nan=0.2)
    out = torch.full((5,), POISON, dtype=torch.int32)
    GridLauncher(num_nans_kernel)[(5,)](logits, logits.stride(0), out, 300, BLOCK_SIZE=8192)
    assert torch.equal(out, _ref_nans(logits, 5, 300).int())
    with pytest.raises(TypeError, match="grid"):
        GridLauncher(num_nans_kernel)(logits, logits.stride(0), out, 300)


def _refused_nans(exc, name, logits, stride, out, vocab, grid):
    before = out.clone()
    with pytest.raises(exc, match=f"^{name}: expected"):
        num_nans_kernel(logits, stride, out, vocab, grid=grid)
    assert torch.equal(out, before)


def test_num_nans_refuses_naming_the_argument():
    logits = _logits(5, 4, 64, pad=8)
    out = torch.full((4,), POISON, dtype=torch.int32)
    _refused_nans(TypeError, "logits_ptr", logits.to(torch.int32), 72, out, 64, (4,))
    _refused_nans(ValueError, "logits_stride", logits, 64, out, 64, (4,))
    _refused_nans(ValueError, "logits_ptr", logits, 72, out, 65, (4,))  # wider than a row
    _refused_nans(ValueError, "logits_ptr", logits, 72, out, 64, (5,))  # more rows than it has
    _refused_nans(ValueError, "num_nans_ptr", logits, 72, out[:3], 64, (4,))
    _refused_nans(TypeError, "num_nans_ptr", logits, 72, out.float(), 64, (4,))
    _refused_nans(TypeError, "vocab_size", logits, 72, out, 64.0, (4,))
    _refused_nans(TypeError, "grid", logits, 72, out, 64, [4])
    _refused_nans(ValueError, "grid", logits, 72, out, 64, (-1,))
    flat = logits.contiguous().reshape(-1)
    _refused_nans(ValueError, "logits_ptr", flat, 64, out, 64, (5,))  # past the flat buffer
    aliased = torch.zeros(64, dtype=torch.float32)
    with pytest.raises(ValueError, match="^num_nans_ptr: expected memory that does not overlap"):
        num_nans_kernel(aliased, 8, aliased.view(torch.int32), 8, grid=(4,))


def test_num_nans_empty_launches_write_nothing_or_zeros():
    logits = _logits(6, 3, 10, nan=1.0)
    out = torch.full((3,), POISON, dtype=torch.int32)
    num_nans_kernel(logits, logits.stride(0), out, 10, grid=(0,))
    assert (out == POISON).all()
    num_nans_kernel(logits, logits.stride(0), out, 10, grid=(3, 0))
    assert (out == POISON).all()
    num_nans_kernel(logits, logits.stride(0), out, 0, grid=(3,))  # zero-length rows
    assert (out == 0).all()


# -- compact_sampling_mask_kernel -----------------------------------------------------------------


@st.composite
def _mask_cases(draw):
    rpr = draw(st.integers(1, 4))
    reqs = draw(st.integers(0, 5))
    per_req = [draw(st.integers(1, rpr)) for _ in range(reqs)]
    sampled = [draw(st.integers(0, n)) for n in per_req]
    starts, at = [], 0
    for n in per_req:
        starts.append(at)
        at += n + draw(st.integers(0, 1))
    starts.append(at)
    return dict(
        rpr=rpr,
        starts=starts,
        sampled=sampled,
        rows=max(at, 1),
        vocab=draw(st.integers(0, 400)),
        kept=draw(st.integers(-1, 420)),
        layout=draw(st.sampled_from(("contiguous", "slice", "transposed"))),
        dtype=draw(st.sampled_from(FLOATS)),
        cu_idx=draw(st.sampled_from(INDEX)),
        ns_idx=draw(st.sampled_from(INDEX)),
        out_idx=draw(st.sampled_from(INDEX)),
        pads=(draw(st.integers(0, 3)), draw(st.integers(0, 3))),
        ninf=draw(st.sampled_from((0.0, 0.5, 0.99, 1.0))),
        seed=draw(st.integers(0, 2**31)),
    )


def _layout(x, layout):
    if layout == "transposed":
        return x.t().contiguous().t()
    if layout == "slice":
        wide = torch.zeros((x.shape[0], x.shape[1] + 7), dtype=x.dtype)
        wide[:, : x.shape[1]] = x
        return wide[:, : x.shape[1]]
    return x.contiguous()


@fuzz_settings(80, deep_examples=2000, **_SETTINGS)
@given(c=_mask_cases())
def test_compact_sampling_mask_matches_torch(c):
    logits = _layout(
        _logits(c["seed"], c["rows"], c["vocab"], c["dtype"], ninf=c["ninf"]), c["layout"]
    )
    cu = torch.tensor(c["starts"], dtype=c["cu_idx"])
    sampled = torch.tensor(c["sampled"], dtype=c["ns_idx"]).reshape(-1)
    kw, outs, rows_out = _mask_launch(
        logits, cu, sampled, c["rpr"], c["vocab"], c["kept"], c["out_idx"], *c["pads"]
    )
    _check_mask(kw, outs, rows_out)


@pytest.mark.parametrize("team", [(1, None), (2, 0), (4, 0), (7, 0)])
@pytest.mark.parametrize("rows", [1, 2, 5])
@pytest.mark.parametrize("ninf", [0.0, 0.9995])
def test_compact_sampling_mask_is_the_same_on_any_team(team, rows, ninf):
    """A 256k row split in byte-aligned chunks: the ids of a chunk start where its
    predecessors' kept counts end, so the compacted ids cross chunk boundaries in order (all
    finite: the first max_num_kept ids lie in the first chunk; a few finite ones spread over
    the row: every chunk contributes)."""
    n, threshold = team
    vocab = 256_000 + 3
    logits = _logits(rows + 11, rows, vocab, nan=0.0, ninf=ninf)
    cu = torch.arange(rows + 1, dtype=torch.int32)
    sampled = torch.ones(rows, dtype=torch.int64)
    kw, outs, rows_out = _mask_launch(logits, cu, sampled, 1, vocab, 2048, torch.int32)
    with threads(n, threshold if threshold is not None else 1 << 40):
        _check_mask(kw, outs, rows_out)


def test_compact_sampling_mask_leaves_unsampled_rows_alone():
    logits = _logits(1, 6, 50, nan=0.0)
    cu = torch.tensor([0, 3, 6], dtype=torch.int64)
    sampled = torch.tensor([0, 2], dtype=torch.int32)  # request 0: none; request 1: two of three
    kw, outs, rows_out = _mask_launch(logits, cu, sampled, 3, 50, 10, torch.int64)
    _check_mask(kw, outs, rows_out)
    ids_base, mask_base, counts = outs
    assert counts.tolist()[:3] == [0, 0, 0] and counts[5] == 0
    assert (ids_base[[0, 1, 2, 5]] == POISON).all() and (
        mask_base[[0, 1, 2, 5]] == MASK_POISON
    ).all()


def _refused_mask(exc, name, **changes):
    logits = _logits(2, 4, 40, pad=3)
    cu = torch.tensor([0, 2, 4], dtype=torch.int32)
    sampled = torch.tensor([2, 2], dtype=torch.int32)
    kw, outs, rows_out = _mask_launch(logits, cu, sampled, 2, 40, 8, torch.int32)
    grid = changes.pop("grid", (rows_out,))
    kw.update(changes)
    held = [t.clone() for t in outs]
    with pytest.raises(exc, match=f"^{name}: expected"):
        compact_sampling_mask_kernel(**kw, grid=grid)
    for t, h in zip(outs, held):
        assert torch.equal(t, h), f"written before refusing {name}"


def test_compact_sampling_mask_refuses_naming_the_argument():
    logits = _logits(2, 4, 40, pad=3)
    _refused_mask(TypeError, "logits_ptr", logits_ptr=logits.to(torch.int64))
    _refused_mask(ValueError, "logits_row_stride", logits_row_stride=40)
    _refused_mask(ValueError, "logits_col_stride", logits_ptr=logits.t().contiguous().t())
    _refused_mask(ValueError, "logits_ptr", vocab_size=44)
    _refused_mask(ValueError, "logits_ptr", cu_num_logits_ptr=torch.tensor([0, 3, 4]))
    _refused_mask(ValueError, "logits_ptr", cu_num_logits_ptr=torch.tensor([-1, 2]))
    _refused_mask(ValueError, "cu_num_logits_ptr", cu_num_logits_ptr=torch.tensor([0]))
    _refused_mask(TypeError, "cu_num_logits_ptr", cu_num_logits_ptr=torch.tensor([0.0, 2.0]))
    _refused_mask(
        ValueError,
        "num_sampled_tokens_ptr",
        num_sampled_tokens_ptr=torch.ones(1, dtype=torch.int32),
    )
    _refused_mask(ValueError, "num_sampled_tokens_ptr", grid=(5,))
    _refused_mask(
        ValueError,
        "token_ids_ptr",
        token_ids_ptr=torch.zeros((4, 7), dtype=torch.int32),
        token_ids_row_stride=7,
    )
    _refused_mask(ValueError, "token_ids_row_stride", token_ids_row_stride=9)
    _refused_mask(
        ValueError,
        "token_ids_row_stride",
        token_ids_ptr=torch.zeros(40, dtype=torch.int32),
        token_ids_row_stride=5,
    )  # rows written would overlap
    _refused_mask(TypeError, "token_ids_ptr", token_ids_ptr=torch.zeros((4, 8)))
    _refused_mask(
        TypeError, "packed_mask_ptr", packed_mask_ptr=torch.zeros((4, 5), dtype=torch.int32)
    )
    _refused_mask(
        ValueError,
        "packed_mask_ptr",
        packed_mask_ptr=torch.zeros(15, dtype=torch.uint8),
        packed_mask_row_stride=5,
    )
    _refused_mask(ValueError, "counts_ptr", counts_ptr=torch.zeros(3, dtype=torch.int32))
    _refused_mask(ValueError, "ROWS_PER_REQUEST", ROWS_PER_REQUEST=0)
    _refused_mask(TypeError, "max_num_kept", max_num_kept=True)
    _refused_mask(TypeError, "grid", grid=4)
    shared = torch.zeros(64, dtype=torch.int32)
    _refused_mask(
        ValueError, "counts_ptr", counts_ptr=shared[:4], num_sampled_tokens_ptr=shared[2:4]
    )


def test_compact_sampling_mask_edges():
    logits = _logits(7, 3, 20, nan=0.0, ninf=0.0)
    cu = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
    sampled = torch.ones(3, dtype=torch.int32)
    for kept, vocab in ((0, 20), (-3, 20), (5, 0), (20, 20), (30, 17)):
        kw, outs, rows_out = _mask_launch(logits, cu, sampled, 1, vocab, kept, torch.int32)
        _check_mask(kw, outs, rows_out)
    kw, outs, _ = _mask_launch(logits, cu, sampled, 1, 20, 5, torch.int32)
    compact_sampling_mask_kernel(**kw, grid=(0,))  # an empty batch writes nothing
    assert (outs[2] == POISON).all() and (outs[0] == POISON).all()


def test_compact_sampling_mask_is_exported_for_the_plugin():
    assert kernels_cpu.MRV2_KERNELS["compact_sampling_mask_kernel"].impls == (
        "compact_sampling_mask_kernel",
    )
    assert kernels_cpu.MRV2_KERNELS["num_nans_kernel"].impls == ("num_nans_kernel",)
