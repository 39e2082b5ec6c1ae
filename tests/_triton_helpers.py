"""Whether Triton is installed, for the tests whose subject needs it.

Triton is absent where fastdispatch matters most (linux/arm64, macOS): the suite must pass there.
A test that needs Triton says so with :func:`require_triton`, which skips it when Triton is not
installed; a test that runs either way but expects different things branches on
:func:`triton_installed`. "Not installed" means no ``triton`` package at all: a Triton that is
there but fails to import is a failure, never a skip.

In CI (``CI`` set) Triton is installed by ``tools/setup_env.sh``, so a missing one is a broken
set-up: both helpers fail the test instead, unless the run is without Triton on purpose
(``FASTDISPATCH_TEST_NO_TRITON=1``, as ``tools/arm64_emulated.sh`` runs the suite).
"""

import importlib.util
import os

import pytest

NO_TRITON_ENV = "FASTDISPATCH_TEST_NO_TRITON"


def _installed():
    return importlib.util.find_spec("triton") is not None


def _missing_is_an_error():
    return bool(os.environ.get("CI")) and os.environ.get(NO_TRITON_ENV) != "1"


def triton_installed():
    """True when the ``triton`` package is installed; False when it is not and that is allowed
    (outside CI, or ``FASTDISPATCH_TEST_NO_TRITON=1``); fails the caller in CI otherwise."""
    __tracebackhide__ = True  # outcomes are reported at the caller's line
    if _installed():
        return True
    if _missing_is_an_error():
        pytest.fail(
            "Triton is not installed, but CI installs it (tools/setup_env.sh): the set-up is "
            f"broken. {NO_TRITON_ENV}=1 runs the suite without Triton on purpose.",
            pytrace=False,
        )
    return False


def require_triton(allow_module_level=False):
    """Skip the calling test (or module) when Triton is not installed; see the module doc."""
    __tracebackhide__ = True
    if not triton_installed():
        pytest.skip("needs Triton, which is not installed", allow_module_level=allow_module_level)
