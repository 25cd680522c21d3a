#!/usr/bin/env bash
# Restart after kill -9 at N streams (issue 25), binaries alternating on one
# data dir: built once with NEW (N streams of one 10 B message, flushed), then
# per round and binary: start timed to /v1/healthz, append to 100 streams (the
# journal since the checkpoint then names them), kill -9. COLD=1 drops the page
# cache before each start (root). BUILD=0 reuses the dir.
#   NEW=target/release/sluice BASE=/path/to/old/sluice N=1000000 bench/crash-restart.sh
set -u
N=${N:-1000000}; W=${W:-/tmp/crash}; PORT=4661; URL=http://127.0.0.1:$PORT
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NEW=${NEW:-$ROOT/target/release/sluice}; BASE=${BASE:?BASE=an older sluice binary}
BENCH=${BENCH:-$ROOT/target/release/sluice-bench}
mkdir -p $W
if [ "${BUILD:-1}" = 1 ]; then
  rm -rf $W/data
  $NEW serve --listen 127.0.0.1:$PORT --data-dir $W/data --flush-interval 1s >>$W/log 2>&1 &
  P=$!
  until curl -sf $URL/v1/healthz >/dev/null; do sleep 0.1; done
  $BENCH --url $URL --server-pid $P --scenario idle --streams $N --initial-bytes 10 --prefix m --json $W/idle.json > $W/idle.txt 2>&1
  curl -s -o /dev/null -w "head: %{http_code}\n" -I $URL/v1/stream/mi7
  until curl -s $URL/v1/metrics | awk '/^sluice_unflushed_bytes/ {n += $2} END {exit n > 0}'; do sleep 2; done
  sleep 5
  echo "settled $(date +%T) rss $(awk '/VmRSS/ {print $2}' /proc/$P/status) KiB"
  kill -9 $P; wait $P 2>/dev/null
fi
for r in ${ROUNDS:-1 2 3}; do
  for b in $BASE $NEW; do
    [ "${COLD:-0}" = 1 ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
    t0=$(date +%s.%N)
    $b serve --listen 127.0.0.1:$PORT --data-dir $W/data --flush-interval 1s >>$W/log 2>&1 &
    P=$!
    until curl -sf -o /dev/null $URL/v1/healthz; do sleep 0.01; done
    t1=$(date +%s.%N)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$P/status)
    first=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' $URL/v1/stream/mi12345)
    for k in $(seq 1 100); do curl -s -o /dev/null -X POST -H 'content-type: text/plain' --data-binary "r$r" $URL/v1/stream/mi$((k*997)); done
    echo "round $r $(basename $b): ready $(echo "$t1 - $t0" | bc) s, rss $rss KiB, first read $first"
    kill -9 $P; wait $P 2>/dev/null
  done
done
