#!/usr/bin/env bash
# cli_submit_rate.sh - submissions per second through the command line
# (issue 4): N sequential `corral submit --gpus 1 -- true` and N more four at
# a time (xargs -P4), against a real controller on loopback, beside the
# Slurm peer's `sbatch --hold --gres=gpu:1 --wrap true` measured the same way
# in the same run. One process per submission in both, so process start-up
# (dynamic loading) and the server's commit are what is measured.
#
#   usage: bench/controller/cli_submit_rate.sh [CORRAL_BIN]
#   env:   N=300 (submissions per column), P=4 (parallel width),
#          SLURM_CONF (a running peer to use; without it, or when it does not
#          answer, this run starts its own with ../shared/peers/slurm/start.sh
#          (beside the repository) in its own directory and PORT_BASE, and
#          stops it at the end, waiting for its daemons to exit),
#          NO_SLURM=1 to skip the peer.
# Prints a table: wall seconds and submissions per second per column, and
# the ratios corral/sbatch. Not a test: the numbers depend on the machine.
set -uo pipefail
BIN=${1:-${CORRAL_BIN:-build/corral}}
N=${N:-300}
P=${P:-4}
PEER=${SLURM_PEER:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/peers/slurm}

[ -x "$BIN" ] || { echo "cli_submit_rate: no corral binary at $BIN" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
TMP=$(mktemp -d)
export SLURM_CONF=${SLURM_CONF:-$TMP/slurm/slurm.conf}
CTL_PID=
STARTED_SLURM=0
cleanup() {
    [ -n "$CTL_PID" ] && kill "$CTL_PID" 2>/dev/null && wait "$CTL_PID" 2>/dev/null
    if [ "$STARTED_SLURM" = 1 ]; then
        "$PEER/stop.sh" "$(dirname "$SLURM_CONF")" >/dev/null 2>&1
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

now() { date +%s.%N; }
rate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.1f", (t > 0 ? n / t : 0) }'; }

# --- the controller -----------------------------------------------------------
PORT=$((20000 + RANDOM % 20000))
"$BIN" controller --listen "127.0.0.1:$PORT" --state-dir "$TMP/state" >"$TMP/ctl.log" 2>&1 &
CTL_PID=$!
for _ in $(seq 1 200); do
    [ -s "$TMP/state/admin.token" ] && "$BIN" --server "http://127.0.0.1:$PORT" \
        --token "$(cat "$TMP/state/admin.token")" version >/dev/null 2>&1 && break
    sleep 0.05
done
[ -s "$TMP/state/admin.token" ] || { echo "cli_submit_rate: controller did not start" >&2; cat "$TMP/ctl.log" >&2; exit 1; }
export CORRAL_SERVER="http://127.0.0.1:$PORT"
CORRAL_TOKEN=$(cat "$TMP/state/admin.token")
export CORRAL_TOKEN BIN

"$BIN" submit --gpus 1 -- true >/dev/null || { echo "cli_submit_rate: corral submit fails" >&2; exit 1; }
t0=$(now)
for _ in $(seq 1 "$N"); do "$BIN" submit --gpus 1 -- true >/dev/null || exit 1; done
t1=$(now)
seq 1 "$N" | xargs -P"$P" -I{} "$BIN" submit --gpus 1 -- true >/dev/null || exit 1
t2=$(now)
c_seq=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
c_par=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
jobs=$("$BIN" jobs --limit 100000 2>/dev/null | tail -n +2 | wc -l)

# --- the Slurm peer -----------------------------------------------------------
s_seq=0
s_par=0
have_slurm=0
if [ "${NO_SLURM:-0}" != 1 ] && command -v sbatch >/dev/null; then
    if ! timeout 10 sinfo -h >/dev/null 2>&1 || [ -z "$(timeout 10 sinfo -h 2>/dev/null)" ]; then
        export SLURM_CONF=$TMP/slurm/slurm.conf # ours: its own directory and ports
        if [ -x "$PEER/start.sh" ] &&
            PORT_BASE=$((21000 + $$ % 200 * 200)) "$PEER/start.sh" "$TMP/slurm" >"$TMP/slurm.log" 2>&1; then
            STARTED_SLURM=1
        fi
    fi
    SB="sbatch --parsable --hold --gres=gpu:1 --wrap true"
    if timeout 20 $SB >>"$TMP/slurm.ids" 2>/dev/null; then
        have_slurm=1
        t0=$(now)
        for _ in $(seq 1 "$N"); do $SB >>"$TMP/slurm.ids" || break; done
        t1=$(now)
        seq 1 "$N" | xargs -P"$P" -I{} $SB >>"$TMP/slurm.ids"
        t2=$(now)
        s_seq=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
        s_par=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
        # cancel this run's held jobs only (the peer may be shared)
        cut -d';' -f1 "$TMP/slurm.ids" | xargs -r -n 500 scancel >/dev/null 2>&1
    fi
fi

printf '%-14s %8s %10s %10s\n' "column" "subs" "seconds" "subs/s"
printf '%-14s %8d %10.2f %10s\n' "corral seq" "$N" "$c_seq" "$(rate "$N" "$c_seq")"
printf '%-14s %8d %10.2f %10s\n' "corral par$P" "$N" "$c_par" "$(rate "$N" "$c_par")"
if [ "$have_slurm" = 1 ]; then
    printf '%-14s %8d %10.2f %10s\n' "sbatch seq" "$N" "$s_seq" "$(rate "$N" "$s_seq")"
    printf '%-14s %8d %10.2f %10s\n' "sbatch par$P" "$N" "$s_par" "$(rate "$N" "$s_par")"
    awk -v cs="$c_seq" -v cp="$c_par" -v ss="$s_seq" -v sp="$s_par" 'BEGIN {
        printf "ratio corral/sbatch: seq %.1fx, par %.1fx\n", ss / cs, sp / cp }'
else
    echo "sbatch: the Slurm peer is not available (SLURM_CONF=$SLURM_CONF): no ratio"
fi
echo "corral jobs recorded by the controller: $jobs (expected $((2 * N + 1)))"
echo "corral binary: $BIN ($(ldd "$BIN" | wc -l) shared objects; libcurl: $(ldd "$BIN" | grep -c curl))"
