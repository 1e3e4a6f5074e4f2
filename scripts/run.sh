#!/usr/bin/env bash
# `make run`: noti for real on this machine. Installs noti[flower,http,fast] into ./.venv (the install
# `make test` made does), starts its own redis-server on a free private port (AOF on, data in
# ./var/redis; or uses the Redis NOTI_REDIS_URL names, if one answers there), a worker, beat,
# Flower and the HTTP API (`noti serve`), sends a few demo notifications through the sandbox
# provider, waits until they are delivered, prints `noti list`, and makes an API token for a
# curl example and the admin page (its address printed as `admin page: http://…/admin`). It
# writes ./noti.toml (the demo's settings: Redis, providers, user), which `noti` finds from a
# second terminal without exported variables. Ctrl-C stops the HTTP API, the worker, beat and
# Flower, in that order, then Redis (SHUTDOWN: its AOF flushed), removes ./noti.toml, and exits 0.
#   scripts/run.sh --once        stop after the demo instead of waiting for Ctrl-C
#   NOTI_REDIS_URL=redis://…     a Redis of your own (not flushed, not stopped)
#   NOTI_RUN_REDIS_PORT=N        the port of the Redis this script starts (default: a free one)
#   NOTI_FLOWER_PORT=N           Flower's port (5555); NOTI_FLOWER_AUTH=user:password
#   NOTI_RUN_API_PORT=N          the HTTP API's port (default 8700, or a free one if it is taken)
#   NOTI_RUN_VAR=dir             logs and Redis data (./var); NOTI_RUN_SETTINGS=file (./noti.toml)
set -euo pipefail
cd "$(dirname "$0")/.."

# A Ctrl-C at a terminal goes to its whole foreground process group: make, this script and
# everything it started. make then dies of the signal ("Interrupt", status 130) whatever this
# script does, and each child would start stopping on its own, out of order (Redis before the
# worker, or twice: "You insist... exiting now", no final fsync). So, at a terminal, this script
# runs as the terminal's foreground process group of its own (make only waits for its status),
# and its children run in process groups of theirs (detached, below): Ctrl-C reaches this
# script alone, and the trap stops the rest in order.
if [ -t 0 ] && [ -z "${NOTI_RUN_FOREGROUND:-}" ] && command -v "${PYTHON:-python3}" >/dev/null 2>&1; then
    export NOTI_RUN_FOREGROUND=1
    exec "${PYTHON:-python3}" -c '
import os, signal, sys
os.setpgid(0, 0)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
try:
    os.tcsetpgrp(0, os.getpgrp())
except OSError:
    pass
signal.signal(signal.SIGTTOU, signal.SIG_DFL)
os.execvp("bash", ["bash", *sys.argv[1:]])' "$0" "$@"
fi

ONCE=0
[ "${1:-}" = "--once" ] && ONCE=1

NOTI_EXTRAS=${NOTI_EXTRAS:-flower,http,fast} scripts/venv.sh  # Flower, the HTTP API, msgspec are extras
BIN=$PWD/.venv/bin
VAR=${NOTI_RUN_VAR:-$PWD/var}
SETTINGS=${NOTI_RUN_SETTINGS:-$PWD/noti.toml}
mkdir -p "$VAR/log" "$VAR/redis"

export NOTI_USER=${NOTI_USER:-demo}
export NOTI_ROOT_ADMINS=${NOTI_ROOT_ADMINS:-$NOTI_USER}
BASE_CONFIG=${NOTI_CONFIG:-$PWD/config/demo.toml}
FLOWER_PORT=${NOTI_FLOWER_PORT:-5555}
FLOWER_AUTH=${NOTI_FLOWER_AUTH:-admin:noti-demo}
MARK="# written by scripts/run.sh (make run); removed when it stops"

API= WORKER= BEAT= FLOWER= REDIS= REDIS_PORT= WROTE_SETTINGS=0
say() { echo "==> $*"; }

