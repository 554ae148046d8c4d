#!/bin/bash
# test_attacks.sh - holes found by attacking the shared-cluster security of
# issue 9 (docs/security.md, docs/isolation.md), each a case that failed
# before its fix: the real controller (run_as mapping for two tenants) and a
# real agent with simulated GPUs on loopback.
#   orphan   a job that leaves a process behind (setsid, double fork) when
#            its main process exits: the process must not outlive the job
#            (it would keep its GPU's device node, which goes to the next
#            job, perhaps another tenant's);
#   users    run_as.users is keyed by token name, and token names are unique
#            only within a tenant: another tenant's token of the same name
#            must not get that user's uid;
#   tmp      a file a job writes in a shared sticky directory (/tmp,
#            /dev/shm, /var/tmp: scratch, NCCL and DataLoader segments) with
#            its default umask must not be readable by another tenant's job;
#   amplify  one submit of a user token must not make the controller store
#            array x spec bytes (1 MiB body x 10000 tasks was 10 GB of
#            memory and store): 1000 tasks of a 100 KB spec cost one spec
#            (RSS and store grow by far less than 100 MB); a service of up
#            to 1000 replicas of a 100 KB spec is refused;
#   forkbomb a fork loop in a job stops at its pids limit (--pids, else 4096
#            per GPU), not at the node's pid_max;
#   priority the priority tier ranks before fair share and preempts lower
#            tiers of every tenant: a user token may not claim one above 0
#            (an admin may; a user orders its own jobs at 0 and below).
# Needs root and the cgroup v1 devices and memory controllers (as
# test_isolation.sh); exits 77 only when those are truly missing.
set -u

. "$(dirname "$0")/lib.sh"
BIN=$CORRAL
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (setuid, cgroups)"
    exit 77
fi
if [ ! -w /sys/fs/cgroup/devices ] || [ ! -w /sys/fs/cgroup/memory ]; then
    echo "SKIP: no writable cgroup v1 devices and memory controllers"
    exit 77
fi
TMPDIR=/var/tmp cr_setup attack
TMP=$DIR
chmod 755 "$TMP"
# A failed run keeps $TMP (its logs); fail counts, every check runs.
CR_KEEP_ON_FAIL=1
fails=0
ORPHAN=
cleanup_extra() { [ -z "$ORPHAN" ] || kill -9 "$ORPHAN" 2>/dev/null; }
unset CORRAL_SERVER CORRAL_TOKEN CORRAL_TOKEN_FILE CORRAL_JOIN_TOKEN
export CORRAL_CONFIG=/dev/null

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
ok() { echo "ok: $*"; }

# alice (uid 64011) is team-a's; team-b also has a token named alice.
cat >"$TMP/ctl.json" <<EOF
{"run_as": {"tenants": {"team-a": {"uid": 64001, "gid": 64001},
                        "team-b": {"uid": 64002, "gid": 64002}},
            "users": {"alice": {"uid": 64011, "gid": 64011, "tenant": "team-a"}}},
 "checkpoint_root": "$TMP/ckpt"}
EOF
cr_start_controller "$TMP/ctl" --allow-legacy-join --config "$TMP/ctl.json"
c tenants create team-a >/dev/null && c tenants create team-b >/dev/null || fail "tenants"
tok() { c tokens create --role user --tenant "$1" --name "$2" 2>/dev/null | tail -1; }
ALICE_A=$(tok team-a alice)
ALICE_B=$(tok team-b alice)

"$BIN" agent --server "$SERVER" --join-token "$TMP/ctl/join.token" --node n1 \
    --gpus "sim:2xL40S" --listen 127.0.0.1:0 --state-dir "$TMP/n1" --kill-on-exit \
    >"$TMP/agent-n1.log" 2>&1 &
PIDS+=($!)
up() { c nodes | grep -q ' up '; }
wait_for 60 up || fail "agent did not register: $(tail -5 "$TMP/agent-n1.log")"

submit() { # submit TOKEN ARGS...: prints the job id
    t=$1
    shift
    "$BIN" submit --server "$SERVER" --token "$t" "$@" | grep -o '[0-9][0-9]*' | head -1
}
state_is() { c show "$1" | grep -qi "^ *state: *$2"; }

