#!/bin/bash
# test_isolation.sh - jobs on a shared node, tried as an attacker would
# (docs/isolation.md): the real controller with a run_as mapping and real
# agents with simulated GPUs on loopback. Shows that
#   - a job runs as its tenant's mapped uid/gid, with a clean environment
#     (nothing of the agent's: a variable set in the agent's environment
#     does not reach it) and no descriptor of the agent's;
#   - a job cannot read the agent's join-token file, journal, another job's
#     logs or another tenant's checkpoint;
#   - a job can open only its own GPU's device node (placeholders made with
#     mknod, major 195): the cgroup v1 devices controller on one agent, the
#     cgroup v2 eBPF device filter on another (skipped with a message where
#     the kernel refuses it);
#   - --mem exceeded: the job is killed and its event says "out of memory";
#   - state files are 0600 and dirs 0700; a tenant without a mapping is
#     refused at submit; uid 0 without allow_root is refused in the config;
#   - a job of one tenant lists only its own processes (a PID namespace and
#     /proc per job): another tenant's command line is not there; cancel and
#     the time limit kill the whole namespace (a setsid child too);
#   - `corral nodes NODE` shows what is enforced; a requeued job finds its
#     checkpoint; a checkpoint older than the retention is swept.
# Uses numeric uids 64001/64002 without passwd entries (setgroups with the
# gid alone; docs/isolation.md). Needs root and the cgroup v1 devices and
# memory controllers; exits 77 only when those are truly missing.
set -u

. "$(dirname "$0")/lib.sh"
BIN=$CORRAL
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (setuid, cgroups, mknod)"
    exit 77
fi
if [ ! -w /sys/fs/cgroup/devices ] || [ ! -w /sys/fs/cgroup/memory ]; then
    echo "SKIP: no writable cgroup v1 devices and memory controllers"
    exit 77
fi
# Jobs run as other users: their directories must be reachable by them
# (on this machine /tmp itself may be 0700).
TMPDIR=/var/tmp cr_setup iso
TMP=$DIR
chmod 755 "$TMP"
# A failed run keeps $TMP (its logs); fail counts, every check runs.
CR_KEEP_ON_FAIL=1
fails=0
unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
ok() { echo "ok: $*"; }
mode_of() { stat -c %a "$1"; }
owner_of() { stat -c %u:%g "$1"; }

# --- a config that maps uid 0 without allow_root is refused ---------------
cat >"$TMP/bad.json" <<EOF
{"run_as": {"tenants": {"ops": {"uid": 0, "gid": 0}}}}
EOF
if "$BIN" controller --config "$TMP/bad.json" --state-dir "$TMP/bad" >"$TMP/bad.out" 2>&1; then
    fail "a config mapping uid 0 without allow_root was accepted"
elif grep -q "allow_root" "$TMP/bad.out"; then
    ok "uid 0 without allow_root refused in the config"
else
    fail "bad config: no word of allow_root: $(cat "$TMP/bad.out")"
fi

# --- controller -------------------------------------------------------------
cat >"$TMP/ctl.json" <<EOF
{"run_as": {"tenants": {"team-a": {"uid": 64001, "gid": 64001},
                        "team-b": {"uid": 64002, "gid": 64002}}},
 "checkpoint_root": "$TMP/ckpt", "checkpoint_retention_s": 86400}
EOF
cr_start_controller "$TMP/ctl" --allow-legacy-join --config "$TMP/ctl.json"
CLUSTER=$(cat "$TMP/ctl/cluster.id")
[ "$(mode_of "$TMP/ctl/cluster.id")" = 600 ] || fail "cluster.id mode $(mode_of "$TMP/ctl/cluster.id")"
c tenants create team-a >/dev/null && c tenants create team-b >/dev/null || fail "tenants"

# An old checkpoint of this cluster, untouched for longer than the
# retention (86400 s): the agents sweep it once they have a desired state.
OLD=$TMP/ckpt/$CLUSTER/team-a/999
mkdir -p "$OLD" && touch -d '3 days ago' "$OLD"

