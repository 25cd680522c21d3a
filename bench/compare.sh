#!/usr/bin/env bash
# Side-by-side comparison of three Durable Streams servers with one client
# (target/release/sluice-bench), a fresh server for every run:
#   sluice        this repository, --fsync always (every acknowledged append on stable storage)
#   rust          the Rust `durable-streams` 0.1.5 server (crates.io), default
#                 WAL durability (group-commit fdatasync); installed here with
#                 `cargo install` into $PEERS unless RUST_PEER names a binary
#   node          the Node reference server @durable-streams/server 0.3.7 (in
#                 memory), pinned in bench/peers/package.json + package-lock.json
#   node-file     the same server file-backed (its dataDir option); not in the
#                 default set: it refuses appends beyond 100 open stream files
# Scenarios per server and round: write (one connection per stream), pool at
# each of $CONNS connections rotating over $STREAMS streams, SSE fan-out to each
# of $FANOUT subscribers, catch-up of $CATCHUP_BYTES, and (sluice only: an
# extension) append-batch. Prints the median table and draws
# $OUT/pool.svg (throughput and p99 against connections) with bench/compare.py.
#
#   bench/compare.sh                       # 3 rounds, ~15 minutes on 2 cores
#   ROUNDS=1 DURATION=2s CONNS="50 500" FANOUT=100 SERVERS="sluice rust" bench/compare.sh
#
# Knobs: ROUNDS=3 DURATION=8s STREAMS=500 CONNS="50 200 500" FANOUT="100 500 1000"
# CATCHUP_BYTES=256MiB SERVERS="sluice rust node" PORT=4671 OUT=target/bench-compare
# PEERS=target/peers RUST_PEER=path/to/durable-streams-server. Loopback only;
# every run has a hard timeout; servers are stopped by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
STREAMS=${STREAMS:-500}
CONNS=${CONNS:-"50 200 500"}
FANOUT=${FANOUT:-"100 500 1000"}
CATCHUP_BYTES=${CATCHUP_BYTES:-256MiB}
SERVERS=${SERVERS:-"sluice rust node"}
PORT=${PORT:-4671}
OUT=${OUT:-$ROOT/target/bench-compare}
PEERS=${PEERS:-$ROOT/target/peers}
RUST_VERSION=0.1.5
URL=http://127.0.0.1:$PORT

echo "== building sluice and sluice-bench (release)"
cargo build --release -p sluice -p sluice-bench
SLUICE=$ROOT/target/release/sluice
BENCH=$ROOT/target/release/sluice-bench

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
if [[ " $SERVERS " == *" rust "* ]]; then
    need_rust_peer
fi
if [[ " $SERVERS " == *" node"* && ! -d "$ROOT/bench/peers/node_modules/@durable-streams/server" ]]; then
    echo "== installing the pinned Node reference server (npm ci in bench/peers)"
    (cd "$ROOT/bench/peers" && npm ci --no-audit --no-fund --loglevel=error)
fi

WORK=$(mktemp -d /tmp/bench-compare.XXXXXX)
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# run KIND NAME ROUND ARGS...: one client run against a fresh server.
run() {
    local kind=$1 name=$2 round=$3
    shift 3
    start_kind "$kind"
    echo "== round $round: $kind $name: sluice-bench $* (load $(cut -d' ' -f1 /proc/loadavg))"
    timeout 300 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --label "$kind" \
        --json "$OUT/$kind-$name-$round.json" "$@" 2>/dev/null |
        grep -E "ops/s|records/s|latency p50 /|receive p50|delivered|read median" || echo "  (run failed)"
    stop_server
}

mkdir -p "$OUT"
rm -f "$OUT"/*.json
{
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
    echo "started: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "sluice commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} | tee "$OUT/machine.txt"

for round in $(seq "$ROUNDS"); do
    for kind in $SERVERS; do
        run "$kind" "write-$STREAMS" "$round" --scenario write --streams "$STREAMS" --duration "$DURATION"
        for c in $CONNS; do
            run "$kind" "pool-$c" "$round" --scenario pool --connections "$c" --streams "$STREAMS" --duration "$DURATION"
        done
        for n in $FANOUT; do
            run "$kind" "fanout-$n" "$round" --scenario fanout --subscribers "$n" --duration "$DURATION"
        done
        run "$kind" "catchup" "$round" --scenario catchup --bytes "$CATCHUP_BYTES"
        if [[ $kind == sluice ]]; then
            run "$kind" "batch-100" "$round" --scenario batch --streams 100 --duration "$DURATION"
        fi
    done
done

echo "finished: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 "$ROOT/bench/compare.py" "$OUT" $SERVERS | tee "$OUT/summary.md"
echo "raw results and pool.svg: $OUT"
