"""Compile every kernel in ``fastdispatch.ops.triton_kernels`` for a GPU target, with no GPU.

The Triton interpreter accepts code the GPU compiler rejects (``break``, calls to plain Python
helpers, loop-carried values that change type), so passing the interpreter-based parity tests
says nothing about whether a kernel compiles. ``triton.compile`` of an ``ASTSource`` for an
sm_90 target runs the real front end (and the PTX back end) on this machine.

Each kernel is compiled for every specialisation its callers produce: int32 and int64 index
buffers, optional pointers present and ``None``, each constexpr flag both ways.
"""

import itertools
import os

import pytest
from _triton_helpers import require_triton

require_triton(allow_module_level=True)
import triton  # noqa: E402

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    pytest.skip("interpreted kernels cannot be compiled", allow_module_level=True)

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


def _kernel(module, name):
    """Our kernel as defined, even after ``register_kernels`` replaced the module attribute."""
    from fastdispatch.ops import triton_kernels

    assert triton_kernels.QUALNAMES[name] == f"fastdispatch.ops.triton_kernels.{module}.{name}"
    kernel = triton_kernels.kernel(name)
    assert isinstance(kernel, triton.runtime.JITFunction), kernel
    return kernel


def _compile(kernel, args):
    """``args``: ordered name -> Triton type string, or ``("constexpr", value)``."""
    assert tuple(args) == tuple(kernel.arg_names), (tuple(args), kernel.arg_names)
    signature, constexprs = {}, {}
    for name, spec in args.items():
        if isinstance(spec, tuple):
            signature[name] = "constexpr"
            constexprs[name] = spec[1]
        else:
            signature[name] = spec
    # No a*b+c contraction, as kernels_cpu is built (-ffp-contract=off): the GPU build of our
    # kernels must round as the CPU kernels do.
    return triton.compile(
        ASTSource(kernel, signature, constexprs),
        target=TARGET,
        options={"enable_fp_fusion": False},
    )


def _c(value):
    return ("constexpr", value)


IDX = ("i32", "i64")


def _cases_expand():
    for data, cu in itertools.product(("*fp32", "*i32", "*i64"), ("*i32", "*i64")):
        yield dict(
            output_ptr=data,
            input_ptr=data,
            cu_num_tokens_ptr=cu,
            replace_from="i32",
            replace_to="i32",
            MAX_NUM_TOKENS=_c(128),
        )


def _cases_greedy():
    for idx, greedy_none, synth in itertools.product(IDX, (False, True), (False, True)):
        yield dict(
            output_token_ids_ptr=f"*{idx}",
            cu_num_draft_tokens_ptr=f"*{idx}",
            draft_token_ids_ptr=f"*{idx}",
            target_argmax_ptr="*i64",
            bonus_token_ids_ptr="*i64",
            is_greedy_ptr=_c(None) if greedy_none else "*i1",
            max_spec_len="i32",
            uniform_probs_ptr="*fp64" if synth else _c(None),
            synthetic_conditional_rates_ptr="*fp32" if synth else _c(None),
            SYNTHETIC_MODE=_c(synth),
        )


def _cases_random():
    for idx, no_draft, synth in itertools.product(IDX, (False, True), (False, True)):
        yield dict(
            output_token_ids_ptr=f"*{idx}",
            cu_num_draft_tokens_ptr=f"*{idx}",
            draft_token_ids_ptr=f"*{idx}",
            draft_probs_ptr=_c(None) if no_draft else "*fp32",
            target_probs_ptr="*fp32",
            bonus_token_ids_ptr="*i64",
            recovered_token_ids_ptr=f"*{idx}",
            uniform_probs_ptr="*fp64",
            is_greedy_ptr="*i1",
            max_spec_len="i32",
            vocab_size="i32",
            synthetic_conditional_rates_ptr="*fp32" if synth else _c(None),
            NO_DRAFT_PROBS=_c(no_draft),
            SYNTHETIC_MODE=_c(synth),
        )


def _cases_recovered():
    for idx, no_draft, fp64 in itertools.product(IDX, (False, True), (False, True)):
        yield dict(
            output_token_ids_ptr=f"*{idx}",
            cu_num_draft_tokens_ptr=f"*{idx}",
            draft_token_ids_ptr=f"*{idx}",
            draft_probs_ptr=_c(None) if no_draft else "*fp32",
            target_probs_ptr="*fp32",
            inv_q_ptr="*fp64" if fp64 else "*fp32",
            vocab_size="i32",
            BLOCK_SIZE=_c(8192),
            NO_DRAFT_PROBS=_c(no_draft),
            USE_FP64_GUMBEL=_c(fp64),
        )


def _cases_eagle_step():
    for idx in IDX:
        yield dict(
            positions_ptr="*i64",
            block_table_ptr=f"*{idx}",
            block_table_stride="i32",
            seq_lens_ptr=f"*{idx}",
            out_clamped_positions_ptr="*i64",
            out_slot_mapping_ptr="*i64",
            block_size=_c(16),
            max_model_len=_c(4096),
            n_blocks_per_req=_c(256),
            PAD_ID=_c(-1),
            batch_size="i32",
        )


