# Shared by the gateway's integration tests: start real processes on
# loopback (ports chosen by the kernel), poll for conditions with deadlines,
# and kill everything started on exit.
set -eu
[ -n "${GW_TRACE:-}" ] && set -x
: "${CORRAL_BIN:?CORRAL_BIN not set}"
: "${GW_HELPER:?GW_HELPER not set}"
T=$(mktemp -d)
PIDS=""
ON_EXIT=""
cleanup() {
    [ -n "$ON_EXIT" ] && eval "$ON_EXIT"
    # KILL cannot hang: every process started here and every background
    # job of the script (load generators) goes before the wait.
    for p in $PIDS $(jobs -p); do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    # stray jobs, an agent's cgroups (tests/integration/reap.sh)
    [ -z "${CORRAL_SRC:-}" ] || "$CORRAL_SRC/tests/integration/reap.sh" "$T"
    rm -rf "$T"
}
trap cleanup EXIT
cd "$T"

fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -30 "$f" >&2; }; done
    exit 1
}

# wait_for SECONDS COMMAND...: poll every 50 ms until COMMAND succeeds.
wait_for() {
    limit=$(($1 * 20)); shift
    i=0
    while ! "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ "$i" -gt "$limit" ] && return 1
        sleep 0.05
    done
    return 0
}

# start_backend NAME [PORT]: a model server; sets PORT_<NAME> and PID_<NAME>.
start_backend() {
    rm -f "$T/$1.out" # a restart must not read the last run's line
    "$GW_HELPER" serve "${2:-0}" "$1" >"$T/$1.out" 2>"$T/$1.log" &
    pid=$!
    PIDS="$PIDS $pid"
    wait_for 10 grep -q listening "$T/$1.out" || fail "backend $1 did not start"
    port=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$T/$1.out")
    eval "PORT_$1=$port PID_$1=$pid"
}

# start_gateway NAME ARGS...: sets GW_<NAME> (host:port) and GWPID_<NAME>.
start_gateway() {
    name=$1; shift
    rm -f "$T/gw-$name.log"
    "$CORRAL_BIN" gateway --listen 127.0.0.1:0 "$@" 2>"$T/gw-$name.log" &
    pid=$!
    PIDS="$PIDS $pid"
    wait_for 10 grep -q "listening on" "$T/gw-$name.log" || fail "gateway $name did not start"
    addr=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$T/gw-$name.log")
    eval "GW_$name=$addr GWPID_$name=$pid"
}

metrics() { curl -sf "http://$1/metrics"; }
# metric_value ADDR 'name{labels}': the sample's value, or empty.
metric_value() { metrics "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
metric_is() { [ "$(metric_value "$1" "$2")" = "$3" ]; }

# gone PID: the process has exited (a zombie counts: not yet waited for).
gone() {
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    st=${st##*) }
    [ "${st%% *}" = Z ]
}

# wait_exit SECONDS PID: wait for PID, at most SECONDS; one still running
# then is killed (KILL) and the call fails. Sets rc to its exit status.
wait_exit() {
    wait_for "$1" gone "$2" || { kill -KILL "$2" 2>/dev/null; wait "$2" 2>/dev/null; return 1; }
    rc=0
    wait "$2" || rc=$?
}

# stop_gateway NAME: SIGTERM; the gateway must exit 0 (under ASan: no leaks)
# within 60 s.
stop_gateway() {
    eval "pid=\$GWPID_$1"
    kill -TERM "$pid"
    wait_exit 60 "$pid" || fail "gateway $1 still running 60 s after SIGTERM"
    [ "$rc" = 0 ] || fail "gateway $1 exited $rc on SIGTERM"
}
