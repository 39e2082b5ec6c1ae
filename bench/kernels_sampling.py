"""Sampling kernels: ns per launch, kernels_cpu vs plain torch vs vLLM's CPU shims.

    python bench/kernels_sampling.py                      # kernels_cpu and the torch references
    /work/vllmenv/bin/python bench/kernels_sampling.py    # + vLLM 0.32.0's shim + C++ op
    python bench/kernels_sampling.py --full               # more shapes, repeats, longer samples

Every group is one launch shape; its rows run on the same inputs, in vLLM's real dtypes (int32
offsets, draft ids and outputs, int64 target argmax and bonus ids, bool ``is_greedy``, float32
probabilities, float64 uniforms, float32 or float64 ``inv_q``), interleaved ABBA over the repeats
(``bench._timing``). Figures are medians of per-call times; ``x ours`` is the median of
per-repeat ratios to the kernels_cpu row.

Rows per group:

* ``kernels_cpu``            the compiled kernel (validation included), positional launch, at the
  default thread count (``torch.get_num_threads()``).
* ``kernels_cpu 1t / 2t``    the same pinned to 1 or 2 OpenMP threads (recovered tokens).
* ``memcpy prob bytes``      (recovered tokens) one ``memmove`` of the probability bytes the kernel
  reads (target, plus draft when given): the floor of a kernel that reads them once.
* ``torch reference``        ``kernels_cpu.reference.sampling``, the plain-torch formulation.
* ``vLLM shim + C++ op``     ``vllm.utils.cpu_triton_utils._*_impl``, what vLLM registers on CPU,
  when vLLM is importable. Its outputs are compared with ours after each group: its expand loses
  float32/int32 outputs (vLLM issue #55005), and it compares float64 uniforms / inv_q in float32.
"""
from __future__ import annotations

import argparse
import ctypes
import itertools
import os
import sys
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import kernels_cpu  # noqa: E402
from bench._timing import DEFAULT, FULL, QUICK, Case, measure, paired_ratio  # noqa: E402
from kernels_cpu.reference import sampling as ref  # noqa: E402

i32, i64 = torch.int32, torch.int64


def _vllm_shims():
    """``{kernel name: vLLM CPU shim}``, or {} when vLLM (and its C++ ops) cannot be imported."""
    try:
        import vllm._custom_ops  # noqa: F401  -- loads torch.ops._C
        from vllm.utils import cpu_triton_utils as c
    except Exception as exc:  # pragma: no cover - depends on the interpreter
        print(f"# vLLM unavailable ({type(exc).__name__}: {exc}): kernels_cpu and references only")
        return {}
    return {
        "expand_kernel": c._expand_kernel_impl,
        "rejection_greedy_sample_kernel": c._rejection_greedy_sample_kernel_impl,
        "rejection_random_sample_kernel": c._rejection_random_sample_kernel_impl,
        "sample_recovered_tokens_kernel": c._sample_recovered_tokens_kernel_impl,
    }


# ------------------------------------------------------------------------------------------
# inputs (positional, in the Triton kernels' argument order, vLLM's dtypes)
# ------------------------------------------------------------------------------------------

def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _cu(b, k):
    return (torch.arange(1, b + 1, dtype=i32) * k).to(i32)


def _probs(g, t, v):
    return torch.softmax(torch.randn(t, v, generator=g) * 3, dim=-1)


def expand(b, k=4, dtype=torch.float32):
    """Temperature (float32, 0 -> 1) or top-k (int32) expanded to the draft tokens."""
    g = _gen()
    if dtype.is_floating_point:
        x = torch.rand(b, generator=g) * (torch.rand(b, generator=g) > 0.25)
    else:
        x = torch.randint(0, 50, (b,), generator=g, dtype=dtype)
    return (torch.empty(b * k, dtype=dtype), x, _cu(b, k), 0, 1 if dtype.is_floating_point else 0,
            128)


def greedy(b, k=4, vocab=32000):
    g = _gen()
    t = b * k
    argmax = torch.randint(0, vocab, (t,), generator=g)
    draft = torch.where(torch.rand(t, generator=g) < 0.7, argmax,
                        torch.randint(0, vocab, (t,), generator=g)).to(i32)
    return (torch.full((b, k + 1), -1, dtype=i32), _cu(b, k), draft, argmax,
            torch.randint(0, vocab, (b, 1), generator=g), None, k, None, None, False)


