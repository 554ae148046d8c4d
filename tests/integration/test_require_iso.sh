#!/usr/bin/env bash
# test_require_iso.sh - require_isolation (docs/isolation.md): an agent
# that cannot enforce a fence its config requires registers but takes no
# jobs. The fences are made unavailable with the agent's own switches
# (--cgroup off --cgroup-v1 off: no device, memory or pids fence;
# --job-pid-namespace off: no PID namespace). Checks that:
#   - the agent logs the reason (each missing fence and why);
#   - `corral nodes` shows the node drained with "agent takes no jobs: ...";
#   - an admin's undrain is refused (409) while the agent says so;
#   - a job pinned to that node stays pending while a job submitted after
#     it runs on a fit node (so the scheduler had its passes);
#   - the config file form (`"require_isolation": [...]`) works the same;
#   - restarted without the requirement, the agent's node is up again and
#     the pinned job runs there.
# Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup requireiso
cr_start_controller "$DIR/ctl" --allow-legacy-join
NOFENCE=(--cgroup off --cgroup-v1 off --job-pid-namespace off)
printf '{"require_isolation": ["devices", "memory", "pids", "pidns"]}\n' >"$DIR/agent.json"
cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xA100 80GB SXM" "${NOFENCE[@]}" \
    --config "$DIR/agent.json"
A1=${PIDS[-1]}
cr_start_agent n2 "$DIR/n2" "$DIR/agent-2.log" --gpus "sim:1xA100 80GB SXM"
node_line() { "$CORRAL" nodes | grep "^$1 "; }
state_of() { node_line "$1" | awk '{print $2}'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
wait_for 60 is_state n1 drained || fail "n1 not drained: $("$CORRAL" nodes)"
wait_for 60 is_state n2 up || fail "n2 not up: $("$CORRAL" nodes)"

# The reason, in the agent's log and in `corral nodes`.
grep -q "require_isolation devices,memory,pids,pidns: devices, memory, pids, pidns unavailable (devices: " "$DIR/agent-1.log" ||
    fail "the agent did not log why it takes no jobs"
grep -q "this node takes no jobs" "$DIR/agent-1.log" || fail "the agent did not say it takes no jobs"
nodes=$("$CORRAL" nodes)
echo "$nodes" | grep "^n1 " | grep -q "agent takes no jobs: devices, memory, pids, pidns unavailable" ||
    fail "corral nodes: $nodes"
# The reasons themselves (as far as the node's 255 characters go).
curl -sf -H "Authorization: Bearer $ADMIN" "$SERVER/v1/nodes/n1" |
    grep -q '"reason":"agent takes no jobs: [^"]*(devices: cgroup v1 off' ||
    fail "node n1's reason: $(curl -s -H "Authorization: Bearer $ADMIN" "$SERVER/v1/nodes/n1")"
grep -q "pidns: off (--job-pid-namespace off)" "$DIR/agent-1.log" || fail "the agent's log lacks pidns's why"
# An admin cannot put it back in service while its agent refuses.
code=$(curl -s -o "$DIR/undrain.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" \
    "$SERVER/v1/nodes/n1/undrain")
[ "$code" = 409 ] || fail "undrain of n1 answered $code: $(cat "$DIR/undrain.out")"
grep -q "takes no jobs" "$DIR/undrain.out" || fail "undrain's answer: $(cat "$DIR/undrain.out")"

# Jobs go to n2 only; one pinned to n1 waits (the scheduler has judged it:
# its pending event has a reason).
submit() { "$CORRAL" submit "$@" | grep -o '[0-9][0-9]*' | head -1; }
state_is() { "$CORRAL" show "$1" | grep -q "State: *$2"; }
other=$(submit -n other --gpus 1 -- sh -c 'echo ran on $CORRAL_NODE')
wait_for 60 state_is "$other" completed || fail "job $other did not complete: $("$CORRAL" show "$other")"
"$CORRAL" logs "$other" | grep -q "ran on n2" || fail "job $other: $("$CORRAL" logs "$other")"
pinned=$(submit -n pinned --gpus 1 --nodelist n1 -- sh -c 'echo ran on $CORRAL_NODE')
judged() { "$CORRAL" show "$pinned" | grep -q "pending  *[a-z]"; }
wait_for 60 judged || fail "job $pinned was not judged: $("$CORRAL" show "$pinned")"
state_is "$pinned" pending || fail "job $pinned left pending: $("$CORRAL" show "$pinned")"
! grep -q "job=$pinned" "$DIR/agent-1.log" || fail "n1's agent saw job $pinned"

# Fixed (here: the requirement dropped), the agent registers fit: up again.
kill -TERM "$A1"
wait "$A1" 2>/dev/null || true
cr_start_agent n1 "$DIR/n1" "$DIR/agent-1b.log" --gpus "sim:1xA100 80GB SXM" "${NOFENCE[@]}"
wait_for 60 is_state n1 up || fail "n1 not up after a fit registration: $("$CORRAL" nodes)"
wait_for 60 state_is "$pinned" completed || fail "job $pinned did not run: $("$CORRAL" show "$pinned")"
"$CORRAL" logs "$pinned" | grep -q "ran on n1" || fail "job $pinned: $("$CORRAL" logs "$pinned")"
echo "ok: an agent short of its required fences takes no jobs, says why, and is in service once fit"
