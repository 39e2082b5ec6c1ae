#!/usr/bin/env bash
# Check what we ship: the sdist and wheel that `python -m build` makes, the compiler flags they
# are built with, a build without OpenMP, and a clang build without it (the macOS configuration).
#
# Usage: tools/check_builds.sh [--keep]
#
# Steps (each in a temporary work directory; the checkout's in-place .so files are never touched,
# since other processes import them):
#   1. copy      the working tree (tracked files plus untracked, non-ignored ones -- no build
#                outputs) to WORK/src.
#   2. build     `python -m build` there: an sdist, then the wheel built *from that sdist* in an
#                isolated build environment (pyproject's build requirements only: a file missing
#                from the sdist fails the wheel build, and torch must not be needed to build).
#   3. contents  the wheel holds every package source of the tree (.py, .pyx, .pxd, .pyi, py.typed)
#                and one compiled extension per .pyx, and nothing but the product: top level only
#                fastdispatch/, kernels_cpu/ and the dist-info, no fdkit, _floor, bench,
#                reference or ops/testing file; the sdist holds the .pyx/.pxd sources,
#                setup.py, pyproject.toml, MANIFEST.in, README.md, and no .so or generated .c.
#   4. flags     every compile command in the build log: -O3 (or -O2), -ffp-contract=off, no
#                -march=/-mtune=native, no -ffast-math/-Ofast; -fopenmp only on kernels_cpu
#                modules, and there only when the compiler supports it (then
#                kernels_cpu._parallel needs libgomp.so.1); no compiler warning in the log.
#   5. wheel     a throwaway venv (no system site-packages) gets the pinned CPU torch and the
#                wheel with its declared dependencies; from outside the tree: the modules load
#                from that venv, the backend is compiled, and a launch through the whole path
#                (op -> launch owner -> override -> kernels_cpu) matches the plain-torch reference
#                (fdkit.reference, read from the source tree: the wheel does not carry it).
#   5b. manylinux  tools/repair_wheel.sh on that same wheel (the one built from the sdist): the
#                wheel an index can serve (manylinux x86_64 tag, no vendored library -- libgomp
#                above all --, no RPATH, libgomp.so.1 needed by SONAME), installed over the first
#                one: `python -m fastdispatch info` shows the compiled backend, and the process has
#                exactly one OpenMP runtime, torch's, whose thread count torch.set_num_threads sets.
#                (tools/build_wheels.sh, the route from a checkout, runs in the CPython matrix.)
#   6. clang, no OpenMP  the macOS configuration as far as this host can have it, and the build
#                without OpenMP: a second copy (WORK/clang) built with CC=clang and
#                FASTDISPATCH_NO_OPENMP=1 (Apple's clang has no OpenMP); every module compiled by
#                clang (its .comment section), no -fopenmp in its log, no libgomp in its .so
#                files, openmp_enabled() is False, and the kernel and fused tests
#                (tests/test_kernels_*.py, tests/test_fused_*.py) and the fork/thread robustness
#                tests pass against it, in one serial pytest process. Compiler warnings are
#                listed, not fatal (Cython's serial prange leaves a set-but-unused variable
#                behind). clang is apt-get installed when missing and we are root. The OpenMP
#                build is GCC's everywhere else (steps 2-5b, the whole suite); GCC without OpenMP
#                compiles the same serial loops clang does here.
#
# Environment: CLANG (default clang) for step 6.
# PYTHON (default .venv/bin/python, else python3) builds and runs the tests; it needs
# pip and the test extras (tools/setup_env.sh makes such a .venv); the `build` package and the
# build requirements (Cython>=3.0, setuptools>=77) are pip-installed into it when missing.
# TORCH_SPEC (default torch==2.13.0) is what the throwaway venv installs. TMPDIR.
#
# Exit status: 0 when every check passed, 1 when one failed (its log is printed), 2 on usage.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
keep=0
for arg in "$@"; do
    case "$arg" in
        --keep) keep=1 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "check_builds: unknown argument $arg" >&2; exit 2 ;;
    esac
done

. "$ROOT/tools/_pick_python.sh" check_builds
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

