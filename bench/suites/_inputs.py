"""Launch arguments for the kernels vLLM has CPU shims for, with the dtypes vLLM actually passes.

Each builder returns the kernel's arguments as an ordered ``{name: value}`` dict in the Triton
kernel's argument order (``docs/kernel_contracts.md``), so an implementation can be called
positionally (as vLLM's ``KernelOverride`` forwards to its C++ shims) or by name. Sizes are a
decode step with speculative drafts: ``B`` requests, ``K`` drafts each, vocab ``V``. Index buffers
are int32 where vLLM allocates int32 (outputs, offsets, draft ids), int64 where it allocates int64
(argmax, bonus, positions, slot mappings); inputs are valid (ids in range, offsets monotonic) so
every implementation takes its real path. Deterministic: a fixed seed per builder.
"""

from __future__ import annotations

import torch

import fdkit.guards as fdguards

I32, I64 = torch.int32, torch.int64


def _out(shape, dtype) -> torch.Tensor:
    """An output buffer poisoned as the tests poison theirs (``fdkit.guards``: never
    uninitialised memory): an entry a kernel does not write keeps the poison, so two
    implementations' buffers can be compared."""
    return fdguards.poison(torch.empty((shape,) if isinstance(shape, int) else shape, dtype=dtype))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _cu(B: int, K: int) -> torch.Tensor:
    """Inclusive cumulative draft counts: request i owns [cu[i-1], cu[i])."""
    return torch.arange(K, B * K + 1, K, dtype=I32)[:B].contiguous()


def _qsl(B: int, L: int) -> torch.Tensor:
    return torch.arange(0, (B + 1) * L, L, dtype=I32)[: B + 1].contiguous()


def expand_kernel(B=4, K=4, **_):
    g = _gen(1)
    temp = torch.rand(B, generator=g, dtype=torch.float32)
    temp[0] = 0.0  # a greedy request: replaced by 1 (replace_from=0 -> replace_to=1)
    return dict(
        output_ptr=_out(B * K, torch.float32),
        input_ptr=temp,
        cu_num_tokens_ptr=_cu(B, K),
        replace_from=0,
        replace_to=1,
        MAX_NUM_TOKENS=K,
    )


def rejection_greedy_sample_kernel(B=4, K=4, V=32000, **_):
    g = _gen(2)
    T = B * K
    draft = torch.randint(0, V, (T,), generator=g, dtype=I32)
    argmax = draft.to(I64).clone()
    flip = torch.rand(T, generator=g) < 0.3  # ~30 % mismatches: a mix of accept lengths
    argmax[flip] = (argmax[flip] + 1) % V
    return dict(
        output_token_ids_ptr=torch.full((B, K + 1), -1, dtype=I32),
        cu_num_draft_tokens_ptr=_cu(B, K),
        draft_token_ids_ptr=draft,
        target_argmax_ptr=argmax,
        bonus_token_ids_ptr=torch.randint(0, V, (B, 1), generator=g, dtype=I64),
        is_greedy_ptr=None,
        max_spec_len=K,
        uniform_probs_ptr=None,
        synthetic_conditional_rates_ptr=None,
        SYNTHETIC_MODE=False,
    )


def _probs(T, V, g):
    return torch.softmax(torch.randn(T, V, generator=g) * 3, dim=-1).contiguous()


def rejection_random_sample_kernel(B=4, K=4, V=32000, **_):
    g = _gen(3)
    T = B * K
    return dict(
        output_token_ids_ptr=torch.full((B, K + 1), -1, dtype=I32),
        cu_num_draft_tokens_ptr=_cu(B, K),
        draft_token_ids_ptr=torch.randint(0, V, (T,), generator=g, dtype=I32),
        draft_probs_ptr=None,
        target_probs_ptr=_probs(T, V, g),
        bonus_token_ids_ptr=torch.randint(0, V, (B, 1), generator=g, dtype=I64),
        recovered_token_ids_ptr=torch.randint(0, V, (T,), generator=g, dtype=I32),
        uniform_probs_ptr=torch.rand(T, generator=g, dtype=torch.float64),
        is_greedy_ptr=torch.zeros(B, dtype=torch.bool),
        max_spec_len=K,
        vocab_size=V,
        synthetic_conditional_rates_ptr=None,
        NO_DRAFT_PROBS=True,
        SYNTHETIC_MODE=False,
    )


def sample_recovered_tokens_kernel(B=4, K=4, V=32000, **_):
    g = _gen(4)
    T = B * K
    q = torch.empty(B, V).exponential_(generator=g)
    return dict(
        output_token_ids_ptr=_out(T, I32),
        cu_num_draft_tokens_ptr=_cu(B, K),
        draft_token_ids_ptr=torch.randint(0, V, (T,), generator=g, dtype=I32),
        draft_probs_ptr=None,
        target_probs_ptr=_probs(T, V, g),
        inv_q_ptr=q.reciprocal(),
        vocab_size=V,
        BLOCK_SIZE=8192,
        NO_DRAFT_PROBS=True,
        USE_FP64_GUMBEL=False,
    )


