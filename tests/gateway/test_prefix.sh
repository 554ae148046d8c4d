#!/bin/sh
# Prefix-aware routing (issue 30): bench/gateway/bench_prefix.sh on a
# shorter run: on the shared-prefix workload against the prefix-cache
# stand-in, mean TTFT with prefix affinity is at most 0.6x least-outstanding
# p2c's in the same run, and no replica goes over its in-flight limit.
set -eu
: "${CORRAL_BIN:?CORRAL_BIN not set}"
: "${GW_HELPER:?GW_HELPER not set}"
REQUESTS=${REQUESTS:-240} exec "$(dirname "$0")/../../bench/gateway/bench_prefix.sh"
