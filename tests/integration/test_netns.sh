#!/usr/bin/env bash
# test_netns.sh - several hosts on one machine: the controller in the root
# network namespace, two agents each in its own namespace (own address,
# joined by a bridge), a 2-node x 4-task gang across them. Checks that
# every task has its own RANK (0-7, LOCAL_RANK, NODE_RANK, SLURM_*), all see
# the same routable MASTER_ADDR (rank 0's namespace address, not loopback)
# and the MASTER_PORT rank 0's agent reserved, and that a socket rendezvous
# of all 8 at that address completes; that a launcher (torchrun) runs once
# per node with PET_*; that the agents' NCCL setting reaches every task;
# that the namespaces reach each other over the bridge; and that the
# controller fetches each rank's log from its node (`logs --rank`, `--all`).
# Needs root and iproute2; skips (77) otherwise. Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_netns_require cr
cr_setup netns
cleanup_extra() { cr_netns_down 2; }

cr_netns_hosts 2

# The bridge address is ours alone, so any port is free there.
PORT=$((20000 + $$ % 20000))
export CORRAL_SERVER=http://$NET.1:$PORT
cr_start_controller "$DIR/ctl" --allow-legacy-join --listen "$NET.1:$PORT"
wait_for 30 curl -sf "$CORRAL_SERVER/v1/health" || fail "controller did not start"

for i in 0 1; do
    CR_EXEC="ip netns exec $TAG-$i" cr_start_agent "host$i" "$DIR/host$i" "$DIR/agent-$i.log" \
        --gpus "sim:4xA100 80GB SXM" --listen "$NET.$((10 + i)):0" \
        --task-env "NCCL_SOCKET_IFNAME=$TAG-p$i"
done
two_up() { [ "$("$CORRAL" nodes | grep -c ' up ')" -eq 2 ]; }
wait_for 60 two_up || fail "agents did not register from their namespaces"

# A 2-node x 4-task gang (kind pretrain: one task per GPU by default): every
# task records its variables, then all 8 meet in a socket rendezvous at
# MASTER_ADDR:MASTER_PORT (rank 0 listens there, the others connect), as
# torch.distributed's TCP store would.
cat >"$DIR/rdzv.py" <<'PY'
import os, socket, sys, time
d = sys.argv[1]
r, w = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
keys = ("RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK MASTER_ADDR "
        "MASTER_PORT CORRAL_NODE SLURM_PROCID SLURM_LOCALID SLURM_NTASKS SLURM_NODELIST "
        "SLURM_JOB_ID PET_NNODES PET_NPROC_PER_NODE PET_NODE_RANK NCCL_SOCKET_IFNAME").split()
with open(f"{d}/task-{r}.tmp", "w") as f:
    f.writelines(f"{k}={os.environ.get(k, '')}\n" for k in keys)
os.rename(f"{d}/task-{r}.tmp", f"{d}/task-{r}.env")
print(f"hello from rank {r}", flush=True)
deadline = time.time() + 60
if r == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(w)
    s.settimeout(60)
    conns, seen = [], set()
    while len(seen) < w - 1:
        c, _ = s.accept()
        seen.add(int(c.makefile().readline()))
        conns.append(c)
    for c in conns:
        c.sendall(b"go\n")
        c.close()
    open(f"{d}/done-0", "w").write(" ".join(map(str, sorted(seen))))
else:
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                sys.exit(3)
            time.sleep(0.1)
    c.sendall(f"{r}\n".encode())
    c.settimeout(60)
    if c.makefile().readline().strip() != "go":
        sys.exit(4)
    open(f"{d}/done-{r}", "w").write("ok")
PY
out=$("$CORRAL" submit -n netgang --nodes 2 --gpus 8 --kind pretrain --gpu-type "A100 80GB SXM" \
    -- python3 "$DIR/rdzv.py" "$DIR")
id=$(echo "$out" | grep -o '[0-9][0-9]*' | head -1)
[ -n "$id" ] || fail "submit: $out"
completed() { "$CORRAL" show "$id" | grep -q 'State: *completed'; }
wait_for 90 completed || fail "gang job $id did not complete: $("$CORRAL" show "$id")"

get() { grep "^$2=" "$DIR/task-$1.env" | cut -d= -f2-; }
[ "$(cat "$DIR/done-0")" = "1 2 3 4 5 6 7" ] || fail "rendezvous: rank 0 saw $(cat "$DIR/done-0")"
m0=$(get 0 MASTER_ADDR)
p0=$(get 0 MASTER_PORT)
case "$m0" in
"$NET.10" | "$NET.11") ;;
*) fail "MASTER_ADDR $m0 is not a namespace's address" ;;
esac
[ "$p0" -ge 29500 ] && [ "$p0" -le 29999 ] || fail "MASTER_PORT $p0 not from the rendezvous range"
for r in 0 1 2 3 4 5 6 7; do
    [ -e "$DIR/done-$r" ] || fail "rank $r did not finish the rendezvous"
    [ "$(get $r RANK)" = $r ] || fail "task $r: RANK $(get $r RANK)"
    [ "$(get $r SLURM_PROCID)" = $r ] || fail "task $r: SLURM_PROCID"
    [ "$(get $r MASTER_ADDR)" = "$m0" ] || fail "task $r: MASTER_ADDR $(get $r MASTER_ADDR)"
    [ "$(get $r MASTER_PORT)" = "$p0" ] || fail "task $r: MASTER_PORT"
    [ "$(get $r WORLD_SIZE)" = 8 ] || fail "task $r: WORLD_SIZE"
    [ "$(get $r SLURM_NTASKS)" = 8 ] || fail "task $r: SLURM_NTASKS"
    [ "$(get $r LOCAL_WORLD_SIZE)" = 4 ] || fail "task $r: LOCAL_WORLD_SIZE"
    [ "$(get $r LOCAL_RANK)" = $((r % 4)) ] || fail "task $r: LOCAL_RANK"
    [ "$(get $r SLURM_LOCALID)" = $((r % 4)) ] || fail "task $r: SLURM_LOCALID"
    [ "$(get $r NODE_RANK)" = $((r / 4)) ] || fail "task $r: NODE_RANK"
    [ "$(get $r GROUP_RANK)" = $((r / 4)) ] || fail "task $r: GROUP_RANK"
    [ "$(get $r SLURM_JOB_ID)" = "$id" ] || fail "task $r: SLURM_JOB_ID"
    # the node's NCCL setting (agent --task-env) reached the task
    h=$(get $r CORRAL_NODE)
    [ "$(get $r NCCL_SOCKET_IFNAME)" = "$TAG-p${h#host}" ] || fail "task $r: NCCL_SOCKET_IFNAME"