# The join token in a file others can read: the agent tightens it.
cp "$TMP/ctl/join.token" "$TMP/join.token"
chmod 644 "$TMP/join.token"

agent() { # agent NAME [flags...]
    name=$1
    shift
    SECRET_AGENT_VAR=agent-secret-value "$BIN" agent --server "$SERVER" \
        --join-token "$TMP/join.token" --node "$name" --gpus "sim:4xL40S" \
        --listen 127.0.0.1:0 --state-dir "$TMP/$name" --kill-on-exit "$@" \
        >"$TMP/agent-$name.log" 2>&1 &
    PIDS+=($!)
}
agent n1
agent n2 --cgroup-v1 off
nodes_up() { [ "$(c nodes | grep -c ' up ')" -ge 2 ]; }
wait_for 60 nodes_up || fail "agents did not register"
c drain n2 >/dev/null # n2 only for the eBPF check below

wait_for 30 test ! -e "$OLD" && ok "checkpoint past the retention removed" ||
    fail "$OLD (3 days old, retention 1 day) still there"

# --- a tenant without a mapping is refused at submit ------------------------
if c submit --tenant default -- true >"$TMP/o" 2>&1; then
    fail "a job of the unmapped tenant 'default' was accepted"
elif grep -q "no Unix user" "$TMP/o"; then
    ok "unmapped tenant refused at submit: $(cat "$TMP/o")"
else
    fail "unmapped tenant: unexpected answer: $(cat "$TMP/o")"
fi

submit() { c submit "$@" | grep -o '[0-9][0-9]*' | head -1; }
state_is() { c show "$1" | grep -qi "^ *state: *$2"; }

# --- job B (team-b) leaves a log and a checkpoint behind --------------------
B=$(submit --tenant team-b --gpu-type L40S -- sh -c \
    'echo b-log-secret; echo b-ckpt-secret > "$CORRAL_CHECKPOINT_DIR/secret"')
wait_for 60 state_is "$B" completed || fail "job $B (team-b) did not complete: $(c show "$B")"
BCK=$TMP/ckpt/$CLUSTER/team-b/$B
[ -f "$BCK/secret" ] || fail "no checkpoint at $BCK (checkpoint_root/<cluster>/<tenant>/<job>)"
[ "$(owner_of "$BCK")" = 64002:64002 ] || fail "$BCK owned by $(owner_of "$BCK")"
[ "$(mode_of "$BCK")" = 700 ] || fail "$BCK mode $(mode_of "$BCK")"

# --- job A (team-a) tries everything ---------------------------------------
cat >"$TMP/probe.sh" <<'EOF'
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"
echo "agentvar=${SECRET_AGENT_VAR:-none}"
echo "fds=$(ls /proc/self/fd | wc -l)"
for f in "$AGENT/jobs.journal" "$JOIN" "$AGENT/logs/$OTHER/out" "$OTHERCK/secret"; do
    if cat "$f" >/dev/null 2>&1; then echo "READ $f"; else echo "denied $f"; fi
done
for g in 0 1 2 3; do
    msg=$( (exec 3<"$DEV/nvidia$g") 2>&1)
    case "$msg" in
    *"Operation not permitted"*) echo "gpu$g fenced" ;;
    *"No such device"*) echo "gpu$g allowed" ;;
    *) echo "gpu$g other: $msg" ;;
    esac
done
EOF
chmod 644 "$TMP/probe.sh"
A=$(submit --tenant team-a --gpu-type L40S --cpus 1 \
    -e AGENT="$TMP/n1" -e JOIN="$TMP/join.token" -e OTHER="$B" -e OTHERCK="$BCK" \
    -e DEV="$TMP/n1.dev" -- sh "$TMP/probe.sh")
