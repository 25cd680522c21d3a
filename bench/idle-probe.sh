#!/usr/bin/env bash
# What a shard of many idle streams costs while a trickle flows (issue 25,
# item 4): for each binary, in turn, start it on the same data dir (one made
# by bench/many.sh, say, whose streams are named mi0, mi1, ...), write once to
# the streams it uses and wait for that first flush after the start (it
# writes a checkpoint), then probe a reader's
# latency for 20 s while two appends per second arrive (bench/probe.py), and
# print the probe, the server's CPU and its flush time meanwhile. SIGTERM
# between runs (a clean stop).
#
#   bench/idle-probe.sh DATA_DIR NAME=BINARY [NAME=BINARY ...]
#
# Knobs: PORT=4691 PROBE_SECS=20 ROUNDS=2
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/lib.sh"
(($# >= 2)) || { echo "usage: bench/idle-probe.sh DATA_DIR NAME=BINARY [...]" >&2; exit 2; }
DATA=$1; shift
PORT=${PORT:-4691}
PROBE_SECS=${PROBE_SECS:-20}
URL=http://127.0.0.1:$PORT
trap stop_server EXIT

flush_time() {
    curl -s "$URL/v1/metrics" | awk '/^sluice_flush_seconds_sum/ {s += $2} /^sluice_flush_seconds_count/ {n += $2} END {printf "%.2f s in %d flushes", s, n}'
}

for _ in $(seq "${ROUNDS:-2}"); do
    for named in "$@"; do
        name=${named%%=*} bin=${named#*=}
        "$bin" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --flush-interval 1s >>"$DATA.probe.log" 2>&1 &
        SERVER_PID=$!
        wait_ready "$URL" "$DATA.probe.log"
        # Writes to every stream the probe touches, then their shards' first
        # flush (a checkpoint) before measuring.
        curl -s -o /dev/null -X PUT -H 'content-type: text/plain' --data x "$URL/v1/stream/probe"
        for s in mi0 mi1; do
            curl -s -o /dev/null -X POST -H 'content-type: text/plain' --data start "$URL/v1/stream/$s"
        done
        until curl -s "$URL/v1/metrics" | awk '/^sluice_unflushed_bytes/ {n += $2} END {exit n > 0}'; do
            sleep 0.5
        done
        before=$(flush_time)
        cpu0=$(awk '{print $14 + $15}' "/proc/$SERVER_PID/stat")
        probe=$(python3 "$ROOT/bench/probe.py" "$PORT" "$PROBE_SECS" mi0 mi1)
        cpu1=$(awk '{print $14 + $15}' "/proc/$SERVER_PID/stat")
        echo "$name: $probe | server CPU $(echo "($cpu1 - $cpu0) / 100" | bc -l | cut -c1-5) s in ${PROBE_SECS} s | flush time before: $before, after: $(flush_time)"
        stop_server
    done
done