done
# Tasks 0-3 share a node, 4-7 the other; the list names both in rank order.
[ "$(get 0 CORRAL_NODE)" = "$(get 3 CORRAL_NODE)" ] || fail "ranks 0 and 3 on different nodes"
[ "$(get 0 CORRAL_NODE)" != "$(get 4 CORRAL_NODE)" ] || fail "ranks 0 and 4 on one node"
[ "$(get 0 SLURM_NODELIST)" = "$(get 0 CORRAL_NODE),$(get 4 CORRAL_NODE)" ] ||
    fail "SLURM_NODELIST $(get 0 SLURM_NODELIST)"
# The master is the rank-0 node, and that node really has that address.
master_host=$(get 0 CORRAL_NODE)
ip netns exec "$TAG-${master_host#host}" ip -4 -o addr show | grep -q "inet $m0/" ||
    fail "rank 0 ($master_host) does not own $m0"
# corral logs: one task (on the second node), and every task prefixed.
"$CORRAL" logs "$id" --rank 6 | grep -qx "hello from rank 6" || fail "logs --rank 6: $("$CORRAL" logs "$id" --rank 6)"
all=$("$CORRAL" logs "$id" --all)
[ "$(echo "$all" | grep -c '^[0-7]: hello from rank [0-7]$')" = 8 ] || fail "logs --all: $all"
echo "$all" | grep -qx "5: hello from rank 5" || fail "logs --all prefixes: $all"

# A launcher (torchrun by name) runs once per node and reads PET_*.
mkdir -p "$DIR/bin"
cat >"$DIR/bin/torchrun" <<'SH'
#!/bin/sh
env | grep -E '^(PET_|CORRAL_NODE=|RANK=)' > "$1/launch-$CORRAL_NODE.env"
SH
chmod +x "$DIR/bin/torchrun"
out=$("$CORRAL" submit -n launch --nodes 2 --gpus 8 --kind pretrain --gpu-type "A100 80GB SXM" \
    -- "$DIR/bin/torchrun" "$DIR")
lid=$(echo "$out" | grep -o '[0-9][0-9]*' | head -1)
ldone() { "$CORRAL" show "$lid" | grep -q 'State: *completed'; }
wait_for 60 ldone || fail "launcher job $lid did not complete: $("$CORRAL" show "$lid")"
lget() { grep "^$2=" "$DIR/launch-$1.env" | cut -d= -f2-; }
for h in host0 host1; do
    [ "$(lget $h PET_NNODES)" = 2 ] || fail "$h PET_NNODES"
    [ "$(lget $h PET_NPROC_PER_NODE)" = 4 ] || fail "$h PET_NPROC_PER_NODE"
    [ "$(lget $h PET_MASTER_ADDR)" = "$(lget host0 PET_MASTER_ADDR)" ] || fail "PET_MASTER_ADDR differs"
    [ "$(lget $h PET_MASTER_PORT)" = "$(lget host0 PET_MASTER_PORT)" ] || fail "PET_MASTER_PORT differs"
done
[ $(($(lget host0 PET_NODE_RANK) + $(lget host1 PET_NODE_RANK))) -eq 1 ] || fail "PET_NODE_RANKs"
[ -n "$(lget host0 PET_MASTER_PORT)" ] && [ "$(lget host0 PET_MASTER_PORT)" -gt 0 ] || fail "PET_MASTER_PORT"

# One namespace reaches the other's agent over the bridge.
a0=$(grep -o 'listening on [0-9.:]*' "$DIR/agent-0.log" | head -1 | cut -d' ' -f3)
ip netns exec "$TAG-1" curl -sf "http://$a0/v1/health" >/dev/null ||
    fail "host1's namespace cannot reach host0's agent at $a0"
# The controller (root namespace) fetches a job's log from its agent.
id2=$("$CORRAL" submit -n hello --gpus 1 -- sh -c 'echo hello from $CORRAL_NODE' | grep -o '[0-9][0-9]*' | head -1)
done2() { "$CORRAL" show "$id2" | grep -q 'State: *completed'; }
wait_for 30 done2 || fail "job $id2 did not complete"
"$CORRAL" logs "$id2" | grep -q "hello from host" || fail "corral logs through the agent in its namespace"
echo "ok: 2x4 gang across two network namespaces ($m0:$p0 master), rendezvous of 8, launcher PET_*, logs by rank"
