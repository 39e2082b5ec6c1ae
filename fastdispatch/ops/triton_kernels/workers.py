"""Triton kernels for the model-runner workers: KV slot mapping, batched memcpy, state scatter.

``compute_slot_mapping_kernel`` has the argument names and order of vLLM's
``ComputeSlotMappingKernel.kernel`` (``vllm/v1/worker/block_table.py``);
``batch_memcpy_kernel`` those of ``vllm/v1/worker/mamba_utils.py``; ``scatter_states_kernel``
those of ``_scatter_states_kernel`` (``vllm/model_executor/layers/mamba/ops/scatter_states.py``).
"""

from .._triton import tl, triton


@triton.jit(do_not_specialize=["num_tokens", "max_num_tokens"])
def compute_slot_mapping_kernel(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,  # [num_reqs + 1]
    positions_ptr,  # [num_tokens]
    block_table_ptr,  # [num_reqs, block_table_stride]
    block_table_stride,
    slot_mapping_ptr,  # [max_num_tokens] (output)
    KV_CACHE_BLOCK_SIZE: tl.constexpr,
    TOTAL_CP_WORLD_SIZE: tl.constexpr,
    TOTAL_CP_RANK: tl.constexpr,
    CP_KV_CACHE_INTERLEAVE_SIZE: tl.constexpr,
    PAD_ID: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """Grid ``(num_reqs + 1,)``: program ``r < num_reqs`` maps the tokens of request ``r`` to
    KV-cache slots; the last program pads ``[num_tokens, max_num_tokens)`` with ``PAD_ID``.

    With context parallelism a "virtual" block spans ``KV_CACHE_BLOCK_SIZE *
    TOTAL_CP_WORLD_SIZE`` positions dealt round-robin to ranks in runs of
    ``CP_KV_CACHE_INTERLEAVE_SIZE``; positions owned by another rank map to ``PAD_ID``.
    """
    req_idx = tl.program_id(0)
    lanes = tl.arange(0, BLOCK_SIZE)
    if req_idx == tl.num_programs(0) - 1:
        for chunk in range(num_tokens, max_num_tokens, BLOCK_SIZE):
            offsets = chunk + lanes
            tl.store(slot_mapping_ptr + offsets, PAD_ID, mask=offsets < max_num_tokens)
        return

    start = tl.load(query_start_loc_ptr + req_idx).to(tl.int64)
    end = tl.load(query_start_loc_ptr + req_idx + 1).to(tl.int64)
    row = block_table_ptr + req_idx.to(tl.int64) * block_table_stride
    for chunk in range(start, end, BLOCK_SIZE):
        offsets = chunk + lanes
        in_req = offsets < end
        pos = tl.load(positions_ptr + offsets, mask=in_req, other=0).to(tl.int64)
        vblock = pos // (KV_CACHE_BLOCK_SIZE * TOTAL_CP_WORLD_SIZE)
        voff = pos % (KV_CACHE_BLOCK_SIZE * TOTAL_CP_WORLD_SIZE)
        mine = (voff // CP_KV_CACHE_INTERLEAVE_SIZE) % TOTAL_CP_WORLD_SIZE == TOTAL_CP_RANK
        local_off = (
            voff // (TOTAL_CP_WORLD_SIZE * CP_KV_CACHE_INTERLEAVE_SIZE)
        ) * CP_KV_CACHE_INTERLEAVE_SIZE + voff % CP_KV_CACHE_INTERLEAVE_SIZE
        block_id = tl.load(row + vblock, mask=in_req & mine, other=0).to(tl.int64)
        slot = tl.where(mine, block_id * KV_CACHE_BLOCK_SIZE + local_off, PAD_ID)
        tl.store(slot_mapping_ptr + offsets, slot, mask=in_req)


@triton.jit
def batch_memcpy_kernel(src_ptrs, dst_ptrs, sizes, BLOCK_SIZE: tl.constexpr):
    """Program ``i`` copies ``sizes[i]`` bytes from address ``src_ptrs[i]`` to ``dst_ptrs[i]``.

    Overlap-safe like ``memmove``: when the destination starts inside the source the blocks
    are copied last to first, so no block reads bytes an earlier block already overwrote; within
    a block every lane loads before any lane stores (a barrier when the regions overlap).
    """
    idx = tl.program_id(0)
    src = tl.load(src_ptrs + idx)
    dst = tl.load(dst_ptrs + idx)
    size = tl.load(sizes + idx)
    overlap = (dst < src + size) & (src < dst + size) & (dst != src)
    backward = overlap & (dst > src)
    lanes = tl.arange(0, BLOCK_SIZE)
    n_blocks = (size + BLOCK_SIZE - 1) // BLOCK_SIZE
    for step in range(0, n_blocks):
        first = tl.where(backward, n_blocks - 1 - step, step) * BLOCK_SIZE
        in_range = first + lanes < size
        src_block = (src + first + lanes).to(tl.pointer_type(tl.uint8))
        dst_block = (dst + first + lanes).to(tl.pointer_type(tl.uint8))
        data = tl.load(src_block, mask=in_range)
        if overlap:
            tl.debug_barrier()
        tl.store(dst_block, data, mask=in_range)


@triton.jit
def scatter_states_kernel(
    state_ptr,  # rows of row_size elements, stride_state_batch apart (written in place)
    src_ptr,  # [N] rows of row_size elements, stride_src_batch apart
    indices_ptr,  # [N] int32/int64: the state row each src row goes to
    stride_state_batch,
    stride_src_batch,
    stride_indices,
    row_size: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    launch_pdl: tl.constexpr,
):
    """Grid ``(cdiv(row_size, BLOCK_SIZE), N)``: program ``(blk, b)`` copies block ``blk`` of
    src row ``b`` to state row ``indices[b]`` (converted to state's dtype by the store).
    ``launch_pdl`` orders the launch after the previous kernel's writes on GPUs with
    programmatic dependent launch; it does not change what is written."""
    block_idx = tl.program_id(0)
    batch_idx = tl.program_id(1)
    offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < row_size
    if launch_pdl:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    state_idx = tl.load(indices_ptr + batch_idx * stride_indices).to(tl.int64)
    values = tl.load(src_ptr + batch_idx.to(tl.int64) * stride_src_batch + offsets, mask=mask)
    tl.store(state_ptr + state_idx * stride_state_batch + offsets, values, mask=mask)
