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

# One install marker for every caller (`make run`, `make test`, `make docs`, `make bench`): it holds
# the extras installed; a call whose extras are all there installs nothing, another installs the
# union, so `make run` after `make test` (or the other way round) never re-installs.
constrain=()
[ -n "$CONSTRAINTS" ] && constrain=(--constraint "$CONSTRAINTS")
marker="$VENV/.noti-installed"
have=""
[ -f "$marker" ] && have=$(sed -n 's/^extras=//p' "$marker")
# the extras a list stands for, with those it includes (test includes flower: noti[flower])
closure() {
    "$VENV/bin/python" - "$1" <<'PY'
import re, sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"].get("optional-dependencies", {})
todo, seen = [e for e in sys.argv[1].split(",") if e], set()
while todo:
    name = todo.pop()
    if name not in seen:
        seen.add(name)
        for requirement in extras.get(name, []):
            match = re.match(r"noti\[([^\]]*)\]", requirement.replace(" ", ""))
            todo += match.group(1).split(",") if match else []
print("\n".join(sorted(seen)))
PY
}
want=$(printf '%s\n' ${have//,/ } ${EXTRAS//,/ } | sed '/^$/d' | sort -u | paste -sd, -)
missing=$(comm -13 <(closure "$have") <(closure "$EXTRAS"))
stale=0
[ ! -f "$marker" ] && stale=1
[ -f "$marker" ] && [ pyproject.toml -nt "$marker" ] && stale=1
[ -f "$marker" ] && [ -n "$CONSTRAINTS" ] && [ "$CONSTRAINTS" -nt "$marker" ] && stale=1
[ -f "$marker" ] && [ "$(sed -n 's/^constraints=//p' "$marker")" != "$CONSTRAINTS" ] && stale=1
if [ "$stale" = 1 ] || [ -n "$missing" ]; then
    spec="."
    [ -n "$want" ] && spec=".[$want]"
    echo "==> installing noti ($spec${CONSTRAINTS:+, constrained by $CONSTRAINTS}) into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ${constrain[@]+"${constrain[@]}"} -e "$spec" >&2
    printf 'extras=%s\nconstraints=%s\n' "$want" "$CONSTRAINTS" >"$marker"
fi
