"""Model Runner V2's Triton kernels, pointed at our CPU kernels, checked with vLLM 0.34.0's tests.

vLLM's own unit tests of these kernels need a GPU (each module skips without CUDA and Triton). On
a CPU host the installed vLLM 0.32's Model Runner V2 modules still import (placeholder Triton),
and after ``fastdispatch.vllm.install()`` each ``kernel[grid](...)`` launch in them runs this
project's ``kernels_cpu`` kernel through the ``KernelOverride`` standing in vLLM's place. These
tests make the checks of vLLM 0.34.0's tests on CPU tensors, through 0.32's Python wrappers, at
sizes a CPU run affords (smaller vocabularies and sample counts; the statistical checks keep
vLLM's tolerances -- a 10-sigma band, or chi2 < df + 10 sqrt(2 df) -- and every input is drawn
from a seeded generator, so they cannot flake). By the vLLM test file each group comes from:

* ``tests/v1/worker/test_gpu_bad_words.py``, ``test_gpu_logit_bias.py``: ``BadWordsState`` and
  ``LogitBiasState`` (``_bad_words_kernel``, ``_bias_kernel``), plus a vocabulary wider than one
  8192-token block, with contiguous and row-strided logits;
* ``tests/v1/worker/test_gpu_gumbel_sample.py``: ``gumbel_sample`` (``_gumbel_sample_kernel``);
* ``tests/v1/spec_decode/test_rejection_sampler_utils.py``: ``rejection_sample``,
  ``watermarked_rejection_sample`` (the rejection sampler's six kernels) and
  ``gather_draft_sampled``, plus edge cases (no requests, ties across blocks, seeds, slots);
* ``tests/v1/worker/test_gpu_block_table.py``, ``test_gpu_kpool_tail_slot_mapping.py``:
  ``BlockTables`` (``_apply_write_kernel``, ``_gather_block_tables_kernel``,
  ``_compute_slot_mappings_kernel``).

What 0.34 added over 0.32 -- per-step seeds in block verification, ``BlockTables``' clearing of
dirty rows past the batch, FLy verification -- is not checked here: the installed release's own
kernels behave as 0.32's do, and ours are held to that.
"""

import math

import pytest
import torch
from _upstream import (
    INDEX_DTYPES,
    NEG,
    RS_VOCAB,
    Z_TOLERANCE,
    assert_distribution_match,
    build_inputs,
    counts_to_logits,
    gumbel_draws,
    heavy_tailed_counts,
    ours_standing,
    valid_mask,
    z_score,
)

KERNELS = {
    "vllm.v1.worker.gpu.sample.bad_words": ("_bad_words_kernel",),
    "vllm.v1.worker.gpu.sample.logit_bias": ("_bias_kernel",),
    "vllm.v1.worker.gpu.sample.gumbel": ("_gumbel_sample_kernel",),
    "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils": (
        "_compute_local_logits_stats_kernel",
        "_compute_cumulative_log_p_kernel",
        "_compute_local_residual_mass_kernel",
        "_rejection_kernel",
        "_resample_kernel",
        "_insert_resampled_kernel",
    ),
    "vllm.v1.worker.gpu.spec_decode.rejection_sampler": ("_gather_draft_sampled_kernel",),
    "vllm.v1.worker.gpu.block_table": (
        "_gather_block_tables_kernel",
        "_compute_slot_mappings_kernel",
    ),
    "vllm.v1.worker.gpu.buffer_utils": ("_apply_write_kernel",),
}


@pytest.fixture(scope="module")
def api():
    """vLLM's API used by the tests below, with our kernels standing in its modules
    (``ours_standing``)."""
    from types import SimpleNamespace

    with ours_standing(KERNELS):
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        from vllm.v1.attention.backends.utils import PAD_SLOT_ID
        from vllm.v1.kv_cache_interface import CircularBufferSpec
        from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates
        from vllm.v1.watermarking import GumbelWatermarker
        from vllm.v1.watermarking.spec_decode import watermarked_rejection_sample
        from vllm.v1.worker.gpu.block_table import BlockTables
        from vllm.v1.worker.gpu.sample.bad_words import BadWordsState
        from vllm.v1.worker.gpu.sample.gumbel import gumbel_sample
        from vllm.v1.worker.gpu.sample.logit_bias import LogitBiasState
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext, LogitsProcRequestState
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler import gather_draft_sampled
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import rejection_sample
        from vllm.v1.worker.gpu.states import RequestState

        yield SimpleNamespace(
            SamplingParams=SamplingParams,
            StructuredOutputsParams=StructuredOutputsParams,
            PAD_SLOT_ID=PAD_SLOT_ID,
            CircularBufferSpec=CircularBufferSpec,
            unconditional_to_conditional_rates=unconditional_to_conditional_rates,
            GumbelWatermarker=GumbelWatermarker,
            watermarked_rejection_sample=watermarked_rejection_sample,
            BlockTables=BlockTables,
            BadWordsState=BadWordsState,
            gumbel_sample=gumbel_sample,
            LogitBiasState=LogitBiasState,
            LogitsContext=LogitsContext,
            LogitsProcRequestState=LogitsProcRequestState,
            gather_draft_sampled=gather_draft_sampled,
            rejection_sample=rejection_sample,
            RequestState=RequestState,
        )


# -- tests/v1/worker/test_gpu_bad_words.py -------------------------------------------------------

VOCAB_SIZE = 128
# Committed tokens: prompt [5], output [10, 11]; draft tokens [12, 13]. Local position 0 holds the
# last committed token (11), the drafts start at position 1.
COMMITTED = [5, 10, 11]
INPUT_IDS = [11, 12, 13]


def _bad_words_state(api, bad_words):
    req_states = api.RequestState(
        max_num_reqs=4,
        max_model_len=64,
        max_num_batched_tokens=16,
        num_speculative_steps=4,
        vocab_size=VOCAB_SIZE,
        device=torch.device("cpu"),
    )
    req_states.add_request(
        req_id="req",
        prompt_len=1,
        all_token_ids=COMMITTED,
        num_computed_tokens=len(COMMITTED),
        max_tokens=32,
    )
    req_states.apply_staged_writes()
    req_idx = req_states.req_id_to_index["req"]
    state = api.BadWordsState(None, api.LogitsProcRequestState.from_request_state(req_states))
    state.add_request(req_idx, api.SamplingParams(_bad_words_token_ids=bad_words))
    state.apply_staged_writes()
    return state, req_idx


def _bad_words_context(api, req_idx, index_dtype=torch.int32):
    import numpy as np

    n = len(INPUT_IDS)
    return api.LogitsContext(
        expanded_idx_mapping=torch.full((n,), req_idx, dtype=index_dtype),
        idx_mapping=torch.tensor([req_idx], dtype=index_dtype),
        idx_mapping_np=np.array([req_idx], dtype=np.intp),
        expanded_local_pos=torch.arange(n, dtype=index_dtype),
        input_ids=torch.tensor(INPUT_IDS, dtype=index_dtype),
        pos=torch.zeros(n, dtype=index_dtype),
        seq_lens_upper_bound_np=np.full(1, n, dtype=np.int64),
    )


def _check_bad_words(api, bad_words, row, token, index_dtype):
    state, req_idx = _bad_words_state(api, bad_words)
    logits = torch.zeros(len(INPUT_IDS), VOCAB_SIZE)
    state.apply(logits, _bad_words_context(api, req_idx, index_dtype))
    expected = torch.zeros_like(logits)
    if row is not None:
        expected[row, token] = NEG
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


def test_bad_words_slot_reuse_clears_state(api):
    """test_v2_bad_words_slot_reuse_clears_state: a recycled slot no longer masks anything."""
    state, req_idx = _bad_words_state(api, [[10, 11, 60]])
    state.add_request(req_idx, api.SamplingParams())
    state.apply_staged_writes()
    assert int(state.num_bad_words.np[req_idx]) == 0
    logits = torch.zeros(len(INPUT_IDS), VOCAB_SIZE)
    state.apply(logits, _bad_words_context(api, req_idx))
    assert torch.equal(logits, torch.zeros_like(logits))


@INDEX_DTYPES
def test_bad_words_prefix_inside_draft_tokens(api, index_dtype):
    """test_v2_bad_words_prefix_inside_draft_tokens: masked at the draft row completing it."""
    _check_bad_words(api, [[12, 13, 40]], 2, 40, index_dtype)


@INDEX_DTYPES
def test_bad_words_prefix_spanning_committed_and_draft_tokens(api, index_dtype):
    """test_v2_bad_words_prefix_spanning_committed_and_draft_tokens: masked where it completes."""
    _check_bad_words(api, [[11, 12, 30]], 1, 30, index_dtype)


