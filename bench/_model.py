"""What a suite hands the runner: groups of rows measured together, and how to build them.

A *group* is the unit of comparison: its rows are timed interleaved in one process (see
``bench._timing``) and each row's ratio is taken against the group's *anchor*, a row of the same
group measured in the same run. Suites declare their groups up front (id, row names, anchor) so
that ``--filter`` and the choice of interpreter are decided before any input is allocated; the
inputs are built only when the group runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ._timing import Case, Settings


class Unavailable(Exception):
    """A row (or a whole group) cannot be measured here; the message says why."""


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


@dataclass
class GroupSpec:
    """A declared group. ``rows`` lists every row name in display order (measured or not)."""

    id: str
    suite: str
    title: str
    rows: Sequence[str]
    anchor: Sequence[str]  # preference order: the first row actually measured is the anchor
    build: Callable[["Context"], Built]
    vs: dict = field(default_factory=dict)  # extra ratio columns: label -> row name
    needs_vllm: bool = False  # has rows that only a vLLM interpreter can measure
    params: dict = field(default_factory=dict)
    max_repeats: Optional[int] = None  # cap for groups whose every call costs ~0.1 s or more
    # groups of one family (consecutive, same interpreter) are timed in one interleaved pass,
    # so a costly state switch (stock vLLM <-> install()) happens once per repeat for all of them
    family: Optional[str] = None

    def required_rows(self) -> set:
        return set(self.anchor) | set(self.vs.values())


@dataclass
class Context:
    """What a suite may consult while declaring and building groups."""

    settings: Settings
    preset: str  # "quick" | "default" | "full"
    vllm: object  # bench._vllm.VllmSide for this interpreter
    interpreter: str  # "main" or "vllm-worker"
