#!/bin/bash
# Wall-clock steps (libfaketime, with CLOCK_MONOTONIC left real): the
# controller and the agent run with a wall clock read from a file we change
# while they run.
#   - +2 h: a running job with a 1 h time limit keeps running and the tenant
#     is not billed hours it did not run;
#   - then a 3 h step back: a node whose agent is killed is still marked
#     lost within seconds (the timers do not wait for the wall clock).
set -eu
. "$(dirname "$0")/lib.sh"
BIN=$CORRAL
LIB=
for l in /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/lib/*/faketime/libfaketime.so.1; do
    [ -e "$l" ] && LIB=$l && break
done
[ -n "$LIB" ] || { echo "SKIP: libfaketime not installed (Debian package faketime)"; exit 77; }
CR_STOP=KILL CR_FAIL_TAIL=15
cr_setup clock
T=$DIR
# libfaketime's shared memory, named by the pid of each faked process that
# made it: left in /dev/shm by a process killed (-9, as here) before its exit.
cleanup_extra() {
    for p in "${PIDS[@]}"; do rm -f "/dev/shm/faketime_shm_$p" "/dev/shm/sem.faketime_sem_$p"; done
}
# The fake clock: FAKETIME_TIMESTAMP_FILE re-read on every call, monotonic
# time untouched. ASan wants to be first in the library list; not here.
echo "+0" >"$T/fake"
faked() {
    exec env LD_PRELOAD="$LIB" FAKETIME_TIMESTAMP_FILE="$T/fake" FAKETIME_NO_CACHE=1 \
        DONT_FAKE_MONOTONIC=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$@"
}
mkdir -p "$T/ctl" "$T/agent"
faked "$BIN" controller --allow-legacy-join --config "$CKPT_CONF" --listen 127.0.0.1:0 \
    --state-dir "$T/ctl" --heartbeat 1 --lost-after 3 >"$T/ctl.log" 2>&1 &
PIDS+=($!)
wait_for 30 test -s "$T/ctl/listen.addr" || fail "controller did not start"
wait_for 30 test -s "$T/ctl/admin.token" || fail "no admin token"
S=$(cat "$T/ctl/listen.addr")
TOK=$(cat "$T/ctl/admin.token")
api() { curl -sf -m 10 -H "Authorization: Bearer $TOK" "$@"; }
# field URL PYEXPR: evaluate PYEXPR on the JSON answer as 'd'.
field() { api "$S$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }

faked "$BIN" agent --server "$S" --join-token "$T/ctl/join.token" --node n1 \
    --gpus "sim:2xA100 80GB SXM" --listen 127.0.0.1:0 --state-dir "$T/agent" --wait 5s \
    >"$T/agent.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
node_state() { [ "$(field /v1/nodes "d['items'][0]['state']")" = "$1" ]; }
wait_for 30 node_state up || fail "the agent did not register"

ID=$(api -X POST "$S/v1/jobs" -d "{\"name\":\"long\",\"gpus\":2,\"gpu_type\":\"A100 80GB SXM\",
    \"time_limit_s\":3600,\"command\":[\"sh\",\"-c\",\"while :; do sleep 1; done\",\"$T/job-marker\"]}" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['ids'][0])")
job_state() { [ "$(field "/v1/jobs/$ID" "d['state']")" = "$1" ]; }
wait_for 30 job_state running || fail "job $ID did not start"

# +2 h. Heartbeats (1 s) and the timers (200 ms) run many times meanwhile.
echo "+2h" >"$T/fake"
sleep 5
job_state running || fail "a +2h wall-clock jump ended the 1 h-limit job: $(field "/v1/jobs/$ID" "d['state'], d.get('reason')")"
hours=$(field "/v1/usage?by=tenant" "sum(i['gpu_hours'] for i in d['items'])")
python3 -c "import sys; sys.exit(0 if $hours < 0.1 else 1)" ||
    fail "billed $hours GPU-hours for a few seconds of 2 GPUs"

# 3 h back (1 h behind the real time), then the node dies: lost within seconds.
echo "-1h" >"$T/fake"
sleep 1
kill -9 "$AGENT"; wait "$AGENT" 2>/dev/null || true; AGENT=
pkill -9 -f "$T/job-marker" 2>/dev/null || true
wait_for 15 node_state lost || fail "a wall-clock step back stalled dead-node detection"
echo ok
