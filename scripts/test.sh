#!/usr/bin/env bash
# `make test`: install noti with its test extras (and the bench peers, for the benchmarks' smoke test) into ./.venv, make sure redis-server exists
# (the tests start their own on a free loopback port), and run the whole suite.
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

exec .venv/bin/python -m pytest "$@"