T0=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastdispatch-builds.XXXXXX") || exit 2
RM_PID=""
cleanup() {
    if [ -n "$RM_PID" ]; then wait "$RM_PID" 2> /dev/null; fi
    if [ $keep -eq 1 ]; then echo "check_builds: work directory kept: $WORK"; else rm -rf "$WORK"; fi
    echo "check_builds: done in $(( SECONDS - T0 ))s"
}
trap cleanup EXIT

. "$ROOT/tools/_steps.sh" check_builds

echo "check_builds: python $PY | work $WORK"

# The checks must not inherit a developer's build knobs.
unset FASTDISPATCH_NO_OPENMP FASTDISPATCH_NATIVE FASTDISPATCH_SANITIZE FASTDISPATCH_EXTENSIONS FASTDISPATCH_OPT_LEVEL \
    FASTDISPATCH_PURE_PYTHON PYTHONPATH

copy_tree() {   # destination
    mkdir -p "$1"
    # Tracked files as they are in the working tree, plus untracked non-ignored ones; a tracked
    # file deleted in the working tree is skipped. Ignored outputs (*.so, *.c, build/) stay out.
    (cd "$ROOT" && git ls-files -co --exclude-standard --deduplicate -z \
        | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
        | tar --null -T - -cf -) | tar -xf - -C "$1"
}

# Checks the compile commands of a build log. mode: openmp | no-openmp | auto (openmp when the
# log shows the compiler took it; prints which).
check_flags() {   # log mode
    "$PY" - "$1" "$2" "$WORK/src" <<'PYFLAGS'
import glob, os, re, shlex, sys

log, mode, src = sys.argv[1], sys.argv[2], sys.argv[3]
modules = sorted(p[len(src) + 1:-4].replace("/", ".")
                 for p in glob.glob(f"{src}/fastdispatch/*.pyx") + glob.glob(f"{src}/kernels_cpu/*.pyx"))
compiles = {}
for line in open(log, errors="replace"):
    m = re.search(r"\s-c\s+(\S+)\.c\s", line)
    if m and re.match(r"^\S*(gcc|cc|clang)\S*\s", line.strip()):
        compiles[m.group(1).replace("/", ".")] = shlex.split(line.strip())
problems = []
missing = [m for m in modules if m not in compiles]
if missing:
    problems.append(f"no compile command in the log for {missing}")
omp_seen = {m: "-fopenmp" in compiles[m] for m in compiles if m.startswith("kernels_cpu.")}
if mode == "auto":
    mode = "openmp" if omp_seen and all(omp_seen.values()) else "no-openmp"
for mod, argv in sorted(compiles.items()):
    opt = [a for a in argv if re.fullmatch(r"-O\w*", a)]
    if not opt or opt[-1] not in ("-O2", "-O3"):
        problems.append(f"{mod}: effective optimisation level {opt[-1] if opt else None}, want -O2/-O3")
    if "-ffp-contract=off" not in argv:
        problems.append(f"{mod}: no -ffp-contract=off")
    bad = [a for a in argv if a in ("-march=native", "-mtune=native", "-mcpu=native", "-ffast-math",
                                    "-Ofast", "-funsafe-math-optimizations")]
    if bad:
        problems.append(f"{mod}: flags unfit for a distributed wheel: {bad}")
    want_omp = mod.startswith("kernels_cpu.") and mode == "openmp"
    if ("-fopenmp" in argv) != want_omp:
        problems.append(f"{mod}: -fopenmp {'missing' if want_omp else 'present'} ({mode} build)")
for p in problems:
    print("  -", p, file=sys.stderr)
print(f"{len(compiles)} compile commands, mode {mode}")
for pkg in ("fastdispatch.", "kernels_cpu."):
    mod = next((m for m in sorted(compiles) if m.startswith(pkg)), None)
    if mod is not None:
        print(f"  e.g. {mod}: " + " ".join(a for a in compiles[mod] if a.startswith(("-O", "-f", "-m", "-g"))))
with open(os.path.join(os.path.dirname(log), os.path.basename(log) + ".mode"), "w") as f:
    f.write(mode)
sys.exit(1 if problems else 0)
PYFLAGS
}

needs_gomp() {   # .so file: exit 0 when it lists libgomp in DT_NEEDED
    readelf -d "$1" 2>/dev/null | grep -E 'NEEDED.*libgomp' > /dev/null
}

