"""Where a speculative-decoding step's time goes inside a vLLM CPU worker (cProfile in the worker).

    .venv-vllm/bin/python tools/profile_engine_step.py --vocab 128256 --batch 16 --setting random \
        --state fused --top 25
    .venv-vllm/bin/python tools/profile_engine_step.py --runner v2 --state plugin --top 25

Starts the engine of ``bench/suites/engine.py`` (same model, draft, batch and sampling), puts the
worker in the asked state (``stock``, ``plugin``, ``fused``), runs one warm ``generate``, then one
more under ``cProfile`` *inside the worker* (``llm.collective_rpc``: the worker's thread is the one
that runs the model and the sampler) together with the suite's step timers, and prints the top
functions by own time plus the per-step split (target forward, sampler, drafter). Why a tool and
not a suite: a profile is an explanation of one run, not a figure to compare between runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_PROFILER = []


def w_cprofile(worker, on, top=25, callers=None, sort="tottime", callees=None):
    """Start (``on``) or stop the worker's profiler; when stopping return the top rows (and,
    with ``callers``, a regular expression, who called the functions it matches; with ``callees``,
    what they called)."""
    import cProfile
    import io
    import pstats

    if on:
        prof = cProfile.Profile()
        _PROFILER.append(prof)
        prof.enable()
        return None
    prof = _PROFILER.pop()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats(sort).print_stats(top)
    if callers:
        stats.print_callers(callers)
    if callees:
        stats.print_callees(callees)
    return buf.getvalue()


_KERNEL_TIMES: dict = {}


def w_kernel_times(worker, on):
    """Time every launch of a ``kernels_cpu`` kernel behind a ``GridLauncher`` in the worker
    (Model Runner V2's grid-taking kernels), per kernel: ``{name: (calls, ms)}``."""
    from fastdispatch.vllm import _mrv2

    launchers = list(_mrv2._launchers.values())
    if on:
        _KERNEL_TIMES.clear()
        for launcher in launchers:
            fn = launcher.fn
            name = launcher.__name__

            def timed(*args, _fn=fn, _name=name, **kwargs):
                t = time.perf_counter()
                try:
                    return _fn(*args, **kwargs)
                finally:
                    calls, ms = _KERNEL_TIMES.get(_name, (0, 0.0))
                    _KERNEL_TIMES[_name] = (calls + 1, ms + (time.perf_counter() - t) * 1e3)

            timed.__wrapped__ = fn
            launcher.fn = timed
        return None
    for launcher in launchers:
        launcher.fn = getattr(launcher.fn, "__wrapped__", launcher.fn)
    return dict(sorted(_KERNEL_TIMES.items(), key=lambda kv: -kv[1][1]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument(
        "--setting",
        default="random",
        help="a key of bench.suites.engine.SETTINGS (random: T0.8; defaults: a model's)",
    )
    p.add_argument("--state", choices=("stock", "plugin", "fused", "onepass"), default="fused")
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--runner",
        choices=("v1", "v2"),
        default="v1",
        help="v2: Model Runner V2 (VLLM_USE_V2_MODEL_RUNNER=1) with the plugin; --state plugin",
    )
    p.add_argument("--json", help="write the step split as JSON here")
    p.add_argument("--callers", help="also print the callers of the functions this regex matches")
    p.add_argument("--callees", help="also print what the functions this regex matches call")
    p.add_argument(
        "--sort", default="tottime", choices=("tottime", "cumulative"), help="profile row order"
    )
    args = p.parse_args(argv)

    import tools.profile_engine_step as me  # the worker imports this module by this name
    from bench.suites import engine as E

    eng = E._Engine(args.vocab, runner=args.runner)
    try:
        prompts, params = E._prompts(args.vocab, args.batch), E._params(args.setting)
        if args.runner == "v1":
            eng.switch(args.state)
        eng.llm.generate(prompts, params, use_tqdm=False)  # warm
        eng.rpc(E._w_profile, True)
        eng.rpc(me.w_cprofile, True)
        eng.rpc(me.w_kernel_times, True)
        t = time.perf_counter()
        eng.llm.generate(prompts, params, use_tqdm=False)
        wall_ms = (time.perf_counter() - t) * 1e3
        kernels = eng.rpc(me.w_kernel_times, False)
        table = eng.rpc(me.w_cprofile, False, args.top, args.callers, args.sort, args.callees)
        split = E._summarise(eng.rpc(E._w_profile, False), wall_ms)
    finally:
        eng.users = 1
        eng.release()
    print(
        f"V={args.vocab} B={args.batch} k={E.K} {args.setting} runner={args.runner} "
        f"state={args.state}: "
        f"{json.dumps(split, indent=1)}"
    )
    if kernels:
        print("kernels_cpu grid launches (calls, ms in all):")
        for name, (calls, ms) in kernels.items():
            print(f"  {name:55s} {calls:6d} {ms:10.1f}")
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(split, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
