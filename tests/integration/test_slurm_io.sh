#!/usr/bin/env bash
# test_slurm_io.sh - where a Slurm script's output goes, and failures made
# readable (issue 29): the real controller (shared_submit_dir: true) and two
# real agents (simulated GPUs) on loopback, driven by the real client.
#   - a script submitted without -D runs in the directory it was submitted
#     from, SLURM_SUBMIT_DIR says so, -o %x-%j.out lands there;
#   - two tasks writing one -o file both keep their lines, and stdout and
#     stderr share it (each task truncated it, and the streams overwrote
#     each other); --open-mode append keeps what the file held;
#   - corral logs prints a job's -o file (its captured log is empty);
#   - a failed job: corral logs adds its stderr, corral show quotes the
#     last lines of it;
#   - batch semantics (docs/slurm.md): a 2-node script with
#     --ntasks-per-node=4 runs its body once, on the first node, with the
#     allocation's SLURM_* variables; srun runs 8 tasks across both nodes,
#     -N/-n/--ntasks-per-node/--gpus-per-task/-l, steps in sequence and in
#     the background with wait, a failed step's code and stderr,
#     --kill-on-bad-exit; scontrol show hostnames; the steps in corral show;
#     all in the batch step's -o file in the submit directory;
#   - (root) another user cannot start a task through a job's stepd socket;
#   - a 2-node job whose rank 1 fails: the other node's agent logs the true
#     reason (the job failed on the other node), not "placed elsewhere".
# Polls with deadlines; no sleeps as synchronisation.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup slurmio

unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null
printf '{"checkpoint_root": "%s/ckpt", "shared_submit_dir": true}\n' "$DIR" >"$CKPT_CONF"
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n0 "$DIR/n0" "$DIR/agent0.log" --gpus "sim:2xA100 80GB SXM"
cr_start_agent n1 "$DIR/n1" "$DIR/agent1.log" --gpus "sim:2xA100 80GB SXM"
up() { [ "$("$CORRAL" nodes | grep -c ' up ')" = 2 ]; }
wait_for 30 up || fail "agents did not register"

field_of() { "$CORRAL" show --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"$2\"])"; }
is_state() { [ "$(field_of "$1" state)" = "$2" ]; }
submit_id() { "$@" | sed -nE 's/^Submitted (job|[0-9]+ jobs) ([0-9]+).*/\2/p'; }

# --- the submit directory: the working directory, -o relative to it ----------
mkdir -p "$DIR/sub"
cd "$DIR/sub"
# (a command, not a script: one process per task, as without a script)
id=$(submit_id "$CORRAL" submit -n io --tasks-per-node 2 --gpus 1 -o %x-%j.out -- bash -c \
    'set -u; echo "task $SLURM_PROCID in $(pwd) submit=$SLURM_SUBMIT_DIR"; echo "err of $SLURM_PROCID" >&2')
cd /
[ -n "$id" ] || fail "submit io.sh"
wait_for 30 is_state "$id" completed || fail "io job $id: $("$CORRAL" show "$id")"
f="$DIR/sub/io-$id.out"
[ -s "$f" ] || fail "no $f (the submit directory): $(ls "$DIR/sub")"
for t in 0 1; do
    grep -qx "task $t in $DIR/sub submit=$DIR/sub" "$f" || fail "$f lacks task $t: $(cat "$f")"
    grep -qx "err of $t" "$f" || fail "$f lacks task $t's stderr: $(cat "$f")"
done
[ "$(wc -l <"$f")" = 4 ] || fail "$f: $(cat "$f")"
# corral logs reads the -o file (the captured log is empty)
"$CORRAL" logs "$id" >"$DIR/logs.out" 2>&1 || fail "corral logs $id: $(cat "$DIR/logs.out")"
grep -q "in $DIR/sub submit=$DIR/sub" "$DIR/logs.out" || fail "corral logs $id: $(cat "$DIR/logs.out")"

