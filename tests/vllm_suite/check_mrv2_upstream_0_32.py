"""Model Runner V2's Triton kernels, pointed at our CPU kernels, checked with vLLM 0.32.0's tests.

The companion of ``check_mrv2_upstream.py`` (vLLM 0.34.0's tests): the checks of the installed
release's own test files that file does not make. As there, after ``fastdispatch.vllm.install()``
each ``kernel[grid](...)`` launch in the installed 0.32's Model Runner V2 modules runs this
project's ``kernels_cpu`` kernel, the tests drive vLLM's Python wrappers with CPU tensors at sizes
a CPU run affords, the statistical checks keep vLLM's tolerances, and every input is drawn from a
seeded generator. By the vLLM test file each group comes from:

* ``tests/v1/worker/test_gpu_rejection_sampler_chunking.py``: ``RejectionSampler``'s chunked
  verification (``_flatten_sampled_kernel``, the logprob kernels, ``_compact_sampling_mask_kernel``
  and the rejection sampler's), against one full batch and torch;
* ``tests/v1/spec_decode/test_ngram_gpu.py``: ``NgramGPUSpeculator.propose``
  (``_ngram_scan_kernel``, ``_ngram_finalize_kernel``);
* ``tests/v1/worker/test_gpu_gumbel_sample.py``: what ``check_mrv2_upstream.py`` leaves out --
  the murmur3 known answers (through a reference of vLLM's noise that must reproduce them, which
  ``gumbel_sample`` must then follow draw for draw), the fp32 and fp64 tail mass, full-vocabulary
  fidelity;
* ``tests/v1/spec_decode/test_rejection_sampler_utils.py``: likewise -- greedy, all-NaN targets,
  gumbel-drafted proposals, block verification's distribution and acceptance length;
* ``tests/v1/worker/test_gpu_rejection_sampler_i64.py``, ``test_gpu_row_offsets_i64.py``: offsets
  past 2**31 elements in the block-verification kernels, ``_apply_write_kernel``,
  ``_bincount_kernel`` and ``_post_update_kernel``. vLLM skips the row-offset ones without the
  device memory they need plus 1 GiB; here each skips when ``/proc/meminfo``'s MemAvailable is
  below its big tensor's size plus 2 GiB. Those tensors are calloc'd (``numpy.zeros``): the zero
  pages no kernel writes stay unbacked, so each runs in seconds.

Not here: what launches no kernel of ours -- ``test_gpu_sampler_flags.py``,
``test_gpu_warmup_blocks.py``, ``test_gpu_input_batch_v2.py`` (its one kernel,
``_dcp_local_seq_lens_kernel``, is vLLM's), ``test_gpu_target_dependent_ar_speculator.py``
(metadata, model loading and CUDA graph plumbing), ``_iter_request_chunks``, the V1 block table
-- and the M-RoPE row-offset test, whose ``_prepare_rope_positions_kernel`` is vLLM's.
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
    "vllm.v1.worker.gpu.sample.gumbel": ("_gumbel_sample_kernel",),
    "vllm.v1.worker.gpu.sample.logprob": ("_topk_log_softmax_kernel", "_ranks_kernel"),
    "vllm.v1.worker.gpu.sample.output": ("_compact_sampling_mask_kernel",),
    "vllm.v1.worker.gpu.sample.penalties": ("_bincount_kernel",),
    "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils": (
        "_compute_local_logits_stats_kernel",
        "_compute_cumulative_log_p_kernel",
        "_compute_local_residual_mass_kernel",
        "_rejection_kernel",
        "_resample_kernel",
        "_insert_resampled_kernel",
    ),
    "vllm.v1.worker.gpu.spec_decode.rejection_sampler": ("_flatten_sampled_kernel",),
    "vllm.v1.worker.gpu.spec_decode.ngram.speculator": (
        "_ngram_scan_kernel",
        "_ngram_finalize_kernel",
    ),
    "vllm.v1.worker.gpu.buffer_utils": ("_apply_write_kernel",),
    "vllm.v1.worker.gpu.input_batch": ("_post_update_kernel",),
}


@pytest.fixture(scope="module")
def api():
    """vLLM's API used by the tests below, with our kernels standing in its modules
    (``ours_standing``)."""
    from types import SimpleNamespace

    with ours_standing(KERNELS):
        from vllm.config.model import PROCESSED_LOGPROBS_MODES
        from vllm.v1.worker.gpu.buffer_utils import StagedWriteTensor
        from vllm.v1.worker.gpu.input_batch import post_update
        from vllm.v1.worker.gpu.sample.gumbel import gumbel_sample
        from vllm.v1.worker.gpu.sample.output import SamplingMaskTensors
        from vllm.v1.worker.gpu.sample.penalties import bincount
        from vllm.v1.worker.gpu.spec_decode.ngram.speculator import NgramGPUSpeculator
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler import RejectionSampler
        from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import rejection_sample
        from vllm.v1.worker.gpu.states import RequestState

        yield SimpleNamespace(
            PROCESSED_LOGPROBS_MODES=PROCESSED_LOGPROBS_MODES,
            StagedWriteTensor=StagedWriteTensor,
            post_update=post_update,
            gumbel_sample=gumbel_sample,
            SamplingMaskTensors=SamplingMaskTensors,
            bincount=bincount,
            NgramGPUSpeculator=NgramGPUSpeculator,
            RejectionSampler=RejectionSampler,
            rejection_sample=rejection_sample,
            RequestState=RequestState,
        )


# -- tests/v1/worker/test_gpu_rejection_sampler_chunking.py --------------------------------------

LOGPROBS_MODES = ["raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs"]


def _input_batch(cu_num_logits_np, idx_mapping_np, index_dtype=torch.int32):
    """vLLM's _make_input_batch: the InputBatch fields _verify_in_chunks reads."""
    from types import SimpleNamespace

    import numpy as np

    num_reqs = len(idx_mapping_np)
    per_req = np.diff(cu_num_logits_np)
    return SimpleNamespace(
        num_reqs=num_reqs,
        cu_num_logits_np=cu_num_logits_np,
        cu_num_logits=torch.from_numpy(cu_num_logits_np).to(index_dtype),
        idx_mapping_np=idx_mapping_np,
        idx_mapping=torch.from_numpy(idx_mapping_np).to(index_dtype),
        expanded_idx_mapping=torch.from_numpy(np.repeat(idx_mapping_np, per_req)).to(index_dtype),
        expanded_local_pos=torch.from_numpy(
            np.concatenate([np.arange(n, dtype=np.int32) for n in per_req])
        ).to(index_dtype),
        seq_lens_cpu_upper_bound=torch.full((num_reqs,), 64, dtype=torch.int32),
    )


