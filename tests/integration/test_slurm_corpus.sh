#!/usr/bin/env bash
# test_slurm_corpus.sh - the sbatch script corpus (tests/slurm/corpus, 23
# scripts of the common kinds: training with srun, arrays, chains built
# with --parsable and dependencies, CPU steps, steps in sequence and in the
# background, failures, output patterns, refusals) through Corral, compared
# with what the real Slurm did with the same scripts:
#   - tests/slurm/expected/CASE.result is Slurm 22.05's result
#     (../shared/peers/slurm, 2 nodes x 4 GPUs; recorded with
#     run_corpus.sh slurm, see docs/slurm.md "The script corpus");
#   - when slurmctld is installed and the peer is beside the repository
#     (and we are root), the peer is started and the corpus runs through it
#     too, in this same run, and must still give the recorded results;
#   - Corral (a real controller, two real agents with simulated GPUs, the
#     real client) must give the same result for every case.
# Polls with deadlines; no sleeps as synchronisation.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup slurmcorpus
export CORRAL

unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null
src=${CORRAL_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
corpus=$src/tests/slurm
printf '{"checkpoint_root": "%s/ckpt", "shared_submit_dir": true, "default_gpus": 0, "partitions": [{"name": "gpu", "default": true}]}\n' \
    "$DIR" >"$CKPT_CONF"
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n1 "$DIR/n1" "$DIR/agent1.log" --gpus "sim:4xH100 SXM"
cr_start_agent n2 "$DIR/n2" "$DIR/agent2.log" --gpus "sim:4xH100 SXM"
up() { [ "$("$CORRAL" nodes | grep -c ' up ')" = 2 ]; }
wait_for 30 up || fail "agents did not register"

# The peer, in this same run, where it can be.
peer=$src/../shared/peers/slurm
if [ "$(id -u)" = 0 ] && command -v slurmctld >/dev/null && [ -x "$peer/start.sh" ] &&
    [ "${CORRAL_NO_SLURM_PEER:-}" != 1 ]; then
    sdir=$DIR/slurm
    if NODES=2 GPUS_PER_NODE=4 PORT_BASE=${SLURM_PORT_BASE:-18817} "$peer/start.sh" "$sdir" \
        >"$DIR/slurm-start.log" 2>&1; then
        stop_peer() { "$peer/stop.sh" "$sdir" >/dev/null 2>&1 || true; }
        trap 'stop_peer; cr_cleanup' EXIT
        if SLURM_CONF=$sdir/slurm.conf CORPUS_TIMEOUT=90 "$corpus/run_corpus.sh" slurm "$DIR/out-slurm" \
            >"$DIR/slurm-run.log" 2>&1; then
            sbad=()
            for r in "$corpus"/expected/*.result; do
                c=$(basename "$r" .result)
                diff -u "$r" "$DIR/out-slurm/$c.result" >&2 || sbad+=("$c")
            done
            [ ${#sbad[@]} = 0 ] || fail "Slurm's result today differs from the recorded one: ${sbad[*]}"
            echo "the Slurm peer ran the corpus in this run and matched the recorded results"
        else
            fail "the Slurm peer did not run the corpus: $(tail -3 "$DIR/slurm-run.log")"
        fi
        stop_peer
    else
        echo "note: the Slurm peer did not start ($(tail -1 "$DIR/slurm-start.log")): compared with the recorded results only"
    fi
else
    echo "note: no Slurm peer here (root, slurmctld and ../shared/peers/slurm needed): compared with the recorded results only"
fi

CORPUS_TIMEOUT=90 "$corpus/run_corpus.sh" corral "$DIR/out-corral" >"$DIR/corral-run.log" 2>&1 ||
    fail "run_corpus.sh corral: $(tail -3 "$DIR/corral-run.log")"
n=0 bad=()
for r in "$corpus"/expected/*.result; do
    c=$(basename "$r" .result)
    n=$((n + 1))
    if ! diff -u "$r" "$DIR/out-corral/$c.result" >&2; then
        echo "$c: its submit said: $(tail -2 "$DIR/out-corral/$c.stderr" 2>/dev/null)" >&2
        bad+=("$c")
    fi
done
[ ${#bad[@]} = 0 ] || fail "Corral's result differs from Slurm's (above: - Slurm, + Corral) in ${#bad[@]} of $n cases: ${bad[*]}"
[ "$n" -ge 20 ] || fail "only $n cases in the corpus"
# A refused script is refused with a message naming the cause.
grep -qi "partition" "$DIR/out-corral/16-unknown-partition.stderr" ||
    fail "the unknown partition's refusal does not name the partition"
grep -qi "gpu" "$DIR/out-corral/15-too-many-gpus.stderr" ||
    fail "the too-many-GPUs refusal does not name the GPUs"
echo "ok: $n sbatch scripts give Slurm's results through Corral"
