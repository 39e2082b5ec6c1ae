"""Tensor parallel 2 (two spawned workers, gloo): both workers launch our kernels, and the
engine's random speculative decoding keeps the bigram model's law and theory's acceptance.

vLLM's ``VLLM_CPU_OMP_THREADS_BIND=auto`` wants a NUMA node per worker; ``0|1`` gives each worker
one of this box's cores. Target and draft (the same bigram Llama) are both split over the two
ranks, vocabulary-parallel LM head included.
"""

import _engine as E
import pytest

K = 4
N = 64
V = E.BIGRAM_V
T08 = {"temperature": E.TEMPERATURE}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    model = str(E.write_bigram_llama(tmp_path_factory.mktemp("bigram")))
    spec = {
        "name": "tp2",
        "model": model,
        "draft": model,
        "draft_tp": 2,
        "tp": 2,
        "load_format": "safetensors",
        "method": "draft_model",
        "k": K,
        "env": {
            "FASTDISPATCH_VLLM_PLUGIN": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "0|1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core here; the two workers spawned
        },
        "batches": [
            {
                "name": "greedy",
                "requests": [
                    {"prompt": [3, 4], "params": {"temperature": 0.0, "max_tokens": 24}},
                    {"prompt": [70, 100], "params": {"temperature": 0.0, "max_tokens": 24}},
                ],
            },
            {
                "name": "t08",
                "requests": [
                    {"prompt": [i, (29 * i) % V], "params": dict(T08, max_tokens=N)}
                    for i in range(8)
                ],
            },
        ],
    }
    return E.run(spec, tmp_path_factory.mktemp("tp2"), timeout=300)


def test_both_workers_are_ours(engine):
    for reports in (engine["workers"], engine["workers_after"]):
        assert sorted(r["rank"] for r in reports) == [0, 1]
        assert len({r["pid"] for r in reports}) == 2  # two processes
        assert all(r["side"] == "ours" for r in reports), reports


def test_greedy_walks_the_table(engine):
    b = engine["batches"]["greedy"]
    for toks, start in zip(b["tokens"], (4, 100)):
        assert toks == [(start + 1 + i) % V for i in range(24)]
    assert b["spec"]["accepted"] == b["spec"]["draft_tokens"] > 0


def test_random_law_and_acceptance(engine):
    b = engine["batches"]["t08"]
    seqs = [[(29 * i) % V] + toks for i, toks in enumerate(b["tokens"])]
    probs = E.law(E.TEMPERATURE)
    follow = E.follow_z(seqs, E.follow_probability(probs))
    argmax = E.offset_z(seqs, 1, float(probs[1]))
    acc = E.acceptance_z(b["spec"], float(probs[1]), K)
    print(f"\ntp2 t08: follow {follow} argmax {argmax} acceptance {acc}")
    assert follow["n"] == 8 * N
    assert abs(follow["z"]) < 4 and abs(argmax["z"]) < 4
    assert abs(acc["z"]) < 4 and all(p["p"] > E.P_MIN for p in acc["positions"]), acc
