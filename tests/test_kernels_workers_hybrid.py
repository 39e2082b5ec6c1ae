"""The 15-argument slot-mapping kernel (vLLM 0.27-0.31's form) three ways: our Triton kernel under
the interpreter, ``kernels_cpu.compute_slot_mapping_hybrid_kernel`` and the plain reference.

Same discipline as the 13-argument kernel's tests (``test_kernels_workers.py``): hypothesis over
sizes and edge cases, int32/int64 per buffer, poisoned outputs inside guard regions, the
whole allocations compared bit for bit, every bad input raising the named error with nothing
written, 1- vs 2-thread invariance. Both of the Cython kernel's paths are drawn: vLLM's own
split (``block_size * BLOCKS_PER_KV_BLOCK == KV_CACHE_BLOCK_SIZE``, one rank: the 13-argument
fast path) and any other combination (the general formula, context parallelism included).

The interpreter must be on before Triton decorates anything, so in an ordinary run the
interpreter half re-runs this module in a subprocess with ``TRITON_INTERPRET=1`` (as
``test_triton_parity.py`` does) and reports its outcome per index dtype.
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import kernels_cpu as K
from fdkit.reference import workers as R
from tests._fuzz import fuzz_settings
from tests._spec_helpers import (
    INDEX_DTYPES,
    Guarded,
    assert_rejected,
    assert_same_buffers,
    bad_arg,
    bad_at,
    check_bad_input,
    clone_case,
    launch_args,
    poke,
    run_both,
    set_arg,
    slot_mapping_case,
    threads,
)
from tests._triton_helpers import assert_interpreted_passed, interpreted_run

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

dts = st.sampled_from(INDEX_DTYPES)


def _kernel_block(pos, kb, world, rank, inter, bs, bpk):
    """The kernel's block index of a position, or None for another rank's position."""
    vblock, voff = divmod(pos, kb * world)
    if (voff // inter) % world != rank:
        return None
    local = (voff // (world * inter)) * inter + voff % inter
    return vblock * bpk + local // bs


@st.composite
def hybrid_cases(draw, max_r=5, max_len=6, max_pos=60, idx=None, block=1024, vllm_split=False):
    """``vllm_split``: only what vLLM itself passes (one rank, kernel blocks tiling)."""
    r_n = draw(st.integers(0, max_r))
    lens = draw(st.lists(st.integers(0, max_len), min_size=r_n, max_size=r_n))
    world = 1 if vllm_split else draw(st.sampled_from([1, 1, 2, 3]))
    rank = draw(st.integers(0, world - 1))
    inter = draw(st.sampled_from([1, 2, 4]))
    kb = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
    if vllm_split or draw(st.booleans()):  # vLLM's split: kernel blocks tile the KV block
        bs = draw(st.sampled_from([d for d in range(1, kb + 1) if kb % d == 0]))
        bpk = kb // bs
    else:  # any other combination: the kernel's formula as written
        bs = draw(st.integers(1, kb + 2))
        bpk = draw(st.integers(0, 3))
    qsl = [draw(st.integers(0, 2))]
    for n in lens:
        qsl.append(qsl[-1] + n)
    n_pos = qsl[-1] + draw(st.integers(0, 2))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    pos = torch.randint(0, max_pos + 1, (n_pos,), generator=gen)
    blocks = [_kernel_block(int(p), kb, world, rank, inter, bs, bpk) for p in pos.tolist()]
    cols = max([b for b in blocks if b is not None], default=0) + 1 + draw(st.integers(0, 2))
    extra = draw(st.sampled_from([0, 0, 3]))
    rows = r_n + draw(st.integers(0, 2))
    num_tokens = qsl[-1] + draw(st.integers(0, 3))
    max_num_tokens = num_tokens + draw(st.integers(-1, 4))
    n_out = max(qsl[-1], max_num_tokens) + draw(st.integers(0, 2))

    def dtype():
        return idx if idx is not None else draw(dts)

    return dict(
        num_tokens=num_tokens,
        max_num_tokens=max_num_tokens,
        query_start_loc_ptr=Guarded((r_n + 1,), dtype(), qsl),
        positions_ptr=Guarded((n_pos,), dtype(), pos),
        block_table_ptr=Guarded(
            (rows, cols),
            dtype(),
            torch.randint(0, 401, (rows * cols,), generator=gen),
            extra_cols=extra,
        ),
        block_table_stride=cols + extra,
        block_size=bs,
        slot_mapping_ptr=Guarded((n_out,), dtype()),
        KV_CACHE_BLOCK_SIZE=kb,
        BLOCKS_PER_KV_BLOCK=bpk,
        TOTAL_CP_WORLD_SIZE=world,
        TOTAL_CP_RANK=rank,
        CP_KV_CACHE_INTERLEAVE_SIZE=inter,
        PAD_ID=draw(st.sampled_from([-1, 0])),
        BLOCK_SIZE=block,
    )


if INTERPRETED:
    from fastdispatch.ops.triton_kernels.workers_hybrid import compute_slot_mapping_hybrid_kernel

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @fuzz_settings(
        40,
        deep_examples=500,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def test_interpreted_parity(idx, data):
        case = data.draw(
            hybrid_cases(idx=getattr(torch, idx), block=data.draw(st.sampled_from([2, 4, 8])))
        )
        kernel = compute_slot_mapping_hybrid_kernel
        assert type(kernel).__name__ == "InterpretedFunction"
        tri, cpu, ref = clone_case(case), clone_case(case), clone_case(case)
        grid = (case["query_start_loc_ptr"].shape[0],)  # num_reqs + 1 programs
        kernel[grid](**launch_args(tri))
        if data.draw(st.booleans()):
            K.compute_slot_mapping_hybrid_kernel(*launch_args(cpu).values())
        else:
            K.compute_slot_mapping_hybrid_kernel(**launch_args(cpu))
        R.compute_slot_mapping_hybrid_kernel(**launch_args(ref))
        assert_same_buffers(tri, ref)
        assert_same_buffers(cpu, ref)

else:

    @pytest.fixture(scope="module")
    def interpreter_run(tmp_path_factory):
        """Run this module once under ``TRITON_INTERPRET=1``; per-test outcomes from JUnit XML."""
        pytest.importorskip("triton")
        report = tmp_path_factory.mktemp("hybrid") / "junit.xml"
        return interpreted_run(__file__, report, "-k", "test_interpreted_parity")

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    def test_interpreted_parity(interpreter_run, idx):
        """Triton (interpreted) == kernels_cpu == reference, guards and poison included."""
        assert_interpreted_passed(interpreter_run, f"test_interpreted_parity[{idx}]")


@fuzz_settings(150, deadline=None)
@given(case=hybrid_cases(), positional=st.booleans())
def test_hybrid_matches_reference(case, positional):
    mine, ref = run_both(
        K.compute_slot_mapping_hybrid_kernel,
        R.compute_slot_mapping_hybrid_kernel,
        case,
        positional=positional,
    )
    assert_same_buffers(mine, ref)


@fuzz_settings(15, deep_examples=300, deadline=None)  # large cases, launched twice
@given(case=hybrid_cases(max_r=8, max_len=1500, max_pos=6000))
def test_hybrid_thread_count_invariance(case):
    """Large prefills span several parallel chunks, on both paths."""
    with threads(1):
        one, ref = run_both(
            K.compute_slot_mapping_hybrid_kernel, R.compute_slot_mapping_hybrid_kernel, case
        )
    with threads(2):
        two = clone_case(case)
        K.compute_slot_mapping_hybrid_kernel(**launch_args(two))
    assert_same_buffers(one, ref)
    assert_same_buffers(two, ref)


@fuzz_settings(60, deadline=None)
@given(case=hybrid_cases(vllm_split=True))
def test_vllm_split_is_the_13_argument_kernel(case):
    """With one rank and kernel blocks tiling the KV-cache block (what vLLM passes), the slots
    are the 13-argument kernel's with ``block_size``-token blocks: the table then holds
    kernel-block ids, one per ``block_size`` positions."""
    hybrid, plain = clone_case(case), clone_case(case)
    K.compute_slot_mapping_hybrid_kernel(**launch_args(hybrid))
    args = launch_args(plain)
    args.pop("BLOCKS_PER_KV_BLOCK")
    args["KV_CACHE_BLOCK_SIZE"] = args.pop("block_size")
    K.compute_slot_mapping_kernel(**args)
    assert_same_buffers(hybrid, plain)


def _hand_case(**over):
    """Kernel blocks of 2 tokens, 2 of them per KV-cache block (4 tokens)."""
    positions, table = [5, 0, 3, 7], [7, 8, 9, 10, 20, 21, 22, 23]
    args = {"block_size": 2, "BLOCKS_PER_KV_BLOCK": 2, **over}
    return slot_mapping_case("compute_slot_mapping_hybrid_kernel", positions, table, 4, **args)


#: BLOCKS_PER_KV_BLOCK -> the slots of the hand case, worked out by hand
HAND_SLOTS = {
    # request 0: position 5 = KV block 1, local 1 -> kernel block 1*2 + 1//2 = 2, offset 1
    # request 1: 0 -> block 0 off 0; 3 -> block 0*2 + 3//2 = 1 off 1; 7 -> block 1*2 + 1 = 3 off 1
    2: [9 * 2 + 1, 20 * 2, 21 * 2 + 1, 23 * 2 + 1, -1, -1],
    # the general path (no tiling), same table: block = vblock + l // bs
    # 5 -> 1 + 1//2 = 1, off 1; 0 -> 0; 3 -> 0 + 1 = 1, off 1; 7 -> 1 + 3//2 = 2, off 1
    1: [8 * 2 + 1, 20 * 2, 21 * 2 + 1, 22 * 2 + 1, -1, -1],
}


@pytest.mark.parametrize("blocks_per_kv_block", sorted(HAND_SLOTS, reverse=True))
def test_hybrid_hand_checked(blocks_per_kv_block):
    case = _hand_case(BLOCKS_PER_KV_BLOCK=blocks_per_kv_block)
    K.compute_slot_mapping_hybrid_kernel(**launch_args(case))
    assert case["slot_mapping_ptr"].view.tolist() == HAND_SLOTS[blocks_per_kv_block]


HYBRID_BAD = [
    bad_arg("block_size", 0, ValueError),
    bad_arg("block_size", "x", TypeError),
    bad_arg("BLOCKS_PER_KV_BLOCK", -1, ValueError),
    bad_at("positions_ptr", 2, -1, IndexError),
    (poke("positions_ptr", 3, 8), IndexError, "block_table_ptr"),
    (
        lambda c: (c.update(BLOCKS_PER_KV_BLOCK=3), c["positions_ptr"].view.__setitem__(3, 7)),
        IndexError,
        "block_table_ptr",
    ),
    bad_at("query_start_loc_ptr", 1, 5, ValueError),
    bad_arg("KV_CACHE_BLOCK_SIZE", 0, ValueError),
    bad_arg("TOTAL_CP_RANK", 1, ValueError),
    (set_arg("max_num_tokens", 7), ValueError, "slot_mapping_ptr"),
    bad_arg("block_table_stride", 5, ValueError),
    bad_arg("block_table_ptr", lambda c: torch.zeros(2, 4, dtype=torch.float32), TypeError),
]


@pytest.mark.parametrize(
    "mutate,exc,name", HYBRID_BAD, ids=[f"{i}-{b[2]}" for i, b in enumerate(HYBRID_BAD)]
)
def test_hybrid_bad_input(mutate, exc, name):
    check_bad_input(K.compute_slot_mapping_hybrid_kernel, _hand_case, mutate, exc, name)


def test_huge_blocks_per_kv_block_is_refused_not_wrapped():
    """``vblock * BLOCKS_PER_KV_BLOCK`` past int64 must be an out-of-table index, not a
    wrapped-around small one that reads some other row."""
    case = _hand_case(BLOCKS_PER_KV_BLOCK=2**62, block_size=1)
    # local blocks 1, 0, 2 are in the table; position 12 is KV block 3: 3 * 2**62 wraps int64
    # to a negative index, which a plain ``index < cols`` test would let through
    case["positions_ptr"].view.copy_(torch.tensor([1, 0, 2, 12]))
    assert_rejected(K.compute_slot_mapping_hybrid_kernel, case, IndexError, "block_table_ptr")


def test_signatures_are_vllms():
    """The argument names, in order, of vLLM 0.27-0.31's kernel (and of our Triton twin)."""
    from kernels_cpu._overrides import parameter_names

    vllm_15 = (
        "num_tokens",
        "max_num_tokens",
        "query_start_loc_ptr",
        "positions_ptr",
        "block_table_ptr",
        "block_table_stride",
        "block_size",
        "slot_mapping_ptr",
        "KV_CACHE_BLOCK_SIZE",
        "BLOCKS_PER_KV_BLOCK",
        "TOTAL_CP_WORLD_SIZE",
        "TOTAL_CP_RANK",
        "CP_KV_CACHE_INTERLEAVE_SIZE",
        "PAD_ID",
        "BLOCK_SIZE",
    )
    assert parameter_names(K.compute_slot_mapping_hybrid_kernel) == vllm_15
    assert parameter_names(R.compute_slot_mapping_hybrid_kernel) == vllm_15
    from fastdispatch.ops.triton_kernels import workers_hybrid

    kernel = workers_hybrid.compute_slot_mapping_hybrid_kernel
    names = getattr(kernel, "arg_names", None) or parameter_names(kernel)
    assert tuple(names) == vllm_15


