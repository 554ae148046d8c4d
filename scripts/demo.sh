#!/bin/sh
# make demo: what a newcomer should see first.
#  1. a whole cluster on this machine: a controller with SQLite, ten agents
#     with simulated GPUs of a mixed fleet, a realistic mix of real processes,
#     where each went and why, pending reasons, a GPU that overheats, corral top
#     (scripts/demo-cluster.sh; ends by itself, leaves nothing running);
#  2. the advisor on two of the seed workloads (all six: scripts/demo-advise.sh);
#  3. the simulator: four policies on the same Gavel-style workload.
# The cluster's web dashboard (/ui) is printed as it starts. With DEMO_KEEP=1
# the cluster part runs last and stays up, dashboard and all, until Ctrl-C.
set -eu
CORRAL=${1:-build/corral}
here=$(dirname "$0")
run() {
    echo
    echo "\$ corral $*"
    "$CORRAL" "$@"
}
cluster() {
    echo "=== Corral demo, part 1 of 3: a mixed GPU cluster on this machine"
    DEMO_SECONDS=${DEMO_SECONDS:-45} "$here/demo-cluster.sh" "$CORRAL"
    echo
}
[ -z "${DEMO_KEEP:-}" ] && cluster
echo "=== Part 2 of 3: which GPU type suits a workload, and why (corral advise)"
run advise --kind finetune --method lora --params 7b --tokens 1e8 --top 6
run advise --kind hpc --needs fp64,ecc --top 4
echo
echo "=== Part 3 of 3: replaying a workload through four policies (corral sim)"
run sim --generate 300 --rate 60 --multi-gpu --tenants 3 \
    --throughputs data/traces/gavel/simulation_throughputs.json \
    --compare fifo,priority,hetero,las --seed 1
echo
if [ -n "${DEMO_KEEP:-}" ]; then
    cluster
fi
echo "Next: README.md for the CLI tour, docs/ for the architecture and API, docs/dashboard.md for the web dashboard."
