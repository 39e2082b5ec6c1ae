"""The 15-argument slot-mapping kernel: vLLM 0.27-0.31's form, with KV-cache blocks split into
attention-kernel blocks.

``compute_slot_mapping_hybrid_kernel`` has the argument names and order of vLLM 0.27/0.28's
``block_table._compute_slot_mapping_kernel`` and 0.29-0.31's ``ComputeSlotMappingKernel.kernel``:
``block_size`` (tokens per kernel block) after ``block_table_stride`` and the constexpr
``BLOCKS_PER_KV_BLOCK`` after ``KV_CACHE_BLOCK_SIZE``; the block table holds kernel-block ids.
It is the Triton twin of ``kernels_cpu.compute_slot_mapping_hybrid_kernel``, which the
differential tests compare it with under the interpreter. Kept out of :data:`QUALNAMES` (one
kernel per contract there): no op launches it, it exists to pin down the contract.
"""

from .._triton import tl, triton


@triton.jit(do_not_specialize=["num_tokens", "max_num_tokens"])
def compute_slot_mapping_hybrid_kernel(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,  # [num_reqs + 1]
    positions_ptr,  # [num_tokens]
    block_table_ptr,  # [num_reqs, block_table_stride], kernel-block ids
    block_table_stride,
    block_size,  # tokens per kernel block
    slot_mapping_ptr,  # [max_num_tokens] (output)
    KV_CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCKS_PER_KV_BLOCK: tl.constexpr,
    TOTAL_CP_WORLD_SIZE: tl.constexpr,
    TOTAL_CP_RANK: tl.constexpr,
    CP_KV_CACHE_INTERLEAVE_SIZE: tl.constexpr,
    PAD_ID: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """Grid ``(num_reqs + 1,)``: program ``r < num_reqs`` maps request ``r``'s tokens; the last
    program pads ``[num_tokens, max_num_tokens)`` with ``PAD_ID``.

    A position splits into a virtual block of ``KV_CACHE_BLOCK_SIZE * TOTAL_CP_WORLD_SIZE``
    positions and this rank's local offset in it (runs of ``CP_KV_CACHE_INTERLEAVE_SIZE``
    dealt round-robin); the local offset then splits into a kernel block and an offset of
    ``block_size`` tokens: slot = ``table[r, vblock * BLOCKS_PER_KV_BLOCK + local // block_size]
    * block_size + local % block_size``, ``PAD_ID`` for another rank's position.
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
    virtual = KV_CACHE_BLOCK_SIZE * TOTAL_CP_WORLD_SIZE
    for chunk in range(start, end, BLOCK_SIZE):
        offsets = chunk + lanes
        in_req = offsets < end
        pos = tl.load(positions_ptr + offsets, mask=in_req, other=0).to(tl.int64)
        vblock = pos // virtual
        voff = pos % virtual
        mine = (voff // CP_KV_CACHE_INTERLEAVE_SIZE) % TOTAL_CP_WORLD_SIZE == TOTAL_CP_RANK
        local = (
            voff // (TOTAL_CP_WORLD_SIZE * CP_KV_CACHE_INTERLEAVE_SIZE)
        ) * CP_KV_CACHE_INTERLEAVE_SIZE + voff % CP_KV_CACHE_INTERLEAVE_SIZE
        kernel_block = vblock * BLOCKS_PER_KV_BLOCK + local // block_size
        block_id = tl.load(row + kernel_block, mask=in_req & mine, other=0).to(tl.int64)
        slot = tl.where(mine, block_id * block_size + local % block_size, PAD_ID)
        tl.store(slot_mapping_ptr + offsets, slot, mask=in_req)
