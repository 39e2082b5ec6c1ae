"""``zero_kv_blocks_kernel`` (Model Runner V2's KV block zeroing): what it writes, what it
refuses, and its launch through ``GridLauncher``. Parity with vLLM's own kernel is in
``test_mrv2_parity.py``."""

import pytest
import torch

import kernels_cpu
from kernels_cpu import GridLauncher, zero_kv_blocks_kernel


def _segments(idx=torch.int64, addr_dtype=torch.uint64):
    arena = torch.arange(1, 201, dtype=torch.int32)
    base = arena.data_ptr()
    args = dict(
        seg_addrs_ptr=torch.tensor([base, base + 4 * 100], dtype=torch.int64).to(addr_dtype),
        seg_block_strides_ptr=torch.tensor([20, 10], dtype=idx),
        seg_page_sizes_ptr=torch.tensor([15, 10], dtype=idx),
        block_ids_ptr=torch.tensor([3, 1], dtype=idx),
        BLOCK_SIZE=8,
    )
    return arena, args


def _expected(arena, reach):
    want = arena.clone()
    for seg_off, stride, page in ((0, 20, 15), (100, 10, 10)):
        n = min(page, reach)
        for b in (3, 1):
            want[seg_off + b * stride : seg_off + b * stride + n] = 0
    return want


@pytest.mark.parametrize("idx", [torch.int32, torch.int64])
@pytest.mark.parametrize("addr_dtype", [torch.int64, torch.uint64])
@pytest.mark.parametrize("chunks", [0, 1, 2, 3])
def test_zeroes_each_blocks_page_up_to_the_grids_chunks(idx, addr_dtype, chunks):
    arena, args = _segments(idx, addr_dtype)
    want = _expected(arena, chunks * 8)
    zero_kv_blocks_kernel(**args, grid=(2, 2, chunks))
    assert torch.equal(arena, want)


def test_the_grid_bounds_blocks_and_segments():
    arena, args = _segments()
    before = arena.clone()
    zero_kv_blocks_kernel(**args, grid=(1, 1, 2))  # block 3 of segment 0 only
    want = before.clone()
    want[60:75] = 0
    assert torch.equal(arena, want)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(BLOCK_SIZE=0), "BLOCK_SIZE: expected >= 1"),
        (dict(BLOCK_SIZE=8.0), "BLOCK_SIZE: expected an int, got float"),
        (dict(block_ids_ptr=torch.tensor([3])), "block_ids_ptr: expected at least 2"),
        (dict(seg_page_sizes_ptr=torch.tensor([15])), "seg_page_sizes_ptr: expected at least 2"),
        (dict(seg_block_strides_ptr=torch.tensor([1.0, 2.0])), "seg_block_strides_ptr"),
        (dict(seg_addrs_ptr=torch.tensor([1], dtype=torch.int64)), "seg_addrs_ptr: expected at"),
        (dict(seg_addrs_ptr=torch.tensor([0, 0], dtype=torch.int64)), r"seg_addrs_ptr\[0\]"),
    ],
)
def test_bad_input_is_refused_naming_it_and_nothing_is_written(change, match):
    arena, args = _segments()
    before = arena.clone()
    args.update(change)
    with pytest.raises((TypeError, ValueError), match=match):
        zero_kv_blocks_kernel(**args, grid=(2, 2, 2))
    assert torch.equal(arena, before)


def test_a_null_segment_with_an_empty_page_is_not_written_so_not_refused():
    arena, args = _segments()
    args["seg_addrs_ptr"][1] = 0
    args["seg_page_sizes_ptr"][1] = 0
    zero_kv_blocks_kernel(**args, grid=(2, 2, 2))
    assert int((arena == 0).sum()) == 30  # two blocks of segment 0's 15-element page


def test_an_empty_grid_reads_nothing():
    zero_kv_blocks_kernel(torch.empty(0, dtype=torch.int64), None, None, None, 8, grid=(0, 5, 5))


def test_launched_through_its_grid_launcher_as_vllm_launches_it():
    arena, args = _segments()
    want = _expected(arena, 16)
    launcher = GridLauncher(zero_kv_blocks_kernel)
    positional = [args.pop(k) for k in list(args)[:4]]
    launcher[(2, 2, 2)](*positional, BLOCK_SIZE=args["BLOCK_SIZE"], num_warps=4)
    assert torch.equal(arena, want)
    with pytest.raises(TypeError, match="grid"):
        launcher(*positional, BLOCK_SIZE=8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        launcher[(2, 2, 2)](*positional, BLOCK_SIZE=8, bogus=1)
    assert kernels_cpu.contracts.contract("zero_kv_blocks_kernel").takes_grid
