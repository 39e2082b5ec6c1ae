"""Model Runner V2's drafts kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

The drafters' input kernels of ``vllm/v1/worker/gpu/spec_decode/``, by ``speculative_config``
method: ``draft_model`` -> ``StandaloneARSpeculator`` (``standalone_ar``), ``ngram`` ->
``NgramGPUSpeculator`` (``ngram``), ``eagle``/``eagle3``/``mtp`` -> ``EagleSpeculator`` /
``MTPSpeculator``, both ``TargetDependentARSpeculator`` (``target_dependent_ar``). Two of vLLM's
kernels share the name ``_prepare_prefill_inputs_kernel``, so every speculator's kernel is named
here with its package as prefix (the ngram ones are unique as they are).
"""

from .contracts import Contract, _a, _constexpr, _flag, _in_index, _int, _out_index, _stride

_GPU = "vllm.v1.worker.gpu.spec_decode"
_SAR = f"{_GPU}.standalone_ar.speculator"
_NGRAM = f"{_GPU}.ngram.speculator"
_TDAR = f"{_GPU}.target_dependent_ar.speculator"

_INDEX = ("int32", "int64")
_GRID_REQS = (
    "(R,): one program per request; ``R`` comes only from the grid (the CPU kernel's ``grid``)"
)

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "standalone_ar_prepare_prefill_inputs_kernel",
        "_mrv2_drafts",
        _GRID_REQS,
        "the draft model's step-0 inputs: request i's query laid out at qsl[i] + i as its "
        "accepted tokens (query_len - num_rejected), the correction token (last_sampled of its "
        "request state, cast to int32), 0 per rejected slot; positions min(first + j, "
        "max_model_len - 1); the last accepted slot, the expanded query start and min(seq_len "
        "+ 1, max_model_len) per request; the last request pads query starts, seq_lens and "
        "last-token indices to max_num_reqs",
        (
            _in_index(
                "target_input_ids_ptr", "each request's accepted tokens (``qsl[i] + num_valid``)"
            ),
            _in_index("target_positions_ptr", "each request's first position (``qsl[i]``)"),
            _in_index("last_sampled_ptr", "rows named by ``idx_mapping_ptr``"),
            _in_index("idx_mapping_ptr", "``R``; request-state indices"),
            _out_index("out_input_ids_ptr", "``qsl[R] + R``"),
            _out_index("out_positions_ptr", "``qsl[R] + R``"),
            _out_index("last_token_indices_ptr", "``max(R, max_num_reqs)``"),
            _out_index("out_query_start_loc_ptr", "``max(R, max_num_reqs) + 1``"),
            _out_index("out_seq_lens_ptr", "``max(R, max_num_reqs)``"),
            _in_index("query_start_loc_ptr", "``R + 1``; non-negative, non-decreasing"),
            _in_index("seq_lens_ptr", "``R``"),
            _in_index("num_rejected_ptr", "``R``"),
            _int("max_num_reqs", "padding bound"),
            _int("max_model_len", "positions and seq_lens are clamped by it"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=(f"{_SAR}._prepare_prefill_inputs_kernel",),
        runner="v2",
        takes_grid=True,
    ),
)

# names the helpers above keep for the rows still to come
_UNUSED = (_a, _flag, _stride, _INDEX, _NGRAM, _TDAR)
