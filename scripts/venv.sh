#!/usr/bin/env bash
# Create or update ./.venv with noti installed (editable) and the extras named in $NOTI_EXTRAS.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
EXTRAS=${NOTI_EXTRAS:-}

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
stamp="$VENV/.noti-installed-$(echo "$spec" | tr -c 'a-z0-9' '_')"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "==> installing noti ($spec) into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" >&2
    touch "$stamp"
fi