def _rejection_sampler(api, sampler, k):
    """vLLM's _make_rejection_sampler: standard, fixed-boundary, unwatermarked verification."""
    rs = object.__new__(api.RejectionSampler)
    rs.sampler = sampler
    rs.num_speculative_steps = k
    rs.enable_adaptive_verification = False
    rs.synthetic_conditional_rates = None
    rs.use_block_verification = False
    rs.watermark_key = None
    return rs


@pytest.mark.parametrize("logprobs_mode", LOGPROBS_MODES)
@INDEX_DTYPES
def test_chunked_scores_match_full_batch(api, logprobs_mode, index_dtype):
    """test_chunked_scores_match_full_batch, plus the full batch's scores against torch."""
    from types import MethodType, SimpleNamespace

    import numpy as np

    cu_np = np.array([0, 3, 4, 8, 10], dtype=np.int32)
    idx_np = np.array([7, 2, 9, 1], dtype=np.int32)
    batch = _input_batch(cu_np, idx_np, index_dtype)
    rs = _rejection_sampler(
        api, SimpleNamespace(logprobs_mode=logprobs_mode, return_sampling_mask=False), 3
    )

    def fake_verify(self, logits, _draft_logits, _draft_sampled, _pos, cu, idx, *_):
        num_sampled = torch.diff(cu).to(torch.int32)
        sampled = (idx.to(torch.int64).unsqueeze(1) + torch.arange(4)) % logits.shape[1]
        return logits.float() + 1, sampled, num_sampled

    rs._verify = MethodType(fake_verify, rs)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(10, 17, generator=g)
    logits[2, 4] = logits[2, 9]  # a tie with the token request 0 emits there
    sampled, num_sampled, chunked, masks = rs._verify_in_chunks(
        logits,
        batch,
        draft_logits=None,
        draft_sampled=torch.arange(10),
        pos=torch.arange(10),
        max_chunk_logits=5,
        max_num_logprobs=2,
    )
    processed = logprobs_mode in api.PROCESSED_LOGPROBS_MODES
    scored = logits + 1 if processed else logits
    full = rs._get_logprobs_tensors(
        sampled, num_sampled, scored, batch.cu_num_logits, cu_np, max_num_logprobs=2
    )
    assert sampled[:, 0].tolist() == idx_np.tolist()
    assert num_sampled.tolist() == np.diff(cu_np).tolist()
    assert masks is None and chunked is not None and full is not None
    assert torch.equal(chunked.logprob_token_ids, full.logprob_token_ids)
    assert torch.equal(chunked.logprobs, full.logprobs)
    assert torch.equal(chunked.selected_token_ranks, full.selected_token_ranks)
    assert chunked.cu_num_generated_tokens == full.cu_num_generated_tokens
    # Beyond vLLM's test: the scores themselves, row r of request q scoring sampled[q, r].
    rows = torch.arange(10)
    req = torch.repeat_interleave(torch.arange(4), torch.from_numpy(np.diff(cu_np)).long())
    flat = sampled[req, rows - torch.from_numpy(cu_np[:-1]).long()[req]]
    ids = torch.cat([flat.unsqueeze(1), scored.topk(2, dim=-1).indices], dim=1)
    assert torch.equal(full.logprob_token_ids, ids)
    logits_mode = logprobs_mode in ("raw_logits", "processed_logits")
    ref = scored if logits_mode else torch.log_softmax(scored, dim=-1)
    torch.testing.assert_close(full.logprobs, ref.gather(1, ids), rtol=1e-5, atol=1e-5)
    ranks = (scored >= scored.gather(1, flat.unsqueeze(1))).sum(-1)
    assert torch.equal(full.selected_token_ranks, ranks)


