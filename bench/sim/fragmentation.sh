#!/bin/sh
# fragmentation.sh - GPU sharing without waste: how much GPU capacity each
# share policy leaves unallocated as the arrived workload grows, in the FGD
# paper's "inflation" setting (Weng et al., ATC'23), on files of our own in
# the Alibaba openb layout (cluster-trace-gpu-v2023 CSV columns):
#
#   cluster: NODES nodes x 8 GPUs of one model; --shared-nodes SHARE of the
#            nodes have shareable GPUs, the rest whole GPUs only;
#   workload: 60% of tasks fractional (gpu_milli from a fixed mix of sizes),
#            40% whole (1 GPU mostly, some 2, 4 and 8), drawn with a
#            Park-Miller generator so every awk gives the same files.
#
# usage: bench/sim/fragmentation.sh [BUILD_DIR] [NODES] [SHARE] [SEEDS]
#   defaults: build 64 0.5 "0 1 2"
# Prints the unallocated GPU share (% of capacity) at each 5% of arrived
# workload for best-fit, worst-fit and frag (fragmentation-aware), averaged
# over the seeds.
set -eu
BUILD=${1:-build}
NODES=${2:-64}
SHARE=${3:-0.5}
SEEDS=${4:-0 1 2}
BIN="$BUILD/corral"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

awk -v n="$NODES" 'BEGIN {
    print "sn,cpu_milli,memory_mib,gpu,model"
    for (i = 0; i < n; i++) printf "node-%04d,96000,786432,8,A10\n", i
}' >"$T/nodes.csv"
awk 'BEGIN {
    x = 42
    print "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    split("100 200 250 300 400 500 500 600 700 800", fr, " ")
    split("1 1 1 1 1 1 1 2 2 2 4 8", wh, " ")
    for (i = 0; i < 5000; i++) {
        x = (x * 16807) % 2147483647
        if (x % 100 < 60) {
            x = (x * 16807) % 2147483647
            g = 1; m = fr[1 + x % 10]
        } else {
            x = (x * 16807) % 2147483647
            g = wh[1 + x % 12]; m = 1000
        }
        printf "pod-%05d,4000,16384,%d,%d,nan,LS,Running,%d,%d,%d\n", i, g, m, i, i + 3600, i
    }
}' >"$T/pods.csv"

for s in $SEEDS; do
    "$BIN" sim --inflate --gpu-only --openb-nodes "$T/nodes.csv" --openb-pods "$T/pods.csv" \
        --shared-nodes "$SHARE" --seed "$s" --share-policy best-fit,worst-fit,frag >"$T/out.$s"
done
head -1 "$T/out.$(echo $SEEDS | cut -d' ' -f1)"
cat "$T"/out.* | awk '
    /^ *[0-9.]+%/ {
        k = $1; sub("%", "", k)
        for (i = 2; i <= 4; i++) { v = $i; sub("%", "", v); sum[k, i] += v }
        cnt[k]++; if (!(k in seen)) { order[++n] = k; seen[k] = 1 }
    }
    END {
        printf "%-9s %10s %10s %10s\n", "arrived", "best-fit", "worst-fit", "frag"
        for (j = 1; j <= n; j++) {
            k = order[j]
            printf "%8s%% %9.2f%% %9.2f%% %9.2f%%\n", k, sum[k, 2] / cnt[k], sum[k, 3] / cnt[k],
                sum[k, 4] / cnt[k]
        }
    }'
