"""Fused random rejection sampling vs stock vLLM and vs the memory floor, side by side in one run.

    /work/vllmenv/bin/python bench/fused_sampling.py            # with the stock vLLM comparison
    python bench/fused_sampling.py --vocab 32000 --threads 1    # ours and the floors only

Every case of one configuration is sampled once per repeat, in ABBA order, and each figure is the
median over repeats; ratios are medians of per-repeat ratios, so drift on a shared machine hits
numerator and denominator alike. Cases (B requests x k drafts, float32, all requests random):

* ``stock rejection_sample``   vLLM 0.32.0's ``rejection_sample`` (logits in, CPU overrides
  installed by ``CpuPlatform.register_triton_kernel_overrides``): softmax, uniforms, ``[B, V]``
  exponentials, recovered tokens for every position, accept kernel.
* ``stock sample_recovered``   its ``sample_recovered_tokens`` alone (``q`` + kernel).
* ``fused rejection_sample``   ``vllm_rejection_sample``: the same call, fused: logits in, each
  row normalised in the kernel only where the walk needs it (no softmax tensor).
* ``fused step (logits)``      its kernel, ``rejection_sample_step_logits``, alone.
* ``fused step (probs)``       ``rejection_sample_step`` on probabilities: accept walk + recovered
  tokens where emitted + bonus -- the random step proper.
* ``fused recovered, all T``   ``vllm_sample_recovered_tokens``: every draft position (reads
  all rows) -- what the ``sample_recovered_tokens`` override runs.
* ``memcpy probs``             ``copy_`` of the probability bytes a full pass reads (target, plus
  draft when there are draft probs) into a preallocated buffer; ``sum probs``: the read floor;
  ``memcpy rows step read``: the same for only as many rows as the fused step reads in full.
* ``torch softmax``            the softmax stock vLLM computes (and the probs step would need).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import kernels_cpu  # noqa: E402
from fastdispatch.ops import fused  # noqa: E402
from kernels_cpu import _fused  # noqa: E402


def _stock():
    """vLLM's rejection sampler with its CPU kernel overrides, or None without vLLM."""
    try:
        import vllm._custom_ops  # noqa: F401  -- loads torch.ops._C
        from vllm.platforms.cpu import CpuPlatform
        from vllm.v1.sample import rejection_sampler as rs
    except Exception as exc:  # pragma: no cover - depends on the interpreter
        print(f"# stock vLLM unavailable ({type(exc).__name__}: {exc}); ours only")
        return None
    CpuPlatform.register_triton_kernel_overrides()
    return rs


