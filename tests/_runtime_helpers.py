"""Shared helpers of the runtime tests (``test_runtime_*.py``); their fixtures are in
``conftest.py``.

``core`` runs a test once against the compiled module (``fastdispatch._core``) and once against
its pure-Python twin (``fastdispatch._core_py``): the two must behave identically. The compiled
one is imported, not skipped: a missing build fails these tests. ``registry_core`` does the same
for the registry, which builds its overrides with whichever module it is pointed at.
"""

import importlib
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("cython", "python")
MODULES = {"cython": "fastdispatch._core", "python": "fastdispatch._core_py"}


def contract_args(kernel):
    """The argument names of ``kernel`` in launch order, from its contract
    (``kernels_cpu.contracts``): the real kernels' signatures the runtime's launches bind to."""
    from kernels_cpu.contracts import contract

    return tuple(a.name for a in contract(kernel).args)


def load_core(name):
    return importlib.import_module(MODULES[name])


def run_python(code, env=None, timeout=240):
    """Run ``code`` in a fresh interpreter with the repo and tests dir importable."""
    full_env = dict(os.environ)
    full_env.pop("FASTDISPATCH_PURE_PYTHON", None)
    full_env.pop("TRITON_INTERPRET", None)
    full_env["PYTHONPATH"] = os.pathsep.join([ROOT, TESTS, full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({proc.returncode})\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}"
        )
    return proc


#: Source of a sys.meta_path finder that refuses to import the named top-level modules.
BLOCKER = """
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.names or fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked)", name=fullname)
        return None

def block(*names):
    sys.meta_path.insert(0, _Block(names))
"""
