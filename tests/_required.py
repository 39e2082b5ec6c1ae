"""What a test does when something it needs is not on this machine.

CI provides every prerequisite (the vLLM venv and its sources, the release wheels, vLLM's own
tests, the compiled extensions): there a missing one is a broken set-up, and the test fails.
Elsewhere it skips, saying what did not run and how to provide it -- never a silent pass.
"""

import os
from typing import NoReturn

import pytest


def missing(why: str) -> NoReturn:
    """Fail the calling test under CI (``CI`` set), skip it elsewhere; ``why`` says both."""
    __tracebackhide__ = True  # reported at the caller's line
    if os.environ.get("CI"):
        pytest.fail(why, pytrace=False)
    pytest.skip(why)
