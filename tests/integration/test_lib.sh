#!/bin/bash
# test_lib.sh - what tests/integration/lib.sh promises every integration
# test: a script that uses it (a controller, an agent, a job running
# `sleep 300` in a session of its own, the job's checkpoint directory made)
# leaves nothing behind outside the directory it was given, both when it
# ends (exit) and when meson's timeout signals its process group (SIGTERM):
#   - its temporary directory is gone;
#   - the job's process is gone, and no process names that directory;
#   - the agent's cgroups (corral-NODE-INSTANCE, every hierarchy) are gone;
#   - the job's checkpoint directory was under that directory, and nothing
#     of its cluster is under the default checkpoint root /tmp/corral/ckpt.
# Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup libcheck
P=$DIR

cat >"$P/child.sh" <<'EOF'
#!/bin/bash
# child.sh exit|signal: a test as lib.sh's users write them.
set -euo pipefail
. "$LIB"
cr_setup child
export CORRAL_CONFIG=/dev/null
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent "libck$$" "$DIR/n1" "$DIR/agent.log" --gpus "sim:1xL4"
up() { "$CORRAL" nodes | grep -q ' up '; }
wait_for 30 up || fail "agent did not register"
"$CORRAL" submit -- sh -c 'echo "$CORRAL_CHECKPOINT_DIR" >"$0.tmp"; mv "$0.tmp" "$0"; sleep 300' \
    "$DIR/job.info" >/dev/null
wait_for 30 test -s "$DIR/job.info" || fail "the job did not start"
read -r ck <"$DIR/job.info"
# The job's own $$ is of its PID namespace: the node's pid by command line.
pid=$(pgrep -o -f -- "^sh -c echo.*$DIR/job.info") || fail "the job's shell not found"
wait_for 10 test -d "$ck" || fail "no checkpoint directory $ck"
printf 'dir=%s\ncluster=%s\ninst=%s\njob=%s\nckpt=%s\n' "$DIR" "$(cat "$DIR/ctl/cluster.id")" \
    "$(cat "$DIR/n1/instance.id")" "$pid" "$ck" >"$OUTSIDE/info.tmp"
mv "$OUTSIDE/info.tmp" "$OUTSIDE/info"
if [ "$1" = exit ]; then
    # The agent stopped in order (--kill-on-exit) removes its job's cgroups
    # and its own, before any reap.
    kill -TERM "${PIDS[-1]}"
    wait_for 30 sh -c "! kill -0 ${PIDS[-1]} 2>/dev/null"
    find /sys/fs/cgroup -maxdepth 6 -type d -name "corral-*-$(cat "$DIR/n1/instance.id")" \
        >"$OUTSIDE/cg.tmp" 2>/dev/null || true
    mv "$OUTSIDE/cg.tmp" "$OUTSIDE/cg"
    exit 0
fi
sleep 600
EOF

gone() { ! kill -0 "$1" 2>/dev/null; }
no_proc() { ! pgrep -f -- "$1/" >/dev/null; }
no_cgroups() { [ -z "$(find /sys/fs/cgroup -maxdepth 6 -type d -name "corral-*-$1" 2>/dev/null)" ]; }

for mode in exit signal; do
    rm -f "$P/info"
    # Its own session and process group, as meson starts a test.
    OUTSIDE=$P LIB=$CR_LIB_DIR/lib.sh TMPDIR=$P setsid bash "$P/child.sh" "$mode" \
        >"$P/child-$mode.log" 2>&1 &
    child=$!
    PIDS+=("$child")
    wait_for 60 test -s "$P/info" || fail "$mode: the child did not get its job running"
    dir= cluster= inst= job= ckpt=
    # shellcheck disable=SC1091
    . "$P/info"
    [ -n "$dir" ] && [ -n "$inst" ] && [ -n "$job" ] || fail "$mode: $(cat "$P/info")"
    case "$ckpt" in "$dir/ckpt/$cluster/"*) ;; *) fail "$mode: checkpoint dir $ckpt not in $dir/ckpt" ;; esac
    if [ "$mode" = signal ]; then
        kill -TERM -- "-$child" # meson's timeout: the whole group
    fi
    wait_for 60 gone "$child" || fail "$mode: the child did not end"
    wait "$child" 2>/dev/null || true
    # On a signal reap.sh finishes in a session of its own, after the child.
    wait_for 20 test ! -e "$dir" || fail "$mode: $dir left: $(ls -A "$dir")"
    wait_for 20 gone "$job" || fail "$mode: job process $job outlived the test: $(ps -o pid,pgid,sid,args -p "$job")"
    wait_for 20 no_proc "$dir" || fail "$mode: processes left: $(pgrep -a -f -- "$dir/")"
    wait_for 20 no_cgroups "$inst" || fail "$mode: cgroups left: $(find /sys/fs/cgroup -maxdepth 6 -name "corral-*-$inst")"
    [ ! -e "/tmp/corral/ckpt/$cluster" ] || fail "$mode: /tmp/corral/ckpt/$cluster exists"
    if [ "$mode" = exit ]; then
        [ -f "$P/cg" ] && [ ! -s "$P/cg" ] || fail "exit: the agent stopped in order left cgroups: $(cat "$P/cg" 2>/dev/null)"
    fi
    echo "ok: $mode: nothing left outside the test's directory"
done
echo PASS
