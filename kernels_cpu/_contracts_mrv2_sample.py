"""Model Runner V2's sample kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

Notation beyond the table's: ``N`` tokens = ``grid[0]`` (vLLM's index buffers are persistent
and longer, so the count is the grid's), ``NB`` = ``grid[1]`` vocabulary blocks of
``BLOCK_SIZE``, ``r`` = ``expanded_idx_mapping[t]`` the request state of token ``t``.
"""

from .contracts import Contract, _a, _constexpr, _flag, _in_index, _int, _stride, span

_GUMBEL = "vllm.v1.worker.gpu.sample.gumbel"
_GREEDY = "vllm.v1.worker.gpu.sample.greedy_argmax"
_MIN_P = "vllm.v1.worker.gpu.sample.min_p"
_PENALTIES = "vllm.v1.worker.gpu.sample.penalties"
_BIAS = "vllm.v1.worker.gpu.sample.logit_bias"
_BAD_WORDS = "vllm.v1.worker.gpu.sample.bad_words"
_LOGPROB = "vllm.v1.worker.gpu.sample.logprob"
_STRUCTURED = "vllm.v1.worker.gpu.structured_outputs"
_METRICS = "vllm.v1.worker.gpu.metrics.logits"

_F32 = ("float32",)
_REAL = ("float32", "float64")
_INDEX = ("int32", "int64")
_LOGITS = ("float32", "float16", "bfloat16")
_CACHE = ("float32", "float64", "float16", "bfloat16")


def _logits(role="inout", dtypes=_F32, extent=None):
    return _a(
        "logits_ptr",
        role,
        dtypes,
        "table",
        extent
        or "``N`` rows of ``vocab_size`` columns, ``logits_stride`` apart (rows may not overlap); "
        "only the rows of tokens the kernel changes are touched",
    )


_MAPPING = _in_index(
    "expanded_idx_mapping_ptr", "``N``: each token's request state ``r``, in its buffers' range"
)
_VOCAB = _int("vocab_size", "``V`` >= 0: columns per row")


def _block(extent="the vocabulary block of ``grid[1]``'s programs (>= 1)"):
    return _int("BLOCK_SIZE", extent)


def _per_request(name, what, dtypes=_REAL):
    return _a(name, "in", dtypes, "flat", f"one per request state ``r``: {what}")


_GUMBEL_ARGS = (
    _a("local_argmax_ptr", "out", _INDEX, "table", "``N`` rows of ``NB`` slots"),
    _stride("local_argmax_stride"),
    _a(
        "local_max_ptr",
        "out",
        _REAL,
        "table",
        "``N`` rows of ``NB`` slots (the float32 or, USE_FP64, float64 score)",
    ),
    _stride("local_max_stride"),
    _a(
        "logits_cache_ptr",
        "out",
        _CACHE,
        "flat",
        "``[R, C, V]`` (a 3-D view with its own strides, or flat): ``cache[r, col, :V]`` "
        "for each token of a request ``r >= 0``; ``None``: no cache",
        optional=True,
    ),
    _int("logits_cache_stride_0", "the cache's stride between requests"),
    _int("logits_cache_stride_1", "the cache's stride between columns"),
    _in_index(
        "logits_cache_col_ptr",
        "``N`` columns under PER_TOKEN_COL, else one; read only with a cache",
        optional=True,
    ),
    _a(
        "logits_cache_source_ptr",
        "in",
        _CACHE,
        "table",
        "``N`` rows of ``V``, the cache's dtype; read only with a cache",
        optional=True,
    ),
    _stride("logits_cache_source_stride"),
    _logits("in", _LOGITS, "``N`` rows of ``V``, ``logits_stride`` apart"),
    _stride("logits_stride"),
    _in_index(
        "expanded_idx_mapping_ptr",
        "``N``: each token's request state ``r`` (< 0: none, a plain argmax)",
    ),
    _per_request("seeds_ptr", "the request's seed", _INDEX),
    _in_index("pos_ptr", "``N``: each token's position in its request's stream"),
    _per_request("temp_ptr", "the temperature, read as float32"),
    _VOCAB,
    _block(),
    _flag("IS_DRAFTING", "the draft's noise: positions + 2**30"),
    _flag("APPLY_TEMPERATURE", "divide by the temperature first"),
    _flag("USE_FP64", "float64 uniforms and scores"),
    _flag("PER_TOKEN_COL", "a cache column per token"),
)


CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "temperature_kernel",
        "_mrv2_sample",
        "(N, NB): one program per (token, vocabulary block); ``N`` from the grid",
        "logits[t, block] /= temperature[r] in float32, except at temperature 0 and 1",
        (
            _logits(),
            _stride("logits_stride"),
            _MAPPING,
            _per_request("temperature_ptr", "read as float32"),
            _VOCAB,
            _block(),
        ),
        vllm=(f"{_GUMBEL}._temperature_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "gumbel_sample_kernel",
        "_mrv2_sample",
        "(N, NB): one program per (token, vocabulary block); ``N`` from the grid, one output "
        "slot per program",
        "per block: the Gumbel-max winner of the (temperature-scaled) logits under the "
        "request's murmur3 noise (plain argmax at temperature 0 or r < 0), its index to "
        "local_argmax[t, b] and score to local_max[t, b]; first index on ties, the score ignoring "
        "NaN and the index counting NaN as -inf; "
        "optionally copies the block of logits_cache_source to the request's cache column",
        (*_GUMBEL_ARGS,),
        vllm=(f"{_GUMBEL}._gumbel_sample_kernel",),
        runner="v2",
        releases=span("0.32", "0.32"),
        takes_grid=True,
        module_rule=("spec_step_seed", False),
    ),
    Contract(
        "gumbel_sample_step_seed_kernel",
        "_mrv2_sample",
        "(N, NB): as gumbel_sample_kernel",
        "vLLM 0.33's form of the Gumbel kernel: gumbel_sample_kernel's arguments, the cache "
        "column mixed into the seed (seed ^ col << 32) whenever there is a cache -- told from "
        "0.32's by its module's spec_step_seed",
        (*_GUMBEL_ARGS,),
        serves="gumbel_sample_kernel",
        runner="v2",
        releases=span("0.33", "0.33"),
        takes_grid=True,
        module_rule=("spec_step_seed", True),
    ),
    Contract(
        "gumbel_sample_biased_kernel",
        "_mrv2_sample",
        "(N, NB): as gumbel_sample_kernel",
        "vLLM 0.34's form of the Gumbel kernel: a float32 bias row added to float32 logits "
        "first (HAS_BIAS), the cache row of a request state from logits_cache_row_mapping "
        "(-1: none), the cache column mixed into the seed (seed ^ col << 32) whenever there is "
        "a cache, and with no logits_cache_source the (biased) logits themselves cached",
        (
            _GUMBEL_ARGS[:10]
            + (
                _in_index(
                    "logits_cache_row_mapping_ptr",
                    "one per request state with a cache (-1: no row); ``None``: the state",
                    optional=True,
                ),
            )
            + _GUMBEL_ARGS[10:12]
            + (
                _a(
                    "bias_ptr",
                    "in",
                    _F32,
                    "table",
                    "``N`` rows of ``V`` under HAS_BIAS (float32 logits only)",
                    optional=True,
                ),
                _stride("bias_stride"),
            )
            + _GUMBEL_ARGS[12:]
            + (_flag("HAS_BIAS", "add ``bias_ptr``'s rows first"),)
        ),
        serves="gumbel_sample_kernel",
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "gumbel_combine_kernel",
        "_mrv2_argmax",
        "(N,): one program per token; ``N`` from the grid",
        "per token: sampled[t] = local_argmax[t, b] for the block b whose local_max decides "
        "among the first min(num_blocks, PADDED_NUM_BLOCKS): the first NaN, else the first "
        "maximum (torch.argmax's rule); b = PADDED_NUM_BLOCKS when there is no block",
        (
            _a(
                "local_argmax_ptr",
                "in",
                _INDEX,
                "table",
                "``N`` rows, ``local_argmax_stride`` apart: only the slot each row picks",
            ),
            _stride("local_argmax_stride"),
            _a(
                "local_max_ptr",
                "in",
                _REAL,
                "table",
                "``N`` rows of ``min(num_blocks, PADDED_NUM_BLOCKS)`` scores",
            ),
            _stride("local_max_stride"),
            _a("sampled_ptr", "out", _INDEX, "flat", "``N``"),
            _int("num_blocks", "blocks per row (<= 0: none)"),
            _int("PADDED_NUM_BLOCKS", "lanes per row (>= 1): blocks past it are not read"),
        ),
        vllm=(f"{_GUMBEL}._gumbel_combine_kernel",),
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "argmax_partial_kernel",
        "_mrv2_argmax",
        "(R, S): one program per (row, block of ``BLOCK`` columns); ``R``, ``S`` from the grid",
        "per block: its largest value (NaN counted as -inf) to PV[row * SPLITS + part] and "
        "the column of its first occurrence to PI (part * BLOCK when every lane is -inf or "
        "past N)",
        (
            _a(
                "X",
                "in",
                _LOGITS,
                "table",
                "``R`` rows, ``SX`` apart: the columns below ``N`` of the grid's blocks",
            ),
            _a("PV", "out", _REAL, "table", "``R`` rows of ``S`` slots, ``SPLITS`` apart"),
            _a("PI", "out", _INDEX, "table", "``R`` rows of ``S`` slots, ``SPLITS`` apart"),
            _int("N", "columns per row (<= 0: every block empty)"),
            _stride("SX"),
            _int("SPLITS", "PV's and PI's row stride (>= ``S`` with two or more rows)"),
            _int("BLOCK", "columns per block (>= 1)"),
        ),
        vllm=(f"{_GREEDY}._argmax_partial",),
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "argmax_finish_kernel",
        "_mrv2_argmax",
        "(R,): one program per row; ``R`` from the grid",
        "per row: OUT[row] = PI[row * SPLITS + part] for the first part whose PV is the "
        "largest of the row's first min(SPLITS, BLOCK) (NaN counted as -inf; part 0 when all "
        "are -inf or there are none)",
        (
            _a(
                "PV",
                "in",
                _REAL,
                "table",
                "``R`` rows of ``min(SPLITS, BLOCK)`` block maxima, ``SPLITS`` apart",
            ),
            _a("PI", "in", _INDEX, "table", "``R`` rows, ``SPLITS`` apart: the slot picked"),
            _a("OUT", "out", _INDEX, "flat", "``R``"),
            _int("SPLITS", "blocks per row, PV's and PI's row stride (>= 0)"),
            _int("BLOCK", "lanes per row (>= 1): blocks past it are not read"),
        ),
        vllm=(f"{_GREEDY}._argmax_finish",),
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "min_p_kernel",
        "_mrv2_sample",
        "(N,): one program per token; ``N`` from the grid",
        "per token with min_p[r] != 0: logits below max(row) + log(min_p[r]) become -inf "
        "(max ignores NaN; the threshold in float32)",
        (
            _logits(),
            _stride("logits_stride"),
            _MAPPING,
            _per_request("min_p_ptr", "read as float32"),
            _VOCAB,
            _block("the kernel's loop step (>= 1); does not change the result"),
        ),
        vllm=(f"{_MIN_P}._min_p_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "penalties_kernel",
        "_mrv2_sample",
        "(N, NB): one program per (token, vocabulary block); ``N`` from the grid",
        "repetition (prompt or output tokens), frequency and presence penalties, counts being "
        "the request's output counts plus its earlier draft tokens of the step",
        (
            _logits(),
            _stride("logits_stride"),
            _MAPPING,
            _in_index(
                "token_ids_ptr",
                "the step's input tokens: ``token_ids[t - pos + 1 .. t]`` for a token with a "
                "penalty at local position ``pos``",
            ),
            _in_index(
                "expanded_local_pos_ptr", "``N``: each token's position in its request's step"
            ),
            _per_request("repetition_penalty_ptr", "float32", _F32),
            _per_request("frequency_penalty_ptr", "float32", _F32),
            _per_request("presence_penalty_ptr", "float32", _F32),
            _a(
                "prompt_bin_mask_ptr",
                "in",
                ("int32",),
                "table",
                "a row of ``cdiv(V, 32)`` bit words per request with a repetition penalty",
            ),
            _stride("prompt_bin_mask_stride"),
            _a(
                "output_bin_counts_ptr",
                "in",
                _INDEX,
                "table",
                "a row of ``V`` counts per request with a penalty",
            ),
            _stride("output_bin_counts_stride"),
            _VOCAB,
            _block("a power of two >= 32 (the vocabulary block of ``grid[1]``)"),
        ),
        vllm=(f"{_PENALTIES}._penalties_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "bincount_kernel",
        "_mrv2_sample",
        "(N, NB): one program per (request of the mapping, block of positions); ``N`` from "
        "the grid",
        "sets the prompt tokens' bits of prompt_bin_mask and counts the output tokens "
        "(prompt_len <= position < prefill_len) in output_bin_counts, up to prefill_len",
        (
            _MAPPING,
            _a(
                "all_token_ids_ptr",
                "in",
                _INDEX,
                "table",
                "row ``r``: the request's tokens up to its prefill length (ids >= 0)",
            ),
            _stride("all_token_ids_stride"),
            _per_request("prompt_len_ptr", "its prompt length", _INDEX),
            _per_request("prefill_len_ptr", "its prefill length", _INDEX),
            _a(
                "prompt_bin_mask_ptr",
                "inout",
                ("int32",),
                "table",
                "row ``r``: the word of each prompt token (bits or-ed in)",
            ),
            _stride("prompt_bin_mask_stride"),
            _a(
                "output_bin_counts_ptr",
                "inout",
                _INDEX,
                "table",
                "row ``r``: the column of each output token (incremented)",
            ),
            _stride("output_bin_counts_stride"),
            _block("the block of positions of ``grid[1]``'s programs (>= 1)"),
        ),
        vllm=(f"{_PENALTIES}._bincount_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "bias_kernel",
        "_mrv2_sample_logits",
        "(N,): one program per token; ``N`` from the grid",
        "per token, in order: only the request's allowed token ids keep their logits (the rest "
        "-inf), its logit biases are added, and while pos + 1 < min_len its stop tokens get "
        "-inf (CHECK_ALL_MASKED_ROWS: given back, if finite, to a requesting row left all -inf)",
        (
            _logits(extent="``N`` rows of ``vocab_size``, ``logits_stride`` apart"),
            _stride("logits_stride"),
            _VOCAB,
            _MAPPING,
            _per_request("num_allowed_token_ids_ptr", "allowed ids (0: all)", _INDEX),
            _a(
                "allowed_token_ids_ptr",
                "in",
                _INDEX,
                "table",
                "row ``r``: its first ``min(n, BLOCK_SIZE)`` ids, in ``[0, V)``",
            ),
            _stride("allowed_token_ids_stride"),
            _per_request("num_logit_bias_ptr", "biased ids", _INDEX),
            _a("bias_token_ids_ptr", "in", _INDEX, "table", "row ``r``: ids in ``[0, V)``"),
            _stride("bias_token_ids_stride"),
            _a("bias_ptr", "in", _F32, "table", "row ``r``: one bias per biased id"),
            _stride("bias_stride"),
            _in_index("pos_ptr", "``N``: each token's position"),
            _per_request("min_lens_ptr", "its min_tokens length", _INDEX),
            _per_request("num_stop_token_ids_ptr", "stop ids", _INDEX),
            _per_request("restore_when_all_masked_ptr", "read under CHECK_ALL_MASKED_ROWS", _INDEX),
            _a("stop_token_ids_ptr", "in", _INDEX, "table", "row ``r``: ids in ``[0, V)``"),
            _stride("stop_token_ids_stride"),
            _block("lanes per list (ids past it are not read)"),
            _int("LOGITS_BLOCK_SIZE", "the row loop's step (>= 1); does not change the result"),
            _flag("CHECK_ALL_MASKED_ROWS", "give stop tokens back to an all -inf row"),
        ),
        vllm=(f"{_BIAS}._bias_kernel",),
        runner="v2",
        releases=span("0.29", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "bad_words_kernel",
        "_mrv2_sample_logits",
        "(N, W): one program per (token, bad word); ``N`` from the grid",
        "a bad word's last token gets -inf where the request's output so far (committed "
        "tokens, then the step's earlier drafts) ends with the word's prefix",
        (
            _logits(extent="``N`` rows, ``logits_stride`` apart: the columns of matched words"),
            _stride("logits_stride"),
            _MAPPING,
            _a("bad_word_token_ids_ptr", "in", _INDEX, "table", "row ``r``: the words' tokens"),
            _stride("bad_word_token_ids_stride"),
            _a(
                "bad_word_offsets_ptr",
                "in",
                _INDEX,
                "table",
                "row ``r``: ``num_bad_words + 1`` increasing offsets from 0",
            ),
            _stride("bad_word_offsets_stride"),
            _per_request("num_bad_words_ptr", "its bad words", _INDEX),
            _a(
                "all_token_ids_ptr",
                "in",
                _INDEX,
                "table",
                "row ``r``: prompt and output tokens, up to ``total_len``",
            ),
            _stride("all_token_ids_stride"),
            _per_request("prompt_len_ptr", "its prompt length", _INDEX),
            _per_request("total_len_ptr", "its committed length", _INDEX),
            _in_index("input_ids_ptr", "the step's tokens (drafts after each request's first)"),
            _in_index("expanded_local_pos_ptr", "``N``: each token's position in the step"),
        ),
        vllm=(f"{_BAD_WORDS}._bad_words_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "topk_log_softmax_kernel",
        "_mrv2_sample_logits",
        "(N,): one program per row; ``N`` from the grid",
        "log-softmax of the row at its topk ids: x - max - log(sum(exp(row - max))), float32",
        (
            _a("output_ptr", "out", _F32, "flat", "``N * topk``"),
            _logits("in", _LOGITS, "``N`` rows of ``V``, ``logits_stride`` apart"),
            _stride("logits_stride"),
            _a("topk_ids_ptr", "in", _INDEX, "table", "``N`` rows of ``topk`` ids in ``[0, V)``"),
            _stride("topk_ids_stride"),
            _int("topk", "ids per row (>= 0)"),
            _VOCAB,
            _block("the sum's block (>= 1)"),
            _constexpr("TOPK_BLOCK_SIZE"),
        ),
        vllm=(f"{_LOGPROB}._topk_log_softmax_kernel",),
        runner="v2",
        releases=span("0.31", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "ranks_kernel",
        "_mrv2_sample_logits",
        "(N,): one program per row; ``N`` from the grid",
        "the number of logits >= the token's logit (a -inf token also counts the last "
        "block's padding lanes, as the kernel does)",
        (
            _a("output_ptr", "out", _INDEX, "flat", "``N``"),
            _logits("in", _LOGITS, "``N`` rows of ``V``, ``logits_stride`` apart"),
            _stride("logits_stride"),
            _in_index("token_ids_ptr", "``N`` ids in ``[0, V)``"),
            _VOCAB,
            _block("the loop's block (>= 1): its padding lanes count for a -inf token"),
        ),
        vllm=(f"{_LOGPROB}._ranks_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "fill_logprob_token_ids_kernel",
        "_mrv2_sample_logits",
        "(N,): one program per row; ``N`` from the grid",
        "row = [sampled, the request's own logprob ids or the row's top-k ids]; the valid mask "
        "set where written",
        (
            _a("out_token_ids_ptr", "out", _INDEX, "table", "``N`` rows of ``1 + ids``"),
            _stride("out_token_ids_stride"),
            _a("out_valid_mask_ptr", "out", ("bool",), "table", "``N`` rows of ``1 + ids``"),
            _stride("out_valid_mask_stride"),
            _in_index("sampled_token_ids_ptr", "``N``"),
            _a(
                "topk_indices_ptr",
                "in",
                _INDEX,
                "table",
                "row ``t``: ``min(NUM_TOPK, PADDED_COLS)`` ids, for rows without their own",
            ),
            _stride("topk_indices_stride"),
            _MAPPING,
            _per_request("num_per_req_token_ids_ptr", "its own ids (0: none)", _INDEX),
            _a("per_req_token_ids_ptr", "in", _INDEX, "table", "row ``r``: its own ids"),
            _stride("per_req_token_ids_stride"),
            _int("NUM_TOPK", "top-k ids per row (>= 0)"),
            _int("PADDED_COLS", "lanes per row (>= 1): ids past it are not written"),
        ),
        vllm=(f"{_LOGPROB}._fill_logprob_token_ids_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "apply_grammar_bitmask_kernel",
        "_mrv2_sample_logits",
        "(M, NB): one program per (bitmask row, vocabulary block); ``M`` from the grid",
        "logits row cu[req] + position (logits_indices = req * MASK_STRIDE + position, "
        "active while position < the request's logits) gets -inf where its bit is 0",
        (
            _logits(extent="the rows the active bitmask rows name, ``V`` columns"),
            _stride("logits_stride"),
            _in_index("logits_indices_ptr", "``M`` indices >= 0"),
            _in_index("cu_num_logits_ptr", "``req + 2`` for each request named"),
            _a(
                "bitmask_ptr",
                "in",
                ("int32",),
                "table",
                "``M`` rows of ``min(cdiv(V, 32), bitmask_stride)`` words; columns past the "
                "stride read bit 0 (masked), as the kernel's masked load reads 0",
            ),
            _stride("bitmask_stride"),
            _VOCAB,
            _int("MASK_STRIDE", ">= 1"),
            _block("a power of two >= 32 (the vocabulary block of ``grid[1]``)"),
        ),
        vllm=(f"{_STRUCTURED}._apply_grammar_bitmask_kernel",),
        runner="v2",
        releases=span("0.28", "0.34"),
        takes_grid=True,
    ),
)
