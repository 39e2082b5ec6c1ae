# Sourced by the tools/*.sh scripts: sets PY to the interpreter they run with -- $PYTHON if set,
# else the project venv's (.venv/bin/python under $ROOT), else python3 -- or exits 2 naming the
# calling script ($1) when there is none.
if [ -n "${PYTHON:-}" ]; then
    PY=$PYTHON
elif [ -x "$ROOT/.venv/bin/python" ]; then
    PY=$ROOT/.venv/bin/python
else
    PY=python3
fi
PY=$(command -v "$PY") || { echo "$1: no python (${PYTHON:-python3})" >&2; exit 2; }
