#!/usr/bin/env bash
# test_mig_dynamic.sh - dynamic MIG end to end: the real controller and one
# real agent (a simulated A30 marked --mig-dynamic) on loopback, driven by
# the real client (docs/scheduler.md, "Dynamic MIG").
#   - the GPU starts as 2g.12gb + 1g.6gb + 1g.6gb; job A takes the 2g;
#   - job B asks for another 2g.12gb, which no instance fits: the scheduler
#     rewrites the layout (the two idle 1g.6gb go, a 2g.12gb is made), the
#     agent applies it (sim: modelled delay) and registers the new instance,
#     and B starts on it; A's instance is untouched (same UUID, still
#     running), and the started event says a repartition happened;
#   - job C (1g.6gb) finds no idle slice to repartition (both 2g busy): it
#     pends, and no busy instance is destroyed;
#   - B ends: C gets a 1g.6gb carved from B's idle instance and starts, A
#     still on its own;
#   - job D asks for 4g.24gb, a profile no layout had: it pends (not refused)
#     until A and C end, then the GPU is repartitioned into one 4g.24gb;
#   - job E asks for the whole A30: it pends, and its reason says the GPU
#     is in MIG mode (the controller does not switch MIG mode off).
# Polls with deadlines; no sleeps as synchronisation.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup migdyn
# A node name of its own: job cgroups are named corral-NODE/job-ID, and
# other suites on this host run agents called n0.
NODE="migdyn$$"
fail_context() {
    for j in ${A:-} ${B:-} ${C:-} ${D:-} ${E:-}; do "$CORRAL" show "$j" 2>&1 | tail -12; done
}
ok() { echo "ok: $*"; }

unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent "$NODE" "$DIR/node" "$DIR/agent.log" --gpus "sim:1xA30,mig=2g.12gb:1+1g.6gb:2" \
    --mig-dynamic all
up() { "$CORRAL" nodes | grep ' up '; }
wait_for 30 up || fail "agent did not register"

state_of() { "$CORRAL" show --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
submit_id() { "$@" | sed -nE 's/^Submitted (job|[0-9]+ jobs) ([0-9]+).*/\2/p'; }
# The node's MIG instances: "profile start uuid" lines.
instances() {
    curl -sf -H "Authorization: Bearer $CORRAL_TOKEN" "$CORRAL_SERVER/v1/nodes/$NODE" |
        python3 -c 'import json,sys
for m in json.load(sys.stdin)["gpus"][0].get("mig") or []:
    print(m["profile"], m.get("start", "-"), m["uuid"])'
}
uuid_of() { # the MIG UUID a job printed first
    local f="$DIR/node/logs/$1/out"
    test -s "$f" && head -1 "$f"
}

job() { submit_id "$CORRAL" submit --gpu-type A30 --mig "$1" -- sh -c 'echo $CUDA_VISIBLE_DEVICES; sleep 300'; }

A=$(job 2g.12gb)
wait_for 30 is_state "$A" running || fail "job A did not start"
wait_for 30 uuid_of "$A" || fail "job A printed no device"
UA=$(uuid_of "$A")
instances | grep "^2g.12gb .* $UA$" >/dev/null || fail "job A is not on the 2g.12gb instance: $(instances)"
ok "job A on the registered 2g.12gb ($UA)"

B=$(job 2g.12gb)
wait_for 60 is_state "$B" running || fail "job B did not start: $("$CORRAL" show "$B")"
wait_for 30 uuid_of "$B" || fail "job B printed no device"
UB=$(uuid_of "$B")
[ "$UB" != "$UA" ] || fail "job B got job A's instance"
case "$UB" in MIG-*) ;; *) fail "job B got '$UB', not a MIG instance" ;; esac
has_b() { instances | grep "^2g.12gb 2 $UB$"; }
wait_for 30 has_b || fail "the node does not list B's new 2g.12gb at slice 2: $(instances)"
[ "$(instances | wc -l)" = 2 ] || fail "want two instances after the repartition: $(instances)"
instances | grep " $UA$" >/dev/null || fail "job A's instance was touched: $(instances)"
"$CORRAL" show "$B" | grep "MIG repartition" >/dev/null || fail "no repartition in B's events: $("$CORRAL" show "$B")"
grep -q "MIG layout changed" "$DIR/agent.log" || fail "the agent did not apply a layout"
is_state "$A" running || fail "job A stopped"
ok "job B started on a 2g.12gb made from two idle 1g.6gb ($UB); A untouched"