@INDEX_DTYPES
def test_replay_on_off_preserves_rejection_sampling_and_rng(api, monkeypatch, index_dtype):
    """test_replay_on_off_preserves_rejection_sampling_and_rng: masks on or off, same draws."""
    from types import SimpleNamespace

    import numpy as np

    num_reqs, k, vocab = 3, 3, 8
    rows = k + 1
    batch = _input_batch(
        np.arange(0, 13, rows, dtype=np.int32), np.arange(num_reqs, dtype=np.int32), index_dtype
    )
    processed_logits = torch.zeros(12, vocab)
    processed_logits[0, 0] = NEG
    processed_logits[rows + 1, 1] = NEG
    draft_logits = torch.zeros(num_reqs, k, vocab)
    draft_sampled = torch.zeros(num_reqs, rows, dtype=torch.int64)
    draft_sampled[:, 1:] = torch.tensor([0, 1, 2])
    draft_sampled = draft_sampled.flatten()
    sampler = SimpleNamespace(
        logprobs_mode="processed_logprobs",
        return_sampling_mask=False,
        sampling_states=SimpleNamespace(
            top_k=SimpleNamespace(np=np.full(num_reqs, vocab)),
            temperature=SimpleNamespace(gpu=torch.ones(num_reqs)),
            seeds=SimpleNamespace(gpu=torch.arange(num_reqs, dtype=torch.int64)),
        ),
        use_fp64_gumbel=False,
        apply_sampling_params=lambda logits, *_: logits,
    )
    rs = _rejection_sampler(api, sampler, k)
    pos = torch.arange(12, dtype=index_dtype)

    pack_calls = []
    pack = api.SamplingMaskTensors.from_logits.__func__

    def track_pack(cls, logits, cu_num_logits, num_sampled_tokens, max_num_kept, rpr=1):
        pack_calls.append((cu_num_logits.tolist(), max_num_kept, rpr))
        return pack(cls, logits, cu_num_logits, num_sampled_tokens, max_num_kept, rpr)

    monkeypatch.setattr(api.SamplingMaskTensors, "from_logits", classmethod(track_pack))

    def verify():
        return rs._verify_in_chunks(
            processed_logits,
            batch,
            draft_logits,
            draft_sampled,
            pos,
            max_chunk_logits=8,
            max_num_logprobs=0,
        )

    rng_before = torch.get_rng_state()
    off_sampled, off_counts, off_logprobs, off_masks = verify()
    rng_after_off = torch.get_rng_state()
    assert pack_calls == []
    sampler.return_sampling_mask = True
    on_sampled, on_counts, on_logprobs, on_masks = verify()
    rng_after_on = torch.get_rng_state()

    assert pack_calls == [([0, 4, 8], vocab, rows), ([0, 4], vocab, rows)]
    assert off_masks is None and on_masks is not None
    assert on_masks.rows_per_request == rows
    assert on_masks.token_ids.shape == (num_reqs * rows, vocab)
    assert on_masks.packed_mask.shape[0] == num_reqs * rows
    assert off_counts.tolist() == [1, 2, 4]
    assert torch.equal(off_counts, on_counts)
    counts = off_counts.tolist()
    for req, count in enumerate(counts):
        assert torch.equal(off_sampled[req, :count], on_sampled[req, :count])
    mapped = [int(batch.cu_num_logits_np[r]) + s for r, c in enumerate(counts) for s in range(c)]
    assert off_logprobs is not None and on_logprobs is not None
    for name in ("logprob_token_ids", "logprobs", "selected_token_ranks"):
        assert torch.equal(getattr(off_logprobs, name)[mapped], getattr(on_logprobs, name)[mapped])
    assert torch.equal(rng_before, rng_after_off)
    assert torch.equal(rng_after_off, rng_after_on)

    masks = on_masks.to_cpu_nonblocking().tolists(on_counts.numpy()).to_nested_list()
    expected_masks = [
        torch.isfinite(processed_logits[r]).nonzero().flatten().tolist() for r in mapped
    ]
    emitted = [int(on_sampled[r, s]) for r, c in enumerate(counts) for s in range(c)]
    expected_logprobs = torch.stack(
        [torch.log_softmax(processed_logits[r], dim=-1)[t] for r, t in zip(mapped, emitted)]
    )
    assert masks == expected_masks
    assert all(t in m for t, m in zip(emitted, masks))
    assert torch.equal(on_logprobs.logprobs[mapped, 0], expected_logprobs)


# -- tests/v1/spec_decode/test_ngram_gpu.py ------------------------------------------------------


def _speculator(api, min_n, max_n, k, max_num_seqs=8, max_model_len=32):
    """vLLM's _make_speculator, the configs reduced to the fields the speculator reads (vLLM's
    builds a ModelConfig for facebook/opt-125m, which needs the Hub)."""
    from types import SimpleNamespace

    config = SimpleNamespace(
        speculative_config=SimpleNamespace(
            method="ngram_gpu",
            prompt_lookup_min=min_n,
            prompt_lookup_max=max_n,
            num_speculative_tokens=k,
        ),
        scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs, max_num_batched_tokens=2048),
        model_config=SimpleNamespace(max_model_len=max_model_len),
    )
    req_states = api.RequestState(
        max_num_reqs=max_num_seqs,
        max_model_len=max_model_len,
        max_num_batched_tokens=2048,
        num_speculative_steps=k,
        vocab_size=50272,
        device=torch.device("cpu"),
        use_dense_all_token_ids=True,
    )
    return api.NgramGPUSpeculator(config, torch.device("cpu"), req_states)


