#!/usr/bin/env bash
# test_netns.sh - several hosts on one machine: the controller in the root
# network namespace, two agents each in its own namespace (own address,
# joined by a bridge), a gang job across them. Checks that each rank got
# the other host's view right (MASTER_ADDR is the first node's own address,
# not loopback, and that node owns it; NODE_RANK 0 and 1; RANK =
# NODE_RANK * LOCAL_WORLD_SIZE), that each job ran in its node's namespace,
# that the namespaces reach each other over the bridge,
# and that the controller reaches the agents for `corral logs`.
# Needs root and iproute2; skips (77) otherwise. Polls with deadlines.
set -euo pipefail

CORRAL=${CORRAL_BIN:?CORRAL_BIN not set}
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
    echo "skip: needs root and iproute2"
    exit 77
fi
TAG=cr$$
NET=10.$((100 + $$ % 100)).$((($$ / 100) % 200 + 1))
DIR=$(mktemp -d /tmp/corral-netns-XXXXXX)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for i in 0 1; do
        ip netns pids "$TAG-$i" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$TAG-$i" 2>/dev/null || true
    done
    ip link del "$TAG-br" 2>/dev/null || true
    [ -n "${CORRAL_KEEP:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    for f in "$DIR"/*.log; do
        echo "--- $f"
        tail -20 "$f"
    done
    exit 1
}

wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.1
    done
}

if ! ip link add "$TAG-br" type bridge 2>/dev/null; then
    echo "skip: cannot create a bridge here"
    exit 77
fi
ip addr add "$NET.1/24" dev "$TAG-br"
ip link set "$TAG-br" up
for i in 0 1; do
    ip netns add "$TAG-$i"
    ip link add "$TAG-v$i" type veth peer name "$TAG-p$i"
    ip link set "$TAG-p$i" netns "$TAG-$i"
    ip link set "$TAG-v$i" master "$TAG-br" up
    ip -n "$TAG-$i" addr add "$NET.$((10 + i))/24" dev "$TAG-p$i"
    ip -n "$TAG-$i" link set "$TAG-p$i" up
    ip -n "$TAG-$i" link set lo up
done

# The bridge address is ours alone, so any port is free there.
PORT=$((20000 + $$ % 20000))
export CORRAL_SERVER=http://$NET.1:$PORT
"$CORRAL" controller --listen "$NET.1:$PORT" --state-dir "$DIR/ctl" --heartbeat 1 \
    >"$DIR/controller.log" 2>&1 &
PIDS+=($!)
wait_for 30 curl -sf "$CORRAL_SERVER/v1/health" || fail "controller did not start"
wait_for 20 test -s "$DIR/ctl/admin.token" || fail "controller wrote no admin token"
export CORRAL_TOKEN=$(cat "$DIR/ctl/admin.token")

for i in 0 1; do
    ip netns exec "$TAG-$i" "$CORRAL" agent --server "$CORRAL_SERVER" \
        --join-token "$DIR/ctl/join.token" --node "host$i" --gpus "sim:2xA100 80GB SXM" \
        --listen "$NET.$((10 + i)):0" --state-dir "$DIR/host$i" --kill-on-exit \
        >"$DIR/agent-$i.log" 2>&1 &
    PIDS+=($!)
done
two_up() { [ "$("$CORRAL" nodes | grep -c ' up ')" -eq 2 ]; }
wait_for 60 two_up || fail "agents did not register from their namespaces"

# Each rank records its environment and the addresses it sees (its own
# namespace's), then waits for the other (a barrier, as a collective would).
script='cd '"$DIR"' && ip -4 -o addr show scope global > addr-$CORRAL_NODE.txt && '
script+='env > gang-$CORRAL_NODE.tmp && mv gang-$CORRAL_NODE.tmp gang-$CORRAL_NODE.env; '
script+='while [ $(ls gang-*.env | wc -l) -lt 2 ]; do sleep 0.05; done'
out=$("$CORRAL" submit -n netgang --nodes 2 --gpus 4 --gpu-type "A100 80GB SXM" -- sh -c "$script")
id=$(echo "$out" | grep -o '[0-9][0-9]*' | head -1)
[ -n "$id" ] || fail "submit: $out"
completed() { "$CORRAL" show "$id" | grep -q 'State: *completed'; }
wait_for 60 completed || fail "gang job $id did not complete: $("$CORRAL" show "$id")"

get() { grep "^$2=" "$DIR/gang-$1.env" | cut -d= -f2-; }
m0=$(get host0 MASTER_ADDR)
m1=$(get host1 MASTER_ADDR)
[ "$m0" = "$m1" ] || fail "MASTER_ADDR differs: $m0 vs $m1"
case "$m0" in
"$NET.10" | "$NET.11") ;;
*) fail "MASTER_ADDR $m0 is not a namespace's address" ;;
esac
[ "$(get host0 MASTER_PORT)" = "$(get host1 MASTER_PORT)" ] || fail "MASTER_PORT differs"
r0=$(get host0 NODE_RANK)
r1=$(get host1 NODE_RANK)
[ $((r0 + r1)) -eq 1 ] || fail "NODE_RANKs $r0 $r1"
for h in host0 host1; do
    [ "$(get $h WORLD_SIZE)" = 4 ] || fail "$h WORLD_SIZE"
    [ "$(get $h LOCAL_WORLD_SIZE)" = 2 ] || fail "$h LOCAL_WORLD_SIZE"
    [ "$(get $h RANK)" = $((2 * $(get $h NODE_RANK))) ] || fail "$h RANK"
done
# The master is the rank-0 node, and that node really has that address.
master_host=host0
[ "$r1" = 0 ] && master_host=host1
grep -q "inet $m0/" "$DIR/addr-$master_host.txt" || fail "rank 0 ($master_host) does not own $m0"
# Each job ran in its own namespace (its own address).
grep -q "inet $NET.10/" "$DIR/addr-host0.txt" || fail "host0 job not in its namespace"
grep -q "inet $NET.11/" "$DIR/addr-host1.txt" || fail "host1 job not in its namespace"
# One namespace reaches the other's agent over the bridge.
a0=$(grep -o 'listening on [0-9.:]*' "$DIR/agent-0.log" | head -1 | cut -d' ' -f3)
ip netns exec "$TAG-1" curl -sf "http://$a0/v1/health" >/dev/null ||
    fail "host1's namespace cannot reach host0's agent at $a0"
# The controller (root namespace) fetches a job's log from its agent.
id2=$("$CORRAL" submit -n hello --gpus 1 -- sh -c 'echo hello from $CORRAL_NODE' | grep -o '[0-9][0-9]*' | head -1)
done2() { "$CORRAL" show "$id2" | grep -q 'State: *completed'; }
wait_for 30 done2 || fail "job $id2 did not complete"
"$CORRAL" logs "$id2" | grep -q "hello from host" || fail "corral logs through the agent in its namespace"
echo "ok: gang across two network namespaces ($m0 master), logs proxied"