wait_for 60 state_is "$A" completed || fail "job $A did not complete: $(c show "$A")"
c logs "$A" >"$TMP/a.out" 2>&1
c logs "$A" --stderr >"$TMP/a.err" 2>&1
grep -q "^uid=64001 gid=64001 groups=64001$" "$TMP/a.out" && ok "job runs as 64001:64001" ||
    fail "job identity: $(head -1 "$TMP/a.out") (stderr: $(cat "$TMP/a.err"))"
grep -q "^agentvar=none$" "$TMP/a.out" && ok "no agent environment" || fail "agent env leaked"
# stdin, stdout, stderr, and the one ls opens for reading /proc/self/fd
grep -q "^fds=4$" "$TMP/a.out" && ok "no agent descriptors" ||
    fail "job inherited descriptors: $(grep fds "$TMP/a.out")"
if grep -q "^READ" "$TMP/a.out"; then fail "job read: $(grep '^READ' "$TMP/a.out")"; else
    ok "job could not read the journal, the join token, job $B's log or checkpoint"
fi
[ "$(grep -c '^denied' "$TMP/a.out")" = 4 ] || fail "probe incomplete: $(cat "$TMP/a.out")"
if [ "$(grep -c 'allowed$' "$TMP/a.out")" = 1 ] && [ "$(grep -c 'fenced$' "$TMP/a.out")" = 3 ]; then
    ok "cgroup v1 devices: own GPU node only ($(grep gpu "$TMP/a.out" | tr '\n' ' '))"
else
    fail "device fencing (v1): $(grep gpu "$TMP/a.out" | tr '\n' ' ')"
fi
[ "$(mode_of "$TMP/join.token")" = 600 ] || fail "join token file mode $(mode_of "$TMP/join.token")"

# --- modes of the agent's files ---------------------------------------------
[ "$(mode_of "$TMP/n1")" = 700 ] || fail "state dir mode $(mode_of "$TMP/n1")"
[ "$(mode_of "$TMP/n1/jobs.journal")" = 600 ] || fail "journal mode $(mode_of "$TMP/n1/jobs.journal")"
[ "$(mode_of "$TMP/n1/logs")" = 700 ] || fail "logs dir mode"
[ "$(mode_of "$TMP/n1/logs/$A")" = 700 ] && [ "$(owner_of "$TMP/n1/logs/$A")" = 64001:64001 ] ||
    fail "job log dir: $(stat -c '%a %u:%g' "$TMP/n1/logs/$A")"
[ "$(mode_of "$TMP/n1/logs/$A/out")" = 600 ] || fail "job log mode $(mode_of "$TMP/n1/logs/$A/out")"
ok "state 0700, journal 0600, per-job log dirs 0700 owned by the job's uid"

# --- --mem exceeded: killed, "out of memory" --------------------------------
M=$(submit --tenant team-a --gpu-type L40S --mem 32M --retries 0 -- sh -c \
    'x=$(head -c 200000000 /dev/zero | tr "\0" a); echo survived ${#x}')
wait_for 90 state_is "$M" failed || fail "job $M (--mem 32M) did not fail: $(c show "$M")"
if c show "$M" | grep -q "out of memory"; then ok "--mem exceeded: 'out of memory' event"; else
    fail "no 'out of memory' for job $M: $(c show "$M")"
fi

# --- a requeued job finds its own checkpoint --------------------------------
R=$(submit --tenant team-a --gpu-type L40S -- sh -c \
    'f="$CORRAL_CHECKPOINT_DIR/step"; if [ -f "$f" ]; then echo "resumed from $(cat "$f")"; else echo step-1 > "$f"; exec sleep 120; fi')
RCK=$TMP/ckpt/$CLUSTER/team-a/$R
wait_for 60 test -f "$RCK/step" || fail "job $R wrote no checkpoint"
c requeue "$R" >/dev/null || fail "requeue $R"
wait_for 90 state_is "$R" completed || fail "requeued job $R did not complete: $(c show "$R")"
if c logs "$R" | grep -q "resumed from step-1"; then ok "requeued job $R found its checkpoint"; else
    fail "requeued job $R: $(c logs "$R")"
