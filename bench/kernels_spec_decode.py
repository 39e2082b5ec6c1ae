"""Spec-decode and worker kernels: ns per launch, kernels_cpu vs plain torch vs vLLM's CPU shims.

    python bench/kernels_spec_decode.py                      # kernels_cpu and the torch references
    /work/vllmenv/bin/python bench/kernels_spec_decode.py    # + vLLM 0.32.0's shim + C++ op
    python bench/kernels_spec_decode.py --full               # more repeats, longer samples

Every group is one launch shape; its rows run on the same inputs, in vLLM's real dtypes (int32
offsets, tables and token ids, int64 positions and slots, bool masks, uint64 addresses with int32
sizes), interleaved ABBA over the repeats (``bench._timing``). Figures are medians of per-call
times; ``x ours`` is the median of per-repeat ratios to the kernels_cpu row.

Rows per group:

* ``kernels_cpu``          the compiled kernel (validation included), positional launch.
* ``kernels_cpu 1t / 2t``  the same pinned to 1 or 2 OpenMP threads (large shapes only).
* ``torch reference``      ``kernels_cpu.reference`` -- the obvious plain-torch formulation.
* ``vLLM shim + C++ op``   ``vllm.utils.cpu_triton_utils._*_impl``, what vLLM registers on CPU
  (int32 buffers copied to int64 and back around its C++ op), when vLLM is importable.
* ``ctypes.memmove loop``  (batch_memcpy) the Python loop vLLM's shim is; the target is >= 20x.
"""
from __future__ import annotations

import argparse
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
from kernels_cpu.reference import spec_decode as ref_sd  # noqa: E402
from kernels_cpu.reference import workers as ref_w  # noqa: E402

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
        "eagle_step_slot_mapping_metadata_kernel": c._eagle_step_slot_mapping_metadata_kernel_impl,
        "eagle_prepare_inputs_padded_kernel": c._eagle_prepare_inputs_padded_kernel_impl,
        "eagle_prepare_next_token_padded_kernel": c._eagle_prepare_next_token_padded_kernel_impl,
        "copy_and_expand_eagle_inputs_kernel": c._copy_and_expand_eagle_inputs_kernel_impl,
        "copy_and_expand_dflash_inputs_kernel": c._copy_and_expand_dflash_inputs_kernel_impl,
        "compute_slot_mapping_kernel": c._compute_slot_mapping_kernel_impl,
        "batch_memcpy_kernel": c._batch_memcpy_impl,
    }


# ------------------------------------------------------------------------------------------
# inputs (positional, in the Triton kernels' argument order)
# ------------------------------------------------------------------------------------------

def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def eagle_step(b, block_size=16, max_model_len=4096):
    g = _gen()
    nb = (max_model_len + block_size - 1) // block_size
    return (torch.randint(0, max_model_len - 1, (b,), generator=g),            # positions int64
            torch.randint(0, 10000, (b, nb), generator=g, dtype=i32), nb,
            torch.randint(1, 100, (b,), generator=g, dtype=i32),               # seq_lens
            torch.empty(b, dtype=i64), torch.empty(b, dtype=i64),
            block_size, max_model_len, nb, -1, b)


def prepare_inputs(b, k=4):
    g = _gen()
    drafts = torch.full((b,), k, dtype=i32)
    qsl = torch.zeros(b + 1, dtype=i32)
    qsl[1:] = torch.cumsum(drafts + 1, 0)
    return (torch.cumsum(drafts, 0).to(i32), torch.randint(0, k + 2, (b,), generator=g, dtype=i32),
            qsl, torch.empty(b, dtype=i32), torch.empty(b, dtype=i32), b)


def next_token(b, k=4, vocab=32000):
    g = _gen()
    sampled = torch.randint(0, vocab, (b, k + 1), generator=g, dtype=i32)
    sampled[torch.rand(b, k + 1, generator=g) < 0.3] = -1
    return (sampled, torch.rand(b, generator=g) < 0.1, torch.randint(0, vocab, (b,), generator=g, dtype=i32),
            torch.empty(b, dtype=i32), torch.empty(b, dtype=i32), vocab, k + 1, b, k + 1, 8)


