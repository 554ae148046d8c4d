#!/bin/bash
# bench/ab.sh [--pairs N] [--figures LIST] [--build DIR] REF
#
# The hot paths of this working tree against an earlier release, side by
# side in the same minutes: REF (a commit, tag or branch) is built once in
# a scratch directory ($AB_DIR/SHA, default ${TMPDIR:-/tmp}/corral-ab),
# this tree in DIR (default build); then each figure is measured in N pairs
# (default 5), old and new one after the other, the order alternating from
# pair to pair, so drift on a shared machine falls on both. Prints, per
# figure, new/old with min/median/max over the pairs, oriented so that
# > 1.00x is always better for the new build (a rate: new/old; a time or
# CPU cost: old/new), and the medians of both raw values.
#
# Figures (--figures, comma-separated; default all that can run here):
#   e2e      bench_agent_e2e (4 agents x 8 sim H100, AB_E2E_JOBS one-GPU jobs,
#            default 300): jobs/s one POST per job, jobs/s one array POST,
#            agent and controller CPU ms per job
#   submit   bench_controller, 64 clients, AB_SUBMIT_S seconds (default 3):
#            durable submits/s, server CPU us per submit
#   sched    bench_sched (AB_SCHED_CYCLES cycles, default 30), priority, las,
#            hetero: cycle CPU p50 and p99
#   advise   bench_advise: estimates/s
#   gateway  bench_gateway.sh (wrk, AB_GW_S seconds per run, default 3):
#            req/s and p99 at 32 connections, req per CPU-second (needs wrk;
#            nginx runs beside it as the script's own peer)
#   sim      bench_sim 20,000 jobs at 4,000/h, fifo and hetero: CPU seconds
# The harnesses that drive a corral binary from outside (e2e, submit,
# gateway) are this tree's, given REF's binary; the in-process benches
# (sched, advise, sim) are each build's own.
#
# Used for the README's numbers and docs/operations.md ("Regression bench");
# `make bench-ab REF=...` runs it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAIRS=5
FIGURES=e2e,submit,sched,advise,gateway,sim
BUILD=$ROOT/build
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}
REF=
while [ $# -gt 0 ]; do
    case $1 in
    --pairs)
        PAIRS=${2:?--pairs needs a number}
        shift 2
        ;;
    --figures)
        FIGURES=${2:?--figures needs a list}
        shift 2
        ;;
    --build)
        BUILD=$(cd "${2:?--build needs a directory}" && pwd)
        shift 2
        ;;
    -h | --help) usage 0 ;;
    -*)
        echo "bench/ab.sh: unknown option $1" >&2
        usage 2 >&2
        ;;
    *)
        [ -z "$REF" ] || {
            echo "bench/ab.sh: one REF only ($REF, $1)" >&2
            exit 2
        }
        REF=$1
        shift
        ;;
    esac
done
[ -n "$REF" ] || {
    echo "bench/ab.sh: REF missing" >&2
    usage 2 >&2
}
case $PAIRS in '' | *[!0-9]* | 0)
    echo "bench/ab.sh: --pairs: expected a positive number, got '$PAIRS'" >&2
    exit 2
    ;;
esac
for f in ${FIGURES//,/ }; do
    case $f in e2e | submit | sched | advise | gateway | sim) ;; *)
        echo "bench/ab.sh: --figures: unknown figure '$f' (e2e, submit, sched, advise, gateway, sim)" >&2
        exit 2
        ;;
    esac
done
SHA=$(git -C "$ROOT" rev-parse --verify "$REF^{commit}" 2>/dev/null) || {
    echo "bench/ab.sh: '$REF' is not a commit of this repository" >&2
    exit 2
}
AB_DIR=${AB_DIR:-${TMPDIR:-/tmp}/corral-ab}
OLD=$AB_DIR/$SHA
mkdir -p "$AB_DIR"

