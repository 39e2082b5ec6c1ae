"""Model Runner V2's speculative verification in one pass (vLLM 0.32's ``rejection_sample``).

vLLM's V2 rejection sampler (``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``) copies
the target logits to fp32, divides them by the temperature in a pass of their own, computes the
statistics of every draft row, then walks the drafts, resamples at each request's first
rejection (or its bonus row) and inserts the winner. :func:`rejection_sample_one_pass` gives the
same tokens, bit for bit, from the same programs (``_mrv2_spec.rejection_sample_fused``) with no
copy and no temperature pass (each row is read as the temperature kernel would have left it) and
statistics only for the rows the walk reaches: a request's rows past its first rejection are
never read.
"""

from __future__ import annotations

import threading

import torch

from ._mrv2_spec import rejection_sample_fused

__all__ = ["rejection_sample_one_pass"]

#: vLLM's ``VOCAB_BLOCK_SIZE`` (statistics) and ``RESAMPLE_BLOCK_SIZE`` in ``rejection_sample``.
STATS_BLOCK = 8192
RESAMPLE_BLOCK = 1024


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_scratch = threading.local()  # per thread: {dtype: flat tensor}, grown to the largest asked


def _scratch_tensor(shape: tuple[int, ...], dtype: torch.dtype, slot: int) -> torch.Tensor:
    """A contiguous ``shape`` tensor of ``dtype`` over memory kept between calls (this thread's
    ``slot``-th buffer of that dtype). The tables and the processed rows are scratch that no
    caller sees, and a fresh allocation of them costs more than the pass: the processed rows of
    a B64 k4 V128k batch are 164 MB whose pages the kernel would fault in on every call (a
    third of the step at one thread, more on a team, where page faults serialise)."""
    pool = getattr(_scratch, "pool", None)
    if pool is None:
        pool = _scratch.pool = {}
    need = 1
    for n in shape:
        need *= n
    buf = pool.get((dtype, slot))
    if buf is None or buf.numel() < need:
        buf = pool[(dtype, slot)] = torch.empty(max(need, 1), dtype=dtype)
    return buf[:need].view(shape)


_Tables = tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
    torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None",
]  # fmt: skip


def _tables(
    rows: int, blocks: int, reqs: int, rblocks: int, fp64: bool, processed: tuple | None
) -> _Tables:
    """The pass's scratch tables, then the processed rows (None without top-k/top-p): the last
    call's when it asked for the same shapes (an engine's batches repeat them; the views cost
    more than the small batch's pass), else views of the kept buffers."""
    key = (rows, blocks, reqs, rblocks, fp64, processed)
    last = getattr(_scratch, "last", None)
    if last is not None and last[0] == key:
        return last[1]
    f32, i64 = torch.float32, torch.int64
    tables: _Tables = (
        _scratch_tensor((rows, blocks), i64, 0),
        _scratch_tensor((rows, blocks), f32, 1),
        _scratch_tensor((rows, blocks), f32, 2),
        _scratch_tensor((rows, blocks), f32, 3),
        _scratch_tensor((rows, blocks), f32, 4),
        _scratch_tensor((reqs,), f32, 5),
        _scratch_tensor((reqs,), f32, 6),
        _scratch_tensor((reqs, rblocks), i64, 1),
        _scratch_tensor((reqs, rblocks), torch.float64 if fp64 else f32, 7),
        None if processed is None else _scratch_tensor(processed, f32, 0),
    )
    _scratch.last = (key, tables)
    return tables