# ---- 1. copy ---------------------------------------------------------------------------------------
step "copying the working tree"
copy_tree "$WORK/src" || fail "copy of the working tree"
done_step "$(cd "$WORK/src" && find . -type f | wc -l) files"

# ---- 2. build ---------------------------------------------------------------------------------------
if ! "$PY" -m build --version > /dev/null 2>&1; then
    step "installing the 'build' package into $PY"
    "$PY" -m pip install -q build > "$WORK/pip-build.log" 2>&1 || fail "pip install build" "$WORK/pip-build.log"
    done_step
fi
step "python -m build (sdist, then the wheel from the sdist, isolated)"
(cd "$WORK/src" && "$PY" -m build --outdir "$WORK/dist" > "$WORK/build.log" 2>&1) \
    || fail "python -m build" "$WORK/build.log"
SDIST=$(ls "$WORK"/dist/*.tar.gz 2>/dev/null | head -n 1)
WHEEL=$(ls "$WORK"/dist/*.whl 2>/dev/null | head -n 1)
[ -n "$SDIST" ] && [ -n "$WHEEL" ] || fail "python -m build made no sdist or no wheel" "$WORK/build.log"
done_step "$(basename "$SDIST") ($(du -k "$SDIST" | cut -f1) KiB), $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"

# ---- 3. contents ------------------------------------------------------------------------------------
step "sdist and wheel contents"
"$PY" - "$WORK/src" "$SDIST" "$WHEEL" <<'PYCONTENTS' || fail "sdist/wheel contents"
import glob, os, sys, tarfile, zipfile

src, sdist, wheel = sys.argv[1:]
problems = []
packages = ("fastdispatch", "kernels_cpu")
tree = sorted(os.path.relpath(p, src)
              for pkg in packages
              for p in glob.glob(f"{src}/{pkg}/**/*", recursive=True)
              if os.path.isfile(p) and (p.endswith((".py", ".pyx", ".pxd", ".pyi"))
                                        or os.path.basename(p) == "py.typed"))
pyx = [p for p in tree if p.endswith(".pyx")]
pxd = [p for p in tree if p.endswith(".pxd")]

whl = zipfile.ZipFile(wheel).namelist()
whl_set = set(whl)
for p in tree:
    if p not in whl_set:
        problems.append(f"wheel lacks {p}")
for p in pyx:
    stem = p[:-4]
    if not any(n.startswith(stem + ".") and n.endswith((".so", ".pyd")) for n in whl):
        problems.append(f"wheel has no compiled extension for {p}")
for n in whl:
    if n.endswith(".c") and n.startswith(packages):
        problems.append(f"wheel ships generated C {n}")
# The product only: no dev kit (fdkit: case builders, references, the _floor instrument), no
# bench, no test scaffolding -- under any name or path.
for n in whl:
    low = n.lower()
    parts = low.split("/")
    leaked = [
        what
        for what, hit in (
            ("fdkit", "fdkit" in low),
            ("_floor", "_floor" in parts[-1]),
            ("bench", parts[0] == "bench" or "bench" in parts[:-1]),
            ("reference", "reference" in low),
            ("ops/testing", "ops/testing" in low),
            ("tests", parts[0] in ("tests", "tools", "docs")),
        )
        if hit
    ]
    if leaked:
        problems.append(f"wheel ships {n} ({', '.join(leaked)}: not part of the product)")
tops = sorted({n.split("/")[0] for n in whl if not n.split("/")[0].endswith(".dist-info")})
if tops != sorted(packages):
    problems.append(f"wheel's top-level entries are {tops}, want exactly {sorted(packages)}")
meta = [n for n in whl if n.endswith(".dist-info/entry_points.txt")]
if not meta or b"fastdispatch.vllm:plugin" not in zipfile.ZipFile(wheel).read(meta[0]):
    problems.append("wheel metadata lacks the vllm.general_plugins entry point")

with tarfile.open(sdist) as tf:
    names = tf.getnames()
top = names[0].split("/")[0]
rel = {n[len(top) + 1:] for n in names if n.startswith(top + "/")}
for p in pyx + pxd + ["setup.py", "pyproject.toml", "MANIFEST.in", "README.md"]:
    if p not in rel:
        problems.append(f"sdist lacks {p}")