# REF, built once (its source from git archive: no worktree to clean up).
if [ ! -x "$OLD/build/corral" ]; then
    echo "# building $REF ($SHA) in $OLD"
    rm -rf "$OLD"
    mkdir -p "$OLD/src"
    git -C "$ROOT" archive "$SHA" | tar -x -C "$OLD/src"
    if ! { meson setup "$OLD/build" "$OLD/src" >"$OLD/setup.log" 2>&1 &&
        ninja -C "$OLD/build" >"$OLD/ninja.log" 2>&1; }; then
        echo "bench/ab.sh: building $REF failed: see $OLD/setup.log, $OLD/ninja.log" >&2
        tail -5 "$OLD/ninja.log" >&2 2>/dev/null || true
        rm -rf "$OLD/build"
        exit 1
    fi
fi
echo "# building this tree in $BUILD"
[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT" >/dev/null
ninja -C "$BUILD" >/dev/null
NEWB=$BUILD
OLDB=$OLD/build

RUN=$(mktemp -d "${TMPDIR:-/tmp}/corral-ab-run-XXXXXX")
trap 'rm -rf "$RUN"' EXIT
RES=$RUN/results # lines: FIGURE SIDE PAIR VALUE (DIR in $RUN/dirs)
: >"$RES"
: >"$RUN/dirs"
rec() { # rec FIGURE SIDE PAIR VALUE DIR(up|down)
    [ -n "$4" ] || return 0
    echo "$1 $2 $3 $4" >>"$RES"
    grep -q "^$1 " "$RUN/dirs" || echo "$1 $5" >>"$RUN/dirs"
}

# One measurement of FIGURE with build B (side old|new), pair P.
measure() {
    local fig=$1 side=$2 p=$3 b out before
    before=$(wc -l <"$RES")
    [ "$side" = old ] && b=$OLDB || b=$NEWB
    out=$RUN/$fig-$side-$p.out
    case $fig in
    e2e)
        CORRAL_BIN=$b/corral BENCH_JOBS=${AB_E2E_JOBS:-300} CORRAL_BENCH_SLURM=0 BENCH_DIR=$RUN \
            "$NEWB/bench/agent/bench_agent_e2e" >"$out" 2>&1 || true
        rec e2e_jobs_per_s "$side" "$p" "$(sed -n 's/.*jobs_per_s=\([0-9.]*\) (one POST.*/\1/p' "$out")" up
        rec e2e_array_jobs_per_s "$side" "$p" "$(sed -n 's/.*jobs_per_s=\([0-9.]*\) (one array.*/\1/p' "$out")" up
        rec agent_cpu_ms_per_job "$side" "$p" "$(sed -n 's/.*(\([0-9.]*\) ms per job per agent.*/\1/p' "$out")" down
        rec ctl_cpu_ms_per_job "$side" "$p" "$(awk '/^cpu for/ { n = $3; c = $6; printf "%.3f", c * 1000 / n }' "$out")" down
        ;;
    submit)
        CORRAL_BIN=$b/corral "$NEWB/bench/controller/bench_controller" --no-slurm \
            --seconds "${AB_SUBMIT_S:-3}" --clients 64 >"$out" 2>&1 || true
        rec submits_per_s "$side" "$p" "$(sed -n 's/^corral api .*rate= *\([0-9.]*\)\/s.*/\1/p' "$out" | head -1)" up
        rec server_us_per_submit "$side" "$p" "$(sed -n 's/^corral api .*server_cpu=\([0-9.]*\)us.*/\1/p' "$out" | head -1)" down
        ;;
    sched)
        "$b/bench/sched/bench_sched" "${AB_SCHED_CYCLES:-30}" priority las hetero >"$out" 2>&1 || true
        local pol
        for pol in priority las hetero; do
            rec "cycle_cpu_p50_ms_$pol" "$side" "$p" "$(awk -v p="$pol" '$1 == p || $1 == p "-lp" { for (i = 1; i < NF; i++) if ($i == "cpu") { print $(i + 2); exit } }' "$out")" down
            rec "cycle_cpu_p99_ms_$pol" "$side" "$p" "$(awk -v p="$pol" '$1 == p || $1 == p "-lp" { for (i = 1; i < NF; i++) if ($i == "cpu") { print $(i + 4); exit } }' "$out")" down
        done
        ;;
    advise)
        "$b/bench/model/bench_advise" >"$out" 2>&1 || true
        rec advise_estimates_per_s "$side" "$p" "$(sed -n 's/.* s: \([0-9]*\) estimates\/s.*/\1/p' "$out")" up
        ;;
    gateway)
        CORRAL_BIN=$b/corral GW_HELPER=$NEWB/tests/gateway/gw_helper DURATION=${AB_GW_S:-3} \
            sh "$ROOT/bench/gateway/bench_gateway.sh" >"$out" 2>&1 || true
        rec gw_c32_req_per_s "$side" "$p" "$(awk '$1 == "gateway" && $2 == 32 { print $3; exit }' "$out")" up
        rec gw_c32_p99_us "$side" "$p" "$(awk '$1 == "gateway" && $2 == 32 { print $5; exit }' "$out")" down
        rec gw_c32_req_per_cpu_s "$side" "$p" "$(awk '$1 == "gateway" && $2 == 32 { print $7; exit }' "$out")" up
        rec gw_c1_p50_us "$side" "$p" "$(awk '$1 == "gateway" && $2 == 1 { print $4; exit }' "$out")" down
        ;;
    sim)
        "$b/bench/sim/bench_sim" 20000 fifo,hetero 4000 >"$out" 2>&1 || true
        rec sim_cpu_s_fifo "$side" "$p" "$(sed -n 's/^sim fifo .*(\([0-9.]*\) s CPU).*/\1/p' "$out" | head -1)" down
        rec sim_cpu_s_hetero "$side" "$p" "$(sed -n 's/^sim hetero .*(\([0-9.]*\) s CPU).*/\1/p' "$out" | head -1)" down
        ;;
    esac
    # A figure that printed nothing: say so once, with the tail.
    if [ "$(wc -l <"$RES")" = "$before" ] && [ ! -e "$RUN/warned-$fig-$side" ]; then
        echo "# $fig ($side) gave no figure; its last lines:" >&2
        tail -3 "$out" | sed 's/^/#   /' >&2
        : >"$RUN/warned-$fig-$side"
    fi
}

