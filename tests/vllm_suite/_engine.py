"""A real vLLM engine (``vllm.LLM`` on CPU, speculative decoding) for the engine tests.

Why a module of its own: each engine must run in its own process (an engine holds a spawned
engine-core process, threads and a KV cache; a hang must not take the suite down), so the tests
describe an engine run as a JSON spec and this module, run as ``python -m _engine SPEC OUT``,
builds the engine, checks its workers, serves the batches and writes what it saw as JSON. The
functions handed to ``llm.collective_rpc`` live here too, because a worker can only run a
function it can import: the engine's processes inherit ``PYTHONPATH`` with this directory on it.

It also writes the models the tests run, so nothing is downloaded:

* :func:`write_tiny_llama`: a ``config.json`` only, for ``load_format="dummy"`` (vLLM fills the
  weights with a fixed seed, so two engines get the same model);
* :func:`write_bigram_llama`: a Llama whose weights make its next-token law a known table. The
  embedding is one-hot (hidden size = vocabulary), every layer's output projections are zero, so
  the residual stream reaching the final RMSNorm is the current token's one-hot vector; the norm
  scales it to ``sqrt(H)``, and the LM head holds ``table.T / sqrt(H)``: the logits after token
  ``t`` are ``table[t]``, whatever came before. The table is circulant (row ``t`` is ``base``
  rolled by ``t``), so every statistic of the law is the same after every token, which is what
  lets the tests predict acceptance counts from one number per sampling setting.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

#: Sampling settings the tests use; laws are computed from these in :func:`law`.
TEMPERATURE = 0.8
TOP_K = 50
TOP_P = 0.9
#: The bigram model's vocabulary (= hidden size) and how many successors count as "the table".
BIGRAM_V = 128
FOLLOW = 3  # tokens t+1, t+2, t+3 are "what the table says follows t"


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


def _llama_config(vocab, hidden, layers, heads, kv_heads, intermediate, **extra):
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "hidden_act": "silu",
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "float32",
    }
    cfg.update(extra)
    return cfg


def write_tiny_llama(path, vocab=512, hidden=64, layers=2):
    """A tiny Llama as ``config.json`` alone: the engine loads it with ``load_format="dummy"``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    # head size 32: vLLM's CPU attention supports 32, 64, 80, 96, 112, 128, ... but not 16
    cfg = _llama_config(
        vocab, hidden, layers, heads=hidden // 32, kv_heads=1, intermediate=2 * hidden
    )
    (path / "config.json").write_text(json.dumps(cfg, indent=1))
    return path


def bigram_base(V=BIGRAM_V):
    """The logits after token 0 (``table[t] = roll(base, t)``), float64.

    Offset 1 is the argmax (greedy decoding walks t -> t+1), offsets 1..3 are "the table", the
    rest are distinct and decreasing, so no top-k/top-p boundary falls on a tie; the top-p
    nucleus boundary sits > 2e-3 away from 0.1 in cumulative probability (checked by
    :func:`law`), far above float32 rounding.
    """
    import torch

    b = torch.empty(V, dtype=torch.float64)
    b[1], b[2], b[3] = 4.0, 3.4, 3.0
    rest = [0] + list(range(4, V))
    for o, v in zip(rest, torch.linspace(2.2, -1.0, len(rest), dtype=torch.float64)):
        b[o] = v
    return b


def bigram_table(V=BIGRAM_V):
    import torch

    base = bigram_base(V)
    return torch.stack([torch.roll(base, t) for t in range(V)])