def _propose(
    spec,
    rows,
    seq_lens=None,
    num_sampled=None,
    last_sampled=None,
    slots=None,
    index_dtype=torch.int64,
):
    """vLLM's _propose: each row at a request slot, the drafts in batch order; the token rows
    and the scratch poisoned, so only what the kernels write is read back."""
    from types import SimpleNamespace

    n = len(rows)
    seq_lens = [len(r) for r in rows] if seq_lens is None else seq_lens
    num_sampled = [1] * n if num_sampled is None else num_sampled
    last_sampled = [0] * n if last_sampled is None else last_sampled
    slots = list(range(n)) if slots is None else slots
    token_ids = spec.req_states.all_token_ids.gpu
    total_len = spec.req_states.total_len.gpu
    token_ids.zero_()
    total_len.zero_()
    spec.scratch.fill_(-7)
    spec.drafts.fill_(-7)
    last = torch.zeros((spec.max_num_reqs, 1), dtype=torch.int64)
    for row, slot, seq_len, tok in zip(rows, slots, seq_lens, last_sampled):
        if row:
            token_ids[slot, : len(row)] = torch.tensor(row, dtype=torch.int32)
        total_len[slot] = seq_len
        last[slot, 0] = tok
    drafts = spec.propose(
        input_batch=SimpleNamespace(num_reqs=n, idx_mapping=torch.tensor(slots, dtype=index_dtype)),
        attn_metadata=None,
        slot_mappings=None,
        last_hidden_states=torch.empty(0),
        aux_hidden_states=None,
        num_sampled=torch.tensor(num_sampled, dtype=torch.int32),
        num_rejected=torch.zeros(n, dtype=torch.int32),
        last_sampled=last,
        next_prefill_tokens=torch.zeros(n, dtype=torch.int32),
        temperature=torch.zeros(n),
        seeds=torch.zeros(n, dtype=torch.int64),
        dp_sync_state=None,
    )
    return drafts.tolist()


@pytest.mark.parametrize("max_model_len", [32, 300])
def test_ngram_no_match_clears_previous_proposal(api, max_model_len):
    """test_no_match_clears_previous_proposal: a miss proposes the last token, not stale drafts."""
    spec = _speculator(api, 2, 2, 2, max_model_len=max_model_len)
    row = [0] * (max_model_len - 5) + [1, 2, 3, 1, 2]
    assert _propose(spec, [row]) == [[3, 1]]
    assert _propose(spec, [[1, 2, 3, 4, 5]], last_sampled=[42]) == [[42, 42]]


def test_ngram_no_4gram_match_only(api):
    """test_no_4gram_match_only: no 4-gram in [1,2,3,4,1,2,3], no draft."""
    spec = _speculator(api, 4, 4, 2)
    assert _propose(spec, [[1, 2, 3, 4, 1, 2, 3]], last_sampled=[7]) == [[7, 7]]


def test_ngram_falls_back_to_3gram_when_4gram_missing(api):
    """test_falls_back_to_3gram_when_4gram_missing: the 3-gram match proposes [4, 1]."""
    spec = _speculator(api, 3, 4, 2)
    assert _propose(spec, [[1, 2, 3, 4, 1, 2, 3]]) == [[4, 1]]


def test_ngram_prefers_longer_ngram(api):
    """test_prefers_longer_ngram: a 4-gram beats a more recent 3-gram."""
    spec = _speculator(api, 3, 4, 2)
    assert _propose(spec, [[1, 2, 3, 4, 50, 51, 2, 3, 4, 60, 61, 1, 2, 3, 4]]) == [[50, 51]]


def test_ngram_picks_longest_match_among_2_3_4_grams(api):
    """test_picks_longest_match_among_2_3_4_grams: a 3-gram beats a more recent 2-gram."""
    spec = _speculator(api, 2, 4, 2)
    assert _propose(spec, [[2, 3, 4, 50, 51, 3, 4, 60, 61, 1, 2, 3, 4]]) == [[50, 51]]


@pytest.mark.parametrize("max_model_len", [32, 128, 257, 1025])
def test_ngram_picks_rightmost_when_multiple_matches(api, max_model_len):
    """test_picks_rightmost_when_multiple_matches: the last match across blocks, tail ignored."""
    spec = _speculator(api, 3, 3, 2, max_model_len=max_model_len)
    padding = [0] * (spec.block_l - 5) if spec.n_blocks > 1 else []
    row = [1, 2, 3, 100] + padding + [1, 2, 3, 200, 1, 2, 3, 300, 1, 2, 3]
    drafts = _propose(spec, [row + [1, 2, 3, 999, 1, 2, 3]], seq_lens=[len(row)])
    assert drafts == [[300, 1]]


def test_ngram_short_context_yields_zero_valid(api):
    """test_short_context_yields_zero_valid: the only window is the suffix itself."""
    spec = _speculator(api, 2, 2, 2)
    assert _propose(spec, [[5, 6]], last_sampled=[99]) == [[99, 99]]


def test_ngram_zero_sampled_disables_proposal(api):
    """test_zero_sampled_disables_proposal: num_sampled == 0 proposes nothing."""
    spec = _speculator(api, 2, 2, 2)
    assert _propose(spec, [[1, 2, 3, 1, 2]], num_sampled=[0], last_sampled=[77]) == [[77, 77]]


def test_ngram_tail_falls_back_when_few_tokens_after_match(api):
    """test_tail_falls_back_when_few_tokens_after_match: slots past the context fall back."""
    spec = _speculator(api, 2, 2, 3)
    assert _propose(spec, [[1, 2, 1, 2]], last_sampled=[55]) == [[1, 2, 55]]


@INDEX_DTYPES
def test_ngram_multibatch_mixed(api, index_dtype):
    """test_multibatch_mixed: row 0 matches, row 1 does not."""
    spec = _speculator(api, 2, 2, 2)
    drafts = _propose(
        spec, [[1, 2, 3, 1, 2], [4, 5, 6]], last_sampled=[10, 20], index_dtype=index_dtype
    )
    assert drafts == [[3, 1], [20, 20]]


