#!/usr/bin/env bash
# test_suspend.sh - the suspend contract under --policy rounds (issue 27;
# docs/api.md "Suspend and resume"): two checkpointable jobs share one L4
# by 3-second rounds on a sim agent. A suspended job gets SIGUSR1, writes
# its step into CORRAL_CHECKPOINT_DIR and exits 75; the controller requeues
# it as suspended (an event saying why, not failed, no retry used) and
# starts it again once that run has exited, with CORRAL_RESUME=1: it goes
# on from its checkpoint. A job that does not declare it can checkpoint
# (on the L40S node) is never suspended; the checkpointable job behind it
# waits for it. Then three "auto" jobs on both nodes: a round moves one
# between L4 and L40S and it resumes there. Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup suspend
cr_start_controller "$DIR/ctl" --allow-legacy-join --policy rounds --round 3
cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xL4"
cr_start_agent n2 "$DIR/n2" "$DIR/agent-2.log" --gpus "sim:1xL40S"
up() { "$CORRAL" nodes | grep -q "^$1 *up"; }
wait_for 60 up n1 || fail "agent n1 did not register"
wait_for 60 up n2 || fail "agent n2 did not register"

# 40 steps of 0.2 s; on SIGUSR1 the step goes to the checkpoint, exit 75
# shellcheck disable=SC2016 # expanded by the job's shell
job='ck=$CORRAL_CHECKPOINT_DIR/step; n=0
if [ "${CORRAL_RESUME:-}" = 1 ] && [ -f "$ck" ]; then n=$(cat "$ck"); echo "resumed at step $n"; fi
trap '"'"'echo $n >"$ck"; echo "checkpointed at step $n"; exit 75'"'"' USR1
while [ "$n" -lt 40 ]; do n=$((n + 1)); sleep 0.2; done
echo "done at step $n"'
sub() { "$CORRAL" submit "$@" -- sh -c "$job" | grep -o '[0-9][0-9]*' | head -1; }
a=$(sub -n a --gpus 1 --gpu-type L4 --checkpointable)
b=$(sub -n b --gpus 1 --gpu-type L4 --checkpointable)
c=$(sub -n c --gpus 1 --gpu-type L40S)
d=$(sub -n d --gpus 1 --gpu-type L40S --checkpointable)
if [ -z "$a" ] || [ -z "$b" ] || [ -z "$c" ] || [ -z "$d" ]; then fail "submit"; fi

state_is() { "$CORRAL" show "$1" | grep -q "State: *$2"; }
for id in "$a" "$b" "$c" "$d"; do
    wait_for 120 state_is "$id" completed || fail "job $id did not complete: $("$CORRAL" show "$id")"
done
for id in "$a" "$b"; do
    "$CORRAL" show "$id" | grep -q "suspended by round" ||
        fail "job $id was never suspended: $("$CORRAL" show "$id")"
    "$CORRAL" show "$id" | grep -q "SIGUSR1 sent" || fail "job $id: no signal in the event"
    "$CORRAL" logs "$id" 2>/dev/null | grep -q "resumed at step [1-9]" ||
        fail "job $id did not resume from its checkpoint: $("$CORRAL" logs "$id" 2>&1 | tail -3)"
    "$CORRAL" logs "$id" 2>/dev/null | grep -q "done at step 40" ||
        fail "job $id did not finish: $("$CORRAL" logs "$id" 2>&1 | tail -3) $("$CORRAL" show "$id" | tail -12)"
    "$CORRAL" show "$id" | grep -qi "retries: *[1-9]" && fail "job $id used a retry"
done
"$CORRAL" show "$c" | grep -q "suspended" && fail "non-checkpointing job $c was suspended"
grep -q "job=$a no longer wanted here (.*): stop with SIGUSR1" "$DIR/agent-1.log" ||
    grep -q "job=$b no longer wanted here (.*): stop with SIGUSR1" "$DIR/agent-1.log" ||
    fail "the agent did not send the checkpoint signal"
# Three checkpointable jobs of GPU type auto on the two nodes: a round
# moves a job between L4 and L40S, and it goes on from its checkpoint there.
e=$(sub -n e --gpus 1 --checkpointable)
f=$(sub -n f --gpus 1 --checkpointable)
g=$(sub -n g --gpus 1 --checkpointable)
if [ -z "$e" ] || [ -z "$f" ] || [ -z "$g" ]; then fail "submit auto"; fi
moved=""
for id in "$e" "$f" "$g"; do
    wait_for 120 state_is "$id" completed || fail "job $id did not complete: $("$CORRAL" show "$id")"
    out=$("$CORRAL" show "$id")
    if grep -q "moves from" <<<"$out" && grep -q "started *1 x L4 " <<<"$out" &&
        grep -q "started *1 x L40S " <<<"$out"; then
        moved=$id
    fi
    "$CORRAL" logs "$id" 2>/dev/null | grep -q "done at step 40" ||
        fail "job $id did not finish: $("$CORRAL" logs "$id" 2>&1 | tail -3) $("$CORRAL" show "$id" | tail -12)"
done
[ -n "$moved" ] || fail "no auto job moved between L4 and L40S: $("$CORRAL" show "$e")"
"$CORRAL" logs "$moved" 2>/dev/null | grep -q "resumed at step [1-9]" ||
    fail "job $moved did not resume from its checkpoint on the other type"
echo "ok: suspend"
