"""Counts of why a drop-in handed a batch back to vLLM's own code, by reason.

The one-pass steps (``_spec_step_dropin`` for the V1 runner, ``_mrv2_verify`` for Model Runner
V2) serve a batch or give it to vLLM's function; each hand-back is counted under its reason (what
``verify --vllm`` and the reports show) and logged once per reason at DEBUG. Steps run on the
worker's thread, reports on any: the counts are behind a lock.
"""

from __future__ import annotations

import threading

from ._installation import logger


class Reasons:
    """Per-reason counts of ``what`` (e.g. "a speculative step took vLLM's path")."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def note(self, why: str) -> None:
        with self._lock:
            first = why not in self._counts
            self._counts[why] = self._counts.get(why, 0) + 1
        if first:
            logger.debug("fastdispatch: %s: %s", self._what, why)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
