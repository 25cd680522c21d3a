#!/usr/bin/env bash
# Durable appends (the write scenario) of two or more sluice binaries side by
# side in the same run: ROUNDS rounds, the binaries' order rotated each round,
# a fresh server (`--fsync always`) and data dir for every run. Prints one line
# per run, then the medians (bench/summarize.py) and each binary's ratio to
# the first one.
#
#   bench/ab.sh before=/path/to/older/sluice new=target/release/sluice
#
# Knobs: ROUNDS=4 DURATION=60s STREAMS=500 PORT=4671 DATA=/tmp OUT=target/bench-ab
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-60s}
STREAMS=${STREAMS:-500}
PORT=${PORT:-4671}
OUT=${OUT:-$ROOT/target/bench-ab}
URL=http://127.0.0.1:$PORT
(($# >= 2)) || { echo "usage: bench/ab.sh NAME=BINARY NAME=BINARY [...]" >&2; exit 2; }
WORK=$(mktemp -d "${DATA:-/tmp}/sluice-ab.XXXXXX")
mkdir -p "$OUT"
rm -f "$OUT"/*.json

cargo build --release -p sluice-bench
BENCH=$ROOT/target/release/sluice-bench

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

names=() bins=()
for arg in "$@"; do
    names+=("${arg%%=*}") bins+=("${arg#*=}")
    [[ -x "${arg#*=}" ]] || { echo "not an executable: ${arg#*=}" >&2; exit 2; }
done
n=${#names[@]}
for round in $(seq 0 $((ROUNDS - 1))); do
    for i in $(seq 0 $((n - 1))); do
        k=$(((i + round) % n))
        data=$WORK/data
        rm -rf "$data"
        "${bins[$k]}" serve --listen "127.0.0.1:$PORT" --data-dir "$data" --fsync always >>"$WORK/server.log" 2>&1 &
        SERVER_PID=$!
        wait_ready "$URL" "$WORK/server.log"
        timeout 900 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario write --streams "$STREAMS" \
            --duration "$DURATION" --json "$OUT/${names[$k]}-$round.json" >/dev/null 2>&1
        stop_server
        echo "round $round ${names[$k]} (load $(cut -d' ' -f1 /proc/loadavg))"
    done
done
bench/summarize.py "$OUT" "${names[0]}"
