"""Turn a declared group into a JSON group: build it, pre-flight every case, time, take ratios."""

from __future__ import annotations

import dataclasses
import gc
import time
import traceback
from typing import Optional

from ._model import Built, Context, GroupSpec, Unavailable
from ._rows import Row, Summary
from ._timing import measure, paired_ratio


def row_selected(spec: GroupSpec, row: str, filt: Optional[str]) -> bool:
    """Whether ``filt`` is in the row's ``group/name`` or in its stable key (case-insensitive)."""
    if not filt:
        return True
    f = filt.lower()
    return f in f"{spec.id}/{row}".lower() or f in spec.key(row).lower()


def group_selected(spec: GroupSpec, filt: Optional[str]) -> bool:
    return any(row_selected(spec, r, filt) for r in spec.names)


def _empty_row(spec: GroupSpec, name: str, status: str, reason: Optional[str]) -> Row:
    return Row(name=name, status=status, key=spec.key(name), reason=reason)


def _group_doc(spec: GroupSpec, ctx: Context, status: str, reason: Optional[str]) -> dict:
    return {
        "id": spec.id,
        "suite": spec.suite,
        "title": spec.title,
        "params": dict(spec.params),
        "interpreter": ctx.interpreter,
        "status": status,
        "reason": reason,
        "anchor": None,
        "vs": dict(spec.vs),
        "info": {},
        "noisy": False,
        "wall_s": None,
        "rows": [],
    }


def _preflight(case):
    """Run a case once outside timing; return ``(result, error text or None)``."""
    try:
        if case.setup is not None:
            case.setup()
        if case.fn is not None:
            return case.fn(), None
        try:
            code = compile(case.stmt, "<case>", "eval")
        except SyntaxError:
            exec(case.stmt, dict(case.namespace))
            return None, None
        return eval(code, dict(case.namespace)), None
    except Exception as exc:  # reported in the row, the rest of the group still runs
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return (
            None,
            f"{type(exc).__name__}: {exc} (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno})",
        )


class _Prepared:
    """A group built and pre-flighted, waiting for its cases to be timed."""

    def __init__(self, spec, doc, built=None, cases=(), errors=None, anchor=None, keep=()):
        self.spec, self.doc, self.built = spec, doc, built
        self.cases, self.errors, self.anchor, self.keep = list(cases), errors or {}, anchor, keep
        self.results = {}

    @property
    def measurable(self) -> bool:
        return self.doc["status"] == "ok" and bool(self.cases)


def _build(spec: GroupSpec, ctx: Context, filt: Optional[str]) -> _Prepared:
    keep = {r for r in spec.names if row_selected(spec, r, filt)} | spec.required_rows()
    try:
        built: Built = spec.build(ctx)
    except Unavailable as exc:
        return _Prepared(spec, _group_doc(spec, ctx, "skipped", str(exc)))
    except Exception as exc:
        return _Prepared(
            spec,
            _group_doc(spec, ctx, "error", f"building inputs failed: {type(exc).__name__}: {exc}"),
        )
    doc = _group_doc(spec, ctx, "ok", None)
    doc["info"] = dict(built.info)
    return _Prepared(spec, doc, built, [c for c in built.cases if c.name in keep], keep=keep)


def _preflight_all(preps) -> None:
    """Run every case once, in its state, before any timing: a broken case is reported in its
    row instead of poisoning its group, and the outputs feed each group's ``verify``. Cases are
    visited state by state across all groups, so a family switches state once per state."""
    live = [p for p in preps if p.doc["status"] == "ok"]
    order = {}
    for p in live:
        for s in list(p.built.state_order) + [c.state for c in p.cases]:
            order.setdefault(s, len(order))
    for state in sorted(order, key=order.get):
        for p in live:
            for case in p.cases:
                if case.state != state:
                    continue
                try:
                    if p.built.switch is not None:
                        p.built.switch(case.state)
                except Exception as exc:
                    p.errors[case.name] = f"entering state {case.state!r} failed: {exc}"
                    continue
                p.results[case.name], err = _preflight(case)
                if err:
                    p.errors[case.name] = err
    for p in live:
        doc, built, spec = p.doc, p.built, p.spec
        try:
            p.cases = [c for c in p.cases if c.name not in p.errors]
            if built.verify is not None:
                # outputs of the pre-flight run, compared across rows: a fast wrong row is flagged
                doc["info"]["check"] = built.verify(
                    {n: r for n, r in p.results.items() if n not in p.errors}
                )
            p.anchor = next((a for a in spec.anchor if any(c.name == a for c in p.cases)), None)
            if not p.cases:
                doc["status"] = "skipped"
                reasons = {**built.unavailable, **p.errors}
                doc["reason"] = (
                    "; ".join(f"{k}: {v}" for k, v in reasons.items()) or "nothing to measure"
                )
        except Exception as exc:
            doc["status"], doc["reason"] = "error", f"{type(exc).__name__}: {exc}"
        p.results = {}