C=$(job 1g.6gb)
wait_for 10 is_state "$C" pending || fail "job C is not pending"
sleep_check() { ! is_state "$C" running; }
# C has nothing to repartition while A and B run: it stays pending and the
# layout stays as it is (polled for a while: a wrong start would show).
for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep_check || fail "job C started while both 2g.12gb are busy"
    sleep 0.2
done
{ instances | grep " $UA$" && instances | grep " $UB$"; } >/dev/null || fail "a busy instance went: $(instances)"
ok "job C pends: no idle slice; busy instances kept"

"$CORRAL" cancel "$B" >/dev/null
wait_for 60 is_state "$C" running || fail "job C did not start after B ended: $("$CORRAL" show "$C")"
wait_for 30 uuid_of "$C" || fail "job C printed no device"
UC=$(uuid_of "$C")
has_c() { instances | grep "^1g.6gb . $UC$"; }
wait_for 30 has_c || fail "job C's 1g.6gb is not listed: $(instances)"
instances | grep " $UA$" >/dev/null || fail "job A's instance was touched: $(instances)"
is_state "$A" running || fail "job A stopped"
ok "B ended: C runs on a 1g.6gb carved from B's idle instance ($UC); A untouched"

# A profile no layout ever had (4g.24gb: the whole A30) is not refused as
# "no GPU type can run it": it waits for the GPU's slices to be idle, then
# the GPU is repartitioned for it (issue 28).
D=$(job 4g.24gb)
wait_for 10 is_state "$D" pending || fail "job D is not pending"
reason_of() { "$CORRAL" show --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("reason") or "")'; }
has_reason() { [ -n "$(reason_of "$D")" ]; }
wait_for 10 has_reason || fail "job D has no reason"
case "$(reason_of "$D")" in
*"no GPU type"*) fail "job D refused: $(reason_of "$D")" ;;
esac
"$CORRAL" cancel "$A" "$C" >/dev/null
wait_for 60 is_state "$D" running || fail "job D did not start after A and C ended: $("$CORRAL" show "$D")"
wait_for 30 uuid_of "$D" || fail "job D printed no device"
UD=$(uuid_of "$D")
has_d() { instances | grep "^4g.24gb 0 $UD$"; }
wait_for 30 has_d || fail "job D's 4g.24gb is not listed: $(instances)"
[ "$(instances | wc -l)" = 1 ] || fail "want the one 4g.24gb instance: $(instances)"
ok "D (4g.24gb, in no layout before) runs on the repartitioned GPU ($UD)"

# A whole-GPU job where the only A30 is in MIG mode: the controller does not
# take a GPU out of MIG mode (docs/scheduler.md), and the reason says so
# rather than "reserved for an unknown time".
E=$(submit_id "$CORRAL" submit --gpu-type A30 --gpus 1 -- sleep 300)
has_e_reason() { reason_of "$E" | grep "in MIG mode"; }
wait_for 30 has_e_reason || fail "job E's reason does not say the A30 is in MIG mode: $(reason_of "$E")"
case "$(reason_of "$E")" in
*"unknown time"*) fail "job E: $(reason_of "$E")" ;;
esac
is_state "$E" pending || fail "job E is not pending"
ok "E (a whole A30) pends: $(reason_of "$E")"
echo "PASS"