@INDEX_DTYPES
def test_bad_words_no_spurious_match_from_last_committed_token(api, index_dtype):
    """test_v2_bad_words_no_spurious_match_from_last_committed_token: 11 is not counted twice."""
    _check_bad_words(api, [[11, 11, 50]], None, None, index_dtype)


@INDEX_DTYPES
def test_bad_words_committed_prefix(api, index_dtype):
    """test_v2_bad_words_committed_prefix: a fully committed prefix masks at the first row."""
    _check_bad_words(api, [[10, 11, 60]], 0, 60, index_dtype)


# -- tests/v1/worker/test_gpu_logit_bias.py ------------------------------------------------------

STOP_TOKEN, OTHER_TOKEN, PROMPT_LEN, MIN_TOKENS, POS = 3, 4, 2, 10, 5


def _logit_bias_state(api, params, vocab_size):
    req_states = api.RequestState(
        max_num_reqs=4,
        max_model_len=64,
        max_num_batched_tokens=16,
        num_speculative_steps=1,
        vocab_size=vocab_size,
        device=torch.device("cpu"),
    )
    req_states.prompt_len.np[:] = PROMPT_LEN
    state = api.LogitBiasState(None, api.LogitsProcRequestState.from_request_state(req_states))
    for req_idx, p in enumerate(params):
        state.add_request(req_idx, p)
    state.apply_staged_writes()
    return state


def _min_tokens_apply(api, logits, structured):
    import numpy as np

    params = [
        api.SamplingParams(
            min_tokens=MIN_TOKENS,
            stop_token_ids=[STOP_TOKEN],
            structured_outputs=(
                api.StructuredOutputsParams(json={"type": "boolean"}) if s else None
            ),
        )
        for s in structured
    ]
    state = _logit_bias_state(api, params, VOCAB_SIZE)
    n = len(structured)
    idx = torch.arange(n, dtype=torch.int32)
    context = api.LogitsContext(
        expanded_idx_mapping=idx,
        idx_mapping=idx,
        idx_mapping_np=np.arange(n, dtype=np.intp),
        expanded_local_pos=torch.zeros(n, dtype=torch.int32),
        input_ids=torch.zeros(n, dtype=torch.int32),
        pos=torch.full((n,), POS, dtype=torch.int32),
        seq_lens_upper_bound_np=np.full(n, POS + 1, dtype=np.int64),
    )
    state.apply(logits, context)
    return logits


def _only_stop_token_left(n):
    logits = torch.full((n, VOCAB_SIZE), NEG)
    logits[:, STOP_TOKEN] = 1.0
    return logits


def test_min_tokens_restores_stop_token_when_row_would_be_empty(api):
    """test_v2_min_tokens_restores_stop_token_when_row_would_be_empty: grammar row keeps stop."""
    out = _min_tokens_apply(api, _only_stop_token_left(1), [True])
    assert out[0, STOP_TOKEN] == 1.0
    assert int(torch.isfinite(out).sum()) == 1


def test_min_tokens_keeps_empty_row_without_structured_output(api):
    """test_v2_min_tokens_keeps_empty_row_without_structured_output: no grammar, stop masked."""
    out = _min_tokens_apply(api, _only_stop_token_left(1), [False])
    assert torch.isneginf(out).all()


def test_min_tokens_keeps_masking_when_other_candidates_remain(api):
    """test_v2_min_tokens_keeps_masking_when_other_candidates_remain: another token is left."""
    logits = _only_stop_token_left(1)
    logits[0, OTHER_TOKEN] = 2.0
    out = _min_tokens_apply(api, logits, [True])
    assert torch.isneginf(out[0, STOP_TOKEN]) and out[0, OTHER_TOKEN] == 2.0


def test_min_tokens_mixed_batch_gates_restore_per_request(api):
    """test_v2_min_tokens_mixed_batch_gates_restore_per_request: restore is per request."""
    out = _min_tokens_apply(api, _only_stop_token_left(2), [True, False])
    assert out[0, STOP_TOKEN] == 1.0
    assert torch.isneginf(out[1]).all()


@pytest.mark.parametrize("strided", [False, True])
@INDEX_DTYPES
def test_logit_bias_vocab_wider_than_a_block(api, strided, index_dtype):
    """Beyond test_gpu_logit_bias: allowed ids, biases and min_tokens over 9000 > 8192 tokens."""
    import numpy as np

    vocab = 9000
    params = [
        api.SamplingParams(allowed_token_ids=[1, 8500, 8999], logit_bias={8500: 2.5, 7: -1.0}),
        api.SamplingParams(logit_bias={0: 1.0, 8999: -3.0}, min_tokens=5, stop_token_ids=[8998, 5]),
        api.SamplingParams(),
        api.SamplingParams(min_tokens=1, stop_token_ids=[4]),
    ]
    state = _logit_bias_state(api, params, vocab)
    idx = torch.tensor([2, 0, 1, 3, 1], dtype=index_dtype)  # shuffled, request 1 twice
    pos = torch.tensor([0, 0, 3, 2, 6], dtype=index_dtype)
    n = idx.numel()
    g = torch.Generator().manual_seed(0)
    backing = torch.randn(n, vocab + 5 if strided else vocab, generator=g)
    logits = backing[:, :vocab]
    padding = backing[:, vocab:].clone()
    expected = logits.clone()
    for row in range(n):
        p = params[int(idx[row])]
        if p.allowed_token_ids:
            keep = expected[row, p.allowed_token_ids].clone()
            expected[row] = NEG
            expected[row, p.allowed_token_ids] = keep
        for token, bias in (p.logit_bias or {}).items():
            expected[row, token] += bias
        if p.min_tokens and int(pos[row]) + 1 < PROMPT_LEN + p.min_tokens:
            expected[row, sorted(p.all_stop_token_ids)] = NEG
    context = api.LogitsContext(
        expanded_idx_mapping=idx,
        idx_mapping=torch.arange(4, dtype=index_dtype),
        idx_mapping_np=np.arange(4, dtype=np.intp),
        expanded_local_pos=torch.zeros(n, dtype=index_dtype),
        input_ids=torch.zeros(n, dtype=index_dtype),
        pos=pos,
        seq_lens_upper_bound_np=np.full(4, 10, dtype=np.int64),
    )
    state.apply(logits, context)
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)
    assert torch.equal(backing[:, vocab:], padding), "wrote into the rows' padding"


# -- tests/v1/worker/test_gpu_gumbel_sample.py ---------------------------------------------------

SENTINEL = 7.0  # poisons output buffers (exact in bfloat16 and float16)


@pytest.mark.parametrize("vocab", [1, 999, 1024, 4097])
def test_gumbel_vocab_size_not_multiple_of_block(api, vocab):
    """test_vocab_size_not_multiple_of_block: tail masking; every bin matches its count."""
    g = torch.Generator().manual_seed(vocab)
    counts = torch.randint(20, 200, (vocab,), generator=g, dtype=torch.int64)
    num_samples = max(40 * vocab, 50_000)
    sampled = gumbel_draws(api, counts_to_logits(counts), num_samples)
    assert sampled.min() >= 0 and sampled.max() < vocab
    observed = torch.bincount(sampled, minlength=vocab).double()
    expected = counts.double() / counts.sum() * num_samples
    chi2 = (((observed - expected) ** 2) / expected).sum().item()
    df = vocab - 1
    if df >= 1:
        assert chi2 < df + 10 * math.sqrt(2 * df), f"chi2={chi2:.1f}, df={df}"


def test_gumbel_drafting_uses_a_separate_noise_stream(api):
    """test_drafting_uses_a_separate_noise_stream (2000 tokens): salted, unbiased, repeatable."""
    num_samples = 100_000
    counts = heavy_tailed_counts(2000)
    logits = counts_to_logits(counts)
    tail_prob = (counts.sum().item() - counts[0].item()) / counts.sum().item()
    target = gumbel_draws(api, logits, num_samples)
    draft = gumbel_draws(api, logits, num_samples, is_drafting=True)
    target_tail, draft_tail = target != 0, draft != 0
    disagree = (target_tail != draft_tail).double().mean().item()
    assert disagree > tail_prob, (disagree, tail_prob)
    for name, tail in (("target", target_tail), ("draft", draft_tail)):
        z = z_score(tail.sum().item(), num_samples * tail_prob, num_samples)
        assert abs(z) < Z_TOLERANCE, (name, z)
    assert torch.equal(draft, gumbel_draws(api, logits, num_samples, is_drafting=True))


def test_gumbel_zero_count_tokens_are_never_sampled(api):
    """test_zero_count_tokens_are_never_sampled (4000 tokens): a -inf logit never wins."""
    counts = heavy_tailed_counts(4000, seed=7)
    zeroed = torch.arange(1, 4000, 2)
    counts[zeroed] = 0
    sampled = gumbel_draws(api, counts_to_logits(counts), 100_000)
    assert sampled.min() >= 0 and sampled.max() < 4000
    assert (sampled != 0).sum() > 1000, "the tail is not being drawn"
    assert not torch.isin(sampled, zeroed).any()


