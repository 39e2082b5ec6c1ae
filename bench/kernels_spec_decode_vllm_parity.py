"""Spec-decode and worker kernels through vLLM's own launchers: stock CPU shims vs kernels_cpu.

    /work/vllmenv/bin/python bench/kernels_spec_decode_vllm_parity.py

Runs vLLM 0.32.0's public helpers and launch owners (``eagle_step_update_slot_mapping_and_metadata``,
``_eagle_prepare_inputs_padded``, ``_eagle_prepare_next_token_padded``,
``_copy_and_expand_eagle_inputs``, ``_copy_and_expand_dflash_inputs`` with and without rejected
counts, ``ComputeSlotMappingKernel``, ``batch_memcpy``) once with the platform's CPU overrides and
once with ``kernels_cpu`` registered through vLLM's ``register_kernels`` -- i.e. launched by name
exactly as vLLM launches -- and compares every output byte. Exit status 1 on any difference other
than the known one: vLLM's slot-mapping shim does not write the cudagraph padding
``slot_mapping[num_tokens:max_num_tokens]`` that the Triton kernel (and kernels_cpu) set to PAD_ID.
"""
import sys
sys.path.insert(0, "/work/main")
import torch
import kernels_cpu
import vllm._custom_ops  # noqa
from vllm.platforms.cpu import CpuPlatform
from vllm.triton_utils.dispatcher import register_kernels
from vllm.v1.spec_decode import utils as U
from vllm.v1.worker import mamba_utils as M
from vllm.v1.worker import block_table as BT

names = {q: getattr(kernels_cpu, f) for q, f in kernels_cpu.VLLM_KERNEL_NAMES.items()
         if not any(s in f for s in ("expand_kernel", "rejection", "recovered"))}
print(len(names), "kernels")

