#!/usr/bin/env bash
# Issue 24's side-by-side: sluice (and optionally an earlier sluice binary,
# BEFORE=path) against the Rust `durable-streams` 0.1.5 server, a fresh
# server per run, servers alternated within each round, plus the disk's own
# limit (`dd oflag=dsync bs=1M` into a preallocated file on the same file
# system) measured in every round. Every run reports the server's CPU
# (from /proc/PID/stat) so throughput is also given per server core-second.
#
#   bench/speed.sh                                  # 3 rounds, ~15 minutes on 2 cores
#   ROUNDS=1 DURATION=4s BEFORE=/tmp/sluice-old bench/speed.sh
#
# Each run's bytes written to the disk are kept beside its JSON (.disk):
# a fill's rate means little without what it cost the disk.
#
# Knobs: ROUNDS=3 DURATION=8s PORT=4681 OUT=target/bench-speed BEFORE=
# PEERS=target/peers RUST_PEER=path/to/durable-streams-server DD_DIR=target
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
PORT=${PORT:-4681}
OUT=${OUT:-$ROOT/target/bench-speed}
PEERS=${PEERS:-$ROOT/target/peers}
DD_DIR=${DD_DIR:-$ROOT/target}
URL=http://127.0.0.1:$PORT

cargo build --release -q -p sluice -p sluice-bench
BENCH=$ROOT/target/release/sluice-bench
SLUICE=$ROOT/target/release/sluice
SERVERS="sluice rust"
[[ -n "${BEFORE:-}" ]] && SERVERS="before $SERVERS"

WORK=$(mktemp -d /tmp/bench-speed.XXXXXX)
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK" "$DD_DIR/dd-limit.tmp"' EXIT
need_rust_peer

# Sectors the data dir's block device has written (/proc/diskstats), so a
# run's bytes written to the disk can be set beside the bytes it stored.
DEVICE=$(basename "$(findmnt -no SOURCE -T "$WORK")")
sectors_written() {
    awk -v d="$DEVICE" '$3 == d { print $10 }' /proc/diskstats
}

run() {
    local kind=$1 name=$2 round=$3 before
    shift 3
    start_kind "$kind"
    before=$(sectors_written)
    timeout 300 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --label "$kind" \
        --json "$OUT/$kind-$name-$round.json" "$@" >"$OUT/$kind-$name-$round.txt" 2>/dev/null || echo "  $kind $name: run failed"
    echo $(( ($(sectors_written) - before) * 512 )) >"$OUT/$kind-$name-$round.disk"
    stop_server
}

mkdir -p "$OUT" && rm -f "$OUT"/*.json "$OUT"/*.txt
echo "started $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), sluice $(git rev-parse --short HEAD)" | tee "$OUT/machine.txt"
for round in $(seq "$ROUNDS"); do
    echo "== round $round (load $(cut -d' ' -f1 /proc/loadavg))"
    echo "dd $(dd_written "$DD_DIR/dd-limit.tmp")" | tee "$OUT/dd-$round.txt"
    for kind in $SERVERS; do
        run "$kind" write "$round" --scenario write --streams 500 --duration "$DURATION"
        run "$kind" pool "$round" --scenario pool --connections 500 --streams 500 --duration "$DURATION"
        run "$kind" fill-1m "$round" --scenario catchup --bytes 256MiB --append-bytes 1MiB
        run "$kind" fill-1g "$round" --scenario catchup --bytes 1GiB --append-bytes 1MiB
        run "$kind" fill-64k "$round" --scenario catchup --bytes 64MiB --append-bytes 64KiB
        run "$kind" catchup-4k "$round" --scenario catchup --bytes 64MiB --append-bytes 4KiB
        run "$kind" fanout "$round" --scenario fanout --subscribers 1000 --duration "$DURATION"
    done
done
python3 "$ROOT/bench/speed.py" "$OUT" | tee "$OUT/summary.md"
