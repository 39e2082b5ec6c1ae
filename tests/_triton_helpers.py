"""Whether Triton is installed, for the tests whose subject needs it.

Triton is absent where fastdispatch matters most (linux/arm64, macOS): the suite must pass there.
A test that needs Triton says so with :func:`require_triton`, which skips it when Triton is not
installed; a test that runs either way but expects different things branches on
:func:`triton_installed`. "Not installed" means no ``triton`` package at all: a Triton that is
there but fails to import is a failure, never a skip.

In CI (``CI`` set) Triton is installed by ``tools/setup_env.sh``, so a missing one is a broken
set-up: both helpers fail the test instead, unless the run is without Triton on purpose
(``FASTDISPATCH_TEST_NO_TRITON=1``, as ``tools/arm64_emulated.sh`` runs the suite).

A test file that checks itself again under Triton's interpreter (or another mode of a fresh
interpreter) runs itself with :func:`run_pytest` / :func:`interpreted_run`.
"""

import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

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


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_pytest(module_file, env, *args, timeout=900):
    """Run the test module ``module_file`` again in a subprocess (this tree first on its path,
    ``env`` over this environment, ``None`` removing a variable): the modes a test file checks
    in a fresh interpreter, such as Triton's interpreter (``TRITON_INTERPRET=1``)."""
    full = dict(os.environ)
    for name, value in env.items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    full["PYTHONPATH"] = ROOT + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "pytest", os.path.abspath(module_file), "-q"]
        + ["-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def interpreted_run(module_file, report, *args, env=None):
    """Run ``module_file`` once under ``TRITON_INTERPRET=1`` (and ``env``, as for
    :func:`run_pytest`): ``(process, outcomes)``, the outcomes per test name read from the
    JUnit XML written to ``report``."""
    env = {"TRITON_INTERPRET": "1", **(env or {})}
    proc = run_pytest(module_file, env, *args, f"--junitxml={report}")
    outcomes = {}
    if report.exists():
        for tc in ET.parse(report).getroot().iter("testcase"):
            failure = tc.find("failure")
            if failure is None:
                failure = tc.find("error")
            if tc.find("skipped") is not None:
                outcomes[tc.get("name")] = ("skipped", tc.find("skipped").get("message", ""))
            elif failure is not None:
                outcomes[tc.get("name")] = (
                    "failed",
                    (failure.get("message") or "") + "\n" + (failure.text or ""),
                )
            else:
                outcomes[tc.get("name")] = ("passed", "")
    return proc, outcomes


def assert_interpreted_passed(interpreter_run, key):
    """The test ``key`` of an :func:`interpreted_run` ran and passed."""
    __tracebackhide__ = True
    proc, outcomes = interpreter_run
    if key not in outcomes:
        # a crash's report starts with the frame that faulted (most recent call first): its
        # head, not the tail, names where
        fatal = proc.stderr.find("Fatal Python error")
        err = proc.stderr[fatal : fatal + 4000] if fatal >= 0 else proc.stderr[-4000:]
        pytest.fail(
            f"{key} did not run under the interpreter (rc={proc.returncode}):\n"
            f"{proc.stdout[-4000:]}\n{err}"
        )
    status, detail = outcomes[key]
    assert status == "passed", f"{key} {status} under the interpreter:\n{detail[-6000:]}"