def eagle_copy(b, qlen, p=1, shift=True):
    g = _gen()
    t = b * qlen
    qsl = torch.arange(0, t + 1, qlen, dtype=i32)
    rej = torch.randint(0, min(qlen, 4), (b,), generator=g, dtype=i32)
    qel = qsl[1:] - 1 - rej
    n_out = t + b * (p - 1 if shift else p)
    return (torch.randint(0, 32000, (t,), generator=g, dtype=i32), torch.arange(t, dtype=i64),
            torch.randint(0, 32000, (b,), generator=g, dtype=i32),
            torch.empty(n_out, dtype=i32), torch.empty(n_out, dtype=i64),
            torch.empty(n_out, dtype=torch.bool), torch.empty(n_out, dtype=torch.bool),
            torch.empty(b * p, dtype=i32), torch.empty(t, dtype=i32), qsl, qel,
            0, 1, t, p, shift, 256)


def dflash(b, ctx, s=4, block_size=16, max_model_len=8192):
    g = _gen()
    t = b * ctx
    nb = (max_model_len + block_size - 1) // block_size
    qsl = torch.arange(0, t + 1, ctx, dtype=i32)
    q = s + 1
    return (torch.randint(0, 32000, (b,), generator=g, dtype=i32),
            (torch.arange(t, dtype=i64) % ctx) + 100,
            torch.empty(b * q, dtype=i32), torch.empty(t, dtype=i64), torch.empty(b * q, dtype=i64),
            torch.empty(t, dtype=i64), torch.empty(b * q, dtype=i64), torch.empty(b * s, dtype=i32),
            torch.randint(0, 10000, (b, nb), generator=g, dtype=i32), nb, qsl,
            torch.randint(0, min(ctx, s + 1), (b,), generator=g, dtype=i32),
            7, block_size, q, s, t, 256, True)


def slot_mapping(b, qlen, block_size=16, max_model_len=8192, pad=8):
    g = _gen()
    t = b * qlen
    nb = (max_model_len + block_size - 1) // block_size
    qsl = torch.arange(0, t + 1, qlen, dtype=i32)
    positions = (torch.arange(t, dtype=i64) % qlen) + torch.randint(0, 1000, (t,), generator=g) * (qlen == 1)
    return (t, t + pad, qsl, positions, torch.randint(0, 10000, (b + 2, nb), generator=g, dtype=i32),
            nb, torch.empty(t + pad, dtype=i64), block_size, 1, 0, 1, -1, 1024)


def memcpy(n, size):
    """n regions of ``size`` bytes between two arenas; returns the args and the arenas (kept alive)."""
    src = torch.randint(0, 256, (n * size,), dtype=torch.uint8)
    dst = torch.empty(n * size, dtype=torch.uint8)
    offs = torch.arange(n, dtype=i64) * size
    args = ((src.data_ptr() + offs).to(torch.uint64), (dst.data_ptr() + offs).to(torch.uint64),
            torch.full((n,), size, dtype=i32))
    return args, (src, dst)


# ------------------------------------------------------------------------------------------

def groups(full):
    """(group title, kernel name, args, reference fn, thread rows?) per launch shape."""
    out = []
    batches = (1, 4, 16, 64, 256) if full else (4, 64)
    for b in batches:
        out.append((f"eagle_step_slot_mapping_metadata B={b}", "eagle_step_slot_mapping_metadata_kernel",
                    eagle_step(b), ref_sd.eagle_step_slot_mapping_metadata_kernel, False))
        out.append((f"eagle_prepare_inputs_padded B={b}", "eagle_prepare_inputs_padded_kernel",
                    prepare_inputs(b), ref_sd.eagle_prepare_inputs_padded_kernel, False))
        out.append((f"eagle_prepare_next_token_padded B={b} k=4", "eagle_prepare_next_token_padded_kernel",
                    next_token(b), ref_sd.eagle_prepare_next_token_padded_kernel, False))
        out.append((f"copy_and_expand_eagle_inputs B={b} q=4", "copy_and_expand_eagle_inputs_kernel",
                    eagle_copy(b, 4), ref_sd.copy_and_expand_eagle_inputs_kernel, False))
        out.append((f"copy_and_expand_dflash_inputs B={b} ctx=5 k=4", "copy_and_expand_dflash_inputs_kernel",
                    dflash(b, 5), ref_sd.copy_and_expand_dflash_inputs_kernel, False))
        out.append((f"compute_slot_mapping decode B={b}", "compute_slot_mapping_kernel",
                    slot_mapping(b, 1), ref_w.compute_slot_mapping_kernel, False))
    # prefill-sized launches: where the OpenMP team matters
    out.append(("copy_and_expand_eagle_inputs B=16 q=4096 (prefill)", "copy_and_expand_eagle_inputs_kernel",
                eagle_copy(16, 4096), ref_sd.copy_and_expand_eagle_inputs_kernel, True))
    out.append(("copy_and_expand_dflash_inputs B=16 ctx=4096", "copy_and_expand_dflash_inputs_kernel",
                dflash(16, 4096), ref_sd.copy_and_expand_dflash_inputs_kernel, True))
    out.append(("compute_slot_mapping B=16 q=4096 (prefill)", "compute_slot_mapping_kernel",
                slot_mapping(16, 4096), ref_w.compute_slot_mapping_kernel, True))
    return out


