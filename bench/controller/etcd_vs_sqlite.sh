#!/bin/sh
# Durable submissions/s through the controller on SQLite and on etcd, in
# the same run, same clients, same machine: starts a one-member etcd on
# free loopback ports (data under /tmp, like the SQLite controller's), then
# bench_controller --etcd. Usage (from the repository root, after
# 'ninja -C build'):
#   bench/controller/etcd_vs_sqlite.sh [build] [bench_controller args...]
set -eu
B=${1:-build}; [ $# -gt 0 ] && shift
ETCD=$(command -v etcd || true)
[ -n "$ETCD" ] || { echo "no etcd binary: apt-get install etcd-server (make deps)"; exit 1; }
T=$(mktemp -d /tmp/corral-bench-etcd.XXXXXX)
ports=$(python3 -c "
import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(('127.0.0.1',0))
print(' '.join(str(s.getsockname()[1]) for s in ss))")
CP=${ports% *} PP=${ports#* }
URL=http://127.0.0.1:$CP
"$ETCD" --data-dir "$T/data" --listen-client-urls "$URL" --advertise-client-urls "$URL" \
    --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "default=http://127.0.0.1:$PP" --log-level warn >"$T/etcd.log" 2>&1 &
EPID=$!
trap 'kill $EPID 2>/dev/null; wait $EPID 2>/dev/null; rm -rf "$T"' EXIT
# A timeout's SIGTERM (meson signals the group) or ^C: through the EXIT trap.
trap 'exit 143' TERM
trap 'exit 130' INT
i=0
until curl -sf -m 2 "$URL/health" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "etcd did not start: $(tail -5 "$T/etcd.log")"; exit 1; }
    sleep 0.1
done
echo "# etcd $("$ETCD" --version | head -1 | cut -d' ' -f3), one member, data in $T"
"$B/bench/controller/bench_controller" --no-slurm --etcd "$URL" "$@"
