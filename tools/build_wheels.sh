#!/usr/bin/env bash
# Build the wheels a package index can serve: manylinux x86_64 wheels, one per Python, in dist/.
#
#   tools/build_wheels.sh [PYTHON_VERSION...]     default: 3.11 and every 3.10/3.12/3.13 pyenv has
#
# Per version: a build venv (.venv-wheel-3.X, gitignored) with Cython and setuptools only (torch
# is a run-time requirement, never a build one), `pip wheel --no-build-isolation` of the working
# tree, then tools/repair_wheel.sh: RPATH stripped, `auditwheel repair --exclude libgomp.so.1`
# (manylinux tag, GNU OpenMP not vendored: the process's one runtime is torch's; that script
# says why). The aarch64 wheel is built by tools/arm64_emulated.sh and repaired by the same script.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="$ROOT/dist"
mkdir -p "$OUT"

versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
    versions=(3.11)
    for v in 3.10 3.12 3.13; do
        ls -d "$HOME"/.pyenv/versions/"$v".* > /dev/null 2>&1 && versions+=("$v")
    done
fi

python_for() {  # the interpreter of version $1: the system's 3.11, else pyenv's newest $1.x
    local v=$1 p
    if command -v "python$v" > /dev/null 2>&1 && "python$v" -c 'import venv' 2> /dev/null; then
        command -v "python$v"
        return
    fi
    p=$(ls -d "$HOME"/.pyenv/versions/"$v".* 2> /dev/null | sort -V | tail -1)
    [ -n "$p" ] && [ -x "$p/bin/python$v" ] && { echo "$p/bin/python$v"; return; }
    return 1
}

# the working tree as CI sees it: tracked files plus untracked ones git does not ignore
SRC=$(mktemp -d "${TMPDIR:-/tmp}/fd-wheel-src.XXXXXX")
trap 'rm -rf "$SRC"' EXIT
git ls-files -co --exclude-standard | while IFS= read -r f; do
    [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"
done | tr '\n' '\0' | xargs -0 cp --parents -t "$SRC"

summary=()
rc=0
for v in "${versions[@]}"; do
    py=$(python_for "$v") || { summary+=("$v: no interpreter"); rc=1; continue; }
    venv="$ROOT/.venv-wheel-$v"
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    "$venv/bin/pip" install -q "Cython>=3.0" "setuptools>=77" wheel
    raw=$(mktemp -d "${TMPDIR:-/tmp}/fd-wheel-raw.XXXXXX")
    (cd "$SRC" && rm -rf build && "$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$raw" .) \
        || { summary+=("$v: pip wheel failed"); rc=1; continue; }
    if ! made=$("$ROOT"/tools/repair_wheel.sh "$raw"/*.whl "$OUT"); then
        summary+=("$v: tools/repair_wheel.sh failed")
        rc=1
        continue
    fi
    summary+=("$v: $(basename "$made")")
    rm -rf "$raw"
done

echo "build_wheels: dist/"
for line in "${summary[@]}"; do echo "  $line"; done
exit $rc
