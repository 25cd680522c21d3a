#!/usr/bin/env bash
# What a journal commit of 64 KiB appends costs, and what else on the disk
# raises it (issue 24 item 3): four writers fill one stream with durable
# 64 KiB appends (`sluice-bench --scenario catchup`), and the journal's own
# metrics give commits, records per commit and the mean time of a commit's
# durable write. Three configurations, rotated in each round, a fresh
# server per run:
#   default      the defaults: the next journal segment is zero-filled and
#                stream-file flushes run (each writes the appended bytes
#                once more) while the journal commits
#   no-flush     --flush-bytes 4GiB: no stream-file flush during the fill
#   journal-only --flush-bytes 4GiB --segment-bytes 1GiB, the fill started
#                SETTLE seconds after the server (its segments zero-filled
#                before): only the journal writes during the fill
# and the Rust peer under the same client.
#
#   bench/commit-cost.sh            # 3 rounds, ~2 minutes
#   ROUNDS=1 BYTES=128MiB bench/commit-cost.sh
#
# Knobs: ROUNDS=3 BYTES=256MiB APPEND=64KiB SETTLE=4 PORT=4682
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
BYTES=${BYTES:-256MiB}
APPEND=${APPEND:-64KiB}
SETTLE=${SETTLE:-4}
PORT=${PORT:-4682}
URL=http://127.0.0.1:$PORT
PEERS=${PEERS:-$ROOT/target/peers}

source "$ROOT/bench/lib.sh"
bench_prologue commit

# one LABEL SETTLE-SECONDS SERVER-ARGS...: one fill, one line out.
one() {
    local label=$1 settle=$2
    shift 2
    # The last run's files go first, and the disk settles (the file system
    # discards freed blocks).
    rm -rf "$WORK/data" && sync && sleep 1
    if [[ $label == rust ]]; then start_kind rust; else start_kind sluice "$@"; fi
    sleep "$settle"
    local rate journal=""
    rate=$("$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario catchup --bytes "$BYTES" \
        --append-bytes "$APPEND" 2>/dev/null | grep -m1 filled | grep -oE "[0-9.]+ MB/s")
    if [[ $label != rust ]]; then
        journal=$(curl -s "$URL/v1/metrics" | awk '
            /^sluice_fsync_seconds_sum/ { t += $2 } /^sluice_fsync_seconds_count/ { n += $2 }
            /^sluice_group_commit_records_sum/ { r += $2 }
            END { if (n) printf "%6d commits %5.2f records each %5.0f us each", n, r / n, 1e6 * t / n }')
    fi
    printf "%-13s %12s %s\n" "$label" "$rate" "$journal"
    stop_server
}

echo "started $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), sluice $(git rev-parse --short HEAD), $BYTES of $APPEND appends, 4 writers"
RUNS=(
    "default 0"
    "no-flush 0 --flush-bytes 4GiB"
    "journal-only $SETTLE --flush-bytes 4GiB --segment-bytes 1GiB"
    "rust 0"
)
for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    run_rotated "$round"
done
