#!/usr/bin/env bash
# Failover time of an HA trio: a 3-member etcd cluster and 3 controllers on
# loopback (--store etcd:..., --election-ttl TTL), 2 agents with simulated
# GPUs. Each round SIGKILLs the leader and times, from the kill, until a job
# submitted right after it (the CLI given the three URLs finds the new
# leader itself) is running on an agent; the killed controller is started
# again as a standby before the next round. Prints each round and the
# p50 / p99 / max over all rounds. Usage (from the repository root, after
# 'ninja -C build'):
#   bench/controller/ha_failover.sh [CORRAL_BIN] [ROUNDS] [TTL]
set -euo pipefail
CORRAL=${1:-build/corral}
ROUNDS=${2:-20}
TTL=${3:-5}
ETCD=$(command -v etcd || true)
[ -n "$ETCD" ] || { echo "no etcd binary: apt-get install etcd-server (make deps)"; exit 1; }
DIR=$(mktemp -d /tmp/corral-bench-ha.XXXXXX)
PIDS=()
# Jobs' processes lead their own sessions: on a kill they may outlive their
# agent; found by this run's directory in their command line (a job's shim
# is a fork of its agent) and their groups killed.
kill_strays() {
    local p
    for p in $(pgrep -f -- "$DIR/" || true); do
        [ "$p" != $$ ] || continue
        kill -KILL -- "-$p" 2>/dev/null || true
        kill -KILL "$p" 2>/dev/null || true
    done
    find /sys/fs/cgroup -maxdepth 3 -depth -type d -path "*/corral-habench$$-*" -exec rmdir {} + 2>/dev/null || true
}
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    kill_strays
    rm -rf "$DIR"
}
on_signal() { # SIGTERM (a timeout) or ^C: no orderly stop
    trap - EXIT
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    kill_strays
    rm -rf "$DIR"
    exit "$1"
}
trap cleanup EXIT
trap 'on_signal 143' TERM
trap 'on_signal 130' INT
wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.05
    done
}
read -r -a P <<<"$(python3 -c '
import socket
ss = [socket.socket() for _ in range(9)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
CLUSTER="e0=http://127.0.0.1:${P[3]},e1=http://127.0.0.1:${P[4]},e2=http://127.0.0.1:${P[5]}"
EPS="http://127.0.0.1:${P[0]},http://127.0.0.1:${P[1]},http://127.0.0.1:${P[2]}"
for i in 0 1 2; do
    "$ETCD" --name "e$i" --data-dir "$DIR/etcd$i" --log-level warn \
        --listen-client-urls "http://127.0.0.1:${P[$i]}" \
        --advertise-client-urls "http://127.0.0.1:${P[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${P[$((i + 3))]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${P[$((i + 3))]}" \
        --initial-cluster "$CLUSTER" --initial-cluster-state new \
        --initial-cluster-token corral-ha-bench >"$DIR/etcd$i.log" 2>&1 &
    PIDS+=($!)
done
for i in 0 1 2; do
    wait_for 60 curl -sf -m 2 "http://127.0.0.1:${P[$i]}/health" || { echo "etcd $i did not start"; exit 1; }
done
unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null
URLS=()
for i in 0 1 2; do URLS+=("http://127.0.0.1:${P[$((i + 6))]}"); done
ALL="${URLS[0]},${URLS[1]},${URLS[2]}"
CPID=()
# The checkpoint root in $DIR too (its default is /tmp/corral/ckpt).
printf '{"checkpoint_root": "%s/ckpt"}\n' "$DIR" >"$DIR/ckpt.json"
start_ctl() {
    "$CORRAL" controller --allow-legacy-join --config "$DIR/ckpt.json" \
        --listen "127.0.0.1:${P[$(($1 + 6))]}" --state-dir "$DIR/ctl$1" --store "etcd:$EPS" --advertise-url "${URLS[$1]}" --election-ttl "$TTL" --heartbeat 1 \
        >>"$DIR/controller$1.log" 2>&1 &
    CPID[$1]=$!
    PIDS+=($!)
}
role_of() { curl -sf -m 2 "$1/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["role"])'; }
is_role() { [ "$(role_of "$1")" = "$2" ]; }
start_ctl 0
wait_for 60 is_role "${URLS[0]}" leader || { echo "no leader"; exit 1; }
wait_for 30 test -s "$DIR/ctl0/admin.token"
for i in 1 2; do
    mkdir -m 700 -p "$DIR/ctl$i"
    for f in secret.key cluster.id join.token admin.token; do cp -p "$DIR/ctl0/$f" "$DIR/ctl$i/$f"; done
    start_ctl "$i"
done
for i in 1 2; do wait_for 60 is_role "${URLS[$i]}" follower || { echo "no follower $i"; exit 1; }; done
export CORRAL_TOKEN=$(cat "$DIR/ctl0/admin.token") CORRAL_SERVER=$ALL
for n in 0 1; do
    "$CORRAL" agent --server "$ALL" --join-token "$DIR/ctl0/join.token" --node "habench$$-n$n" \
        --gpus "sim:4xA100 80GB SXM" --listen 127.0.0.1:0 --state-dir "$DIR/n$n" --kill-on-exit \
        >"$DIR/agent$n.log" 2>&1 &
    PIDS+=($!)
done
up() { [ "$("$CORRAL" nodes | grep -c ' up ')" = 2 ]; }
wait_for 60 up || { echo "agents did not register"; exit 1; }
running() { "$CORRAL" show --json "$1" | grep -q '"state": *"running"'; }
echo "# etcd $("$ETCD" --version | head -1 | cut -d' ' -f3), 3 members; 3 controllers, TTL ${TTL}s; $ROUNDS kills"
: >"$DIR/times"
for r in $(seq 1 "$ROUNDS"); do
    leader=""
    find_leader() { for i in 0 1 2; do is_role "${URLS[$i]}" leader && leader=$i && return 0; done; return 1; }
    wait_for 60 find_leader || { echo "no leader before round $r"; exit 1; }
    kill -KILL "${CPID[$leader]}"
    wait "${CPID[$leader]}" 2>/dev/null || true
    t0=$(date +%s.%N)
    id=$("$CORRAL" submit --name "probe$r" -- sleep 3600 | sed -nE 's/^Submitted job ([0-9]+).*/\1/p')
    wait_for 120 running "$id" || { echo "round $r: job $id not running"; exit 1; }
    t1=$(date +%s.%N)
    python3 -c "print('%.2f' % ($t1 - $t0))" | tee -a "$DIR/times" | sed "s/^/round $r: controller $leader killed, new leader scheduled after /; s/$/ s/"
    "$CORRAL" cancel "$id" >/dev/null
    start_ctl "$leader"
    wait_for 60 is_role "${URLS[$leader]}" follower || { echo "controller $leader did not come back"; exit 1; }
done
python3 - "$DIR/times" <<'EOF'
import sys
t = sorted(float(l) for l in open(sys.argv[1]) if l.strip())
def pct(p):
    return t[min(len(t) - 1, max(0, int(round(p / 100.0 * len(t) + 0.5)) - 1))]
print("failover (SIGKILL of the leader -> a new submit running), %d kills: p50 %.2f s, p99 %.2f s, max %.2f s, min %.2f s" % (len(t), pct(50), pct(99), t[-1], t[0]))
EOF
