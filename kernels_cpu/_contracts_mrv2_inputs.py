"""Model Runner V2's inputs kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

Every one of them takes its request count from the launch grid (``takes_grid``): each program
is one request and the buffers are the runner's persistent ones, sized for ``max_num_reqs``
(state buffers, indexed by ``idx_mapping``) or ``max_num_tokens``. Notation besides the
table's: ``P`` programs on the grid's request axis, ``r`` a request-state index
(``idx_mapping[b]``), ``S`` the request states a per-request buffer holds, ``G`` KV-cache
groups.
"""

from .contracts import (
    Contract,
    _a,
    _constexpr,
    _flag,
    _in_bool,
    _in_index,
    _in_table,
    _int,
    _out_index,
    _stride,
    span,
)

_BATCH = "vllm.v1.worker.gpu.input_batch"
_BLOCKS = "vllm.v1.worker.gpu.block_table"
_INDEX = ("int32", "int64")
_ADDR = ("int64", "uint64")


def _io_index(name, extent, kind="flat"):
    return _a(name, "inout", _INDEX, kind, extent)


def _io_table(name, extent):
    return _a(name, "inout", _INDEX, "table", extent)


def _out_table(name, extent):
    return _a(name, "out", _INDEX, "table", extent)


def _idx(extent="``P`` (one per program); entries ``r`` in ``[0, S)``"):
    return _in_index("idx_mapping_ptr", extent)


def _qsl(extent="``P + 1``; a request's query is ``[qsl[b], qsl[b + 1])``"):
    return _in_index("query_start_loc_ptr", extent)


def _cap(name, what):
    return _int(
        name,
        f"lanes of a program (>= 1): caps {what} as in the Triton kernel; ``None``: no cap",
        optional=True,
    )


_POST_UPDATE_ARGS = (
    _in_index("idx_mapping_ptr", "``P``; entries ``r`` in ``[0, S)``, each once, or < 0 (skipped)"),
    _io_index("num_computed_tokens_ptr", "``S``"),
    _out_index("last_sampled_tokens_ptr", "``S``"),
    _a(
        "output_bin_counts_ptr",
        "inout",
        _INDEX,
        "table",
        "row ``r``: a column per sampled token id",
        optional=True,
    ),
    _stride("output_bin_counts_stride"),
    _in_table("sampled_tokens_ptr", "row ``b``: ``num_sampled[b]`` columns"),
    _stride("sampled_tokens_stride"),
    _in_index("num_sampled_ptr", "``P``"),
    _in_index("num_rejected_ptr", "``P``"),
    _a(
        "query_start_loc_ptr",
        "in",
        _INDEX,
        "flat",
        "``P + 1``; ``None``: query_len 0",
        optional=True,
    ),
    _io_table(
        "all_token_ids_ptr",
        "row ``r``: columns ``[total_len[r], total_len[r] + num_sampled)``",
    ),
    _stride("all_token_ids_stride"),
    _io_index("total_len_ptr", "``S``"),
)

_GATHER_ARGS = (
    _in_index(
        "batch_idx_to_req_idx",
        "``min(num_reqs, P)``; entries ``r`` >= 0 and rows of ``num_blocks_ptr``'s",
    ),
    _a(
        "src_block_table_ptrs",
        "in",
        _ADDR,
        "addresses",
        "``G``: int32 tables, rows ``block_table_strides[g]`` apart",
    ),
    _a(
        "dst_block_table_ptrs",
        "in",
        _ADDR,
        "addresses",
        "``G``: int32 tables written, ``P`` rows ``block_table_strides[g]`` apart",
    ),
    _in_index("block_table_strides", "``G``; >= 0, each a row's length"),
    _in_table(
        "num_blocks_ptr",
        "``G`` rows of one count per request state; counts <= the row length",
    ),
    _stride("num_blocks_stride"),
    _int("num_reqs", "rows ``b >= num_reqs`` are padding"),
    _constexpr("BLOCK_SIZE"),
)