fi

# --- a job sees only its own processes (a PID namespace per job) -----------
# Job P of team-a sleeps with a secret in its command line and a child in a
# session of its own; job Q of team-b lists /proc, reads every command line
# there and runs ps: it finds only itself and its namespace's init.
P=$(submit --tenant team-a --gpu-type L40S -- sh -c \
    'setsid sleep 3601 & echo p-up; sleep 3602; echo tenant-a-secret-arg')
wait_for 60 grep -q p-up "$TMP/n1/logs/$P/out" || fail "job $P (team-a) did not start: $(c show "$P")"
cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -q tenant-a-secret-arg ||
    fail "job $P's command line is not on the node (the check below would prove nothing)"
cat >"$TMP/procs.sh" <<'EOF'
echo "self=$$"
n=0
for d in /proc/[0-9]*; do
    n=$((n + 1))
    echo "pid ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline" 2>&1)"
done
echo "count=$n"
ps -e -o pid=,user=,args= | sed 's/^/ps /'
EOF
chmod 644 "$TMP/procs.sh"
Q=$(submit --tenant team-b --gpu-type L40S -- sh "$TMP/procs.sh")
wait_for 60 state_is "$Q" completed || fail "job $Q (team-b) did not complete: $(c show "$Q")"
c logs "$Q" >"$TMP/q.out" 2>&1
if grep -q "tenant-a-secret-arg\|sleep 360" "$TMP/q.out"; then
    fail "team-b's job $Q saw team-a's job: $(grep 'secret\|sleep' "$TMP/q.out")"
elif grep -q "^self=2$" "$TMP/q.out" && grep -q "^count=2$" "$TMP/q.out" &&
    grep -q "^pid 1: corral-init *$" "$TMP/q.out" && [ "$(grep -c '^ps ' "$TMP/q.out")" -le 4 ]; then
    ok "team-b's job lists only its own processes ($(grep -c '^ps ' "$TMP/q.out") in ps)"
else
    fail "job $Q's view of /proc: $(cat "$TMP/q.out")"
fi
# Cancel: the whole namespace goes, the setsid child too; the end is a signal.
c cancel "$P" >/dev/null || fail "cancel $P"
wait_for 60 state_is "$P" cancelled || fail "job $P not cancelled: $(c show "$P")"
wait_for 30 sh -c '! pgrep -x -f "sleep 360[12]"' && ok "cancel of $P left no process behind" ||
    fail "job $P left: $(pgrep -a -f 'sleep 360[12]')"
c show "$P" | grep -qi "signal: *15" || fail "job $P's end is not SIGTERM: $(c show "$P")"
# Time limit: the same stop, after the limit; a job that ignores SIGTERM gets the SIGKILL.
T=$(submit --tenant team-a --gpu-type L40S --time 3s -- sh -c \
    "trap '' TERM; setsid sleep 3603 & sleep 3604")
wait_for 90 state_is "$T" failed || fail "job $T (--time 3s) did not end failed: $(c show "$T")"
wait_for 30 sh -c '! pgrep -x -f "sleep 360[34]"' && ok "time limit of $T took its whole namespace" ||
    fail "job $T left: $(pgrep -a -f 'sleep 360[34]')"

# --- corral nodes NODE says what is enforced --------------------------------
c nodes n1 >"$TMP/n1.txt"
grep -q "isolation: *uid=enforced, devices=enforced, memory=enforced, cpu=enforced" "$TMP/n1.txt" &&
    ok "corral nodes n1: $(grep 'isolation:' "$TMP/n1.txt")" || fail "nodes n1: $(cat "$TMP/n1.txt")"
