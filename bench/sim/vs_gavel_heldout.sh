#!/bin/sh
# vs_gavel_heldout.sh - Corral's policies against Gavel's own simulator
# (../shared/peers/gavel/run.sh, max_min_fairness_perf) on two disjoint
# halves of generated traces: a calibration half (the only one to look at
# while choosing anything in the rounds policy) and a check half (other
# seeds, reported, never tuned on).
#
# usage: bench/sim/vs_gavel_heldout.sh [BUILD_DIR] [HALVES] [JOBS] [EXTRA corral sim FLAGS...]
#   HALVES  calib, check or calib,check (default)
#   JOBS    jobs per trace (default 600); JCT over the middle third, as in
#           Gavel's window (Corral's --window, Gavel's per-job lines)
#   EXTRA   passed to every corral sim run (e.g. --round 12m to try a knob
#           on the calibration half)
# Each half has 9 traces, all from Gavel's generate_trace.py with Poisson
# arrivals at 2, 6 and 24 jobs/h, two job mixes on two clusters:
#   philly  Gavel's multi-GPU mix (1/2/4 GPUs 0.7/0.1/0.2 for distributed
#           models) on 36 V100 + 36 P100 + 36 K80
#   heavy   a heavier multi-GPU tail (1/2/4/8 GPUs 0.5/0.15/0.2/0.15, the
#           same generator with its scale-factor draw replaced) on
#           24 V100 + 36 P100 + 48 K80 (fewer fast GPUs)
#   long    the Philly durations and GPU counts of Gavel's utils.py (the
#           paper's: 80% 10^U(1.5,3) min, 20% 10^U(3,4) min; 1/2/4/8 GPUs
#           0.7/0.1/0.15/0.05) on 36:36:36: contended at every rate here
# Seeds: calibration 1xx, check 2xx (xx = trace number), so no trace of one
# half shares a seed with the other.
# Prints per trace Gavel's average JCT and makespan (h), Corral's las,
# hetero and rounds average JCT (h), rounds / Gavel and Corral's best
# (by JCT) / Gavel for JCT and makespan (< 1 = Corral ahead), then per half
# min / median / max of each ratio. Gavel takes 0.5-5 min per trace here;
# VS_GAVEL_CACHE=DIR keeps traces and Gavel's logs for the next run.
set -eu
BUILD=${1:-build}
HALVES=${2:-calib,check}
JOBS=${3:-600}
[ $# -gt 3 ] && shift 3 || set --
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN="$SRC/$BUILD/corral"
[ -x "$BIN" ] || BIN="$BUILD/corral"
PEER="$SRC/../shared/peers/gavel"
TPUT="$SRC/data/traces/gavel/simulation_throughputs.json"
[ -x "$PEER/run.sh" ] || { echo "vs_gavel_heldout: no Gavel peer at $PEER" >&2; exit 1; }
/usr/bin/python3 -c "import psutil" 2>/dev/null || {
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y python3-psutil >/dev/null
}
TMP=$(mktemp -d /tmp/corral-vsgavel-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
CACHE=${VS_GAVEL_CACHE:-$TMP}
mkdir -p "$CACHE"

gen() { # gen OUT SEED NUM LAM MIX
    [ -s "$1" ] && return 0
    (cd "$PEER/vendor/scheduler" &&
        PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PEER/shim:.:scripts/utils" /usr/bin/python3 - \
            "$1" "$2" "$3" "$4" "$5" <<'PY'
import argparse, sys
import generate_trace as g
out, seed, num, lam, mix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
if mix == "heavy":
    def heavy(rng):
        r = rng.uniform(0, 1)
        return 1 if r < 0.5 else 2 if r < 0.65 else 4 if r < 0.85 else 8
    g.generate_scale_factor = heavy
if mix == "long":
    import utils
    g.generate_scale_factor = utils._generate_scale_factor
    g.generate_duration = lambda durations, rng: utils._generate_duration(rng)
g.main(argparse.Namespace(num_jobs=num, lam=lam, seed=seed,
    throughputs_file="simulation_throughputs.json", min_duration=1, max_duration=4,
    num_durations=4, generate_multi_gpu_jobs=True, generate_multi_priority_jobs=False,
    output_file=out))
PY
    )
}

run() { # run HALF LABEL TRACE CLUSTER(v:p:k) [corral flags]
    half=$1 label=$2 trace=$3 cl=$4
    shift 4
    glog="$trace.gavel.log"
    if ! grep -q '^Total duration' "$glog" 2>/dev/null; then
        nice -n 10 "$PEER/run.sh" "$trace" "$cl" max_min_fairness_perf >"$glog" 2>&1
    fi
    v=${cl%%:*} rest=${cl#*:}
    p=${rest%%:*} k=${rest#*:}
    lo=$((JOBS / 3)) hi=$((2 * JOBS / 3))
    nice -n 10 "$BIN" sim "$trace" --throughputs "$TPUT" --gpus "v100:$v,p100:$p,k80:$k" \
        --gpus-per-node 1 --compare las,hetero,rounds --json --csv "$TMP/c.csv" \
        --window "$lo:$hi" "$@" >"$TMP/c.json"
    python3 - "$half" "$label" "$glog" "$lo" "$hi" "$TMP/c.json" "$TMP/c.csv" <<'PY'
import csv, json, re, sys
half, label, glog, lo, hi = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
durs, gm = {}, None
with open(glog) as f:
    for line in f:
        m = re.search(r"\[Job succeeded\]\tJob ID: (\d+)\t.*Duration: ([0-9.]+)", line)
        if m:
            durs[int(m.group(1))] = float(m.group(2))
        elif line.startswith("Total duration:"):
            gm = float(line.split()[2])
# Gavel drops a job after repeated zero-step micro-tasks ("[Job failed]"):
# both sides average over the window's jobs that Gavel finished.
ids = [i for i in range(lo, hi) if i in durs]
gj = sum(durs[i] for i in ids) / len(ids)
runs = {r["policy"]: r for r in json.load(open(sys.argv[6]))["runs"]}
mk = {p: r["makespan_s"] for p, r in runs.items()}
per = {}
for row in csv.DictReader(open(sys.argv[7])):
    per.setdefault(row["policy"], {})[int(row["index"])] = float(row["jct_s"] or "nan")
jct = {p: sum(per[p][i] for i in ids) / len(ids) for p in runs}
best = min(jct, key=lambda p: (round(jct[p] / gj, 3), mk[p]))
print("%-6s %-18s %6.2f %7.1f | %6.2f %6.2f %6.2f | %6.3f %6.3f | %-6s %6.3f %6.3f%s" % (
    half, label, gj / 3600, gm / 3600, jct["las"] / 3600, jct["hetero"] / 3600,
    jct["rounds"] / 3600, jct["rounds"] / gj, mk["rounds"] / gm, best, jct[best] / gj,
    mk[best] / gm, "  (%d dropped by Gavel)" % (hi - lo - len(ids)) if len(ids) < hi - lo else ""))
PY
}

printf '%-6s %-18s %6s %7s | %6s %6s %6s | %6s %6s | %-6s %6s %6s\n' half trace "G JCT" "G mksp" \
    las hetero rounds "rnd/G" "mk/G" best "best/G" "mk/G"
for half in $(echo "$HALVES" | tr ',' ' '); do
    case $half in
    calib) base=100 ;;
    check) base=200 ;;
    *) echo "vs_gavel_heldout: unknown half '$half' (calib, check)" >&2; exit 2 ;;
    esac
    n=0
    for mix in philly heavy long; do
        case $mix in
        heavy) cl=24:36:48 ;;
        *) cl=36:36:36 ;;
        esac
        for rate in 2 6 24; do
            n=$((n + 1))
            seed=$((base + n))
            lam=$(python3 -c "print(3600 / $rate)")
            t="$CACHE/h$seed-$mix-r$rate-$JOBS.trace"
            gen "$t" "$seed" "$JOBS" "$lam" "$mix"
            run "$half" "$mix ${rate}/h s$seed" "$t" "$cl" "$@"
        done
    done
done | tee "$TMP/rows"
[ "$(wc -l <"$TMP/rows")" -gt 0 ] || exit 1
python3 - "$TMP/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split("|")
    half = f[0].split()[0]
    r = f[2].split() + f[3].split()
    rows.setdefault(half, []).append((float(r[0]), float(r[1]), float(r[3]), float(r[4])))
print()
print("%-6s %-22s %-22s %-22s %-22s" % ("half", "rounds/G JCT", "rounds/G makespan",
      "best/G JCT", "best/G makespan"))
for half, v in rows.items():
    cols = []
    for c in range(4):
        xs = [x[c] for x in v]
        cols.append("%.3f / %.3f / %.3f" % (min(xs), statistics.median(xs), max(xs)))
    print("%-6s %-22s %-22s %-22s %-22s" % (half, *cols))
print("(min / median / max over the half's traces; < 1 = Corral ahead of Gavel)")
PY