echo "# ab: new = $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo '+changes') ($NEWB), old = $REF ($(git -C "$ROOT" rev-parse --short "$SHA")), $PAIRS pairs, figures $FIGURES"
for ((p = 1; p <= PAIRS; p++)); do
    for fig in ${FIGURES//,/ }; do
        if [ $((p % 2)) = 1 ]; then
            measure "$fig" old "$p"
            measure "$fig" new "$p"
        else
            measure "$fig" new "$p"
            measure "$fig" old "$p"
        fi
    done
    echo "# pair $p of $PAIRS done"
done

# Per figure: the new/old ratios of the pairs where both sides gave a value.
awk -v pairs="$PAIRS" '
FILENAME == ARGV[1] { dir[$1] = $2; next }
{ v[$1, $2, $3] = $4; if (!($1 in seen)) { seen[$1] = 1; order[++nf] = $1 } }
function med(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
    printf "%-26s %5s %8s %8s %8s   %12s %12s\n", "figure", "pairs", "min", "median", "max", "old(med)", "new(med)"
    for (k = 1; k <= nf; k++) {
        f = order[k]; n = 0; no = 0; nn = 0
        delete r; delete o; delete w
        for (p = 1; p <= pairs; p++) {
            if ((f, "old", p) in v) o[++no] = v[f, "old", p]
            if ((f, "new", p) in v) w[++nn] = v[f, "new", p]
            if (((f, "old", p) in v) && ((f, "new", p) in v) && v[f, "old", p] > 0 && v[f, "new", p] > 0)
                r[++n] = dir[f] == "up" ? v[f, "new", p] / v[f, "old", p] : v[f, "old", p] / v[f, "new", p]
        }
        if (n == 0) { printf "%-26s %5d %8s %8s %8s   (no pair)\n", f, 0, "-", "-", "-"; continue }
        mn = med(r, n); lo = r[1]; hi = r[n]
        printf "%-26s %5d %7.2fx %7.2fx %7.2fx   %12.3f %12.3f\n", f, n, lo, mn, hi, med(o, no), med(w, nn)
    }
    print "(new/old, oriented: > 1.00x is better for the new build; a time or CPU cost is old/new)"
}' "$RUN/dirs" "$RES"
