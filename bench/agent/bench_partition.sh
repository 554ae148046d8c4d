#!/bin/sh
# bench_partition.sh [N] - issue 24's partition check at full length: N
# (default 20) partitions of the node running a checkpointing job, by
# tests/integration/test_partition.sh (network namespaces; `ip link set
# down`, or `tc netem loss 100%` every other time where the kernel has
# netem). Passes when no two copies of the job ever ran at once (judged from
# the copies' own writes), the job was neither lost nor started twice, and
# the keep-running job kept its one copy; prints each gap between a copy's
# last write and the next copy's first. Needs root and iproute2.
#   CORRAL_BIN (default build/corral)
set -eu
N=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
CORRAL_BIN=${CORRAL_BIN:-$here/../../build/corral}
export CORRAL_BIN PARTITIONS="$N"
exec "$here/../../tests/integration/test_partition.sh"
