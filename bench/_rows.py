"""The typed records of a run: a declared row (:class:`RowDef`) and a measured one (:class:`Row`).

A suite declares each row of a group as ``RowDef(slug, name)``: ``name`` is the label shown in
tables (free to change), ``slug`` a short id that never changes; ``Row.key`` =
``"<group id>/<slug>"`` (e.g. ``"launch/override/compiled"``) is how headlines and other readers
find a row. The runner turns each declared row into a :class:`Row`; the report writes it with
:func:`dataclasses.asdict`, so the JSON keeps the keys of schema ``fastdispatch-bench/1`` (plus
``key``), and :meth:`Row.from_dict` reads a row back (the vLLM worker's JSON, a saved run).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, Mapping, Optional

Status = Literal["ok", "unavailable", "error"]


@dataclass(frozen=True)
class RowDef:
    """A declared row: ``slug`` (stable, unique in its group) and ``name`` (display label)."""

    slug: str
    name: str


@dataclass(frozen=True)
class Summary:
    """Robust summary of a row's per-call times (ns) over the repeats."""

    median: float
    mean: float
    stdev: float
    min: float
    max: float
    q1: float
    q3: float
    rel_iqr: float
    rel_range: float


@dataclass(frozen=True)
class Row:
    """One row of a group, measured or not (``status`` says which; ``reason`` why not)."""

    name: str
    status: Status
    key: str = ""  # "<group id>/<slug>": the stable id readers use
    reason: Optional[str] = None
    anchor: bool = False
    ns: Optional[Summary] = None
    samples_ns: Optional[tuple] = None  # per-call ns of every repeat, in repeat order
    loops: Optional[int] = None
    repeats: Optional[int] = None
    noisy: bool = False
    ratio: Optional[float] = None
    ratio_q1: Optional[float] = None
    ratio_q3: Optional[float] = None
    ratio_of_medians: Optional[float] = None
    vs: Mapping[str, Optional[float]] = field(default_factory=dict)
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def median(self) -> Optional[float]:
        return self.ns.median if self.ns is not None else None

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if d["samples_ns"] is not None:
            d["samples_ns"] = list(d["samples_ns"])
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "Row":
        known = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if kw.get("ns") is not None:
            kw["ns"] = Summary(**kw["ns"])
        if kw.get("samples_ns") is not None:
            kw["samples_ns"] = tuple(kw["samples_ns"])
        kw["vs"] = dict(kw.get("vs") or {})
        kw["meta"] = dict(kw.get("meta") or {})
        return cls(**kw)


def as_row(r) -> Row:
    """``r`` as a :class:`Row` (a row read back from JSON is a dict)."""
    return r if isinstance(r, Row) else Row.from_dict(r)


def rows_of(group: Mapping) -> list:
    """A group's rows as :class:`Row` records."""
    return [as_row(r) for r in group.get("rows") or ()]


def json_default(obj):
    """``json.dump(..., default=json_default)``: rows (and any other record) as plain dicts."""
    if isinstance(obj, Row):
        return obj.as_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def fmt_ns(ns) -> str:
    """A time in ns as the tables and headlines show it (``"152 ns"``, ``"2.49 µs"``)."""
    if ns is None:
        return "-"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"