def test_gumbel_single_nonzero_token_is_always_sampled(api):
    """test_single_nonzero_token_is_always_sampled: a lone finite logit wins, fp32 and fp64."""
    counts = torch.zeros(200_000, dtype=torch.int64)
    counts[123_456] = 1000
    logits = counts_to_logits(counts)
    assert (gumbel_draws(api, logits, 2000) == 123_456).all()
    assert (gumbel_draws(api, logits, 1000, use_fp64=True) == 123_456).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("vocab", [4097, 129280])
def test_gumbel_temperature_zero_returns_argmax(api, dtype, vocab):
    """test_greedy_temperature_zero_returns_argmax, with test_greedy_argmax_matches_torch's rows."""
    g = torch.Generator().manual_seed(vocab)
    n = 64
    logits = torch.randn(n, vocab + 1, generator=g).to(dtype)[:, 1:]  # strided rows
    logits[0].zero_()  # ties everywhere: the lowest index
    logits[1].fill_(NEG)
    logits[2, [5, -1]] = float("inf")
    logits[3].fill_(NEG)
    logits[3, -1] = 1
    logits[4].round_().clamp_(max=2)  # ties across blocks
    logits[4, :4096].clamp_(max=1)
    # (0.34's NaN-as--inf rule is not 0.32's: no NaN row here.)
    sampled = api.gumbel_sample(
        logits,
        torch.arange(n, dtype=torch.int32),
        torch.zeros(n),
        torch.arange(n, dtype=torch.int64),
        torch.arange(n, dtype=torch.int64),
        apply_temperature=True,
        is_drafting=False,
    )
    torch.testing.assert_close(sampled, logits.argmax(-1), rtol=0, atol=0)


@INDEX_DTYPES
def test_gumbel_same_seed_and_pos_give_the_same_token_anywhere(api, index_dtype):
    """Beyond test_drafting_uses_a_separate_noise_stream: noise keyed by (seed, pos) alone."""
    g = torch.Generator().manual_seed(3)
    vocab, n = 3000, 6
    logits = torch.randn(n, vocab, generator=g)
    seeds = torch.tensor([11, 22, 33, 44, 55, 66], dtype=torch.int64)
    temps = torch.tensor([1.0, 0.7, 1.3, 1.0, 0.5, 2.0])
    pos = torch.tensor([5, 9, 100, 7, 3, 1], dtype=index_dtype)
    idx = torch.arange(n, dtype=index_dtype)

    def sample(lg, ix, ps, apply_temperature=True):
        return api.gumbel_sample(
            lg, ix, temps, seeds, ps, apply_temperature=apply_temperature, is_drafting=False
        )

    a = sample(logits, idx, pos)
    assert torch.equal(a, sample(logits, idx, pos))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert torch.equal(a[perm], sample(logits[perm].contiguous(), perm.to(index_dtype), pos[perm]))
    wide = torch.randn(n, vocab + 7, generator=g)
    wide[:, :vocab] = logits
    assert torch.equal(a, sample(wide[:, :vocab], idx, pos))
    assert torch.equal(a, sample(logits / temps[:, None], idx, pos, apply_temperature=False))
    assert not torch.equal(a, sample(logits, idx, pos + 1)), "pos does not key the noise"


@INDEX_DTYPES
def test_gumbel_padding_row_is_greedy_and_caches_nothing(api, index_dtype):
    """Beyond test_gpu_gumbel_sample: an idx_mapping of -1 (padding) reads and writes no slot."""
    g = torch.Generator().manual_seed(4)
    n, vocab = 4, 2000
    logits = torch.randn(n, vocab, generator=g)
    cache = torch.full((3, 2, vocab), SENTINEL)
    sampled = api.gumbel_sample(
        logits,
        torch.tensor([0, 1, -1, 2], dtype=index_dtype),
        torch.ones(3),
        torch.arange(3, dtype=torch.int64),
        torch.arange(n, dtype=index_dtype),
        apply_temperature=True,
        is_drafting=True,
        logits_cache=cache,
        logits_cache_col=torch.tensor(1, dtype=torch.int32),
    )
    assert ((sampled >= 0) & (sampled < vocab)).all()
    assert int(sampled[2]) == int(logits[2].argmax()), "a padding row has temperature 0"
    assert torch.equal(cache[:, 1], logits[[0, 1, 3]])
    assert (cache[:, 0] == SENTINEL).all()


def _bits(t):
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("per_token_col", [False, True])
def test_gumbel_logits_cache_stores_input_logits_bitwise(api, dtype, per_token_col):
    """test_logits_cache_stores_input_logits_bitwise: pre-temperature, bit-exact, own column."""
    g = torch.Generator().manual_seed(0)
    n, vocab, cols = 8, 4099, 3
    logits = torch.randn(n, vocab, generator=g).to(dtype)
    temps = torch.tensor([0.0, 0.1, 0.5, 1.0, 1.5, 2.0, 0.7, 1.0])
    cache = torch.full((n, cols, vocab), SENTINEL, dtype=dtype)
    if per_token_col:
        col = torch.arange(n, dtype=torch.int32) % cols
    else:
        col = torch.tensor(1, dtype=torch.int32)
    api.gumbel_sample(
        logits,
        torch.arange(n, dtype=torch.int32),
        temps,
        torch.arange(n, dtype=torch.int64),
        torch.arange(n, dtype=torch.int64),
        apply_temperature=True,
        is_drafting=True,
        logits_cache=cache,
        logits_cache_col=col,
    )
    rows = torch.arange(n)
    cols_written = col.long() if per_token_col else torch.full((n,), 1)
    assert torch.equal(_bits(cache[rows, cols_written]), _bits(logits))
    untouched = torch.ones(n, cols, dtype=torch.bool)
    untouched[rows, cols_written] = False
    assert (cache[untouched] == SENTINEL).all(), "wrote outside the selected columns"


@pytest.mark.parametrize("extra_cache_cols", [0, 1])
def test_gumbel_logits_cache_columns_stay_separate_across_steps(api, extra_cache_cols):
    """test_logits_cache_columns_stay_separate_across_steps: each step lands in its column."""
    g = torch.Generator().manual_seed(0)
    n, vocab, steps = 4, 1031, 3
    cache = torch.full((n, steps, vocab + extra_cache_cols), SENTINEL)
    per_step = [torch.randn(n, vocab, generator=g) for _ in range(steps)]
    for step, logits in enumerate(per_step):
        api.gumbel_sample(
            logits,
            torch.arange(n, dtype=torch.int32),
            torch.ones(n),
            torch.arange(n, dtype=torch.int64),
            torch.arange(n, dtype=torch.int64),
            apply_temperature=True,
            is_drafting=True,
            logits_cache=cache,
            logits_cache_col=torch.tensor(step, dtype=torch.int32),
        )
    for step, logits in enumerate(per_step):
        assert torch.equal(_bits(cache[:, step, :vocab].contiguous()), _bits(logits)), step
    assert (cache[:, :, vocab:] == SENTINEL).all()


def test_gumbel_logits_cache_narrower_than_logits_is_rejected(api):
    """test_logits_cache_narrower_than_logits_is_rejected: a too-narrow cache is refused."""
    n, vocab = 2, 64
    with pytest.raises(AssertionError, match="narrower"):
        api.gumbel_sample(
            torch.zeros(n, vocab),
            torch.arange(n, dtype=torch.int32),
            torch.ones(n),
            torch.zeros(n, dtype=torch.int64),
            torch.arange(n, dtype=torch.int64),
            apply_temperature=True,
            is_drafting=True,
            logits_cache=torch.zeros(n, 3, vocab - 1),
            logits_cache_col=torch.tensor(0, dtype=torch.int32),
        )


def test_gumbel_zero_tokens(api):
    """Beyond test_gpu_gumbel_sample: an empty batch samples nothing."""
    sampled = api.gumbel_sample(
        torch.empty(0, 100),
        torch.empty(0, dtype=torch.int32),
        torch.ones(2),
        torch.zeros(2, dtype=torch.int64),
        torch.empty(0, dtype=torch.int64),
        apply_temperature=True,
        is_drafting=False,
    )
    assert sampled.shape == (0,)


# -- tests/v1/spec_decode/test_rejection_sampler_utils.py ----------------------------------------


@INDEX_DTYPES
def test_placeholder_draft_token_rejected(api, index_dtype):
    """test_placeholder_draft_token_rejected: a -1 draft is rejected, the recovery in range."""
    g = torch.Generator().manual_seed(0)
    num_trials, k, temp = 64, 1, 0.6
    target = torch.randn(RS_VOCAB, generator=g) / temp
    inputs = build_inputs(
        target, torch.randn(RS_VOCAB, generator=g), k, temp, num_trials, g, index_dtype
    )
    inputs["draft_sampled"].view(num_trials, k + 1)[:, 1:] = -1
    sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
    assert torch.equal(num_sampled, torch.ones_like(num_sampled))
    assert ((sampled[:, 0] >= 0) & (sampled[:, 0] < RS_VOCAB)).all()


