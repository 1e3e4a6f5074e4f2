#!/usr/bin/env bash
# Create or update ./.venv with noti installed (editable) and the extras named in $NOTI_EXTRAS.
#   VENV=dir              another venv than ./.venv
#   PYTHON=python3.11     the interpreter to create it with (default: the newest Python >= 3.11)
#   NOTI_CONSTRAINTS=f    a pip constraints file (scripts/constraints-lowest.txt: the lowest versions)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
EXTRAS=${NOTI_EXTRAS:-}
CONSTRAINTS=${NOTI_CONSTRAINTS:-}

pick_python() {
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "noti needs Python >= 3.11 (none found on PATH; set PYTHON=/path/to/python3.11)" >&2
    return 1
}

if [ ! -x "$VENV/bin/python" ]; then
    PY=$(pick_python)
    echo "==> creating $VENV with $PY" >&2
    "$PY" -m venv "$VENV"
fi

spec="."
[ -n "$EXTRAS" ] && spec=".[$EXTRAS]"
constrain=()
[ -n "$CONSTRAINTS" ] && constrain=(--constraint "$CONSTRAINTS")
stamp="$VENV/.noti-installed-$(echo "$spec $CONSTRAINTS" | tr -c 'a-z0-9' '_')"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || { [ -n "$CONSTRAINTS" ] && [ "$CONSTRAINTS" -nt "$stamp" ]; }; then
    echo "==> installing noti ($spec${CONSTRAINTS:+, constrained by $CONSTRAINTS}) into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ${constrain[@]+"${constrain[@]}"} -e "$spec" >&2
    touch "$stamp"
fi
