#!/usr/bin/env bash
# Create ./.venv with the pinned CPU build of torch and fastdispatch installed editable
# (the Cython extensions are compiled in place). Idempotent: re-running only refreshes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# Pin torch first: an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[test,bench]'
.venv/bin/python -c "import fastdispatch, kernels_cpu; print('fastdispatch backend:', fastdispatch.BACKEND, '| kernels_cpu OpenMP:', kernels_cpu.openmp_enabled())"
