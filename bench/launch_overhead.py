"""Launch overhead of the fastdispatch runtime, side by side with a direct call and with vLLM.

What one launch costs before the kernel does any work, for a kernel with 10 arguments whose
implementation uses *different* parameter names (so every launch is reordered into positional
arguments, the case of vLLM's C++ shims):

* ``direct``           -- ``impl(a0, ..., a9)``: the anchor, a plain positional call of the no-op;
* ``direct **kw``      -- ``impl_named(**kw)``: the same no-op called with the same 10 keyword
  arguments (the call shape of a launch: the interpreter builds a kwargs dict either way);
* ``compiled``         -- ``override[grid](**kw)``, fastdispatch's compiled ``KernelOverride``;
* ``twin``             -- the same through the pure-Python twin (``fastdispatch._core_py``);
* ``vLLM``             -- the same through ``vllm.triton_utils.dispatcher.KernelOverride``;
* ``owner compiled``   -- the full chain: launch owner -> dispatch function -> binding plan
  (``x`` -> ``x_ptr``, 5 inputs) -> override -> no-op, via ``fastdispatch.kernel_dispatcher``;
* ``owner twin``       -- the same chain through the twin;
* ``owner vLLM``       -- the same chain through vLLM's ``triton_kernel_dispatcher_with_warmup``
  owner and vLLM's ``KernelOverride``;
* ``dispatch fn only`` -- the dispatch function alone (what any owner must pay at least);
* ``floor``            -- ``nl[grid](**kw)`` with ``fastdispatch._floor.NullLauncher``: a C launcher
  that ignores ``kw`` and calls the impl with 10 stored values -- no launcher that ends in this
  Python impl can be faster (the interpreter's dict copy and the C->Python call are in it);
* ``caller only``      -- ``ns[grid](**kw)`` with ``NullSink``: the interpreter's part alone.

Timing: every statement is compiled into a ``timeit`` loop (no wrapper call per iteration); the
loop count is calibrated so one sample lasts >= ``--min-time``; every case is warmed up; gc is
disabled while timing; ``--repeats`` rounds each take one sample of every case, visiting the
cases in ABBA order, and the figures are medians over rounds. Ratios are medians of per-round
ratios against ``direct`` taken in the same round, so drift between rounds cancels.

Run (from the repository root, after ``python setup.py build_ext --inplace``)::

    python bench/launch_overhead.py                      # fastdispatch only (dev venv)
    /work/vllmenv/bin/python bench/launch_overhead.py    # adds vLLM's rows

The script puts the repository root first on ``sys.path``, so it measures this checkout. The
dev venv and the vLLM venv are the same CPython (3.11), so the extension built in place with
either interpreter loads in both; no install into the vLLM venv is needed. vLLM's rows appear
when ``vllm`` is importable (Triton absent there, as on vLLM's CPU path).
"""

import argparse
import gc
import os
import statistics
import sys
import timeit
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


# -- the kernel, its no-op implementations and the dispatch function ---------------------------


def kernel10(
    out_ptr,
    inp_ptr,
    cu_ptr,
    draft_ptr,
    probs_ptr,
    max_spec_len,
    vocab_size,
    replace_from,
    replace_to,
    BLOCK_SIZE,
):  # pragma: no cover - never launched, only introspected
    raise AssertionError("the original kernel must never run")


def impl10(a, b, c, d, e, f, g, h, i, j):
    return None


def impl10_named(
    out_ptr,
    inp_ptr,
    cu_ptr,
    draft_ptr,
    probs_ptr,
    max_spec_len,
    vocab_size,
    replace_from,
    replace_to,
    BLOCK_SIZE,
):
    return None


def dispatch(out, inp, cu, draft, probs, max_spec_len):
    # 5 inputs bind by name (x -> x_ptr), max_spec_len by itself; 4 explicit launch kwargs.
    return (4,), dict(vocab_size=32000, replace_from=0, replace_to=1, BLOCK_SIZE=128)


LAUNCH_KW = dict(
    out_ptr=1,
    inp_ptr=2,
    cu_ptr=3,
    draft_ptr=4,
    probs_ptr=5,
    max_spec_len=6,
    vocab_size=7,
    replace_from=8,
    replace_to=9,
    BLOCK_SIZE=10,
)
OWNER_ARGS = (1, 2, 3, 4, 5, 6)


