"""Model Runner V2's drafts kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

The drafters' input kernels of ``vllm/v1/worker/gpu/spec_decode/``, by ``speculative_config``
method: ``draft_model`` -> ``StandaloneARSpeculator`` (``standalone_ar``), ``ngram`` ->
``NgramGPUSpeculator`` (``ngram``), ``eagle``/``eagle3``/``mtp`` -> ``EagleSpeculator`` /
``MTPSpeculator``, both ``TargetDependentARSpeculator`` (``target_dependent_ar``). Two of vLLM's
kernels share the name ``_prepare_prefill_inputs_kernel``, so every speculator's kernel is named
here with its package as prefix (the ngram ones are unique as they are).
"""

from .contracts import (
    Contract,
    _a,
    _constexpr,
    _flag,
    _in_index,
    _in_table,
    _int,
    _out_index,
    _stride,
    span,
)

_GPU = "vllm.v1.worker.gpu.spec_decode"
_SAR = f"{_GPU}.standalone_ar.speculator"
_NGRAM = f"{_GPU}.ngram.speculator"
_TDAR = f"{_GPU}.target_dependent_ar.speculator"

_INDEX = ("int32", "int64")
_HIDDEN = ("float32", "float16", "bfloat16", "float64")
_GRID_REQS = (
    "(R,): one program per request; ``R`` comes only from the grid (the CPU kernel's ``grid``)"
)

