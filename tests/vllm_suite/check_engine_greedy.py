"""Greedy speculative decoding in a real engine: stock vLLM and the plugin emit the same tokens.

Each comparison is two engines, each in its own process: stock (``FASTDISPATCH_VLLM_PLUGIN=0``,
its workers checked to launch vLLM's own shims) and the plugin (workers checked to launch ours),
serving the same batch. Greedy decoding has one right answer, so the tokens, and vLLM's
acceptance counters, must be equal.

* ``draft_model`` on a tiny Llama with dummy weights (``config.json`` only; vLLM seeds the dummy
  weights, so both engines run the same model): tokens that are not a pattern of ours.
* ``ngram`` on the bigram Llama (``_engine.write_bigram_llama``), whose greedy walk is
  ``t -> t+1``: prompts that repeat a stretch of that walk give the n-gram proposer drafts that
  are accepted, and one junction in each prompt gives it drafts that are rejected. The same
  engines ask for the full next-token log-probabilities, which checks that the bigram model
  really produces the table the other engine tests predict from.
"""

import math

import _engine as E
import pytest

K = 4
V = E.BIGRAM_V


def _tiny_batch():
    import random

    rnd = random.Random(3)
    return [
        {
            "prompt": [rnd.randrange(2, 512) for _ in range(rnd.randrange(3, 12))],
            "params": {"temperature": 0.0, "max_tokens": 40},
        }
        for _ in range(4)
    ]


def _ngram_batch():
    reqs = []
    for s in (0, 40, 90):
        walk = [(s + i) % V for i in range(20)]
        # the walk, then its start again: the proposer finds the continuation in the prompt,
        # until it reaches the prompt's junction (walk[-1] followed by walk[0])
        reqs.append({"prompt": walk + walk[:4], "params": {"temperature": 0.0, "max_tokens": 40}})
    reqs.append({"prompt": [5, 6], "params": {"temperature": 0.0, "max_tokens": 6, "logprobs": V}})
    return reqs


def _spec(name, side, model, method, load_format, batch):
    return {
        "name": f"{name}-{side}",
        "model": model,
        "draft": model if method == "draft_model" else None,
        "load_format": load_format,
        "method": method,
        "k": K,
        "llm": {"max_logprobs": V},
        "env": {
            "FASTDISPATCH_VLLM_PLUGIN": "0" if side == "stock" else "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        },
        "batches": [{"name": "greedy", "requests": batch}],
    }


def _both_sides(tmp_path_factory, name, model, method, load_format, batch):
    """The batch run by stock vLLM and with the plugin, each engine in its own directory."""
    return {
        side: E.run(
            _spec(name, side, model, method, load_format, batch), tmp_path_factory.mktemp(side)
        )
        for side in ("stock", "plugin")
    }, batch


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = str(E.write_tiny_llama(tmp_path_factory.mktemp("tiny")))
    return _both_sides(tmp_path_factory, "tiny", model, "draft_model", "dummy", _tiny_batch())


@pytest.fixture(scope="module")
def ngram(tmp_path_factory):
    model = str(E.write_bigram_llama(tmp_path_factory.mktemp("bigram")))
    return _both_sides(tmp_path_factory, "ngram", model, "ngram", "safetensors", _ngram_batch())


def _check_sides(runs):
    for side, want in (("stock", "stock"), ("plugin", "ours")):
        for report in runs[side]["workers"] + runs[side]["workers_after"]:
            assert report["side"] == want, (side, report)


def test_draft_model_greedy_tokens_identical_to_stock(tiny):
    runs, batch = tiny
    _check_sides(runs)
    stock, ours = runs["stock"]["batches"]["greedy"], runs["plugin"]["batches"]["greedy"]
    assert ours["tokens"] == stock["tokens"]
    assert all(len(t) == 40 for t in ours["tokens"])
    assert len({tok for t in ours["tokens"] for tok in t}) > 8  # not a degenerate output
    assert ours["spec"] == stock["spec"] and ours["spec"]["num_drafts"] > 0
    print(f"\ntiny draft_model greedy: {ours['spec']}")


def test_ngram_greedy_tokens_identical_to_stock(ngram):
    runs, batch = ngram
    _check_sides(runs)
    stock, ours = runs["stock"]["batches"]["greedy"], runs["plugin"]["batches"]["greedy"]
    assert ours["tokens"] == stock["tokens"]
    for r, toks in zip(batch, ours["tokens"]):
        last = r["prompt"][-1]
        assert toks == [(last + 1 + i) % V for i in range(len(toks))]
    spec = ours["spec"]
    assert spec == stock["spec"]
    # drafts were proposed, some accepted (the walk) and some rejected (the junction)
    assert 0 < spec["accepted"] < spec["draft_tokens"], spec
    print(f"\nngram greedy: {spec}")


def test_bigram_model_produces_its_table(ngram):
    """The raw next-token log-probabilities are ``log_softmax(table[previous token])``."""
    import torch

    runs, batch = ngram
    table = E.bigram_table(V)
    r = batch[-1]
    for side in ("stock", "plugin"):
        b = runs[side]["batches"]["greedy"]
        toks = b["tokens"][-1]
        context = r["prompt"] + toks
        steps = b["logprobs"][-1]
        assert len(steps) == len(toks) == 6
        worst = 0.0
        for i, step in enumerate(steps):
            prev = context[len(r["prompt"]) + i - 1]
            want = torch.log_softmax(table[prev], 0)
            assert len(step) == V
            worst = max(worst, max(abs(lp - float(want[int(t)])) for t, lp in step.items()))
        assert worst < 1e-4, (side, worst)
        assert not math.isnan(worst)