# --- orphan: nothing of a job outlives it ----------------------------------
# The job starts a detached process (its own session, as a daemon does),
# prints its pid once it runs, and exits 0.
J=$(submit "$ALICE_A" --gpu-type L40S -- sh -c \
    'setsid sleep 3217 </dev/null >/dev/null 2>&1 & p=$!
     while ! grep -q 3217 /proc/$p/cmdline 2>/dev/null; do sleep 0.05; done; echo "pid=$p"')
wait_for 60 state_is "$J" completed || fail "job $J did not complete: $(c show "$J")"
# The pid the job saw is of its own PID namespace: the node finds the
# process by its command line.
orphans() { pgrep -x -f "sleep 3217"; }
if ! grep -q "^pid=" "$TMP/n1/logs/$J/out"; then
    fail "job $J did not print its detached process: $(cat "$TMP/n1/logs/$J/out")"
elif wait_for 20 sh -c '! pgrep -x -f "sleep 3217"'; then
    ok "the detached process of job $J ($(cat "$TMP/n1/logs/$J/out")) ended with the job"
else
    ORPHAN=$(orphans | head -1)
    fail "process $ORPHAN (uid $(stat -c %u "/proc/$ORPHAN")) of job $J outlived it" \
        "in $(grep devices "/proc/$ORPHAN/cgroup")"
fi

# --- users: a run_as.users entry is its tenant's only ----------------------
uid_of() { c show "$1" --json | tr -d " \n" | sed -n 's/.*"run_as":{[^}]*"uid":\([0-9]*\).*/\1/p'; }
JA=$(submit "$ALICE_A" --gpu-type L40S -- true)
JB=$(submit "$ALICE_B" --gpu-type L40S -- true)
UA=$(uid_of "$JA")
UB=$(uid_of "$JB")
[ "$UA" = 64011 ] && ok "team-a's alice runs as 64011" || fail "team-a's alice: uid '$UA', want 64011"
[ "$UB" = 64002 ] && ok "team-b's alice runs as team-b (64002)" ||
    fail "team-b's token named alice: uid '$UB', want 64002 (team-a's alice is 64011)"
# An entry without its tenant is refused at start.
cat >"$TMP/bad.json" <<EOF
{"run_as": {"tenants": {"team-a": {"uid": 64001, "gid": 64001}},
            "users": {"alice": {"uid": 64011, "gid": 64011}}}}
EOF
if "$BIN" controller --config "$TMP/bad.json" --state-dir "$TMP/bad" >"$TMP/bad.out" 2>&1; then
    fail "a run_as.users entry without a tenant was accepted"
elif grep -q "run_as.users.alice.tenant" "$TMP/bad.out"; then
    ok "run_as.users entry without a tenant refused: $(grep tenant "$TMP/bad.out" | head -1)"
else
    fail "users entry without tenant: no word of the field: $(cat "$TMP/bad.out")"
fi

# --- tmp: the job's default umask keeps its scratch files its own ----------
# $TMP/shared plays /tmp (1777); team-b writes, then team-a reads.
mkdir -m 1777 "$TMP/shared"
JW=$(submit "$ALICE_B" --gpu-type L40S -- sh -c "echo tmp-secret-of-b > $TMP/shared/b.out")
wait_for 60 state_is "$JW" completed || fail "job $JW did not complete: $(c show "$JW")"
JR=$(submit "$ALICE_A" --name reader --gpu-type L40S -- sh -c \
    "cat $TMP/shared/b.out || echo denied")
wait_for 60 state_is "$JR" completed || fail "job $JR did not complete: $(c show "$JR")"
if grep -q tmp-secret-of-b "$TMP/n1/logs/$JR/out"; then
    fail "team-a's job $JR read team-b's scratch file ($(stat -c '%a %u' "$TMP/shared/b.out"))"
elif grep -q denied "$TMP/n1/logs/$JR/out"; then
    ok "team-b's scratch file is $(stat -c %a "$TMP/shared/b.out"): team-a's job could not read it"
else
    fail "reader job $JR: $(cat "$TMP/n1/logs/$JR/out" "$TMP/n1/logs/$JR/err")"
fi

# --- forkbomb: a job's tasks are capped by the pids controller --------------
# A real fork loop (each child sleeps): with --pids 64 the forks fail at the
# cap (EAGAIN) instead of filling the node's pid table; a job without --pids
# gets the default, 4096 per GPU.
if [ -w /sys/fs/cgroup/pids ]; then
    JF=$(submit "$ALICE_A" --gpu-type L40S --pids 64 -- /usr/bin/python3 -c '
import os, time
n, err = 0, "none"
for i in range(400):
    try:
        p = os.fork()
    except OSError as e:
        err = e.strerror
        break
    if p == 0:
        time.sleep(600)
        os._exit(0)
    n += 1
print("forked=%d err=%s" % (n, err), flush=True)')
    wait_for 60 state_is "$JF" completed || fail "fork job $JF did not complete: $(c show "$JF")"
    got=$(cat "$TMP/n1/logs/$JF/out")
    n=$(echo "$got" | sed -n 's/^forked=\([0-9]*\).*/\1/p')
    if [ -n "$n" ] && [ "$n" -lt 64 ] && echo "$got" | grep -q 'err=Resource temporarily'; then
        ok "a fork loop of job $JF stopped at the cap: $got"
    else
        fail "fork loop of job $JF with --pids 64: '$got' $(cat "$TMP/n1/logs/$JF/err")"
    fi
    # The job says which pids cgroup it is in; its pids.max is read from here.
    JD=$(submit "$ALICE_A" --gpu-type L40S -- sh -c 'grep :pids: /proc/self/cgroup; sleep 600')
    wait_for 60 grep -q :pids: "$TMP/n1/logs/$JD/out" || fail "job $JD did not say its cgroup"
    cg=$(cut -d: -f3 "$TMP/n1/logs/$JD/out")
    max=$(cat "/sys/fs/cgroup/pids$cg/pids.max" 2>&1)
    [ "$max" = 4096 ] && ok "default pids.max of a 1-GPU job: 4096" ||
        fail "default pids.max of job $JD ($cg): $max"
    c cancel "$JD" >/dev/null
else
    fail "no writable cgroup v1 pids controller (mounted here: it must be used)"
fi

# --- amplify: array x spec is bounded ---------------------------------------
if command -v curl >/dev/null; then
    big=$(head -c 100000 /dev/zero | tr '\0' x)
    printf '{"command":["true"],"gpu_type":"L40S","array":1000,"env":{"BIG":"%s"}}' "$big" \
        >"$TMP/big.json"
    code=$(curl -s -o "$TMP/big.out" -w '%{http_code}' -H "Authorization: Bearer $ALICE_A" \
        -H 'Content-Type: application/json' --data @"$TMP/big.json" "$SERVER/v1/jobs")
    # The tasks of an array share one stored spec (ctl_jobs.c, spec_ref):
    # 1000 tasks of a 100 KB spec cost about one spec, not 100 MB.
    rss() { awk '/^VmRSS/ {print $2}' "/proc/$CTL_PID/status"; }
    dbkb() { du -sk "$TMP/ctl" | cut -f1; }
    rss0=$(rss) db0=$(dbkb)
    code=$(curl -s -o "$TMP/big.out" -w '%{http_code}' -H "Authorization: Bearer $ALICE_A" \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: amplify-1' \
        --data @"$TMP/big.json" "$SERVER/v1/jobs")
    rss1=$(rss) db1=$(dbkb)
    if [ "$code" = 201 ] && [ $((rss1 - rss0)) -lt 40000 ] && [ $((db1 - db0)) -lt 20000 ]; then
        ok "1000 x 100 KB array stored once: RSS +$((rss1 - rss0)) KB, store +$((db1 - db0)) KB"
    else
        fail "1000 tasks of a 100 KB spec: $code, RSS +$((rss1 - rss0)) KB, store +$((db1 - db0)) KB: $(head -c 300 "$TMP/big.out")"
    fi
    "$BIN" cancel --server "$SERVER" --token "$ALICE_A" --name job >/dev/null 2>&1 || true
    printf '{"name":"big","command":["true"],"gpu_type":"L40S","min_replicas":0,"max_replicas":1000,"env":{"BIG":"%s"}}' \
        "$big" >"$TMP/big.json"
    code=$(curl -s -o "$TMP/big.out" -w '%{http_code}' -H "Authorization: Bearer $ALICE_A" \
        -H 'Content-Type: application/json' --data @"$TMP/big.json" "$SERVER/v1/services")
    if [ "$code" = 400 ] && grep -q '"field":"max_replicas"' "$TMP/big.out"; then
        ok "a service of up to 1000 x 100 KB replicas refused: $(cat "$TMP/big.out")"
    else
        fail "a service of up to 1000 replicas of a 100 KB spec: $code $(head -c 300 "$TMP/big.out")"
    fi
    rm -f "$TMP/big.json"
else
    echo "skip amplify: no curl"
fi

# --- priority: only an admin raises the tier -------------------------------
if "$BIN" submit --server "$SERVER" --token "$ALICE_A" --priority 1000000 --gpu-type L40S \
    -- true >"$TMP/prio.out" 2>&1; then
    fail "a user token submitted at priority 1000000 (ahead of every tenant): $(cat "$TMP/prio.out")"
elif grep -q "priority" "$TMP/prio.out"; then
    ok "user token at priority 1000000 refused: $(cat "$TMP/prio.out")"
else
    fail "priority refusal does not name the field: $(cat "$TMP/prio.out")"
fi
"$BIN" submit --server "$SERVER" --token "$ALICE_A" --priority -5 --gpu-type L40S -- true \
    >/dev/null 2>&1 || fail "a user token could not submit at priority -5"
c submit --tenant team-a --priority 10 --gpu-type L40S -- true >/dev/null 2>&1 ||
    fail "an admin could not submit at priority 10"

[ "$fails" = 0 ] || exit 1
echo "all attack cases held"
