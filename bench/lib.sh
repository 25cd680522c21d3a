# Shared by bench/suite.sh, bench/store.sh, bench/compare.sh and bench/ab.sh (sourced): server lifecycle.

SERVER_PID=""

# stop_server: SIGTERM the server started by the caller (by its pid), SIGKILL
# after 10 s, and reap it.
stop_server() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}

# wait_ready URL LOG: waits up to 30 s until the server started as
# $SERVER_PID answers URL/v1/healthz; otherwise prints LOG's tail and exits.
wait_ready() {
    for _ in $(seq 600); do
        curl -s -o /dev/null "$1/v1/healthz" && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "sluice did not start" >&2 && tail "$2" >&2 && exit 1
}

# start_kind KIND [FLAG...]: a fresh server of KIND on $PORT, data in
# $WORK/data, output in $WORK/KIND.log; sets SERVER_PID, or exits with the
# log's tail if it does not answer within 30 s. KIND: sluice ($SLUICE),
# before ($BEFORE, an earlier sluice binary), rust ($RUST_PEER), node and
# node-file (bench/peers/serve.mjs in memory, or with a data dir). sluice
# runs with --fsync always and the FLAGs given.
start_kind() {
    local kind=$1 data=$WORK/data log=$WORK/$1.log
    shift
    rm -rf "$data" && mkdir -p "$data"
    case $kind in
    sluice) "$SLUICE" serve --listen "127.0.0.1:$PORT" --data-dir "$data" --fsync always "$@" >>"$log" 2>&1 & ;;
    before) "$BEFORE" serve --listen "127.0.0.1:$PORT" --data-dir "$data" --fsync always "$@" >>"$log" 2>&1 & ;;
    rust) "$RUST_PEER" --host 127.0.0.1 --port "$PORT" --data-dir "$data" >>"$log" 2>&1 & ;;
    node) node "$ROOT/bench/peers/serve.mjs" --host 127.0.0.1 --port "$PORT" >>"$log" 2>&1 & ;;
    node-file) node "$ROOT/bench/peers/serve.mjs" --host 127.0.0.1 --port "$PORT" --data-dir "$data" >>"$log" 2>&1 & ;;
    *) echo "unknown server $kind" >&2 && exit 2 ;;
    esac
    SERVER_PID=$!
    for _ in $(seq 300); do
        curl -s -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "server $kind did not start:" >&2 && tail "$log" >&2 && exit 1
}

# dd_written FILE: the rate of 256 1 MiB O_DSYNC writes into FILE, written
# and synced first, so no write allocates a block (issue 24's disk limit).
# dd_new FILE: the same into a new FILE, where every write also allocates.
dd_rate() { dd if=/dev/zero of="$1" bs=1M count=256 oflag=dsync "${@:2}" 2>&1 | tail -1 | awk '{print $(NF-1), $NF}'; }
dd_written() {
    dd if=/dev/zero of="$1" bs=1M count=256 conv=fsync status=none && sync && sleep 1
    dd_rate "$1" conv=notrunc
    rm -f "$1"
}
dd_new() {
    rm -f "$1" && sync && sleep 1
    dd_rate "$1"
    rm -f "$1"
}

# need_rust_peer: sets RUST_PEER (default $PEERS/bin/durable-streams-server),
# installing durable-streams $RUST_VERSION (0.1.5) into $PEERS when missing.
need_rust_peer() {
    RUST_PEER=${RUST_PEER:-$PEERS/bin/durable-streams-server}
    if [[ ! -x "$RUST_PEER" ]]; then
        echo "== installing durable-streams ${RUST_VERSION:-0.1.5} into $PEERS (compiles a crate: minutes)"
        cargo install --locked durable-streams --version "${RUST_VERSION:-0.1.5}" --root "$PEERS"
    fi
}

# bench_prologue NAME: builds the release binaries, sets BENCH and SLUICE,
# makes WORK (/tmp/bench-NAME.XXXXXX), stops the server and removes WORK at
# exit, and sets RUST_PEER (installing it when missing). Needs ROOT.
bench_prologue() {
    cargo build --release -q -p sluice -p sluice-bench
    BENCH=$ROOT/target/release/sluice-bench
    SLUICE=$ROOT/target/release/sluice
    WORK=$(mktemp -d "/tmp/bench-$1.XXXXXX")
    trap 'stop_server; rm -rf "$WORK"' EXIT
    need_rust_peer
}

# run_rotated ROUND: calls the caller's `one` with each entry of RUNS
# (split into words), the list rotated by ROUND so no kind always goes first.
run_rotated() {
    local n=${#RUNS[@]} i
    for i in $(seq 0 $((n - 1))); do
        # shellcheck disable=SC2086
        one ${RUNS[$(((i + $1 - 1) % n))]}
    done
}