def random_(b, k=4, vocab=32000, draft_probs=True):
    g = _gen()
    t = b * k
    target = _probs(g, t, vocab)
    dp = _probs(g, t, vocab) if draft_probs else None
    return (torch.full((b, k + 1), -1, dtype=i32), _cu(b, k),
            torch.randint(0, vocab, (t,), generator=g, dtype=i32), dp, target,
            torch.randint(0, vocab, (b, 1), generator=g),
            torch.randint(0, vocab, (t,), generator=g, dtype=i32),
            torch.rand(t, generator=g, dtype=torch.float64), torch.zeros(b, dtype=torch.bool),
            k, vocab, None, not draft_probs, False)


def recovered(b, k, vocab, draft_probs=False, fp64=False):
    g = _gen()
    t = b * k
    q_dtype = torch.float64 if fp64 else torch.float32
    inv_q = torch.empty(b, vocab, dtype=q_dtype).exponential_(generator=g).reciprocal()
    return (torch.empty(t, dtype=i32), _cu(b, k),
            torch.randint(0, vocab, (t,), generator=g, dtype=i32),
            _probs(g, t, vocab) if draft_probs else None, _probs(g, t, vocab), inv_q, vocab, 8192,
            not draft_probs, fp64)


# ------------------------------------------------------------------------------------------

def groups(full):
    """(title, kernel name, args, reference fn, large?) per launch shape."""
    out = []
    for b in ((1, 4, 16, 64) if full else (4, 16)):
        out.append((f"expand temperature float32 B={b} k=4", "expand_kernel", expand(b),
                    ref.expand_kernel, False))
        out.append((f"rejection_greedy_sample B={b} k=4", "rejection_greedy_sample_kernel",
                     greedy(b), ref.rejection_greedy_sample_kernel, False))
        out.append((f"rejection_random_sample B={b} k=4 V=32000", "rejection_random_sample_kernel",
                    random_(b), ref.rejection_random_sample_kernel, False))
    out.append(("expand top_k int32 B=4 k=4", "expand_kernel", expand(4, dtype=i32),
                ref.expand_kernel, False))
    out.append(("sample_recovered_tokens B=1 k=1 V=1000 (tiny)", "sample_recovered_tokens_kernel",
                recovered(1, 1, 1000), ref.sample_recovered_tokens_kernel, True))
    shapes = [(4, 4, 32000, False, False), (16, 4, 128256, False, False),
              (16, 4, 128256, True, False)]
    if full:
        shapes += [(16, 4, 32000, False, False), (16, 4, 128256, False, True),
                   (16, 4, 128256, True, True), (1, 4, 128256, False, False)]
    for b, k, v, dp, fp64 in shapes:
        title = (f"sample_recovered_tokens B={b} k={k} V={v} "
                 f"{'draft probs' if dp else 'no draft probs'}{', fp64 inv_q' if fp64 else ''}")
        out.append((title, "sample_recovered_tokens_kernel", recovered(b, k, v, dp, fp64),
                    ref.sample_recovered_tokens_kernel, True))
    return out


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _agreement(ours, other, args):
    """Run both launches on copies of ``args`` whose output (argument 0) is poisoned first, so
    an output a launch fails to write shows up; name the tensor arguments whose bytes differ."""
    a, b = _clone(args), _clone(args)
    a[0].fill_(-7777)
    b[0].fill_(-7777)
    ours(*a)
    other(*b)
    return [i for i, (x, y) in enumerate(zip(a, b))
            if isinstance(x, torch.Tensor) and not torch.equal(x, y)]


def _memcpy_case(args, clock):
    """A ``memmove`` of the probability bytes the recovered-tokens kernel reads (one thread)."""
    srcs = [t for t in (args[3], args[4]) if t is not None]
    dsts = [torch.empty_like(t) for t in srcs]
    moves = [(d.data_ptr(), s.data_ptr(), s.numel() * s.element_size()) for s, d in zip(srcs, dsts)]
    mm = ctypes.memmove

    def run():
        for d, s, n in moves:
            mm(d, s, n)

    case = _case("memcpy prob bytes", clock, fn=run, namespace={"keep": (srcs, dsts)})
    return case, sum(m[2] for m in moves)