def write_bigram_llama(path, V=BIGRAM_V):
    """Config and safetensors of the Llama whose next-token logits after ``t`` are ``table[t]``."""
    import torch
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    H, heads, kv_heads, inter, layers = V, 4, 2, 64, 1
    head_dim = H // heads
    # eps 1e-10: the norm maps the one-hot to sqrt(H) exactly to float32 precision (Llama's
    # usual 1e-6 would scale every logit by 1 - 6e-5)
    cfg = _llama_config(V, H, layers, heads, kv_heads, inter, rms_norm_eps=1e-10)
    (path / "config.json").write_text(json.dumps(cfg, indent=1))
    f32 = torch.float32
    w = {
        "model.embed_tokens.weight": torch.eye(V, H, dtype=f32),
        "model.norm.weight": torch.ones(H, dtype=f32),
        # logits = lm_head @ (sqrt(H) * onehot(t)) = table[t]
        "lm_head.weight": (bigram_table(V).T / math.sqrt(H)).to(f32).contiguous(),
    }
    g = torch.Generator().manual_seed(0)
    for i in range(layers):
        p = f"model.layers.{i}."
        # q/k/v and gate/up get small random weights (the layer computes something), but the
        # projections back into the residual stream are zero: the layer adds nothing.
        w[p + "self_attn.q_proj.weight"] = torch.randn(heads * head_dim, H, generator=g) * 0.1
        w[p + "self_attn.k_proj.weight"] = torch.randn(kv_heads * head_dim, H, generator=g) * 0.1
        w[p + "self_attn.v_proj.weight"] = torch.randn(kv_heads * head_dim, H, generator=g) * 0.1
        w[p + "self_attn.o_proj.weight"] = torch.zeros(H, heads * head_dim)
        w[p + "mlp.gate_proj.weight"] = torch.randn(inter, H, generator=g) * 0.1
        w[p + "mlp.up_proj.weight"] = torch.randn(inter, H, generator=g) * 0.1
        w[p + "mlp.down_proj.weight"] = torch.zeros(H, inter)
        w[p + "input_layernorm.weight"] = torch.ones(H)
        w[p + "post_attention_layernorm.weight"] = torch.ones(H)
    save_file({k: v.to(f32).contiguous() for k, v in w.items()}, str(path / "model.safetensors"))
    return path


def law(temperature=TEMPERATURE, top_k=None, top_p=None, V=BIGRAM_V):
    """The bigram model's next-token distribution after token 0 under these settings (float64).

    Temperature first, then top-k (tokens below the k-th largest logit dropped), then top-p
    (ascending sort, tokens whose cumulative probability is <= 1 - p dropped, the largest always
    kept) -- vLLM's definition. Raises when the top-p cut falls within 1e-3 of a boundary, where
    float32 rounding could move a token across it.
    """
    import torch

    logits = bigram_base(V) / temperature
    if top_k is not None:
        kth = torch.sort(logits, descending=True).values[top_k - 1]
        logits = torch.where(logits < kth, torch.tensor(-math.inf, dtype=logits.dtype), logits)
    if top_p is not None:
        srt, idx = torch.sort(logits)
        cum = srt.softmax(0).cumsum(0)
        drop = cum <= 1 - top_p
        drop[-1] = False
        near = (cum - (1 - top_p)).abs().min().item()
        if near < 1e-3:
            raise ValueError(f"top-p boundary within {near:.2e} of a token: ill-defined in float32")
        logits = logits.clone()
        logits[idx[drop]] = -math.inf
    return logits.softmax(0)


def follow_probability(probs):
    """P(next token is one of t+1..t+FOLLOW): the same after every t (circulant table)."""
    return float(probs[1 : 1 + FOLLOW].sum())


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def follows(prev, nxt, V=BIGRAM_V):
    return 1 <= (nxt - prev) % V <= FOLLOW


def follow_z(sequences, p, V=BIGRAM_V):
    """Binomial z of "the next token follows the table" over every transition in ``sequences``
    (each a prompt's last token followed by the generated ids): ``(hits - n p) / sqrt(n p (1-p))``.
    """
    n = hits = 0
    for seq in sequences:
        for a, b in zip(seq, seq[1:]):
            n += 1
            hits += follows(a, b, V)
    z = (hits - n * p) / math.sqrt(n * p * (1 - p))
    return {"n": n, "hits": hits, "rate": hits / n, "expected": p, "z": z}


def offset_z(sequences, offset, p, V=BIGRAM_V):
    """Binomial z of "the next token is the previous one plus ``offset``" (e.g. 1: the argmax)."""
    n = hits = 0
    for seq in sequences:
        for a, b in zip(seq, seq[1:]):
            n += 1
            hits += (b - a) % V == offset
    z = (hits - n * p) / math.sqrt(n * p * (1 - p))
    return {"n": n, "hits": hits, "rate": hits / n, "expected": p, "z": z}


#: The two-sided tail of a standard normal beyond 4: what |z| < 4 means as a p-value.
P_MIN = math.erfc(4 / math.sqrt(2))


