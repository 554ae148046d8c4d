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
cat >"$DIR/sub/io.sh" <<'SH'
#!/bin/bash
#SBATCH -J io
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:1
#SBATCH -o %x-%j.out
set -u
echo "task $SLURM_PROCID in $(pwd) submit=$SLURM_SUBMIT_DIR"
echo "err of $SLURM_PROCID" >&2
SH
cd "$DIR/sub"
id=$(submit_id "$CORRAL" submit io.sh)
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

echo "ok: submit directory, -o %x-%j in it, shared -o, --open-mode, logs of -o files, failed job's stderr in logs and show, gang teardown reason"
