"""The vLLM drop-in suite's fixtures. Imports vLLM only inside fixtures: the main suite (which has
no vLLM) loads this file when it walks the test tree."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: _vllm_helpers
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # the root: fdkit (not installed)


@pytest.fixture(scope="session")
def worker():
    """vLLM as a CPU worker leaves it after ``init_worker``: general plugins, then the hook."""
    from _vllm_helpers import init_worker_sequence

    import fastdispatch.vllm as fv

    init_worker_sequence()
    if not fv.installed():
        pytest.fail(
            "the vllm.general_plugins entry point did not install fastdispatch "
            "(is the package installed in this venv? tools/make_vllm_venv.sh does it)"
        )
    yield fv
    fv.install()


@pytest.fixture
def modes(worker):
    from _vllm_helpers import Modes

    m = Modes()
    yield m
    m.ours()
