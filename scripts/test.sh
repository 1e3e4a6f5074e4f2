#!/usr/bin/env bash
# `make test`: the version matrix. Installs noti with its test extras (and the bench peers, for
# the benchmarks' smoke test) into ./.venv with the newest versions pip finds, and with its test
# extras into ./.venv-lowest with the lowest supported versions (scripts/constraints-lowest.txt,
# on Python 3.11), both at once; makes sure redis-server exists (the tests start their own on a
# free loopback port) and Chromium (tests/test_flower_truth.py renders Flower's pages headless);
# runs the whole suite on ./.venv and, alongside, the tests marked integration or bounds on
# ./.venv-lowest (its output follows the first's). Each suite runs on several pytest-xdist
# workers: the tests mostly wait (on worker processes, Redis, timers), so more workers than
# cores pay; each worker starts its own redis-server.
#   scripts/test.sh -k priority -x     pytest options: ./.venv only (NOTI_TEST_LOWEST=1: both)
#   NOTI_TEST_LOWEST=0 scripts/test.sh  the newest only
#   NOTI_TEST_FAST=1 scripts/test.sh    `make test-fast`: the tests not marked slow, newest only
#   NOTI_TEST_WORKERS=N                 xdist workers for the newest (default 2 per core, 4 with
#                                       NOTI_TEST_FAST, at most 8), NOTI_TEST_LOWEST_WORKERS=N for
#                                       the lowest (1 per core, at most 4); 0: one process
set -euo pipefail
cd "$(dirname "$0")/.."