stop() {  # stop PID NAME SECONDS: SIGTERM, then SIGKILL after SECONDS
    local pid=$1 name=$2 seconds=$3
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((seconds * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "    $name (pid $pid) did not stop in $seconds s: killed"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    echo "    $name stopped"
}

cleanup() {
    local status=$?
    trap - INT TERM HUP EXIT
    trap "" INT HUP  # a second Ctrl-C does not cut the shutdown short
    if [ -n "$API$WORKER$BEAT$FLOWER$REDIS" ]; then
        echo
        say "stopping"
    fi
    stop "$API" API 10  # first: no notification comes in once the rest stops
    stop "$WORKER" worker 30
    stop "$BEAT" beat 10
    stop "$FLOWER" Flower 10
    if [ -n "$REDIS" ] && kill -0 "$REDIS" 2>/dev/null; then
        # SHUTDOWN (not a signal): Redis fsyncs its append-only file, then exits
        "$BIN/python" -c 'import sys, redis
try:
    redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), socket_timeout=30).shutdown()
except redis.ConnectionError:
    pass' "$REDIS_PORT" || kill -TERM "$REDIS" 2>/dev/null || true
        for _ in $(seq 1 300); do kill -0 "$REDIS" 2>/dev/null || break; sleep 0.1; done
        wait "$REDIS" 2>/dev/null || true
        echo "    redis-server stopped"
    fi
    if [ "$WROTE_SETTINGS" = 1 ] && head -1 "$SETTINGS" 2>/dev/null | grep -qxF "$MARK"; then
        rm -f "$SETTINGS"
    fi
    exit "$status"
}
on_signal() { exit 0; }  # Ctrl-C, SIGTERM, a closed terminal: the way to stop; cleanup runs on EXIT
trap on_signal INT TERM HUP
trap cleanup EXIT

redis_answers() {
    "$BIN/python" - "$1" <<'PY' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1, socket_timeout=2).ping()
PY
}