class _ClockCase(Case):
    """A ``Case`` timed with a chosen clock: wall (``bench._timing``'s) or process CPU time.

    CPU time leaves out the time the process sat descheduled, which on an oversubscribed host
    (other jobs on the same cores) is most of a wall-clock sample. It sums over threads, so it
    cannot show a multi-threaded speed-up: read the 1t/2t rows in wall clock.
    """

    clock = staticmethod(time.perf_counter_ns)

    def compile(self):
        inner = timeit.Timer(self.stmt, globals=dict(self.namespace), timer=self.clock).inner
        clock = self.clock

        def run(loops):
            return inner(itertools.repeat(None, loops), clock)

        return run


def _case(name, clock, **kw):
    case = _ClockCase(name, **kw)
    case.clock = clock
    return case


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _agreement(ours, other, args):
    """Run both launches on copies of ``args``; name the tensor arguments whose bytes differ."""
    a, b = _clone(args), _clone(args)
    ours(*a)
    other(*b)
    return [i for i, (x, y) in enumerate(zip(a, b))
            if isinstance(x, torch.Tensor) and not torch.equal(x, y)]


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="more shapes, repeats and longer samples")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (smoke run)")
    ap.add_argument("--only", default="", help="substring filter on group titles")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads before measuring (default: leave torch's choice)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall clock (default) or process CPU time (oversubscribed hosts)")
    opts = ap.parse_args()
    clock = time.perf_counter_ns if opts.clock == "wall" else time.process_time_ns
    if opts.torch_threads:
        torch.set_num_threads(opts.torch_threads)
    settings = FULL if opts.full else QUICK if opts.quick else DEFAULT
    shims = _vllm_shims()
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} torch threads, kernels_cpu OpenMP "
          f"{kernels_cpu.openmp_enabled()}, preset {settings.name}, vLLM shims {'yes' if shims else 'no'}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, {opts.clock} clock")

    def switch(state):
        kernels_cpu.set_num_threads(None if state is None else int(state[1:]))

    for title, name, args, reference, thread_rows in groups(opts.full):
        if opts.only and opts.only not in title:
            continue
        ours = getattr(kernels_cpu, name)
        ns = {"k": ours, "a": args, "r": reference, "s": shims.get(name)}
        cases = [_case("kernels_cpu", clock, stmt="k(*a)", namespace=ns)]
        if thread_rows:
            cases += [_case("kernels_cpu 1t", clock, stmt="k(*a)", namespace=ns, state="t1"),
                      _case("kernels_cpu 2t", clock, stmt="k(*a)", namespace=ns, state="t2")]
        cases.append(_case("torch reference", clock, stmt="r(*a)", namespace=ns))
        if ns["s"] is not None:
            cases.append(_case("vLLM shim + C++ op", clock, stmt="s(*a)", namespace=ns))
        _report(title, measure(cases, settings, switch=switch), "kernels_cpu")
        diff = _agreement(ours, reference, args)
        print(f"outputs vs torch reference: {'identical' if not diff else f'DIFFER in args {diff}'}")
        if ns["s"] is not None:
            diff = _agreement(ours, ns["s"], args)
            print(f"outputs vs vLLM shim: {'identical' if not diff else f'DIFFER in args {diff}'}")
        kernels_cpu.set_num_threads(None)

    for n, size in ((64, 4096), (64, 64), (1024, 4096)) if opts.full else ((64, 4096), (64, 64)):
        title = f"batch_memcpy {n} regions x {size} B"
        if opts.only and opts.only not in title:
            continue
        args, keep = memcpy(n, size)
        ns = {"k": kernels_cpu.batch_memcpy_kernel, "a": args, "r": ref_w.batch_memcpy_kernel,
              "s": shims.get("batch_memcpy_kernel"), "keep": keep}
        cases = [_case("kernels_cpu", clock, stmt="k(*a)", namespace=ns),
                 _case("ctypes.memmove loop", clock, stmt="r(*a)", namespace=ns)]
        if ns["s"] is not None:
            cases.append(_case("vLLM shim + C++ op", clock, stmt="s(*a)", namespace=ns))
        _report(title, measure(cases, settings), "kernels_cpu")


if __name__ == "__main__":
    main()
