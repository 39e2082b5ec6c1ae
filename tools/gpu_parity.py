#!/usr/bin/env python
"""GPU parity: our Triton kernels, natively on a GPU, vs the ``kernels_cpu`` implementations.

    python setup.py build_ext --inplace      # kernels_cpu (no network needed)
    python tools/gpu_parity.py               # exit status 0: every output identical

For each kernel of the contract table, random valid launches (``fdkit.cases``: several sizes,
int32 and int64 index buffers, poisoned outputs between canary guards) are run twice on the same
inputs: our Triton kernel on the GPU and the CPU kernel on CPU tensors. Every output buffer,
every input the kernel updates in place, and the guards around them must be bit-identical
(integer outputs; the one float output, ``expand_kernel`` on float32, is a copy and compared
bitwise too). Then the sampling ops run end to end on the GPU (Triton) and on the CPU
(``kernels_cpu`` registered) with the same random draws, and must agree.

Prints one PASS/FAIL line per kernel and a summary; exits 1 on any mismatch, 2 when it cannot
run. The first run on a machine spends most of its time compiling (one Triton compilation per
argument specialization); ``--kernels a,b`` splits a run, ``--seeds`` sizes it.
``--interpret`` runs the same checks on CPU tensors under the Triton interpreter (a dry run for
machines without a GPU; use small ``--seeds``).
"""

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20, help="random cases per kernel, scale, dtype")
    p.add_argument("--scales", default="small,large", help="comma list of small,large")
    p.add_argument("--kernels", default="", help="comma list of kernel names (default: all)")
    p.add_argument(
        "--interpret",
        action="store_true",
        help="no GPU: run the Triton kernels in the interpreter on CPU tensors",
    )
    p.add_argument("--no-ops", action="store_true", help="skip the end-to-end ops check")
    return p.parse_args()


ARGS = _parse()
if ARGS.interpret:
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton decorates anything
sys.path.insert(0, ROOT)

import torch  # noqa: E402

try:
    import triton  # noqa: E402
except ImportError:
    print("gpu_parity: triton is not installed", file=sys.stderr)
    sys.exit(2)

try:
    import kernels_cpu  # noqa: E402
except ImportError as exc:
    print(
        f"gpu_parity: kernels_cpu is not built ({exc}); run "
        "`python setup.py build_ext --inplace` in the repository root",
        file=sys.stderr,
    )
    sys.exit(2)

import fdkit.cases as fdcases  # noqa: E402
from fastdispatch.ops import triton_kernels  # noqa: E402

DEVICE = "cpu" if ARGS.interpret else "cuda"
if not ARGS.interpret and not torch.cuda.is_available():
    print("gpu_parity: no CUDA device (use --interpret for a CPU dry run)", file=sys.stderr)
    sys.exit(2)


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _moved(value, device):
    """``value`` on ``device`` when it is a tensor; other arguments pass through."""
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _first_diff(a, b):
    a, b = a.cpu().reshape(-1), b.cpu().reshape(-1)
    ne = (a != b).nonzero()
    if ne.numel() == 0:
        return "equal values, different shape/dtype"
    i = int(ne[0])
    lo, hi = max(0, i - 3), i + 4
    return (
        f"{int(ne.numel())} elements differ, first at [{i}]: "
        f"gpu {a[lo:hi].tolist()} vs cpu {b[lo:hi].tolist()}"
    )


def check_kernel(name, scales, seeds):
    """Returns (cases run, list of failure descriptions)."""
    kernel = triton_kernels.kernel(name)
    impl = getattr(kernels_cpu, name)
    failures, n = [], 0
    for scale in scales:
        for idx in (torch.int32, torch.int64):
            for seed in range(seeds):
                case = fdcases.make_case(name, seed, idx, scale)
                n += 1
                where = f"{scale}/{str(idx)[6:]}/seed={seed} {case.note}"
                try:
                    gpu_kw, gpu = case.build(DEVICE)
                    if all(case.grid):
                        kernel[case.grid](**gpu_kw)
                    _sync()
                except Exception as exc:  # a compile or launch error is a failure too
                    failures.append(f"{where}: Triton launch raised {exc!r}")
                    continue
                try:
                    cpu_kw, cpu = case.build("cpu")
                    impl(**cpu_kw)
                except Exception as exc:
                    failures.append(f"{where}: kernels_cpu raised {exc!r}")
                    continue
                for buf in cpu:
                    g = gpu[buf].cpu()
                    if g.dtype != cpu[buf].dtype or not torch.equal(g, cpu[buf]):
                        failures.append(f"{where}: {buf}: {_first_diff(g, cpu[buf])}")
                for label, bufs in (("triton", gpu), ("kernels_cpu", cpu)):
                    bad = fdcases.guard_violations(case, bufs)
                    if bad:
                        failures.append(f"{where}: {label} wrote guards of {bad}")
    return n, failures