def rejection_sample_one_pass(
    target_logits: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_sampled: torch.Tensor,
    cu_num_logits: torch.Tensor,
    pos: torch.Tensor,
    idx_mapping: torch.Tensor,
    expanded_idx_mapping: torch.Tensor,
    expanded_local_pos: torch.Tensor,
    temperature: torch.Tensor,
    seed: torch.Tensor,
    num_speculative_steps: int,
    *,
    use_fp64: bool = False,
    apply_temperature: bool = False,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM 0.32's ``rejection_sample(target_logits, draft_logits, draft_sampled,
    cu_num_logits, pos, idx_mapping, expanded_idx_mapping, expanded_local_pos, temperature,
    seed, num_speculative_steps, use_fp64=use_fp64)`` -- without synthetic rates, block
    verification or a watermark -- as ``(sampled [num_reqs, num_speculative_steps + 1] int64,
    num_sampled [num_reqs] int32)``; ``sampled[r, :num_sampled[r]]`` are request ``r``'s tokens
    (the rest is scratch, as vLLM's).

    With ``apply_temperature``, ``target_logits`` are the raw logits (float32, bfloat16 or
    float16) and the result is that of vLLM's ``_temperature_kernel`` run on an fp32 copy
    first (each row divided by its request's temperature unless that is 0 or 1): what V2's
    ``Sampler.apply_sampling_params`` hands ``rejection_sample`` when temperature is the only
    sampling parameter in use. Nothing is copied; the scratch (statistics tables, with
    top-k/top-p the processed rows) is kept per thread between calls, grown to the largest batch
    seen. ``top_k`` / ``top_p``: per request slot (int32/int64 >= 1, float32/float64 in (0, 1];
    vLLM's ``SamplingStates.top_k``/``top_p``),
    each None where vLLM passes None for the batch: the rows are then also masked as
    ``top_k_top_p`` masks them (after temperature, as ``apply_sampling_params`` does) -- only
    the rows the walk reaches, each into a buffer of its own. ``draft_logits`` is V2's
    ``[max_num_reqs, num_speculative_steps, V]`` cache (None: one-hot drafts)."""
    if not isinstance(target_logits, torch.Tensor) or target_logits.ndim != 2:
        raise ValueError(
            "target_logits: expected a [num_logits, V] tensor, got "
            f"{getattr(target_logits, 'shape', type(target_logits).__name__)}"
        )
    if not isinstance(cu_num_logits, torch.Tensor) or cu_num_logits.ndim != 1:
        raise ValueError("cu_num_logits: expected a [num_reqs + 1] tensor")
    num_logits, vocab = target_logits.shape
    if draft_logits is not None:
        if not isinstance(draft_logits, torch.Tensor) or draft_logits.ndim != 3:
            raise ValueError(
                "draft_logits: expected a [max_num_reqs, num_speculative_steps, V] tensor"
            )
        vocab = min(vocab, draft_logits.shape[2])
    num_reqs = max(cu_num_logits.shape[0] - 1, 0)
    steps = int(num_speculative_steps)
    blocks = _cdiv(vocab, STATS_BLOCK)
    sampled = torch.empty(num_reqs, steps + 1, dtype=torch.int64)
    num_sampled = torch.empty(num_reqs, dtype=torch.int32)
    resample_blocks = _cdiv(vocab, RESAMPLE_BLOCK)
    tam, tmax, tsum, dmax, dsum, trl, drl, ram, rmax, processed = _tables(
        num_logits, blocks, num_reqs, resample_blocks, bool(use_fp64),
        (num_logits, target_logits.shape[1]) if top_k is not None or top_p is not None else None,
    )  # fmt: skip
    rejection_sample_fused(
        sampled,
        num_sampled,
        target_logits,
        draft_logits,
        draft_sampled,
        cu_num_logits,
        pos,
        idx_mapping,
        expanded_idx_mapping,
        expanded_local_pos,
        temperature,
        seed,
        steps,
        tam,
        tmax,
        tsum,
        dmax,
        dsum,
        trl,
        drl,
        ram,
        rmax,
        USE_FP64=bool(use_fp64),
        APPLY_TEMPERATURE=bool(apply_temperature),
        top_k_ptr=top_k,
        top_p_ptr=top_p,
        processed_ptr=processed,
    )
    return sampled, num_sampled
