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
