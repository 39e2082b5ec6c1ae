"""Model Runner V2's spec kernels: their contracts (see ``kernels_cpu._contracts_mrv2``).

The rejection sampler of ``vllm/v1/worker/gpu/spec_decode/``: ``rejection_sampler_utils``'s
kernels in the order ``rejection_sample`` launches them, then the gathering and flattening of
``rejection_sampler.py``. Notation: ``L`` logits rows (a request's draft rows and its bonus
row), ``R`` requests, ``NB`` vocabulary blocks of the grid's second axis, ``V`` = ``vocab_size``;
``cu`` = ``cu_num_logits_ptr`` (``R + 1`` exclusive offsets: request ``r`` has rows
``cu[r]:cu[r + 1]``, ``n_r = cu[r + 1] - cu[r] - 1`` drafts). Then vLLM 0.34's draft logits
cache (``draft_logits.py``); the later releases' forms of the kernels are derived from 0.32's
contracts at the end and listed beside them.
"""

from .contracts import Contract, _a, _constexpr, _flag, _in_index, _int, _out_index, _stride, span

_UTILS = "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils"
_SAMPLER = "vllm.v1.worker.gpu.spec_decode.rejection_sampler"
_DRAFT_LOGITS = "vllm.v1.worker.gpu.spec_decode.draft_logits"
_LOGITS = ("float32", "float16", "bfloat16")
_F32 = ("float32",)
_REAL = ("float32", "float64")
_INDEX = ("int32", "int64")


def _ftable(name, role, extent, dtypes=_F32):
    return _a(name, role, dtypes, "table", extent)


def _target_logits():
    return (
        _ftable(
            "target_logits_ptr",
            "in",
            "the rows the programs read, ``V`` columns (a token's column for a single read)",
            _LOGITS,
        ),
        _stride("target_logits_stride"),
    )


def _draft_logits(extent):
    return (
        _a("draft_logits_ptr", "in", _LOGITS, "table3", extent, optional=True),
        _stride("draft_logits_stride_0"),
        _stride("draft_logits_stride_1"),
    )


def _stats(prefix, which, role="in", extent="the rows read, ``vocab_num_blocks`` blocks"):
    return (
        _ftable(f"{prefix}_local_max_ptr", role, f"{which} max per row and block: {extent}"),
        _stride(f"{prefix}_local_max_stride"),
        _ftable(f"{prefix}_local_sumexp_ptr", role, f"{which} sum of exponentials: {extent}"),
        _stride(f"{prefix}_local_sumexp_stride"),
    )


