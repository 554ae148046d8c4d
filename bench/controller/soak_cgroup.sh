#!/bin/bash
# soak_cgroup.sh - bench_soak with the controller on a CPU of its own, as
# far as a shared machine allows (issue 10): the clients (bench_soak's 64
# threads) in a cgroup capped at CLI_QUOTA_US per 100 ms (default 100000:
# one core), the controller in one with CTL_SHARES cpu.shares (default
# 16384), the agents in a third. cgroup v1 `cpu` controller, root.
#
#   bench/controller/soak_cgroup.sh [BUILD_DIR] [bench_soak args...]
#   e.g. bench/controller/soak_cgroup.sh build --seconds 60 --sample 30
#
# CORRAL_BIN picks the corral binary (default BUILD_DIR/corral).
set -u
BUILD=${1:-build}
shift || true
CG=${CG_ROOT:-/sys/fs/cgroup/cpu}
if [ ! -w "$CG" ]; then
    echo "soak_cgroup: $CG is not a writable cgroup v1 cpu hierarchy (needs root)" >&2
    exit 77
fi
tag=soak$$
cli=$CG/$tag-clients ctl=$CG/$tag-controller agt=$CG/$tag-agents
mkdir -p "$cli" "$ctl" "$agt" || exit 1
echo 100000 >"$cli/cpu.cfs_period_us"
echo "${CLI_QUOTA_US:-100000}" >"$cli/cpu.cfs_quota_us"
echo "${CTL_SHARES:-16384}" >"$ctl/cpu.shares"
cleanup() {
    # agents make cgroups of their own below theirs: remove those first
    for g in "$cli" "$ctl" "$agt"; do
        find "$g" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
        rmdir "$g" 2>/dev/null
    done
}
trap cleanup EXIT
export CORRAL_BIN=${CORRAL_BIN:-$BUILD/corral}
(
    echo $BASHPID >"$cli/cgroup.procs"
    exec "$BUILD/bench/controller/bench_soak" "$@"
) &
bench=$!
# Move the controller and the agents as bench_soak starts them.
while kill -0 $bench 2>/dev/null; do
    for p in $(pgrep -P $bench); do
        args=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
        case "$args" in
        *" controller "*) grep -qx "$p" "$ctl/cgroup.procs" || echo "$p" >"$ctl/cgroup.procs" ;;
        *" agent "*) grep -qx "$p" "$agt/cgroup.procs" || echo "$p" >"$agt/cgroup.procs" ;;
        esac
    done 2>/dev/null
    sleep 1
done
wait $bench
