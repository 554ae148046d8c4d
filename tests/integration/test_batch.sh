#!/usr/bin/env bash
# test_batch.sh - Slurm habits end to end: the real controller and one real
# agent (simulated GPUs) on loopback, driven by the real client.
#   - a batch script with #SBATCH lines, submitted unchanged: its directives
#     become the job (-t 90 is 5,400 s; --ntasks-per-node 2: its body runs
#     once and srun in it runs two tasks), the script travels with the job
#     and -o out-%j-%t.txt is written on the node, in --chdir;
#   - --gpus 0 runs a job with no GPU (CUDA_VISIBLE_DEVICES empty);
#   - --wait returns the job's exit code, and a failure is not retried by
#     default (it ran once);
#   - an afterok chain runs in order, the waiting job's reason names the job
#     it waits for, and afterok on a failed job ends the job with that reason;
#   - an array 0-10:2%2 runs its six tasks never more than two at once;
#   - cancel of an array's id cancels every task, hold ID_INDEX one task;
#     cancel --name; --begin holds a job back with a reason;
#   - --nodelist, --exclude and --constraint on agent labels pick the node;
#     --exclusive takes an idle node and keeps other jobs off it;
#   - cancel --signal USR1 reaches the job's trap; --signal USR1@58 arrives
#     58 s before a 60 s limit;
#   - corral run streams stdout and stderr and exits with the job's code,
#     Ctrl-C cancels it (exit 130); corral alloc runs a command here with
#     the job's variables and releases the allocation after;
# Polls with deadlines; no sleeps as synchronisation.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup batch

unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n0 "$DIR/n0" "$DIR/agent0.log" --gpus "sim:4xA100 80GB SXM"
cr_start_agent n1 "$DIR/n1" "$DIR/agent1.log" --gpus "sim:4xA100 80GB SXM" \
    --label fabric=ib --label zone=a
up() { [ "$("$CORRAL" nodes | grep -c ' up ')" = 2 ]; }
wait_for 30 up || fail "agents did not register"