@INDEX_DTYPES
def test_ngram_multibatch_independent_choice_of_n(api, index_dtype):
    """test_multibatch_independent_choice_of_n: each row picks its own longest n."""
    spec = _speculator(api, 2, 3, 2)
    rows = [[9, 1, 2, 3, 8, 1, 2, 3], [7, 1, 2, 9, 1, 2]]
    assert _propose(spec, rows, index_dtype=index_dtype) == [[8, 1], [9, 1]]


def test_ngram_min_n_eq_1(api):
    """test_min_n_eq_1: single-token n-grams."""
    spec = _speculator(api, 1, 1, 2)
    assert _propose(spec, [[1, 2, 3, 4, 1]]) == [[2, 3]]


@INDEX_DTYPES
def test_ngram_noncontiguous_idx_mapping(api, index_dtype):
    """test_noncontiguous_idx_mapping: rows read in place through idx_mapping."""
    spec = _speculator(api, 2, 2, 2)
    rows = [[7, 8, 9, 7, 8], [1, 2, 3, 1, 2]]
    assert _propose(spec, rows, slots=[3, 0], index_dtype=index_dtype) == [[9, 7], [3, 1]]


# -- tests/v1/worker/test_gpu_gumbel_sample.py ---------------------------------------------------

DRAFT_NOISE_SALT = 1 << 30  # vLLM's _DRAFT_NOISE_SALT
M32 = 0xFFFFFFFF


def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def _mix(h, key):
    key = _rotl32((key * 0xCC9E2D51) & M32, 15)
    h ^= (key * 0x1B873593) & M32
    return (_rotl32(h, 13) * 5 + 0xE6546B64) & M32


def _murmur3_hash32(seed, pos, offset, domain=0):
    """vLLM's murmur3_hash32, on int64 tensors (every intermediate fits in 64 bits)."""
    h = torch.full(torch.broadcast_shapes(seed.shape, pos.shape, offset.shape), domain)
    h = _mix(h, seed & M32)
    h = _mix(h, (seed >> 32) & M32)
    h = _mix(h, pos & M32)
    h = _mix(h, offset & M32)
    h ^= 16
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def _gumbel_noise(seed, pos, offset, use_fp64):
    """vLLM's noise for (seed, pos, token), in float64: murmur3 uniforms, -log(-log(u))."""
    lo = _murmur3_hash32(seed, pos, offset)
    if use_fp64:
        hi = _murmur3_hash32(seed, pos, offset, domain=0x9E3779B9)
        random53 = (hi << 21) | (lo >> 11)  # ((hi << 32) | lo) >> 11, kept below 2**63
        u = (random53.double() + 0.5) * 1.1102230246251565e-16
        u = torch.where(u == 1.0, u - 1.1102230246251565e-16, u)
        return -torch.log(-torch.log(u))
    hi16 = (lo >> 16).float() * 1.52587890625e-05
    u = (hi16 + ((lo & 0xFFFF).float() + 0.5) * 2.3283064365386963e-10).double()
    return -torch.log(-torch.log1p(-u))  # fp32 draws the tail from u -> 0: log(1 - u)


def _check_murmur3_known_answers():
    """vLLM's test_murmur3_known_answers, of the reference hash above."""
    seeds = torch.tensor([0, 1, -1, 0x123456789ABCDEF, -(1 << 63), (1 << 63) - 1])
    positions = torch.tensor([0, 2, 17, 123456789, 1 << 30, (1 << 30) + 7])
    offsets = torch.tensor([0, 3, 1023, 199999, 4096, 0xFFFFFFFF])
    assert _murmur3_hash32(seeds, positions, offsets).tolist() == [
        0x8134CDF8,
        0x23B53F91,
        0xC8C13C14,
        0x5DDE974F,
        0xF1A9355B,
        0xD952F9AA,
    ]
    assert _murmur3_hash32(seeds, positions, offsets, domain=0x9E3779B9).tolist() == [
        0xD28AD962,
        0xE3AAF818,
        0xD223C51C,
        0x0547D2FE,
        0x3AED160F,
        0x49E8EA7F,
    ]


@pytest.mark.parametrize("use_fp64", [False, True])
@pytest.mark.parametrize("is_drafting", [False, True])
@INDEX_DTYPES
def test_gumbel_draws_follow_vllms_murmur3_noise(api, use_fp64, is_drafting, index_dtype):
    """test_murmur3_known_answers, end to end: each draw is argmax(logits / T + vLLM's noise)."""
    _check_murmur3_known_answers()
    g = torch.Generator().manual_seed(5)
    n, vocab, num_slots = 48, 3000, 6
    logits = torch.randn(n, vocab, generator=g) * 3
    idx = torch.randint(0, num_slots, (n,), generator=g)
    temps = torch.rand(num_slots, generator=g) + 0.25
    seeds = torch.randint(-(1 << 62), 1 << 62, (num_slots,), generator=g)
    seeds[0], seeds[1] = -1, (1 << 63) - 1
    # Positions past 2**32 (int64) or 2**30 (int32, so that the salted ones wrap).
    pos = torch.randint(0, 1 << (40 if index_dtype == torch.int64 else 31), (n,), generator=g)
    sampled = api.gumbel_sample(
        logits,
        idx.to(index_dtype),
        temps,
        seeds,
        pos.to(index_dtype),
        apply_temperature=True,
        is_drafting=is_drafting,
        use_fp64=use_fp64,
    )
    key_pos = pos + DRAFT_NOISE_SALT if is_drafting else pos
    noise = _gumbel_noise(
        seeds[idx].unsqueeze(1), key_pos.unsqueeze(1), torch.arange(vocab).unsqueeze(0), use_fp64
    )
    scaled = (logits / temps[idx].unsqueeze(1)).double()
    expected = (scaled + noise).argmax(-1)
    torch.testing.assert_close(sampled, expected, rtol=0, atol=0)


