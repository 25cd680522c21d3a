#!/usr/bin/env bash
# The HTTP ceiling of this machine beside sluice's: a trivial epoll server
# (bench/trivial/trivial.c: parse a head, drop the body, answer 204, one
# thread per core) and sluice's own /v1/healthz, against a durable append to
# sluice; each as requests per server core-second (server CPU from
# /proc/PID/stat), so the load generator sharing the cores does not count.
#
#   bench/ceiling.sh              # 3 rounds of 6 s, ~2 minutes
#   ROUNDS=1 DURATION=4s bench/ceiling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-6s}
PORT=${PORT:-4691}
URL=http://127.0.0.1:$PORT
cargo build --release -q -p sluice -p sluice-bench
gcc -O2 -Wall -pthread -o "$ROOT/target/trivial" bench/trivial/trivial.c
BENCH=$ROOT/target/release/sluice-bench
SLUICE=$ROOT/target/release/sluice
WORK=$(mktemp -d /tmp/bench-ceiling.XXXXXX)
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK"' EXIT

# measure LABEL SCENARIO-ARGS...: one run against $SERVER_PID, one line out.
measure() {
    local label=$1 out ops cpu
    shift
    out=$("$BENCH" --url "$URL" --server-pid "$SERVER_PID" --duration "$DURATION" "$@" 2>/dev/null)
    ops=$(echo "$out" | grep -m1 "ops/s" | grep -oE "[0-9,]+$" | tr -d ,)
    cpu=$(echo "$out" | grep -m1 "server cpu" | grep -oE "[0-9.]+ cores" | grep -oE "[0-9.]+")
    printf "%-28s %8s req/s %5s server cores %8s req per server core-second\n" \
        "$label" "$ops" "$cpu" "$(python3 -c "print(round($ops / $cpu))")"
}

echo "started $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    "$ROOT/target/trivial" "$PORT" "$(nproc)" & SERVER_PID=$!
    sleep 0.3
    measure "trivial, no-op" --scenario healthz --connections 500
    measure "trivial, 256 B POSTs" --scenario write --streams 500
    stop_server
    for scenario in "healthz --connections 500" "write --streams 500" "pool --connections 500 --streams 500"; do
        rm -rf "$WORK/data" && mkdir -p "$WORK/data"
        "$SLUICE" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" >"$WORK/sluice.log" 2>&1 & SERVER_PID=$!
        wait_ready "$URL" "$WORK/sluice.log"
        # shellcheck disable=SC2086
        measure "sluice ${scenario%% *}" --scenario $scenario
        stop_server
    done
done
