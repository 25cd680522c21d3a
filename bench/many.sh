#!/usr/bin/env bash
# Many small streams (issue 25's table): for each N, a fresh sluice, N streams
# created with one 10-byte message each (`sluice-bench --scenario idle
# --initial-bytes 10`), then: RSS per stream, files and disk in the data dir,
# the bucket metadata request, what the server writes per second while 2
# appends/s trickle in (flush every 1 s, once every created stream is in
# its files: how long after the creates that took, and RSS then), restart to /v1/healthz warm and cold (page cache dropped;
# root only, otherwise "-"), then N more streams created and deleted on the
# restarted server (`--delete-all yes`): the delete rate.
#
#   bench/many.sh [N ...]          # default: 100000
#
# Prints one markdown row per N; raw output in $WORK (default /tmp/sluice-many).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/lib.sh"
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
BENCH=${BENCH:-$ROOT/target/release/sluice-bench}
PORT=${PORT:-4661}
WORK=${WORK:-/tmp/sluice-many}
URL=http://127.0.0.1:$PORT
mkdir -p "$WORK"
trap stop_server EXIT

serve() { "$SLUICE" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --flush-interval 1s >>"$WORK/sluice.log" 2>&1 & }

# Checkpoint bytes the server wrote (its metrics), and sectors written to
# the data dir's disk (everything on the machine: a noisy upper bound).
checkpoint_bytes() {
    curl -s "$URL/v1/metrics" | awk '/^sluice_checkpoint_bytes_total/ {n += $2} END {printf "%d", n}'
}
disk_sectors() {
    local dev
    dev=$(basename "$(df --output=source "$WORK" | tail -1)")
    awk -v d="$dev" '$3 == d {print $10}' /proc/diskstats
}

restart_secs() {
    "$BENCH" --url "$URL" --scenario restart --timeout 600s --json "$WORK/restart.json" \
        --server-cmd "$SLUICE serve --listen 127.0.0.1:$PORT --data-dir $WORK/data" >"$WORK/restart.txt" 2>&1
    python3 -c "import json; print(json.load(open('$WORK/restart.json'))['ready_secs'])"
}

echo "| streams | RSS per stream | files | disk (apparent) | GET /v1-stream | flushed after | RSS per stream, flushed | checkpoint KiB/s, 2 appends/s | disk KiB/s then | restart warm | restart cold | create rate | delete rate |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for n in "${@:-100000}"; do
    rm -rf "$WORK/data"
    serve
    SERVER_PID=$!
    wait_ready "$URL" "$WORK/sluice.log"
    "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario idle --streams "$n" --initial-bytes 10 \
        --prefix m --json "$WORK/idle.json" >"$WORK/idle-$n.txt" 2>&1
    read -r per rate < <(python3 -c "import json; j=json.load(open('$WORK/idle.json')); print(j['bytes_per_stream'], round(j['created']/j['create_secs']))")
    meta=$(curl -s -o /dev/null -w '%{time_total}' "$URL/v1-stream")
    # The flushes that write the new streams' first files take a while
    # after the creates (tens of seconds at 100k): wait until every byte
    # is in stream files, then two appends per second for 20 s to two of
    # the streams, and what the server wrote meanwhile.
    created=$(date +%s.%N)
    until curl -s "$URL/v1/metrics" | awk '/^sluice_unflushed_bytes/ {n += $2} END {exit n > 0}'; do
        sleep 0.5
    done
    flushed=$(echo "$(date +%s.%N) - $created" | bc -l)
    sleep 2
    settled=$(( $(awk '/VmRSS/ {print $2}' "/proc/$SERVER_PID/status") * 1024 / n ))
    w0=$(checkpoint_bytes)
    d0=$(disk_sectors)
    for i in $(seq 40); do
        # The idle scenario names its streams {prefix}i{n}.
        code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: text/plain' --data "tick$i" "$URL/v1/stream/mi$((i % 2))")
        [ "$code" = 204 ] || { echo "append to mi$((i % 2)): $code" >&2; exit 1; }
        sleep 0.5
    done
    w1=$(checkpoint_bytes)
    d1=$(disk_sectors)
    stop_server
    files=$(find "$WORK/data" -type f | wc -l)
    disk=$(du -sm "$WORK/data" | cut -f1)
    apparent=$(du -sm --apparent-size "$WORK/data" | cut -f1)
    warm=$(restart_secs)
    cold=-
    if [ "$(id -u)" = 0 ]; then
        sync && echo 3 >/proc/sys/vm/drop_caches
        cold=$(restart_secs)
    fi
    serve
    SERVER_PID=$!
    wait_ready "$URL" "$WORK/sluice.log"
    "$BENCH" --url "$URL" --server-pid "$SERVER_PID" --scenario idle --streams "$n" --prefix d --delete-all yes \
        --json "$WORK/delete.json" >"$WORK/delete-$n.txt" 2>&1
    deletes=$(python3 -c "import json; j=json.load(open('$WORK/delete.json')); print(round(j['deleted']/j['delete_secs']))")
    stop_server
    printf '| %s | %s B | %s | %s MiB (%s) | %.1f ms | %.1f s | %s B | %s | %s | %s s | %s s | %s/s | %s/s |\n' \
        "$n" "$per" "$files" "$disk" "$apparent" "$(echo "$meta * 1000" | bc -l)" "$flushed" "$settled" \
        "$(( (w1 - w0) / 20 / 1024 ))" "$(( (d1 - d0) * 512 / 20 / 1024 ))" "$warm" "$cold" "$rate" "$deletes"
done