def _cases_prepare_inputs():
    for idx in IDX:
        yield dict(
            cu_num_draft_tokens_ptr=f"*{idx}",
            valid_sampled_tokens_count_ptr=f"*{idx}",
            query_start_loc_gpu_ptr=f"*{idx}",
            token_indices_to_sample_ptr=f"*{idx}",
            num_rejected_tokens_gpu_ptr=f"*{idx}",
            num_reqs="i32",
        )


def _cases_next_token():
    for idx in IDX:
        yield dict(
            sampled_token_ids_ptr=f"*{idx}",
            discard_request_mask_ptr="*i1",
            backup_next_token_ids_ptr=f"*{idx}",
            next_token_ids_ptr=f"*{idx}",
            valid_sampled_tokens_count_ptr=f"*{idx}",
            vocab_size="i32",
            num_sampled_tokens_per_req="i32",
            num_reqs="i32",
            stride_sampled_token_ids="i32",
            BLOCK_SIZE_TOKENS=_c(8),
        )


def _cases_eagle_copy():
    for idx, shift in itertools.product(IDX, (False, True)):
        yield dict(
            target_token_ids_ptr=f"*{idx}",
            target_positions_ptr="*i64",
            next_token_ids_ptr=f"*{idx}",
            out_input_ids_ptr=f"*{idx}",
            out_positions_ptr="*i64",
            out_is_rejected_token_mask_ptr="*i1",
            out_is_masked_token_mask_ptr="*i1",
            out_new_token_indices_ptr=f"*{idx}",
            out_hidden_state_mapping_ptr=f"*{idx}",
            query_start_loc_ptr=f"*{idx}",
            query_end_loc_ptr=f"*{idx}",
            padding_token_id="i32",
            parallel_drafting_token_id="i32",
            total_input_tokens="i32",
            num_padding_slots_per_request="i32",
            shift_input_ids=_c(shift),
            BLOCK_SIZE_TOKENS=_c(256),
        )


def _cases_dflash():
    for idx, has_rej in itertools.product(IDX, (False, True)):
        yield dict(
            next_token_ids_ptr=f"*{idx}",
            target_positions_ptr="*i64",
            out_input_ids_ptr=f"*{idx}",
            out_context_positions_ptr="*i64",
            out_query_positions_ptr="*i64",
            out_context_slot_mapping_ptr="*i64",
            out_query_slot_mapping_ptr="*i64",
            out_token_indices_ptr=f"*{idx}",
            block_table_ptr=f"*{idx}",
            block_table_stride="i32",
            query_start_loc_ptr=f"*{idx}",
            num_rejected_tokens_ptr=f"*{idx}" if has_rej else "i32",
            parallel_drafting_token_id="i32",
            block_size="i32",
            num_query_per_req="i32",
            num_speculative_tokens="i32",
            total_input_tokens="i32",
            BLOCK_SIZE=_c(64),
            HAS_NUM_REJECTED=_c(has_rej),
        )


def _cases_slot_mapping():
    for idx, (world, rank, inter) in itertools.product(IDX, ((1, 0, 1), (2, 1, 4))):
        yield dict(
            num_tokens="i32",
            max_num_tokens="i32",
            query_start_loc_ptr=f"*{idx}",
            positions_ptr="*i64",
            block_table_ptr=f"*{idx}",
            block_table_stride="i32",
            slot_mapping_ptr="*i64",
            KV_CACHE_BLOCK_SIZE=_c(16),
            TOTAL_CP_WORLD_SIZE=_c(world),
            TOTAL_CP_RANK=_c(rank),
            CP_KV_CACHE_INTERLEAVE_SIZE=_c(inter),
            PAD_ID=_c(-1),
            BLOCK_SIZE=_c(1024),
        )


def _cases_memcpy():
    yield dict(src_ptrs="*i64", dst_ptrs="*i64", sizes="*i64", BLOCK_SIZE=_c(1024))


def _cases_topk_topp():
    for logits, idx, prob, (topk, topp, split) in itertools.product(
        ("*fp32", "*bf16"),
        IDX,
        ("*fp32", "*fp64"),
        ((True, False, False), (False, True, True), (True, True, True), (True, True, False)),
    ):
        yield dict(
            LOGITS=logits,
            LOGITS_STRIDE_0="i32",
            BUFFER="*fp32",
            PERCENTILE_TO_STD_TABLE="*fp32",
            NORMAL_CDF_TO_SIGMA_TABLE="*fp32",
            K=f"*{idx}",
            P=prob,
            BATCH_SIZE="i32",
            VOCAB_SIZE=_c(32000),
            MASK_VALUE=_c(float("-inf")),
            BLOCK_SIZE=_c(1024),
            BLOCK_SIZE_TRUNC=_c(512),
            TOPK_ENABLED=_c(topk),
            TOPP_ENABLED=_c(topp),
            SPLIT_COVERS_PONLY=_c(split),
        )