state_of() { "$CORRAL" show --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
field_of() { "$CORRAL" show --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"$2\"])"; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
# "Submitted job 11" or "Submitted 6 jobs 11-16": the (first) id
submit_id() { "$@" | sed -nE 's/^Submitted (job|[0-9]+ jobs) ([0-9]+).*/\2/p'; }

# --- a Slurm script, unchanged ------------------------------------------------
mkdir -p "$DIR/wd"
cat >"$DIR/job.sh" <<'SH'
#!/bin/bash
#SBATCH -J scripted
#SBATCH -t 90
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:2
#SBATCH -o out-%j-%t.txt
# the body runs once (the batch step); srun runs the tasks
srun bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS in $(pwd) arg=$1"' _ "$1"
SH
cd "$DIR"
id=$(submit_id "$CORRAL" submit --chdir wd ./job.sh hello)
[ -n "$id" ] || fail "script submit"
wait_for 30 is_state "$id" completed || fail "script job $id: $("$CORRAL" show "$id")"
[ "$(field_of "$id" time_limit_s)" = 5400 ] || fail "-t 90 is not 5400 s"
[ "$(field_of "$id" name)" = scripted ] || fail "-J"
[ "$(field_of "$id" gpus)" = 2 ] || fail "--gres=gpu:2"
# one batch step (%t 0): srun's two tasks write into its file
f="$DIR/wd/out-$id-0.txt"
[ -s "$f" ] || fail "no $f"
[ ! -e "$DIR/wd/out-$id-1.txt" ] || fail "the body ran twice: $DIR/wd/out-$id-1.txt"
for t in 0 1; do
    grep -qx "task $t of 2 in $DIR/wd arg=hello" "$f" || fail "$f: $(cat "$f")"
done
# The node ran its own copy of the script: the original was never read there.
[ -s "$DIR/n0/scripts/$id.sh" ] || [ -s "$DIR/n1/scripts/$id.sh" ] || fail "script not shipped to the node"
cd /

# --- a job without GPUs (--gpus 0) runs with none, beside whole-GPU jobs -----
"$CORRAL" submit --wait --gpus 0 --cpus 1 --chdir "$DIR/wd" -o cpu-%j.txt -- \
    sh -c 'echo "cvd=[${CUDA_VISIBLE_DEVICES-unset}] ngpu=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l)"' \
    >"$DIR/cpu.out" 2>&1 || fail "--gpus 0: $(cat "$DIR/cpu.out")"
cid=$(grep -o '[0-9][0-9]*' "$DIR/cpu.out" | head -1)
[ "$(field_of "$cid" gpus)" = 0 ] || fail "--gpus 0 job has $(field_of "$cid" gpus) GPUs"
grep -q '^cvd=\[\] ' "$DIR/wd/cpu-$cid.txt" || fail "--gpus 0 saw GPUs: $(cat "$DIR/wd/cpu-$cid.txt")"

# --- --wait returns the exit code; no retries by default ---------------------
set +e
"$CORRAL" submit --wait -n three -- sh -c 'exit 3' >"$DIR/wait.out" 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || fail "--wait exit $rc, want 3: $(cat "$DIR/wait.out")"
wid=$(grep -o '[0-9][0-9]*' "$DIR/wait.out" | head -1)
[ "$(field_of "$wid" runs)" = 1 ] || fail "a failed job ran $(field_of "$wid" runs) times (retries 0 by default)"
"$CORRAL" submit --wait -- true >/dev/null || fail "--wait of a job that succeeds"

# --- dependencies: an afterok chain, and one that can never be met ------------
a=$(submit_id "$CORRAL" submit -n step-a -- sh -c "sleep 1; touch $DIR/a-done")
b=$(submit_id "$CORRAL" submit -n step-b -d "afterok:$a" -- sh -c "test -e $DIR/a-done && touch $DIR/b-done")
c=$(submit_id "$CORRAL" submit -n step-c --dependency "afterok:$b" -- sh -c "test -e $DIR/b-done")
reason_has() { "$CORRAL" show --json "$1" | grep -q "$2"; }
wait_for 10 reason_has "$c" "waiting for job" || fail "job $c's reason does not name the job it waits for"
wait_for 30 is_state "$c" completed || fail "afterok chain: $("$CORRAL" show "$c")"
[ "$(state_of "$b")" = completed ] || fail "afterok chain: $b"
f=$(submit_id "$CORRAL" submit -n fails -- sh -c 'exit 1')
g=$(submit_id "$CORRAL" submit -n never -d "afterok:$f" -- true)
wait_for 30 is_state "$g" cancelled || fail "job $g after failed $f: $("$CORRAL" show "$g")"
"$CORRAL" show "$g" | grep -q "dependency can never be met: job $f failed" ||
    fail "job $g's reason: $("$CORRAL" show "$g")"
h=$(submit_id "$CORRAL" submit -n other -d "afternotok:$f" -- true)
wait_for 30 is_state "$h" completed || fail "afternotok: $("$CORRAL" show "$h")"

# --- an array with a throttle: never more than 2 of 6 running ----------------
mkdir -p "$DIR/arr"
arr=$(submit_id "$CORRAL" submit -n thr --array '0-10:2%2' -- sh -c \
    "cd $DIR/arr && touch run-\$CORRAL_ARRAY_TASK_ID && (set -- run-*; echo \$#) > seen-\$SLURM_ARRAY_TASK_ID && sleep 0.5 && rm run-\$CORRAL_ARRAY_TASK_ID")
last=$((arr + 5))
wait_for 10 reason_has "$last" "array throttle" || fail "task $last does not say it waits for the throttle"
wait_for 60 is_state "$last" completed || fail "array $arr: $("$CORRAL" jobs --all)"
for i in 0 2 4 6 8 10; do
    [ -s "$DIR/arr/seen-$i" ] || fail "array task index $i did not run"
done
max=$(cat "$DIR"/arr/seen-* | sort -n | tail -1)
[ "$max" -le 2 ] || fail "throttle %2: $max tasks ran at once"
[ "$(field_of "$((arr + 3))" array_index)" = 6 ] || fail "array_index of the 4th task"

# --- cancel a whole array, or one task of it ----------------------------------
whole=$(submit_id "$CORRAL" submit -n whole --gpus 4 --array 0-2 -- sleep 60)
"$CORRAL" hold "${whole}_2" >/dev/null || fail "hold ${whole}_2"
[ "$(state_of "$((whole + 2))")" = held ] || fail "hold of one task"
"$CORRAL" cancel "$whole" >/dev/null || fail "cancel $whole"
for k in 0 1 2; do
    wait_for 20 is_state "$((whole + k))" cancelled || fail "task $k of array $whole not cancelled"
done
# cancel by name
n1=$(submit_id "$CORRAL" submit -n byname --begin now+1h -- true)
"$CORRAL" show "$n1" | grep -q "begins at" || fail "--begin reason: $("$CORRAL" show "$n1")"
"$CORRAL" cancel --name byname >/dev/null || fail "cancel --name"
wait_for 10 is_state "$n1" cancelled || fail "cancel --name byname"

# --- node selection: --nodelist, --exclude, --constraint, --exclusive ---------
node_of() { field_of "$1" run_nodes; }
hold=$(submit_id "$CORRAL" submit -n hold0 --nodelist n0 -- sleep 60)
wait_for 20 is_state "$hold" running || fail "--nodelist n0: $("$CORRAL" show "$hold")"
[ "$(node_of "$hold")" = n0 ] || fail "--nodelist n0 ran on $(node_of "$hold")"
c1=$(submit_id "$CORRAL" submit -n lab -C 'fabric=ib&zone=a' -- sleep 60)
wait_for 20 is_state "$c1" running || fail "--constraint: $("$CORRAL" show "$c1")"
[ "$(node_of "$c1")" = n1 ] || fail "--constraint fabric=ib ran on $(node_of "$c1")"
x1=$(submit_id "$CORRAL" submit -n ex --exclude n1 -- true)
wait_for 20 is_state "$x1" completed || fail "--exclude: $("$CORRAL" show "$x1")"
[ "$(node_of "$x1")" = n0 ] || fail "--exclude n1 ran on $(node_of "$x1")"
nomatch=$(submit_id "$CORRAL" submit -n nomatch -C fabric=eth -- true)
# an exclusive job waits for a node with nothing on it; while it runs,
# nothing else lands there
"$CORRAL" cancel "$c1" >/dev/null
wait_for 20 is_state "$c1" cancelled || fail "cancel $c1"
ex=$(submit_id "$CORRAL" submit -n whole-node --exclusive -- sleep 60)
wait_for 20 is_state "$ex" running || fail "--exclusive: $("$CORRAL" show "$ex")"
[ "$(node_of "$ex")" = n1 ] || fail "--exclusive ran beside another job, on $(node_of "$ex")"
beside=$(submit_id "$CORRAL" submit -n beside --nodelist n1 -- true)
# once the scheduler has judged it (its reason is no longer the first), it must still wait
considered() { ! "$CORRAL" show "$1" | grep -q 'not yet considered'; }
wait_for 20 considered "$beside" || fail "job $beside never considered"
[ "$(state_of "$beside")" = pending ] || fail "a job started beside an exclusive one"
[ "$(state_of "$nomatch")" = pending ] || fail "--constraint fabric=eth started"
"$CORRAL" cancel "$ex" "$hold" >/dev/null
wait_for 20 is_state "$beside" completed || fail "job $beside after the exclusive one: $("$CORRAL" show "$beside")"
"$CORRAL" cancel "$nomatch" >/dev/null

# --- signals: cancel --signal, and --signal SIG@SECONDS before the limit ------
trapper="trap 'echo got > $DIR/sig-\$CORRAL_JOB_ID; exit 0' USR1; touch $DIR/ready-\$CORRAL_JOB_ID; while :; do sleep 0.1; done"
s1=$(submit_id "$CORRAL" submit -n sig -- sh -c "$trapper")
wait_for 20 test -e "$DIR/ready-$s1" || fail "job $s1 did not start: $("$CORRAL" show "$s1")"
got() { [ -s "$DIR/sig-$1" ]; }
"$CORRAL" cancel --signal USR1 "$s1" | grep -q "Signalled job $s1" || fail "cancel --signal USR1 $s1"
wait_for 20 is_state "$s1" completed || fail "job $s1 did not take USR1: $("$CORRAL" show "$s1")"
got "$s1" || fail "job $s1's trap did not run"
# -t 1 (60 s) with USR1 58 s before it: the job hears USR1 after about 2 s
s2=$(submit_id "$CORRAL" submit -n warned -t 1 --signal USR1@58 -- sh -c "$trapper")
wait_for 30 is_state "$s2" completed || fail "--signal USR1@58: $("$CORRAL" show "$s2")"
got "$s2" || fail "job $s2 was not signalled before its limit"
"$CORRAL" show "$s2" | grep -q "signalled *SIGUSR1, 58s before the time limit" ||
    fail "no signalled event: $("$CORRAL" show "$s2")"

# --- corral run (srun-like) and corral alloc (salloc-like) --------------------
set +e
"$CORRAL" run -n runner -- sh -c 'echo to-out; echo to-err >&2; exit 4' >"$DIR/run.out" 2>"$DIR/run.err"
rc=$?
set -e
[ "$rc" = 4 ] || fail "corral run exit $rc, want 4: $(cat "$DIR/run.err")"
grep -qx to-out "$DIR/run.out" || fail "corral run stdout: $(cat "$DIR/run.out")"
grep -qx to-err "$DIR/run.err" || fail "corral run stderr: $(cat "$DIR/run.err")"
"$CORRAL" run -n interrupted -- sh -c "touch $DIR/int-started; sleep 60" >"$DIR/int.out" 2>&1 &
rp=$!
wait_for 60 test -e "$DIR/int-started" ||
    fail "corral run job did not start: $(cat "$DIR/int.out"; "$CORRAL" jobs --all | tail -3)"
kill -INT "$rp"
set +e
wait "$rp"
rc=$?
set -e
[ "$rc" = 130 ] || fail "corral run after Ctrl-C: exit $rc, want 130: $(cat "$DIR/int.out")"
"$CORRAL" jobs --all | grep ' interrupted ' | grep -q cancelled || fail "Ctrl-C did not cancel: $("$CORRAL" jobs --all)"
out=$("$CORRAL" alloc -n alloc1 -- sh -c 'echo "$SLURM_JOB_ID $SLURM_NODELIST"' 2>"$DIR/alloc.err")
aid=${out%% *}
case "$out" in
"$aid n0" | "$aid n1") ;;
*) fail "corral alloc: '$out' $(cat "$DIR/alloc.err")" ;;
esac
wait_for 20 is_state "$aid" cancelled || fail "corral alloc did not release job $aid"

echo "ok: #SBATCH script, -o on the node, -t 90 = 5400 s, --wait exit code, afterok chain, throttle %2, array cancel"
