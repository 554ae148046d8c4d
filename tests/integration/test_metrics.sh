#!/usr/bin/env bash
# test_metrics.sh - a job reports what it measured (docs/model.md "Learning
# from the cluster"): a sim agent runs a finetune job whose stdout has two
# good corral-metric lines and two that do not parse; the job completes
# (bad lines are never fatal), the agent logs "2 corral-metric lines did
# not parse", the job has the event "metrics ignored", and the controller
# logs the observation it stored (the last good tokens_per_s, 5000) for the
# job's class on its GPU type. Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup metrics
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xL40S"
up() { "$CORRAL" nodes | grep -q '^n1 *up'; }
wait_for 60 up || fail "agent n1 did not register"

state_is() { "$CORRAL" show "$1" | grep -q "State: *$2"; }
id=$("$CORRAL" submit -n tuned --gpus 1 --gpu-type L40S --kind finetune --params 8b \
    --method lora -- sh -c '
echo "step 1"
echo "corral-metric tokens_per_s=4000 step_time_s=0.9"
echo "corral-metric tokens_per_s=fast"
echo "corral-metric mfu=0.4"
echo "corral-metric tokens_per_s=5000 step_time_s=0.8"' | grep -o '[0-9][0-9]*' | head -1)
[ -n "$id" ] || fail "submit"
wait_for 60 state_is "$id" completed || fail "job $id did not complete: $("$CORRAL" show "$id")"
wait_for 10 grep -q "job=$id: 2 corral-metric lines did not parse" "$DIR/agent-1.log" ||
    fail "the agent did not log the bad lines"
ev() { "$CORRAL" show "$1" | grep -q "$2"; }
wait_for 10 ev "$id" "2 corral-metric lines on node n1 did not parse" ||
    fail "no 'metrics ignored' event: $("$CORRAL" show "$id")"
wait_for 10 grep -q "job=$id measured 5000 tokens/s on 1 x L40S" "$DIR/controller.log" ||
    fail "the controller did not learn from job $id: $(grep -i measured "$DIR"/*.log || true)"
echo "ok: metrics"
