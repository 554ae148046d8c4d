#!/bin/sh
# vs_fgd.sh - Corral's share policies side by side with the FGD paper's own
# simulator (../shared/peers/fgd, Weng et al. ATC'23) on the same openb node
# and pod files, in the paper's inflation experiment.
#
# usage: bench/sim/vs_fgd.sh [BUILD_DIR] [NODES.csv PODS.csv] [SEEDS]
#   BUILD_DIR  default build; NODES.csv PODS.csv: any openb-format pair (the
#   production lists, say); without them a generated 600-GPU sample is used:
#   75 nodes x 8 GPUs (CPU 96 or 128 cores, 768 GiB), 2000 pods drawn with a
#   Park-Miller generator (10% CPU-only, 50% fractional, 40% whole 1/2/4/8
#   GPUs, CPU 2-16 cores each). SEEDS default "42".
# Prints, per seed, the unallocated GPU share (% of the cluster's GPUs) at
# 80/90/95/100% arrived workload: Corral best-fit beside FGD's BestFit and
# Corral frag beside FGD's FGD (same model: CPU and host memory on every
# node, CPU-only pods kept), each step read as FGD's analysis reads it (the
# mean over the arrivals within half a percent: corral sim --inflate-window
# 0.01); and Corral again on the very sequence of pods FGD's run drew
# (read from its log, replayed with --inflate-in-order). FGD's runs take ~40 s each on 600 GPUs (35+ min
# on 6,212); the first builds the peer (~2-5 min). PEER=dir overrides the
# peer's location; FGD_TUNE is passed on.
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
PEER=${PEER:-$HERE/../../../shared/peers/fgd}
[ -x "$PEER/run.sh" ] || {
    echo "vs_fgd: no FGD peer at $PEER (../shared/peers/fgd beside the repository; PEER=dir)" >&2
    exit 2
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if [ $# -ge 3 ]; then
    NODES=$2 PODS=$3 SEEDS=${4:-42}
else
    NODES=$T/nodes.csv PODS=$T/pods.csv SEEDS=${2:-42}
    awk 'BEGIN {
        print "sn,cpu_milli,memory_mib,gpu,model"
        for (i = 0; i < 75; i++) printf "node-%04d,%d,786432,8,G1\n", i, i % 3 ? 96000 : 128000
    }' >"$NODES"
    awk 'BEGIN {
        x = 7
        print "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
        split("100 200 250 300 400 500 500 600 700 800 900", fr, " ")
        split("1 1 1 1 1 1 1 2 2 2 4 8", wh, " ")
        for (i = 0; i < 2000; i++) {
            x = (x * 16807) % 2147483647; r = x % 100
            x = (x * 16807) % 2147483647; c = 2000 * (1 + x % 8)
            x = (x * 16807) % 2147483647
            if (r < 10) { g = 0; m = 0 }
            else if (r < 60) { g = 1; m = fr[1 + x % 11] }
            else { g = wh[1 + x % 12]; m = 1000; c = c * g / 2 }
            printf "pod-%05d,%d,%d,%d,%d,nan,LS,Running,%d,%d,%d\n", i, c, c * 4, g, m, i, i + 3600, i
        }
    }' >"$PODS"
fi
for s in $SEEDS; do
    # (each step as FGD's analysis reads it: the mean over the arrivals whose
    # arrived share rounds to that whole percent)
    "$BUILD/corral" sim --inflate --openb-nodes "$NODES" --openb-pods "$PODS" --seed "$s" \
        --share-policy best-fit,frag --inflate-step 0.01 --inflate-to 1.01 \
        --inflate-window 0.01 >"$T/corral.$s"
    FGD_KEEP=1 "$PEER/run.sh" "$NODES" "$PODS" BestFit "$s" >"$T/fgd-bf.$s" 2>"$T/fgd-bf.err.$s" &
    "$PEER/run.sh" "$NODES" "$PODS" FGD "$s" >"$T/fgd-fgd.$s" 2>"$T/fgd-fgd.err.$s" &
    wait
    for f in "$T/fgd-bf.$s" "$T/fgd-fgd.$s"; do
        grep -q "^unallocated GPU share at 100%" "$f" || { cat "$f" "$f" | tail -20; exit 1; }
    done
    # The same sequence: the pods in the order FGD's run created them (its
    # log; the order is the seed's, whatever the policy), replayed by
    # corral sim --inflate-in-order.
    W=$(sed -n 's/^work directory (kept): //p' "$T/fgd-bf.err.$s")
    grep -ho 'attempt to create pod([^)]*)' "$W"/experiments/data/*/05-BestFit/*/"$s"/log-*.log |
        sed 's/.*\///; s/)$//' >"$T/order.$s"
    rm -rf "$W"
    awk -F, 'NR == FNR { if (FNR == 1) h = $0; else row[$1] = $0; next }
        FNR == 1 { print h } { print row[$1] }' "$PODS" "$T/order.$s" >"$T/seq.$s.csv"
    "$BUILD/corral" sim --inflate --inflate-in-order --openb-nodes "$NODES" \
        --openb-pods "$T/seq.$s.csv" --share-policy best-fit,frag --inflate-step 0.01 \
        --inflate-to 1.01 --inflate-window 0.01 >"$T/corral-seq.$s"
    echo "# seed $s: $(sed -n 1p "$T/corral.$s" | sed 's/^# openb inflate: //')"
    echo "# (same-seq: Corral on the $(wc -l <"$T/order.$s") pods of FGD's run, in its order)"
    printf '%-8s %14s %14s %14s %14s %14s %14s\n' arrived corral-best-fit fgd-BestFit corral-frag \
        fgd-FGD same-seq-bf same-seq-frag
    for p in 80 90 95 100; do
        cb=$(awk -v p="$p" '$1 == p ".0%" { print $2 }' "$T/corral.$s")
        cf=$(awk -v p="$p" '$1 == p ".0%" { print $3 }' "$T/corral.$s")
        sb=$(awk -v p="$p" '$1 == p ".0%" { print $2 }' "$T/corral-seq.$s")
        sf=$(awk -v p="$p" '$1 == p ".0%" { print $3 }' "$T/corral-seq.$s")
        fb=$(awk -v p="$p" '$1 == p "%:" { print $2 "%" }' "$T/fgd-bf.$s")
        ff=$(awk -v p="$p" '$1 == p "%:" { print $2 "%" }' "$T/fgd-fgd.$s")
        printf '%7s%% %14s %14s %14s %14s %14s %14s\n' "$p" "$cb" "$fb" "$cf" "$ff" "$sb" "$sf"
    done
done
