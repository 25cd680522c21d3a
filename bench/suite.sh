#!/usr/bin/env bash
# The sluice benchmark suite behind bench/README.md: every scenario against a
# fresh sluice server (fsync=always) per run, 3 rounds, medians printed as a
# table. Loopback only; every run is bounded; servers are stopped by pid.
#
#   bench/suite.sh                 # everything (~20 minutes on 2 cores)
#   ONLY="write healthz" bench/suite.sh
#   ONLY=shards SWEEP="1 2 4 8" bench/suite.sh   # pooled vs per-stream writes per shard count
#
# Knobs: ROUNDS=3 DURATION=10s (measured time per run) PORT=4651 OUT=target/bench-suite DATA=/tmp (data dirs go
# under $DATA), ONLY="write pool batch healthz fanout shards catchup idle restart",
# SWEEP="1 2 4 8" (shard counts for `shards`; more shards than cores are
# oversubscribed: several pinned executors share a core).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-4651}
OUT=${OUT:-$ROOT/target/bench-suite}
ONLY=${ONLY:-"write pool batch healthz fanout shards catchup idle restart"}
SWEEP=${SWEEP:-"1 2 4 8"}
DURATION=${DURATION:-10s}
URL=http://127.0.0.1:$PORT
WORK=$(mktemp -d "${DATA:-/tmp}/sluice-suite.XXXXXX")

cargo build --release -p sluice -p sluice-bench
SLUICE=$ROOT/target/release/sluice
BENCH=$ROOT/target/release/sluice-bench

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# start_server DATA_DIR: a sluice server on $PORT ($SHARDS shards if set,
# else one per core); sets SERVER_PID.
SHARDS=""
start_server() {
    "$SLUICE" serve --listen "127.0.0.1:$PORT" --data-dir "$1" --fsync always ${SHARDS:+--shards "$SHARDS"} \
        >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    wait_ready "$URL" "$WORK/server.log"
}

# run NAME ROUND ARGS...: one client run against a fresh server.
run() {
    local name=$1 round=$2
    shift 2
    rm -rf "$WORK/data"
    start_server "$WORK/data"
    echo "== $name round $round: ${SHARDS:+--shards $SHARDS: }sluice-bench --url $URL $* (load $(cut -d' ' -f1 /proc/loadavg))"
    timeout 900 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --label "$name" --json "$OUT/$name-$round.json" "$@" \
        2>/dev/null || echo "  (run failed)"
    stop_server
}

mkdir -p "$OUT"
{
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
    echo "started: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

for round in $(seq "$ROUNDS"); do
    if [[ " $ONLY " == *" write "* ]]; then
        for n in 100 500 2000; do run "write-$n" "$round" --scenario write --streams "$n" --duration "$DURATION"; done
        run "write-bucket-500" "$round" --scenario write --surface bucket --streams 500 --duration "$DURATION"
    fi
    if [[ " $ONLY " == *" pool "* ]]; then
        run "pool-500" "$round" --scenario pool --connections 500 --streams 500 --duration "$DURATION"
    fi
    if [[ " $ONLY " == *" batch "* ]]; then
        run "batch-100" "$round" --scenario batch --streams 100 --frames 512 --frame-bytes 16 --duration "$DURATION"
    fi
    if [[ " $ONLY " == *" shards "* ]]; then
        # The same 500 streams written one connection per stream and by 500
        # pooled connections rotating over all of them, per shard count.
        for SHARDS in $SWEEP; do
            run "shards$SHARDS-write-500" "$round" --scenario write --streams 500 --duration "$DURATION"
            run "shards$SHARDS-pool-500" "$round" --scenario pool --connections 500 --streams 500 --duration "$DURATION"
        done
        SHARDS=""
    fi
    if [[ " $ONLY " == *" healthz "* ]]; then
        run "healthz-500" "$round" --scenario healthz --streams 500 --duration "$DURATION"
    fi
    if [[ " $ONLY " == *" fanout "* ]]; then
        for n in 100 500 1000; do run "fanout-$n" "$round" --scenario fanout --subscribers "$n" --duration "$DURATION"; done
    fi
    if [[ " $ONLY " == *" idle "* ]]; then
        run "idle-100k" "$round" --scenario idle --streams 100000
    fi
done

if [[ " $ONLY " == *" catchup "* || " $ONLY " == *" restart "* ]]; then
    # One 1 GiB fill (1 MiB appends), three timed read passes, then the same
    # data dir restarted three times.
    rm -rf "$WORK/big"
    start_server "$WORK/big"
    echo "== catchup: sluice-bench --url $URL --scenario catchup --bytes 1GiB"
    timeout 900 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario catchup --bytes 1GiB \
        --json "$OUT/catchup-1g-1.json" 2>/dev/null || echo "  (run failed)"
    stop_server
    echo "data dir: $(du -sh "$WORK/big" | cut -f1)" | tee -a "$OUT/machine.txt"
    for round in $(seq "$ROUNDS"); do
        echo "== restart 1 GiB (1 MiB records) round $round"
        timeout 120 "$BENCH" --url "$URL" --scenario restart --json "$OUT/restart-1g-$round.json" \
            --server-cmd "$SLUICE serve --listen 127.0.0.1:$PORT --data-dir $WORK/big" || echo "  (run failed)"
    done
fi

echo "finished: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 "$ROOT/bench/summarize.py" "$OUT"
