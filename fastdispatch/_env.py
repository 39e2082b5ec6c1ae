"""One rule for fastdispatch's boolean environment variables.

    from fastdispatch._env import env_flag
    env_flag("FASTDISPATCH_PURE_PYTHON")   # True, False, or None (unset)

Every switch (``FASTDISPATCH_PURE_PYTHON``, ``FASTDISPATCH_OPS_CPU_KERNELS``, the vLLM plugin's
``FASTDISPATCH_VLLM_*``) is read by :func:`env_flag`, so one spelling means the same everywhere:
``1``/``true``/``yes``/``on`` is ``True``, ``0``/``false``/``no``/``off`` is ``False`` (case and
surrounding blanks ignored), and an unset or empty variable is ``default`` -- ``None`` unless the
caller gives one, so that a caller with three behaviours (the plugin: off, forced, or decide by
itself) can tell "not set" from "set to 0".

Any other value is a mistake in the environment, not a third meaning: it reads as unset (the
caller's default behaviour) and says so, once per variable and value -- a WARNING record on the
``fastdispatch.env`` logger and a ``RuntimeWarning`` (both, because the logger has only a
``NullHandler`` unless the application configures logging; see :mod:`fastdispatch._log`). Not an
exception: these variables are read at import (``import fastdispatch``, ``fastdispatch.ops``) and
in a vLLM worker's start-up (the plugin), where raising would take the process down over a typo
that has a safe reading.
"""

from __future__ import annotations

import os
import threading

from ._log import get_logger, warn_both

__all__ = ["FALSE", "TRUE", "env_flag"]

logger = get_logger("env")

#: The spellings read as ``True`` and ``False`` (compared lower-cased, blanks stripped).
TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})

_reported: set[tuple[str, str]] = set()
_lock = threading.Lock()


def env_flag(name: str, default: bool | None = None) -> bool | None:
    """``True``/``False`` for the switch ``name`` in ``os.environ``; ``default`` when it is unset
    or empty, or holds anything but the spellings in :data:`TRUE` and :data:`FALSE` (reported
    once per variable and value, see the module)."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    with _lock:
        first = (name, raw) not in _reported
        _reported.add((name, raw))
    if first:
        message = (
            f"fastdispatch: {name}={raw!r} is not a boolean switch (use 1/true/yes/on or "
            "0/false/no/off); read as unset"
        )
        warn_both(logger, message, stacklevel=2)
    return default