_UPDATE_DRAFT_ARGS = (
    _a("output_draft_tokens_ptr", "out", _INDEX, "table", "``R`` rows, column ``step``"),
    _stride("output_draft_tokens_stride"),
    _a(
        "next_input_hidden_states_ptr",
        "out",
        _HIDDEN,
        "table",
        "``R`` rows of ``hidden_size`` (not the last step); rows may not overlap",
    ),
    _stride("next_input_hidden_states_stride"),
    _out_index("input_ids_ptr", "``R`` (not the last step)"),
    _a("positions_ptr", "inout", _INDEX, "flat", "``R`` (advancing, not the last step)"),
    _a("sample_src_positions_ptr", "inout", _INDEX, "flat", "``R`` (not the last step)"),
    _a("seq_lens_ptr", "inout", _INDEX, "flat", "``R`` (advancing, not the last step)"),
    _in_index("draft_tokens_ptr", "``R``"),
    _in_index("current_draft_step_ptr", "1: ``step``, a column of the output rows"),
    _a(
        "hidden_states_ptr",
        "in",
        _HIDDEN,
        "table",
        "``R`` rows of ``hidden_size`` (not the last step)",
    ),
    _stride("hidden_states_stride"),
    _int("hidden_size", ">= 0"),
    _int("max_model_len", "the caps"),
    _int("num_speculative_steps", "the last step writes the output only"),
    _constexpr("BLOCK_SIZE"),
    _flag("ADVANCE_DRAFT_POSITIONS", "default True", optional=True),
)
_MML = [a.name for a in _UPDATE_DRAFT_ARGS].index("max_model_len")

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
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "ngram_scan_kernel",
        "_mrv2_drafts",
        "(B, n_blocks): one program per request and block of ``BLOCK_L`` candidate positions; "
        "both counts come only from the grid (the CPU kernel's ``grid``)",
        "per (request, block): the largest packed score n * (L + 1) + pos + 1 over the block's "
        "positions pos whose n-gram equals the request's last n tokens (compared as int32; the "
        "longest n in [MIN_N, MAX_N] per position), 0 without a match, for an ineligible "
        "request (nothing sampled, fewer than MIN_N tokens) or a block past the last candidate",
        (
            _in_table(
                "token_ids_ptr", "rows named by ``idx_mapping_ptr``, ``total_len`` columns each"
            ),
            _stride("token_ids_stride"),
            _in_index("idx_mapping_ptr", "``B``; request-state indices"),
            _in_index("total_len_ptr", "rows named by ``idx_mapping_ptr``"),
            _in_index("num_sampled_ptr", "``B``"),
            _a(
                "scratch_ptr",
                "out",
                _INDEX,
                "table",
                "``B`` rows of ``n_blocks`` scores (the grid's second axis)",
            ),
            _stride("scratch_stride"),
            _int("L", "``max_model_len``: the score's packing base ``L + 1``"),
            _int("MIN_N", ">= 0"),
            _int("MAX_N", ">= 0"),
            _int("MAX_N_PO2", ">= max(MAX_N, 1): the suffix register's lanes"),
            _int("BLOCK_L", ">= 1: candidate positions per program"),
        ),
        vllm=(f"{_NGRAM}._ngram_scan_kernel",),
        runner="v2",
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "ngram_finalize_kernel",
        "_mrv2_drafts",
        _GRID_REQS,
        "per request: the best of its N_BLOCKS scratch scores decodes to (n, pos); draft k is "
        "token[min(pos + n + k, L - 1)] while pos + n + k < total_len, else (and for a request "
        "without a match or a sampled token) its last sampled token",
        (
            _in_table("token_ids_ptr", "rows named by ``idx_mapping_ptr``, the gathered columns"),
            _stride("token_ids_stride"),
            _in_index("idx_mapping_ptr", "``B``; request-state indices"),
            _in_index("total_len_ptr", "rows named by ``idx_mapping_ptr``"),
            _in_index("num_sampled_ptr", "``B``"),
            _in_index("last_sampled_ptr", "rows named by ``idx_mapping_ptr``"),
            _in_table("scratch_ptr", "``B`` rows of ``N_BLOCKS`` scores"),
            _stride("scratch_stride"),
            _out_index("drafts_ptr", "``B * K``, flat"),
            _int("L", ">= 0: ``max_model_len``"),
            _int("N_BLOCKS", ">= 0"),
            _int("K", ">= 0: drafts per request"),
            _int("K_PO2", ">= max(K, 1)"),
            _int("N_BLOCKS_PO2", ">= max(N_BLOCKS, 1); > N_BLOCKS lets a masked 0 in the max"),
        ),
        vllm=(f"{_NGRAM}._ngram_finalize_kernel",),
        runner="v2",
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "target_dependent_ar_prepare_prefill_inputs_kernel",
        "_mrv2_drafts",
        _GRID_REQS,
        "the EAGLE/MTP drafter's prefill inputs in the target's layout: per request, the "
        "target's ids over its query_len - num_rejected kept tokens shifted left by one, the "
        "next token (last sampled, cast to int32, or the next prompt token of a chunked "
        "prefill) in the last kept slot, the target's positions, that slot's index, qsl[i] and "
        "seq_len; the last request resets the draft step to 0 and pads query starts (its query "
        "end), seq_lens and last-token indices (0) to max_num_reqs",
        (
            _out_index("last_token_indices_ptr", "``max(R, max_num_reqs)``"),
            _out_index("draft_current_step_ptr", "1"),
            _out_index("draft_input_ids_ptr", "the kept tokens' slots"),
            _out_index("draft_positions_ptr", "the kept tokens' slots"),
            _out_index("draft_query_start_loc_ptr", "``max(R, max_num_reqs + 1)``"),
            _out_index("draft_seq_lens_ptr", "``max(R, max_num_reqs)``"),
            _in_index("target_input_ids_ptr", "the kept tokens"),
            _in_index("target_positions_ptr", "the kept tokens"),
            _in_index("idx_mapping_ptr", "``R``; request-state indices"),
            _in_index("last_sampled_ptr", "rows named by ``idx_mapping_ptr`` (sampled requests)"),
            _in_index(
                "next_prefill_tokens_ptr",
                "rows named by ``idx_mapping_ptr`` (chunked prefills), read flat",
            ),
            _in_index("num_sampled_ptr", "``R``"),
            _in_index("num_rejected_ptr", "``R``; in [0, query_len - 1]"),
            _in_index("query_start_loc_ptr", "``R + 1``; non-negative, non-decreasing"),
            _in_index("seq_lens_ptr", "``R``"),
            _int("max_num_reqs", "padding bound"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=(f"{_TDAR}._prepare_prefill_inputs_kernel",),
        runner="v2",
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "target_dependent_ar_prepare_decode_inputs_kernel",
        "_mrv2_drafts",
        "(R + 1,): one program per request and one for the padding; ``R`` comes only from "
        "the grid (the CPU kernel's ``grid``)",
        "the EAGLE/MTP drafter's first decode step: per request the first draft token becomes "
        "the input id, the sampling position advances, seq_len = target_seq_len - num_rejected "
        "(+ 1 and the position + 1 under ADVANCE_DRAFT_POSITIONS, capped at max_model_len and "
        "max_model_len - 1); the extra program writes query starts min(b, R) up to "
        "max_num_reqs and zeroes seq_lens from R",
        (
            _a(
                "draft_tokens_ptr",
                "in",
                _INDEX,
                "strided",
                "``R`` elements ``draft_tokens_stride`` apart (a column of the drafts table)",
            ),
            _stride("draft_tokens_stride"),
            _in_index("target_seq_lens_ptr", "``R``"),
            _in_index("num_rejected_ptr", "``R``"),
            _out_index("input_ids_ptr", "``R``"),
            _a("positions_ptr", "inout", _INDEX, "flat", "``R`` (ADVANCE_DRAFT_POSITIONS)"),
            _a("sample_src_positions_ptr", "inout", _INDEX, "flat", "``R``"),
            _out_index("query_start_loc_ptr", "``max_num_reqs + 1``"),
            _out_index("seq_lens_ptr", "``max(R, max_num_reqs)``"),
            _int("max_model_len", "the caps"),
            _int("max_num_reqs", "padding bound"),
            _constexpr("BLOCK_SIZE"),
            _flag("ADVANCE_DRAFT_POSITIONS", "default True", optional=True),
        ),
        vllm=(f"{_TDAR}._prepare_decode_inputs_kernel",),
        runner="v2",
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "target_dependent_ar_update_draft_inputs_kernel",
        "_mrv2_drafts",
        _GRID_REQS,
        "one EAGLE/MTP draft step: the sampled token to output[i, step] (step read from "
        "current_draft_step_ptr); unless it was the last step, also the next input id, the "
        "sampling position + 1, the hidden-state row copied (converted as a store converts), "
        "and under ADVANCE_DRAFT_POSITIONS position + 1 and seq_len + 1 (capped)",
        _UPDATE_DRAFT_ARGS,
        vllm=(f"{_TDAR}._update_draft_inputs_kernel",),
        runner="v2",
        releases=span("0.32", "0.33"),
        takes_grid=True,
    ),
    Contract(
        "target_dependent_ar_update_draft_inputs_mml_ptr_kernel",
        "_mrv2_drafts",
        _GRID_REQS,
        "vLLM 0.34's form of target_dependent_ar_update_draft_inputs_kernel: the length cap "
        "read from a one-element tensor (max_model_len_ptr) where a position advances",
        _UPDATE_DRAFT_ARGS[:_MML]
        + (_in_index("max_model_len_ptr", "1 (advancing, not the last step)"),)
        + _UPDATE_DRAFT_ARGS[_MML + 1 :],
        serves="target_dependent_ar_update_draft_inputs_kernel",
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
)