# --open-mode append keeps the file's lines; truncate (the default) does not
echo "kept" >"$DIR/sub/app.out"
cd "$DIR/sub"
"$CORRAL" submit --wait --open-mode append -o app.out -- sh -c 'echo appended' >/dev/null ||
    fail "--open-mode append"
echo "gone" >"$DIR/sub/trunc.out"
"$CORRAL" submit --wait -o trunc.out -- sh -c 'echo fresh' >/dev/null || fail "-o truncate"
cd /
[ "$(cat "$DIR/sub/app.out")" = "$(printf 'kept\nappended')" ] || fail "append: $(cat "$DIR/sub/app.out")"
[ "$(cat "$DIR/sub/trunc.out")" = fresh ] || fail "truncate: $(cat "$DIR/sub/trunc.out")"

# --- a failed job: logs adds its stderr, show quotes it -----------------------
set +e
"$CORRAL" submit --wait -n bad -- sh -c 'echo partial; echo "Traceback: boom" >&2; exit 2' \
    >"$DIR/bad.out" 2>&1
set -e
bid=$(grep -o '[0-9][0-9]*' "$DIR/bad.out" | head -1)
wait_for 30 is_state "$bid" failed || fail "job $bid: $("$CORRAL" show "$bid")"
"$CORRAL" logs "$bid" >"$DIR/blog.out" 2>"$DIR/blog.err" || fail "logs $bid"
grep -qx partial "$DIR/blog.out" || fail "logs $bid stdout: $(cat "$DIR/blog.out")"
grep -q "job $bid failed; its stderr" "$DIR/blog.err" || fail "logs $bid: $(cat "$DIR/blog.err")"
grep -qx "Traceback: boom" "$DIR/blog.err" || fail "logs $bid stderr: $(cat "$DIR/blog.err")"
"$CORRAL" show "$bid" >"$DIR/bshow.out"
grep -q "^Stderr (rank 0" "$DIR/bshow.out" || fail "show $bid: $(cat "$DIR/bshow.out")"
grep -qx "  Traceback: boom" "$DIR/bshow.out" || fail "show $bid: $(cat "$DIR/bshow.out")"
# a job that succeeded: logs prints its stdout only
"$CORRAL" logs "$id" 2>&1 | grep -q "its stderr" && fail "logs of a completed job added stderr"