@pytest.mark.parametrize("has_draft_logits", [True, False])
@pytest.mark.parametrize("num_placeholders", [1, 2])
def test_block_verification_placeholder_truncates_block(api, has_draft_logits, num_placeholders):
    """test_block_verification_placeholder_truncates_block: trailing -1s end the block early."""
    g = torch.Generator().manual_seed(42)
    num_trials, k = 20 * RS_VOCAB, 3
    target = torch.randn(RS_VOCAB, generator=g)
    inputs = build_inputs(target, torch.randn(RS_VOCAB, generator=g), k, 1.0, num_trials, g)
    if not has_draft_logits:
        inputs["draft_logits"] = None
    inputs["draft_sampled"].view(num_trials, k + 1)[:, k + 1 - num_placeholders :] = -1
    sampled, num_sampled = api.rejection_sample(
        **inputs, num_speculative_steps=k, use_block_verification=True
    )
    num_real = k - num_placeholders
    assert (num_sampled <= num_real + 1).all(), "accepted a draft at or after a placeholder"
    probs = torch.softmax(target, 0)
    for p in range(num_real + 1):
        accepted = num_sampled >= p + 1
        assert_distribution_match(sampled[accepted, p], probs, f"position {p}")


@pytest.mark.parametrize("use_block_verification", [False, True])
def test_placeholder_blocks_later_draft_tokens(api, use_block_verification):
    """test_placeholder_blocks_later_draft_tokens: nothing at or after a -1 is accepted."""
    g = torch.Generator().manual_seed(0)
    num_trials, k = 4 * RS_VOCAB, 3
    draft = torch.randn(RS_VOCAB, generator=g)
    inputs = build_inputs(draft, draft, k, 1.0, num_trials, g)
    inputs["draft_sampled"].view(num_trials, k + 1)[:, 2] = -1
    _, num_sampled = api.rejection_sample(
        **inputs, num_speculative_steps=k, use_block_verification=use_block_verification
    )
    assert (num_sampled <= 2).all(), "accepted a draft past a placeholder"
    assert (num_sampled == 2).float().mean().item() > 0.9


def test_greedy_placeholder_emits_target_argmax(api):
    """test_greedy_placeholder_emits_target_argmax: greedy rejection at a -1 emits the argmax."""
    g = torch.Generator().manual_seed(0)
    num_trials, k = 512, 3
    target = torch.randn(RS_VOCAB, generator=g)
    inputs = build_inputs(target, torch.randn(RS_VOCAB, generator=g), k, 0.0, num_trials, g)
    argmax = int(target.argmax())
    drafts = inputs["draft_sampled"].view(num_trials, k + 1)
    drafts[:, 1] = argmax
    drafts[:, 2:] = -1
    sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
    assert torch.equal(num_sampled, torch.full_like(num_sampled, 2))
    assert (sampled[valid_mask(num_sampled, k)] == argmax).all()


@INDEX_DTYPES
def test_verify_rejects_unproposed_drafts(api, index_dtype):
    """test_verify_rejects_unproposed_drafts: drafts padded onto a prefill step are rejected."""
    g = torch.Generator().manual_seed(0)
    num_trials, k = 256, 8
    target = torch.randn(RS_VOCAB, generator=g)
    target[0] = -20.0
    inputs = build_inputs(target, torch.zeros(RS_VOCAB), k, 1.0, num_trials, g, index_dtype)
    rest = torch.randn(RS_VOCAB, generator=g)
    rest[0] = 20.0
    inputs["target_logits"].view(num_trials, k + 1, RS_VOCAB)[:, 1:] = rest
    inputs["draft_sampled"].view(num_trials, k + 1)[:, 1:] = 0
    first_pos = inputs["pos"].view(num_trials, k + 1)[:, 0]
    prefill_len = first_pos + 1

    def verify():
        draft_sampled, pos = api.gather_draft_sampled(
            inputs["draft_sampled"],
            inputs["pos"],
            torch.arange(num_trials * (k + 1), dtype=index_dtype),
            inputs["expanded_idx_mapping"],
            inputs["expanded_local_pos"],
            prefill_len,
        )
        args = dict(inputs, draft_sampled=draft_sampled, pos=pos)
        return api.rejection_sample(**args, num_speculative_steps=k, use_block_verification=True)

    sampled, num_sampled = verify()
    assert (num_sampled == 1).all()
    assert (sampled[:, 0] != 0).all()
    prefill_len.copy_(first_pos)
    _, num_sampled = verify()
    assert (num_sampled == k + 1).all()


@pytest.mark.parametrize("has_draft_logits", [True, False])
def test_chunked_requests_match_full_batch(api, has_draft_logits):
    """test_chunked_requests_match_full_batch (FLy off): two chunks give the batch's result."""
    g = torch.Generator().manual_seed(7)
    num_reqs, k, vocab = 5, 3, 257
    target, draft = torch.randn(vocab, generator=g), torch.randn(vocab, generator=g)
    inputs = build_inputs(target, draft, k, 0.6, num_reqs, g)
    padded = torch.empty(inputs["target_logits"].shape[0], vocab + 3)
    padded[:, :vocab].copy_(inputs["target_logits"])
    inputs["target_logits"] = padded[:, :vocab]
    assert not inputs["target_logits"].is_contiguous()
    if not has_draft_logits:
        inputs["draft_logits"] = None
    sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
    chunks_sampled, chunks_num = [], []
    for start, end in ((0, 2), (2, 5)):
        lo, hi = start * (k + 1), end * (k + 1)
        chunk = dict(inputs)
        for name in (
            "target_logits",
            "draft_sampled",
            "pos",
            "expanded_idx_mapping",
            "expanded_local_pos",
        ):
            chunk[name] = inputs[name][lo:hi]
        chunk["cu_num_logits"] = inputs["cu_num_logits"][start : end + 1] - lo
        chunk["idx_mapping"] = inputs["idx_mapping"][start:end]
        s, n = api.rejection_sample(**chunk, num_speculative_steps=k)
        chunks_sampled.append(s)
        chunks_num.append(n)
    assert torch.equal(torch.cat(chunks_num), num_sampled)
    valid = valid_mask(num_sampled, k)
    assert torch.equal(torch.cat(chunks_sampled)[valid], sampled[valid])


@pytest.mark.parametrize("k,temperature", [(1, 0.6), (3, 0.6), (1, 1.0), (3, 1.0)])
@pytest.mark.parametrize("draft_dtype", [torch.float32, torch.bfloat16])
def test_stochastic_rejection_sample(api, k, temperature, draft_dtype):
    """test_stochastic_rejection_sample (512 tokens): every position follows the target."""
    g = torch.Generator().manual_seed(42)
    num_trials = 10 * RS_VOCAB
    target = torch.randn(RS_VOCAB, generator=g) / temperature
    draft = torch.randn(RS_VOCAB, generator=g).to(draft_dtype)
    inputs = build_inputs(target, draft, k, temperature, num_trials, g)
    sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
    probs = torch.softmax(target, 0)
    for p in range(k + 1):
        accepted = num_sampled >= p + 1
        assert_distribution_match(sampled[accepted, p], probs, f"position {p}")


@pytest.mark.parametrize(
    "k,temperature,rates",
    [
        (3, 1.0, [0.9, 0.5, 0.2]),
        (3, 0.0, [0.9, 0.5, 0.2]),
        (3, 1.0, [1.0, 1.0, 1.0]),
        (3, 0.0, [1.0, 1.0, 1.0]),
        (3, 1.0, [0.0, 0.0, 0.0]),
        (3, 0.0, [0.0, 0.0, 0.0]),
        (1, 1.0, [0.7]),
        (1, 0.0, [0.7]),
    ],
)
def test_synthetic_rejection_sample(api, k, temperature, rates):
    """test_synthetic_rejection_sample (vLLM's 40960 trials, 64 tokens): the set rates."""
    g = torch.Generator().manual_seed(42)
    vocab = 64
    target, draft = torch.randn(vocab, generator=g), torch.randn(vocab, generator=g)
    if temperature > 0:
        target /= temperature
    inputs = build_inputs(target, draft, k, temperature, 40960, g)
    conditional = torch.tensor(api.unconditional_to_conditional_rates(rates), dtype=torch.float32)
    _, num_sampled = api.rejection_sample(
        **inputs, num_speculative_steps=k, synthetic_conditional_rates=conditional
    )
    for i, rate in enumerate(rates):
        observed = (num_sampled - 1 >= i + 1).float().mean().item()
        assert abs(observed - rate) < 1e-2, (i, observed, rate)