def _inputs(B, K, V, with_draft, draft_noise=2.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    T = B * K
    logits = torch.randn(T, V, generator=gen) * 4
    probs = logits.softmax(-1)
    # the draft model: the target's logits plus noise (less noise, more acceptance)
    draft_logits = logits + torch.randn(T, V, generator=gen) * draft_noise
    dprobs = draft_logits.softmax(-1) if with_draft else None
    sample_from = dprobs if with_draft else probs
    draft = torch.multinomial(sample_from, 1, generator=gen).reshape(T).to(torch.int32)
    cu = torch.arange(K, T + 1, K, dtype=torch.int32)
    bonus = torch.randint(0, V, (B, 1), generator=gen)
    meta = SimpleNamespace(
        all_greedy=False, all_random=True, generators={}, temperature=torch.ones(B)
    )
    return SimpleNamespace(
        B=B,
        K=K,
        V=V,
        T=T,
        logits=logits,
        probs=probs,
        dprobs=dprobs,
        draft=draft,
        cu=cu,
        bonus=bonus,
        meta=meta,
        counts=[K] * B,
    )


def _cases(x, rs, rows):
    seeds = fused.request_seeds(x.B)
    out = torch.full((x.B, x.K + 1), -1, dtype=torch.int32)
    src = [x.probs] + ([x.dprobs] if x.dprobs is not None else [])
    dst = [torch.empty_like(s) for s in src]
    cases = {}
    if rs is not None:
        cases["stock rejection_sample"] = lambda: rs.rejection_sample(
            x.draft, x.counts, x.K, x.cu, x.dprobs, x.logits, x.bonus, x.meta
        )
        cases["stock sample_recovered"] = lambda: rs.sample_recovered_tokens(
            x.K, x.counts, x.cu, x.draft, x.dprobs, x.probs, x.meta, "cpu"
        )
    cases["fused rejection_sample"] = lambda: fused.vllm_rejection_sample(
        x.draft, x.counts, x.K, x.cu, x.dprobs, x.logits, x.bonus, x.meta
    )
    cases["fused step (logits)"] = lambda: _fused.rejection_sample_step_logits(
        out, x.cu, x.draft, x.dprobs, x.logits, x.bonus, None, seeds, x.K, None
    )
    cases["fused step (probs)"] = lambda: _fused.rejection_sample_step(
        out, x.cu, x.draft, x.dprobs, x.probs, x.bonus, None, None, seeds, x.K, None
    )
    cases["fused recovered, all T"] = lambda: fused.vllm_sample_recovered_tokens(
        x.K, x.counts, x.cu, x.draft, x.dprobs, x.probs, x.meta, "cpu"
    )
    cases["memcpy probs"] = lambda: [d.copy_(s) for d, s in zip(dst, src)]
    cases["memcpy rows step read"] = lambda: [d[:rows].copy_(s[:rows]) for d, s in zip(dst, src)]
    cases["sum probs"] = lambda: [s.sum() for s in src]
    cases["torch softmax"] = lambda: x.logits.softmax(-1, dtype=torch.float32)
    return cases


def _measure(cases, repeats, clock):
    names = list(cases)
    for fn in cases.values():  # warm-up: lazy imports, allocator pools, page faults
        fn()
        fn()
    samples = {n: [] for n in names}
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            gc.disable()
            t0 = clock()
            cases[n]()
            t1 = clock()
            gc.enable()
            samples[n].append((t1 - t0) / 1e6)
    return samples


def _ratio(samples, a, b):
    return statistics.median(x / y for x, y in zip(samples[a], samples[b]))


def _rows_read(x):
    """How many probability rows the fused step reads in full (one per rejecting request)."""
    seeds = fused.request_seeds(x.B)
    out = torch.full((x.B, x.K + 1), -1, dtype=torch.int32)
    _fused.rejection_sample_step(
        out, x.cu, x.draft, x.dprobs, x.probs, x.bonus, None, None, seeds, x.K, None
    )
    return int((out[:, x.K] == -1).sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--vocab", type=int, nargs="*", default=[128256, 32000])
    ap.add_argument("--threads", type=int, nargs="*", default=[2])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--no-stock", action="store_true")
    ap.add_argument(
        "--draft-noise",
        type=float,
        default=2.0,
        help="std of the noise added to the target logits to make the draft's; "
        "small values mean high acceptance (the fused walk reads more rows)",
    )
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: process CPU time (all threads summed), a figure that stays "
        "meaningful on an oversubscribed machine; use it with --threads 1",
    )
    args = ap.parse_args(argv)

    rs = None if args.no_stock else _stock()
    clock = time.perf_counter_ns if args.clock == "wall" else time.process_time_ns
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# torch {torch.__version__}, kernels_cpu OpenMP={kernels_cpu.openmp_enabled()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}, {args.clock} clock, "
        f"repeats={args.repeats}; medians in ms"
    )
    for threads in args.threads:
        torch.set_num_threads(threads)
        for V in args.vocab:
            for with_draft in (True, False):
                x = _inputs(args.batch, args.k, V, with_draft, args.draft_noise)
                kernels_cpu.set_num_threads(threads)
                rows = _rows_read(x)
                s = _measure(_cases(x, rs, rows), args.repeats, clock)
                mb = x.T * V * 4 * (2 if with_draft else 1) / 1e6
                print(
                    f"\n## B{x.B} k{x.K} V{V} {'draft probs' if with_draft else 'no draft probs'}"
                    f" draft noise {args.draft_noise}"
                    f" threads={threads}  (full pass: {mb:.1f} MB of probabilities; the fused "
                    f"step read {rows} of {x.T} rows in full)"
                )
                for n, v in s.items():
                    lo, hi = min(v), max(v)
                    print(f"  {n:26s} {statistics.median(v):9.3f}   (min {lo:.3f}, max {hi:.3f})")
                r = _ratio(s, "fused step (probs)", "memcpy probs")
                print(f"  step / memcpy probs          {r:6.2f}x")
                r = _ratio(s, "fused step (probs)", "memcpy rows step read")
                print(f"  step / memcpy rows step read {r:6.2f}x")
                r = _ratio(s, "fused recovered, all T", "memcpy probs")
                print(f"  recovered all T / memcpy     {r:6.2f}x")
                r = _ratio(s, "fused recovered, all T", "sum probs")
                print(f"  recovered all T / sum probs  {r:6.2f}x")
                if rs is not None:
                    r = _ratio(s, "stock rejection_sample", "fused rejection_sample")
                    print(f"  stock / fused rejection_sample   {r:6.1f}x faster")
                    r = _ratio(s, "stock rejection_sample", "fused step (probs)")
                    print(f"  stock rejection_sample / step (probs) {r:6.1f}x faster")
                    r = _ratio(s, "stock sample_recovered", "fused recovered, all T")
                    print(f"  stock / fused sample_recovered   {r:6.1f}x faster")


if __name__ == "__main__":
    main()