class _ClockCase(Case):
    """A ``Case`` timed with a chosen clock (``bench._timing`` times wall clock)."""

    clock = staticmethod(time.perf_counter_ns)

    def compile(self):
        ns = dict(self.namespace)
        stmt = self.stmt
        if stmt is None:
            ns["_bench_fn"] = self.fn
            stmt = "_bench_fn()"
        inner = timeit.Timer(stmt, globals=ns, timer=self.clock).inner
        clock = self.clock

        def run(loops):
            return inner(itertools.repeat(None, loops), clock)

        return run


def _case(name, clock, **kw):
    case = _ClockCase(name, **kw)
    case.clock = clock
    return case


def _fmt_ns(ns):
    return f"{ns:,.0f}" if ns < 1e6 else f"{ns / 1e6:,.2f} ms"


def _report(title, stats, anchor):
    print(f"\n## {title}")
    print(f"{'row':<28} {'ns/launch':>14} {'IQR %':>7} {'x ours':>8}")
    for name, st in stats.items():
        d = st.as_dict()
        ratio = paired_ratio(st, stats[anchor])["ratio"]
        flag = "  noisy" if st.noisy else ""
        print(f"{name:<28} {_fmt_ns(d['median']):>14} {100 * d['rel_iqr']:>6.1f}% {ratio:>7.2f}x{flag}")


def _ratio(stats, a, b):
    return paired_ratio(stats[a], stats[b])["ratio"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="more shapes, repeats and longer samples")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (smoke run)")
    ap.add_argument("--only", default="", help="substring filter on group titles")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the torch reference rows of the large recovered-token shapes")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: process CPU time summed over threads -- stays meaningful on an "
                         "oversubscribed machine for single-threaded rows; 2t rows then show "
                         "CPU spent, not latency")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads before measuring (default: leave torch's choice)")
    opts = ap.parse_args()
    if opts.torch_threads:
        torch.set_num_threads(opts.torch_threads)
    settings = FULL if opts.full else QUICK if opts.quick else DEFAULT
    shims = _vllm_shims()
    clock = time.perf_counter_ns if opts.clock == "wall" else time.process_time_ns
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} torch threads, kernels_cpu OpenMP "
          f"{kernels_cpu.openmp_enabled()}, preset {settings.name}, vLLM shims {'yes' if shims else 'no'}"
          f", {os.cpu_count()} CPUs, load average {load:.1f}, {opts.clock} clock")

    def switch(state):
        kernels_cpu.set_num_threads(None if state is None else int(state[1:]))

    for title, name, args, reference, large in groups(opts.full):
        if opts.only and opts.only not in title:
            continue
        ours = getattr(kernels_cpu, name)
        ns = {"k": ours, "a": args, "r": reference, "s": shims.get(name)}
        cases = [_case("kernels_cpu", clock, stmt="k(*a)", namespace=ns)]
        nbytes = 0
        if large:
            cases += [_case("kernels_cpu 1t", clock, stmt="k(*a)", namespace=ns, state="t1"),
                      _case("kernels_cpu 2t", clock, stmt="k(*a)", namespace=ns, state="t2")]
            memcpy_case, nbytes = _memcpy_case(args, clock)
            cases.append(memcpy_case)
        big = large and args[6] * len(args[2]) > 10**6
        if not (big and opts.no_reference):
            cases.append(_case("torch reference", clock, stmt="r(*a)", namespace=ns))
        if ns["s"] is not None:
            cases.append(_case("vLLM shim + C++ op", clock, stmt="s(*a)", namespace=ns))
        stats = measure(cases, settings, switch=switch)
        _report(title, stats, "kernels_cpu")
        if large:
            print(f"prob bytes read: {nbytes / 1e6:.1f} MB; 1t / memcpy = "
                  f"{_ratio(stats, 'kernels_cpu 1t', 'memcpy prob bytes'):.2f}, "
                  f"default / memcpy = {_ratio(stats, 'kernels_cpu', 'memcpy prob bytes'):.2f}, "
                  f"1t / 2t speed-up = {_ratio(stats, 'kernels_cpu 1t', 'kernels_cpu 2t'):.2f}x")
        diff = _agreement(ours, reference, args)
        print(f"outputs vs torch reference: {'identical' if not diff else f'DIFFER in args {diff}'}")
        if ns["s"] is not None:
            diff = _agreement(ours, ns["s"], args)
            print(f"outputs vs vLLM shim: {'identical' if not diff else f'DIFFER in args {diff}'}")
        kernels_cpu.set_num_threads(None)


if __name__ == "__main__":
    main()
