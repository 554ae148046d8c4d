#!/bin/sh
# gavel_ratio.sh - the heterogeneity-aware policy against its agnostic
# counterpart in Gavel's setting (OSDI'20, section 7.2): Gavel's measured
# throughputs (data/traces/gavel/simulation_throughputs.json), a cluster of
# 36 V100 + 36 P100 + 36 K80, Poisson arrivals of Philly-mix jobs, seeds
# 0-2, average JCT of jobs 4000-4999 in arrival order.
#
# usage: bench/sim/gavel_ratio.sh [BUILD_DIR] [RATES] [JOBS] [EXTRA corral sim FLAGS...]
#   RATES  arrival rates in jobs/hour, comma-separated (default 2,4,6,8)
#   JOBS   jobs generated per run (default 6000)
# Prints one row per rate: average JCT (hours) of fifo and hetero over the
# seeds, and the ratio fifo/hetero (higher = the aware policy is better).
set -eu
BUILD=${1:-build}
RATES=${2:-2,4,6,8}
JOBS=${3:-6000}
[ $# -gt 3 ] && shift 3 || set --
BIN="$BUILD/corral"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TPUT="$SRC/data/traces/gavel/simulation_throughputs.json"
printf '%-10s %-8s %12s %12s %8s\n' "jobs/h" "seed" "fifo JCT h" "hetero JCT h" "ratio"
for rate in $(echo "$RATES" | tr ',' ' '); do
    for seed in 0 1 2; do
        "$BIN" sim --generate "$JOBS" --rate "$rate" --seed "$seed" --throughputs "$TPUT" \
            --gpus v100:36,p100:36,k80:36 --gpus-per-node 4 --window 4000:5000 \
            --compare fifo,hetero --json "$@" |
            python3 -c '
import json, sys
runs = {r["policy"]: r["jct_s"]["avg"] / 3600 for r in json.load(sys.stdin)["runs"]}
print("%-10s %-8s %12.2f %12.2f %7.2fx" % (sys.argv[1], sys.argv[2], runs["fifo"],
      runs["hetero"], runs["fifo"] / runs["hetero"]))' "$rate" "$seed"
    done
done | tee /dev/stderr | python3 -c '
import sys
rows = {}
for line in sys.stdin:
    f = line.split()
    rows.setdefault(f[0], []).append((float(f[2]), float(f[3])))
print()
print("%-10s %12s %12s %8s" % ("jobs/h", "fifo JCT h", "hetero JCT h", "ratio"))
for rate, v in rows.items():
    a = sum(x for x, _ in v) / len(v)
    b = sum(y for _, y in v) / len(v)
    print("%-10s %12.2f %12.2f %7.2fx" % (rate, a, b, a / b))'