_TEMP = _a("temp_ptr", "in", _REAL, "flat", "every request slot read (read as fp32)")
_CU = _in_index("cu_num_logits_ptr", "``R + 1`` offsets of the grid's requests")
_PADDED = _int("PADDED_VOCAB_NUM_BLOCKS", "a power of two; blocks reduced (those >= NB masked)")
_HAS_DRAFT = _flag("HAS_DRAFT_LOGITS", "default: ``draft_logits_ptr`` given", optional=True)
_GRID_RT = "(L, NB): program (row, vocabulary block); the CPU kernel runs them all"
_GRID_R = "(R,): one program per request; the count comes from the grid"

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "compute_local_logits_stats_kernel",
        "_mrv2_spec",
        _GRID_RT,
        "per draft row (local position < num_speculative_steps) and vocabulary block of "
        "BLOCK_SIZE (masked at vocab_size): a greedy row's target max and first argmax; any "
        "other row's target max and sum(exp(x - max)) (0 when the max is -inf), and with draft "
        "logits the same of the request's draft logits at that step divided by the temperature",
        (
            _a(
                "target_local_argmax_ptr",
                "out",
                _INDEX,
                "table",
                "greedy draft rows, ``NB`` blocks (rows may not overlap)",
            ),
            _stride("target_local_argmax_stride"),
            _ftable("target_local_max_ptr", "out", "every draft row, ``NB`` blocks"),
            _stride("target_local_max_stride"),
            _ftable("target_local_sumexp_ptr", "out", "non-greedy draft rows, ``NB`` blocks"),
            _stride("target_local_sumexp_stride"),
            _ftable(
                "draft_local_max_ptr", "out", "non-greedy draft rows, ``NB`` blocks (draft only)"
            ),
            _stride("draft_local_max_stride"),
            _ftable(
                "draft_local_sumexp_ptr",
                "out",
                "non-greedy draft rows, ``NB`` blocks (draft only)",
            ),
            _stride("draft_local_sumexp_stride"),
            *_target_logits(),
            *_draft_logits("slot x step of each non-greedy draft row, ``V`` columns"),
            _in_index("expanded_idx_mapping_ptr", "``L``; request slots"),
            _in_index("expanded_local_pos_ptr", "``L``; the row's step"),
            _TEMP,
            _int("vocab_size", "columns per row"),
            _int("num_speculative_steps", "rows at or beyond it are bonus rows (skipped)"),
            _int("BLOCK_SIZE", "a power of two: the vocabulary block of a program"),
            _HAS_DRAFT,
        ),
        vllm=(f"{_UTILS}._compute_local_logits_stats_kernel",),
        runner="v2",
        releases=span("0.27", "0.32"),
        takes_grid=True,
    ),
    Contract(
        "compute_cumulative_log_p_kernel",
        "_mrv2_spec",
        _GRID_R,
        "per non-greedy request, over its draft rows: log_p = min(log_p + log p(d) - log q(d), "
        "0) for each draft d >= 0 (one-hot draft: log q = 0), the log-probabilities from the "
        "rows' block maxima and sums; stored at every draft row (a -1 placeholder carries the "
        "last value)",
        (
            _a(
                "cumulative_log_p_ptr",
                "out",
                _F32,
                "flat",
                "the draft rows of the non-greedy requests",
            ),
            *_target_logits(),
            *_stats("target", "target"),
            _in_index("draft_sampled_ptr", "``cu[R]``; the token after each draft row"),
            *_draft_logits("slot x step of each draft read, the token's column"),
            *_stats("draft", "draft (draft only)"),
            _CU,
            _in_index("idx_mapping_ptr", "``R``; request slots"),
            _TEMP,
            _int("vocab_num_blocks", "``NB``"),
            _PADDED,
            _HAS_DRAFT,
        ),
        vllm=(f"{_UTILS}._compute_cumulative_log_p_kernel",),
        runner="v2",
        releases=span("0.27", "0.33"),
        takes_grid=True,
    ),
    Contract(
        "compute_cumulative_log_p_row_mapping_kernel",
        "_mrv2_spec",
        _GRID_R,
        "vLLM 0.34's form of compute_cumulative_log_p_kernel: the draft logits of request slot "
        "s read from cache row max(row_mapping[s], 0) when draft_logits_row_mapping_ptr is "
        "given (a sharded draft logits cache), from row s when it is None",
        (
            _a(
                "cumulative_log_p_ptr",
                "out",
                _F32,
                "flat",
                "the draft rows of the non-greedy requests",
            ),  # fmt: skip
            *_target_logits(),
            *_stats("target", "target"),
            _in_index("draft_sampled_ptr", "``cu[R]``; the token after each draft row"),
            *_draft_logits("row x step of each draft read, the token's column"),
            _in_index(
                "draft_logits_row_mapping_ptr",
                "each non-greedy request slot: its cache row (< 0: row 0 is read)",
                optional=True,
            ),
            *_stats("draft", "draft (draft only)"),
            _CU,
            _in_index("idx_mapping_ptr", "``R``; request slots"),
            _TEMP,
            _int("vocab_num_blocks", "``NB``"),
            _PADDED,
            _HAS_DRAFT,
        ),
        serves="compute_cumulative_log_p_kernel",
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "compute_local_residual_mass_kernel",
        "_mrv2_spec",
        _GRID_RT + " (the grid's rows bound the lookahead: its last row is skipped)",
        "per row that is neither its request's first nor its bonus row, whose next draft is "
        "not a -1 placeholder, of a non-greedy request, and per vocabulary block: sum(max(p * "
        "M_b(x) - M_s(x), 0)) with p = exp(cumulative_log_p[row - 1]) and M_b, M_s the target "
        "and draft probabilities",
        (
            _ftable("local_residual_mass_ptr", "out", "the rows computed, ``NB`` blocks"),
            _stride("local_residual_mass_stride"),
            _a("cumulative_log_p_ptr", "in", _F32, "flat", "the row before each row computed"),
            *_target_logits(),
            *_stats("target", "target"),
            _a(
                "draft_logits_ptr",
                "in",
                _LOGITS,
                "table3",
                "slot x step of each row computed, ``V`` columns",
            ),
            _stride("draft_logits_stride_0"),
            _stride("draft_logits_stride_1"),
            *_stats("draft", "draft"),
            _in_index("draft_sampled_ptr", "the token after each row considered"),
            _in_index("expanded_idx_mapping_ptr", "``L - 1``; request slots"),
            _in_index("expanded_local_pos_ptr", "``L - 1``; the row's step"),
            _TEMP,
            _int("vocab_size", "columns per row"),
            _int("num_speculative_steps", "rows at or beyond it are bonus rows (skipped)"),
            _int("vocab_num_blocks", "blocks of the stats tables"),
            _int("BLOCK_SIZE", "a power of two: the vocabulary block of a program"),
            _PADDED,
        ),
        vllm=(f"{_UTILS}._compute_local_residual_mass_kernel",),
        runner="v2",
        releases=span("0.28", "0.32"),
        takes_grid=True,
    ),
    Contract(
        "rejection_kernel",
        "_mrv2_spec",
        _GRID_R,
        "per request, with u = tl.rand(seed, pos) (Philox) per draft position: greedy -- "
        "accept while the draft is the target argmax (SYNTHETIC_MODE: u < rate), storing the "
        "argmax at the first rejection; otherwise (a -1 draft ends verification) -- accept "
        "while log p(d) > log u + log q(d) (SYNTHETIC_MODE: u < rate), or with "
        "USE_BLOCK_VERIFICATION the accepted length is the last position with u <= h (Sun et "
        "al.); stores the drafts verified, the accepted count and the log-sum-exps of the "
        "rejected row (block verification) or of the last verified one",
        (
            _a(
                "sampled_ptr",
                "out",
                _INDEX,
                "table",
                "``R`` rows, each request's ``n_r`` draft slots at most",
            ),
            _stride("sampled_stride"),
            _out_index("rejected_steps_ptr", "``R``: the accepted count"),
            _a("target_rejected_logsumexp_ptr", "out", _F32, "flat", "``R``"),
            _a("draft_rejected_logsumexp_ptr", "out", _F32, "flat", "``R``"),
            *_target_logits(),
            _a(
                "target_local_argmax_ptr",
                "in",
                _INDEX,
                "table",
                "the greedy requests' draft rows, ``NB`` blocks",
            ),
            _stride("target_local_argmax_stride"),
            *_stats("target", "target"),
            _in_index("draft_sampled_ptr", "``cu[R]``; the token after each draft row"),
            *_draft_logits("slot x step of each draft read, the token's column"),
            *_stats("draft", "draft (draft only)"),
            _CU,
            _in_index("idx_mapping_ptr", "``R``; request slots"),
            _TEMP,
            _in_index("seed_ptr", "every request slot read"),
            _in_index("pos_ptr", "each draft row (an int64 position's high word is counted)"),
            _a(
                "synthetic_conditional_rates_ptr",
                "in",
                _REAL,
                "flat",
                "the longest request's drafts (SYNTHETIC_MODE only)",
                optional=True,
            ),
            _a(
                "cumulative_log_p_ptr",
                "in",
                _F32,
                "flat",
                "the draft rows (USE_BLOCK_VERIFICATION only)",
                optional=True,
            ),
            _a(
                "local_residual_mass_ptr",
                "in",
                _F32,
                "table",
                "the rows after each draft row, ``NB`` blocks (block verification with draft "
                "logits only)",
                optional=True,
            ),
            _stride("local_residual_mass_stride"),
            _int("vocab_num_blocks", "``NB`` >= 1"),
            _PADDED,
            _HAS_DRAFT,
            _flag("SYNTHETIC_MODE", "default: rates given", optional=True),
            _flag(
                "USE_BLOCK_VERIFICATION", "default: ``cumulative_log_p_ptr`` given", optional=True
            ),
        ),
        vllm=(f"{_UTILS}._rejection_kernel",),
        runner="v2",
        releases=span("0.27", "0.32"),
        takes_grid=True,
    ),
    Contract(
        "resample_kernel",
        "_mrv2_spec",
        "(R, NB): program (request, vocabulary block); the CPU kernel runs them all",
        "per request whose resampled row (cu[r] + rejected steps) is the bonus row or is not "
        "greedy, and per vocabulary block: the Gumbel-max draw (murmur3 noise of the request's "
        "seed at the row's position, keyed by token; a plain argmax at temperature 0) over the "
        "residual -- max(p - q, 0) in log space with draft logits (block verification: p "
        "scaled by p_tau), the target without the rejected token for a one-hot draft, the "
        "target itself for a bonus row or a -1 placeholder; with WATERMARK a watermarked "
        "non-greedy request (its row's context not marked seen by DEDUPLICATE_CONTEXTS) draws "
        "with vLLM's keyed Philox PRF over the row's context words instead; stores the block's "
        "token and noised max (first index on ties, the max ignoring NaN and the index counting "
        "NaN as -inf: a block scoring nothing above -inf stores its first token)",
        (
            _a("resampled_local_argmax_ptr", "out", _INDEX, "table", "``R`` rows, ``NB`` blocks"),
            _stride("resampled_local_argmax_stride"),
            _a(
                "resampled_local_max_ptr",
                "out",
                _REAL,
                "table",
                "``R`` rows, ``NB`` blocks (float64 with USE_FP64)",
            ),
            _stride("resampled_local_max_stride"),
            *_target_logits(),
            _a("target_rejected_logsumexp_ptr", "in", _F32, "flat", "``R`` (draft only)"),
            *_draft_logits("slot x rejected step of each request, ``V`` columns"),
            _a("draft_rejected_logsumexp_ptr", "in", _F32, "flat", "``R`` (draft only)"),
            _in_index("rejected_step_ptr", "``R``: the accepted counts"),
            _CU,
            _in_index("expanded_idx_mapping_ptr", "each resampled row; request slots"),
            _in_index("draft_sampled_ptr", "the token after each resampled non-bonus row"),
            _TEMP,
            _in_index("seed_ptr", "every request slot read"),
            _in_index("pos_ptr", "each resampled row"),
            _a(
                "cumulative_log_p_ptr",
                "in",
                _F32,
                "flat",
                "the row before each rejected row (block verification with draft logits)",
                optional=True,
            ),
            _a(
                "contexts_ptr",
                "in",
                _INDEX,
                "table",
                "each watermarked resampled row, ``CONTEXT_WIDTH`` words (WATERMARK only)",
                optional=True,
            ),
            _stride("contexts_stride"),
            _a(
                "watermarking_ptr",
                "in",
                ("uint8", "bool"),
                "flat",
                "every non-greedy request slot read (WATERMARK only)",
                optional=True,
            ),
            _a(
                "watermarking_skip_mask_ptr",
                "in",
                ("uint8", "bool"),
                "flat",
                "each watermarked resampled row (DEDUPLICATE_CONTEXTS only)",
                optional=True,
            ),
            _int("watermark_key_0", "the key's low word (read as uint32)"),
            _int("watermark_key_1", "the key's high word (read as uint32)"),
            _int("vocab_size", "columns per row"),
            _int("BLOCK_SIZE", "a power of two: the vocabulary block of a program"),
            _HAS_DRAFT,
            _flag("USE_FP64", "default: ``resampled_local_max_ptr`` is float64", optional=True),
            _flag(
                "USE_BLOCK_VERIFICATION", "default: ``cumulative_log_p_ptr`` given", optional=True
            ),
            _int(
                "CONTEXT_WIDTH",
                ">= 1 with WATERMARK: context words per row (default 1)",
                optional=True,
            ),
            _flag("WATERMARK", "default: ``contexts_ptr`` given", optional=True),
            _flag(
                "DEDUPLICATE_CONTEXTS",
                "default: ``watermarking_skip_mask_ptr`` given; read with WATERMARK only",
                optional=True,
            ),
        ),
        vllm=(f"{_UTILS}._resample_kernel",),
        runner="v2",
        releases=span("0.32", "0.33"),
        takes_grid=True,
    ),
    Contract(
        "insert_resampled_kernel",
        "_mrv2_spec",
        _GRID_R,
        "per request: num_sampled += 1 and, unless the request is greedy and its resampled row "
        "is not the bonus row, the token of the block with the first largest max (NaN read as "
        "-inf) stored after the accepted drafts",
        (
            _a("sampled_ptr", "out", _INDEX, "table", "``R`` rows, slot ``num_sampled``"),
            _stride("sampled_stride"),
            _a("num_sampled_ptr", "inout", _INDEX, "flat", "``R``; incremented"),
            _a("resampled_local_argmax_ptr", "in", _INDEX, "table", "``R`` rows, ``NB`` blocks"),
            _stride("resampled_local_argmax_stride"),
            _a("resampled_local_max_ptr", "in", _REAL, "table", "``R`` rows, ``NB`` blocks"),
            _stride("resampled_local_max_stride"),
            _int("resample_num_blocks", "``NB``"),
            _CU,
            _in_index("expanded_idx_mapping_ptr", "each resampled row; request slots"),
            _TEMP,
            _int("PADDED_RESAMPLE_NUM_BLOCKS", "a power of two; blocks compared"),
        ),
        vllm=(f"{_UTILS}._insert_resampled_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "gather_draft_sampled_kernel",
        "_mrv2_spec",
        "(cdiv(num_logits, BLOCK_SIZE),): the CPU kernel gathers all ``num_logits`` rows",
        "per logits row: its input token and position (logits_indices names the token), the "
        "token -1 for a draft slot (local position > 0) whose step starts inside the request's "
        "prefill (pos - local_pos < prefill_len)",
        (
            _out_index("draft_sampled_ptr", "``num_logits``"),
            _out_index("pos_ptr", "``num_logits``"),
            _in_index("input_ids_ptr", "each token named"),
            _in_index("positions_ptr", "each token named"),
            _in_index("logits_indices_ptr", "``num_logits``; token indices"),
            _in_index("expanded_idx_mapping_ptr", "``num_logits``; request slots"),
            _in_index("expanded_local_pos_ptr", "``num_logits``"),
            _in_index("prefill_len_ptr", "each request slot named"),
            _int("num_logits", "rows (<= 0: none)"),
            _constexpr("BLOCK_SIZE"),
        ),
        vllm=(f"{_SAMPLER}._gather_draft_sampled_kernel",),
        runner="v2",
        releases=span("0.31", "0.34"),
    ),
    Contract(
        "flatten_sampled_kernel",
        "_mrv2_spec",
        _GRID_R,
        "per request: its first num_sampled tokens of sampled copied to flat_sampled at "
        "cu[r] (the accepted tokens packed as the logits rows they came from)",
        (
            _out_index("flat_sampled_ptr", "``cu[r] + num_sampled[r]`` for every request"),
            _a("sampled_ptr", "in", _INDEX, "table", "``R`` rows, ``num_sampled`` columns"),
            _stride("sampled_stride"),
            _in_index("num_sampled_ptr", "``R``"),
            _in_index("cu_num_logits_ptr", "``R`` offsets (request starts)"),
        ),
        vllm=(f"{_SAMPLER}._flatten_sampled_kernel",),
        runner="v2",
        releases=span("0.27", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "assign_rows_kernel",
        "_mrv2_spec",
        "(G,): programs of ``BLOCK_SIZE`` batch positions; ``n`` = min(num_reqs, G * "
        "BLOCK_SIZE) of them, from the grid",
        "a batch-sharded draft logits cache's rows, per batch position b < n: slot s = "
        "idx_mapping[b] goes to rank b % NUM_SHARDS, row b // NUM_SHARDS -- shard_mapping[s] = "
        "the rank, row_mapping[s] = the row on rank SHARD_IDX (else -1), inverse_row_mapping"
        "[row] = s for SHARD_IDX's rows",
        (
            _in_index("idx_mapping_ptr", "``n``: distinct request slots"),
            _a("shard_mapping_ptr", "inout", _INDEX, "flat", "the entries of the slots named"),
            _a("row_mapping_ptr", "inout", _INDEX, "flat", "the entries of the slots named"),
            _a(
                "inverse_row_mapping_ptr",
                "inout",
                _INDEX,
                "flat",
                "the rows of ``SHARD_IDX``'s batch positions",
            ),
            _int("num_reqs", "batch positions (<= 0: none)"),
            _int("NUM_SHARDS", ">= 1: TP ranks"),
            _int("SHARD_IDX", "this rank"),
            _int("BLOCK_SIZE", "a power of two: batch positions per program"),
        ),
        vllm=(f"{_DRAFT_LOGITS}._assign_rows_kernel",),
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
    Contract(
        "stale_drafts_kernel",
        "_mrv2_spec",
        "(G,): programs of ``BLOCK_SIZE`` logits rows; ``n`` = min(num_logits, G * "
        "BLOCK_SIZE) of them, from the grid",
        "per logits row t < n: stale[t] = a draft row (local position > 0) whose request slot s "
        "has no cache row on this rank (row_mapping[s] < 0) or whose row was given to another "
        "slot since (inverse_row_mapping[row] != s)",
        (
            _a("stale_ptr", "out", ("bool", "uint8"), "flat", "``n``"),
            _in_index("expanded_idx_mapping_ptr", "``n``: request slots"),
            _in_index("expanded_local_pos_ptr", "``n``"),
            _in_index(
                "row_mapping_ptr",
                "each slot >= 0 named; ``None``: the slot is its row (a replicated cache)",
                optional=True,
            ),
            _in_index("inverse_row_mapping_ptr", "each row >= 0 reached"),
            _int("num_logits", "logits rows (<= 0: none)"),
            _int("BLOCK_SIZE", "a power of two: logits rows per program"),
        ),
        vllm=(f"{_DRAFT_LOGITS}._stale_drafts_kernel",),
        runner="v2",
        releases=span("0.34", "0.34"),
        takes_grid=True,
    ),
)


# -- the later releases' forms of the stats and residual kernels ----------------------------------

_NUM_LOGITS = _int(
    "num_logits",
    "rows: a row whose next row is at or past it, or at local position 0, is a bonus row (skipped)",
)
_ROW_MAPPING = _in_index(
    "draft_logits_row_mapping_ptr",
    "each non-greedy request slot whose draft logits are read: its cache row (< 0: row 0 is "
    "read); ``None``: the slot is its row",
    optional=True,
)


def _later_form(base, name, release, summary, row_mapping, appended=(), after=None):
    """``base``'s contract as a later release has it: ``num_logits`` for
    ``num_speculative_steps`` (vLLM 0.33), with ``row_mapping`` the draft logits cache's row
    mapping after ``draft_logits_stride_1`` (0.34), ``after`` = ``{name: args}`` inserted
    after the argument of that name, then the ``appended`` arguments."""
    (c,) = [c for c in CONTRACTS if c.name == base]
    args = []
    for a in c.args:
        args.append(_NUM_LOGITS if a.name == "num_speculative_steps" else a)
        if row_mapping and a.name == "draft_logits_stride_1":
            args.append(_ROW_MAPPING)
        args.extend((after or {}).get(a.name, ()))
    return c._replace(
        name=name,
        summary=summary,
        args=(*args, *appended),
        vllm=(),
        serves=base,
        releases=span(release, release),
    )


_BONUS_033 = (
    "a bonus row is one whose next row starts a request or lies at or past num_logits "
    "(adaptive verification may end a request before num_speculative_steps)"
)
_ROWS_034 = (
    "the draft logits of request slot s read from cache row max(row_mapping[s], 0) when "
    "draft_logits_row_mapping_ptr is given (a sharded draft logits cache), from row s when None"
)
_LATER = (
    _later_form(
        "compute_local_logits_stats_kernel",
        "compute_local_logits_stats_num_logits_kernel",
        "0.33",
        f"vLLM 0.33's form of compute_local_logits_stats_kernel: {_BONUS_033}",
        False,
    ),
    _later_form(
        "compute_local_logits_stats_kernel",
        "compute_local_logits_stats_row_mapping_kernel",
        "0.34",
        f"vLLM 0.34's form of compute_local_logits_stats_kernel: 0.33's, {_ROWS_034}",
        True,
    ),
    _later_form(
        "compute_local_residual_mass_kernel",
        "compute_local_residual_mass_num_logits_kernel",
        "0.33",
        f"vLLM 0.33's form of compute_local_residual_mass_kernel: {_BONUS_033}; the grid's "
        "last row is not skipped by itself",
        False,
    ),
    _later_form(
        "compute_local_residual_mass_kernel",
        "compute_local_residual_mass_row_mapping_kernel",
        "0.34",
        f"vLLM 0.34's form of compute_local_residual_mass_kernel: 0.33's, {_ROWS_034}",
        True,
    ),
    *(
        _later_form(
            "rejection_kernel",
            name,
            release,
            summary,
            release == "0.34",
            (_flag("FLY_WINDOW_SIZE", "default 0: no deferral", optional=True),),
            {
                "local_residual_mass_stride": (
                    _a(
                        "fly_entropy_ptr",
                        "in",
                        _REAL,
                        "flat",
                        "one per draft row (FLY_WINDOW_SIZE > 0)",
                        optional=True,
                    ),
                    _a("fly_entropy_threshold", "scalar", (), "number", "compared as fp32"),
                )
            },
        )
        for name, release, summary in (
            (
                "rejection_fly_kernel",
                "0.33",
                "vLLM 0.33's form of rejection_kernel: block verification draws step i's "
                "uniform from seed ^ i << 32; with FLY_WINDOW_SIZE w > 0 (FLy) a rejection of "
                "a draft the target does not rule out, at a row whose fly_entropy is at least "
                "the threshold with w drafts after it, is deferred -- kept when the next w are "
                "accepted natively, else the accepted length stays there (a greedy request's "
                "target argmax stored at it); a -1 draft is rejected, not an end",
            ),
            (
                "rejection_row_mapping_kernel",
                "0.34",
                f"vLLM 0.34's form of rejection_kernel: 0.33's, {_ROWS_034}",
            ),
        )
    ),
    _later_form(
        "resample_kernel",
        "resample_row_mapping_kernel",
        "0.34",
        f"vLLM 0.34's form of resample_kernel: {_ROWS_034}; with SKIP_MASKED_BLOCKS a block "
        "whose target logits are all -inf (NaN ignored) stores token b * BLOCK_SIZE and max -inf "
        "without a draw",
        True,
        (_flag("SKIP_MASKED_BLOCKS", "default False: draw every block", optional=True),),
    ),
)

#: each later form beside the kernel it serves
CONTRACTS = tuple(
    form for c in CONTRACTS for form in (c, *(f for f in _LATER if f.serves == c.name))
)
