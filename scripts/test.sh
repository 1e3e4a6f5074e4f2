#!/usr/bin/env bash
# `make test`: install noti with its test extras (and the bench peers, for the benchmarks' smoke test) into ./.venv, make sure redis-server exists
# (the tests start their own on a free loopback port) and Chromium (tests/test_flower_truth.py renders Flower's pages headless), and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

NOTI_EXTRAS=test,bench scripts/venv.sh

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
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
        command -v google-chrome >/dev/null 2>&1 || command -v google-chrome-stable >/dev/null 2>&1
}
if ! have_chromium; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> chromium is missing: installing Debian's chromium package" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2
    elif [ "${CI:-}" = true ]; then
        echo "chromium is not installed and cannot be installed here (not root, or no apt-get);" \
             "Debian/Ubuntu: apt-get install chromium" >&2
        exit 1
    else
        echo "==> chromium is not installed (Debian/Ubuntu: apt-get install chromium):" \
             "the browser checks of Flower's pages are skipped" >&2
    fi
fi

exec .venv/bin/python -m pytest "$@"
