"""The one-pass speculative step against vLLM's own ``RejectionSampler.forward`` on the same inputs.

``install(fused_noise=True)`` replaces ``RejectionSampler.forward`` (vLLM's code recognised by its
fingerprint); ``one_pass=False`` and ``uninstall()`` put vLLM's back. Greedy batches give vLLM's
tokens exactly (every logits dtype, shuffled row indices, top-k/top-p set, mixed batches); random
batches follow the law vLLM's forward follows -- the first emitted token of a request is the
processed target law, a request without drafts draws its bonus from the processed bonus row --
checked by chi-square for both forwards; a seeded request repeats whatever else is in the batch;
and every batch the step cannot serve takes vLLM's forward, with the reason counted.
"""

import numpy as np
import pytest
import torch

ALPHA = 1e-4


@pytest.fixture(scope="module")
def rs():
    import vllm.v1.sample.rejection_sampler as rs

    return rs


@pytest.fixture
def one_pass(worker, rs):
    import fastdispatch.vllm as fv

    stock_forward = vars(rs.RejectionSampler)["forward"]
    fv.install(fused_noise=True)
    assert fv.step_report()["who"] == "ours", fv.step_report()
    yield fv
    fv.install(fused_noise=False)
    assert vars(rs.RejectionSampler)["forward"] is stock_forward


def _vllm_forward(rs):
    """vLLM's own forward, whether or not the one-pass step stands in front of it."""
    from fastdispatch.vllm._spec_step_dropin import replaced

    return replaced(vars(rs.RejectionSampler)["forward"])


def _metadata(B, temperature=None, top_k=None, top_p=None, generators=None, **over):
    """``check_entrypoints._metadata`` for B requests (all greedy without ``temperature``), with
    per-request penalty tensors and token histories, and ``over`` replacing fields."""
    from dataclasses import replace

    from check_entrypoints import _metadata as base

    t = None if temperature is None else torch.as_tensor(temperature, dtype=torch.float32)
    all_greedy = t is None or bool((t == 0).all())
    md = base(
        None if all_greedy else t,
        all_greedy,
        t is not None and bool((t > 0).all()),
        top_k=None if top_k is None else torch.as_tensor(top_k, dtype=torch.int32),
        top_p=None if top_p is None else torch.as_tensor(top_p, dtype=torch.float32),
        generators=generators,
    )
    per_request = dict(
        frequency_penalties=torch.zeros(B),
        presence_penalties=torch.zeros(B),
        repetition_penalties=torch.ones(B),
        output_token_ids=[[] for _ in range(B)],
    )
    return replace(md, **{**per_request, **over})


def _step(drafts, V, *, dtype=torch.float32, shuffle=False, seed=0, scale=3.0, hit=0.5):
    """Spec-decode metadata and logits laid out as the model runner hands them."""
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    g = torch.Generator().manual_seed(seed)
    B = len(drafts)
    rows = sum(map(len, drafts)) + B
    logits = (torch.randn(rows, V, generator=g) * scale).to(dtype)
    order = torch.randperm(rows, generator=g) if shuffle else torch.arange(rows)
    target, bonus, at = [], [], 0
    for d in drafts:
        target += order[at : at + len(d)].tolist()
        bonus.append(int(order[at + len(d)]))
        at += len(d) + 1
    flat = [t for d in drafts for t in d]
    top = logits[torch.tensor(target, dtype=torch.long)].float().argmax(-1) if target else None
    take = torch.rand(len(flat), generator=g) < hit
    flat = [int(top[i]) if take[i] else t for i, t in enumerate(flat)]
    it = iter(flat)
    md = SpecDecodeMetadata.make_dummy([[next(it) for _ in d] for d in drafts], torch.device("cpu"))
    md.target_logits_indices = torch.tensor(target, dtype=torch.int32)
    md.bonus_logits_indices = torch.tensor(bonus, dtype=torch.int32)
    return md, logits


def _sampler(rs):
    from vllm.v1.sample.sampler import Sampler

    return rs.RejectionSampler(Sampler())


# -- installation --------------------------------------------------------------------------------


def test_install_recognises_and_uninstall_restores(worker, rs):
    import fastdispatch.vllm as fv

    stock = vars(rs.RejectionSampler)["forward"]
    fv.install(fused_noise=True)
    ours = vars(rs.RejectionSampler)["forward"]
    assert ours is not stock and ours.__wrapped__ is stock
    assert fv.step_report() == {
        "who": "ours",
        "reason": None,
        "fallbacks": fv.step_report()["fallbacks"],
    }
    fv.install(fused_noise=True)  # idempotent
    assert vars(rs.RejectionSampler)["forward"] is ours
    fv.install(fused_noise=True, one_pass=False)
    assert vars(rs.RejectionSampler)["forward"] is stock
    assert fv.step_report()["who"] == "vllm"
    fv.install(fused_noise=True)
    fv.uninstall()
    assert vars(rs.RejectionSampler)["forward"] is stock
    fv.install()
    assert vars(rs.RejectionSampler)["forward"] is stock


