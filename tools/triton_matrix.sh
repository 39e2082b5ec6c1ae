#!/usr/bin/env bash
# The Triton version matrix: our Triton kernels under other Triton releases' interpreters.
#
# For each VERSION a venv <repo>/.venv-triton-VERSION (gitignored) holds only triton==VERSION and
# borrows everything else -- torch, numpy, pytest, hypothesis, the editable fastdispatch -- from
# the main venv (.venv) through a .pth file that appends the main venv's site-packages after its
# own: its own triton comes first on sys.path, the main venv's triton is shadowed. Same CPython as
# the main venv, so the in-place extensions load as they are; nothing is rebuilt. Then it runs
# tests/test_triton_parity.py (every kernel against kernels_cpu and the reference, interpreted)
# and tests/test_ops.py (the ops in each mode, `interpret` among them) with that venv's python.
# A venv already there is reused; one whose triton is not VERSION is refused.
#
# Usage: tools/triton_matrix.sh VERSION...   (e.g. tools/triton_matrix.sh 3.6.0 3.7.1)
# Knobs: FASTDISPATCH_MAIN_VENV (default <repo>/.venv: the venv whose packages are borrowed).
# Exit status: non-zero when any version failed; a summary line per version either way.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BASE="${FASTDISPATCH_MAIN_VENV:-$REPO/.venv}"
if [[ $# -eq 0 ]]; then
    echo "usage: $0 VERSION...   (e.g. $0 3.6.0 3.7.1)" >&2
    exit 2
fi
if [[ ! -x "$BASE/bin/python" ]]; then
    echo "$0: no main venv at $BASE (tools/setup_env.sh makes it)" >&2
    exit 2
fi
log() { printf '\n==> triton_matrix: %s\n' "$*"; }
BASE_SITE="$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
unset TRITON_INTERPRET FASTDISPATCH_OPS_TEST_MODE

# make_venv VERSION VENV: the venv with triton==VERSION and the main venv's packages behind it
make_venv() {
    local version=$1 venv=$2 py=$2/bin/python
    if [[ ! -x "$py" ]]; then
        log "$venv: a venv of the main venv's interpreter, triton==$version"
        "$BASE/bin/python" -m venv --without-pip "$venv" || return 1
        echo '*' > "$venv/.gitignore"
        local site
        site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || return 1
        # addsitedir (not a bare path line) so the main venv's own .pth files -- the editable
        # fastdispatch among them -- are read too; appended, so this venv's triton wins
        echo "import site; site.addsitedir('$BASE_SITE')" > "$site/zz_main_venv.pth"
        # triton's wheels need nothing at run time that the main venv lacks: --no-deps. Before
        # 3.7 the interpreter reads a scalar argument as int() of a 1-element array, which
        # NumPy 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"):
        # those get a NumPy of their own, in front of the main venv's.
        local -a pkgs=("triton==$version")
        local below_37='import sys; sys.exit(tuple(map(int, sys.argv[1].split(".")[:2])) >= (3, 7))'
        if "$BASE/bin/python" -c "$below_37" "$version"; then
            pkgs+=("numpy<2.4")
        fi
        "$BASE/bin/python" -m pip --disable-pip-version-check -q install --no-deps \
            --target "$site" "${pkgs[@]}" || { rm -rf "$venv"; return 1; }
    fi
    "$py" - "$version" "$venv" <<'EOF'
import os, sys
import numpy, torch, triton
version, venv = sys.argv[1], os.path.realpath(sys.argv[2])
where = os.path.realpath(triton.__file__)
assert triton.__version__ == version, f"triton {triton.__version__} at {where}, not {version}"
assert where.startswith(venv + os.sep), f"triton comes from {where}, not from {venv}"
print(f"triton {triton.__version__} ({where}),"
      f" torch {torch.__version__}, numpy {numpy.__version__}")
EOF
}

declare -a SUMMARY=()
status=0
for version in "$@"; do
    venv="$REPO/.venv-triton-$version"
    if ! make_venv "$version" "$venv"; then
        SUMMARY+=("triton $version: FAILED to set up $venv")
        status=1
        continue
    fi
    log "triton $version: tests/test_triton_parity.py tests/test_ops.py"
    out="$(mktemp)"
    "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_triton_parity.py \
        tests/test_ops.py 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line="$(grep -E '[0-9]+ (passed|failed|error)' "$out" | tail -1)"
    rm -f "$out"
    if [[ $rc -eq 0 ]]; then
        SUMMARY+=("triton $version: ok ($line)")
    else
        SUMMARY+=("triton $version: FAILED rc=$rc ($line)")
        status=1
    fi
done

log "summary"
printf '  %s\n' "${SUMMARY[@]}"
exit $status