@pytest.mark.parametrize("use_fp64", [False, True])
def test_gumbel_sampling_matches_target_distribution(api, use_fp64):
    """test_sampling_matches_target_distribution (2000 tokens, 100k draws): the tail mass."""
    num_samples = 100_000
    counts = heavy_tailed_counts(2000)
    total = counts.sum().item()
    sampled = gumbel_draws(api, counts_to_logits(counts), num_samples, use_fp64=use_fp64)
    assert sampled.min() >= 0 and sampled.max() < 2000
    tail_prob = (total - counts[0].item()) / total
    z = z_score((sampled != 0).sum().item(), num_samples * tail_prob, num_samples)
    assert abs(z) < Z_TOLERANCE, z


def test_gumbel_full_vocab_distribution_fidelity(api):
    """test_full_vocab_distribution_fidelity (8200 tokens, ~24 draws a bin, in chunks)."""
    vocab, num_samples, chunk = 8200, 200_000, 60_000
    g = torch.Generator().manual_seed(2024)
    counts = torch.randint(500, 1500, (vocab,), generator=g, dtype=torch.int64)
    logits = counts_to_logits(counts)
    hist = torch.zeros(vocab, dtype=torch.float64)
    for start in range(0, num_samples, chunk):
        size = min(chunk, num_samples - start)
        draws = gumbel_draws(api, logits, size, start=start)
        hist += torch.bincount(draws, minlength=vocab).double()
    assert (hist > 0).sum().item() / vocab > 0.99
    expected = counts.double() / counts.sum() * num_samples
    chi2 = (((hist - expected) ** 2) / expected).sum().item()
    df = vocab - 1
    assert chi2 < df + 10 * math.sqrt(2 * df), f"chi2={chi2:.0f}, df={df}"


# -- tests/v1/spec_decode/test_rejection_sampler_utils.py ----------------------------------------


@pytest.mark.parametrize("k", [1, 3])
def test_gumbel_drafted_rejection_sample_is_unbiased(api, k):
    """test_gumbel_drafted_rejection_sample_is_unbiased: drafts on the verifier's noise stream."""
    g = torch.Generator().manual_seed(42)
    num_trials = 200_000
    target = torch.randn(16, generator=g)
    draft = -target
    inputs = build_inputs(target, draft, k, 1.0, num_trials, g)
    drafted = api.gumbel_sample(
        draft.unsqueeze(0).expand(num_trials * k, 16).float(),
        inputs["expanded_idx_mapping"].view(num_trials, k + 1)[:, :k].reshape(-1).contiguous(),
        inputs["temperature"],
        inputs["seed"],
        inputs["pos"].view(num_trials, k + 1)[:, :k].reshape(-1).contiguous(),
        apply_temperature=True,
        is_drafting=True,
    )
    inputs["draft_sampled"].view(num_trials, k + 1)[:, 1:] = drafted.view(num_trials, k)
    sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
    assert (num_sampled >= 1).all()
    assert (num_sampled == 1).float().mean().item() > 0.5, "the drafts are not being rejected"
    probs = torch.softmax(target, 0)
    for p in range(k + 1):
        accepted = num_sampled >= p + 1
        assert_distribution_match(sampled[accepted, p], probs, f"position {p}")


@pytest.mark.parametrize("k", [1, 3])
@INDEX_DTYPES
def test_greedy_rejection_sample(api, k, index_dtype):
    """test_greedy_rejection_sample, half the drafts the argmax: all accepted are the argmax."""
    g = torch.Generator().manual_seed(42)
    target = torch.randn(RS_VOCAB, generator=g)
    inputs = build_inputs(
        target, torch.randn(RS_VOCAB, generator=g), k, 0.0, 10 * RS_VOCAB, g, index_dtype
    )
    argmax = int(target.argmax())
    inputs["draft_sampled"].view(-1, k + 1)[::2, 1] = argmax  # some drafts accepted
    sampled, num_sampled = api.rejection_sample(**inputs, num_speculative_steps=k)
    assert (num_sampled >= 2).any()
    assert (sampled[valid_mask(num_sampled, k)] == argmax).all()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("use_block_verification", [False, True])
def test_all_nan_target_logits_in_range(api, temperature, use_block_verification):
    """test_all_nan_target_logits_in_range: NaN rows over 3 padded blocks give in-range ids."""
    g = torch.Generator().manual_seed(0)
    k, vocab = 1, 20000
    target = torch.full((vocab,), float("nan"))
    inputs = build_inputs(target, torch.randn(vocab, generator=g), k, temperature, 4, g)
    sampled, num_sampled = api.rejection_sample(
        **inputs, num_speculative_steps=k, use_block_verification=use_block_verification
    )
    assert ((num_sampled >= 1) & (num_sampled <= k + 1)).all()
    valid = sampled[valid_mask(num_sampled, k)]
    assert ((valid >= 0) & (valid < vocab)).all()