def eagle_step_slot_mapping_metadata_kernel(B=4, block_size=16, max_model_len=4096, **_):
    g = _gen(5)
    nblk = max_model_len // block_size
    return dict(
        positions_ptr=torch.randint(0, max_model_len - 2, (B,), generator=g, dtype=I64),
        block_table_ptr=torch.randint(0, 10000, (B, nblk), generator=g, dtype=I32),
        block_table_stride=nblk,
        seq_lens_ptr=torch.randint(1, max_model_len // 2, (B,), generator=g, dtype=I32),
        out_clamped_positions_ptr=_out(B, I64),
        out_slot_mapping_ptr=_out(B, I64),
        block_size=block_size,
        max_model_len=max_model_len,
        n_blocks_per_req=nblk,
        PAD_ID=-1,
        batch_size=B,
    )


def eagle_prepare_inputs_padded_kernel(B=4, K=4, **_):
    g = _gen(6)
    return dict(
        cu_num_draft_tokens_ptr=_cu(B, K),
        valid_sampled_tokens_count_ptr=torch.randint(1, K + 2, (B,), generator=g, dtype=I32),
        query_start_loc_gpu_ptr=_qsl(B, K + 1),
        token_indices_to_sample_ptr=_out(B, I32),
        num_rejected_tokens_gpu_ptr=_out(B, I32),
        num_reqs=B,
    )


def eagle_prepare_next_token_padded_kernel(B=4, K=4, V=32000, **_):
    g = _gen(7)
    sampled = torch.randint(0, V, (B, K + 1), generator=g, dtype=I32)
    for i in range(B):  # rejected tail positions are -1
        sampled[i, 1 + (i % (K + 1)) :] = -1
    return dict(
        sampled_token_ids_ptr=sampled,
        discard_request_mask_ptr=torch.tensor([i % 4 == 3 for i in range(B)], dtype=torch.bool),
        backup_next_token_ids_ptr=torch.randint(0, V, (B,), generator=g, dtype=I32),
        next_token_ids_ptr=_out(B, I32),
        valid_sampled_tokens_count_ptr=_out(B, I32),
        vocab_size=V,
        num_sampled_tokens_per_req=K + 1,
        num_reqs=B,
        stride_sampled_token_ids=K + 1,
        BLOCK_SIZE_TOKENS=8,
    )


def copy_and_expand_eagle_inputs_kernel(B=4, K=4, V=32000, P=2, **_):
    g = _gen(8)
    L = K + 1
    total = B * L
    qsl = _qsl(B, L)
    rejected = torch.randint(0, K, (B,), generator=g, dtype=I32)
    q_end = (qsl[1:] - 1 - rejected).to(I32).contiguous()
    out_n = total + B * P
    return dict(
        target_token_ids_ptr=torch.randint(0, V, (total,), generator=g, dtype=I32),
        target_positions_ptr=torch.arange(100, 100 + total, dtype=I64),
        next_token_ids_ptr=torch.randint(0, V, (B,), generator=g, dtype=I32),
        out_input_ids_ptr=_out(out_n, I32),
        out_positions_ptr=_out(out_n, I64),
        out_is_rejected_token_mask_ptr=_out(out_n, torch.bool),
        out_is_masked_token_mask_ptr=_out(out_n, torch.bool),
        out_new_token_indices_ptr=_out(B * P, I32),
        out_hidden_state_mapping_ptr=_out(total, I32),
        query_start_loc_ptr=qsl,
        query_end_loc_ptr=q_end,
        padding_token_id=0,
        parallel_drafting_token_id=V - 1,
        total_input_tokens=total,
        num_padding_slots_per_request=P,
        shift_input_ids=False,
        BLOCK_SIZE_TOKENS=8,
    )


def copy_and_expand_dflash_inputs_kernel(B=4, K=4, V=32000, block_size=16, nblk=64, **_):
    g = _gen(9)
    L = K + 1
    Q = 1 + K
    total = B * L
    qsl = _qsl(B, L)
    starts = torch.randint(0, nblk * block_size // 2, (B,), generator=g)
    positions = torch.cat([torch.arange(int(s), int(s) + L) for s in starts]).to(I64)
    return dict(
        next_token_ids_ptr=torch.randint(0, V, (B,), generator=g, dtype=I32),
        target_positions_ptr=positions,
        out_input_ids_ptr=_out(B * Q, I32),
        out_context_positions_ptr=_out(total, I64),
        out_query_positions_ptr=_out(B * Q, I64),
        out_context_slot_mapping_ptr=_out(total, I64),
        out_query_slot_mapping_ptr=_out(B * Q, I64),
        out_token_indices_ptr=_out(B * K, I32),
        block_table_ptr=torch.randint(0, 10000, (B, nblk), generator=g, dtype=I32),
        block_table_stride=nblk,
        query_start_loc_ptr=qsl,
        num_rejected_tokens_ptr=torch.randint(0, K, (B,), generator=g, dtype=I32),
        parallel_drafting_token_id=V - 1,
        block_size=block_size,
        num_query_per_req=Q,
        num_speculative_tokens=K,
        total_input_tokens=total,
        BLOCK_SIZE=16,
        HAS_NUM_REJECTED=True,
    )


def compute_slot_mapping_kernel(B=4, K=4, block_size=16, nblk=256, **_):
    g = _gen(10)
    L = K + 1
    total = B * L
    starts = torch.randint(0, nblk * block_size // 2, (B,), generator=g)
    positions = torch.cat([torch.arange(int(s), int(s) + L) for s in starts]).to(I64)
    return dict(
        num_tokens=total,
        max_num_tokens=total + 8,
        query_start_loc_ptr=_qsl(B, L),
        positions_ptr=positions,
        block_table_ptr=torch.randint(0, 10000, (B, nblk), generator=g, dtype=I32),
        block_table_stride=nblk,
        slot_mapping_ptr=_out(total + 8, I64),
        KV_CACHE_BLOCK_SIZE=block_size,
        TOTAL_CP_WORLD_SIZE=1,
        TOTAL_CP_RANK=0,
        CP_KV_CACHE_INTERLEAVE_SIZE=1,
        PAD_ID=-1,
        BLOCK_SIZE=1024,
    )


def batch_memcpy_kernel(regions=64, region_bytes=4096, **_):
    src = torch.randint(0, 255, (regions * region_bytes,), generator=_gen(11), dtype=torch.uint8)
    dst = torch.zeros_like(src)
    offs = torch.arange(regions, dtype=I64) * region_bytes
    return dict(
        src_ptrs=offs + src.data_ptr(),
        dst_ptrs=offs + dst.data_ptr(),
        sizes=torch.full((regions,), region_bytes, dtype=I64),
        BLOCK_SIZE=1024,
        _keepalive=(src, dst),
    )


#: kernel name -> (vLLM CPU shim in vllm.utils.cpu_triton_utils, builder, where in reference)
KERNELS = {
    "expand_kernel": ("_expand_kernel_impl", expand_kernel, "sampling"),
    "rejection_greedy_sample_kernel": (
        "_rejection_greedy_sample_kernel_impl",
        rejection_greedy_sample_kernel,
        "sampling",
    ),
    "rejection_random_sample_kernel": (
        "_rejection_random_sample_kernel_impl",
        rejection_random_sample_kernel,
        "sampling",
    ),
    "sample_recovered_tokens_kernel": (
        "_sample_recovered_tokens_kernel_impl",
        sample_recovered_tokens_kernel,
        "sampling",
    ),
    "eagle_step_slot_mapping_metadata_kernel": (
        "_eagle_step_slot_mapping_metadata_kernel_impl",
        eagle_step_slot_mapping_metadata_kernel,
        "spec_decode",
    ),
    "eagle_prepare_inputs_padded_kernel": (
        "_eagle_prepare_inputs_padded_kernel_impl",
        eagle_prepare_inputs_padded_kernel,
        "spec_decode",
    ),
    "eagle_prepare_next_token_padded_kernel": (
        "_eagle_prepare_next_token_padded_kernel_impl",
        eagle_prepare_next_token_padded_kernel,
        "spec_decode",
    ),
    "copy_and_expand_eagle_inputs_kernel": (
        "_copy_and_expand_eagle_inputs_kernel_impl",
        copy_and_expand_eagle_inputs_kernel,
        "spec_decode",
    ),
    "copy_and_expand_dflash_inputs_kernel": (
        "_copy_and_expand_dflash_inputs_kernel_impl",
        copy_and_expand_dflash_inputs_kernel,
        "spec_decode",
    ),
    "compute_slot_mapping_kernel": (
        "_compute_slot_mapping_kernel_impl",
        compute_slot_mapping_kernel,
        "workers",
    ),
    "batch_memcpy_kernel": ("_batch_memcpy_impl", batch_memcpy_kernel, "workers"),
}


def build(name: str, **sizes):
    """Return ``(args_tuple, keepalive)`` for kernel ``name`` in the kernel's argument order."""
    kw = KERNELS[name][1](**sizes)
    keep = kw.pop("_keepalive", None)
    return tuple(kw.values()), kw, keep
