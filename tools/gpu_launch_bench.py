#!/usr/bin/env python
"""GPU bench: host-side cost of one launch of an already-compiled Triton kernel, by launch path.

    python setup.py build_ext --inplace
    python tools/gpu_launch_bench.py [--json out.json] [--md out.md]

Why: a small decode-time kernel runs for a few microseconds, and Triton's own launch
(``JITFunction.run``) costs more than that on the host. This measures, side by side in one run,
for kernels of 4, 10 and 20 arguments (plus one constexpr each):

* ``triton``: ``kernel[grid](*args, BLOCK=...)``, Triton's path;
* ``fast_launch``: ``fastdispatch.fast_launch(kernel)[grid](*args, BLOCK=...)`` (compiled);
* the same with tensors read through attribute lookups (``.dtype``, ``data_ptr()``) instead of
  torch's C getter and method called directly, and through a ``LaunchOwner`` whose ``.kernel``
  is the fast-launch object;
* ``fast_launch (twin)``: the same through the pure-Python twin;
* ``launcher floor``: ``compiled_kernel.run(gx, gy, gz, stream, function, packed_metadata,
  None, None, None, *args)`` -- the compiled kernel's launcher called directly with everything
  precomputed, the floor for any path that ends in Triton's launcher;
* ``launcher floor + device/stream``: the same plus reading the current device and stream the
  way Triton does (every correct launch path must, since the caller may switch streams);
* ``C launch function``: the launcher object's inner C function called directly (Triton 3.6's
  argument layout; only when the kernel needs no scratch memory) -- what is left under the
  launcher's Python ``__call__``;
* ``torch.add(out=)`` (4-argument row only) and a CUDA-graph replay of one launch.

Host-side time per launch: ``--launches`` back-to-back launches timed with ``perf_counter_ns``
(fewer than the GPU's launch queue holds, so the host never waits for the GPU), then an untimed
synchronize; the median of ``--repeats`` such samples, with all paths interleaved per repeat.
Not a test: it asserts nothing about speed. Outputs of every path are compared first.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import fastdispatch  # noqa: E402
from fastdispatch import _fastlaunch_py  # noqa: E402


@triton.jit
def add4(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def add10(x, y, out, n, a1, a2, a3, p1, p2, p3, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m) + ((a1 + a2 + a3) % 5).to(tl.float32)
    v = v + tl.load(p1 + offs, mask=m) + tl.load(p2 + offs, mask=m) + tl.load(p3 + offs, mask=m)
    tl.store(out + offs, v, mask=m)


@triton.jit
def add20(
    x,
    y,
    out,
    n,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    p1,
    p2,
    p3,
    p4,
    p5,
    p6,
    b1,
    b2,
    b3,
    b4,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = a1 + a2 + a3 + a4 + a5 + a6 + b1 + b2 + b3 + b4
    v = tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m) + (s % 5).to(tl.float32)
    v = v + tl.load(p1 + offs, mask=m) + tl.load(p2 + offs, mask=m) + tl.load(p3 + offs, mask=m)
    v = v + tl.load(p4 + offs, mask=m) + tl.load(p5 + offs, mask=m) + tl.load(p6 + offs, mask=m)
    tl.store(out + offs, v, mask=m)


def _args(kernel, n):
    t = lambda: torch.randn(n, device="cuda")  # noqa: E731
    vals = {}
    for name in kernel.arg_names:
        if name == "BLOCK":
            continue
        if name == "n":
            vals[name] = n
        elif name[0] in "ab":
            vals[name] = 3
        else:
            vals[name] = t()
    return vals


BY_ATTRIBUTE = "fast_launch (compiled), tensors read by `.dtype`/`data_ptr()` attribute"


def _time(fn, launches):
    t0 = time.perf_counter_ns()
    for _ in range(launches):
        fn()
    dt = time.perf_counter_ns() - t0
    torch.cuda.synchronize()
    return dt / launches / 1000.0


def bench_kernel(kernel, a, drv, stream):
    """Median µs per launch of every path for one kernel (outputs compared first)."""
    from fastdispatch import _fastlaunch

    BLOCK = 1024
    vals = _args(kernel, a.n)
    args = tuple(vals.values())
    grid = (triton.cdiv(a.n, BLOCK),)
    ck = kernel[grid](*args, BLOCK=BLOCK)
    fl = fastdispatch.fast_launch(kernel)
    assert type(fl) is _fastlaunch.FastLaunch
    ft = _fastlaunch_py.FastLaunch(kernel)
    for f in (fl, ft):  # learn the key (the first launches go through Triton's run)
        for _ in range(3):
            f[grid](*args, BLOCK=BLOCK)
    torch.cuda.synchronize()
    learned = dict(fl.state.stats)
    full = (*args, BLOCK)
    launcher, function, packed = ck.run, ck.function, ck.packed_metadata
    g0 = grid[0]
    get_dev, get_stream = drv.get_current_device, drv.get_current_stream

    def floor():
        launcher(g0, 1, 1, stream, function, packed, None, None, None, *full)

    def floor_ds():
        launcher(g0, 1, 1, get_stream(get_dev()), function, packed, None, None, None, *full)

    # a launch owner whose .kernel is the fast-launch object (the planner binds by name)
    ns = {"grid": grid, "BLOCK": BLOCK}
    params = ", ".join(vals)
    exec(f"def dispatch({params}):\n    return grid, {{'BLOCK': BLOCK}}\n", ns)
    owner = fastdispatch.kernel_dispatcher(kernel=fl)(ns["dispatch"])
    for _ in range(3):
        owner(*args)

    paths = {
        "triton `kernel[grid](...)`": lambda: kernel[grid](*args, BLOCK=BLOCK),
        "fast_launch (compiled)": lambda: fl[grid](*args, BLOCK=BLOCK),
        BY_ATTRIBUTE: lambda: fl[grid](*args, BLOCK=BLOCK),
        "fast_launch through a `LaunchOwner`": lambda: owner(*args),
        "fast_launch (twin)": lambda: ft[grid](*args, BLOCK=BLOCK),
        "launcher floor `ck.run(...)`": floor,
        "floor + current device/stream": floor_ds,
    }
    clauncher = getattr(launcher, "launch", None)
    if (
        clauncher is not None
        and triton.__version__.startswith("3.6")
        and not launcher.global_scratch_size
        and not launcher.profile_scratch_size
    ):
        coop, pdl = launcher.launch_cooperative_grid, launcher.launch_pdl

        def c_launch():
            clauncher(
                g0, 1, 1, stream, function, coop, pdl, None, None, packed, None, None, None, *full
            )

        paths["C launch function `ck.run.launch(...)`"] = c_launch
    x, y, out = vals["x"], vals["y"], vals["out"]
    if kernel is add4:
        paths["`torch.add(x, y, out=out)`"] = lambda: torch.add(x, y, out=out)
    # CUDA graph of one launch
    gs = torch.cuda.Stream()
    gs.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(gs):
        kernel[grid](*args, BLOCK=BLOCK)
    torch.cuda.current_stream().wait_stream(gs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel[grid](*args, BLOCK=BLOCK)
    paths["CUDA-graph replay"] = graph.replay

    # outputs of each kernel launch path agree (same inputs, output cleared in between)
    ref = None
    for name, fn in paths.items():
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        if "torch.add" in name:
            continue
        if ref is None:
            ref = out.clone()
        elif not torch.equal(out.view(torch.int32), ref.view(torch.int32)):
            raise SystemExit(f"MISMATCH {kernel}: {name}")

    samples = {name: [] for name in paths}
    for fn in paths.values():  # warm-up
        _time(fn, a.launches)
    for _ in range(a.repeats):
        for name, fn in paths.items():
            if name == BY_ATTRIBUTE:
                _fastlaunch.direct_tensor_reads(False)
                samples[name].append(_time(fn, a.launches))
                _fastlaunch.direct_tensor_reads(True)
            else:
                samples[name].append(_time(fn, a.launches))
    after = dict(fl.state.stats)
    assert after == learned, f"fast_launch left its fast path during the timing: {after}"
    direct = next(iter(fl.state.cache.values()))[5]
    return (
        {name: (statistics.median(s), statistics.quantiles(s, n=4)) for name, s in samples.items()},
        direct,
    )


def _parts(drv):
    """Per-call cost of the pieces of a fast launch of ``add4``, each timed alone."""
    from triton import knobs

    vals = _args(add4, 4096)
    args = tuple(vals.values())
    x = vals["x"]
    grid = (4,)
    fl = fastdispatch.fast_launch(add4)
    for _ in range(3):
        fl[grid](*args, BLOCK=1024)
    gl = fl[grid]
    rt = knobs.runtime
    get_dev = torch._C._cuda_getDevice
    get_stream = torch._C._cuda_getCurrentRawStream
    pieces = {
        "whole fast launch `fl[grid](*args, BLOCK=1024)`": lambda: fl[grid](*args, BLOCK=1024),
        "`fl[grid]` (the launch object)": lambda: fl[grid],
        "an empty call `(lambda *a, **k: None)(*args, BLOCK=1024)`": (
            lambda f: lambda: f(*args, BLOCK=1024)
        )(lambda *a, **k: None),
        "hook checks (2 hook chains, pre-run hooks, used globals)": lambda: (
            rt.launch_enter_hook.calls,
            rt.launch_exit_hook.calls,
            add4.pre_run_hooks,
            add4.used_global_vals,
        ),
        "knob reads (jit.debug, runtime.debug, instrumentation_mode)": lambda: (
            add4.debug,
            rt.debug,
            knobs.compilation.instrumentation_mode,
        ),
        "driver's `get_current_stream(get_current_device())`": lambda: drv.get_current_stream(
            drv.get_current_device()
        ),
        "`_cuda_getCurrentRawStream(_cuda_getDevice())`": lambda: get_stream(get_dev()),
        "one tensor: `x.data_ptr(), x.dtype`": lambda: (x.data_ptr(), x.dtype),
    }
    del gl
    out = {}
    for name, fn in pieces.items():
        fn()
        s = []
        for _ in range(15):
            t0 = time.perf_counter_ns()
            for _ in range(2000):
                fn()
            s.append((time.perf_counter_ns() - t0) / 2000 / 1000.0)
        torch.cuda.synchronize()
        out[name] = round(statistics.median(s), 3)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--launches", type=int, default=200)
    p.add_argument("--repeats", type=int, default=41)
    p.add_argument("--json", default="")
    p.add_argument("--md", default="")
    p.add_argument(
        "--parts", action="store_true", help="also time the pieces a fast launch is made of"
    )
    a = p.parse_args()
    from triton.runtime.driver import driver

    drv = driver.active
    dev = drv.get_current_device()
    stream = drv.get_current_stream(dev)
    rows = {}
    direct = {}
    for kernel, label in ((add4, "4 args"), (add10, "10 args"), (add20, "20 args")):
        rows[label], d = bench_kernel(kernel, a, drv, stream)
        direct[label] = getattr(d, "__name__", repr(d))
    parts = _parts(drv) if a.parts else {}
    names = []
    for r in rows.values():
        for nm in r:
            if nm not in names:
                names.append(nm)
    facts = dict(
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        device=torch.cuda.get_device_name(),
        cpu=platform.processor() or platform.machine(),
        python=platform.python_version(),
        torch=torch.__version__,
        triton=triton.__version__,
        launches=a.launches,
        repeats=a.repeats,
        n=a.n,
        fast_launch_calls=direct,
    )
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    facts["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    labels = list(rows)
    lines = [
        "| launch path (µs per launch, host side, median) | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for nm in names:
        cells = []
        for lb in labels:
            v = rows[lb].get(nm)
            cells.append("—" if v is None else f"{v[0]:.2f}")
        lines.append(f"| {nm} | " + " | ".join(cells) + " |")
    ratios = []
    for lb in labels:
        r = rows[lb]
        fast = r["fast_launch (compiled)"][0]
        ratios.append(
            f"{lb}: triton / fast_launch {r['triton `kernel[grid](...)`'][0] / fast:.2f}x, "
            f"fast_launch / launcher floor {fast / r['launcher floor `ck.run(...)`'][0]:.2f}x, "
            "fast_launch / (floor + device/stream) "
            f"{fast / r['floor + current device/stream'][0]:.2f}x"
        )
    table = "\n".join(lines)
    print(json.dumps(facts))
    print(table)
    print("\n".join(ratios))
    iqr = {lb: {nm: round(q[2] - q[0], 3) for nm, (_, q) in r.items()} for lb, r in rows.items()}
    print("IQR (µs):", json.dumps(iqr))
    if parts:
        print("pieces (µs per call, median):")
        for nm, v in parts.items():
            print(f"  {v:7.3f}  {nm}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                dict(
                    facts=facts,
                    rows={lb: {nm: v[0] for nm, v in r.items()} for lb, r in rows.items()},
                    iqr=iqr,
                    ratios=ratios,
                ),
                f,
                indent=1,
            )
    if a.md:
        with open(a.md, "w") as f:
            f.write(json.dumps(facts) + "\n\n" + table + "\n\n" + "\n".join(ratios) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