@pytest.mark.parametrize("k,temperature", [(1, 0.6), (3, 0.6), (1, 1.0), (3, 1.0), (5, 1.0)])
@pytest.mark.parametrize("has_draft_logits", [True, False])
def test_block_verification_rejection_sample(api, k, temperature, has_draft_logits):
    """test_block_verification_rejection_sample (512 tokens): every position is the target's."""
    g = torch.Generator().manual_seed(42)
    target = torch.randn(RS_VOCAB, generator=g) / temperature
    draft = torch.randn(RS_VOCAB, generator=g)
    inputs = build_inputs(target, draft, k, temperature, 10 * RS_VOCAB, g)
    if not has_draft_logits:
        inputs["draft_logits"] = None
    sampled, num_sampled = api.rejection_sample(
        **inputs, num_speculative_steps=k, use_block_verification=True
    )
    probs = torch.softmax(target, 0)
    for p in range(k + 1):
        accepted = num_sampled >= p + 1
        assert_distribution_match(sampled[accepted, p], probs, f"position {p}")


@pytest.mark.parametrize("k", [3, 5])
def test_block_verification_accepts_at_least_as_many(api, k):
    """test_block_verification_accepts_at_least_as_many: block's mean prefix >= token's."""
    g = torch.Generator().manual_seed(0)
    target = torch.randn(RS_VOCAB, generator=g)
    draft = target + 0.5 * torch.randn(RS_VOCAB, generator=g)
    inputs = build_inputs(target, draft, k, 1.0, 20 * RS_VOCAB, g)
    _, standard = api.rejection_sample(**inputs, num_speculative_steps=k)
    _, block = api.rejection_sample(**inputs, num_speculative_steps=k, use_block_verification=True)
    mean_standard = (standard - 1).float().mean().item()
    mean_block = (block - 1).float().mean().item()
    assert 0.5 < mean_standard < k - 0.5, "the drafts are all accepted or all rejected"
    assert mean_block >= mean_standard - 1e-2, (mean_block, mean_standard)


# -- tests/v1/worker/test_gpu_rejection_sampler_i64.py, test_gpu_row_offsets_i64.py --------------

GiB = 2**30


def _mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _needs_memory(needed):
    """vLLM's gate, host side: skip without ``needed`` bytes plus 2 GiB available."""
    available = _mem_available()
    return pytest.mark.skipif(
        available < needed + 2 * GiB,
        reason=f"requires {(needed + 2 * GiB) / GiB:.1f} GiB available memory "
        f"(MemAvailable: {available / GiB:.1f} GiB)",
    )