def test_forward_we_do_not_recognise_is_left_to_vllm(worker, rs, monkeypatch):
    import fastdispatch.vllm as fv

    stock = vars(rs.RejectionSampler)["forward"]

    def forward(self, metadata, draft_probs, logits, sampling_metadata):  # someone else's
        return stock(self, metadata, draft_probs, logits, sampling_metadata)

    fv.install(fused_noise=False)
    monkeypatch.setattr(rs.RejectionSampler, "forward", forward)
    fv.install(fused_noise=True)
    try:
        report = fv.step_report()
        assert report["who"] == "vllm" and "fingerprint" in report["reason"], report
        assert vars(rs.RejectionSampler)["forward"] is forward
    finally:
        fv.install(fused_noise=False)


# -- greedy: vLLM's tokens exactly ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shuffle", [False, True])
def test_greedy_tokens_are_vllms(one_pass, rs, dtype, shuffle):
    drafts = [[5, 6, 7, 8], [], [1, 2], [9, 9, 9, 9], [3]]
    for seed in range(5):
        md, logits = _step(drafts, 777, dtype=dtype, shuffle=shuffle, seed=seed, hit=0.7)
        sm = _metadata(len(drafts), top_k=[20] * 5, top_p=[0.9] * 5)
        s = _sampler(rs)
        want = _vllm_forward(rs)(s, md, None, logits.clone(), sm).sampled_token_ids
        before = logits.clone()
        got = s(md, None, logits, sm).sampled_token_ids
        assert torch.equal(got, want), (got, want)
        assert got.dtype == want.dtype == torch.int32
        assert torch.equal(logits, before)


def test_mixed_batch_greedy_requests_are_vllms(one_pass, rs):
    drafts = [[1, 2, 3, 4]] * 6
    temps = [0.0, 0.8, 0.0, 1.0, 0.0, 0.5]
    for seed in range(6):
        md, logits = _step(drafts, 500, seed=seed, hit=0.8)
        sm = _metadata(6, temperature=temps, top_k=[500, 10, 500, 10, 500, 10])
        s = _sampler(rs)
        want = _vllm_forward(rs)(s, md, None, logits.clone(), sm).sampled_token_ids
        got = s(md, None, logits, sm).sampled_token_ids
        for r in (0, 2, 4):
            assert torch.equal(got[r], want[r])
        for r in (1, 3, 5):  # random: accepted drafts, one token in range, then -1
            row, d = got[r].tolist(), md.draft_token_ids[r * 4 : r * 4 + 4].tolist()
            n = next((j for j in range(4) if row[j] != d[j]), 4)
            assert 0 <= row[n] < 500 and all(t == -1 for t in row[n + 1 :]), (row, d)


# -- random: the law -----------------------------------------------------------------------------


def _law(row, temperature, k, p):
    from tests._fused_helpers import masked_law

    return masked_law(row, temperature, k, p).numpy()


def _chi2(counts, probs):
    from tests._fused_helpers import chi2_pvalue

    return chi2_pvalue(counts, probs)


@pytest.mark.parametrize("k,p", [(None, None), (5, None), (None, 0.8), (8, 0.9)])
def test_random_first_token_and_bonus_follow_the_law(one_pass, rs, k, p):
    V, N = 30, 3000
    md, logits = _step([[4, 5], []], V, seed=1, scale=1.0, hit=1.0)
    sm = _metadata(
        2,
        temperature=[0.7, 0.7],
        top_k=None if k is None else [k] * 2,
        top_p=None if p is None else [p] * 2,
    )
    s = _sampler(rs)
    want0 = _law(logits[int(md.target_logits_indices[0])], 0.7, k, p)
    want1 = _law(logits[int(md.bonus_logits_indices[1])], 0.7, k, p)
    for forward in (s.forward, lambda *a: _vllm_forward(rs)(s, *a)):
        c0, c1 = np.zeros(V), np.zeros(V)
        for _ in range(N):
            out = forward(md, None, logits, sm).sampled_token_ids
            c0[int(out[0, 0])] += 1
            c1[int(out[1, 0])] += 1
        assert _chi2(c0, want0) > ALPHA and _chi2(c1, want1) > ALPHA


def test_seeded_request_repeats_in_another_batch(one_pass, rs):
    V = 200
    md_a, logits_a = _step([[1, 2, 3], [4, 5, 6]], V, seed=3, hit=0.6)
    s = _sampler(rs)

    def run(md, logits, B, at):
        gen = torch.Generator().manual_seed(1234)
        sm = _metadata(B, temperature=[0.8] * B, top_p=[0.9] * B, generators={at: gen})
        return s(md, None, logits, sm).sampled_token_ids[at]

    first = run(md_a, logits_a, 2, 0)
    # the same request (same rows) at another batch index, among other requests
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    md_b = SpecDecodeMetadata.make_dummy(
        [[7, 7], md_a.draft_token_ids[:3].tolist(), [8]], torch.device("cpu")
    )
    extra = torch.randn(5, V)
    logits_b = torch.cat([extra[:3], logits_a[:4], extra[3:]])
    md_b.target_logits_indices = torch.tensor([0, 1, 3, 4, 5, 7], dtype=torch.int32)
    md_b.bonus_logits_indices = torch.tensor([2, 6, 8], dtype=torch.int32)
    assert torch.equal(run(md_b, logits_b, 3, 1)[:4], first)


