# Sourced by the tools/*.sh scripts that run in steps: step/done_step/fail, their log lines
# prefixed with the calling script's name ($1). Needs T0 (the script's start, in $SECONDS) and
# keep (set to 1 by fail: the work directory stays for the log it names).
STEP_PREFIX=$1
step_t0=$SECONDS
step() { step_t0=$SECONDS; echo "$STEP_PREFIX: [$(( SECONDS - T0 ))s] $*"; }
done_step() { echo "$STEP_PREFIX:   ok ($(( SECONDS - step_t0 ))s) $*"; }
fail() {   # message [log file]
    echo "$STEP_PREFIX: FAILED: $1 (after $(( SECONDS - T0 ))s)" >&2
    if [ -n "${2:-}" ] && [ -f "$2" ]; then
        echo "---- last lines of $2" >&2
        tail -n 60 "$2" >&2
    fi
    keep=1
    exit 1
}
