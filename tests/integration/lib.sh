# tests/integration/lib.sh - the set-up the integration scripts share.
# Sourced (after `set -euo pipefail`) as
#     . "$(dirname "$0")/lib.sh"
#     cr_setup NAME
# Everything a test writes stays in its own temporary directory $DIR: the
# controller's checkpoint root too (its default, /tmp/corral/ckpt, would
# gain a directory per test cluster). $DIR, the processes the test started
# and the jobs they ran are removed on exit, on meson's timeout (SIGTERM to
# the process group, SIGKILL 0.5 s later) and on ^C.
#
#   cr_setup NAME         DIR=${TMPDIR:-/tmp}/corral-NAME-XXXXXX; PIDS=();
#                         CKPT_CONF (a controller config naming $DIR/ckpt);
#                         the EXIT, TERM and INT traps
#   cr_start_controller STATE-DIR [FLAGS...]
#                         a controller on 127.0.0.1:0 (FLAGS may name
#                         another --listen), heartbeat 1 s, log
#                         $DIR/controller.log; waits for its address and
#                         admin token: CTL_PID, CTL_STATE, CORRAL_SERVER and
#                         CORRAL_TOKEN (exported), SERVER and ADMIN (the same)
#   cr_start_agent NODE STATE-DIR LOG [FLAGS...]
#                         an agent of that controller (its join token) on
#                         127.0.0.1:0, --kill-on-exit; $CR_EXEC (words)
#                         before the command, e.g. "ip netns exec NS"
#   fail MSG              MSG and the last $CR_FAIL_TAIL (20) lines of each
#                         $DIR/*.log (and *.out where CR_FAIL_OUT=1); a
#                         function fail_context, where the script has one,
#                         runs first; exit 1
#   wait_for SECONDS CMD...   poll CMD every 0.1 s until it succeeds
#   free_ports N          N distinct free loopback ports
#   c CMD ARGS...         the CLI as the admin of $SERVER ($ADMIN)
#
#   cr_netns_require TAG  several hosts on one machine: skip (77) unless root
#                         with iproute2; sets TAG (the prefix of the names)
#                         and NET (a /24 of 10.x, from the pid)
#   cr_netns_hosts N      N hosts: namespaces $TAG-0.., each with veth
#                         $TAG-p$i at $NET.(10+i), bridged on $TAG-br at
#                         $NET.1; skip (77) where no bridge can be made.
#                         cr_netns_down N undoes it: call it from
#                         cleanup_extra
#
#   cr_stop_pids SIG PID...   SIG to each, wait at most $CR_STOP_GRACE (30) s
#                         in all, then KILL what is left (named on stderr)
#
# Hooks: CR_STOP (TERM; KILL where the test wants no orderly stop) is sent
# to PIDS on exit (cr_stop_pids: bounded); a function cleanup_extra, where the script has one, runs
# before $DIR is removed (also on a signal). CORRAL_KEEP=1 keeps $DIR, and
# so does CR_KEEP_ON_FAIL=1 where the script counted failures ($fails, its
# own fail). The jobs and cgroups of the agents whose state is in $DIR go
# too (reap.sh).

CORRAL=${CORRAL_BIN:?CORRAL_BIN not set}
CR_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CR_STOP=${CR_STOP:-TERM}
CR_FAIL_TAIL=${CR_FAIL_TAIL:-20}
CR_FAIL_OUT=${CR_FAIL_OUT:-0}
CR_EXEC=${CR_EXEC:-}
CR_KEEP_ON_FAIL=${CR_KEEP_ON_FAIL:-0}