def build_cases():
    """name -> (statement, namespace); unavailable rows are reported, not silently dropped."""
    cases = {}
    skipped = {}
    vals = tuple(LAUNCH_KW.values())
    base = {
        "impl10": impl10,
        "impl10_named": impl10_named,
        "kw": LAUNCH_KW,
        "grid": (4,),
        "dispatch": dispatch,
        "args": OWNER_ARGS,
    }
    for i, v in enumerate(vals):
        base[f"a{i}"] = v
    cases["direct"] = ("impl10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)", base)
    cases["direct **kw"] = ("impl10_named(**kw)", base)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fastdispatch
    from fastdispatch import _core_py

    try:
        from fastdispatch import _core
    except ImportError as exc:
        _core = None
        skipped["compiled"] = f"extension not built ({exc})"
    backends = [("twin", _core_py)] + ([("compiled", _core)] if _core is not None else [])
    for label, mod in backends:
        ov = mod.KernelOverride(kernel10, impl10)
        cases[label] = ("ov[grid](**kw)", dict(base, ov=ov))
        owner = mod.kernel_dispatcher(kernel=ov)(dispatch)
        assert owner(*OWNER_ARGS) is None
        cases[f"owner {label}"] = ("owner(*args)", dict(base, owner=owner))

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from vllm.model_executor.warmup.jit_warmup_triton_helper import (
                triton_kernel_dispatcher_with_warmup,
            )
            from vllm.triton_utils.dispatcher import KernelOverride as VllmOverride
    except Exception as exc:  # vLLM absent (dev venv): say so in the table
        skipped["vLLM"] = skipped["owner vLLM"] = f"vllm not importable ({type(exc).__name__})"
    else:
        vov = VllmOverride(kernel10, impl10)
        cases["vLLM"] = ("ov[grid](**kw)", dict(base, ov=vov))
        vowner = triton_kernel_dispatcher_with_warmup(kernel=vov, warmup_inputs=lambda: {})(
            dispatch
        )
        assert vowner(*OWNER_ARGS) is None
        cases["owner vLLM"] = ("owner(*args)", dict(base, owner=vowner))
    cases["dispatch fn only"] = ("dispatch(*args)", base)
    try:
        from fastdispatch import _floor
    except ImportError as exc:
        skipped["floor"] = skipped["caller only"] = f"extension not built ({exc})"
    else:
        cases["floor"] = ("nl[grid](**kw)", dict(base, nl=_floor.NullLauncher(impl10, vals)))
        cases["caller only"] = ("ns[grid](**kw)", dict(base, ns=_floor.NullSink()))
    return cases, skipped, fastdispatch.BACKEND


def _timer(stmt, ns):
    return timeit.Timer(stmt, globals=ns)


def calibrate(timer, min_time):
    loops = 1
    while True:
        t = timer.timeit(loops)
        if t >= min_time or loops >= 1 << 24:
            return loops
        loops *= 2 if t > min_time / 10 else 8


def measure(cases, repeats, min_time):
    timers = {name: _timer(stmt, ns) for name, (stmt, ns) in cases.items()}
    names = list(timers)
    loops = {}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for name in names:
            loops[name] = calibrate(timers[name], min_time)
            timers[name].timeit(loops[name])  # warm-up sample, discarded
        samples = {name: [] for name in names}
        for r in range(repeats):
            order = names if r % 2 == 0 else names[::-1]  # ABBA
            for name in order:
                samples[name].append(timers[name].timeit(loops[name]) / loops[name] * 1e9)
    finally:
        if gc_was:
            gc.enable()
    return samples


def report(samples, skipped, backend, repeats):
    anchor = samples["direct"]
    print(
        f"fastdispatch backend: {backend}; python {sys.version.split()[0]}; "
        f"{repeats} interleaved rounds; ns per launch (median [min-max])"
    )
    print(f"{'case':<18} {'ns':>9} {'range':>17} {'x direct':>9}")
    medians = {}
    for name, s in samples.items():
        med = statistics.median(s)
        medians[name] = med
        ratio = statistics.median(a / b for a, b in zip(s, anchor))
        print(f"{name:<18} {med:9.1f} {min(s):8.1f}-{max(s):<8.1f} {ratio:8.2f}x")
    for name, why in skipped.items():
        print(f"{name:<18} {'--':>9}  ({why})")

    def rel(a, b):
        if a in samples and b in samples:
            return statistics.median(x / y for x, y in zip(samples[a], samples[b]))
        return None

    print()
    print("targets (issue 2):")
    checks = [
        ("compiled override / direct", rel("compiled", "direct"), "<= 2"),
        ("compiled override / direct **kw", rel("compiled", "direct **kw"), "(same call shape)"),
        ("twin / compiled override", rel("twin", "compiled"), ">= 15"),
        ("vLLM / compiled override", rel("vLLM", "compiled"), ">= 15"),
        ("owner compiled / direct", rel("owner compiled", "direct"), "<= 10"),
        ("floor / direct", rel("floor", "direct"), "(no launcher can go below)"),
        ("compiled override / floor", rel("compiled", "floor"), "(ours above the floor)"),
        ("twin / floor", rel("twin", "floor"), "(the most any launcher could gain)"),
        ("owner twin / owner compiled", rel("owner twin", "owner compiled"), ""),
        ("owner vLLM / owner compiled", rel("owner vLLM", "owner compiled"), ""),
    ]
    for label, value, target in checks:
        shown = f"{value:8.2f}x" if value is not None else "      --"
        print(f"  {label:<34} {shown}  {target}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--min-time", type=float, default=0.02, help="seconds per sample")
    args = ap.parse_args(argv)
    cases, skipped, backend = build_cases()
    samples = measure(cases, args.repeats, args.min_time)
    report(samples, skipped, backend, args.repeats)


if __name__ == "__main__":
    main()