def _calloc(shape, dtype):
    """Zeros whose untouched pages stay unbacked (numpy's calloc); bf16 as int16 bits."""
    import numpy as np

    if dtype == torch.bfloat16:
        return torch.from_numpy(np.zeros(shape, dtype=np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.zeros(shape, dtype=torch.empty(0, dtype=dtype).numpy().dtype))


I64_VOCAB, I64_K = 155264, 2
I64_ROWS = I64_K + 1


def _i64_rejection(
    api, target_logits, draft_logits, draft_tokens, num_reqs, max_num_reqs, roi, rsi
):
    """vLLM's _run: uniform k=2 requests, the one under test at request ``roi`` and draft row
    ``rsi``; the filler logits are zeros (vLLM's randn costs minutes on CPU)."""
    num_logits = num_reqs * I64_ROWS
    row = roi * I64_ROWS
    full_target = _calloc((num_logits, I64_VOCAB), torch.bfloat16)
    full_target[row : row + I64_ROWS] = target_logits
    full_draft = _calloc((max_num_reqs, I64_K, I64_VOCAB), torch.bfloat16)
    full_draft[rsi] = draft_logits
    draft_sampled = torch.zeros(num_logits, dtype=torch.int64)
    draft_sampled[row + 1 : row + 1 + len(draft_tokens)] = torch.tensor(draft_tokens)
    idx_mapping = torch.zeros(num_reqs, dtype=torch.int32)
    idx_mapping[roi] = rsi
    pos = torch.arange(num_logits, dtype=torch.int64)
    pos[row : row + I64_ROWS] = torch.arange(1000, 1000 + I64_ROWS)
    sampled, num_sampled = api.rejection_sample(
        target_logits=full_target,
        draft_logits=full_draft,
        draft_sampled=draft_sampled,
        cu_num_logits=torch.arange(0, num_logits + 1, I64_ROWS, dtype=torch.int32),
        pos=pos,
        idx_mapping=idx_mapping,
        expanded_idx_mapping=idx_mapping.repeat_interleave(I64_ROWS),
        expanded_local_pos=torch.arange(I64_ROWS, dtype=torch.int32).repeat(num_reqs),
        temperature=torch.ones(max_num_reqs),
        seed=torch.full((max_num_reqs,), 42, dtype=torch.int64),
        num_speculative_steps=I64_K,
        use_block_verification=True,
    )
    return sampled[roi].clone(), num_sampled[roi].clone()


@pytest.mark.parametrize(
    ("num_reqs", "max_num_reqs", "roi", "rsi"),
    [
        pytest.param(
            5500, 4, 5000, 2, marks=_needs_memory(5500 * I64_ROWS * I64_VOCAB * 2), id="target"
        ),
        pytest.param(
            22, 8192, 11, 8000, marks=_needs_memory(8192 * I64_K * I64_VOCAB * 2), id="draft"
        ),
    ],
)
def test_block_verification_i64_indexing(api, num_reqs, max_num_reqs, roi, rsi):
    """test_block_verification_i64_indexing: a request past 2**31 elements, as when alone."""
    g = torch.Generator().manual_seed(0)
    target = torch.randn(I64_ROWS, I64_VOCAB, generator=g).to(torch.bfloat16)
    draft = torch.randn(I64_K, I64_VOCAB, generator=g).to(torch.bfloat16)
    tokens = [123, 45678]
    ref, ref_n = _i64_rejection(api, target, draft, tokens, 1, 1, 0, 0)
    got, got_n = _i64_rejection(api, target, draft, tokens, num_reqs, max_num_reqs, roi, rsi)
    assert got_n.item() == ref_n.item()
    n = ref_n.item()
    assert torch.equal(got[:n], ref[:n])


STRIDE = 1_000_000  # max_model_len
ROW = 2559  # ROW * STRIDE > 2**31
NUM_ROWS = ROW + 1
ROW_OFFSETS_BYTES = NUM_ROWS * STRIDE * 4
needs_row_offsets_memory = _needs_memory(ROW_OFFSETS_BYTES)


@needs_row_offsets_memory
def test_staged_write_high_row(api):
    """test_staged_write_high_row: an apply-write past the int32 limit lands on its row."""
    content = list(range(9000, 9016))
    staged = api.StagedWriteTensor((NUM_ROWS, 1), torch.int32, torch.device("cpu"))
    staged.gpu = _calloc((NUM_ROWS, STRIDE), torch.int32)  # vLLM's table, zeroed lazily
    staged.stage_write(ROW, 0, content)
    staged.apply_write()
    assert staged.gpu[ROW, : len(content)].tolist() == content
    assert staged.gpu[0, : len(content)].tolist() == [0] * len(content)


@needs_row_offsets_memory
def test_bincount_high_row(api):
    """test_bincount_high_row: penalties' bincount past the int32 limit hits the right row."""
    prompt_len_, prefill_len_, vocab = 1024, 2048, 8192
    tokens = torch.arange(prefill_len_, dtype=torch.int32)
    all_token_ids = _calloc((NUM_ROWS, STRIDE), torch.int32)
    all_token_ids[0, :prefill_len_] = tokens
    all_token_ids[ROW, :prefill_len_] = tokens
    prompt_len = torch.zeros(NUM_ROWS, dtype=torch.int32)
    prefill_len = torch.zeros(NUM_ROWS, dtype=torch.int32)
    prompt_len[[0, ROW]] = prompt_len_
    prefill_len[[0, ROW]] = prefill_len_
    prompt_bin_mask = torch.full((NUM_ROWS, vocab // 32), 7, dtype=torch.int32)
    output_bin_counts = torch.full((NUM_ROWS, vocab), 7, dtype=torch.int32)
    api.bincount(
        torch.tensor([0, ROW], dtype=torch.int64),
        all_token_ids,
        prompt_len,
        prefill_len,
        prompt_bin_mask,
        output_bin_counts,
        max_prefill_len=prefill_len_,
    )
    assert torch.equal(prompt_bin_mask[ROW], prompt_bin_mask[0])
    assert torch.equal(output_bin_counts[ROW], output_bin_counts[0])
    assert prompt_bin_mask[0, : prompt_len_ // 32].any().item()
    assert output_bin_counts[0, prompt_len_:prefill_len_].sum().item() == prefill_len_ - prompt_len_
    # Beyond vLLM's test: the rows exactly, and the rows between untouched.
    assert (prompt_bin_mask[0, : prompt_len_ // 32] == -1).all()
    assert (prompt_bin_mask[0, prompt_len_ // 32 :] == 0).all()
    assert (output_bin_counts[0, :prompt_len_] == 0).all()
    assert (output_bin_counts[0, prefill_len_:] == 0).all()
    assert (output_bin_counts[1:ROW] == 7).all() and (prompt_bin_mask[1:ROW] == 7).all()


@needs_row_offsets_memory
def test_post_update_high_row(api):
    """test_post_update_high_row: post_update stores on the mapped row past the int32 limit."""
    all_token_ids = _calloc((NUM_ROWS, STRIDE), torch.int32)
    num_computed = torch.zeros(NUM_ROWS, dtype=torch.int32)
    last_sampled = torch.full((NUM_ROWS, 1), -1, dtype=torch.int64)
    total_len = torch.zeros(NUM_ROWS, dtype=torch.int32)
    total_len[[0, ROW]] = torch.tensor([50, 100], dtype=torch.int32)
    api.post_update(
        torch.tensor([0, ROW], dtype=torch.int64),
        num_computed,
        last_sampled,
        None,
        torch.tensor([[111], [222]], dtype=torch.int64),
        torch.tensor([1, 1], dtype=torch.int32),
        torch.tensor([0, 0], dtype=torch.int32),
        torch.tensor([0, 1, 2], dtype=torch.int32),
        all_token_ids,
        total_len,
    )
    assert int(all_token_ids[0, 50]) == 111
    assert int(all_token_ids[ROW, 100]) == 222
    assert int(all_token_ids[0].sum()) == 111
    assert int(all_token_ids[ROW].sum()) == 222
    assert int(all_token_ids[1].sum()) == 0
    assert int(last_sampled[0, 0]) == 111 and int(last_sampled[ROW, 0]) == 222
    assert int(total_len[0]) == 51 and int(total_len[ROW]) == 101
    assert int(num_computed[0]) == 1 and int(num_computed[ROW]) == 1
