"""``FASTDISPATCH_FUZZ``'s profiles (tests/_fuzz.py) give the example counts they promise: CI's
build, sanitizer and emulated steps run ``light`` and the deep runs ``deep``, so a wrong count
would quietly change what those runs search."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

PROBE = "import _fuzz; print([_fuzz.examples(n) for n in (100, 30, 8, 3)], _fuzz.examples(30, 500))"


def _counts(profile):
    env = dict(os.environ, FASTDISPATCH_FUZZ=profile, PYTHONPATH=str(TESTS))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    return proc


@pytest.mark.parametrize(
    "profile, want",
    [
        ("fast", "[100, 30, 8, 3] 30"),
        ("", "[100, 30, 8, 3] 30"),
        ("light", "[25, 7, 5, 3] 7"),  # a quarter, at least 5, never more than fast
        ("deep", "[10000, 10000, 10000, 10000] 500"),
    ],
)
def test_each_profile_gives_its_counts(profile, want):
    proc = _counts(profile)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == want


def test_an_unknown_profile_is_refused_by_name():
    proc = _counts("lite")
    assert proc.returncode != 0
    assert "FASTDISPATCH_FUZZ must be one of" in proc.stderr and "'lite'" in proc.stderr