def binomial_two_sided(k, n, p):
    """Exact two-sided binomial p-value of ``k`` successes in ``n`` (twice the smaller tail).

    Deep draft positions expect a handful of acceptances (``rounds * c**4`` can be below 1),
    where the normal approximation behind a z-score would raise false alarms; the exact tail
    keeps "p > P_MIN" the same promise as |z| < 4 everywhere.
    """
    if p <= 0.0 or p >= 1.0:
        return 1.0 if k == round(n * p) else 0.0

    def pmf(i):
        return math.exp(
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
        )

    low = sum(pmf(i) for i in range(0, k + 1))
    high = sum(pmf(i) for i in range(k, n + 1))
    return min(1.0, 2 * min(low, high))


def acceptance_z(spec, c, k):
    """Per draft position j (1-based) of ``k``: accepted count against ``rounds * c**j``.

    With a draft proposal accepted with probability ``c`` independently of everything else (the
    circulant table makes ``c`` the same after every token), a round accepts its first ``j``
    drafts with probability ``c**j``; vLLM counts, per position, the rounds that accepted it.
    The number of rounds is a stopping time of the accept draws, so (Wald) ``count - rounds c^j``
    has mean 0 and the binomial variance; ``z`` per position and for the total
    ``sum_j count_j`` (variance of the truncated geometric, summed over rounds).
    """
    rounds = spec["num_drafts"]
    per_pos = spec["accepted_per_pos"]
    out = {"rounds": rounds, "c": c, "positions": []}
    for j in range(1, k + 1):
        pj = c**j
        got = per_pos[j - 1]
        sd = math.sqrt(rounds * pj * (1 - pj)) if 0 < pj < 1 else 0.0
        z = (got - rounds * pj) / sd if sd > 0 else (0.0 if got == rounds * pj else math.inf)
        out["positions"].append(
            {
                "j": j,
                "accepted": got,
                "expected": rounds * pj,
                "z": z,
                "p": binomial_two_sided(got, rounds, pj),
            }
        )
    # N = accepted drafts of one round: P(N >= j) = c^j, j = 1..k
    mean = sum(c**j for j in range(1, k + 1))
    second = sum((2 * j - 1) * c**j for j in range(1, k + 1))  # E[N^2] = sum (2j-1) P(N>=j)
    var = second - mean**2
    total = spec["accepted"]
    sd = math.sqrt(rounds * var) if var > 0 else 0.0
    z = (total - rounds * mean) / sd if sd > 0 else (0.0 if total == rounds * mean else math.inf)
    out.update(accepted=total, expected=rounds * mean, z=z, rate=total / max(1, rounds * k))
    return out


# --------------------------------------------------------------------------------------------
# Inside the workers (collective_rpc)
# --------------------------------------------------------------------------------------------


FUSED_ATTRS = ("rejection_sample", "sample_recovered_tokens")


#: fastdispatch states a worker can be switched to between batches: install() keywords
STATES = {
    "plugin": {"fused_noise": False},
    "fused": {"fused_noise": True, "one_pass": False},  # fused noise inside vLLM's forward
    "onepass": {"fused_noise": True, "one_pass": True},  # RejectionSampler.forward replaced
}


def set_state(worker, state):
    """Switch this worker's installed fastdispatch to ``state`` (``STATES``); report the result."""
    import fastdispatch.vllm as fv

    if not fv.installed():
        raise AssertionError("set_state: fastdispatch is not installed in this worker")
    fv.install(**STATES[state])
    return worker_report(worker)


