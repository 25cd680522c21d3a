#!/usr/bin/env bash
# The storage engine's numbers (issue 11), side by side for two sluice
# binaries in the same run (this checkout's, and BASELINE, e.g. a build of an
# older commit), ROUNDS rounds each, A B alternating:
#
#   small: 10 streams filled round-robin with 10M messages of 16 B (append-batch
#          of 512 frames), then stream 0 read from offset -1 three times:
#          RSS after the fill, data dir size, catch-up GB/s of 16 B messages;
#   restart: the same data dir, SIGTERM, then time from spawn to the first
#          /v1/healthz 200 (sluice-bench --scenario restart);
#   large: one stream filled with 1 GiB of 1 MiB appends, read back;
#   space: an old small stream, then a 768 MiB stream behind it and a 384 MiB
#          one; retain away 90% of the second, delete the first, and time how
#          long the data dir takes to fall to live data plus preallocation.
#
#   BASELINE=/path/to/old/sluice bench/store.sh
#
# Knobs: ROUNDS=3 SPACE_ROUNDS=1 (rounds that also run the space phase) MESSAGES_PER_STREAM=1000000
# LARGE=1GiB PORT=4661 DATA=/tmp OUT=target/bench-store
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
SPACE_ROUNDS=${SPACE_ROUNDS:-1}
PORT=${PORT:-4661}
PER_STREAM=${MESSAGES_PER_STREAM:-1000000}
LARGE=${LARGE:-1GiB}
OUT=${OUT:-$ROOT/target/bench-store}
URL=http://127.0.0.1:$PORT
WORK=$(mktemp -d "${DATA:-/tmp}/sluice-store.XXXXXX")
mkdir -p "$OUT"

cargo build --release -p sluice -p sluice-bench
BENCH=$ROOT/target/release/sluice-bench
declare -A BIN=([new]=$ROOT/target/release/sluice)
[[ -n "${BASELINE:-}" ]] && BIN[old]=$BASELINE

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

serve_cmd() { # BINARY DATA_DIR
    echo "$1 serve --listen 127.0.0.1:$PORT --data-dir $2 --fsync always --shards 2"
}

start_server() { # BINARY DATA_DIR
    # shellcheck disable=SC2046
    $(serve_cmd "$1" "$2") >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    wait_ready "$URL" "$WORK/server.log"
}

rss_mib() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

fill_mib() { # PATH MIB: appends of 1 MiB
    for _ in $(seq "$2"); do
        curl -sf -o /dev/null -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$WORK/mib" "$URL$1"
    done
}

space() { # DATA_DIR
    head -c 1048576 /dev/urandom >"$WORK/mib"
    curl -sf -o /dev/null -X PUT "$URL/space"
    curl -sf -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' --data-binary old "$URL/space/old"
    for s in big ret; do curl -sf -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' "$URL/space/$s"; done
    fill_mib /space/big 768
    fill_mib /space/ret 384
    local at
    at=$(printf '0000000000000000_%016d' $((345 * 1048576)))
    curl -sf -o /dev/null -X PUT -H 'Content-Type: text/plain' --data-binary state "$URL/space/ret/snapshot/$at"
    curl -sf -o /dev/null -X PUT "$URL/space/ret/retention/$at"
    curl -sf -o /dev/null -X DELETE "$URL/space/big"
    local start=$SECONDS before
    before=$(du -sm "$1" | cut -f1)
    # Live: 39 MiB and 3 bytes of streams; the journal: an active and a
    # preallocated 64 MiB segment per shard; 8 MiB of slack (index, checkpoint).
    local goal=$((39 + 2 * 2 * 64 + 8))
    while (($(du -sm "$1" | cut -f1) > goal && SECONDS - start < 60)); do sleep 1; done
    echo "   data dir $before MiB after the deletes -> $(du -sm "$1" | cut -f1) MiB after $((SECONDS - start)) s" \
        "(goal: live data plus journal preallocation = $goal MiB)"
}

for round in $(seq "$ROUNDS"); do
    for which in "${!BIN[@]}"; do
        bin=${BIN[$which]}
        data=$WORK/data-$which
        rm -rf "$data"
        start_server "$bin" "$data"
        echo "== $which round $round: small (load $(cut -d' ' -f1 /proc/loadavg))"
        timeout 1200 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario catchup --surface bucket \
            --interleave 10 --append-bytes 16 --frames 512 --bytes $((PER_STREAM * 16)) \
            --label "$which-small" --json "$OUT/$which-small-$round.json" 2>/dev/null | grep -E "filled|read median|RSS" || true
        sleep 5
        echo "   RSS after the fill and 5 s: $(rss_mib "$SERVER_PID") MiB; data dir $(du -sm "$data" | cut -f1) MiB"
        stop_server
        echo "== $which round $round: restart"
        timeout 300 "$BENCH" --url "$URL" --scenario restart --server-cmd "$(serve_cmd "$bin" "$data")" \
            --label "$which-restart" --json "$OUT/$which-restart-$round.json" 2>/dev/null | grep -vE "^== " || true
        rm -rf "$data"
        start_server "$bin" "$data"
        echo "== $which round $round: large"
        timeout 1200 "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario catchup --bytes "$LARGE" \
            --append-bytes 1MiB --label "$which-large" --json "$OUT/$which-large-$round.json" 2>/dev/null \
            | grep -E "filled|read median" || true
        stop_server
        rm -rf "$data"
        if ((round <= SPACE_ROUNDS)); then
            echo "== $which round $round: space"
            start_server "$bin" "$data"
            space "$data"
            stop_server
            rm -rf "$data"
        fi
    done
done
echo "results (JSON) in $OUT"
