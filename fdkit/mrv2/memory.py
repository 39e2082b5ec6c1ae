"""Launch cases for Model Runner V2's memory kernels (see ``fdkit.mrv2``)."""

import torch

from fdkit._case import Case, batch


class _ArenaCase(Case):
    """A launch writing through raw addresses: segments at offsets of one int32 arena (filled
    with non-zero values, so every zero written shows), the arena compared whole -- what lies
    between and around the segments is the guard."""

    def __init__(self, grid, arena, seg_offsets, tables, block, addr_dtype, note):
        super().__init__("zero_kv_blocks_kernel", grid, {}, note=note)
        self.arena, self.seg_offsets, self.tables = arena, seg_offsets, tables
        self.block, self.addr_dtype = block, addr_dtype

    def build(self, device="cpu"):
        arena = self.arena.clone().to(device)
        base = arena.data_ptr()
        addrs = torch.tensor([base + 4 * o for o in self.seg_offsets], dtype=torch.int64)
        kwargs = dict(
            seg_addrs_ptr=addrs.to(self.addr_dtype).to(device),
            **{name: t.clone().to(device) for name, t in self.tables.items()},
            BLOCK_SIZE=self.block,
        )
        return kwargs, {"arena": arena}


def _case_zero_kv_blocks(rng, idx, scale):
    n_segs = rng.randint(1, 3)
    n_kv_blocks = rng.randint(1, 6)
    pages = [
        rng.choice([0, rng.randint(1, 40)]) if rng.random() < 0.2 else rng.randint(1, 40)
        for _ in range(n_segs)
    ]
    strides = [p + rng.randint(0, 8) for p in pages]
    block = rng.choice([1, 2, 8, 16, 64])
    max_page = max(max(pages), 1)
    # vLLM's chunk count covers the largest page; a smaller one (part of each page) is a
    # launch the kernel honours too
    chunks = -(-max_page // block)
    chunks = rng.choice([chunks, chunks, max(0, chunks - 1), chunks + 1])
    n_blocks = batch(rng, 6)
    block_ids = [rng.randrange(n_kv_blocks) for _ in range(n_blocks)]
    offsets, end = [], rng.randint(0, 5)
    for p, s in zip(pages, strides):
        offsets.append(end)
        end += s * n_kv_blocks + max(p - s, 0) + rng.randint(0, 5)
    g = torch.Generator().manual_seed(rng.getrandbits(63))
    arena = torch.randint(1, 2**31 - 1, (end + 5,), generator=g, dtype=torch.int32)
    extra = rng.randint(0, 2)  # tables longer than the grid reads
    tables = dict(
        seg_block_strides_ptr=torch.tensor(strides + [7] * extra, dtype=idx),
        seg_page_sizes_ptr=torch.tensor(pages + [9] * extra, dtype=idx),
        block_ids_ptr=torch.tensor(block_ids, dtype=idx),
    )
    return _ArenaCase(
        (n_blocks, n_segs, chunks),
        arena,
        offsets,
        tables,
        block,
        rng.choice([torch.int64, torch.uint64]),
        note=f"blocks={block_ids} pages={pages} strides={strides} chunks={chunks} BS={block}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {"zero_kv_blocks_kernel": _case_zero_kv_blocks}