FAST=${NOTI_TEST_FAST:-0}
LOWEST=${NOTI_TEST_LOWEST:-}
[ "$FAST" = 1 ] && LOWEST=0
[ -z "$LOWEST" ] && { [ $# -eq 0 ] && LOWEST=1 || LOWEST=0; }
LOWEST_PYTHON=${NOTI_LOWEST_PYTHON:-python3.11}
if [ "$LOWEST" = 1 ] && ! command -v "$LOWEST_PYTHON" >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "$LOWEST_PYTHON is needed for the lowest supported versions (set NOTI_LOWEST_PYTHON)" >&2
        exit 1
    fi
    echo "==> $LOWEST_PYTHON is not installed: the lowest supported versions are not tested" >&2
    LOWEST=0
fi

cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
WORKERS=${NOTI_TEST_WORKERS:-$((cores * 2 > 8 ? 8 : cores * 2))}
# the fast tests mostly wait (no benchmark, no chaos run beside them): more workers pay
[ "$FAST" = 1 ] && WORKERS=${NOTI_TEST_WORKERS:-$((cores * 4 > 8 ? 8 : cores * 4))}
LOWEST_WORKERS=${NOTI_TEST_LOWEST_WORKERS:-$((cores > 4 ? 4 : cores))}
# one external Redis (NOTI_TEST_REDIS_URL), flushed by every test: one process at a time
[ -n "${NOTI_TEST_REDIS_URL:-}" ] && WORKERS=0 LOWEST_WORKERS=0
# loadgroup: the tests one by one to whichever worker is free, in the order tests/conftest.py
# puts them (the longest first), but those sharing a module or package fixture (an API server, a
# deployment, a cluster) together on one worker, which sets it up once
xdist() { if [ "$1" -gt 0 ]; then echo "-n $1 --dist loadgroup --no-loadscope-reorder"; else echo "-p no:xdist"; fi; }
# Compiled once and kept (in __pycache__, ignored by git): every xdist worker, and each Celery
# worker or CLI process a test starts, imports noti and the tests; without cached bytecode each
# compiles them again (pytest's rewriting of the tests' asserts alone: seconds of CPU a worker).
unset PYTHONDONTWRITEBYTECODE

started=$SECONDS
lowest_install=
if [ "$LOWEST" = 1 ]; then  # both venvs install at once (network and unpacking, not the tests)
    PYTHON=$LOWEST_PYTHON VENV=.venv-lowest NOTI_EXTRAS=test NOTI_CONSTRAINTS=scripts/constraints-lowest.txt \
        scripts/venv.sh &
    lowest_install=$!
fi
NOTI_EXTRAS=test,apitest,bench scripts/venv.sh
warm=
if ! compgen -G "tests/__pycache__/test_*-pytest-*.pyc" >/dev/null; then
    # a fresh clone: pytest rewrites the asserts of every test module and keeps the result in
    # __pycache__; once here, not by every xdist worker of both suites at once (same Python and
    # pytest in both venvs, the same files)
    .venv/bin/python -m pytest --collect-only -q -p no:xdist >/dev/null 2>&1 &
    warm=$!
fi
[ -n "$lowest_install" ] && wait "$lowest_install"
[ -n "$warm" ] && { wait "$warm" || true; }
echo "==> venvs ready in $((SECONDS - started)) s" >&2

if [ -z "${NOTI_TEST_REDIS_URL:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> redis-server is missing: installing Debian's redis-server package" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2
    else
        echo "redis-server is not installed: install it (Debian/Ubuntu: apt-get install redis-server;" \
             "macOS: brew install redis) or set NOTI_TEST_REDIS_URL to a Redis the tests may flush" >&2
        exit 1
    fi
fi

have_chromium() {
    { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
        command -v google-chrome >/dev/null 2>&1 || command -v google-chrome-stable >/dev/null 2>&1; } &&
        { command -v chromedriver >/dev/null 2>&1 || [ -x /usr/lib/chromium/chromedriver ]; }
}
if [ "$FAST" != 1 ] && ! have_chromium; then  # the slow tests need it (and its driver: Selenium)
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> chromium or chromedriver is missing: installing Debian's chromium and chromium-driver" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >&2
    elif [ "${CI:-}" = true ]; then
        echo "chromium or chromedriver is not installed and cannot be installed here (not root, or no" \
             "apt-get); Debian/Ubuntu: apt-get install chromium chromium-driver" >&2
        exit 1
    else
        echo "==> chromium or chromedriver is not installed (Debian/Ubuntu: apt-get install chromium" \
             "chromium-driver): the browser checks of Flower's pages and the admin page are skipped" >&2
    fi
fi

versions() {
    "$1/bin/python" - <<'PY'
import sys
from importlib.metadata import version

names = ["celery", "kombu", "redis", "celery-redbeat", "flower", "pydantic", "click", "jinja2"]
print(f"Python {sys.version.split()[0]}, " + ", ".join(f"{n} {version(n)}" for n in names))
PY
}

lowest() {
    # pytest restoring SIGINT, which a background job ignores: the trap below stops it cleanly
    .venv-lowest/bin/python -c 'import signal, sys, pytest
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(pytest.main(sys.argv[1:]))' -m "integration or bounds" $(xdist "$LOWEST_WORKERS") "$@"
}

status=0
lowest_status=0
lowest_pid=
if [ "$LOWEST" = 1 ] && [ -z "${NOTI_TEST_REDIS_URL:-}" ]; then
    # alongside the newest (both spend most of their time waiting on workers and Redis; each
    # starts its own redis-server); its output follows the newest's
    lowest_log=$(mktemp "${TMPDIR:-/tmp}/noti-lowest-XXXXXX")
    echo "==> the integration tests on the lowest versions, alongside, $LOWEST_WORKERS workers:" \
        "$(versions .venv-lowest)" >&2
    lowest_started=$SECONDS
    lowest "$@" >"$lowest_log" 2>&1 &
    lowest_pid=$!
    trap 'if [ -n "$lowest_pid" ] && kill -0 "$lowest_pid" 2>/dev/null; then kill -INT "$lowest_pid"; wait "$lowest_pid"; fi' EXIT
fi
what="the whole suite"
fast=()
[ "$FAST" = 1 ] && what="the tests not marked slow" fast=(-m "not slow")
echo "==> $what on the newest versions, $WORKERS workers: $(versions .venv)" >&2
started=$SECONDS
.venv/bin/python -m pytest $(xdist "$WORKERS") --durations=15 ${fast[@]+"${fast[@]}"} "$@" || status=$?
echo "==> the newest: exit $status in $((SECONDS - started)) s" >&2
if [ -n "$lowest_pid" ]; then
    wait "$lowest_pid" || lowest_status=$?
    lowest_pid=
    echo "==> the lowest: exit $lowest_status in $((SECONDS - lowest_started)) s; its output:" >&2
    cat "$lowest_log"
    rm -f "$lowest_log"
elif [ "$LOWEST" = 1 ]; then  # one NOTI_TEST_REDIS_URL, flushed by each test: one suite at a time
    echo "==> the integration tests on the lowest versions: $(versions .venv-lowest)" >&2
    started=$SECONDS
    lowest "$@" || lowest_status=$?
    echo "==> the lowest: exit $lowest_status in $((SECONDS - started)) s" >&2
fi
[ "$status" = 0 ] && status=$lowest_status
exit "$status"
