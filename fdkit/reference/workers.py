"""Plain-torch references for the worker kernels (``kernels_cpu._workers``).

Same signatures and in-place semantics as the compiled kernels, no validation (valid input
expected). ``batch_memcpy_kernel`` has no torch spelling -- its inputs are raw addresses -- so its
reference is the obvious ``ctypes.memmove`` loop, which is also what the speed target compares
against.
"""

import ctypes

import torch

from fdkit._case import Case, Out, Slice, batch, gen, next_pow2

_i64 = torch.int64


def compute_slot_mapping_kernel(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,
    positions_ptr,
    block_table_ptr,
    block_table_stride,
    slot_mapping_ptr,
    KV_CACHE_BLOCK_SIZE,
    TOTAL_CP_WORLD_SIZE=1,
    TOTAL_CP_RANK=0,
    CP_KV_CACHE_INTERLEAVE_SIZE=1,
    PAD_ID=-1,
    BLOCK_SIZE=None,
):
    kb, world, rank, inter = (
        KV_CACHE_BLOCK_SIZE,
        TOTAL_CP_WORLD_SIZE,
        TOTAL_CP_RANK,
        CP_KV_CACHE_INTERLEAVE_SIZE,
    )
    qsl = query_start_loc_ptr.to(_i64)
    n_reqs = qsl.shape[0] - 1
    if n_reqs > 0:
        first, last = int(qsl[0]), int(qsl[-1])
        counts = qsl[1:] - qsl[:-1]
        req = torch.repeat_interleave(torch.arange(n_reqs), counts)
        pos = positions_ptr[first:last].to(_i64)
        virtual = kb * world
        vblock = pos // virtual
        voff = pos - vblock * virtual
        local = (voff // inter) % world == rank
        loff = (voff // (world * inter)) * inter + voff % inter
        block = torch.zeros_like(pos)
        block[local] = block_table_ptr[req[local], vblock[local]].to(_i64)
        slot = torch.where(local, block * kb + loff, torch.full_like(pos, PAD_ID))
        slot_mapping_ptr[first:last] = slot
    if max_num_tokens > num_tokens:
        slot_mapping_ptr[num_tokens:max_num_tokens] = PAD_ID


def compute_slot_mapping_hybrid_kernel(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,
    positions_ptr,
    block_table_ptr,
    block_table_stride,
    block_size,
    slot_mapping_ptr,
    KV_CACHE_BLOCK_SIZE,
    BLOCKS_PER_KV_BLOCK=1,
    TOTAL_CP_WORLD_SIZE=1,
    TOTAL_CP_RANK=0,
    CP_KV_CACHE_INTERLEAVE_SIZE=1,
    PAD_ID=-1,
    BLOCK_SIZE=None,
):
    """vLLM 0.27-0.31's 15-argument form: the table holds kernel blocks of ``block_size``
    tokens, ``BLOCKS_PER_KV_BLOCK`` of them per KV-cache block (written out one token at a
    time, the kernel's formula as it stands, so it shares no code with the fast forms)."""
    kb, world, rank, inter = (
        KV_CACHE_BLOCK_SIZE,
        TOTAL_CP_WORLD_SIZE,
        TOTAL_CP_RANK,
        CP_KV_CACHE_INTERLEAVE_SIZE,
    )
    qsl = [int(v) for v in query_start_loc_ptr.tolist()]
    pos = positions_ptr.tolist()
    flat = block_table_ptr.dim() == 1  # a flat table: the kernel's own addressing
    for r in range(len(qsl) - 1):
        for i in range(qsl[r], qsl[r + 1]):
            p = int(pos[i])
            vblock, voff = divmod(p, kb * world)
            if (voff // inter) % world != rank:
                slot_mapping_ptr[i] = PAD_ID
                continue
            local = (voff // (world * inter)) * inter + voff % inter
            index = vblock * BLOCKS_PER_KV_BLOCK + local // block_size
            if flat:
                block = int(block_table_ptr[r * block_table_stride + index])
            else:
                block = int(block_table_ptr[r, index])
            slot_mapping_ptr[i] = block * block_size + local % block_size
    if max_num_tokens > num_tokens:
        slot_mapping_ptr[num_tokens:max_num_tokens] = PAD_ID


def batch_memcpy_kernel(src_ptrs, dst_ptrs, sizes, BLOCK_SIZE=None):
    for src, dst, size in zip(src_ptrs.tolist(), dst_ptrs.tolist(), sizes.tolist()):
        ctypes.memmove(dst, src, size)


def scatter_states_kernel(
    state_ptr,
    src_ptr,
    indices_ptr,
    stride_state_batch,
    stride_src_batch,
    stride_indices,
    row_size,
    BLOCK_SIZE=None,
    launch_pdl=None,
):
    """Row ``b`` of src (``row_size`` elements from ``b * stride_src_batch``) to row
    ``indices[b]`` of state, one row at a time, in the state's dtype."""
    n = indices_ptr.numel()
    flat_idx = indices_ptr.reshape(-1) if indices_ptr.dim() != 1 else indices_ptr
    for b in range(n if row_size > 0 else 0):
        k = int(flat_idx[b])
        src_off = src_ptr.storage_offset() + b * stride_src_batch
        src_row = src_ptr.as_strided((row_size,), (1,), src_off)
        dst_off = state_ptr.storage_offset() + k * stride_state_batch
        state_ptr.as_strided((row_size,), (1,), dst_off).copy_(src_row.clone())


def case_scatter_states_kernel(rng, idx, scale):
    """State rows at unique slot indices (poisoned state, so unwritten rows must stay poison),
    of a float or integer dtype, src of the same or another dtype, src rows contiguous or a
    column slice of a wider buffer, state rows packed or apart."""
    big = scale != "small"
    rows = rng.randint(1, 64 if big else 8)
    n = min(rows, batch(rng, 64 if big else 8))
    row_size = rng.randint(1, 700 if big else 9)
    stride_state = row_size + rng.choice((0, 0, 3))
    extra = rng.choice((0, 0, 2))
    dtype = rng.choice((torch.float32, torch.float16, torch.int32, torch.int64))
    src_dtype = dtype if rng.random() < 0.8 else rng.choice((torch.float32, torch.int32))
    g = gen(rng)
    values = (torch.randn((n, row_size + extra), generator=g) * 50).to(src_dtype)
    slots = rng.sample(range(rows), n)
    block = min(next_pow2(row_size), 1024)
    return Case(
        "scatter_states_kernel",
        (-(-row_size // block), n),
        dict(
            state_ptr=Out((rows, row_size), dtype, row_stride=stride_state),
            src_ptr=Slice(values, row_size) if extra else values[:, :row_size].contiguous(),
            indices_ptr=torch.tensor(slots, dtype=idx),
            stride_state_batch=stride_state,
            stride_src_batch=row_size + extra,
            stride_indices=1,
            row_size=row_size,
            BLOCK_SIZE=block,
            launch_pdl=False,
        ),
        note=f"rows={rows} n={n} row_size={row_size} {dtype}<-{src_dtype}",
    )
