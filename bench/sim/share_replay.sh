#!/bin/sh
# share_replay.sh - GPU sharing in time: the fragmentation.sh workload (60%
# fractional pods, 40% whole) replayed by creation and deletion times
# (corral sim --openb-nodes/--openb-pods), not inflated: a pod arrives every
# GAP seconds and runs 10 minutes to 2 hours (Park-Miller draws, the same
# files from every awk). Prints JCT, queueing and utilisation for each share
# policy.
#
# usage: bench/sim/share_replay.sh [BUILD_DIR] [NODES] [SHARE] [GAP]
#   defaults: build 64 0.5 8
set -eu
BUILD=${1:-build}
NODES=${2:-64}
SHARE=${3:-0.5}
GAP=${4:-8}
BIN="$BUILD/corral"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

awk -v n="$NODES" 'BEGIN {
    print "sn,cpu_milli,memory_mib,gpu,model"
    for (i = 0; i < n; i++) printf "node-%04d,96000,786432,8,A10\n", i
}' >"$T/nodes.csv"
awk -v gap="$GAP" 'BEGIN {
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
        x = (x * 16807) % 2147483647
        d = 600 + x % 6600
        printf "pod-%05d,4000,16384,%d,%d,nan,LS,Running,%d,%d,%d\n", i, g, m, i * gap,
            i * gap + d, i * gap
    }
}' >"$T/pods.csv"

echo "# openb replay: $NODES nodes x 8 A10, $SHARE of nodes shareable, 5000 pods (60% fractional), one every ${GAP}s"
for p in best-fit worst-fit frag; do
    echo "== --share-policy $p"
    "$BIN" sim --openb-nodes "$T/nodes.csv" --openb-pods "$T/pods.csv" --shared-nodes "$SHARE" \
        --share-policy "$p" | grep -E "^  (JCT|queueing|utilisation|sharing) "
done