def _watermarked(api, inputs, k, contexts, watermarking, key=42, width=2, **kw):
    return api.watermarked_rejection_sample(
        **inputs,
        num_speculative_steps=k,
        contexts=contexts,
        watermarking=watermarking,
        watermarker=api.GumbelWatermarker(key=key, context_width=width),
        **kw,
    )


def test_watermarked_bonus_uses_target_key(api):
    """test_watermarked_bonus_uses_target_key: the bonus token is the watermarker's draw."""
    g = torch.Generator().manual_seed(0)
    target = torch.randn(16, generator=g)
    inputs = build_inputs(target, target, 1, 1.0, 1, g)
    contexts = torch.tensor([[10, 11], [11, int(inputs["draft_sampled"][1])]])
    sampled, num_sampled = _watermarked(api, inputs, 1, contexts, torch.tensor([True]))
    expected = api.GumbelWatermarker(key=42, context_width=2).sample(
        target.unsqueeze(0), contexts[1:]
    )
    assert num_sampled.item() == 2
    assert sampled[0, 1] == expected.token_ids[0]


def test_watermarked_recovery_uses_target_key(api):
    """test_watermarked_recovery_uses_target_key: a rejected draft's recovery is keyed."""
    g = torch.Generator().manual_seed(0)
    target = torch.tensor([NEG, 0.0, 1.0, 2.0])
    inputs = build_inputs(target, torch.tensor([100.0, -100.0, -100.0, -100.0]), 1, 1.0, 1, g)
    inputs["draft_sampled"][1] = 0
    contexts = torch.tensor([[10, 11], [11, 0]])
    sampled, num_sampled = _watermarked(api, inputs, 1, contexts, torch.tensor([True]))
    expected = api.GumbelWatermarker(key=42, context_width=2).sample(
        target.unsqueeze(0), contexts[:1]
    )
    assert num_sampled.item() == 1
    assert sampled[0, 0] == expected.token_ids[0]


def test_repeated_draft_context_does_not_change_acceptance(api):
    """test_repeated_draft_context_does_not_change_acceptance: skipped rows are stock."""
    g = torch.Generator().manual_seed(0)
    n = 8
    inputs = build_inputs(torch.randn(64, generator=g), torch.randn(64, generator=g), 1, 1.0, n, g)
    expected, expected_n = api.rejection_sample(**inputs, num_speculative_steps=1)
    sampled, num_sampled = _watermarked(
        api,
        inputs,
        1,
        torch.tensor([[10, 11], [11, 12]]).repeat(n, 1),
        torch.ones(n, dtype=torch.bool),
        watermarking_skip_mask=torch.tensor([True, False]).repeat(n),
    )
    assert (expected_n == 1).any()
    torch.testing.assert_close(num_sampled, expected_n, rtol=0, atol=0)
    torch.testing.assert_close(sampled[:, :1], expected[:, :1], rtol=0, atol=0)


def test_repeated_context_skip_mask_is_read_per_row_in_a_block(api):
    """test_repeated_context_skip_mask_is_read_per_row_in_a_block: the rejected row's mask."""
    g = torch.Generator().manual_seed(0)
    k = 3
    target = torch.tensor([NEG, 0.0, 1.0, 2.0])
    inputs = build_inputs(target, torch.tensor([30.0, -30.0, -30.0, -30.0]), k, 1.0, 1, g)
    inputs["draft_sampled"][1] = 3
    inputs["draft_sampled"][2] = 0
    contexts = torch.tensor([[10, 11], [11, 3], [3, 0], [0, 1]])
    expected, expected_n = api.rejection_sample(**inputs, num_speculative_steps=k)
    assert expected_n.item() == 2 and expected[0, 0].item() == 3
    skip = torch.tensor([False, True, False, False])
    skipped, skipped_n = _watermarked(
        api, inputs, k, contexts, torch.tensor([True]), watermarking_skip_mask=skip
    )
    assert skipped_n.item() == 2
    torch.testing.assert_close(skipped[:, :2], expected[:, :2], rtol=0, atol=0)
    marked, marked_n = _watermarked(
        api,
        inputs,
        k,
        contexts,
        torch.tensor([True]),
        watermarking_skip_mask=torch.zeros(k + 1, dtype=torch.bool),
    )
    recovery = api.GumbelWatermarker(key=42, context_width=2).sample(
        target.unsqueeze(0), contexts[1:2]
    )
    assert marked_n.item() == 2 and marked[0, 0].item() == 3
    assert marked[0, 1] == recovery.token_ids[0]


def test_repeated_recovery_context_uses_ordinary_residual_sample(api):
    """test_repeated_recovery_context_uses_ordinary_residual_sample: skipped -> stock draw."""
    g = torch.Generator().manual_seed(0)
    target = torch.tensor([NEG, 0.0, 1.0, 2.0])
    inputs = build_inputs(target, torch.tensor([100.0, -100.0, -100.0, -100.0]), 1, 1.0, 1, g)
    inputs["draft_sampled"][1] = 0
    expected, expected_n = api.rejection_sample(**inputs, num_speculative_steps=1)
    sampled, n = _watermarked(
        api,
        inputs,
        1,
        torch.tensor([[10, 11], [11, 0]]),
        torch.tensor([True]),
        watermarking_skip_mask=torch.tensor([True, False]),
    )
    torch.testing.assert_close(n, expected_n, rtol=0, atol=0)
    torch.testing.assert_close(sampled[:, :1], expected[:, :1], rtol=0, atol=0)


def test_repeated_bonus_context_uses_ordinary_target_sample(api):
    """test_repeated_bonus_context_uses_ordinary_target_sample: a skipped bonus is stock."""
    g = torch.Generator().manual_seed(1)
    target = torch.randn(64, generator=g)
    inputs = build_inputs(target, target, 1, 1.0, 1, g)
    expected, expected_n = api.rejection_sample(**inputs, num_speculative_steps=1)
    sampled, n = _watermarked(
        api,
        inputs,
        1,
        torch.tensor([[10, 11], [11, 12]]),
        torch.tensor([True]),
        watermarking_skip_mask=torch.tensor([False, True]),
    )
    torch.testing.assert_close(n, expected_n, rtol=0, atol=0)
    torch.testing.assert_close(sampled[:, :2], expected[:, :2], rtol=0, atol=0)


def test_repeated_context_does_not_change_unwatermarked_or_greedy_rows(api):
    """test_repeated_context_does_not_change_unwatermarked_or_greedy_rows: those stay stock."""
    g = torch.Generator().manual_seed(2)
    target = torch.randn(64, generator=g)
    inputs = build_inputs(target, target, 1, 1.0, 2, g)
    inputs["temperature"][1] = 0
    expected, expected_n = api.rejection_sample(**inputs, num_speculative_steps=1)
    sampled, n = _watermarked(
        api,
        inputs,
        1,
        torch.tensor([[10, 11], [11, 12], [20, 21], [21, 22]]),
        torch.tensor([False, True]),
        watermarking_skip_mask=torch.ones(4, dtype=torch.bool),
    )
    torch.testing.assert_close(n, expected_n, rtol=0, atol=0)
    for row, length in enumerate(n.tolist()):
        torch.testing.assert_close(sampled[row, :length], expected[row, :length], rtol=0, atol=0)


def test_watermarked_recovery_supports_smaller_draft_vocabulary(api):
    """test_watermarked_recovery_supports_smaller_draft_vocabulary: recovery in draft vocab."""
    g = torch.Generator().manual_seed(0)
    target = torch.tensor([NEG, 0.0, 1.0, 2.0, 100.0])
    inputs = build_inputs(target[:4], torch.tensor([100.0, -100.0, -100.0, -100.0]), 1, 1.0, 1, g)
    inputs["target_logits"] = target.unsqueeze(0).expand(2, -1).contiguous()
    inputs["draft_sampled"][1] = 0
    contexts = torch.tensor([[10, 11], [11, 0]])
    sampled, n = _watermarked(api, inputs, 1, contexts, torch.tensor([True]))
    expected = api.GumbelWatermarker(key=42, context_width=2).sample(
        target[:4].unsqueeze(0), contexts[:1]
    )
    assert n.item() == 1
    assert sampled[0, 0] == expected.token_ids[0]


