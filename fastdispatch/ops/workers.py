"""Model-runner ops: token -> KV-cache slot mapping, batched raw-address memcpy, and the
mamba/KDA state-cache write (``scatter_states``)."""

from __future__ import annotations

import torch

from .. import kernel_dispatcher
from . import _checks
from .triton_kernels.workers import (
    batch_memcpy_kernel,
    compute_slot_mapping_kernel,
    scatter_states_kernel,
)

__all__ = ["PAD_SLOT_ID", "batch_memcpy", "compute_slot_mapping", "scatter_states"]

#: Slot id of a token that must not be written to the KV cache.
PAD_SLOT_ID = -1
_SLOT_BLOCK = 1024
_MEMCPY_BLOCK = 1024
_SCATTER_BLOCK = 1024


@kernel_dispatcher(kernel=compute_slot_mapping_kernel)
def _compute_slot_mapping(
    num_reqs,
    num_tokens,
    max_num_tokens,
    query_start_loc,
    positions,
    block_table,
    block_table_stride,
    slot_mapping,
    kv_cache_block_size,
    total_cp_world_size,
    total_cp_rank,
    cp_kv_cache_interleave_size,
):
    # One program per request plus one that pads the tail.
    return (num_reqs + 1,), dict(
        KV_CACHE_BLOCK_SIZE=kv_cache_block_size,
        TOTAL_CP_WORLD_SIZE=total_cp_world_size,
        TOTAL_CP_RANK=total_cp_rank,
        CP_KV_CACHE_INTERLEAVE_SIZE=cp_kv_cache_interleave_size,
        PAD_ID=PAD_SLOT_ID,
        BLOCK_SIZE=_SLOT_BLOCK,
    )


@kernel_dispatcher(kernel=batch_memcpy_kernel)
def _batch_memcpy(src_ptrs, dst_ptrs, sizes):
    n = src_ptrs.shape[0]
    return ((n,) if n else None), dict(BLOCK_SIZE=_MEMCPY_BLOCK)


@kernel_dispatcher(kernel=scatter_states_kernel)
def _scatter_states(state, src, indices, row_size):
    block = min(1 << max(0, row_size - 1).bit_length(), _SCATTER_BLOCK)
    grid = (-(-row_size // block), indices.shape[0])
    return (grid if row_size and indices.shape[0] else None), dict(
        stride_state_batch=state.stride(0),
        stride_src_batch=src.stride(0),
        stride_indices=indices.stride(0),
        row_size=row_size,
        BLOCK_SIZE=block,
        launch_pdl=False,
    )


def compute_slot_mapping(
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    block_size: int,
    num_reqs: int | None = None,
    num_tokens: int | None = None,
    cp_world_size: int = 1,
    cp_rank: int = 0,
    cp_interleave_size: int = 1,
) -> torch.Tensor:
    """Map every scheduled token to its KV-cache slot, in place in ``slot_mapping``.

    Token ``t`` of request ``r`` (``query_start_loc[r] <= t < query_start_loc[r + 1]``) at
    position ``p`` goes to ``block_table[r, p // block_size] * block_size + p % block_size``.
    With context parallelism (``cp_world_size`` ranks) positions are dealt round-robin to ranks
    in runs of ``cp_interleave_size``; tokens of other ranks, and the tail
    ``slot_mapping[num_tokens:]``, get ``PAD_SLOT_ID``. ``num_reqs`` defaults to
    ``len(query_start_loc) - 1`` and ``num_tokens`` to ``len(positions)``.
    """
    _checks.index_vector("query_start_loc", query_start_loc)
    if num_reqs is None:
        num_reqs = query_start_loc.shape[0] - 1
    if not 0 <= num_reqs <= query_start_loc.shape[0] - 1:
        raise ValueError(
            _checks.expected(
                "num_reqs",
                f"a value in [0, len(query_start_loc) - 1 = {query_start_loc.shape[0] - 1}]",
                num_reqs,
            )
        )
    _checks.vector("positions", positions, (torch.int32, torch.int64))
    if num_tokens is None:
        num_tokens = positions.shape[0]
    _checks.block_table(block_table, num_reqs)
    _checks.vector("slot_mapping", slot_mapping, (torch.int32, torch.int64))
    if not 0 <= num_tokens <= slot_mapping.shape[0]:
        raise ValueError(
            _checks.expected(
                "num_tokens",
                f"a value in [0, len(slot_mapping) = {slot_mapping.shape[0]}]",
                num_tokens,
            )
        )
    if not 0 <= cp_rank < cp_world_size:
        raise ValueError(
            _checks.expected("cp_rank", f"a value in [0, cp_world_size = {cp_world_size})", cp_rank)
        )
    _compute_slot_mapping(
        num_reqs,
        num_tokens,
        slot_mapping.shape[0],
        query_start_loc,
        positions,
        block_table,
        block_table.stride(0),
        slot_mapping,
        block_size,
        cp_world_size,
        cp_rank,
        cp_interleave_size,
    )
    return slot_mapping


def batch_memcpy(src_ptrs: torch.Tensor, dst_ptrs: torch.Tensor, sizes: torch.Tensor) -> None:
    """Copy ``sizes[i]`` bytes from address ``src_ptrs[i]`` to ``dst_ptrs[i]`` for every ``i``
    (int64 tensors of raw addresses on the device that owns the memory). Each copy is
    overlap-safe like ``memmove``; distinct copies must not overlap each other."""
    _checks.vector("src_ptrs", src_ptrs, (torch.int64,))
    n = src_ptrs.shape[0]
    _checks.vector("dst_ptrs", dst_ptrs, (torch.int64,), n)
    _checks.vector("sizes", sizes, (torch.int64,), n)
    _batch_memcpy(src_ptrs, dst_ptrs, sizes)


def scatter_states(state: torch.Tensor, src: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``state[indices[b]] = src[b]`` for every ``b``, in place (a mamba/KDA state-cache write:
    one row of ``state[0].numel()`` elements per sequence). ``state`` and ``src`` of the same
    rank >= 2 with equal trailing shapes, each row contiguous; ``indices`` 1-D int32/int64, one
    per ``src`` row, each a row of ``state``; a ``src`` of another dtype is converted."""
    if not isinstance(state, torch.Tensor) or state.dim() < 2:
        raise ValueError(_checks.expected("state", "a tensor of two or more dimensions", state))
    if not isinstance(src, torch.Tensor) or src.dim() != state.dim():
        raise ValueError(_checks.expected("src", f"a tensor of {state.dim()} dimensions", src))
    if src.shape[1:] != state.shape[1:]:
        raise ValueError(
            _checks.expected("src", f"rows shaped {tuple(state.shape[1:])}", tuple(src.shape))
        )
    if not isinstance(indices, torch.Tensor) or indices.dim() != 1:
        raise ValueError(_checks.expected("indices", "a 1-D tensor", indices))
    if indices.dtype not in (torch.int32, torch.int64):
        raise TypeError(_checks.expected("indices", "dtype int32 or int64", indices.dtype))
    if indices.shape[0] != src.shape[0]:
        raise ValueError(
            _checks.expected(
                "indices", f"{src.shape[0]} elements (one per src row)", indices.shape[0]
            )
        )
    row_size = 1
    for n in state.shape[1:]:
        row_size *= int(n)
    _scatter_states(state, src, indices, row_size)
    return state
