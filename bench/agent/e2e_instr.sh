#!/bin/bash
# bench/agent/e2e_instr.sh [N] CORRAL [CORRAL...]
#
# Instructions the controller executes in bench_agent_e2e (4 agents x 8
# simulated H100s; N one-GPU jobs one POST each, then N as one array POST),
# counted by valgrind's callgrind over the controller's whole life: a count,
# not a time, so two builds compare on a loaded machine. The agents run
# plainly (CORRAL_BIN is a wrapper that puts only "corral controller" under
# callgrind). Prints the total and the share of its biggest job-path parts
# (the desired-state document, the agents' status reports, the store's
# writer). N defaults to 200 (400 jobs). INSTR_KEEP=DIR keeps each dump as
# DIR/K.cg (callgrind_annotate --inclusive=yes DIR/K.cg: where they went).
#
#   bench/agent/e2e_instr.sh 200 /tmp/corral-ab/SHA/build/corral build/corral
set -euo pipefail
N=200
case ${1:-} in '' | *[!0-9]*) ;; *)
    N=$1
    shift
    ;;
esac
[ $# -gt 0 ] || {
    echo "usage: $0 [N] CORRAL [CORRAL...]" >&2
    exit 2
}
for t in valgrind callgrind_annotate; do
    command -v $t >/dev/null || {
        echo "e2e_instr: $t not installed" >&2
        exit 2
    }
done
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH=${E2E_BENCH:-$HERE/../../build/bench/agent/bench_agent_e2e}
[ -x "$BENCH" ] || {
    echo "e2e_instr: no $BENCH (build first, or set E2E_BENCH)" >&2
    exit 2
}
T=$(mktemp -d "${TMPDIR:-/tmp}/corral-e2e-instr-XXXXXX")
trap 'rm -rf "$T"' EXIT
cat >"$T/wrap.sh" <<'EOF'
#!/bin/bash
if [ "$1" = controller ]; then
    exec valgrind --tool=callgrind --callgrind-out-file="$E2E_CG/cg.%p" "$E2E_REAL" "$@"
fi
exec "$E2E_REAL" "$@"
EOF
chmod +x "$T/wrap.sh"
echo "# controller instructions in bench_agent_e2e (callgrind; $N jobs one POST each + $N as one array)"
k=0
for bin in "$@"; do
    [ -x "$bin" ] || {
        echo "e2e_instr: $bin is not an executable" >&2
        exit 2
    }
    k=$((k + 1))
    rm -rf "$T/cg" && mkdir -p "$T/cg"
    E2E_CG=$T/cg E2E_REAL=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin") \
        CORRAL_BIN=$T/wrap.sh BENCH_JOBS=$N CORRAL_BENCH_SLURM=0 BENCH_DIR=$T \
        "$BENCH" >"$T/out" 2>&1 || {
        echo "e2e_instr: $bin: the bench failed: $(tail -3 "$T/out")" >&2
        exit 1
    }
    # the controller's dump is the biggest (a short-lived child may leave one too)
    f=$(ls -S "$T"/cg/cg.* | head -1)
    [ -z "${INSTR_KEEP:-}" ] || { mkdir -p "$INSTR_KEEP" && cp "$f" "$INSTR_KEEP/$k.cg"; }
    callgrind_annotate --inclusive=yes "$f" 2>/dev/null >"$T/ann"
    total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$T/ann")
    part() { # the first line naming function $1: its inclusive count
        awk -v f="$1" 'index($0, ":" f " ") || index($0, ":" f ".") { gsub(",", "", $1); print $1; exit }' "$T/ann"
    }
    printf "%-50s %14s instructions, %s per job\n" "$bin" "$total" "$((total / (2 * N)))"
    for fn in ctl_desired_answer ctl_desired_doc ctl_desired_text agent_status writer_main; do
        v=$(part "$fn")
        [ -z "$v" ] || printf "    %-24s %14s (%s%%)\n" "$fn" "$v" \
            "$(awk -v a="$v" -v t="$total" 'BEGIN { printf "%.1f", 100 * a / t }')"
    done
done