def _residual_recovery_logits(inputs, num_sampled, vocab):
    """vLLM's: the logits each request's last token was drawn from (residual or target)."""
    target_logits, draft_logits = inputs["target_logits"], inputs["draft_logits"]
    cu = inputs["cu_num_logits"]
    rows = cu[:-1].to(torch.int64) + num_sampled.to(torch.int64) - 1
    slots = inputs["expanded_idx_mapping"][rows].to(torch.int64)
    is_bonus = rows == cu[1:] - 1
    next_rows = (rows + 1).clamp_max(inputs["draft_sampled"].shape[0] - 1)
    needs_residual = ~is_bonus & (inputs["draft_sampled"][next_rows] >= 0)
    target_rows = target_logits[rows][:, :vocab].float()
    target_rows = torch.where(target_rows.isnan(), NEG, target_rows)
    if draft_logits is None:
        rejected = inputs["draft_sampled"][next_rows].clamp_min(0)
        one_hot = torch.arange(vocab).unsqueeze(0) == rejected.unsqueeze(-1)
        residual = torch.where(one_hot, NEG, target_rows)
    else:
        steps = (num_sampled.to(torch.int64) - 1).clamp_max(draft_logits.shape[1] - 1)
        draft_rows = draft_logits[slots, steps][:, :vocab].float()
        draft_rows = torch.where(draft_rows.isnan(), NEG, draft_rows)
        draft_rows = draft_rows / inputs["temperature"][slots].unsqueeze(-1)
        target_lp = torch.log_softmax(target_rows, -1)
        ratio = torch.exp(torch.log_softmax(draft_rows, -1) - target_lp)
        residual = torch.where(ratio < 1, target_lp + torch.log1p(-ratio.clamp_max(1)), NEG)
    return torch.where(needs_residual.unsqueeze(-1), residual, target_rows), rows


def _watermark_inputs(num_trials, k, width, vocab, one_hot, g):
    inputs = build_inputs(
        torch.randn(vocab, generator=g), torch.randn(vocab, generator=g), k, 1.0, num_trials, g
    )
    if one_hot:
        inputs["draft_logits"] = None
    inputs["draft_sampled"].view(num_trials, k + 1)[::5, 1] = -1
    contexts = torch.randint(0, vocab, (inputs["target_logits"].shape[0], width), generator=g)
    contexts[::7, 0] = -1
    return inputs, contexts


@pytest.mark.parametrize("one_hot_draft", [False, True])
@pytest.mark.parametrize("vocab", [1024, 3500])
def test_watermarked_recovery_matches_the_watermarkers_draw(api, one_hot_draft, vocab):
    """test_watermarked_recovery_matches_philox_gumbel_sample, against the CPU Philox draw."""
    g = torch.Generator().manual_seed(7)
    key, width, n = 0xDA39A3EE5E6B4B0D, 4, 128
    inputs, contexts = _watermark_inputs(n, 2, width, vocab, one_hot_draft, g)
    watermarker = api.GumbelWatermarker(key=key, context_width=width)
    sampled, num_sampled = _watermarked(
        api, inputs, 2, contexts, torch.ones(n, dtype=torch.bool), key=key, width=width
    )
    recovery, rows = _residual_recovery_logits(inputs, num_sampled, vocab)
    # On CPU the watermarker draws with vLLM's torch Philox PRF, not the Triton kernel.
    expected = watermarker._sample_watermarked(recovery, contexts[rows]).token_ids
    recovered = sampled[torch.arange(n), num_sampled.long() - 1]
    torch.testing.assert_close(recovered, expected, rtol=0, atol=0)
    is_bonus = rows == inputs["cu_num_logits"][1:] - 1
    next_rows = (rows + 1).clamp_max(inputs["draft_sampled"].shape[0] - 1)
    is_placeholder = ~is_bonus & (inputs["draft_sampled"][next_rows] < 0)
    assert int((~is_bonus & ~is_placeholder).sum()) > 0 and int(is_placeholder.sum()) > 0
    if not one_hot_draft:
        assert int(is_bonus.sum()) > 0


def test_watermarked_recovery_leaves_disabled_rows_on_the_stock_draw(api):
    """test_watermarked_recovery_leaves_disabled_rows_on_the_stock_draw: off or greedy rows."""
    g = torch.Generator().manual_seed(11)
    n = 96
    inputs, contexts = _watermark_inputs(n, 3, 2, 512, False, g)
    watermarking = torch.zeros(n, dtype=torch.bool)
    watermarking[::2] = True
    inputs["temperature"][:8] = 0.0
    stock, stock_n = api.rejection_sample(**inputs, num_speculative_steps=3)
    sampled, num_sampled = _watermarked(api, inputs, 3, contexts, watermarking, key=99)
    torch.testing.assert_close(num_sampled, stock_n, rtol=0, atol=0)
    rows, last = torch.arange(n), num_sampled.long() - 1
    disabled = ~watermarking | (inputs["temperature"] == 0)
    assert int(disabled.sum()) > 0 and int((~disabled).sum()) > 0
    assert torch.equal(
        sampled[rows[disabled], last[disabled]], stock[rows[disabled], last[disabled]]
    )
    for req in range(n):
        m = int(num_sampled[req]) - 1
        assert torch.equal(sampled[req, :m], stock[req, :m]), req


def test_watermarked_recovery_is_unchanged_by_fp64_gumbel(api):
    """test_watermarked_recovery_is_unchanged_by_fp64_gumbel: fp64 leaves the keyed draw."""
    g = torch.Generator().manual_seed(13)
    inputs, contexts = _watermark_inputs(64, 2, 4, 2048, False, g)
    kw = dict(key=2**63 + 12345, width=4)
    on = torch.ones(64, dtype=torch.bool)
    s32, n32 = _watermarked(api, inputs, 2, contexts, on, **kw)
    s64, n64 = _watermarked(api, inputs, 2, contexts, on, use_fp64=True, **kw)
    rows = torch.arange(64)
    torch.testing.assert_close(n64, n32, rtol=0, atol=0)
    assert torch.equal(s64[rows, n64.long() - 1], s32[rows, n32.long() - 1])


def test_rejection_sample_zero_requests(api):
    """Beyond test_rejection_sampler_utils: an empty batch gives empty outputs."""
    vocab, k = 64, 2
    empty = torch.empty(0, dtype=torch.int32)
    sampled, num_sampled = api.rejection_sample(
        target_logits=torch.empty(0, vocab),
        draft_logits=torch.empty(0, k, vocab),
        draft_sampled=torch.empty(0, dtype=torch.int64),
        cu_num_logits=torch.zeros(1, dtype=torch.int32),
        pos=empty,
        idx_mapping=empty,
        expanded_idx_mapping=empty,
        expanded_local_pos=empty,
        temperature=torch.ones(4),
        seed=torch.zeros(4, dtype=torch.int64),
        num_speculative_steps=k,
    )
    assert sampled.shape == (0, k + 1) and num_sampled.shape == (0,)


@INDEX_DTYPES
def test_rejection_sample_greedy_ties_across_blocks_pick_the_lowest_index(api, index_dtype):
    """Beyond test_greedy_rejection_sample: ties across 8192-token blocks give the lowest id."""
    g = torch.Generator().manual_seed(0)
    vocab, k, n = 20000, 1, 4
    target = torch.zeros(vocab)
    target[[17000, 9000, 16999]] = 3.0
    for logits, want in ((target, 9000), (torch.zeros(vocab), 0)):
        inputs = build_inputs(logits, torch.randn(vocab, generator=g), k, 0.0, n, g, index_dtype)
        sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
        assert (sampled[valid_mask(num_sampled, k)] == want).all(), sampled


@pytest.mark.parametrize("use_block_verification", [False, True])
@pytest.mark.parametrize("has_draft_logits", [True, False])
def test_rejection_sample_single_finite_target_logit(api, use_block_verification, has_draft_logits):
    """Beyond test_stochastic_rejection_sample: a target with one finite logit yields it."""
    g = torch.Generator().manual_seed(0)
    vocab, k = 3000, 3
    target = torch.full((vocab,), NEG)
    target[2222] = 0.0
    inputs = build_inputs(target, torch.randn(vocab, generator=g), k, 1.0, 256, g)
    if not has_draft_logits:
        inputs["draft_logits"] = None
    sampled, num_sampled = api.rejection_sample(
        **inputs, num_speculative_steps=k, use_block_verification=use_block_verification
    )
    assert (sampled[valid_mask(num_sampled, k)] == 2222).all()


@pytest.mark.parametrize("use_block_verification", [False, True])
def test_rejection_sample_seeds_matter_and_reproduce(api, use_block_verification):
    """Beyond test_rejection_sampler_utils: same seeds, same tokens (either index dtype)."""
    g = torch.Generator().manual_seed(9)
    vocab, k, n = 400, 2, 200
    target, draft = torch.randn(vocab, generator=g), torch.randn(vocab, generator=g)
    inputs = build_inputs(target, draft, k, 0.8, n, g)
    inputs["temperature"][::3] = 0.0  # greedy rows mixed in
    kw = dict(num_speculative_steps=k, use_block_verification=use_block_verification)
    a_s, a_n = api.rejection_sample(**inputs, **kw)
    wide = dict(inputs)
    for name in ("cu_num_logits", "pos", "idx_mapping", "expanded_idx_mapping"):
        wide[name] = inputs[name].to(torch.int64)
    wide["expanded_local_pos"] = inputs["expanded_local_pos"].to(torch.int64)
    for args in (inputs, wide):
        b_s, b_n = api.rejection_sample(**args, **kw)
        assert torch.equal(a_n, b_n)
        assert torch.equal(a_s[valid_mask(a_n, k)], b_s[valid_mask(a_n, k)])
    c_s, c_n = api.rejection_sample(**dict(inputs, seed=inputs["seed"] + 1000), **kw)
    assert not (torch.equal(a_n, c_n) and torch.equal(a_s, c_s)), "the seeds are ignored"


