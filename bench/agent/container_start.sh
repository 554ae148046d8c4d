#!/bin/sh
# container_start.sh [N] - start overhead of a job in a container, compared
# with a bare process (docs/containers.md). Each round times what the agent
# runs for one job that exits at once:
#   bare:      /bin/true, forked and exec'd
#   container: podman run with the agent's flags (runc, --user, --network=host,
#              the job's GPU placeholder --device, explicit --ulimit, labels)
#              of a busybox image running `true`, then `podman rm -f`, as the
#              agent does when the job ends.
# Prints p50 / p99 / max in milliseconds. Needs root, podman, runc and
# busybox-static (make deps). N defaults to 50.
set -eu
N=${1:-50}
IMG=localhost/corral-bench:bb
TMP=$(mktemp -d /var/tmp/corral-bench-ctr.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/rootfs/bin" "$TMP/dev"
cp /bin/busybox "$TMP/rootfs/bin/busybox"
ln -s busybox "$TMP/rootfs/bin/true"
tar -C "$TMP/rootfs" -cf "$TMP/bb.tar" .
podman import -q "$TMP/bb.tar" "$IMG" >/dev/null
mknod "$TMP/dev/nvidia0" c 195 0 && mknod "$TMP/dev/nvidiactl" c 195 255
RT=runc
command -v runc >/dev/null 2>&1 || RT=crun
ns() { date +%s%N; }
pct() { # FILE P: the P-th percentile (nearest rank) of the numbers in FILE, in ms
    sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { i = int((p / 100) * NR + 0.999);
        if (i < 1) i = 1; if (i > NR) i = NR; printf "%.1f", v[i] / 1e6 }'
}
: >"$TMP/bare"
: >"$TMP/ctr"
i=0
while [ "$i" -lt "$N" ]; do
    t0=$(ns)
    /bin/true
    t1=$(ns)
    echo $((t1 - t0)) >>"$TMP/bare"
    t0=$(ns)
    podman --runtime "$RT" run --rm=false --pull=never --sig-proxy=true --name "corral-bench-$i" \
        --label corral.job=$i --label corral.node=bench --user 64001:64001 --network=host \
        --device "$TMP/dev/nvidia0:/dev/nvidia0" --device "$TMP/dev/nvidiactl:/dev/nvidiactl" \
        -e NVIDIA_VISIBLE_DEVICES=0 -e CUDA_VISIBLE_DEVICES=0 \
        --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$IMG" true
    podman rm -f -t 0 "corral-bench-$i" >/dev/null
    t1=$(ns)
    echo $((t1 - t0)) >>"$TMP/ctr"
    i=$((i + 1))
done
podman rmi "$IMG" >/dev/null 2>&1 || true
echo "rounds: $N (runtime $RT, $(podman --version))"
echo "bare process:      p50 $(pct "$TMP/bare" 50) ms  p99 $(pct "$TMP/bare" 99) ms  max $(pct "$TMP/bare" 100) ms"
echo "container (run+rm): p50 $(pct "$TMP/ctr" 50) ms  p99 $(pct "$TMP/ctr" 99) ms  max $(pct "$TMP/ctr" 100) ms"
