"""Model Runner V2's sample kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

Notation beyond the table's: ``N`` tokens = ``grid[0]`` (vLLM's index buffers are persistent
and longer, so the count is the grid's), ``NB`` = ``grid[1]`` vocabulary blocks of
``BLOCK_SIZE``, ``r`` = ``expanded_idx_mapping[t]`` the request state of token ``t``.
"""

from .contracts import Contract, _a, _flag, _in_index, _int, _stride

_GUMBEL = "vllm.v1.worker.gpu.sample.gumbel"
_MIN_P = "vllm.v1.worker.gpu.sample.min_p"
_PENALTIES = "vllm.v1.worker.gpu.sample.penalties"

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
        takes_grid=True,
    ),
    Contract(
        "gumbel_sample_kernel",
        "_mrv2_sample",
        "(N, NB): one program per (token, vocabulary block); ``N`` from the grid, one output "
        "slot per program",
        "per block: the Gumbel-max winner of the (temperature-scaled) logits under the "
        "request's murmur3 noise (plain argmax at temperature 0 or r < 0), its index to "
        "local_argmax[t, b] and score to local_max[t, b]; first index on ties, NaN never wins; "
        "optionally copies the block of logits_cache_source to the request's cache column",
        (
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
        ),
        vllm=(f"{_GUMBEL}._gumbel_sample_kernel",),
        runner="v2",
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
        takes_grid=True,
    ),
)
