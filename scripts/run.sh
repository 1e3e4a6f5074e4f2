#!/usr/bin/env bash
# `make run`: noti for real on this machine. Installs noti[flower] into ./.venv, uses the Redis at
# $NOTI_REDIS_URL (or starts one with AOF on, data under ./var/redis), starts a worker, beat
# and Flower, sends a few demo notifications through the sandbox provider, waits until they
# are delivered and prints `noti list`. Ctrl-C stops everything it started.
#   scripts/run.sh --once   stop after the demo instead of waiting for Ctrl-C
set -euo pipefail
cd "$(dirname "$0")/.."

ONCE=0
[ "${1:-}" = "--once" ] && ONCE=1

NOTI_EXTRAS=${NOTI_EXTRAS:-flower} scripts/venv.sh  # Flower is an extra: noti[flower]
BIN=$PWD/.venv/bin
mkdir -p var/log var/redis

export NOTI_REDIS_URL=${NOTI_REDIS_URL:-redis://127.0.0.1:6379/0}
export NOTI_CONFIG=${NOTI_CONFIG:-$PWD/config/demo.toml}
export NOTI_USER=${NOTI_USER:-demo}
export NOTI_ROOT_ADMINS=${NOTI_ROOT_ADMINS:-$NOTI_USER}
FLOWER_PORT=${NOTI_FLOWER_PORT:-5555}
FLOWER_AUTH=${NOTI_FLOWER_AUTH:-admin:noti-demo}

PIDS=()
cleanup() {
    trap - INT TERM EXIT
    if [ ${#PIDS[@]} -gt 0 ]; then
        echo
        echo "==> stopping: ${PIDS[*]}"
        kill -TERM "${PIDS[@]}" 2>/dev/null || true
        for _ in $(seq 1 50); do
            alive=0
            for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
            [ $alive = 0 ] && break
            sleep 0.2
        done
        kill -KILL "${PIDS[@]}" 2>/dev/null || true
    fi
}
trap cleanup INT TERM EXIT

redis_answers() {
    "$BIN/python" - "$NOTI_REDIS_URL" <<'PY' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1, socket_timeout=2).ping()
PY
}

if redis_answers; then
    echo "==> using the Redis at $NOTI_REDIS_URL"
else
    read -r HOST PORT < <("$BIN/python" -c '
import sys; from urllib.parse import urlsplit
u = urlsplit(sys.argv[1]); print(u.hostname or "127.0.0.1", u.port or 6379)' "$NOTI_REDIS_URL")
    case "$HOST" in
        127.0.0.1|localhost|::1) ;;
        *) echo "error: no Redis answers at $NOTI_REDIS_URL (a remote host: start it there)" >&2; exit 1 ;;
    esac
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "error: no Redis answers at $NOTI_REDIS_URL and redis-server is not installed;" \
             "install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)" >&2
        exit 1
    fi
    echo "==> starting redis-server on 127.0.0.1:$PORT (AOF on, data in ./var/redis)"
    redis-server --port "$PORT" --bind 127.0.0.1 --dir "$PWD/var/redis" --appendonly yes \
        --appendfsync everysec --save "" --logfile "$PWD/var/log/redis.log" &
    PIDS+=($!)
    for _ in $(seq 1 50); do redis_answers && break; sleep 0.1; done
    redis_answers || { echo "error: redis-server did not start; see var/log/redis.log" >&2; exit 1; }
fi

echo "==> starting a worker, beat and Flower (logs in ./var/log)"
"$BIN/celery" -A noti worker -l INFO -n "demo@%h" >var/log/worker.log 2>&1 &
PIDS+=($!)
"$BIN/celery" -A noti beat -l INFO -s var/celerybeat-schedule >var/log/beat.log 2>&1 &
PIDS+=($!)
"$BIN/celery" -A noti flower --address=127.0.0.1 --port="$FLOWER_PORT" --basic-auth="$FLOWER_AUTH" \
    >var/log/flower.log 2>&1 &
PIDS+=($!)

for _ in $(seq 1 150); do grep -q "ready\." var/log/worker.log 2>/dev/null && break; sleep 0.2; done
grep -q "ready\." var/log/worker.log || { echo "error: the worker did not start; see var/log/worker.log" >&2; exit 1; }

echo "==> adding demo notifications as $NOTI_USER"
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

echo "==> waiting for delivery"
for _ in $(seq 1 120); do
    waiting=$($N list -st 1 -json -c)
    [ "$waiting" = "[]" ] && break
    sleep 0.5
done
$N list -limit 10
if [ "$waiting" != "[]" ]; then
    echo "error: some demo notifications were not delivered in 60 s; see var/log/worker.log" >&2
    exit 1
fi
echo
echo "Flower: http://127.0.0.1:$FLOWER_PORT (user:password $FLOWER_AUTH)"
echo "Sandbox outbox: redis-cli -u $NOTI_REDIS_URL lrange noti:sandbox:sandbox 0 -1"
if [ $ONCE = 1 ]; then
    exit 0
fi
echo "noti is running. Press Ctrl-C to stop."
wait
