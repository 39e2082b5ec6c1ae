"""Timing discipline shared by every suite: one place decides how a number is obtained.

The rules are pyperf's, applied to cases compared side by side in one process:

* **Warm-up**: each case runs once at its calibrated loop count before any sample is kept, so
  caches, lazy imports and allocator pools are hot for every case alike (a case slower than
  ``min_time`` is calibrated by a single run, which then counts as its warm-up).
* **Calibrated loops**: a sample times ``loops`` back-to-back executions; ``loops`` doubles until
  one sample lasts at least ``min_time`` seconds, so timer resolution and loop overhead stay
  negligible.
  Cases that are already slower than ``min_time`` run once per sample.
* **Many repeats, robust statistics**: the figure reported is the median of the per-call times of
  ``repeats`` samples; spread is reported as min–max and as the interquartile range (IQR).
* **gc disabled** around every timed loop (re-enabled in between, so garbage from one case is not
  collected inside another's loop).
* **A/B interleaving**: every repeat takes one sample of *every* case of a group before the next
  repeat starts, so slow drift (thermal, another process on a shared core) hits all cases alike. The
  visiting order is reversed on every other repeat (ABBA), which cancels linear drift within a
  repeat and means a case that needs a process-wide *state* (e.g. "stock vLLM" vs "vLLM with our
  kernels installed") switches state once per repeat, not once per sample.
* **Ratios in the same run**: each case's ratio to the group's anchor is the median of the
  per-repeat ratios (sample of the case / sample of the anchor from the same repeat), so drift
  between repeats cancels too.
* **Noise is reported, never hidden**: a case whose IQR exceeds ``NOISE_THRESHOLD`` of its median is
  flagged ``noisy``; no figure is ever turned into a pass/fail.

Statements are timed through :mod:`timeit`-style compiled loops (the statement is compiled into the
loop body), so a 40 ns call is not drowned by a Python-level wrapper call per iteration.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import time
import timeit
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

#: A case whose interquartile range exceeds this fraction of its median is flagged ``noisy``.
NOISE_THRESHOLD = 0.10

#: ``Settings.clock`` -> the clock a sample is read from. ``cpu`` is the process's CPU time (all
#: threads summed): a figure that stays meaningful on an oversubscribed machine (use it with
#: ``--threads 1``); ``wall`` (the default) is what a caller waits.
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.process_time_ns}


@dataclass(frozen=True)
class Settings:
    """How hard to measure. Presets: :data:`QUICK`, :data:`DEFAULT`, :data:`FULL`."""

    name: str
    repeats: int
    min_time: float  # seconds per sample, lower bound reached by calibrating ``loops``
    warmup: int = 1  # discarded samples per case
    max_loops: int = 1 << 22
    clock: str = "wall"  # a key of CLOCKS

    def as_dict(self) -> dict:
        return {
            "preset": self.name,
            "repeats": self.repeats,
            "min_time_s": self.min_time,
            "warmup_samples": self.warmup,
            "noise_threshold": NOISE_THRESHOLD,
            "timer": f"time.{CLOCKS[self.clock].__name__}",
        }


QUICK = Settings("quick", repeats=7, min_time=0.004)
DEFAULT = Settings("default", repeats=15, min_time=0.02)
FULL = Settings("full", repeats=31, min_time=0.05)


@dataclass
class Case:
    """One thing to time.

    Give either ``stmt`` (a statement string compiled into the timing loop, names from
    ``namespace``) or ``fn`` (a zero-argument callable; timed as ``fn()``). ``state`` names a
    process-wide state the case needs; ``switch`` (given to :func:`measure`) is called to enter
    it.
    ``setup`` (optional) runs before each sample, outside the timed loop (e.g. refill a buffer).
    """

    name: str
    stmt: Optional[str] = None
    fn: Optional[Callable[[], Any]] = None
    namespace: dict = field(default_factory=dict)
    state: Optional[str] = None
    setup: Optional[Callable[[], Any]] = None
    meta: dict = field(default_factory=dict)

    def compile(self, clock: Callable[[], int] = time.perf_counter_ns) -> Callable[[int], int]:
        """Return ``run(loops) -> elapsed_ns`` with the statement inlined into the loop body."""
        if (self.stmt is None) == (self.fn is None):
            raise ValueError(f"case {self.name!r}: give exactly one of stmt= or fn=")
        ns = dict(self.namespace)
        stmt = self.stmt
        if stmt is None:
            ns["_bench_fn"] = self.fn
            stmt = "_bench_fn()"
        timer = timeit.Timer(stmt, globals=ns, timer=clock)
        inner = timer.inner

        def run(loops: int) -> int:
            return inner(itertools.repeat(None, loops), clock)

        return run


@dataclass
class Stats:
    """Per-call times (ns) of one case over the repeats, with robust summaries."""

    samples: list  # per-call ns, one per repeat, in repeat order
    loops: int

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def quartiles(self) -> tuple:
        return _quartiles(self.samples)

    def as_dict(self) -> dict:
        s = self.samples
        q1, q3 = self.quartiles()
        med = self.median
        return {
            "median": med,
            "mean": statistics.fmean(s),
            "stdev": statistics.stdev(s) if len(s) > 1 else 0.0,
            "min": min(s),
            "max": max(s),
            "q1": q1,
            "q3": q3,
            "rel_iqr": (q3 - q1) / med if med > 0 else 0.0,
            "rel_range": (max(s) - min(s)) / med if med > 0 else 0.0,
        }

    @property
    def noisy(self) -> bool:
        q1, q3 = self.quartiles()
        return self.median > 0 and (q3 - q1) / self.median > NOISE_THRESHOLD


def _quartiles(values: Sequence[float]) -> tuple:
    if len(values) < 2:
        v = values[0] if values else 0.0
        return v, v
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def paired_ratio(case: Stats, anchor: Stats) -> dict:
    """Median and IQR of the per-repeat ratios ``case[r] / anchor[r]``.

    Pairing samples from the same repeat cancels drift between repeats; the ratio of medians is
    reported next to it as a cross-check.
    """
    ratios = [c / a for c, a in zip(case.samples, anchor.samples) if a > 0]
    if not ratios:
        return {"ratio": None, "ratio_q1": None, "ratio_q3": None, "ratio_of_medians": None}
    q1, q3 = _quartiles(ratios)
    am = anchor.median
    return {
        "ratio": statistics.median(ratios),
        "ratio_q1": q1,
        "ratio_q3": q3,
        "ratio_of_medians": case.median / am if am > 0 else None,
    }


class _GcOff:
    """Disable the cyclic gc for the duration of a timed loop, restoring the previous state."""

    def __enter__(self):
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self._was:
            gc.enable()
        return False


def calibrate(run: Callable[[int], int], settings: Settings, setup=None) -> int:
    """Smallest power-of-two loop count whose sample lasts at least ``settings.min_time``."""
    target_ns = settings.min_time * 1e9
    loops = 1
    while True:
        if setup is not None:
            setup()
        with _GcOff():
            elapsed = run(loops)
        if elapsed >= target_ns or loops >= settings.max_loops:
            return loops
        if elapsed <= 0:
            loops *= 16
            continue
        # jump close to the target, then let doubling settle it (never more than 16x at once)
        factor = min(16, max(2, int(target_ns / elapsed)))
        loops = min(settings.max_loops, loops * factor)


def measure(
    cases: Sequence[Case],
    settings: Settings,
    *,
    switch: Optional[Callable[[Optional[str]], None]] = None,
    on_progress: Optional[Callable[[str], None]] = None,
    state_order: Sequence[Optional[str]] = (),
) -> dict:
    """Time ``cases`` interleaved; return ``{case.name: Stats}``.

    ``switch(state)`` is called whenever the next case needs a different state than the current
    one (including before the first case with a state). ``state_order`` fixes the order in which
    state blocks are visited on even repeats (reversed on odd repeats); cases keep their relative
    order within a block.
    """
    if not cases:
        return {}
    order_index = {s: i for i, s in enumerate(state_order)}
    for c in cases:  # unlisted states keep their first-appearance order, after the listed ones
        order_index.setdefault(c.state, len(order_index))
    ordered = sorted(enumerate(cases), key=lambda ic: (order_index[ic[1].state], ic[0]))
    ordered = [c for _, c in ordered]
    runs = {c.name: c.compile(CLOCKS[settings.clock]) for c in ordered}
    current = [object()]  # sentinel: no state entered yet

    def enter(case: Case):
        if switch is not None and case.state != current[0]:
            switch(case.state)
            current[0] = case.state

    def sample(case: Case, loops: int) -> float:
        if case.setup is not None:
            case.setup()
        with _GcOff():
            elapsed = runs[case.name](loops)
        return elapsed / loops

    loops = {}
    # calibration (which doubles as the first warm-up) walks the order backwards, so it ends in
    # the state the first repeat starts with
    for case in ordered[::-1]:
        enter(case)
        if on_progress:
            on_progress(f"calibrating {case.name}")
        loops[case.name] = calibrate(runs[case.name], settings, case.setup)
        # a case slower than min_time was calibrated in one run: that run was its warm-up
        for _ in range(settings.warmup if loops[case.name] > 1 else settings.warmup - 1):
            sample(case, loops[case.name])

    samples = {c.name: [] for c in ordered}
    for r in range(settings.repeats):
        visit = ordered if r % 2 == 0 else ordered[::-1]
        if on_progress:
            on_progress(f"repeat {r + 1}/{settings.repeats}")
        for case in visit:
            enter(case)
            samples[case.name].append(sample(case, loops[case.name]))
    return {name: Stats(samples[name], loops[name]) for name in samples}
