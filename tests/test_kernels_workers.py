"""kernels_cpu worker kernels (slot mapping, batched memcpy) vs their plain references.

Same discipline as the spec-decode tests: hypothesis over sizes and edge cases, int32/int64 per
argument, poisoned guarded outputs, every bad input raising the named error with nothing written,
and 1- vs 2-thread invariance.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu as K
from fdkit.reference import workers as R
from tests._fuzz import fuzz_settings
from tests._spec_helpers import (
    INDEX_DTYPES,
    Guarded,
    assert_same_buffers,
    bad_arg,
    bad_at,
    check_bad_input,
    launch_args,
    poke,
    run_both,
    set_arg,
    slot_mapping_case,
    threads,
)

dts = st.sampled_from(INDEX_DTYPES)
ADDR_DTYPES = (torch.int64, torch.uint64)


@st.composite
def slot_cases(draw, max_r=5, max_len=6, max_pos=60):
    r_n = draw(st.integers(0, max_r))
    lens = draw(st.lists(st.integers(0, max_len), min_size=r_n, max_size=r_n))
    world = draw(st.sampled_from([1, 1, 2, 3]))
    rank = draw(st.integers(0, world - 1))
    inter = draw(st.sampled_from([1, 2, 4]))
    kb = draw(st.sampled_from([1, 2, 3, 4, 5, 16]))
    qsl = [draw(st.integers(0, 2))]
    for n in lens:
        qsl.append(qsl[-1] + n)
    n_pos = qsl[-1] + draw(st.integers(0, 2))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    pos = torch.randint(0, max_pos + 1, (n_pos,), generator=gen)
    cols = int(pos.max()) // (kb * world) + 1 + draw(st.integers(0, 2)) if n_pos else 1
    extra = draw(st.sampled_from([0, 0, 3]))
    rows = r_n + draw(st.integers(0, 2))
    num_tokens = qsl[-1] + draw(st.integers(0, 3))
    max_num_tokens = num_tokens + draw(st.integers(-1, 4))
    n_out = max(qsl[-1], max_num_tokens) + draw(st.integers(0, 2))
    return dict(
        num_tokens=num_tokens,
        max_num_tokens=max_num_tokens,
        query_start_loc_ptr=Guarded((r_n + 1,), draw(dts), qsl),
        positions_ptr=Guarded((n_pos,), draw(dts), pos),
        block_table_ptr=Guarded(
            (rows, cols),
            draw(dts),
            torch.randint(0, 401, (rows * cols,), generator=gen),
            extra_cols=extra,
        ),
        block_table_stride=cols + extra,
        slot_mapping_ptr=Guarded((n_out,), draw(dts)),
        KV_CACHE_BLOCK_SIZE=kb,
        TOTAL_CP_WORLD_SIZE=world,
        TOTAL_CP_RANK=rank,
        CP_KV_CACHE_INTERLEAVE_SIZE=inter,
        PAD_ID=draw(st.sampled_from([-1, 0])),
        BLOCK_SIZE=1024,
    )


@fuzz_settings(150, deadline=None)
@given(case=slot_cases(), positional=st.booleans())
def test_slot_mapping_matches_reference(case, positional):
    mine, ref = run_both(
        K.compute_slot_mapping_kernel, R.compute_slot_mapping_kernel, case, positional=positional
    )
    assert_same_buffers(mine, ref)


@fuzz_settings(25, deep_examples=1000, deadline=None)  # large cases, launched twice
@given(case=slot_cases(max_r=12, max_len=3000, max_pos=20000))
def test_slot_mapping_thread_count_invariance(case):
    """Large prefills span several parallel chunks (the team splits tokens, not requests)."""
    with threads(1):
        one, ref = run_both(K.compute_slot_mapping_kernel, R.compute_slot_mapping_kernel, case)
    with threads(2):
        two, _ = run_both(K.compute_slot_mapping_kernel, R.compute_slot_mapping_kernel, case)
    assert_same_buffers(one, ref)
    assert_same_buffers(two, ref)


def test_slot_mapping_hand_checked():
    # slot_case() less the arguments with defaults (one rank, no interleave, PAD_ID -1)
    case = dict(list(slot_case().items())[:8])
    K.compute_slot_mapping_kernel(**launch_args(case))
    assert case["slot_mapping_ptr"].view.tolist() == [8 * 4 + 1, 9 * 4, 9 * 4 + 3, 10 * 4, -1, -1]


def slot_case():
    return slot_mapping_case("compute_slot_mapping_kernel", [5, 0, 3, 4], [7, 8, 9, 10], 2)


SLOT_BAD = [
    bad_at("query_start_loc_ptr", 1, 5, ValueError),
    bad_at("query_start_loc_ptr", 0, -1, ValueError),
    (poke("query_start_loc_ptr", 2, 5), ValueError, "positions_ptr"),
    bad_arg("query_start_loc_ptr", lambda c: torch.zeros(0, dtype=torch.int32), ValueError),
    bad_arg("query_start_loc_ptr", lambda c: torch.zeros(3, dtype=torch.float64), TypeError),
    bad_at("positions_ptr", 2, -1, IndexError),
    (poke("positions_ptr", 2, 8), IndexError, "block_table_ptr"),
    bad_arg("positions_ptr", lambda c: torch.zeros(8, dtype=torch.int64)[::2], ValueError),
    bad_arg("slot_mapping_ptr", lambda c: torch.zeros(5, dtype=torch.int64), ValueError),
    bad_arg(
        "slot_mapping_ptr", lambda c: torch.zeros(6, dtype=torch.int64, device="meta"), ValueError
    ),
    bad_arg("block_table_stride", 3, ValueError),
    bad_arg("block_table_ptr", lambda c: torch.zeros(1, 2, dtype=torch.int32), ValueError),
    bad_arg("block_table_ptr", lambda c: torch.zeros(2, 2, dtype=torch.float32), TypeError),
    bad_arg("num_tokens", -1, ValueError),
    (set_arg("max_num_tokens", 7), ValueError, "slot_mapping_ptr"),
    bad_arg("KV_CACHE_BLOCK_SIZE", 0, ValueError),
    bad_arg("TOTAL_CP_WORLD_SIZE", 0, ValueError),
    bad_arg("TOTAL_CP_RANK", 1, ValueError),
    bad_arg("CP_KV_CACHE_INTERLEAVE_SIZE", 0, ValueError),
    bad_arg("PAD_ID", "x", TypeError),
    (
        lambda c: c.update(KV_CACHE_BLOCK_SIZE=2**62, TOTAL_CP_WORLD_SIZE=4),
        ValueError,
        "KV_CACHE_BLOCK_SIZE",
    ),
]


@pytest.mark.parametrize(
    "mutate,exc,name", SLOT_BAD, ids=[f"{i}-{b[2]}" for i, b in enumerate(SLOT_BAD)]
)
def test_slot_mapping_bad_input(mutate, exc, name):
    check_bad_input(K.compute_slot_mapping_kernel, slot_case, mutate, exc, name)


# ------------------------------------------------------------------------------------------
# batch_memcpy_kernel: the arena is the guarded allocation, addresses are built per copy
# ------------------------------------------------------------------------------------------

ARENA = 4096


@st.composite
def memcpy_specs(draw, max_n=10, max_size=300):
    n = draw(st.integers(0, max_n))
    regions = []
    for _ in range(n):
        size = draw(st.integers(0, max_size))
        regions.append(
            (draw(st.integers(0, ARENA - size)), draw(st.integers(0, ARENA - size)), size)
        )
    return regions, draw(st.sampled_from(ADDR_DTYPES)), draw(dts)


def arena():
    g = torch.Generator().manual_seed(0)
    return Guarded((ARENA,), torch.uint8, torch.randint(0, 256, (ARENA,), generator=g), poison=171)


def addresses(buf, regions, addr_dtype, size_dtype):
    base = buf.view.data_ptr()
    src = torch.tensor([base + s for s, _, _ in regions], dtype=torch.int64).to(addr_dtype)
    dst = torch.tensor([base + d for _, d, _ in regions], dtype=torch.int64).to(addr_dtype)
    return src, dst, torch.tensor([n for _, _, n in regions], dtype=size_dtype)


@fuzz_settings(150, deadline=None)
@given(spec=memcpy_specs())
def test_batch_memcpy_matches_reference(spec):
    """Overlapping regions included: applied in order, each one as memmove."""
    regions, addr_dtype, size_dtype = spec
    mine, ref = arena(), arena()
    K.batch_memcpy_kernel(*addresses(mine, regions, addr_dtype, size_dtype), BLOCK_SIZE=1024)
    R.batch_memcpy_kernel(*addresses(ref, regions, addr_dtype, size_dtype))
    assert torch.equal(mine.base, ref.base)
    assert mine.guards_intact()


def test_batch_memcpy_self_overlap_is_memmove():
    buf = arena()
    want = buf.view.clone()
    want[10:110] = buf.view[0:100].clone()
    want[200:300] = buf.view[210:310].clone()
    K.batch_memcpy_kernel(
        *addresses(buf, [(0, 10, 100), (210, 200, 100)], torch.uint64, torch.int32)
    )
    assert torch.equal(buf.view, want)
    assert buf.guards_intact()


@fuzz_settings(25, deep_examples=1000, deadline=None)  # large cases, launched twice
@given(data=st.data())
def test_batch_memcpy_thread_count_invariance(data):
    """Disjoint destinations, sources outside every destination: order cannot matter."""
    n = data.draw(st.integers(0, 16))
    sizes = data.draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    regions = [(2048 + data.draw(st.integers(0, 1900)), 120 * i, s) for i, s in enumerate(sizes)]
    results = []
    for nt in (1, 2):
        buf = arena()
        with threads(nt):
            K.batch_memcpy_kernel(*addresses(buf, regions, torch.int64, torch.int64))
        results.append(buf.base)
    ref = arena()
    R.batch_memcpy_kernel(*addresses(ref, regions, torch.int64, torch.int64))
    assert torch.equal(results[0], ref.base) and torch.equal(results[1], ref.base)


def _memcpy_args():
    buf = arena()
    return buf, list(addresses(buf, [(0, 100, 50), (200, 300, 10)], torch.uint64, torch.int32))


@pytest.mark.parametrize(
    "index,value,exc,name",
    [
        (0, torch.zeros(2, dtype=torch.int32), TypeError, "src_ptrs"),
        (1, torch.zeros(2, dtype=torch.float64), TypeError, "dst_ptrs"),
        (1, torch.zeros(3, dtype=torch.int64), ValueError, "dst_ptrs"),
        (2, torch.zeros(3, dtype=torch.int32), ValueError, "sizes"),
        (2, torch.tensor([5, -1], dtype=torch.int32), ValueError, "sizes"),
        (2, torch.zeros(2, dtype=torch.uint8), TypeError, "sizes"),
        (0, torch.zeros(4, dtype=torch.int64)[::2], ValueError, "src_ptrs"),
        (0, torch.zeros(2, dtype=torch.int64, device="meta"), ValueError, "src_ptrs"),
        (0, "null-src", ValueError, "src_ptrs"),
        (1, "null-dst", ValueError, "dst_ptrs"),
    ],
)
def test_batch_memcpy_bad_input(index, value, exc, name):
    buf, args = _memcpy_args()
    if isinstance(value, str):  # a null address for a non-empty copy
        value = args[index].clone()
        value[1] = 0
    args[index] = value
    before = buf.base.clone()
    with pytest.raises(exc, match=name):
        K.batch_memcpy_kernel(*args)
    assert torch.equal(buf.base, before)


def test_batch_memcpy_null_address_with_zero_size_is_fine():
    buf = arena()
    src, dst, sizes = addresses(buf, [(0, 100, 0)], torch.int64, torch.int64)
    src[0] = 0
    before = buf.base.clone()
    K.batch_memcpy_kernel(src, dst, sizes)
    assert torch.equal(buf.base, before)