@pytest.mark.parametrize("idx", ["i32", "i64"])
def test_triton_kernel_compiles_for_a_gpu(idx):
    """The interpreter accepts code the GPU compiler rejects: compile for sm_90 (no GPU needed),
    without FP fusion as ``test_triton_compile.py`` does for the other kernels."""
    triton = pytest.importorskip("triton")
    if INTERPRETED:
        pytest.skip("interpreted kernels cannot be compiled (the outer run compiles them)")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fastdispatch.ops.triton_kernels.workers_hybrid import compute_slot_mapping_hybrid_kernel

    signature = dict(
        num_tokens="i32",
        max_num_tokens="i32",
        query_start_loc_ptr=f"*{idx}",
        positions_ptr="*i64",
        block_table_ptr=f"*{idx}",
        block_table_stride="i32",
        block_size="i32",
        slot_mapping_ptr="*i64",
    )
    constexprs = dict(
        KV_CACHE_BLOCK_SIZE=32,
        BLOCKS_PER_KV_BLOCK=2,
        TOTAL_CP_WORLD_SIZE=2,
        TOTAL_CP_RANK=1,
        CP_KV_CACHE_INTERLEAVE_SIZE=4,
        PAD_ID=-1,
        BLOCK_SIZE=1024,
    )
    signature.update({name: "constexpr" for name in constexprs})
    kernel = compute_slot_mapping_hybrid_kernel
    assert tuple(signature) == tuple(kernel.arg_names)
    compiled = triton.compile(
        ASTSource(kernel, signature, constexprs),
        target=GPUTarget("cuda", 90, 32),
        options={"enable_fp_fusion": False},
    )
    assert compiled.asm.get("ptx")
