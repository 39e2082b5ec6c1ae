"""EAGLE / DFlash speculative-decoding input preparation ops, one per kernel.

Each op allocates (or takes) its outputs, works out the launch grid and launches one of our
Triton kernels through a launch owner (``kernel_dispatcher``); see :mod:`fastdispatch.ops` for
which implementation runs. Index outputs take the dtype of the index inputs they derive from.
"""

from __future__ import annotations

from collections import namedtuple

import torch

from .. import kernel_dispatcher
from . import _checks
from .triton_kernels.spec_decode import (
    copy_and_expand_dflash_inputs_kernel,
    copy_and_expand_eagle_inputs_kernel,
    eagle_prepare_inputs_padded_kernel,
    eagle_prepare_next_token_padded_kernel,
    eagle_step_slot_mapping_metadata_kernel,
)

__all__ = [
    "PADDING_SLOT_ID",
    "DFlashInputs",
    "EagleInputs",
    "copy_and_expand_dflash_inputs",
    "copy_and_expand_eagle_inputs",
    "eagle_prepare_inputs_padded",
    "eagle_prepare_next_token_padded",
    "eagle_step_update_slot_mapping_and_metadata",
]

#: Slot id of a token that must not be written to the KV cache.
PADDING_SLOT_ID = -1
#: Largest token block one program of the copy-and-expand kernels handles.
_MAX_TOKEN_BLOCK = 256


def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def _max_span(loc):
    """Longest ``loc[i+1] - loc[i]`` (a device sync on GPU: callers may pass it instead)."""
    if loc.shape[0] < 2:
        return 0
    return int((loc[1:] - loc[:-1]).max())


# -- launch owners ------------------------------------------------------------------------------


@kernel_dispatcher(kernel=eagle_step_slot_mapping_metadata_kernel)
def _eagle_step(
    positions,
    block_table,
    block_table_stride,
    seq_lens,
    out_clamped_positions,
    out_slot_mapping,
    block_size,
    max_model_len,
    n_blocks_per_req,
    PAD_ID,
    batch_size,
    input_batch_size,
):
    return ((input_batch_size,) if input_batch_size else None), {}


@kernel_dispatcher(kernel=eagle_prepare_inputs_padded_kernel)
def _eagle_prepare_inputs(
    cu_num_draft_tokens,
    valid_sampled_tokens_count,
    query_start_loc_gpu,
    token_indices_to_sample,
    num_rejected_tokens_gpu,
    num_reqs,
):
    return ((num_reqs,) if num_reqs else None), {}


@kernel_dispatcher(kernel=eagle_prepare_next_token_padded_kernel)
def _eagle_prepare_next_token(
    sampled_token_ids,
    discard_request_mask,
    backup_next_token_ids,
    next_token_ids,
    valid_sampled_tokens_count,
    vocab_size,
    num_sampled_tokens_per_req,
    num_reqs,
    stride_sampled_token_ids,
):
    return ((num_reqs,) if num_reqs else None), dict(
        BLOCK_SIZE_TOKENS=_next_pow2(num_sampled_tokens_per_req)
    )