# A process that is gone or a zombie (exited, not yet waited for).
cr_gone() { # cr_gone PID
    local st
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    st=${st##*) }
    [ "${st%% *}" = Z ]
}

# cr_stop_pids SIGNAL PID...: SIGNAL (and CONT, for a stopped one) to each,
# then wait for them, at most $CR_STOP_GRACE seconds in all (default 30):
# one still there after that is named on stderr and killed (KILL). A child
# hung in its exit (a sanitizer's leak check, say) never holds a test to
# meson's timeout.
CR_STOP_GRACE=${CR_STOP_GRACE:-30}
cr_stop_pids() {
    local sig=$1 p end
    shift
    for p in "$@"; do kill "-$sig" "$p" 2>/dev/null || true; done
    for p in "$@"; do kill -CONT "$p" 2>/dev/null || true; done # a SIGSTOPped one
    end=$((SECONDS + CR_STOP_GRACE))
    for p in "$@"; do
        while ! cr_gone "$p" && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
        if ! cr_gone "$p"; then
            echo "cleanup: pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)) still there ${CR_STOP_GRACE}s after SIG$sig: KILL" >&2
            kill -KILL "$p" 2>/dev/null || true
        fi
        wait "$p" 2>/dev/null || true
    done
}

cr_setup() { # cr_setup NAME
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/corral-$1-XXXXXX")
    PIDS=()
    CKPT_CONF=$DIR/ckpt.json
    printf '{"checkpoint_root": "%s/ckpt"}\n' "$DIR" >"$CKPT_CONF"
    trap cr_cleanup EXIT
    trap 'cr_on_signal 143' TERM
    trap 'cr_on_signal 130' INT
}

# The script's own cleanup, stray jobs and the agents' cgroups (reap.sh),
# then $DIR.
cr_remove_dir() {
    if declare -F cleanup_extra >/dev/null; then cleanup_extra || true; fi
    "$CR_LIB_DIR/reap.sh" "$DIR" || true
    if [ "$CR_KEEP_ON_FAIL" = 1 ] && [ "${fails:-0}" != 0 ]; then
        echo "kept $DIR"
    elif [ -z "${CORRAL_KEEP:-}" ]; then
        rm -rf "$DIR"
    fi
}

cr_cleanup() {
    cr_stop_pids "$CR_STOP" "${PIDS[@]}"
    cr_remove_dir
}

# Killed (meson's timeout, ^C): no time for an orderly stop. meson kills
# the process group 0.5 s after its SIGTERM: reap.sh (stray jobs, cgroups,
# $DIR) goes on in a session of its own, and the script ends at once.
cr_on_signal() {
    local p rm=--rm
    trap - EXIT
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    if declare -F cleanup_extra >/dev/null; then cleanup_extra || true; fi
    if [ "$CR_KEEP_ON_FAIL" = 1 ] && [ "${fails:-0}" != 0 ]; then
        echo "kept $DIR"
        rm=
    fi
    setsid "$CR_LIB_DIR/reap.sh" $rm "$DIR" </dev/null >/dev/null 2>&1 &
    exit "$1"
}

fail() {
    echo "FAIL: $*"
    if declare -F fail_context >/dev/null; then fail_context || true; fi
    local f
    for f in "$DIR"/*.log; do
        [ -f "$f" ] || continue
        echo "--- $f"
        tail -"$CR_FAIL_TAIL" "$f"
    done
    if [ "$CR_FAIL_OUT" = 1 ]; then
        for f in "$DIR"/*.out; do
            [ -f "$f" ] || continue
            echo "--- $f"
            tail -"$CR_FAIL_TAIL" "$f"
        done
    fi
    exit 1
}

wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

free_ports() { # free_ports N: N distinct free loopback ports
    python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

cr_start_controller() { # cr_start_controller STATE-DIR [FLAGS...]
    CTL_STATE=$1
    shift
    mkdir -p "$CTL_STATE"
    rm -f "$CTL_STATE/listen.addr"
    "$CORRAL" controller --config "$CKPT_CONF" --listen 127.0.0.1:0 --state-dir "$CTL_STATE" \
        --heartbeat 1 "$@" >>"$DIR/controller.log" 2>&1 &
    CTL_PID=$!
    PIDS+=("$CTL_PID")
    # exit: where the script's fail counts and goes on, nothing can
    wait_for 30 test -s "$CTL_STATE/listen.addr" || { fail "controller did not start"; exit 1; }
    wait_for 30 test -s "$CTL_STATE/admin.token" || { fail "controller wrote no admin token"; exit 1; }
    CORRAL_SERVER=$(cat "$CTL_STATE/listen.addr")
    CORRAL_TOKEN=$(cat "$CTL_STATE/admin.token")
    export CORRAL_SERVER CORRAL_TOKEN
    SERVER=$CORRAL_SERVER ADMIN=$CORRAL_TOKEN
}

cr_start_agent() { # cr_start_agent NODE STATE-DIR LOG [FLAGS...]
    local node=$1 sd=$2 log=$3
    shift 3
    # shellcheck disable=SC2086 # CR_EXEC: words before the command
    $CR_EXEC "$CORRAL" agent --server "$CORRAL_SERVER" --join-token "$CTL_STATE/join.token" \
        --node "$node" --listen 127.0.0.1:0 --state-dir "$sd" --kill-on-exit "$@" >"$log" 2>&1 &
    PIDS+=($!)
}

c() { # c CMD ARGS...: the CLI as the admin of $SERVER
    local cmd=$1
    shift
    "$CORRAL" "$cmd" --server "$SERVER" --token "$ADMIN" "$@"
}

cr_netns_require() { # cr_netns_require TAG
    if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
        echo "skip: needs root and iproute2"
        exit 77
    fi
    TAG=$1$$
    NET=10.$((100 + $$ % 100)).$((($$ / 100) % 200 + 1))
}

cr_netns_hosts() { # cr_netns_hosts N
    local i
    if ! ip link add "$TAG-br" type bridge 2>/dev/null; then
        echo "skip: cannot create a bridge here"
        exit 77
    fi
    ip addr add "$NET.1/24" dev "$TAG-br"
    ip link set "$TAG-br" up
    for ((i = 0; i < $1; i++)); do
        ip netns add "$TAG-$i"
        ip link add "$TAG-v$i" type veth peer name "$TAG-p$i"
        ip link set "$TAG-p$i" netns "$TAG-$i"
        ip link set "$TAG-v$i" master "$TAG-br" up
        ip -n "$TAG-$i" addr add "$NET.$((10 + i))/24" dev "$TAG-p$i"
        ip -n "$TAG-$i" link set "$TAG-p$i" up
        ip -n "$TAG-$i" link set lo up
    done
}

cr_netns_down() { # cr_netns_down N
    local i
    for ((i = 0; i < $1; i++)); do
        ip netns pids "$TAG-$i" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$TAG-$i" 2>/dev/null || true
    done
    ip link del "$TAG-br" 2>/dev/null || true
}
