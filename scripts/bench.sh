#!/bin/sh
# make bench: run every benchmark built under bench/ and print its numbers,
# then the script benchmarks (CLI submission rate beside sbatch, the Gavel
# experiment), then the controller soak (SOAK_SECONDS, default 1800: 30
# minutes). Peers (Slurm, nginx) run in the same run when available.
set -eu
BUILD=${1:-build}
for b in "$BUILD"/bench/*/bench_*; do
    [ -f "$b" ] && [ -x "$b" ] || continue
    [ "$(basename "$b")" = bench_soak ] && continue # last: it takes long
    echo "== $(basename "$b")"
    "$b" || echo "(exit $?)"
done
echo "== cli_submit_rate"
bash bench/controller/cli_submit_rate.sh "$BUILD/corral" || echo "(exit $?)"
echo "== gavel_ratio"
sh bench/sim/gavel_ratio.sh "$BUILD" 2,4,5,6,8 6000 || echo "(exit $?)"
echo "== ui_bench (dashboard page loads: 1k nodes, 10k jobs)"
bash bench/ui/ui_bench.sh "$BUILD/corral" || echo "(exit $?)"
echo "== bench_soak"
"$BUILD/bench/controller/bench_soak" --seconds "${SOAK_SECONDS:-1800}" || echo "(exit $?)"
echo "== container_start"
if [ "$(id -u)" = 0 ] && command -v podman >/dev/null 2>&1; then
    sh bench/agent/container_start.sh 50 || echo "(exit $?)"
else
    echo "(skipped: needs root and podman)"
fi