@kernel_dispatcher(kernel=copy_and_expand_eagle_inputs_kernel)
def _copy_and_expand_eagle(
    target_token_ids,
    target_positions,
    next_token_ids,
    out_input_ids,
    out_positions,
    out_is_rejected_token_mask,
    out_is_masked_token_mask,
    out_new_token_indices,
    out_hidden_state_mapping,
    query_start_loc,
    query_end_loc,
    padding_token_id,
    parallel_drafting_token_id,
    total_input_tokens,
    num_padding_slots_per_request,
    shift_input_ids,
    num_reqs,
    max_tokens_per_req,
):
    block = min(_MAX_TOKEN_BLOCK, _next_pow2(max_tokens_per_req))
    grid = (num_reqs, -(-max_tokens_per_req // block)) if num_reqs and max_tokens_per_req else None
    return grid, dict(BLOCK_SIZE_TOKENS=block)


@kernel_dispatcher(kernel=copy_and_expand_dflash_inputs_kernel)
def _copy_and_expand_dflash(
    next_token_ids,
    target_positions,
    out_input_ids,
    out_context_positions,
    out_query_positions,
    out_context_slot_mapping,
    out_query_slot_mapping,
    out_token_indices,
    block_table,
    block_table_stride,
    query_start_loc,
    num_rejected_tokens,
    parallel_drafting_token_id,
    block_size,
    num_query_per_req,
    num_speculative_tokens,
    total_input_tokens,
    max_tokens_per_req,
):
    num_reqs = query_start_loc.shape[0] - 1
    block = min(_MAX_TOKEN_BLOCK, _next_pow2(max_tokens_per_req))
    grid = (num_reqs, -(-max_tokens_per_req // block)) if num_reqs > 0 else None
    has_rejected = isinstance(num_rejected_tokens, torch.Tensor)
    return grid, dict(
        BLOCK_SIZE=block,
        HAS_NUM_REJECTED=has_rejected,
        num_rejected_tokens_ptr=num_rejected_tokens if has_rejected else 0,
    )


# -- ops ----------------------------------------------------------------------------------------


def eagle_step_update_slot_mapping_and_metadata(
    positions: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    block_size: int,
    max_model_len: int,
    out_clamped_positions: torch.Tensor,
    out_slot_mapping: torch.Tensor,
    input_batch_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One EAGLE autoregressive step, fused: ``out_clamped_positions = positions + 1`` (0 once
    past ``max_model_len``), ``out_slot_mapping`` from the block table (``PADDING_SLOT_ID`` past
    the end and for the ``input_batch_size - batch`` padding slots), ``seq_lens += 1`` in place
    (1 past the end). ``block_table`` [batch, blocks] may be a row slice of a wider table."""
    _checks.vector("positions", positions, (torch.int32, torch.int64))
    batch = positions.shape[0]
    _checks.matrix(
        "block_table", block_table, (torch.int32, torch.int64), rows=batch, contiguous=False
    )
    _checks.index_vector("seq_lens", seq_lens, batch)
    _checks.vector(
        "out_clamped_positions", out_clamped_positions, (torch.int32, torch.int64), batch
    )
    if input_batch_size is None:
        input_batch_size = batch
    if input_batch_size < batch:
        raise ValueError(
            _checks.expected("input_batch_size", f">= the batch size {batch}", input_batch_size)
        )
    _checks.vector("out_slot_mapping", out_slot_mapping, (torch.int32, torch.int64))
    if out_slot_mapping.shape[0] < input_batch_size:
        raise ValueError(
            _checks.expected(
                "out_slot_mapping",
                f"at least input_batch_size = {input_batch_size} slots",
                out_slot_mapping.shape[0],
            )
        )
    _eagle_step(
        positions,
        block_table,
        block_table.stride(0),
        seq_lens,
        out_clamped_positions,
        out_slot_mapping,
        block_size,
        max_model_len,
        block_table.shape[1],
        PADDING_SLOT_ID,
        batch,
        input_batch_size,
    )
    return out_clamped_positions, out_slot_mapping


def eagle_prepare_inputs_padded(
    cu_num_draft_tokens: torch.Tensor,
    valid_sampled_tokens_count: torch.Tensor,
    query_start_loc: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per request: ``num_rejected = drafts + 1 - valid`` (0 without drafts) and the token index
    to sample, ``query_start_loc[i + 1] - 1 - num_rejected``.

    Returns ``(token_indices_to_sample, num_rejected_tokens)``, ``[num_reqs]`` each in
    ``query_start_loc``'s dtype."""
    _checks.index_vector("cu_num_draft_tokens", cu_num_draft_tokens)
    num_reqs = cu_num_draft_tokens.shape[0]
    _checks.index_vector("valid_sampled_tokens_count", valid_sampled_tokens_count, num_reqs)
    _checks.index_vector("query_start_loc", query_start_loc)
    if query_start_loc.shape[0] < num_reqs + 1:
        raise ValueError(
            _checks.expected(
                "query_start_loc",
                f"at least num_reqs + 1 = {num_reqs + 1} entries",
                query_start_loc.shape[0],
            )
        )
    token_indices = query_start_loc.new_empty(num_reqs)
    num_rejected = query_start_loc.new_empty(num_reqs)
    _eagle_prepare_inputs(
        cu_num_draft_tokens,
        valid_sampled_tokens_count,
        query_start_loc,
        token_indices,
        num_rejected,
        num_reqs,
    )
    return token_indices, num_rejected


def eagle_prepare_next_token_padded(
    sampled_token_ids: torch.Tensor,
    discard_request_mask: torch.Tensor,
    backup_next_token_ids: torch.Tensor,
    vocab_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per request: the number of valid sampled tokens (not -1, below ``vocab_size``) and the
    next token -- the last valid one, or the backup when there is none or the request is
    discarded (a discarded request counts 0).

    ``sampled_token_ids`` [num_reqs, n] may be a row slice of a wider buffer. Returns
    ``(next_token_ids, valid_sampled_tokens_count)`` in ``backup_next_token_ids``' dtype."""
    _checks.matrix(
        "sampled_token_ids", sampled_token_ids, (torch.int32, torch.int64), contiguous=False
    )
    num_reqs, n = sampled_token_ids.shape
    _checks.vector("discard_request_mask", discard_request_mask, (torch.bool,), num_reqs)
    _checks.index_vector("backup_next_token_ids", backup_next_token_ids, num_reqs)
    next_token_ids = backup_next_token_ids.new_empty(num_reqs)
    valid_count = backup_next_token_ids.new_empty(num_reqs)
    _eagle_prepare_next_token(
        sampled_token_ids,
        discard_request_mask,
        backup_next_token_ids,
        next_token_ids,
        valid_count,
        vocab_size,
        n,
        num_reqs,
        sampled_token_ids.stride(0),
    )
    return next_token_ids, valid_count


EagleInputs = namedtuple(
    "EagleInputs",
    [
        "input_ids",
        "positions",
        "is_rejected_token_mask",
        "is_masked_token_mask",
        "new_token_indices",
        "hidden_state_mapping",
    ],
)


def copy_and_expand_eagle_inputs(
    target_token_ids: torch.Tensor,
    target_positions: torch.Tensor,
    next_token_ids: torch.Tensor,
    query_start_loc: torch.Tensor,
    query_end_loc: torch.Tensor,
    *,
    num_padding_slots_per_request: int,
    shift_input_ids: bool,
    padding_token_id: int = 0,
    parallel_drafting_token_id: int = 0,
    max_query_len: int | None = None,
) -> EagleInputs:
    """Lay out the drafter's inputs from the target model's (padded) batch.

    Per request (input tokens ``[query_start_loc[r], query_start_loc[r+1])``, the last accepted
    one at ``query_end_loc[r]``): the accepted tokens (minus the first with
    ``shift_input_ids``), the bonus token ``next_token_ids[r]``, ``num_padding_slots_per_request
    - 1`` parallel-drafting tokens, then one padding token per rejected input. Returns an
    :class:`EagleInputs` of new tensors; ``new_token_indices`` [num_reqs * slots] are the output
    indices of each request's new tokens; ``hidden_state_mapping`` [total input tokens] the
    output index of each input token (written only with ``shift_input_ids``).
    ``max_query_len`` (the longest request) is computed when not given (a device sync on GPU).
    """
    _checks.index_vector("target_token_ids", target_token_ids)
    total_in = target_token_ids.shape[0]
    _checks.vector("target_positions", target_positions, (torch.int32, torch.int64), total_in)
    _checks.index_vector("query_start_loc", query_start_loc)
    num_reqs = query_start_loc.shape[0] - 1
    if num_reqs < 0:
        raise ValueError(_checks.expected("query_start_loc", "num_reqs + 1 >= 1 entries", 0))
    _checks.index_vector("next_token_ids", next_token_ids, num_reqs)
    _checks.index_vector("query_end_loc", query_end_loc, num_reqs)
    slots = int(num_padding_slots_per_request)
    if slots < 1:
        raise ValueError(_checks.expected("num_padding_slots_per_request", ">= 1", slots))
    net_new = slots - 1 if shift_input_ids else slots
    total_out = total_in + net_new * num_reqs
    if max_query_len is None:
        max_query_len = _max_span(query_start_loc)
    dev, idx = target_token_ids.device, target_token_ids.dtype
    out = EagleInputs(
        input_ids=torch.empty(total_out, dtype=idx, device=dev),
        positions=torch.empty(total_out, dtype=target_positions.dtype, device=dev),
        is_rejected_token_mask=torch.empty(total_out, dtype=torch.bool, device=dev),
        is_masked_token_mask=torch.empty(total_out, dtype=torch.bool, device=dev),
        new_token_indices=torch.empty(num_reqs * slots, dtype=query_start_loc.dtype, device=dev),
        hidden_state_mapping=torch.empty(total_in, dtype=query_start_loc.dtype, device=dev),
    )
    _copy_and_expand_eagle(
        target_token_ids,
        target_positions,
        next_token_ids,
        out.input_ids,
        out.positions,
        out.is_rejected_token_mask,
        out.is_masked_token_mask,
        out.new_token_indices,
        out.hidden_state_mapping,
        query_start_loc,
        query_end_loc,
        padding_token_id,
        parallel_drafting_token_id,
        total_in,
        slots,
        bool(shift_input_ids),
        num_reqs,
        max_query_len + net_new,
    )
    return out


DFlashInputs = namedtuple(
    "DFlashInputs",
    [
        "input_ids",
        "context_positions",
        "query_positions",
        "context_slot_mapping",
        "query_slot_mapping",
        "token_indices",
    ],
)


def copy_and_expand_dflash_inputs(
    next_token_ids: torch.Tensor,
    target_positions: torch.Tensor,
    block_table: torch.Tensor,
    query_start_loc: torch.Tensor,
    *,
    num_speculative_tokens: int,
    block_size: int,
    parallel_drafting_token_id: int,
    num_rejected_tokens: torch.Tensor | None = None,
    max_query_len: int | None = None,
) -> DFlashInputs:
    """DFlash first pass: context positions and slots for every target token, and
    ``1 + num_speculative_tokens`` query tokens per request (the bonus token, then the
    parallel-drafting token) continuing from the last *accepted* context position.

    Returns a :class:`DFlashInputs` of new tensors: ``input_ids``, ``query_positions``,
    ``query_slot_mapping`` [num_reqs * (1 + S)], ``context_positions``,
    ``context_slot_mapping`` [total context tokens], ``token_indices`` [num_reqs * S] (the query
    indices to sample)."""
    _checks.index_vector("query_start_loc", query_start_loc)
    num_reqs = query_start_loc.shape[0] - 1
    if num_reqs < 0:
        raise ValueError(_checks.expected("query_start_loc", "num_reqs + 1 >= 1 entries", 0))
    _checks.index_vector("next_token_ids", next_token_ids, num_reqs)
    _checks.vector("target_positions", target_positions, (torch.int32, torch.int64))
    total_in = target_positions.shape[0]
    _checks.block_table(block_table, num_reqs)
    if num_rejected_tokens is not None:
        _checks.index_vector("num_rejected_tokens", num_rejected_tokens, num_reqs)
    S = int(num_speculative_tokens)
    if S < 1:
        raise ValueError(_checks.expected("num_speculative_tokens", ">= 1", S))
    Q = 1 + S
    if max_query_len is None:
        max_query_len = _max_span(query_start_loc)
    dev, idx = next_token_ids.device, next_token_ids.dtype
    pos_dtype = target_positions.dtype
    out = DFlashInputs(
        input_ids=torch.empty(num_reqs * Q, dtype=idx, device=dev),
        context_positions=torch.empty(total_in, dtype=pos_dtype, device=dev),
        query_positions=torch.empty(num_reqs * Q, dtype=pos_dtype, device=dev),
        context_slot_mapping=torch.empty(total_in, dtype=torch.int64, device=dev),
        query_slot_mapping=torch.empty(num_reqs * Q, dtype=torch.int64, device=dev),
        token_indices=torch.empty(num_reqs * S, dtype=query_start_loc.dtype, device=dev),
    )
    _copy_and_expand_dflash(
        next_token_ids,
        target_positions,
        out.input_ids,
        out.context_positions,
        out.query_positions,
        out.context_slot_mapping,
        out.query_slot_mapping,
        out.token_indices,
        block_table,
        block_table.stride(0),
        query_start_loc,
        num_rejected_tokens,
        parallel_drafting_token_id,
        block_size,
        Q,
        S,
        total_in,
        max_query_len + Q,
    )
    return out