# Each job in its own PID namespace (root here: the kernel allows it):
# said at start and in the node's detail
want_proc="processes: own PID namespace and /proc per job"
grep -q "isolation how:.*$want_proc" "$TMP/n1.txt" || fail "nodes n1 does not say '$want_proc': $(grep 'isolation how' "$TMP/n1.txt")"
grep -q "isolation processes: enforced (a PID namespace and /proc per job" "$TMP/agent-n1.log" ||
    fail "the agent did not say at start that jobs get a PID namespace: $(grep 'isolation processes' "$TMP/agent-n1.log")"
c nodes n2 >"$TMP/n2.txt"
grep -q "memory=unavailable" "$TMP/n2.txt" || fail "n2 (no v1, no v2 memory) should say memory=unavailable"

# --- cgroup v2: the eBPF device filter alone (n2 runs with --cgroup-v1 off) --
if grep -q "devices=enforced" "$TMP/n2.txt"; then
    c undrain n2 >/dev/null
    c drain n1 >/dev/null
    V=$(submit --tenant team-b --gpu-type L40S -e DEV="$TMP/n2.dev" -e AGENT="$TMP/n2" \
        -e JOIN="$TMP/join.token" -e OTHER="$A" -e OTHERCK="$TMP/ckpt/$CLUSTER/team-a/$A" \
        -- sh "$TMP/probe.sh")
    wait_for 60 state_is "$V" completed || fail "job $V did not complete: $(c show "$V")"
    c logs "$V" >"$TMP/v.out" 2>&1
    if [ "$(grep -c 'allowed$' "$TMP/v.out")" = 1 ] && [ "$(grep -c 'fenced$' "$TMP/v.out")" = 3 ]; then
        ok "cgroup v2 eBPF: own GPU node only ($(grep gpu "$TMP/v.out" | tr '\n' ' '))"
    else
        fail "device fencing (v2 eBPF): $(cat "$TMP/v.out")"
    fi
    # The agent loads one program per GPU set and attaches it to each job
    # of that set (issue 25): jobs on other GPUs at the same time, and one
    # on a set already seen, each reach their own GPU only.
    W=()
    for k in 1 2 3 4; do
        [ "$k" = 4 ] && wait_for 60 state_is "${W[1]}" completed
        W+=("$(submit --tenant team-b --gpu-type L40S -e DEV="$TMP/n2.dev" -e AGENT="$TMP/n2" \
            -e JOIN="$TMP/join.token" -e OTHER="$A" -e OTHERCK="$TMP/ckpt/$CLUSTER/team-a/$A" \
            -- sh -c 'sleep 1; exec sh "$0"' "$TMP/probe.sh")")
    done
    seen=
    for w in "${W[@]}"; do
        wait_for 60 state_is "$w" completed || fail "job $w did not complete: $(c show "$w")"
        gpu=$(c show "$w" | sed -n 's/.* started .* on n2\[\([0-9]*\)\].*/\1/p' | head -1)
        c logs "$w" >"$TMP/w.out" 2>&1
        if [ "$(grep -c 'allowed$' "$TMP/w.out")" = 1 ] && grep -q "^gpu$gpu allowed$" "$TMP/w.out" &&
            [ "$(grep -c 'fenced$' "$TMP/w.out")" = 3 ]; then
            seen="$seen $gpu"
        else
            fail "device fencing (v2 eBPF, cached program), job $w on gpu $gpu: $(grep gpu "$TMP/w.out" | tr '\n' ' ')"
        fi
    done
    ok "cgroup v2 eBPF, one program per GPU set: 4 jobs each on their own GPU only (gpus$seen)"
else
    echo "SKIP (part): no cgroup v2 device filter here: $(grep 'isolation how' "$TMP/n2.txt")"
fi

if [ "$fails" -gt 0 ]; then
    echo "--- controller log"; tail -20 "$TMP/controller.log"
    echo "--- agent n1 log"; tail -30 "$TMP/agent-n1.log"
    exit 1
fi
echo "all isolation checks passed"
