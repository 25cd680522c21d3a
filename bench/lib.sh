# Shared by bench/suite.sh and bench/compare.sh (sourced): server lifecycle.

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