_ONE_PER_REQUEST = "(P,): one program per request, ``P = grid[0]``"

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "prepare_prefill_inputs_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST,
        "per prefilling request (num_computed < prefill_len): its query's input ids from "
        "all_token_ids[r, num_computed:], and the next min(num_lookahead, LOOKAHEAD_BLOCK) "
        "prompt tokens after the chunk (0 past the prefill) into column r of "
        "next_prefill_tokens",
        (
            _out_index("input_ids_ptr", "the prefilling requests' queries"),
            _out_table(
                "next_prefill_tokens_ptr",
                "rows ``0..min(num_lookahead, LOOKAHEAD_BLOCK)``, column ``r`` of "
                "every prefilling request",
            ),
            _stride("next_prefill_tokens_stride"),
            _int("num_lookahead", "lookahead tokens (<= 0: none)"),
            _idx(),
            _qsl("``P + 1``; read for prefilling requests"),
            _in_table(
                "all_token_ids_ptr",
                "row ``r``: the query's tokens and the lookahead below ``prefill_len``",
            ),
            _stride("all_token_ids_stride"),
            _in_index("prefill_lens_ptr", "``S``"),
            _in_index("num_computed_tokens_ptr", "``S``"),
            _constexpr("BLOCK_SIZE"),
            _cap("LOOKAHEAD_BLOCK", "the lookahead tokens stored"),
        ),
        vllm=(f"{_BATCH}._prepare_prefill_inputs_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "prepare_pos_seq_lens_kernel",
        "_mrv2_inputs",
        "(R + 1,): one program per request and one for the padding, ``R = grid[0] - 1``",
        "per request: seq_lens[b] = num_computed + query_len and positions num_computed + j "
        "over its query; the last program zeroes seq_lens[R:max_num_reqs]",
        (
            _out_index("pos_ptr", "the requests' queries"),
            _out_index("seq_lens_ptr", "``max(R, max_num_reqs)``"),
            _idx("``R``; entries ``r`` in ``[0, S)``"),
            _qsl("``R + 1``"),
            _in_index("num_computed_tokens_ptr", "``S``"),
            _int("max_num_reqs", "the padding's end (<= R: no padding)"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=(f"{_BATCH}._prepare_pos_seq_lens_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "combine_sampled_and_draft_tokens_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST,
        "per request with n = cu_num_logits[b+1] - cu_num_logits[b] logits (the last n "
        "tokens of its query): their logits indices; past the prefill, the first of them gets "
        "the last sampled token (NUM_NEW_SAMPLED_TOKENS = 1, when it lies past the prompt) "
        "and the last n - NUM_NEW_SAMPLED_TOKENS get the request's draft tokens; BLOCK_SIZE "
        "lanes at most",
        (
            _out_index("input_ids_ptr", "the sampled and draft slots of requests past prefill"),
            _idx(),
            _in_index("last_sampled_tokens_ptr", "``S``; read past the prompt"),
            _qsl("``P + 1``; only ``qsl[b + 1]`` (the query's end) is read"),
            _in_index("seq_lens_ptr", "``P``"),
            _in_index("prefill_len_ptr", "``S``"),
            _in_table("draft_tokens_ptr", "row ``r``: the request's draft tokens"),
            _stride("draft_tokens_stride"),
            _in_index("cu_num_logits_ptr", "``P + 1``"),
            _out_index("logits_indices_ptr", "``cu_num_logits[b] + n`` per request"),
            _cap("BLOCK_SIZE", "the logits indices and draft tokens written per request"),
            _int("NUM_NEW_SAMPLED_TOKENS", "0 or 1 (default 1)", optional=True),
        ),
        vllm=(f"{_BATCH}._combine_sampled_and_draft_tokens_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "get_num_sampled_and_rejected_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST,
        "per request: a chunked prefill (seq_len < prefill_len) samples and rejects nothing; "
        "otherwise num_rejected = num_logits - num_sampled",
        (
            _io_index("num_sampled_ptr", "``P``; 0 for a chunked prefill"),
            _out_index("num_rejected_ptr", "``P``"),
            _in_index("seq_lens_ptr", "``P``"),
            _in_index("cu_num_logits_ptr", "``P + 1``"),
            _idx(),
            _in_index("prefill_len_ptr", "``S``"),
        ),
        vllm=(f"{_BATCH}._get_num_sampled_and_rejected_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "post_update_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST + "; a second grid axis > 1 (a repeated update) is refused",
        "per request with r >= 0 (negative: skipped): the num_sampled sampled tokens appended "
        "to all_token_ids[r] at total_len[r] and counted in output_bin_counts[r], the last "
        "one kept as last_sampled_tokens[r], total_len[r] += num_sampled; then "
        "num_computed_tokens[r] += query_len - num_rejected; an index given twice is refused",
        _POST_UPDATE_ARGS,
        vllm=(f"{_BATCH}._post_update_kernel",),
        runner="v2",
        releases=span("0.27", "0.32"),
        takes_grid=True,
    ),
    Contract(
        "post_update_num_computed_tokens_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST + "; a second grid axis > 1 (a repeated update) is refused",
        "num_computed_tokens[idx_mapping[b]] += query_len of request b; an index given twice "
        "is refused",
        (
            _in_index("idx_mapping_ptr", "``P``; entries ``r`` in ``[0, S)``, each once"),
            _io_index("num_computed_tokens_ptr", "``S``"),
            _qsl("``P + 1``"),
        ),
        vllm=(f"{_BATCH}._post_update_num_computed_tokens_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "expand_idx_mapping_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST,
        "per request: its n = cu_num_logits[b+1] - cu_num_logits[b] logits (BLOCK_SIZE at "
        "most) get expanded_idx_mapping = idx_mapping[b] and expanded_local_pos = 0..n-1",
        (
            _in_index("idx_mapping_ptr", "``P``; values copied, any"),
            _out_index("expanded_idx_mapping_ptr", "``cu_num_logits[b] + n`` per request"),
            _out_index("expanded_local_pos_ptr", "``cu_num_logits[b] + n`` per request"),
            _in_index("cu_num_logits_ptr", "``P + 1``"),
            _cap("BLOCK_SIZE", "the logits written per request"),
        ),
        vllm=(f"{_BATCH}._expand_idx_mapping_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "gather_block_tables_kernel",
        "_mrv2_inputs",
        "(G, P): one program per (KV-cache group, batch row), ``P`` = padded requests",
        "row b of each group's input block table gets the first num_blocks[g, r] ids of row "
        "r = batch_idx_to_req_idx[b] of the group's persistent table; rows b >= num_reqs are "
        "zeroed whole (block_table_strides[g] columns)",
        _GATHER_ARGS,
        vllm=(f"{_BLOCKS}._gather_block_tables_kernel",),
        runner="v2",
        releases=span("0.27", "0.32"),
        takes_grid=True,
    ),
    Contract(
        "compute_slot_mappings_kernel",
        "_mrv2_inputs",
        "(G, R + 1): one program per (KV-cache group, request) and one per group for the "
        "padding, ``R = grid[1] - 1``",
        "slot of every token of every real request (r >= 0) in every enabled group: "
        "block_table_g[r, p // B] * B + p % B (B = block_sizes[g]; under context parallelism "
        "the rank-local position of a dcp_sharded group, PAD_ID for tokens other ranks store); "
        "PAD_ID for dummy requests and disabled groups, and from query_start_loc[R] to "
        "max_num_tokens",
        (
            _int("max_num_tokens", "the padding's end (a row of ``slot_mappings_ptr``)"),
            _in_index("idx_mapping", "``R``; ``r < 0``: a dummy request (PAD_ID)"),
            _in_index("query_start_loc", "``R + 1``"),
            _in_index("pos", "the real requests' tokens; >= 0 where a slot is looked up"),
            _a(
                "block_table_ptrs",
                "in",
                _ADDR,
                "addresses",
                "``G``: int32 tables, rows ``block_table_strides[g]`` apart, a column per "
                "block a position reaches",
            ),
            _in_index("block_table_strides", "``G``"),
            _in_index("block_sizes", "``G``; >= 1 for enabled groups"),
            _in_bool("slot_mapping_enabled", "``G``"),
            _in_bool("dcp_sharded", "``G`` when ``CP_SIZE != 1`` (else not read)"),
            _out_table(
                "slot_mappings_ptr",
                "row ``g``: the requests' tokens and ``[qsl[R], max_num_tokens)``",
            ),
            _stride("slot_mappings_stride"),
            _int("cp_rank", "this rank (a rank outside ``[0, CP_SIZE)`` stores nothing)"),
            _int("CP_SIZE", ">= 1 (default 1)", optional=True),
            _int("CP_INTERLEAVE", ">= 1 (default 1)", optional=True),
            _int("PAD_ID", "default -1", optional=True),
            _constexpr("TRITON_BLOCK_SIZE"),
        ),
        vllm=(f"{_BLOCKS}._compute_slot_mappings_kernel",),
        runner="v2",
        releases=span("0.32", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "apply_write_kernel",
        "_mrv2_inputs",
        "(W,): one program per staged write, ``W = grid[0]``",
        "write w copies contents[cu[w-1]:cu[w]] (from 0 for the first) to row "
        "write_indices[w] of the output from column write_starts[w], in order, converted to "
        "the output's dtype; MULTI_GROUP: into group write_group_ids[w]'s int32 table by address",
        (
            _a(
                "output_ptr",
                "inout",
                ("int32", "int64", "float32", "uint64"),
                "flagged",
                "MULTI_GROUP: addresses, one int32 table per group; otherwise a table: the "
                "rows and columns written",
            ),
            _a(
                "output_stride",
                "in",
                _INDEX,
                "flagged",
                "MULTI_GROUP: flat, a row stride per group (each write inside its row); "
                "otherwise an int, the table's row stride",
            ),
            _in_index("write_indices_ptr", "``W``; rows >= 0"),
            _in_index("write_starts_ptr", "``W``; columns >= 0"),
            _a("write_contents_ptr", "in", ("int32", "int64", "float32"), "flat", "``cu[W - 1]``"),
            _in_index("write_cu_lens_ptr", "``W`` inclusive cumulative lengths"),
            _in_index("write_group_ids_ptr", "``W`` under MULTI_GROUP", optional=True),
            _constexpr("BLOCK_SIZE"),
            _flag("MULTI_GROUP", "default: ``write_group_ids_ptr`` given", optional=True),
        ),
        vllm=("vllm.v1.worker.gpu.buffer_utils._apply_write_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "prompt_logprobs_token_ids_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST,
        "per request: the token each query position's prompt logprob is for, "
        "all_token_ids[r, num_computed + 1 + j]",
        (
            _out_index("prompt_logprobs_token_ids_ptr", "the requests' queries"),
            _qsl(),
            _idx(),
            _in_index("num_computed_tokens_ptr", "``S``"),
            _in_table(
                "all_token_ids_ptr",
                "row ``r``: columns ``nc + 1 .. nc + query_len`` (the last may be one "
                "past the row where the next row holds it)",
            ),
            _stride("all_token_ids_stride"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=("vllm.v1.worker.gpu.sample.prompt_logprob._prompt_logprobs_token_ids_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    # vLLM 0.34's signatures of two of the kernels above (its _apply_write_kernel keeps 0.32's
    # arguments: apply_write_kernel serves both, see its docstring)
    Contract(
        "post_update_with_drafts_kernel",
        "_mrv2_inputs",
        _ONE_PER_REQUEST + "; a second grid axis > 1 (a repeated update) is refused",
        "vLLM 0.34's post_update_kernel: first each request's num_draft_tokens drafts "
        "(draft_tokens[b * n:]) copied to draft_tokens_out[r * n:], then the same update",
        _POST_UPDATE_ARGS
        + (
            _in_index(
                "draft_tokens_ptr", "``P * num_draft_tokens``; ``None``: no drafts", optional=True
            ),
            _a(
                "draft_tokens_out_ptr",
                "out",
                _INDEX,
                "flat",
                "``num_draft_tokens`` per request state, up to the last ``r`` written",
                optional=True,
            ),
            _int("num_draft_tokens", "drafts per request (<= 0: none)"),
        ),
        serves="post_update_kernel",
        runner="v2",
        releases=span("0.33", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "gather_block_tables_windowed_kernel",
        "_mrv2_inputs",
        "(G, P): one program per (KV-cache group, batch row), ``P`` = rows to write",
        "vLLM 0.34's gather_block_tables_kernel: under MASK_SLIDING_WINDOW the leading "
        "max(num_computed_tokens[r] - reach[g], 0) // block_sizes[g] entries of a gathered row "
        "of a group with a window (reach > 0) are written as 0 (the null block)",
        _GATHER_ARGS[:7]
        + (
            _in_index("num_computed_tokens_ptr", "``S`` under MASK_SLIDING_WINDOW (else not read)"),
            _in_index("sliding_window_reach_ptr", "``G`` under MASK_SLIDING_WINDOW"),
            _in_index("block_sizes_ptr", "``G`` under MASK_SLIDING_WINDOW; >= 1 with a window"),
            _flag("MASK_SLIDING_WINDOW", "default False", optional=True),
        )
        + _GATHER_ARGS[7:],
        serves="gather_block_tables_kernel",
        runner="v2",
        releases=span("0.33", "0.34"),
        takes_grid=True,
    ),
)