# --- batch semantics: the script once, srun steps across the allocation -------
cat >"$DIR/sub/train.sh" <<'SH'
#!/bin/bash
#SBATCH -J train
#SBATCH --nodes=2 --ntasks-per-node=4
#SBATCH --gres=gpu:2 -c 2
#SBATCH -o %x-%j.out
set -eu
echo "body on $SLURMD_NODENAME ntasks=$SLURM_NTASKS nnodes=$SLURM_NNODES tpn=$SLURM_TASKS_PER_NODE submit=$SLURM_SUBMIT_DIR cpt=$SLURM_CPUS_PER_TASK"
for h in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do echo "host $h"; done
srun sh -c 'echo "step0 rank=$SLURM_PROCID of $SLURM_NTASKS node=$SLURMD_NODENAME local=$SLURM_LOCALID"'
srun -N 1 -n 2 -l sh -c 'echo "step1 rank=$SLURM_PROCID"'
srun -n 2 --gpus-per-task 1 sh -c 'echo "bg1 rank=$SLURM_PROCID gpus=$CUDA_VISIBLE_DEVICES"' &
srun -N 2 -n 2 sh -c 'sleep 1; echo "bg2 node=$SLURMD_NODENAME"' &
srun -n 3 sh -c 'echo "three node=$SLURMD_NODENAME"'
srun --ntasks-per-node 1 true
wait
set +e
srun -n 1 sh -c 'echo "to stderr" >&2; exit 5'
echo "failed step rc=$?"
srun --kill-on-bad-exit -n 2 sh -c 'if [ "$SLURM_PROCID" = 0 ]; then exit 7; fi; sleep 30; echo "not killed"'
echo "kill-on-bad-exit rc=$?"
echo "body ends"
SH
cd "$DIR/sub"
tid=$(submit_id "$CORRAL" submit train.sh)
cd /
[ -n "$tid" ] || fail "submit train.sh"
wait_for 90 is_state "$tid" completed || fail "batch job $tid: $("$CORRAL" show "$tid"; cat "$DIR/sub/train-$tid.out")"
t="$DIR/sub/train-$tid.out"
[ -s "$t" ] || fail "no $t"
nodes=$(field_of "$tid" run_nodes)
first=${nodes%%,*} second=${nodes#*,}
[ "$(grep -c '^body on ' "$t")" = 1 ] || fail "the body ran $(grep -c '^body on ' "$t") times: $(cat "$t")"
grep -qx "body on $first ntasks=8 nnodes=2 tpn=4(x2) submit=$DIR/sub cpt=2" "$t" || fail "batch env: $(cat "$t")"
[ "$(grep '^host ' "$t" | tr '\n' ' ')" = "host $first host $second " ] || fail "scontrol: $(cat "$t")"
[ "$(grep -c '^step0 ' "$t")" = 8 ] || fail "srun ran $(grep -c '^step0 ' "$t") tasks, want 8: $(cat "$t")"
for r in 0 1 2 3; do
    grep -qx "step0 rank=$r of 8 node=$first local=$r" "$t" || fail "step0 rank $r: $(cat "$t")"
    grep -qx "step0 rank=$((r + 4)) of 8 node=$second local=$r" "$t" || fail "step0 rank $((r + 4)): $(cat "$t")"
done
grep -qx "0: step1 rank=0" "$t" && grep -qx "1: step1 rank=1" "$t" || fail "srun -l: $(cat "$t")"
grep -q "^bg1 rank=0 gpus=GPU-" "$t" && grep -q "^bg1 rank=1 gpus=GPU-" "$t" || fail "background step: $(cat "$t")"
[ "$(grep "^bg1 rank=0" "$t" | cut -d= -f3)" != "$(grep "^bg1 rank=1" "$t" | cut -d= -f3)" ] ||
    fail "--gpus-per-task 1 gave both tasks the same GPU: $(cat "$t")"
grep -qx "bg2 node=$first" "$t" && grep -qx "bg2 node=$second" "$t" || fail "background step 2: $(cat "$t")"
grep -qx "to stderr" "$t" && grep -qx "failed step rc=5" "$t" || fail "failed step: $(cat "$t")"
# (Slurm 22.05 gives these, the same script: srun -n 3 puts 2 tasks on the
# first node, 1 on the second; --ntasks-per-node 1 disagrees with the
# allocation's SLURM_NTASKS 8 and is ignored, with a warning; the tasks -K
# stopped count as 143)
[ "$(grep -c "^three node=$first$" "$t")" = 2 ] && [ "$(grep -c "^three node=$second$" "$t")" = 1 ] ||
    fail "srun -n 3: $(cat "$t")"
grep -q "^srun: Warning: can't honor --ntasks-per-node set to 1 " "$t" || fail "--ntasks-per-node 1: $(cat "$t")"
grep -qx "kill-on-bad-exit rc=143" "$t" || fail "--kill-on-bad-exit: $(cat "$t")"
grep -q "not killed" "$t" && fail "--kill-on-bad-exit left a task running: $(cat "$t")"
tail -1 "$t" | grep -qx "body ends" || fail "the body did not end last: $(cat "$t")"
# steps in corral show
"$CORRAL" show "$tid" >"$DIR/tshow.out"
grep -qE "^  $tid\.0 +completed +8  $first,$second +0  sh -c" "$DIR/tshow.out" || fail "show steps: $(cat "$DIR/tshow.out")"
grep -qE "^  $tid\.[0-9]+ +failed +1  $first +5  " "$DIR/tshow.out" || fail "show failed step: $(cat "$DIR/tshow.out")"

# an array's SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP (a set -u script's)
cat >"$DIR/sub/arr.sh" <<'SH'
#!/bin/bash
#SBATCH --array=1-5:2 --gpus 0
#SBATCH -o arr-%A_%a.out
set -u
echo "task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX step=$SLURM_ARRAY_TASK_STEP"
SH
cd "$DIR/sub"
aid=$(submit_id "$CORRAL" submit arr.sh)
cd /
wait_for 30 is_state "$((aid + 2))" completed || fail "array $aid: $("$CORRAL" jobs --all | tail -4; cat "$DIR"/sub/arr-*)"
for i in 1 3 5; do
    grep -qx "task=$i count=3 min=1 max=5 step=2" "$DIR/sub/arr-${aid}_$i.out" ||
        fail "array task $i: $(cat "$DIR/sub/arr-${aid}_$i.out")"
done

# --- another user cannot drive a job's stepd (its abstract socket is open) ---
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -x /usr/bin/python3 ]; then
    cat >"$DIR/sub/hold.sh" <<'SH'