def check_ops(seeds):
    """rejection_sample / expand_batch_to_tokens end to end: GPU (our Triton kernels through
    the launch owners) vs CPU (kernels_cpu registered over them), same draws."""
    import fastdispatch.ops as ops

    failures, n = [], 0
    for seed in range(seeds):
        g = torch.Generator().manual_seed(seed)
        B = int(torch.randint(1, 33, (1,), generator=g))
        K = int(torch.randint(1, 6, (1,), generator=g))
        V = [7, 1000, 32000][seed % 3]
        counts = torch.randint(0, K + 1, (B,), generator=g)
        T = int(counts.sum())
        cu = counts.cumsum(0).to(torch.int32)
        logits = torch.randn((T, V), generator=g)
        drafts = torch.where(
            torch.rand(T, generator=g) < 0.6,
            logits.argmax(-1),
            torch.randint(0, V, (T,), generator=g),
        ).to(torch.int32)
        draft_probs = torch.rand((T, V), generator=g).softmax(-1) if seed % 2 else None
        bonus = torch.randint(0, V, (B,), generator=g)
        is_greedy = torch.rand(B, generator=g) < 0.3
        uniform = torch.rand(T, dtype=torch.float64, generator=g)
        inv_q = torch.empty((B, V)).exponential_(generator=g).reciprocal()
        temps = torch.where(is_greedy, 0.0, torch.rand(B, generator=g) + 0.5)
        args = (drafts, cu, K, logits, bonus)
        # The same probabilities on both sides: torch's softmax differs in the last bit
        # between devices, which is not what this compares.
        kw = dict(
            draft_probs=draft_probs,
            is_greedy=is_greedy,
            uniform_probs=uniform,
            inv_q=inv_q,
            target_probs=logits.softmax(-1, dtype=torch.float32),
        )
        results = {}
        for where in ("gpu", "cpu"):
            dev = DEVICE if where == "gpu" else "cpu"
            if where == "cpu":
                ops.use_cpu_kernels()
            try:
                out = ops.rejection_sample(
                    *(_moved(a, dev) for a in args), **{k: _moved(v, dev) for k, v in kw.items()}
                )
                exp = ops.expand_batch_to_tokens(_moved(temps, dev), _moved(cu, dev), T, 0, 1)
                results[where] = (out.cpu(), exp.cpu())
            finally:
                if where == "cpu":
                    ops.use_triton_kernels()
        n += 1
        for i, label in enumerate(("rejection_sample", "expand_batch_to_tokens")):
            if not torch.equal(results["gpu"][i], results["cpu"][i]):
                failures.append(
                    f"seed={seed} B={B} K={K} V={V} {label}: "
                    f"{_first_diff(results['gpu'][i], results['cpu'][i])}"
                )
    return n, failures


def main():
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"triton {triton.__version__}, device "
        f"{torch.cuda.get_device_name() if DEVICE == 'cuda' else 'cpu (interpreter)'}, "
        f"kernels_cpu OpenMP {kernels_cpu.openmp_enabled()}"
    )
    scales = [s for s in ARGS.scales.split(",") if s]
    names = [k for k in ARGS.kernels.split(",") if k] or list(fdcases.KERNELS)
    unknown = set(names) - set(fdcases.KERNELS)
    if unknown:
        print(f"gpu_parity: unknown kernels {sorted(unknown)}", file=sys.stderr)
        return 2
    total_fail = 0
    for name in names:
        t0 = time.perf_counter()
        n, failures = check_kernel(name, scales, ARGS.seeds)
        status = "PASS" if not failures else "FAIL"
        print(
            f"{status} {name:42s} {n:4d} cases  {time.perf_counter() - t0:6.1f} s"
            + (f"  {len(failures)} mismatches" if failures else "")
        )
        for f in failures[:5]:
            print(f"     {f}")
        sys.stdout.flush()
        total_fail += bool(failures)
    if not ARGS.no_ops:
        t0 = time.perf_counter()
        n, failures = check_ops(max(3, ARGS.seeds // 4))
        status = "PASS" if not failures else "FAIL"
        print(
            f"{status} {'ops: rejection_sample + expand (e2e)':42s} {n:4d} cases  "
            f"{time.perf_counter() - t0:6.1f} s"
        )
        for f in failures[:5]:
            print(f"     {f}")
        total_fail += bool(failures)
    checked = len(names) + (0 if ARGS.no_ops else 1)
    print(f"SUMMARY: {checked - total_fail}/{checked} PASS")
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
