#!/usr/bin/env bash
# How long a request waits behind the flush of a burst of new streams
# (issue 25, item 4): for each binary, in turn, a fresh server (flush every
# 1 s) on an empty data dir; a reader GETs a small stream every 5 ms
# (bench/probe.py) while `sluice-bench --scenario idle` creates N streams
# with one 10-byte message each and the flushes write their first files.
# Prints the reader's latencies per run. CONTROL=1 adds a run of the last
# binary that flushes nothing during its probe (--flush-interval 30s,
# --flush-bytes 4GiB, a probe of at most 25 s): what the creates alone cost
# the reader.
#
#   bench/burst-stall.sh N NAME=BINARY [NAME=BINARY ...]
#
# Knobs: PORT=4693 PROBE_SECS=45 ROUNDS=3 WORK=/tmp/sluice-burst CONTROL=
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/lib.sh"
(($# >= 2)) || { echo "usage: bench/burst-stall.sh N NAME=BINARY [...]" >&2; exit 2; }
N=$1; shift
PORT=${PORT:-4693}
URL=http://127.0.0.1:$PORT
WORK=${WORK:-/tmp/sluice-burst}
BENCH=${BENCH:-$ROOT/target/release/sluice-bench}
trap stop_server EXIT

run() { # NAME BINARY PROBE_SECS [serve flags...]
    local name=$1 bin=$2 secs=$3
    shift 3
    rm -rf "$WORK/data"
    mkdir -p "$WORK"
    "$bin" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" "$@" >"$WORK/sluice.log" 2>&1 &
    SERVER_PID=$!
    wait_ready "$URL" "$WORK/sluice.log"
    python3 "$ROOT/bench/probe.py" "$PORT" "$secs" >"$WORK/probe.txt" &
    local probe=$!
    sleep 2
    "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario idle --streams "$N" --initial-bytes 10 \
        --prefix m --json "$WORK/idle.json" >"$WORK/idle.txt" 2>&1
    wait "$probe"
    echo "$name: $(cat "$WORK/probe.txt")"
    stop_server
}

for _ in $(seq "${ROUNDS:-3}"); do
    for named in "$@"; do
        run "${named%%=*}" "${named#*=}" "${PROBE_SECS:-45}" --flush-interval 1s
    done
    if [[ -n ${CONTROL:-} ]]; then
        last=${*: -1}
        secs=$((${PROBE_SECS:-45} < 25 ? ${PROBE_SECS:-45} : 25))
        run "control" "${last#*=}" "$secs" --flush-interval 30s --flush-bytes 4GiB
    fi
done
rm -rf "$WORK/data"
