"""Fuzz depth for the hypothesis tests, chosen by ``FASTDISPATCH_FUZZ``.

* ``fast`` (default, the README's test command): each test keeps the example count written
  next to it.
* ``light``: a quarter of it (at least ``LIGHT_FLOOR``). For the runs whose point is another
  build, interpreter or architecture -- AddressSanitizer, the debug CPython, linux/arm64 under
  emulation, the CPython matrix -- which ``.ci/run`` runs beside the main suite: they run every
  test, on fewer random inputs, and the example search itself is the main suite's job.
* ``deep``: every differential test runs at least ``DEEP_EXAMPLES`` (10,000) examples; a test
  whose examples are too costly for that (the Triton-interpreter parity tests, the launches
  forced across thread counts) names its own, smaller ``deep_examples`` and says why there.

Hypothesis lets a test's own ``@settings(max_examples=...)`` override any loaded profile, so a
profile alone cannot deepen these tests: they take their settings from ``fuzz_settings``
instead. Hypothesis still stops early when a strategy's search space is exhausted; run with
``--hypothesis-show-statistics`` to see how many examples each test really ran.

``FASTDISPATCH_SLOW_HOST=1`` (set by ``tools/arm64_emulated.sh`` and
``tools/debug_python_tests.sh``) drops hypothesis' per-example deadline: under emulation or a
debug interpreter a first call can take 20x its usual time, and the deadline would measure the
host instead of the code.
"""

import os

from hypothesis import settings

PROFILES = ("fast", "light", "deep")
DEEP_EXAMPLES = 10_000
LIGHT_DIVISOR = 4
LIGHT_FLOOR = 5

PROFILE = os.environ.get("FASTDISPATCH_FUZZ", "fast").strip().lower() or "fast"
if PROFILE not in PROFILES:
    # A typo must not quietly run the fast profile and be reported as a deep run.
    raise ValueError(f"FASTDISPATCH_FUZZ must be one of {PROFILES}, got {PROFILE!r}")

DEEP = PROFILE == "deep"
LIGHT = PROFILE == "light"

SLOW_HOST = os.environ.get("FASTDISPATCH_SLOW_HOST", "0").strip() not in ("", "0")
if SLOW_HOST:
    settings.register_profile("fastdispatch-slow-host", deadline=None)
    settings.load_profile("fastdispatch-slow-host")


def examples(fast_examples, deep_examples=None):
    """The example count for this profile: the fast count, the light one (never more), or the
    deep one (never fewer)."""
    if LIGHT:
        return min(fast_examples, max(LIGHT_FLOOR, fast_examples // LIGHT_DIVISOR))
    if not DEEP:
        return fast_examples
    return max(fast_examples, DEEP_EXAMPLES if deep_examples is None else deep_examples)


def fuzz_settings(fast_examples, *, deep_examples=None, **kwargs):
    """``hypothesis.settings`` with ``max_examples`` taken from the active profile."""
    return settings(max_examples=examples(fast_examples, deep_examples), **kwargs)
