#!/usr/bin/env bash
# The catch-up ceiling of this machine beside sluice and the Rust peer: the
# same reader (`sluice-bench --scenario catchup`) reads 1 GiB from a trivial
# file server (bench/trivial/file_server.c) in each of its modes (from
# memory; pread; pread + CRC32C; mmap + CRC32C; sendfile; a file kept
# mapped), and from sluice
# and the Rust `durable-streams` 0.1.5 server after each filled a stream
# with it (1 MiB messages), then 128 MiB of 4 KiB messages from both
# servers. A fresh server per run, kinds rotated within each round; every
# line gives GB/s (median of its 3 passes) and the server's CPU per GB
# read (/proc/PID/stat), which the reader sharing the cores cannot take.
#
#   bench/catchup-ceiling.sh            # 3 rounds, ~4 minutes on 2 cores
#   ROUNDS=1 bench/catchup-ceiling.sh
#
# Knobs: ROUNDS=3 PORT=4695 OUT=target/bench-ceiling PEERS=target/peers
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-4695}
OUT=${OUT:-$ROOT/target/bench-ceiling}
PEERS=${PEERS:-$ROOT/target/peers}
URL=http://127.0.0.1:$PORT

cargo build --release -q -p sluice -p sluice-bench
gcc -O2 -Wall -Wextra -msse4.2 -o "$ROOT/target/file_server" bench/trivial/file_server.c
BENCH=$ROOT/target/release/sluice-bench
SLUICE=$ROOT/target/release/sluice
WORK=$(mktemp -d /tmp/bench-ceiling.XXXXXX)
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK"' EXIT
need_rust_peer
mkdir -p "$OUT" && rm -f "$OUT"/*.json
# The file the file server serves: random bytes, in the page cache as a
# stream's recent bytes are.
head -c 1G /dev/urandom >"$WORK/file"

# one NAME KIND ARGS...: a fresh server of KIND (a file server mode, or a
# lib.sh server kind), one catch-up run, its JSON in $OUT/NAME-ROUND.json.
one() {
    local name=$1 kind=$2
    shift 2
    case $kind in
    memory | read | verify | mmap | sendfile | mapped)
        "$ROOT/target/file_server" "$kind" "$WORK/file" "$PORT" 2>>"$WORK/file_server.log" &
        SERVER_PID=$!
        for _ in $(seq 100); do curl -s -o /dev/null "$URL/" && break; sleep 0.05; done ;;
    *) start_kind "$kind" ;;
    esac
    timeout 600 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario catchup \
        --json "$OUT/$name-$round.json" "$@" >/dev/null 2>&1 || echo "  $name: run failed"
    stop_server
}

echo "started $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
RUNS=(
    "file-memory memory --read-path /"
    "file-read read --read-path /"
    "file-verify verify --read-path /"
    "file-mmap mmap --read-path /"
    "file-sendfile sendfile --read-path /"
    "file-mapped mapped --read-path /"
    "sluice-1m sluice --bytes 1GiB --append-bytes 1MiB"
    "rust-1m rust --bytes 1GiB --append-bytes 1MiB"
    "sluice-4k sluice --bytes 128MiB --append-bytes 4KiB"
    "rust-4k rust --bytes 128MiB --append-bytes 4KiB"
)
for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    run_rotated "$round"
done
echo "ended $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
bench/ceilings.py read "$OUT"
