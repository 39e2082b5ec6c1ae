"""Model Runner V2's outputs kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

What the sampler reports besides tokens, read from ``[tokens, V]`` logits rows:

* ``num_nans_kernel`` -- NaNs per row; ``get_num_nans`` launches it from the ``Sampler`` and the
  rejection sampler when ``VLLM_COMPUTE_NANS_IN_LOGITS`` is set (``Sampler.compute_nans``);
* ``compact_sampling_mask_kernel`` -- each sampled row's finite-logit support, compacted and as
  a bitmask; ``SamplingMaskTensors.from_logits`` launches it when the model config's
  ``return_sampling_mask`` is set (``LLM(return_sampling_mask=True)``), per launch of the
  ``Sampler`` and per request chunk of the rejection sampler (``ROWS_PER_REQUEST`` = speculative
  steps + 1 there).

vLLM 0.34.0 has both kernels unchanged (same source), so no ``serves`` form is needed.
"""

from .contracts import Contract, _a, _constexpr, _in_index, _int, _stride, span

_FLOATS = ("float32", "float16", "bfloat16", "float64")
_INDEX = ("int32", "int64")

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "num_nans_kernel",
        "_mrv2_outputs",
        "(R,): one program per logits row; ``R`` only in the grid (the CPU kernel takes it as "
        "``grid``)",
        "num_nans[r] = NaNs among logits row r's first vocab_size entries",
        (
            _a(
                "logits_ptr",
                "in",
                _FLOATS,
                "table",
                "``R`` rows of ``vocab_size`` columns, ``logits_stride`` apart",
            ),
            _stride("logits_stride"),
            _a("num_nans_ptr", "out", _INDEX, "flat", "``R``: one count per row"),
            _int("vocab_size", "columns counted per row; <= 0 counts none"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=("vllm.v1.worker.gpu.metrics.logits._num_nans_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "compact_sampling_mask_kernel",
        "_mrv2_outputs",
        "(O,): one program per output row, ``ROWS_PER_REQUEST`` per request; ``O`` only in the "
        "grid (the CPU kernel takes it as ``grid``)",
        "per output row o of request o // ROWS_PER_REQUEST, slot o % ROWS_PER_REQUEST: when the "
        "slot is below the request's num_sampled_tokens, logits row cu_num_logits[req] + slot "
        "gives counts[o] (its finite logits), the first min(count, max_num_kept) finite ids in "
        "token_ids[o] and its finite-logit bitmask in packed_mask[o]; otherwise counts[o] = 0 "
        "and the row is left as it is",
        (
            _a(
                "logits_ptr",
                "in",
                _FLOATS,
                "table",
                "the sampled slots' rows, ``vocab_size`` columns each; a 2-D tensor may have "
                "any column stride (``logits_col_stride`` its ``stride(1)``)",
            ),
            _stride("logits_row_stride"),
            _int("logits_col_stride", "the table's column stride (>= 0)"),
            _in_index(
                "cu_num_logits_ptr", "a start per request with a sampled slot (``[req]`` only)"
            ),
            _in_index(
                "num_sampled_tokens_ptr",
                "``ceil(O / ROWS_PER_REQUEST)``: sampled slots per request",
            ),
            _a(
                "token_ids_ptr",
                "out",
                _INDEX,
                "table",
                "the sampled rows, ``min(max_num_kept, vocab_size)`` columns (rows written may "
                "not overlap)",
            ),
            _stride("token_ids_row_stride"),
            _a(
                "packed_mask_ptr",
                "out",
                ("uint8", "int8"),
                "table",
                "the sampled rows, ``ceil(vocab_size / 8)`` bytes",
            ),
            _stride("packed_mask_row_stride"),
            _a("counts_ptr", "out", _INDEX, "flat", "``O``: one count per output row"),
            _int("vocab_size", "columns per logits row; <= 0 reads none"),
            _int("max_num_kept", "ids kept per row at most; <= 0 keeps none"),
            _int("ROWS_PER_REQUEST", ">= 1: output rows per request"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=("vllm.v1.worker.gpu.sample.output._compact_sampling_mask_kernel",),
        runner="v2",
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
)