for n in sorted(rel):
    if n.endswith((".so", ".pyd", ".o")) or (n.endswith(".c") and n.startswith(packages)):
        problems.append(f"sdist ships build output {n}")

for p in problems:
    print("  -", p, file=sys.stderr)
print(f"wheel: {len(whl)} files, {sum(n.endswith('.so') for n in whl)} extensions "
      f"for {len(pyx)} .pyx, {len(pxd)} .pxd; sdist: {len(rel)} entries")
sys.exit(1 if problems else 0)
PYCONTENTS
done_step

# ---- 4. flags ---------------------------------------------------------------------------------------
step "compiler flags of the wheel build"
check_flags "$WORK/build.log" auto || fail "compiler flags (log: $WORK/build.log)"
# The wheel's own compiler (GCC here) must be silent, as on arm64: a warning there is a fact
# about the C we ship (an uninitialised firstprivate, an ISA-dependent vector ABI).
if grep -E '\.(c|h):[0-9]+:[0-9]+: warning:' "$WORK/build.log" > "$WORK/warnings.log"; then
    fail "compiler warnings in the wheel build" "$WORK/warnings.log"
fi
WHEEL_OMP=$(cat "$WORK/build.log.mode")
if [ "$WHEEL_OMP" = openmp ]; then
    mkdir -p "$WORK/wheel-x" && (cd "$WORK/wheel-x" && "$PY" -m zipfile -e "$WHEEL" .) \
        || fail "unpacking the wheel"
    # Modules without a parallel region may drop libgomp at link time; the thread policy's own
    # module queries the OpenMP runtime, so it must need it.
    gomp=()
    for so in "$WORK"/wheel-x/kernels_cpu/*.so; do
        if needs_gomp "$so"; then name=$(basename "$so"); gomp+=("${name%%.*}"); fi
    done
    printf '%s\n' "${gomp[@]}" | grep -x _parallel > /dev/null \
        || fail "kernels_cpu._parallel was compiled with -fopenmp but does not need libgomp"
    echo "check_builds:   libgomp.so.1 needed by kernels_cpu.{$(IFS=,; echo "${gomp[*]}")}"
else
    echo "check_builds:   WARNING: the compiler took no -fopenmp: this wheel's kernels run serially"
fi
done_step

# ---- 5. the wheel in a throwaway venv ---------------------------------------------------------------
step "throwaway venv: $TORCH_SPEC, then the wheel"
"$PY" -m venv "$WORK/venv" > "$WORK/venv.log" 2>&1 || fail "creating the throwaway venv" "$WORK/venv.log"
VPY=$WORK/venv/bin/python
# --no-compile (and no bytecode written by the smoke test): torch's ~17k files are installed and
# removed several times faster without a .pyc beside each.
"$VPY" -m pip install -q --no-compile --disable-pip-version-check "$TORCH_SPEC" >> "$WORK/venv.log" 2>&1 \
    || fail "pip install $TORCH_SPEC into the throwaway venv" "$WORK/venv.log"
"$VPY" -m pip install -q --no-compile --disable-pip-version-check "$WHEEL" >> "$WORK/venv.log" 2>&1 \
    || fail "pip install of the wheel (with its dependencies)" "$WORK/venv.log"
done_step
step "smoke test of the installed wheel (OpenMP expected: $WHEEL_OMP)"
(cd "$WORK" && PYTHONDONTWRITEBYTECODE=1 "$VPY" - "$WORK/venv" "$WHEEL_OMP" "$WORK/src" <<'PYSMOKE') \
    > "$WORK/smoke.log" 2>&1 || fail "smoke test of the installed wheel" "$WORK/smoke.log"
import importlib.metadata as md
import importlib.util
import os
import sys
import warnings

venv, omp_mode, src = sys.argv[1], sys.argv[2], sys.argv[3]
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch, without numpy
import torch
import fastdispatch
import fastdispatch._core
import fastdispatch._override
import kernels_cpu
import kernels_cpu._sampling

# The reference is the dev kit's (fdkit, not in the wheel): from the source tree, searched after
# the venv so that nothing of the product can come from there.
sys.path += [src, os.path.join(src, "tools")]
from fdkit.reference import sampling as reference
import _wheel_smoke

_wheel_smoke.installed_from(venv)
assert kernels_cpu.openmp_enabled() == (omp_mode == "openmp"), (kernels_cpu.openmp_enabled(), omp_mode)
assert importlib.util.find_spec("triton") is None, "the throwaway venv should not have triton"
eps = [ep.value for ep in md.entry_points(group="vllm.general_plugins")]
assert "fastdispatch.vllm:plugin" in eps, eps

# Triton absent: importing the ops registers kernels_cpu over our kernels; the greedy op then
# launches owner -> KernelOverride -> kernels_cpu wrapper -> nogil loop.
import fastdispatch.ops as ops
assert ops.RUN_MODE == "cpu" and ops.cpu_kernels_active(), ops.RUN_MODE
assert not any(fastdispatch.verify().values()), fastdispatch.verify()

_wheel_smoke.launches(reference)
print(f"smoke ok: fastdispatch {fastdispatch.__version__} backend {fastdispatch.BACKEND}, "
      f"OpenMP {kernels_cpu.openmp_enabled()}, torch {torch.__version__}, run mode {ops.RUN_MODE}")
PYSMOKE
done_step "$(tail -n 1 "$WORK/smoke.log")"

# ---- 5b. the manylinux wheel an index can serve ----------------------------------------------------
step "manylinux wheel (tools/repair_wheel.sh on the wheel built from the sdist): tag, libgomp not vendored, one OpenMP runtime"
rm -f "$ROOT"/dist/fastdispatch-*-cp311-*manylinux*.whl
"$ROOT"/tools/repair_wheel.sh "$WHEEL" "$ROOT/dist" > "$WORK/manylinux.log" 2>&1 \
    || fail "tools/repair_wheel.sh $(basename "$WHEEL")" "$WORK/manylinux.log"
MWHEEL=$(ls "$ROOT"/dist/fastdispatch-*-cp311-cp311-*manylinux*_x86_64.whl 2> /dev/null | head -n 1)
[ -n "$MWHEEL" ] || fail "no manylinux x86_64 wheel in dist/" "$WORK/manylinux.log"
mkdir -p "$WORK/mwheel-x" && (cd "$WORK/mwheel-x" && "$PY" -m zipfile -e "$MWHEEL" .) \
    || fail "unpacking the manylinux wheel"
if find "$WORK/mwheel-x" -name '*.libs' -o -name '*gomp*' -o -name '*libomp*' | grep -q .; then
    fail "the manylinux wheel vendors libraries: $(find "$WORK/mwheel-x" -name '*.libs' -o -name '*gomp*')"
fi
for so in "$WORK"/mwheel-x/kernels_cpu/*.so "$WORK"/mwheel-x/fastdispatch/*.so; do
    if readelf -d "$so" | grep -qE 'RPATH|RUNPATH'; then fail "$(basename "$so") keeps an RPATH"; fi
done
if [ "$WHEEL_OMP" = openmp ]; then
    readelf -d "$WORK"/mwheel-x/kernels_cpu/_sampling*.so | grep -q 'NEEDED.*\[libgomp\.so\.1\]' \
        || fail "kernels_cpu._sampling does not need libgomp.so.1 by its SONAME"
fi
"$VPY" -m pip install -q --no-compile --disable-pip-version-check --force-reinstall --no-deps \
    "$MWHEEL" >> "$WORK/venv.log" 2>&1 || fail "pip install of the manylinux wheel" "$WORK/venv.log"
(cd "$WORK" && PYTHONDONTWRITEBYTECODE=1 "$VPY" -m fastdispatch info) > "$WORK/minfo.log" 2>&1 \
    || fail "python -m fastdispatch info from the manylinux wheel" "$WORK/minfo.log"
grep -q "backend      cython" "$WORK/minfo.log" || fail "the manylinux wheel's backend" "$WORK/minfo.log"
# the same check as tests/test_kernels_threads.py, on the installed wheel and torch's CPU build
(cd "$WORK" && PYTHONDONTWRITEBYTECODE=1 "$VPY" "$ROOT/tests/_openmp_runtime.py" --torchs) \
    > "$WORK/omp.log" 2>&1 || fail "one OpenMP runtime with the manylinux wheel" "$WORK/omp.log"
done_step "$(basename "$MWHEEL"); $(tail -n 1 "$WORK/omp.log")"
# Deleting torch's files is slow on a busy disk (a minute here); let it overlap the build below.
if [ $keep -eq 0 ]; then
    rm -rf "$WORK/venv" &
    RM_PID=$!
fi

# ---- 6. clang, OpenMP off ---------------------------------------------------------------------------
# This build runs setup.py directly with $PY (the tests need that interpreter's torch, triton,
# pytest), so $PY needs pyproject's build requirements itself; a venv made by `pip install -e .`
# has them only in pip's isolated build environment.
if ! "$PY" -c 'import sys, Cython, setuptools
sys.exit(int(setuptools.__version__.split(".")[0]) < 77 or int(Cython.__version__.split(".")[0]) < 3)' \
        > /dev/null 2>&1; then
    step "installing the build requirements (Cython>=3.0, setuptools>=77) into $PY"
    "$PY" -m pip install -q "Cython>=3.0" "setuptools>=77" > "$WORK/pip-build-reqs.log" 2>&1 \
        || fail "pip install of the build requirements" "$WORK/pip-build-reqs.log"
    done_step
fi
CLANG=${CLANG:-clang}
if ! command -v "$CLANG" > /dev/null && [ "$CLANG" = clang ] && [ "$(id -u)" -eq 0 ] \
        && command -v apt-get > /dev/null; then
    step "installing clang"
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang) \
        > "$WORK/apt-clang.log" 2>&1 || fail "apt-get install clang" "$WORK/apt-clang.log"
    done_step
fi
command -v "$CLANG" > /dev/null || fail "no $CLANG for the clang build (apt-get install clang)"
step "CC=$CLANG FASTDISPATCH_NO_OPENMP=1 build in a second copy ($("$CLANG" --version | head -n 1))"
copy_tree "$WORK/clang" || fail "copy of the working tree"
(cd "$WORK/clang" && CC=$CLANG FASTDISPATCH_NO_OPENMP=1 "$PY" setup.py build_ext --inplace -j 2 \
    > "$WORK/clang-build.log" 2>&1) || fail "CC=$CLANG build" "$WORK/clang-build.log"
check_flags "$WORK/clang-build.log" no-openmp || fail "clang build flags (log: $WORK/clang-build.log)"
for so in "$WORK"/clang/fastdispatch/*.so "$WORK"/clang/kernels_cpu/*.so; do
    needs_gomp "$so" && fail "$(basename "$so") of the clang build needs libgomp"
    readelf -p .comment "$so" 2>/dev/null | grep 'clang version' > /dev/null \
        || fail "$(basename "$so") of the clang build was not compiled by clang"
done
n_warn=$(grep -c 'warning:' "$WORK/clang-build.log")
if [ "$n_warn" -gt 0 ]; then
    echo "check_builds:   $n_warn compiler warning(s):"
    grep 'warning:' "$WORK/clang-build.log" | sed 's/^/check_builds:     /'
fi
done_step
tests_against() {   # copy (under $WORK) test-files label: a build without OpenMP, tested in place
    (
        cd "$WORK/$1" || exit 1
        export PYTHONPATH="$WORK/$1" PYTHONDONTWRITEBYTECODE=1
        # An editable install of the checkout in $PY's environment has a finder *after* sys.path
        # that would supply any extension missing here from the checkout: every one must load
        # from here.
        "$PY" tools/_extensions_load.py "$WORK/$1" --no-openmp || exit 1
        # shellcheck disable=SC2086
        "$PY" -m pytest -q -p no:cacheprovider $2
    ) > "$WORK/$1-tests.log" 2>&1 || fail "kernel tests against the $3 build" "$WORK/$1-tests.log"
    head -n 1 "$WORK/$1-tests.log" | sed 's/^/check_builds:   /'
    done_step "$(grep -E '[0-9]+ passed' "$WORK/$1-tests.log" | tail -n 1)"
}
step "kernel, fused and fork/thread robustness tests against the clang no-OpenMP build (one serial pytest process)"
CLANG_TESTS=$(cd "$WORK/clang" && ls tests/test_kernels_*.py tests/test_fused_*.py \
    tests/test_robustness_fork.py tests/test_robustness_threads.py 2>/dev/null)
tests_against clang "$CLANG_TESTS" "clang no-OpenMP"

echo "check_builds: OK -- every check passed"
