"""Model Runner V2's memory kernels: their contracts (see ``kernels_cpu._contracts_mrv2``)."""

from .contracts import _IN, Contract, _a, _constexpr, _in_index, span

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "zero_kv_blocks_kernel",
        "_mrv2_memory",
        "(blocks, segments, chunks): program ``(b, s, c)`` zeroes chunk ``c`` of block "
        "``block_ids[b]`` of segment ``s``; the CPU kernel takes the three counts from ``grid``",
        "zero the first ``min(seg_page_sizes[s], chunks * BLOCK_SIZE)`` int32 elements of block "
        "``block_ids[b]`` (``seg_block_strides[s]`` elements apart) at address ``seg_addrs[s]``, "
        "for every block and segment of the grid (vLLM's KV-cache block zeroing, "
        "``KVBlockZeroer``)",
        (
            _a("seg_addrs_ptr", _IN, ("int64", "uint64"), "addresses", "``segments``"),
            _in_index("seg_block_strides_ptr", "``segments``; int32 elements between blocks"),
            _in_index("seg_page_sizes_ptr", "``segments``; int32 elements of a page (<= 0: none)"),
            _in_index("block_ids_ptr", "``blocks``"),
            _constexpr("BLOCK_SIZE", ">= 1: int32 elements per chunk"),
        ),
        vllm=("vllm.v1.worker.utils._zero_kv_blocks_kernel",),
        runner="v2",
        releases=span("0.28", "0.34"),
        takes_grid=True,
    ),
)
