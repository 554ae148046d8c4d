#!/bin/sh
# learn.sh - the cluster calibrates its own advisor, in the simulator
# (issue 26, docs/sim.md "Learning"): a native trace of training jobs of six
# classes (LoRA and full fine-tunes, pre-trains, 1 to 8 GPUs, two tenants)
# whose true throughputs differ from the performance model by up to +-40%
# per class and GPU type (--truth-spread 0.4), replayed on 32 H100 + 32
# A100 + 32 L40S without and with learning (--learn), side by side, under
# fifo and hetero.
#
# usage: bench/sim/learn.sh [BUILD_DIR] [JOBS] [GAP_MIN] [SEEDS]
#   JOBS     jobs in the trace (default 400)
#   GAP_MIN  mean minutes between arrivals, Poisson (default 15)
#   SEEDS    truth and trace seeds, comma-separated (default 1,2,3)
# Prints corral sim's table for each seed (JCT, the advisor's error over
# the first and last 20 learnable jobs, and the job from which the 20-job
# mean error stays <= 10%), then one summary row per seed.
set -eu
BUILD=${1:-build}
JOBS=${2:-400}
GAP=${3:-15}
SEEDS=${4:-1,2,3}
BIN="$BUILD/corral"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The trace: Park-Miller's generator (exact in any awk), so a seed is the
# same trace everywhere.
trace() {
    awk -v n="$JOBS" -v seed="$1" -v gap="$GAP" 'function u() { x = (16807 * x) % 2147483647;
        return x / 2147483647 }
    BEGIN {
        x = 1000 + seed * 7919
        split("finetune 8b 1 lora 200m|finetune 8b 4 full 500m|pretrain 1b 8 full 5b|" \
              "finetune 70b 8 lora 100m|pretrain 3b 8 full 3b|finetune 13b 2 lora 200m", c, "|")
        t = 0
        for (i = 0; i < n; i++) {
            t += -log(1 - u()) * gap
            k = int(u() * 6) + 1
            split(c[k], f, " ")
            printf "submit=%dm gpus=%s kind=%s params=%s tokens=%s method=%s tenant=t%d\n",
                t, f[3], f[1], f[2], f[5], f[4], int(u() * 2)
        }
    }'
}
for seed in $(echo "$SEEDS" | tr ',' ' '); do
    trace "$seed" >"$TMP/trace-$seed.txt"
    echo "== seed $seed: $JOBS jobs, one every $GAP min on average"
    "$BIN" sim "$TMP/trace-$seed.txt" --gpus h100:32,a100:32,l40s:32 --gpus-per-node 8 \
        --truth-spread 0.4 --seed "$seed" --learn --compare fifo,hetero
    "$BIN" sim "$TMP/trace-$seed.txt" --gpus h100:32,a100:32,l40s:32 --gpus-per-node 8 \
        --truth-spread 0.4 --seed "$seed" --learn --compare fifo,hetero --json \
        >"$TMP/run-$seed.json"
    echo
done
printf '%-6s %-8s %10s %10s %7s %9s %9s %10s\n' seed policy "JCT h" "+learn h" ratio \
    "err first" "err last" "<=10% at"
for seed in $(echo "$SEEDS" | tr ',' ' '); do
    python3 -c '
import json, sys
runs = {r["policy"]: r for r in json.load(open(sys.argv[1]))["runs"]}
for p in ("fifo", "hetero"):
    a, b = runs[p], runs[p + "+learn"]
    adv = b["advisor"]
    print("%-6s %-8s %10.2f %10.2f %6.2fx %8.1f%% %8.1f%% %10s" % (sys.argv[2], p,
          a["jct_s"]["avg"] / 3600, b["jct_s"]["avg"] / 3600,
          b["jct_s"]["avg"] / a["jct_s"]["avg"], 100 * adv["err_first"], 100 * adv["err_last"],
          "job %d" % adv["learned_at"] if adv["learned_at"] else "never"))' \
        "$TMP/run-$seed.json" "$seed"
done
