"""What a suite hands the runner: groups of rows measured together, and how to build them.

A *group* is the unit of comparison: its rows are timed interleaved in one process (see
``bench._timing``) and each row's ratio is taken against the group's *anchor*, a row of the same
group measured in the same run. Suites declare their groups up front (id, row names, anchor) so
that ``--filter`` and the choice of interpreter are decided before any input is allocated; the
inputs are built only when the group runs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ._rows import RowDef
from ._timing import Case, Settings


class Unavailable(Exception):
    """A row (or a whole group) cannot be measured here; the message says why."""


def need(module: str, attr: Optional[str] = None):
    """The module ``module`` (or its attribute ``attr``), else :class:`Unavailable` saying why:
    a row whose implementation this interpreter cannot import is reported, not measured."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        raise Unavailable(f"{module} not importable: {type(exc).__name__}: {exc}") from exc
    if attr is None:
        return mod
    found = getattr(mod, attr, None)
    if found is None:
        raise Unavailable(f"{module} has no {attr}")
    return found


@dataclass
class Built:
    """A group ready to time: cases for the measurable rows, reasons for the others."""

    cases: list = field(default_factory=list)  # list[Case]
    unavailable: dict = field(default_factory=dict)  # row name -> reason
    switch: Optional[Callable[[Optional[str]], None]] = None
    state_order: Sequence = ()
    info: dict = field(default_factory=dict)  # group-level facts worth keeping in the JSON
    cleanup: Optional[Callable[[], None]] = None
    # verify({row name: pre-flight result}) -> {"ok": bool, "detail": str, ...}
    verify: Optional[Callable[[dict], dict]] = None

    def add(self, name: str, make: Callable[[], Case]) -> None:
        """Add a case built by ``make()``; an :class:`Unavailable` from it becomes a stated
        reason."""
        try:
            case = make()
        except Unavailable as exc:
            self.unavailable[name] = str(exc)
            return
        case.name = name
        self.cases.append(case)

    def switch_vllm(self, ctx, *states) -> None:
        """Time the rows in vLLM's ``states`` (``None``: as the process is; ``"stock"``,
        ``"installed"``, ...), switching in this order once per repeat, and restore vLLM
        afterwards -- where this interpreter has vLLM."""
        if ctx.vllm.importable:
            self.switch = ctx.vllm.switch
            self.state_order = states
            self.cleanup = ctx.vllm.restore


@dataclass
class GroupSpec:
    """A declared group. ``rows`` lists every row in display order (measured or not), each with
    its stable slug (``Row.key`` = ``"<id>/<slug>"``); ``anchor`` and ``vs`` name rows by their
    display name."""

    id: str
    suite: str
    title: str
    rows: Sequence[RowDef]
    anchor: Sequence[str]  # preference order: the first row actually measured is the anchor
    build: Callable[["Context"], Built]
    vs: dict = field(default_factory=dict)  # extra ratio columns: label -> row name
    needs_vllm: bool = False  # has rows that only a vLLM interpreter can measure
    params: dict = field(default_factory=dict)
    max_repeats: Optional[int] = None  # cap for groups whose every call costs ~0.1 s or more
    # groups of one family (consecutive, same interpreter) are timed in one interleaved pass,
    # so a costly state switch (stock vLLM <-> install()) happens once per repeat for all of them
    family: Optional[str] = None

    def __post_init__(self):
        self.rows = tuple(self.rows)
        names, slugs = [r.name for r in self.rows], [r.slug for r in self.rows]
        if len(set(names)) != len(names) or len(set(slugs)) != len(slugs):
            raise ValueError(f"group {self.id}: row names and slugs must be unique")
        self._keys = {r.name: f"{self.id}/{r.slug}" for r in self.rows}

    @property
    def names(self) -> tuple:
        return tuple(r.name for r in self.rows)

    def key(self, name: str) -> str:
        """The stable key of the row displayed as ``name``."""
        return self._keys[name]

    def required_rows(self) -> set:
        return set(self.anchor) | set(self.vs.values())


@dataclass
class Context:
    """What a suite may consult while declaring and building groups."""

    settings: Settings
    preset: str  # "quick" | "default" | "full"
    vllm: object  # bench._vllm.VllmSide for this interpreter
    interpreter: str  # "main" or "vllm-worker"
    options: dict = field(default_factory=dict)  # suite options from the command line