def run_all(seed=0):
    g = torch.Generator().manual_seed(seed)
    out = {}
    B = 5
    # eagle step through vLLM's public helper (input_batch_size > batch_size: padding)
    pos = torch.randint(0, 60, (B,), generator=g); bt = torch.randint(0, 99, (B, 4), generator=g, dtype=torch.int32)
    seq = torch.randint(1, 60, (B,), generator=g, dtype=torch.int32)
    oc = torch.full((B,), -9); osl = torch.full((B + 3,), -9)
    U.eagle_step_update_slot_mapping_and_metadata(pos, bt, seq, 16, 64, oc, osl, input_batch_size=B + 3)
    out["step"] = (seq, oc, osl)
    # prepare inputs padded
    cu = torch.tensor([2, 2, 5, 8, 8], dtype=torch.int32); valid = torch.tensor([1, 1, 2, 4, 1], dtype=torch.int32)
    qsl = torch.tensor([0, 3, 4, 8, 12, 13], dtype=torch.int32)
    ti = torch.full((B,), -9, dtype=torch.int32); nr = torch.full((B,), -9, dtype=torch.int32)
    U._eagle_prepare_inputs_padded(cu, valid, qsl, ti, nr, B)
    out["prep"] = (ti, nr)
    # next token padded
    sampled = torch.randint(-1, 50, (B, 4), generator=g, dtype=torch.int32)
    disc = torch.tensor([False, True, False, False, False]); backup = torch.arange(B, dtype=torch.int32)
    nt = torch.full((B,), -9, dtype=torch.int32); vc = torch.full((B,), -9, dtype=torch.int32)
    U._eagle_prepare_next_token_padded(sampled, disc, backup, nt, vc, 40, 4, B, 4, BLOCK_SIZE_TOKENS=4)
    out["next"] = (nt, vc)
    # copy and expand eagle (shift, 2 padding slots)
    T = 13; P = 2
    tt = torch.randint(0, 99, (T,), generator=g, dtype=torch.int32); tp = torch.arange(T, dtype=torch.int64)
    nx = torch.randint(0, 99, (B,), generator=g, dtype=torch.int32)
    n_out = T + B * (P - 1)
    o = [torch.full((n_out,), -9, dtype=torch.int32), torch.full((n_out,), -9, dtype=torch.int64),
         torch.zeros(n_out, dtype=torch.bool), torch.zeros(n_out, dtype=torch.bool),
         torch.full((B * P,), -9, dtype=torch.int32), torch.full((T,), -9, dtype=torch.int32)]
    qel = qsl[1:] - 1 - torch.tensor([0, 0, 1, 2, 0], dtype=torch.int32)
    U._copy_and_expand_eagle_inputs(target_token_ids_ptr=tt, target_positions_ptr=tp, next_token_ids_ptr=nx,
        out_input_ids_ptr=o[0], out_positions_ptr=o[1], out_is_rejected_token_mask_ptr=o[2],
        out_is_masked_token_mask_ptr=o[3], out_new_token_indices_ptr=o[4], out_hidden_state_mapping_ptr=o[5],
        query_start_loc_ptr=qsl, query_end_loc_ptr=qel, padding_token_id=0, parallel_drafting_token_id=77,
        total_input_tokens=T, num_padding_slots_per_request=P, shift_input_ids=True,
        BLOCK_SIZE_TOKENS=8, batch_size=B, num_blocks=1)
    out["copy"] = tuple(o)
    # dflash
    S = 3; Q = S + 1
    bt2 = torch.randint(0, 99, (B, 8), generator=g, dtype=torch.int32)
    d = [torch.full((B * Q,), -9, dtype=torch.int32), torch.full((T,), -9), torch.full((B * Q,), -9),
         torch.full((T,), -9), torch.full((B * Q,), -9), torch.full((B * S,), -9, dtype=torch.int32)]
    for has in (False, True):
        U._copy_and_expand_dflash_inputs(next_token_ids_ptr=nx, target_positions_ptr=tp, out_input_ids_ptr=d[0],
            out_context_positions_ptr=d[1], out_query_positions_ptr=d[2], out_context_slot_mapping_ptr=d[3],
            out_query_slot_mapping_ptr=d[4], out_token_indices_ptr=d[5], block_table_ptr=bt2, query_start_loc_ptr=qsl,
            num_rejected_tokens_ptr=(torch.tensor([0, 0, 1, 2, 0], dtype=torch.int32) if has else 0),
            block_table_stride=8, parallel_drafting_token_id=77, block_size=4, num_query_per_req=Q,
            num_speculative_tokens=S, total_input_tokens=T, max_tokens_per_req=8, triton_block_size=8,
            has_num_rejected=has)
        out[f"dflash{has}"] = tuple(x.clone() for x in d)
    # compute slot mapping through the launch owner
    sm = torch.full((20,), -9)
    BT._COMPUTE_SLOT_MAPPING_KERNEL(B, T, 20, qsl, tp, bt2, 8, sm, 4, 1, 0, 1)
    out["slot"] = (sm,)
    # batch memcpy
    a = torch.arange(64, dtype=torch.uint8); b = torch.zeros(64, dtype=torch.uint8)
    M.batch_memcpy(torch.tensor([a.data_ptr(), a.data_ptr() + 10], dtype=torch.uint64),
                   torch.tensor([b.data_ptr(), b.data_ptr() + 30], dtype=torch.uint64),
                   torch.tensor([8, 5], dtype=torch.int32))
    out["memcpy"] = (b,)
    return out

CpuPlatform.register_triton_kernel_overrides()
stock = run_all()
register_kernels(names)
ours = run_all()
bound = {U._eagle_prepare_inputs_padded.kernel._impl, BT.ComputeSlotMappingKernel.kernel._impl}
assert bound == {kernels_cpu.eagle_prepare_inputs_padded_kernel, kernels_cpu.compute_slot_mapping_kernel}, bound
failed = False
for k in stock:
    if k == "slot":   # compare the token slots; report the padding separately
        pad_stock, pad_ours = stock[k][0][13:].tolist(), ours[k][0][13:].tolist()
        print(f"slot padding: vLLM shim {pad_stock[:3]}..., kernels_cpu {pad_ours[:3]}... (Triton: PAD_ID)")
        stock[k], ours[k] = (stock[k][0][:13],), (ours[k][0][:13],)
    same = all(torch.equal(x, y) for x, y in zip(stock[k], ours[k]))
    failed |= not same
    print(f"{k:12s} {'identical' if same else 'DIFFERENT'}")
    if not same:
        for x, y in zip(stock[k], ours[k]):
            if not torch.equal(x, y):
                print("  stock", x.tolist(), "\n  ours ", y.tolist())
sys.exit(1 if failed else 0)
