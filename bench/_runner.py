"""Turn a declared group into a JSON group: build it, pre-flight every case, time, take ratios."""
from __future__ import annotations

import dataclasses
import gc
import time
import traceback
from typing import Optional

from ._model import Built, Context, GroupSpec, Unavailable
from ._timing import measure, paired_ratio


def row_selected(spec: GroupSpec, row: str, filt: Optional[str]) -> bool:
    return not filt or filt.lower() in f"{spec.id}/{row}".lower()


def group_selected(spec: GroupSpec, filt: Optional[str]) -> bool:
    return any(row_selected(spec, r, filt) for r in spec.rows)


def _empty_row(name: str, status: str, reason: Optional[str]) -> dict:
    return {
        "name": name, "status": status, "reason": reason, "anchor": False, "ns": None,
        "samples_ns": None, "loops": None, "repeats": None, "noisy": False, "ratio": None,
        "ratio_q1": None, "ratio_q3": None, "ratio_of_medians": None, "vs": {}, "meta": {},
    }


def _group_doc(spec: GroupSpec, ctx: Context, status: str, reason: Optional[str]) -> dict:
    return {
        "id": spec.id, "suite": spec.suite, "title": spec.title, "params": dict(spec.params),
        "interpreter": ctx.interpreter, "status": status, "reason": reason, "anchor": None,
        "vs": dict(spec.vs), "info": {}, "noisy": False, "wall_s": None, "rows": [],
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
        return None, f"{type(exc).__name__}: {exc} (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno})"


def run_group(spec: GroupSpec, ctx: Context, filt: Optional[str], progress=None) -> dict:
    """Build, measure and summarise one group. Never raises for a measurement problem."""
    t0 = time.perf_counter()
    doc = _run_group(spec, ctx, filt, progress)
    doc["wall_s"] = round(time.perf_counter() - t0, 3)
    return doc


def _run_group(spec: GroupSpec, ctx: Context, filt: Optional[str], progress=None) -> dict:
    keep = {r for r in spec.rows if row_selected(spec, r, filt)} | spec.required_rows()
    try:
        built: Built = spec.build(ctx)
    except Unavailable as exc:
        return _group_doc(spec, ctx, "skipped", str(exc))
    except Exception as exc:
        return _group_doc(spec, ctx, "error", f"building inputs failed: {type(exc).__name__}: {exc}")

    doc = _group_doc(spec, ctx, "ok", None)
    doc["info"] = dict(built.info)
    errors = {}
    try:
        cases = [c for c in built.cases if c.name in keep]
        # pre-flight in the case's state: catches a broken case before it poisons the group
        results = {}
        for case in cases:
            if built.switch is not None:
                built.switch(case.state)
            results[case.name], err = _preflight(case)
            if err:
                errors[case.name] = err
        cases = [c for c in cases if c.name not in errors]
        if built.verify is not None:
            # outputs of the pre-flight run, compared across rows: a fast wrong row is flagged
            doc["info"]["check"] = built.verify({n: r for n, r in results.items() if n not in errors})
        anchor = next((a for a in spec.anchor if any(c.name == a for c in cases)), None)
        if not cases:
            doc["status"] = "skipped"
            reasons = {**built.unavailable, **errors}
            doc["reason"] = "; ".join(f"{k}: {v}" for k, v in reasons.items()) or "nothing to measure"
        else:
            settings = ctx.settings
            if spec.max_repeats is not None and settings.repeats > spec.max_repeats:
                settings = dataclasses.replace(settings, repeats=spec.max_repeats)
                doc["info"]["repeats_capped_at"] = spec.max_repeats
            stats = measure(
                cases, settings, switch=built.switch, state_order=built.state_order,
                on_progress=(lambda t: progress(f"{spec.id}: {t}")) if progress else None,
            )
            doc["anchor"] = anchor
            for name in spec.rows:
                if name not in keep:
                    continue
                if name in stats:
                    st = stats[name]
                    row = _empty_row(name, "ok", None)
                    row.update(
                        anchor=name == anchor, ns=st.as_dict(), samples_ns=list(st.samples),
                        loops=st.loops, repeats=len(st.samples), noisy=st.noisy,
                    )
                    if anchor is not None:
                        row.update(paired_ratio(st, stats[anchor]))
                    for label, target in spec.vs.items():
                        if target in stats and stats[target].median > 0:
                            row["vs"][label] = st.median / stats[target].median
                        else:
                            row["vs"][label] = None
                    case = next(c for c in cases if c.name == name)
                    row["meta"] = dict(case.meta, **({"state": case.state} if case.state else {}))
                elif name in errors:
                    row = _empty_row(name, "error", errors[name])
                elif name in built.unavailable:
                    row = _empty_row(name, "unavailable", built.unavailable[name])
                else:
                    row = _empty_row(name, "unavailable", "not built by this suite here")
                doc["rows"].append(row)
            doc["noisy"] = any(r["noisy"] for r in doc["rows"])
    except Exception as exc:
        doc["status"] = "error"
        doc["reason"] = f"{type(exc).__name__}: {exc}"
        doc["rows"] = []
    finally:
        if built.cleanup is not None:
            try:
                built.cleanup()
            except Exception:
                pass
        del built
        gc.collect()
    return doc
