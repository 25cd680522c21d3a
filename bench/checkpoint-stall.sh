#!/usr/bin/env bash
# How long a request waits behind a checkpoint of many streams (issue 25,
# item 4): starts BIN on DATA_DIR (one made by bench/many.sh or
# bench/crash-restart.sh: streams named mi0, mi1, ...), waits for its first
# flush, then reads a small stream every 5 ms for 20 s (bench/probe.py)
# while six streams are deleted 2 s apart: each delete makes the next flush
# write a checkpoint of every stream. Prints the reader's latencies and
# the checkpoint bytes written meanwhile. OFF picks which streams are
# deleted (mi(k*7919+OFF)): give each run its own.
#
#   OFF=1 bench/checkpoint-stall.sh BIN DATA_DIR
set -u
BIN=$1; DATA=$2; PORT=${PORT:-4691}; URL=http://127.0.0.1:$PORT
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ckbytes() { curl -s "$URL/v1/metrics" | awk '/^sluice_checkpoint_bytes_total/ {n += $2} END {printf "%d", n}'; }
"$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --flush-interval 1s >>"$DATA.stall.log" 2>&1 &
P=$!
until curl -sf -o /dev/null "$URL/v1/healthz"; do sleep 0.05; done
curl -s -o /dev/null -X PUT -H 'content-type: text/plain' --data x "$URL/v1/stream/probe"
for s in mi0 mi1; do curl -s -o /dev/null -X POST -H 'content-type: text/plain' --data start "$URL/v1/stream/$s"; done
until curl -s "$URL/v1/metrics" | awk '/^sluice_unflushed_bytes/ {n += $2} END {exit n > 0}'; do sleep 0.5; done
sleep 2
ck0=$(ckbytes)
( sleep 4; for k in $(seq 1 6); do curl -s -o /dev/null -X DELETE "$URL/v1/stream/mi$((k * 7919 + ${OFF:-0}))"; sleep 2; done ) &
python3 "$ROOT/bench/probe.py" "$PORT" 20 mi0 mi1
echo "checkpoint bytes meanwhile: $((($(ckbytes) - ck0) >> 20)) MiB"
kill "$P"; wait "$P" 2>/dev/null