# COMMAND… in a process group of its own (a Ctrl-C at the terminal does not reach it); run
# with & so that $! is the command's own pid (exec all the way down)
detached() {
    exec "$BIN/python" -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

if [ -n "${NOTI_REDIS_URL:-}" ] && redis_answers "$NOTI_REDIS_URL"; then
    say "using the Redis at $NOTI_REDIS_URL"
else
    if [ -n "${NOTI_REDIS_URL:-}" ]; then
        echo "error: no Redis answers at $NOTI_REDIS_URL (unset NOTI_REDIS_URL to let make run start one)" >&2
        exit 1
    fi
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "error: redis-server is not installed;" \
             "install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)" >&2
        exit 1
    fi
    REDIS_PORT=${NOTI_RUN_REDIS_PORT:-$("$BIN/python" -c '
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])')}
    export NOTI_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0
    detached redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$VAR/redis" --appendonly yes \
        --appendfsync everysec --save "" --logfile "$VAR/log/redis.log" &
    REDIS=$!
    say "redis-server on 127.0.0.1:$REDIS_PORT (pid $REDIS; AOF on, data in $VAR/redis)"
    for _ in $(seq 1 50); do redis_answers "$NOTI_REDIS_URL" && break; sleep 0.1; done
    redis_answers "$NOTI_REDIS_URL" || { echo "error: redis-server did not start; see $VAR/log/redis.log" >&2; exit 1; }
fi

# The settings every process here and `noti` in a second terminal read: Redis, user, providers.
if [ -e "$SETTINGS" ] && ! head -1 "$SETTINGS" | grep -qxF "$MARK"; then
    echo "error: $SETTINGS exists and is not make run's; move it away (make run writes the demo's there)" >&2
    exit 1
fi
{
    echo "$MARK"
    echo "redis_url = \"$NOTI_REDIS_URL\""
    echo "user = \"$NOTI_USER\""
    echo "root_admins = [$(echo "$NOTI_ROOT_ADMINS" | sed 's/[^,][^,]*/"&"/g')]"
    echo "# from $BASE_CONFIG:"
    cat "$BASE_CONFIG"
} >"$SETTINGS"
WROTE_SETTINGS=1
export NOTI_CONFIG=$SETTINGS

API_PORT=${NOTI_RUN_API_PORT:-$("$BIN/python" -c '
import socket
with socket.socket() as s:
    try:
        s.bind(("127.0.0.1", 8700))
    except OSError:
        s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])')}

say "starting a worker, beat, Flower and the HTTP API (logs in $VAR/log)"
detached "$BIN/celery" -A noti worker -l INFO -n "demo@%h" >"$VAR/log/worker.log" 2>&1 &
WORKER=$!
detached "$BIN/celery" -A noti beat -l INFO >"$VAR/log/beat.log" 2>&1 &
BEAT=$!
detached "$BIN/celery" -A noti flower --address=127.0.0.1 --port="$FLOWER_PORT" --basic-auth="$FLOWER_AUTH" \
    >"$VAR/log/flower.log" 2>&1 &
FLOWER=$!
detached "$BIN/noti" serve -bind 127.0.0.1 -port "$API_PORT" >"$VAR/log/api.log" 2>&1 &
API=$!
echo "    worker (pid $WORKER), beat (pid $BEAT), Flower (pid $FLOWER), API (pid $API)"

for _ in $(seq 1 150); do grep -q "ready\." "$VAR/log/worker.log" 2>/dev/null && break; sleep 0.2; done
grep -q "ready\." "$VAR/log/worker.log" || { echo "error: the worker did not start; see $VAR/log/worker.log" >&2; exit 1; }

say "adding demo notifications as $NOTI_USER"
N="$BIN/noti"
ids=(
    "$($N add sms -to +8613912345678 -text 'Your verification code is 4321' -lv 1000)"
    "$($N add sms -to 13912345678 -text 'Your parcel has shipped' -lv 1)"
    "$($N add weixin -tmpl ngqIpTemplate01 -pnb demo-account -to oDemoOpenId0001 -url https://example.com/o/1 \
        -content '{"first": {"value": "Order 1 paid"}, "amount": {"value": "42.00"}}' -lv 10)"
    "$($N add email -to ops@example.com -subject 'Nightly report' -text 'All green.')"
    "$($N add sms -to +14155550100 -text 'Retried once, then sent' -provider flaky)"
)
echo "    ${ids[*]}"

say "waiting for delivery"
for _ in $(seq 1 120); do
    waiting=$($N list -st 1 -json -c)
    [ "$waiting" = "[]" ] && break
    sleep 0.5
done
$N list -limit 10
if [ "$waiting" != "[]" ]; then
    echo "error: some demo notifications were not delivered in 60 s; see $VAR/log/worker.log" >&2
    exit 1
fi
api_answers() {
    "$BIN/python" -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/v1/health", timeout=2)' "$1" >/dev/null 2>&1
}
API_URL=http://127.0.0.1:$API_PORT
for _ in $(seq 1 100); do api_answers "$API_URL" && break; sleep 0.2; done
api_answers "$API_URL" || { echo "error: the HTTP API did not start; see $VAR/log/api.log" >&2; exit 1; }
TOKEN=$($N token add -user "$NOTI_USER" -note "make run demo" 2>/dev/null)
echo
echo "Flower: http://127.0.0.1:$FLOWER_PORT (user:password $FLOWER_AUTH)"
echo "HTTP API: $API_URL (OpenAPI: $API_URL/docs); an API token for $NOTI_USER was made for you:"
echo "  $TOKEN"
echo "admin page: $API_URL/admin (log in with that token)"
echo "  curl -X POST $API_URL/v1/notifications -H 'Authorization: Bearer $TOKEN' \\"
echo "    -H 'Content-Type: application/json' -d '{\"type\": \"sms\", \"to\": \"+8613912345678\", \"text\": \"hi\"}'"
echo "Sandbox outbox: redis-cli -u $NOTI_REDIS_URL lrange noti:sandbox:sandbox 0 -1"
if [ "$SETTINGS" = "$PWD/noti.toml" ]; then
    echo "CLI: in another terminal, in this directory:  .venv/bin/noti list"
else
    echo "CLI: in another terminal:  NOTI_CONFIG=$SETTINGS .venv/bin/noti list"
fi
if [ $ONCE = 1 ]; then
    exit 0
fi
echo "noti is running. Press Ctrl-C to stop."
wait "$WORKER" || true
echo "error: the worker stopped; see $VAR/log/worker.log" >&2
exit 1