def worker_report(worker=None):
    """Which kernels this worker launches. Raises inside the worker when the answer is mixed.

    "ours": the plugin is installed, every one of the 12 kernels is held as a fastdispatch
    override of its kernels_cpu function at every holder (``classify_holders``), and
    ``fastdispatch.verify()`` finds no holder left on an original. "stock": fastdispatch is not
    installed and every holder launches vLLM's own shim (the Triton kernel itself for the ones
    vLLM has no CPU implementation of, ``fastdispatch.vllm.NO_STOCK_CPU``). Anything else is an
    error here, so an engine can never pass for the side it is not on.
    """
    import os

    import torch
    import vllm.v1.sample.rejection_sampler as rs
    from _vllm_helpers import classify_holders

    import fastdispatch
    import fastdispatch.vllm as fv

    holders = classify_holders()
    if not fv.installed():
        # a kernel vLLM has no CPU implementation of stays the Triton kernel itself in a stock
        # worker (its module possibly not even imported): anything else there is wrong
        for name in fv.NO_STOCK_CPU:
            hs = holders.pop(name, [])
            if any(kind != "original" for _, kind in hs):
                raise AssertionError(f"stock worker: {name} held as {hs}")
    kinds = sorted({kind for hs in holders.values() for _, kind in hs})
    missing = sorted(name for name, hs in holders.items() if not hs)
    fused = {}
    for attr in FUSED_ATTRS:
        # the fused path replaces these two functions: registered with fastdispatch, standing
        # at the module attribute vLLM's sampler calls, implemented by fastdispatch code
        name = f"{rs.__name__}.{attr}"
        entry = fastdispatch._registry.get(name)
        fused[name] = bool(
            fv.installed()
            and entry is not None
            and getattr(rs, attr) is entry.override
            and getattr(entry.impl, "__module__", "").startswith("fastdispatch")
        )
    side = None
    if fv.installed() and kinds == ["ours"] and not any(fastdispatch.verify().values()):
        side = "ours"
    elif not fv.installed() and kinds == ["stock"]:
        side = "stock"
    report = {
        "pid": os.getpid(),
        "rank": getattr(worker, "rank", None),
        "side": side,
        "kinds": kinds,
        "missing": missing,
        "fused": fused,
        "fused_on": bool(fused) and all(fused.values()),
        # the one-pass step stands in RejectionSampler.forward; the batches that took vLLM's
        # forward all the same, by reason
        "one_pass_on": fv.installed() and fv.step_report().get("who") == "ours",
        "step_fallbacks": fv.step_report().get("fallbacks", {}) if fv.installed() else {},
        "backend": fastdispatch.BACKEND,
        "torch_threads": torch.get_num_threads(),
    }
    if side is None or missing:
        raise AssertionError(f"worker kernels are neither all ours nor all stock: {report}")
    return report


def mrv2_worker_report(worker=None):
    """Which runner this worker runs and who launches Model Runner V2's kernels. Raises inside
    the worker unless it runs Model Runner V2 with every kernel it can launch held as a
    fastdispatch override of its ``kernels_cpu`` implementation wherever vLLM holds it.

    With fastdispatch not installed (a stock worker) the runner is reported as it is and
    nothing is checked: without Triton vLLM does not build Model Runner V2 at all.
    """
    import os

    import torch

    import fastdispatch
    import fastdispatch.vllm as fv
    from fastdispatch.vllm import _installation

    runner = getattr(worker, "model_runner", None)
    cls = type(runner)
    report = {
        "pid": os.getpid(),
        "rank": getattr(worker, "rank", None),
        "runner": f"{cls.__module__}.{cls.__qualname__}",
        "v2": any(
            c.__module__.startswith("vllm.v1.worker.gpu.") and c.__name__ == "GPUModelRunner"
            for c in cls.__mro__
        ),
        "installed": fv.installed(),
        "torch_threads": torch.get_num_threads(),
        "backend": fastdispatch.BACKEND,
    }
    state = _installation._state
    if state is None:
        return report
    not_standing = sorted(n for n, impl in state.mrv2.items() if not state.standing(n, impl))
    left_on_original = sorted(n for n, holders in fastdispatch.verify().items() if holders)
    from fastdispatch.vllm._mrv2_drafter import draft_report
    from fastdispatch.vllm._mrv2_verify import verify_report

    report.update(
        ours=len(state.mrv2),
        missing=sorted(state.mrv2_missing),
        mrv2_left=state.mrv2_left,
        verify=verify_report(state),
        draft=draft_report(state),
        not_standing=not_standing,
        left_on_original=left_on_original,
    )
    if not report["v2"] or not state.mrv2 or not_standing or left_on_original:
        raise AssertionError(f"worker is not Model Runner V2 on our kernels: {report}")
    return report


_WITNESS = {"installed": False, "compared": 0, "mismatches": []}