#!/bin/bash
#SBATCH -o hold-%j.out
touch "$SLURM_SUBMIT_DIR/hold-started"; sleep 60
SH
    cd "$DIR/sub"
    hid=$(submit_id "$CORRAL" submit hold.sh)
    cd /
    wait_for 30 test -e "$DIR/sub/hold-started" || fail "hold job $hid did not start"
    chmod 711 "$DIR" && chmod 777 "$DIR/sub" # (the intruder reads its script)
    cat >"$DIR/intrude.py" <<'PY'
import json, socket, sys
names = [l.split()[-1][1:] for l in open("/proc/net/unix") if "@corral-step-" in l]
for n in set(names):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + n)
        s.sendall(json.dumps({"op": "start", "step": 99, "argv": ["touch", sys.argv[1]],
                              "env": [], "cwd": "/", "ntasks": 1, "rank0": 0, "ntasks_all": 1,
                              "nodeid": 0, "nnodes": 1, "gpus_per_task": 0}).encode())
        s.shutdown(socket.SHUT_WR)
        print(n, repr(s.recv(1000)))
    except OSError as e:
        print(n, "refused:", e)
print(len(set(names)))
PY
    chmod 644 "$DIR/intrude.py"
    setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 "$DIR/intrude.py" "$DIR/sub/intruded" \
        >"$DIR/intrude.out" 2>&1 || true
    grep -qx '[1-9][0-9]*' "$DIR/intrude.out" || fail "no stepd socket seen: $(cat "$DIR/intrude.out")"
    sleep 0.5 # (a start would be at once; nothing to poll for when it is refused)
    [ ! -e "$DIR/sub/intruded" ] || fail "another user started a task in job $hid: $(cat "$DIR/intrude.out")"
    "$CORRAL" cancel "$hid" >/dev/null
    wait_for 30 is_state "$hid" cancelled || fail "cancel $hid"
fi

# --- a gang torn down by another rank's failure: the true reason --------------
gid=$(submit_id "$CORRAL" submit -n gang --nodes 2 --gpus 2 -- \
    sh -c 'if [ "$NODE_RANK" = 1 ]; then sleep 1; exit 3; fi; sleep 60')
wait_for 60 is_state "$gid" failed || fail "gang $gid: $("$CORRAL" show "$gid")"
nodes=$(field_of "$gid" run_nodes)
bad_node=${nodes#*,} ok_node=${nodes%%,*}
[ "$ok_node" = n0 ] && log=$DIR/agent0.log || log=$DIR/agent1.log
want="job=$gid .*the job has ended (failed): exited with code 3 on node $bad_node"
wait_for 20 grep -q "$want" "$log" || fail "$ok_node's log lacks the true reason: $(grep "job=$gid" "$log")"
if grep "job=$gid " "$log" | grep -q "placed it elsewhere"; then
    fail "$ok_node's log says placed elsewhere: $(grep "job=$gid" "$log")"
fi

echo "ok: batch step once, srun 8 tasks on 2 nodes, -l, --gpus-per-task, background steps and wait, --kill-on-bad-exit, scontrol show hostnames, steps in show; submit directory, -o %x-%j in it, shared -o, --open-mode, logs of -o files, failed job's stderr in logs and show, gang teardown reason"
