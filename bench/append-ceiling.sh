#!/usr/bin/env bash
# The durable-append ceiling of this machine beside sluice and the Rust
# peer: the same client (`sluice-bench --scenario catchup`, 4 writer
# connections, one stream) fills a trivial server (bench/trivial/
# ingest_server.c: a thread per connection, each append made durable on
# its own: O_DIRECT|O_DSYNC, write + fdatasync into a preallocated file or
# into a growing one, or not at all), sluice and the Rust
# `durable-streams` 0.1.5 server, with 1 MiB appends (256 MiB) and 64 KiB
# appends (128 MiB); and `dd oflag=dsync bs=1M` into a written file
# (issue 24's limit) and into a new one, in every round. A fresh server
# per run, kinds rotated per round, `sync; sleep 2` before each run (a
# fill's rate here depends on what the disk still writes back from the
# one before). Every line gives MB/s and the server's CPU per GB stored
# (/proc/PID/stat).
#
#   bench/append-ceiling.sh             # 3 rounds, ~4 minutes on 2 cores
#   ROUNDS=1 bench/append-ceiling.sh
#
# Knobs: ROUNDS=3 PORT=4696 OUT=target/bench-append PEERS=target/peers
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-4696}
OUT=${OUT:-$ROOT/target/bench-append}
PEERS=${PEERS:-$ROOT/target/peers}
URL=http://127.0.0.1:$PORT

cargo build --release -q -p sluice -p sluice-bench
gcc -O2 -Wall -Wextra -pthread -o "$ROOT/target/ingest_server" bench/trivial/ingest_server.c
BENCH=$ROOT/target/release/sluice-bench
SLUICE=$ROOT/target/release/sluice
# On the disk the data dirs are on (target/, as the README's commands put
# them), not /tmp, which may be memory.
WORK=$(mktemp -d "$ROOT/target/bench-append.XXXXXX")
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK"' EXIT
need_rust_peer
mkdir -p "$OUT" && rm -f "$OUT"/*.json "$OUT"/dd-*.txt

# The disk's limit as speed.sh measures it (a written file), and into a
# new file, where each write also allocates its blocks, as a sustained
# append must (lib.sh).
dd_limit() {
    echo "written $(dd_written "$WORK/dd.tmp"), new $(dd_new "$WORK/dd.tmp")"
}

# one NAME KIND BYTES APPEND-BYTES: a fresh server of KIND (an ingest
# server mode, or a lib.sh server kind), one fill; JSON in $OUT/NAME-ROUND.json.
one() {
    local name=$1 kind=$2 bytes=$3 append=$4
    rm -rf "$WORK/data" "$WORK/file"
    sync
    sleep 2
    case $kind in
    trivial-*)
        "$ROOT/target/ingest_server" "${kind#trivial-}" "$WORK/file" $((512 << 20)) "$PORT" 2>>"$WORK/ingest.log" &
        SERVER_PID=$!
        for _ in $(seq 200); do curl -s -o /dev/null "$URL/" && break; sleep 0.05; done ;;
    *) start_kind "$kind" ;;
    esac
    timeout 600 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario catchup --bytes "$bytes" \
        --append-bytes "$append" --json "$OUT/$name-$round.json" >/dev/null 2>&1 || echo "  $name: run failed"
    stop_server
}

echo "started $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
RUNS=()
for size in "1m 256MiB 1MiB" "64k 128MiB 64KiB"; do
    read -r tag bytes append <<<"$size"
    for kind in trivial-dsync trivial-fdatasync trivial-grow trivial-none sluice rust; do
        RUNS+=("$kind-$tag $kind $bytes $append")
    done
done
for round in $(seq "$ROUNDS"); do
    echo "== round $round: dd $(dd_limit | tee "$OUT/dd-$round.txt")"
    run_rotated "$round"
done
echo "ended $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
bench/ceilings.py fill "$OUT"