def install_verify_witness(worker=None):
    """Witness, in this worker, each speculative verification the one pass runs
    (``fastdispatch.vllm._mrv2_verify``): vLLM's own ``RejectionSampler._verify`` (our kernels
    launched one by one) runs on the same inputs after it, and any request whose tokens differ
    is recorded. The engine serves the one pass's tokens."""
    import vllm.v1.worker.gpu.spec_decode.rejection_sampler as rs

    from fastdispatch.vllm import _mrv2_verify as mv

    cls = rs.RejectionSampler
    ours = vars(cls)["_verify"]
    if not getattr(ours, "_fastdispatch_one_pass", False):
        return dict(_WITNESS)
    stock = ours.__wrapped__

    def witnessed(self, *args):
        before = mv.taken()
        got = ours(self, *args)
        if mv.taken() == before:
            return got  # this batch took vLLM's _verify itself
        want = stock(self, *args)
        _WITNESS["compared"] += 1
        ns_got, ns_want = got[2].tolist(), want[2].tolist()
        for r, n in enumerate(ns_want):
            if ns_got[r] != n or got[1][r, :n].tolist() != want[1][r, :n].tolist():
                _WITNESS["mismatches"].append(
                    dict(request=r, one_pass=got[1][r, : ns_got[r]].tolist(),
                         vllm=want[1][r, :n].tolist())
                )  # fmt: skip
        return got

    vars(witnessed).update(__wrapped__=stock, _fastdispatch_one_pass=True)
    cls._verify = witnessed
    _WITNESS["installed"] = True
    return dict(_WITNESS)


def verify_witness_report(worker=None):
    """What :func:`install_verify_witness` saw, with the one pass's own counters."""
    from fastdispatch.vllm import _mrv2_verify as mv

    return dict(_WITNESS, one_pass=mv.taken(), fallbacks=mv.fallbacks())


# --------------------------------------------------------------------------------------------
# One engine run (this module as a script)
# --------------------------------------------------------------------------------------------

SPEC_METRICS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}


