#!/usr/bin/env bash
# test_suspend_crash.sh - kill -9 of the controller during a suspension
# (issue 27; docs/api.md "Suspend and resume"): two checkpointable jobs
# share one L4 by 3-second rounds under --policy rounds. As soon as one
# job has been told to checkpoint (the agent sent SIGUSR1), the controller
# is killed with SIGKILL and started again on the same state and address.
# Then: both jobs complete, each finishes exactly once, no two runs of one
# job ever overlap (each run holds a directory lock that a second run
# would find), every resumed run goes on from its last checkpoint (no run
# restarts from step 0 after a checkpoint was written), and no retry is
# used. Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup suspendcrash
read -r PORT < <(free_ports 1)
CTL_FLAGS=(--allow-legacy-join --policy rounds --round 3 --listen "127.0.0.1:$PORT")
cr_start_controller "$DIR/ctl" "${CTL_FLAGS[@]}"
cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xL4"
up() { "$CORRAL" nodes | grep -q "^$1 *up"; }
wait_for 60 up n1 || fail "agent n1 did not register"

# 50 steps of 0.2 s. A run takes the lock $DIR/run-$ID (mkdir: a second
# concurrent run records OVERLAP), logs where it starts, checkpoints its
# step on SIGUSR1 and exits 75.
mkdir -p "$DIR/trace"
# shellcheck disable=SC2016 # expanded by the job's shell
job='t='"$DIR"'/trace/$CORRAL_JOB_ID; ck=$CORRAL_CHECKPOINT_DIR/step; n=0
mkdir '"$DIR"'/trace/run-$CORRAL_JOB_ID 2>/dev/null || echo OVERLAP >>"$t"
if [ "${CORRAL_RESUME:-}" = 1 ] && [ -f "$ck" ]; then n=$(cat "$ck"); fi
echo "start $n" >>"$t"
trap '"'"'sleep 3; echo $n >"$ck"; echo "ckpt $n" >>"$t"; rmdir '"$DIR"'/trace/run-$CORRAL_JOB_ID; exit 75'"'"' USR1
while [ "$n" -lt 50 ]; do n=$((n + 1)); sleep 0.2; done
echo "done $n" >>"$t"; rmdir '"$DIR"'/trace/run-$CORRAL_JOB_ID'
sub() { "$CORRAL" submit "$@" -- sh -c "$job" | grep -o '[0-9][0-9]*' | head -1; }
a=$(sub -n a --gpus 1 --gpu-type L4 --checkpointable)
b=$(sub -n b --gpus 1 --gpu-type L4 --checkpointable)
if [ -z "$a" ] || [ -z "$b" ]; then fail "submit"; fi

# The first checkpoint signal, then SIGKILL at once (the suspension is in
# flight: the job is writing its checkpoint and exiting 75).
signalled() { grep -q "no longer wanted here (.*): stop with SIGUSR1" "$DIR/agent-1.log"; }
wait_for 90 signalled || fail "no job was told to checkpoint"
kill -KILL "$CTL_PID"
wait "$CTL_PID" 2>/dev/null || true

cr_start_controller "$DIR/ctl" "${CTL_FLAGS[@]}"

state_is() { "$CORRAL" show "$1" | grep -q "State: *$2"; }
for id in "$a" "$b"; do
    wait_for 180 state_is "$id" completed || fail "job $id did not complete: $("$CORRAL" show "$id")"
done
for id in "$a" "$b"; do
    t=$DIR/trace/$id
    [ -f "$t" ] || fail "job $id left no trace"
    grep -q OVERLAP "$t" && fail "two runs of job $id overlapped: $(cat "$t")"
    [ "$(grep -c '^done ' "$t")" = 1 ] || fail "job $id did not finish exactly once: $(cat "$t")"
    tail -1 "$t" | grep -qx 'done 50' || fail "job $id: the last run did not finish: $(cat "$t")"
    # every start after a checkpoint resumes at that checkpoint's step
    awk '/^ckpt /{c=$2} /^start /{if (c != "" && $2 != c) {print "start " $2 " after ckpt " c; bad=1}}
        END{exit bad}' "$t" || fail "job $id lost checkpointed work: $(cat "$t")"
    "$CORRAL" show "$id" | grep -qi "retries: *[1-9]" && fail "job $id used a retry"
done
grep -q '^ckpt ' "$DIR/trace/$a" "$DIR/trace/$b" || fail "no job checkpointed"
echo "ok: suspend-crash ($(cat "$DIR/trace/$a" | tr '\n' ' ') | $(cat "$DIR/trace/$b" | tr '\n' ' '))"