CASES = [
    ("sampling", "expand_kernel", _cases_expand),
    ("sampling", "rejection_greedy_sample_kernel", _cases_greedy),
    ("sampling", "rejection_random_sample_kernel", _cases_random),
    ("sampling", "sample_recovered_tokens_kernel", _cases_recovered),
    ("spec_decode", "eagle_step_slot_mapping_metadata_kernel", _cases_eagle_step),
    ("spec_decode", "eagle_prepare_inputs_padded_kernel", _cases_prepare_inputs),
    ("spec_decode", "eagle_prepare_next_token_padded_kernel", _cases_next_token),
    ("spec_decode", "copy_and_expand_eagle_inputs_kernel", _cases_eagle_copy),
    ("spec_decode", "copy_and_expand_dflash_inputs_kernel", _cases_dflash),
    ("workers", "compute_slot_mapping_kernel", _cases_slot_mapping),
    ("workers", "batch_memcpy_kernel", _cases_memcpy),
    ("topk_topp", "topk_topp_kernel", _cases_topk_topp),
]


#: Kernels using the float64 ``exp`` (libdevice ``__nv_exp``), whose range check takes
#: ``abs.ftz.f32`` of the argument's high word: a flushed subnormal high word is a |x| far
#: below the bound it is compared with, so the branch -- and the result -- are the same.
_F64_EXP = frozenset({"topk_topp_kernel"})


def _ones(args):
    """The same launch with every integer scalar equal to 1: Triton specializes such arguments
    into constants (``tl.constexpr``), which some expressions handle differently."""
    return {k: (_c(1) if v in ("i32", "i64") else v) for k, v in args.items()}


@pytest.mark.parametrize("module,name,cases", CASES, ids=[c[1] for c in CASES])
def test_compiles_for_sm90(module, name, cases):
    kernel = _kernel(module, name)
    for args in cases():
        for variant in (args, _ones(args)):
            _check_ptx(name, _compile(kernel, variant), variant)


def _check_ptx(name, compiled, args):
    ptx = compiled.asm.get("ptx")
    assert ptx, f"{name}: no PTX for {args}"
    # Bitwise GPU/CPU parity needs IEEE float arithmetic: no approximate division or
    # reciprocal, no flush-to-zero (Triton's `/` on fp32 is div.full.f32).
    approx = [
        line.strip()
        for line in ptx.splitlines()
        if any(op in line for op in ("div.full", "div.approx", "rcp.approx", ".ftz."))
        and not (name in _F64_EXP and "abs.ftz.f32" in line)
    ]
    assert not approx, f"{name}: non-IEEE float instructions {approx[:3]}"


_TRITON_DTYPES = {
    "float32": "*fp32",
    "float64": "*fp64",
    "float16": "*fp16",
    "bfloat16": "*bf16",
    "int32": "*i32",
    "int64": "*i64",
    "uint64": "*u64",
    "bool": "*i1",
    "uint8": "*u8",
    "int8": "*i8",
}


def _signature_of(kernel, kwargs):
    """The Triton signature a launch with these arguments specialises to: pointers by dtype,
    the kernel's constexprs as values, integers as i32/i64 by range, floats as fp32."""
    constexpr_names = {kernel.arg_names[i] for i in kernel.constexprs}
    args = {}
    for name in kernel.arg_names:
        value = kwargs.get(name)
        if name in constexpr_names:
            args[name] = _c(value)
        elif value is None:
            args[name] = _c(None)
        elif hasattr(value, "dtype"):
            args[name] = _TRITON_DTYPES[str(value.dtype).removeprefix("torch.")]
        elif isinstance(value, bool):
            args[name] = "i1"
        elif isinstance(value, int):
            args[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
        else:
            args[name] = "fp32"
    return args


def _generated_signatures(name, limit=4):
    """Distinct signatures of the random launches ``fdkit.cases`` makes of ``name`` (both index
    dtypes): the compile check follows the case generators, so a kernel added to the contract
    table is compiled without a line here."""
    import torch

    import fdkit.cases as fdcases

    kernel = _kernel_any(name)
    seen = {}
    for idx in (torch.int32, torch.int64):
        for seed in range(40):
            case = fdcases.make_case(name, seed, idx)
            kwargs, _ = case.build()
            sig = _signature_of(kernel, kwargs)
            seen.setdefault(repr(sorted(sig.items(), key=str)), sig)
            if len(seen) >= limit * (2 if idx is torch.int64 else 1):
                break
    return list(seen.values())


def _kernel_any(name):
    from fastdispatch.ops import triton_kernels

    kernel = triton_kernels.kernel(name)
    assert isinstance(kernel, triton.runtime.JITFunction), kernel
    return kernel


def _generated_kernels():
    import fdkit.cases as fdcases

    return list(fdcases.KERNELS)


@pytest.mark.parametrize("name", _generated_kernels())
def test_the_generated_launches_compile_for_sm90(name):
    kernel = _kernel_any(name)
    for args in _generated_signatures(name):
        _check_ptx(name, _compile(kernel, args), args)