# -- what falls back ---------------------------------------------------------------------------


def _cases(rs):
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor

    class Custom:
        def apply(self, logits):
            return logits

    min_p = object.__new__(MinPLogitsProcessor)
    vars(min_p)["min_p_count"] = 1
    B = 2
    return {
        "logprobs requested": dict(max_num_logprobs=1),
        "penalties": dict(
            no_penalties=False,
            prompt_token_ids=torch.zeros(B, 1, dtype=torch.int64),
            repetition_penalties=torch.full((B,), 1.2),
            output_token_ids=[[3], [4]],
            spec_token_ids=[[1, 2], [3]],
        ),
        "bad words": dict(bad_words_token_ids={0: [[5]]}, spec_token_ids=[[1, 2], [3]]),
        "allowed-token mask": dict(allowed_token_ids_mask=torch.zeros(B, 50, dtype=torch.bool)),
        "logits processor MinPLogitsProcessor": dict(logitsprocs=_procs(LogitsProcessors, min_p)),
        "logits processor Custom": dict(logitsprocs=_procs(LogitsProcessors, Custom())),
    }


def _procs(cls, proc):
    procs = cls()
    procs.argmax_invariant.append(proc)
    return procs


def _falls_back_to_vllms_forward(rs, d, why, md, logits, sm):
    """The sampler's step on this batch is vLLM's forward, counted once under ``why`` in the
    drop-in's fallbacks (``d``), with vLLM's tokens; returns its output."""
    s = _sampler(rs)
    before = d.fallbacks().get(why, 0)
    got = s(md, None, logits.clone(), sm)
    assert d.fallbacks().get(why, 0) == before + 1
    want = _vllm_forward(rs)(s, md, None, logits.clone(), sm)
    assert torch.equal(got.sampled_token_ids, want.sampled_token_ids)
    return got


@pytest.mark.parametrize(
    "why",
    [
        "logprobs requested",
        "penalties",
        "bad words",
        "allowed-token mask",
        "logits processor MinPLogitsProcessor",
        "logits processor Custom",
    ],
)
def test_batches_that_need_vllm_take_its_forward(one_pass, rs, why):
    from fastdispatch.vllm import _spec_step_dropin as d

    md, logits = _step([[1, 2], [3]], 50, seed=4, hit=1.0)
    sm = _metadata(2, **_cases(rs)[why])
    got = _falls_back_to_vllms_forward(rs, d, why, md, logits, sm)
    if why == "logprobs requested":
        assert got.logprobs_tensors is not None


def test_idle_builtin_processors_and_mock_samplers(one_pass, rs):
    from unittest.mock import Mock

    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor
    from vllm.v1.sample.sampler import Sampler, SamplerOutput

    from fastdispatch.vllm import _spec_step_dropin as d

    idle = object.__new__(MinPLogitsProcessor)
    vars(idle)["min_p_count"] = 0
    md, logits = _step([[1, 2], [3]], 50, seed=5, hit=1.0)
    sm = _metadata(2, logitsprocs=_procs(LogitsProcessors, idle))
    before = dict(d.fallbacks())
    _sampler(rs)(md, None, logits, sm)
    assert d.fallbacks() == before  # an idle builtin processor changes nothing: ours ran
    # vLLM's own tests mock the bonus sampler: its output must be what the step returns
    mock = Mock(spec=Sampler)
    mock.logprobs_mode = "raw_logprobs"
    s = rs.RejectionSampler(mock)
    mock.return_value = SamplerOutput(
        sampled_token_ids=torch.tensor([[11], [12]]), logprobs_tensors=None
    )
    out = s(md, None, logits, _metadata(2)).sampled_token_ids
    assert (
        d.fallbacks().get("the bonus sampler is not vLLM's Sampler", 0)
        == before.get("the bonus sampler is not vLLM's Sampler", 0) + 1
    )
    assert out[0, 2] == 11 or out[0, 2] == -1


@pytest.mark.parametrize("case", ["float64 logits", "top-k with a stride"])
def test_tensors_the_kernel_does_not_take_take_vllms_forward(one_pass, rs, case):
    """Logits, top-k or top-p in a layout the kernel refuses: vLLM's forward, not an error."""
    from fastdispatch.vllm import _spec_step_dropin as d

    why = "logits, top-k or top-p not in a layout the kernel takes"
    md, logits = _step([[1, 2], [3]], 50, seed=6, hit=1.0)
    over = {}
    if case == "float64 logits":
        logits = logits.double()
    else:
        over["top_k"] = torch.full((4,), 50, dtype=torch.int32)[::2]
    sm = _metadata(2, **over)
    _falls_back_to_vllms_forward(rs, d, why, md, logits, sm)
