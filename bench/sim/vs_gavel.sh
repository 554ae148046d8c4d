#!/bin/sh
# vs_gavel.sh - Corral's policies against Gavel's own simulator
# (../shared/peers/gavel/run.sh, OSDI'20) on the same traces: traces made by
# Gavel's generate_trace.py (multi-GPU Philly mix, Gavel's throughput table),
# 36 V100 + 36 P100 + 36 K80, one GPU per server as in Gavel's experiments.
#
# usage: bench/sim/vs_gavel.sh [BUILD_DIR] [BURST_SEEDS] [RATES] [JOBS]
#   BURST_SEEDS  seeds of 400-job bursts (all at t=0), default 1,2,3 ("" = none)
#   RATES        steady-state arrival rates in jobs/hour, default 0.4,1,2,3
#                ("" = bursts only); JOBS jobs each (default 1500), JCT over
#                the middle third (Gavel's window, Corral's --window). These
#                traces' jobs average ~4 GPU-hours: 0.4-3 jobs/h keep the
#                108 GPUs 1-9% busy; add 12,24,36 for contention/saturation.
# Prints, per trace: Gavel max_min_fairness_perf average JCT and makespan (h),
# Corral's las/priority/hetero/rounds average JCT (h), and Corral's best (by
# JCT) / Gavel for JCT and makespan, and rounds / Gavel (< 1 = Corral ahead).
# Gavel takes 10-30 s per burst and minutes per steady-state run here;
# VS_GAVEL_CACHE=DIR keeps its logs for the next run.
set -eu
BUILD=${1:-build}
SEEDS=${2-1,2,3}
RATES=${3-0.4,1,2,3}
JOBS=${4:-1500}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN="$SRC/$BUILD/corral"
[ -x "$BIN" ] || BIN="$BUILD/corral"
PEER="$SRC/../shared/peers/gavel"
TPUT="$SRC/data/traces/gavel/simulation_throughputs.json"
[ -x "$PEER/run.sh" ] || { echo "vs_gavel: no Gavel peer at $PEER" >&2; exit 1; }
/usr/bin/python3 -c "import psutil" 2>/dev/null || {
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y python3-psutil >/dev/null
}
TMP=$(mktemp -d /tmp/corral-vsgavel-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# VS_GAVEL_CACHE=DIR keeps the traces and Gavel's logs there and reuses them
# (Gavel's runs are the slow part; the traces depend only on seed/rate/jobs).
CACHE=${VS_GAVEL_CACHE:-$TMP}
mkdir -p "$CACHE"

gen() { # gen OUT SEED NUM LAM
    [ -s "$1" ] && return 0
    (cd "$PEER/vendor/scheduler" &&
        PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PEER/shim:." /usr/bin/python3 \
            scripts/utils/generate_trace.py --num_jobs "$3" -m --seed "$2" -l "$4" \
            --throughputs_file simulation_throughputs.json --output_file "$1")
}

run() { # run LABEL TRACE [LO HI]
    label=$1 trace=$2
    lo=0 hi=0 cargs=
    if [ $# -ge 4 ]; then
        lo=$3 hi=$4 cargs="--window $3:$4"
    fi
    # Gavel runs the whole trace: its own window mode (-s/-e) never ends
    # once the cluster drains idle before the window's jobs have all arrived
    # (the loop stops advancing time), which light loads always hit. The
    # window's average JCT comes from its "[Job succeeded]" lines instead.
    glog="$trace.gavel.log"
    if ! grep -q '^Total duration' "$glog" 2>/dev/null; then
        "$PEER/run.sh" "$trace" 36:36:36 max_min_fairness_perf >"$glog" 2>&1
    fi
    # shellcheck disable=SC2086
    "$BIN" sim "$trace" --throughputs "$TPUT" --gpus v100:36,p100:36,k80:36 \
        --gpus-per-node 1 --compare las,priority,hetero,rounds --json --csv "$TMP/c.csv" $cargs >"$TMP/c.json"
    python3 - "$label" "$glog" "$lo" "$hi" "$TMP/c.json" "$TMP/c.csv" <<'PY'
import csv, json, re, sys
label, glog, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
durs, gm = {}, None
with open(glog) as f:
    for line in f:
        m = re.search(r"\[Job succeeded\]\tJob ID: (\d+)\t.*Duration: ([0-9.]+)", line)
        if m:
            durs[int(m.group(1))] = float(m.group(2))
        elif line.startswith("Total duration:"):
            gm = float(line.split()[2])
# Gavel's simulator drops a job after repeated zero-step micro-tasks ("[Job
# failed]") and leaves it out of its average: both sides average over the
# jobs of the window that Gavel finished.
ids = [i for i in (range(lo, hi) if hi else sorted(durs)) if i in durs]
gj = sum(durs[i] for i in ids) / len(ids)
runs = {r["policy"]: r for r in json.load(open(sys.argv[5]))["runs"]}
mk = {p: r["makespan_s"] for p, r in runs.items()}
per = {}
for row in csv.DictReader(open(sys.argv[6])):
    per.setdefault(row["policy"], {})[int(row["index"])] = float(row["jct_s"] or "nan")
jct = {p: sum(per[p][i] for i in ids) / len(ids) for p in runs}
best = min(jct, key=lambda p: (round(jct[p] / gj, 3), mk[p]))  # ties: shorter makespan
print("%-12s %7.2f %7.1f | %5.2f %5.2f %6.2f %6.2f | %-6s %6.3fx %6.3fx | %6.3fx %6.3fx" % (
    label, gj / 3600, gm / 3600, jct["las"] / 3600, jct["priority"] / 3600,
    jct["hetero"] / 3600, jct["rounds"] / 3600, best, jct[best] / gj, mk[best] / gm,
    jct["rounds"] / gj, mk["rounds"] / gm)
    + ("  (%d jobs Gavel dropped)" % ((hi - lo if hi else len(durs)) - len(ids)) if hi and
       len(ids) < hi - lo else ""))
PY
}

printf '%-12s %7s %7s | %5s %5s %6s %6s | %-6s %7s %7s | %7s %7s\n' trace "gavel h" "mkspan" \
    las prio hetero rounds best "JCT x" "mkspn x" "rounds" "mkspn x"
for seed in $(echo "$SEEDS" | tr ',' ' '); do
    gen "$CACHE/b$seed.trace" "$seed" 400 0
    run "burst s$seed" "$CACHE/b$seed.trace"
done
for rate in $(echo "$RATES" | tr ',' ' '); do
    lam=$(python3 -c "print(3600 / $rate)")
    gen "$CACHE/r$rate-$JOBS.trace" 0 "$JOBS" "$lam"
    run "$rate jobs/h" "$CACHE/r$rate-$JOBS.trace" $((JOBS / 3)) $((2 * JOBS / 3))
done