@INDEX_DTYPES
def test_rejection_sample_request_slot_permutation(api, index_dtype):
    """Beyond test_rejection_sampler_utils: a request's outcome does not depend on its slot."""
    g = torch.Generator().manual_seed(10)
    vocab, k, n = 300, 2, 12
    inputs = build_inputs(
        torch.randn(vocab, generator=g), torch.randn(vocab, generator=g), k, 1.0, n, g, index_dtype
    )
    inputs["draft_logits"] = torch.randn(n, k, vocab, generator=g)
    inputs["temperature"] = torch.rand(n, generator=g) + 0.3
    a_s, a_n = api.rejection_sample(**inputs, num_speculative_steps=k)
    perm = torch.randperm(n, generator=g)
    moved = dict(inputs)
    for name in ("temperature", "seed", "draft_logits"):
        moved[name] = torch.empty_like(inputs[name])
        moved[name][perm] = inputs[name]
    moved["idx_mapping"] = perm.to(index_dtype)
    moved["expanded_idx_mapping"] = perm.to(index_dtype).repeat_interleave(k + 1)
    b_s, b_n = api.rejection_sample(**moved, num_speculative_steps=k)
    assert torch.equal(a_n, b_n)
    assert torch.equal(a_s[valid_mask(a_n, k)], b_s[valid_mask(a_n, k)])


# -- tests/v1/worker/test_gpu_block_table.py, test_gpu_kpool_tail_slot_mapping.py ----------------

CPU = torch.device("cpu")


def test_block_tables_apply_staged_writes_fuses_kv_groups(api, monkeypatch):
    """test_block_tables_apply_staged_writes_fuses_kv_groups: one fused write for all groups."""
    bt = api.BlockTables(
        block_sizes=[16, 32, 8],
        max_num_reqs=4,
        max_num_batched_tokens=64,
        max_num_blocks_per_group=[8, 8, 8],
        device=CPU,
    )

    def fail():
        pytest.fail("multi-group writes should use the fused apply kernel")

    for table in bt.block_tables:
        monkeypatch.setattr(table, "apply_write", fail)
    bt.append_block_ids(req_index=0, new_block_ids=([1, 2], [10, 11], []), overwrite=True)
    bt.append_block_ids(req_index=1, new_block_ids=([3], [12], [5, 6]), overwrite=True)
    bt.apply_staged_writes()
    t = [table.gpu for table in bt.block_tables]
    assert t[0][0, :2].tolist() == [1, 2] and t[1][0, :2].tolist() == [10, 11]
    assert t[0][1, :1].tolist() == [3] and t[1][1, :1].tolist() == [12]
    assert t[2][1, :2].tolist() == [5, 6]
    nb = bt.num_blocks.np
    assert [nb[g, r] for r in (0, 1) for g in (0, 1, 2)] == [2, 2, 0, 1, 1, 2]
    assert bt.num_blocks.gpu[:, :2].tolist() == [[2, 1], [2, 1], [0, 2]]
    for table in bt.block_tables:
        assert not table._staged_write_indices and not table._staged_write_starts
        assert not table._staged_write_contents and not table._staged_write_cu_lens
    bt.append_block_ids(req_index=0, new_block_ids=([7], [13], [8]), overwrite=False)
    bt.apply_staged_writes()
    assert t[0][0, :3].tolist() == [1, 2, 7] and t[1][0, :3].tolist() == [10, 11, 13]
    assert t[2][0, :1].tolist() == [8]
    assert (nb[0, 0], nb[1, 0], nb[2, 0]) == (3, 3, 1)


def test_block_tables_fused_write_spans_multiple_chunks(api):
    """test_block_tables_fused_write_spans_multiple_chunks: 2500 ids, past one 1024 chunk."""
    bt = api.BlockTables(
        block_sizes=[16, 32],
        max_num_reqs=2,
        max_num_batched_tokens=16,
        max_num_blocks_per_group=[4, 4096],
        device=CPU,
    )
    ids = list(range(1, 2501))
    bt.append_block_ids(0, ([7], ids), overwrite=True)
    bt.apply_staged_writes()
    assert bt.block_tables[0].gpu[0, :1].tolist() == [7]
    assert bt.block_tables[1].gpu[0, :2500].tolist() == ids


def test_block_tables_apply_staged_writes_single_group(api):
    """test_block_tables_apply_staged_writes_single_group: one group's write lands."""
    bt = api.BlockTables(
        block_sizes=[16],
        max_num_reqs=2,
        max_num_batched_tokens=16,
        max_num_blocks_per_group=[4],
        device=CPU,
    )
    bt.append_block_ids(req_index=0, new_block_ids=([1, 2],), overwrite=True)
    bt.apply_staged_writes()
    assert bt.block_tables[0].gpu[0, :2].tolist() == [1, 2]


@INDEX_DTYPES
def test_block_tables_skip_custom_slot_mapping_groups(api, index_dtype):
    """test_block_tables_skip_custom_slot_mapping_groups: a disabled group maps to -1."""
    bt = api.BlockTables(
        block_sizes=[8, 262144],
        max_num_reqs=1,
        max_num_batched_tokens=4,
        max_num_blocks_per_group=[1, 1],
        device=CPU,
        slot_mapping_enabled=[False, True],
    )
    bt.append_block_ids(req_index=0, new_block_ids=([7], [12]), overwrite=True)
    bt.apply_staged_writes()
    slots = bt.compute_slot_mappings(
        torch.tensor([0], dtype=index_dtype),
        torch.tensor([0, 2], dtype=torch.int32),
        torch.tensor([153797, 165757], dtype=index_dtype),
        num_tokens_padded=2,
    )
    assert slots[0].tolist() == [-1, -1]
    assert slots[1].tolist() == [12 * 262144 + 153797, 12 * 262144 + 165757]


@pytest.mark.parametrize("cp_rank", range(4))
def test_dcp_slot_mapping_only_shards_sharded_groups(api, cp_rank):
    """test_dcp_slot_mapping_only_shards_sharded_groups: DCP interleave, sharded groups only."""
    bt = api.BlockTables(
        block_sizes=[128, 128],
        max_num_reqs=1,
        max_num_batched_tokens=1024,
        max_num_blocks_per_group=[2, 8],
        device=CPU,
        dcp_sharded=[True, False],
        cp_size=4,
        cp_rank=cp_rank,
        cp_interleave=128,
    )
    bt.append_block_ids(req_index=0, new_block_ids=([5, 9], list(range(10, 18))), overwrite=True)
    bt.apply_staged_writes()
    positions = torch.arange(1024, dtype=torch.int64)
    actual = bt.compute_slot_mappings(
        torch.zeros(1, dtype=torch.int32),
        torch.tensor([0, 1024], dtype=torch.int32),
        positions,
        num_tokens_padded=1024,
    )
    expected = torch.full((1024,), -1, dtype=torch.int64)
    first = cp_rank * 128
    expected[first : first + 128] = torch.arange(5 * 128, 6 * 128)
    expected[512 + first : 512 + first + 128] = torch.arange(9 * 128, 10 * 128)
    assert torch.equal(actual[0], expected)
    assert torch.equal(actual[1], positions + 10 * 128)


def test_get_dummy_block_tables_returns_zeroed_rows(api):
    """test_get_dummy_block_tables_returns_zeroed_rows: zeroed, in the persistent tensor."""
    bt = api.BlockTables(
        block_sizes=[16],
        max_num_reqs=4,
        max_num_batched_tokens=64,
        max_num_blocks_per_group=[8],
        device=CPU,
    )
    bt.append_block_ids(req_index=0, new_block_ids=([1, 2],), overwrite=True)
    bt.apply_staged_writes()
    bt.gather_block_tables(torch.zeros(1, dtype=torch.int32), num_reqs_padded=1)
    assert bt.input_block_tables[0][0, 0].item() == 1
    dummy = bt.get_dummy_block_tables(num_reqs=1)
    assert (dummy[0] == 0).all()
    assert dummy[0].data_ptr() == bt.input_block_tables[0].data_ptr()