def _spec_counters(llm):
    got = {"num_drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
    for m in llm.get_metrics():
        if m.name in SPEC_METRICS:
            got[SPEC_METRICS[m.name]] += int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            vals = [int(v) for v in m.values]
            old = got["accepted_per_pos"]
            got["accepted_per_pos"] = [
                a + b for a, b in zip(vals, old + [0] * (len(vals) - len(old)))
            ]
    return got


def _diff(after, before):
    out = {k: after[k] - before[k] for k in ("num_drafts", "draft_tokens", "accepted")}
    b = before["accepted_per_pos"] + [0] * len(after["accepted_per_pos"])
    out["accepted_per_pos"] = [a - b[i] for i, a in enumerate(after["accepted_per_pos"])]
    return out


def _histogram(out):
    """vLLM's per-request acceptance record (``per_request_spec_decode_metrics="summary"``):
    rounds counted by how many drafts they accepted, and the drafts proposed."""
    m = out.outputs[0].spec_decode_metrics
    if m is None:
        return None
    return {"hist": [int(n) for n in m.histogram], "draft_tokens": int(m.num_draft_tokens)}


def from_histograms(records):
    """The engine counters (:func:`_spec_counters`' keys) summed over per-request records."""
    rs = [r for r in records if r]
    k = max((len(r["hist"]) for r in rs), default=1) - 1
    total = [sum(r["hist"][n] for r in rs if n < len(r["hist"])) for n in range(k + 1)]
    return {
        "num_drafts": sum(total),
        "draft_tokens": sum(r["draft_tokens"] for r in rs),
        "accepted": sum(n * c for n, c in enumerate(total)),
        "accepted_per_pos": [sum(total[j:]) for j in range(1, k + 1)],
    }


def _serve_batches(llm, batch_specs):
    batches = {}
    for batch in batch_specs:
        before = _spec_counters(llm)
        prompts = [{"prompt_token_ids": r["prompt"]} for r in batch["requests"]]
        params = [_params(r["params"]) for r in batch["requests"]]
        t1 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        entry = {
            "s": time.perf_counter() - t1,
            "tokens": [list(o.outputs[0].token_ids) for o in outs],
            "spec": _diff(_spec_counters(llm), before),
            "histograms": [_histogram(o) for o in outs],
        }
        if any("logprobs" in r["params"] for r in batch["requests"]):
            entry["logprobs"] = [
                None
                if o.outputs[0].logprobs is None
                else [
                    {int(t): float(lp.logprob) for t, lp in step.items()}
                    for step in o.outputs[0].logprobs
                ]
                for o in outs
            ]
        batches[batch["name"]] = entry
    return {"batches": batches}


def _params(p):
    from vllm import SamplingParams

    p = dict(p)
    if "logit_bias" in p:  # JSON made its token ids strings
        p["logit_bias"] = {int(t): b for t, b in p["logit_bias"].items()}
    p.setdefault("ignore_eos", True)
    p.setdefault("detokenize", False)
    return SamplingParams(**p)


def serve(spec):
    """Build the engine ``spec`` describes, check its workers, serve its batches."""
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    for k, v in spec.get("env", {}).items():
        os.environ[k] = v
    from vllm import LLM

    t0 = time.perf_counter()
    sc = None  # "method": None is plain decoding
    if spec["method"] is not None:
        sc = {"method": spec["method"], "num_speculative_tokens": spec["k"]}
        if spec["method"] == "ngram":
            sc.update(prompt_lookup_min=2, prompt_lookup_max=4)
        else:
            sc["model"] = spec["draft"]
            if spec.get("draft_tp"):
                sc["draft_tensor_parallel_size"] = spec["draft_tp"]
        sc.update(spec.get("speculative", {}))
    kwargs = dict(
        model=spec["model"],
        load_format=spec.get("load_format", "dummy"),
        skip_tokenizer_init=True,
        dtype="float32",
        gpu_memory_utilization=0.2,
        enforce_eager=True,
        max_model_len=512,
        speculative_config=sc,
        disable_log_stats=False,
        seed=spec.get("seed", 0),
    )
    if sc is not None:
        kwargs["per_request_spec_decode_metrics"] = "summary"
    if spec.get("tp", 1) > 1:
        # one worker process per rank (gloo between them)
        kwargs.update(tensor_parallel_size=spec["tp"], distributed_executor_backend="mp")
    elif os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") != "1":
        # engine core and worker in this process: two fewer interpreters importing vLLM
        kwargs.update(distributed_executor_backend="uni")
    kwargs.update(spec.get("llm", {}))
    llm = LLM(**kwargs)
    # the V1 runner's kernels, or Model Runner V2's ("report": "mrv2")
    report = mrv2_worker_report if spec.get("report") == "mrv2" else worker_report
    result = {"start_s": time.perf_counter() - t0, "workers": llm.collective_rpc(report)}
    if spec.get("witness_verify"):
        result["witness_installed"] = llm.collective_rpc(install_verify_witness)
    result.update(_serve_batches(llm, spec["batches"]))
    if spec.get("witness_verify"):
        result["witness"] = llm.collective_rpc(verify_witness_report)
    # after serving: still the same side (nothing re-registered vLLM's shims mid-run)
    result["workers_after"] = llm.collective_rpc(report)
    # "then": the same batches again after switching every worker to another fastdispatch
    # state (a name of STATES), one engine start serving them all
    result["then"] = {}
    for state in spec.get("then", ()):
        phase = {"workers": llm.collective_rpc(set_state, args=(state,))}
        phase.update(_serve_batches(llm, spec["batches"]))
        phase["workers_after"] = llm.collective_rpc(worker_report)
        result["then"][state] = phase
    result["total_s"] = time.perf_counter() - t0
    try:
        llm.llm_engine.engine_core.shutdown()  # stop engine-core and worker processes, if any
    except Exception as exc:  # noqa: BLE001 - the results are in; say so and move on
        print(f"engine shutdown: {type(exc).__name__}: {exc}", file=sys.stderr)
    return result


def run(spec, tmp_path, timeout=240):
    """Run one engine in a fresh process; return its JSON result (fail with its output)."""
    tmp_path = Path(tmp_path)
    spec_file = tmp_path / f"{spec['name']}.spec.json"
    out_file = tmp_path / f"{spec['name']}.out.json"
    spec_file.write_text(json.dumps(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(HERE.parent)] + [p for p in [env.get("PYTHONPATH")] if p]
    )
    env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env.pop("FASTDISPATCH_VLLM_PLUGIN", None)
    env.pop("FASTDISPATCH_VLLM_FUSED_NOISE", None)
    cmd = [sys.executable, "-m", "_engine", str(spec_file), str(out_file)]
    try:
        proc = subprocess.run(
            cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-3000:], (exc.stderr or b"")[-6000:]
        raise AssertionError(f"engine {spec['name']} timed out after {timeout} s: {tail}") from None
    if proc.returncode != 0 or not out_file.exists():
        raise AssertionError(
            f"engine {spec['name']} failed (rc={proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-8000:]}"
        )
    return json.loads(out_file.read_text())


def main(argv):
    spec = json.loads(Path(argv[0]).read_text())
    result = serve(spec)
    Path(argv[1]).write_text(json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    # The engine is shut down and the results are written: skip the interpreter's teardown of
    # vLLM's modules and threads, which takes seconds and can only fail after the fact.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
