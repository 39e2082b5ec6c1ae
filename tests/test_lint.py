"""Lint and format: ``ruff check`` and ``ruff format --check`` pass on the whole tree.

The rules and the line length live in ``pyproject.toml`` (``[tool.ruff]``); running them here puts
them in the test command CI runs, so a finding fails the suite instead of piling up. Run from the
repository root, as a developer would, with the test interpreter's ruff (the ``test`` extra pins
it within one minor series: a new minor may restyle code or add checks to the selected rules).
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args):
    # --no-cache: nothing is written into the checkout; the tree is small enough to lint cold.
    cmd = [sys.executable, "-m", "ruff", *args, "--no-cache", "."]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_is_installed():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (
        "ruff is not importable by the test interpreter (it is in the `test` extra):\n"
        f"{proc.stdout}{proc.stderr}"
    )


def test_ruff_check_is_clean():
    proc = _ruff("check")
    assert proc.returncode == 0, f"ruff check found problems:\n{proc.stdout}{proc.stderr}"


def test_ruff_format_is_clean():
    proc = _ruff("format", "--check")
    assert proc.returncode == 0, (
        f"files not formatted as `ruff format` would (run it):\n{proc.stdout}{proc.stderr}"
    )