@INDEX_DTYPES
def test_dummy_request_slot_mapping_is_pad(api, index_dtype):
    """test_dummy_request_slot_mapping_is_pad: idx -1 maps to PAD, as does the padded tail."""
    bt = api.BlockTables(
        block_sizes=[4],
        max_num_reqs=2,
        max_num_batched_tokens=16,
        max_num_blocks_per_group=[4],
        device=CPU,
    )
    bt.append_block_ids(req_index=0, new_block_ids=([7, 8],), overwrite=True)
    bt.apply_staged_writes()
    query_start_loc = torch.tensor([0, 3], dtype=torch.int32)
    positions = torch.tensor([1, 2, 3], dtype=index_dtype)
    bt.slot_mappings.fill_(123)
    real = bt.compute_slot_mappings(
        torch.tensor([0], dtype=index_dtype), query_start_loc, positions, num_tokens_padded=3
    )
    assert real[0].tolist() == [7 * 4 + 1, 7 * 4 + 2, 7 * 4 + 3]
    assert (bt.slot_mappings[:, 3:] == api.PAD_SLOT_ID).all()
    dummy = bt.compute_slot_mappings(
        torch.tensor([-1], dtype=index_dtype), query_start_loc, positions, num_tokens_padded=3
    )
    assert dummy[0].tolist() == [api.PAD_SLOT_ID] * 3


def _populated(api, index_dtype):
    tables = api.BlockTables([16, 32], 8, 64, [3, 5], CPU)
    for r in range(8):
        tables.append_block_ids(r, ([r + 1] * 3, [r + 1] * 5), overwrite=True)
    tables.apply_staged_writes()
    tables.gather_block_tables(torch.arange(8, dtype=index_dtype), num_reqs_padded=8)
    return tables


@pytest.mark.parametrize("previous_dummy", [False, True])
@pytest.mark.parametrize("next_dummy", [False, True])
@INDEX_DTYPES
def test_shared_block_tables_smaller_batch(api, previous_dummy, next_dummy, index_dtype):
    """test_shared_block_tables_clear_rows_from_larger_batch, 0.32's part: batch, padded rows."""
    tables = _populated(api, index_dtype)
    if previous_dummy:
        for table in tables.get_dummy_block_tables(8):
            table.fill_(99)
    ptrs = [table.data_ptr() for table in tables.input_block_tables]
    idx = torch.tensor([7, 2, 0, 5, 1], dtype=index_dtype)
    for num_reqs in (3, 5, 0):
        if next_dummy:
            num_rows = num_reqs
            out = tables.get_dummy_block_tables(num_reqs)
        else:
            num_rows = num_reqs + 1
            out = tables.gather_block_tables(idx[:num_reqs], num_rows)
        for table, view, ptr in zip(tables.input_block_tables, out, ptrs):
            assert view.shape == (num_rows, table.shape[1]) and table.data_ptr() == ptr
            if num_rows:
                assert view.data_ptr() == ptr
            # (0.34 also clears every row past the batch; 0.32 the padded rows only.)
            assert torch.count_nonzero(table[num_reqs:num_rows]).item() == 0
            if next_dummy:
                assert torch.count_nonzero(view).item() == 0
                view.fill_(99)
            else:
                expected = (idx[:num_reqs, None] + 1).expand(-1, table.shape[1])
                assert torch.equal(view[:num_reqs], expected.to(torch.int32))


def test_external_block_table_output_preserves_shared_rows(api):
    """test_external_block_table_output_preserves_shared_rows, 0.32's part: out= is written."""
    tables = _populated(api, torch.int64)
    previous = [table.clone() for table in tables.input_block_tables]
    out = tuple(torch.full_like(table[:3], -1) for table in previous)
    out_ptrs = torch.tensor([o.data_ptr() for o in out], dtype=torch.uint64)
    result = tables.gather_block_tables(torch.tensor([7, 2]), 3, out=out, out_ptrs=out_ptrs)
    for table, before, view in zip(tables.input_block_tables, previous, result):
        assert torch.equal(table, before)
        assert (view[0] == 8).all() and (view[1] == 3).all() and (view[2] == 0).all()


def test_kpool_tail_group_never_position_indexes_its_block_table(api):
    """test_kpool_tail_group_never_position_indexes_its_block_table: the tail group is PAD."""
    kpool, max_model_len, mla_block, max_reqs, poison = 4, 1 << 20, 640, 4, 1 << 20
    spec = api.CircularBufferSpec(
        block_size=kpool, num_kv_heads=2, head_size=128, head_size_v=0, dtype=torch.bfloat16
    )

    def width(num_blocks, block_size, token_alignment=128):  # 0.34's get_block_table_width
        if token_alignment is not None:
            align = token_alignment // math.gcd(token_alignment, block_size)
            num_blocks = -(-num_blocks // align) * align
        return num_blocks

    tail_width = width(
        spec.max_num_blocks_per_req(None, max_model_len),
        spec.block_size,
        token_alignment=spec.block_table_token_alignment,
    )
    mla_width = width(max_model_len // mla_block, mla_block)
    positions = [0, kpool - 1, tail_width * kpool, max_reqs * tail_width * kpool + kpool]
    bt = api.BlockTables(
        block_sizes=[mla_block, spec.block_size],
        max_num_reqs=max_reqs,
        max_num_batched_tokens=len(positions),
        max_num_blocks_per_group=[mla_width, tail_width],
        device=CPU,
        slot_mapping_enabled=[True, spec.uses_slot_mapping],
    )
    mla_blocks = list(range(1, mla_width + 1))
    bt.append_block_ids(0, (mla_blocks, [7]), overwrite=True)
    bt.append_block_ids(1, ([2], [poison]), overwrite=True)
    bt.apply_staged_writes()
    slots = bt.compute_slot_mappings(
        torch.zeros(1, dtype=torch.int32),
        torch.tensor([0, len(positions)], dtype=torch.int32),
        torch.tensor(positions, dtype=torch.int64),
        num_tokens_padded=len(positions),
    )
    assert slots[1].tolist() == [api.PAD_SLOT_ID] * len(positions)
    assert slots[0].tolist() == [
        mla_blocks[p // mla_block] * mla_block + p % mla_block for p in positions
    ]


def test_block_tables_zero_requests(api):
    """Beyond test_gpu_block_table: no requests -> every slot PAD, padded rows zeroed."""
    bt = api.BlockTables(
        block_sizes=[16, 8],
        max_num_reqs=4,
        max_num_batched_tokens=32,
        max_num_blocks_per_group=[4, 4],
        device=CPU,
    )
    bt.append_block_ids(0, ([3, 4], [5]), overwrite=True)
    bt.apply_staged_writes()
    bt.gather_block_tables(torch.zeros(1, dtype=torch.int32), num_reqs_padded=1)
    bt.slot_mappings.fill_(123)
    bt.compute_slot_mappings(
        torch.empty(0, dtype=torch.int32),
        torch.zeros(1, dtype=torch.int32),
        torch.empty(0, dtype=torch.int64),
        num_tokens_padded=8,
    )
    assert (bt.slot_mappings == api.PAD_SLOT_ID).all()
    out = bt.gather_block_tables(torch.empty(0, dtype=torch.int32), num_reqs_padded=2)
    assert all((o == 0).all() for o in out)


@INDEX_DTYPES
def test_block_tables_multi_request_slot_mapping(api, index_dtype):
    """Beyond test_gpu_block_table: several requests' slots against a torch reference."""
    g = torch.Generator().manual_seed(1)
    sizes = [16, 32]
    bt = api.BlockTables(
        block_sizes=sizes,
        max_num_reqs=5,
        max_num_batched_tokens=64,
        max_num_blocks_per_group=[8, 4],
        device=CPU,
    )
    blocks = {}
    for r in range(5):
        blocks[r] = tuple(torch.randint(1, 1000, (n,), generator=g).tolist() for n in (8, 4))
    for r, ids in blocks.items():
        bt.append_block_ids(r, ids, overwrite=True)
    bt.apply_staged_writes()
    idx = torch.tensor([3, 0, 4], dtype=index_dtype)
    lens = [5, 1, 7]
    query_start_loc = torch.tensor([0, 5, 6, 13], dtype=torch.int32)
    pos = torch.cat([torch.arange(40, 45), torch.tensor([0]), torch.arange(100, 107)])
    bt.slot_mappings.fill_(7)
    bt.compute_slot_mappings(idx, query_start_loc, pos.to(index_dtype), num_tokens_padded=16)
    expected = torch.full((2, 64), api.PAD_SLOT_ID, dtype=torch.int64)
    t = 0
    for r, length in zip(idx.tolist(), lens):
        for _ in range(length):
            p = int(pos[t])
            for group in range(2):
                block = blocks[r][group][p // sizes[group]]
                expected[group, t] = block * sizes[group] + p % sizes[group]
            t += 1
    assert torch.equal(bt.slot_mappings, expected)