def _finish(prep: _Prepared, stats: dict) -> dict:
    """Fill the group's rows from ``stats`` ({row name: Stats})."""
    spec, doc, built, anchor = prep.spec, prep.doc, prep.built, prep.anchor
    doc["anchor"] = anchor
    for name in spec.names:
        if name not in prep.keep:
            continue
        if name in stats:
            st = stats[name]
            ratios = paired_ratio(st, stats[anchor]) if anchor is not None else {}
            vs = {}
            for label, target in spec.vs.items():
                ok = target in stats and stats[target].median > 0
                vs[label] = st.median / stats[target].median if ok else None
            case = next(c for c in prep.cases if c.name == name)
            row = Row(
                name=name,
                status="ok",
                key=spec.key(name),
                anchor=name == anchor,
                ns=Summary(**st.as_dict()),
                samples_ns=tuple(st.samples),
                loops=st.loops,
                repeats=len(st.samples),
                noisy=st.noisy,
                vs=vs,
                meta=dict(case.meta, **({"state": case.state} if case.state else {})),
                **ratios,
            )
        elif name in prep.errors:
            row = _empty_row(spec, name, "error", prep.errors[name])
        elif built is not None and name in built.unavailable:
            row = _empty_row(spec, name, "unavailable", built.unavailable[name])
        else:
            row = _empty_row(spec, name, "unavailable", "not built by this suite here")
        doc["rows"].append(row)
    doc["noisy"] = any(r.noisy for r in doc["rows"])
    return doc


def _release(prep: _Prepared) -> None:
    if prep.built is not None and prep.built.cleanup is not None:
        try:
            prep.built.cleanup()
        except Exception:
            pass
    prep.built = None
    prep.cases = []


def _settings_for(specs, ctx, docs):
    settings = ctx.settings
    caps = [s.max_repeats for s in specs if s.max_repeats is not None]
    if caps and settings.repeats > min(caps):
        settings = dataclasses.replace(settings, repeats=min(caps))
        for d in docs:
            d["info"]["repeats_capped_at"] = min(caps)
    return settings


def run_family(specs, ctx: Context, filt: Optional[str], progress=None) -> list:
    """Measure one group, or several in *one* interleaved pass (one ``measure`` call).

    Every group goes through here (``bench.__main__`` batches them): one group alone, or a
    family of groups that share a costly process-wide state switch (stock vLLM vs
    ``install()``): per repeat every case of every group is sampled once, state blocks in ABBA
    order, so the state switches once per repeat for the whole family instead of once per
    repeat per group. Ratios stay within each group (anchor of the same grid point, same
    repeat). Never raises for a measurement problem.
    """
    t0 = time.perf_counter()
    preps = []
    try:
        for spec in specs:
            if progress:
                progress(f"{spec.id}: building inputs")
            preps.append(_build(spec, ctx, filt))
        if progress:
            progress(f"{specs[0].id}: pre-flight")
        _preflight_all(preps)
        live = [p for p in preps if p.measurable]
        if live:
            merged, owner = [], {}
            for p in live:
                for c in p.cases:
                    key = c.name if len(live) == 1 else f"{p.spec.id}::{c.name}"
                    merged.append(dataclasses.replace(c, name=key))
                    owner[key] = (p, c.name)
            first = live[0].built
            label = live[0].spec.id if len(live) == 1 else f"{live[0].spec.id} (+{len(live) - 1})"
            settings = _settings_for([p.spec for p in live], ctx, [p.doc for p in live])
            try:
                stats = measure(
                    merged,
                    settings,
                    switch=first.switch,
                    state_order=first.state_order,
                    on_progress=(lambda t: progress(f"{label}: {t}")) if progress else None,
                )
            except Exception as exc:
                for p in live:
                    p.doc.update(status="error", reason=f"{type(exc).__name__}: {exc}", rows=[])
            else:
                per = {id(p): {} for p in live}
                for key, st in stats.items():
                    p, row = owner[key]
                    per[id(p)][row] = st
                for p in live:
                    _finish(p, per[id(p)])
    finally:
        for p in preps:
            _release(p)
        gc.collect()
    wall = round(time.perf_counter() - t0, 3)
    for p in preps:
        p.doc["wall_s"] = round(wall / len(preps), 3)
        if len(preps) > 1:
            p.doc["info"]["family"] = {"groups": len(preps), "wall_s": wall}
    return [p.doc for p in preps]
