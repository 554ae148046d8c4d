#!/usr/bin/env bash
# demo-cluster.sh - a whole Corral cluster on this machine, for a few minutes.
#
# One controller and ten agents with simulated GPUs of a realistic mixed
# fleet (2x8 H100 SXM, 2x8 A100 80GB SXM, 4x4 L40S, 2x4 A30 split by MIG),
# then a mix of real short processes across the workload kinds: where each
# one went and why, what waits and why, a GPU that overheats and leaves the
# pool, and `corral top`. Two tenants run as their own Unix users and a job
# that reaches for another job's GPU device node is refused (cgroup device
# filter; docs/isolation.md). It ends by itself (DEMO_SECONDS, default 60) or on
# Ctrl-C, and leaves nothing running and nothing behind.
#
#   usage: scripts/demo-cluster.sh [path/to/corral]
#   env:   DEMO_SECONDS=60  DEMO_PORT=N (default: a free one)
#          DEMO_KEEP=1: at the end, leave the cluster and its web dashboard
#          up until Ctrl-C (and keep the state dir)
set -euo pipefail

CORRAL=${1:-build/corral}
CORRAL=$(cd "$(dirname "$CORRAL")" && pwd)/$(basename "$CORRAL")
SECONDS_TOTAL=${DEMO_SECONDS:-60}
PORT=${DEMO_PORT:-$((20000 + $$ % 20000))}
# Jobs of the two tenants run as uids 64001/64002: their checkpoint dirs and
# the simulated GPU device nodes under DIR must be reachable by them.
DIR=$(mktemp -d "${TMPDIR:-/var/tmp}/corral-demo-XXXXXX")
chmod 755 "$DIR"
cat >"$DIR/controller.json" <<EOF
{"run_as": {"unmapped": "agent",
            "tenants": {"team-a": {"uid": 64001, "gid": 64001},
                        "team-b": {"uid": 64002, "gid": 64002}}},
 "checkpoint_root": "$DIR/ckpt"}
EOF
PIDS=()
# The metrics token: the agents and the controller serve the job, tenant and
# service labels of their series to a scrape that shows it (Prometheus:
# deploy/prometheus/prometheus.yml), and counts only to others.
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/metrics.token")

cleanup() {
    # Stop everything first, before printing: stdout may be a closed pipe.
    trap - EXIT INT TERM
    trap '' PIPE
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    # A job killed at the last moment may still be closing its files.
    if [ -z "${DEMO_KEEP:-}" ]; then
        rm -rf "$DIR" 2>/dev/null || { sleep 1; rm -rf "$DIR" 2>/dev/null || true; }
    fi
    {
        echo
        echo "== stopped: the agents (their jobs got SIGTERM) and the controller"
        [ -n "${DEMO_KEEP:-}" ] && echo "state kept in $DIR"
    } 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }
run() {
    printf '\n$ corral %s\n' "$*"
    "$CORRAL" "$@" || true
}
wait_for() { # wait_for SECONDS COMMAND...: poll until the command succeeds
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.2
    done
}

# The controller, on the first port that is free.
for try in 1 2 3 4 5; do
    export CORRAL_SERVER=http://127.0.0.1:$PORT
    "$CORRAL" controller --config "$DIR/controller.json" --listen "127.0.0.1:$PORT" --state-dir "$DIR/ctl" \
        --heartbeat 1 --lost-after 10 --metrics-token-file "$DIR/metrics.token" >"$DIR/controller.log" 2>&1 &
    ctl=$!
    if wait_for 20 curl -sf "$CORRAL_SERVER/v1/health"; then
        PIDS+=($ctl)
        break
    fi
    kill "$ctl" 2>/dev/null || true
    wait "$ctl" 2>/dev/null || true
    [ "$try" -eq 5 ] && { echo "controller did not start: see $DIR/controller.log"; exit 1; }
    PORT=$((PORT + 1 + RANDOM % 100))
done
say "controller on $CORRAL_SERVER (state in $DIR)"
wait_for 20 test -s "$DIR/ctl/admin.token"
export CORRAL_TOKEN=$(cat "$DIR/ctl/admin.token")
echo "   web dashboard: $CORRAL_SERVER/ui  (log in with the token in $DIR/ctl/admin.token)"
# Agents join with a bootstrap token (single-use ones on a real cluster,
# docs/security.md; here one for the demo's nodes, valid for an hour).
(umask 077 && "$CORRAL" admin bootstrap-token create --uses 20 --ttl 1h --name demo \
    >"$DIR/ctl/demo.bt" 2>"$DIR/ctl/demo.bt.log") ||
    { echo "cannot create a bootstrap token: $(cat "$DIR/ctl/demo.bt.log")"; exit 1; }

agent() { # agent NODE RACK GPUS [agent flags...]
    mkdir -p "$DIR/$1"
    local node=$1 rack=$2 gpus=$3
    shift 3
    "$CORRAL" agent --server "$CORRAL_SERVER" --join-token "$DIR/ctl/demo.bt" \
        --node "$node" --rack "$rack" --gpus "sim:$gpus" --listen 127.0.0.1:0 \
        --state-dir "$DIR/$node" --faults "$DIR/$node/faults" --kill-on-exit \
        --metrics-token-file "$DIR/metrics.token" "$@" \
        >"$DIR/agent-$node.log" 2>&1 &
    PIDS+=($!)
}
say "10 agents: 2x8 H100 SXM, 2x8 A100 80GB SXM, 4x4 L40S (one GPU shareable), 2x4 A30 (MIG)"
agent h100-0 r1 "8xH100 SXM"
agent h100-1 r1 "8xH100 SXM"
agent a100-0 r2 "8xA100 80GB SXM"
agent a100-1 r2 "8xA100 80GB SXM"
for i in 0 1 2; do agent "l40s-$i" r3 "4xL40S"; done
agent l40s-3 r3 "4xL40S" --share-gpus 0 # GPU 0 takes fractional tasks
agent a30-0 r4 "4xA30,mig=1g.6gb:4"
agent a30-1 r4 "4xA30,mig=2g.12gb:2"
nodes_up() { [ "$("$CORRAL" nodes 2>/dev/null | grep -c ' up ')" -ge 10 ]; }
wait_for 30 nodes_up || echo "(not every agent registered yet)"
run nodes

say "two tenants share the L40S nodes: team-a runs as uid 64001, team-b as 64002"
"$CORRAL" tenants create team-a >/dev/null
"$CORRAL" tenants create team-b >/dev/null
# Each job tries to open every GPU device node of its node (placeholders of
# major 195 made with mknod): its own is allowed by the cgroup device filter
# (and then fails only for want of a driver: ENXIO), the others are refused.
probe='echo "uid $(id -u) on $CORRAL_NODE"; for g in 0 1 2 3; do m=$( (exec 3<"$DEMO_DIR/$CORRAL_NODE.dev/nvidia$g") 2>&1); case "$m" in *"not permitted"*) echo "  /dev/nvidia$g: REFUSED (Operation not permitted: not this job'"'"'s GPU)";; *) echo "  /dev/nvidia$g: allowed (its own GPU; ENXIO: no driver behind the placeholder)";; esac; done'
pa=$("$CORRAL" submit --tenant team-a -n probe-a --gpu-type L40S -e DEMO_DIR="$DIR" -- sh -c "$probe" | grep -o '[0-9]*' | head -1)
pb=$("$CORRAL" submit --tenant team-b -n probe-b --gpu-type L40S -e DEMO_DIR="$DIR" -- sh -c "$probe" | grep -o '[0-9]*' | head -1)
done_probe() { "$CORRAL" show "$1" | grep -qiE 'state: *(completed|failed)'; }
wait_for 20 done_probe "$pa" && run logs "$pa"
wait_for 20 done_probe "$pb" && run logs "$pb"
run nodes l40s-0

# One job in a container (podman; docs/containers.md), when this machine can
# run one: an image built here from busybox-static, no registry.
if [ "$(id -u)" = 0 ] && command -v podman >/dev/null 2>&1 && [ -x /bin/busybox ]; then
    say "a job in a container: the image holds its software, it gets only its GPU"
    mkdir -p "$DIR/rootfs/bin"
    cp /bin/busybox "$DIR/rootfs/bin/busybox"
    for a in sh id ls grep tr echo; do ln -s busybox "$DIR/rootfs/bin/$a"; done
    tar -C "$DIR/rootfs" -cf "$DIR/bb.tar" . && rm -rf "$DIR/rootfs"
    if podman import -q "$DIR/bb.tar" localhost/corral-demo:bb >/dev/null 2>&1; then
        ci=$("$CORRAL" submit --tenant team-a -n in-a-container --gpu-type L40S \
            --image localhost/corral-demo:bb -- \
            sh -c 'echo "in image localhost/corral-demo:bb as uid $(id -u); GPU nodes: $(ls /dev | grep nvidia | tr "\n" " ")"' |
            grep -o '[0-9]*' | head -1)
        wait_for 30 done_probe "$ci" && run logs "$ci"
        "$CORRAL" show "$ci" | grep -i "image pull" || true
    else
        echo "(podman cannot import an image here: skipped)"
    fi
fi

say "three inference replicas share one L40S: --gpu-fraction 0.33 each (l40s-3 GPU 0 is shareable)"
replica='echo "replica $CORRAL_JOB_ID on $CORRAL_NODE GPU $CUDA_VISIBLE_DEVICES: $CORRAL_GPU_FRACTION of it ($CORRAL_GPU_SHARING, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)"; exec sleep 600'
run services create chat-small --gpu-type L40S --gpu-fraction 0.33 --min 3 --max 3 --pack -- sh -c "$replica"
three_up() { [ "$("$CORRAL" jobs --state running 2>/dev/null | grep -c 'chat-small')" -ge 3 ]; }
wait_for 20 three_up || echo "(not all three replicas are running yet)"
run nodes l40s-3
r1=$("$CORRAL" jobs --state running 2>/dev/null | awk '/chat-small/ {print $1; exit}')
if [ -n "$r1" ]; then
    wait_for 10 sh -c "\"$CORRAL\" logs $r1 | grep -q replica" && run logs "$r1"
    "$CORRAL" show "$r1" | grep -E "started|shared" | sed 's/^ */   /' || true
fi
"$CORRAL" services delete chat-small >/dev/null 2>&1 || true

# The jobs are real processes: they print what Corral gave them and work a
# little (a busy loop drives the simulated GPU's utilisation and power).
work='echo "job $CORRAL_JOB_ID on $CORRAL_NODE GPUs=$CUDA_VISIBLE_DEVICES rank=${RANK:-0}/${WORLD_SIZE:-1} master=${MASTER_ADDR:-}:${MASTER_PORT:-}"; end=$(( $(date +%s) + DUR )); while [ $(date +%s) -lt $end ]; do :; done'
job() { # job SECONDS NAME [submit options...]
    local dur=$1 name=$2
    shift 2
    "$CORRAL" submit -n "$name" "$@" -- sh -c "${work//DUR/$dur}" | sed "s/^/  $name: /"
}

say "submitting a mix of workloads (gpu type 'auto': the advisor picks)"
job 25 pretrain-13b --kind pretrain --params 13b --tokens 2e11 --nodes 2 --gpus 16 --precision bf16
job 20 finetune-lora --kind finetune --params 7b --method lora --tokens 1e8 --gpus 1
job 20 finetune-full --kind finetune --params 13b --method full --tokens 1e9 --gpus 4
job 20 inference-70b --kind inference --params 70b --gpus 4
job 15 render --kind visual --gpus 1
job 15 cfd-fp64 --kind hpc --gpus 4
job 8 sweep --kind batch --mig 1g.6gb --array 10
job 8 preprocess --kind batch --gpu-type L40S --gpus 1 --array 6
job 20 chat-405b --kind inference --params 405b --gpus 2
job 20 pretrain-too-big --kind pretrain --params 70b --tokens 2e12 --gpu-type "H100 SXM" --nodes 2 --gpus 16

sleep 3
say "where each job went (and what waits, with the reason)"
run jobs
# the 2-node pre-training gang (not the first id: the tenant probes and the
# service replicas come before it)
first=$("$CORRAL" jobs --all 2>/dev/null | awk '$2 == "pretrain-13b" {print $1; exit}')
[ -n "$first" ] && run show "$first"
last=$("$CORRAL" jobs --state pending 2>/dev/null | awk 'NR==2 {print $1}')
[ -n "$last" ] && run show "$last"

say "each GPU's job and tenant, as the metrics token's scrape sees them (Prometheus: deploy/prometheus/prometheus.yml)"
# an agent's address from the discovery Prometheus reads (GET /v1/prometheus/targets)
h100=$(curl -s -H "Authorization: Bearer $CORRAL_TOKEN" "$CORRAL_SERVER/v1/prometheus/targets" |
    python3 -c 'import json,sys; print(next((t for g in json.load(sys.stdin) if g["labels"].get("node") == "h100-0" for t in g["targets"]), ""))' 2>/dev/null || true)
if [ -n "$h100" ]; then
    echo
    echo "\$ curl -H 'Authorization: Bearer <metrics token>' http://$h100/metrics | grep corral_gpu_allocation    (3 of them)"
    curl -s -H "Authorization: Bearer $(cat "$DIR/metrics.token")" "http://$h100/metrics" |
        grep '^corral_gpu_allocation{' | head -3 | sed 's/UUID="GPU-[^"]*"/UUID="GPU-..."/'
fi

say "a GPU overheats: l40s-1 GPU 2 reads 95 C and leaves the pool"
echo "2 temp 95" >"$DIR/l40s-1/faults"
sleep 3
run nodes l40s-1
say "gang job logs: each rank got the torchrun variables"
if [ -n "$first" ]; then
    echo
    echo "\$ corral logs $first --all    (ranks 0, 7, 8 and 15 of 16; each rank's 8 GPU UUIDs cut)"
    "$CORRAL" logs "$first" --all | grep -E '^(0|7|8|15): ' |
        sed 's/GPUs=GPU-[^ ]*/GPUs=GPU-...(8)/'
fi

say "corral top"
run top --once

end=$((SECONDS + SECONDS_TOTAL - 15))
while [ "$SECONDS" -lt "$end" ]; do
    active=$("$CORRAL" jobs 2>/dev/null | tail -n +2 | grep -c . || true)
    [ "$active" -eq 0 ] && break
    sleep 2
done
rm -f "$DIR/l40s-1/faults"
say "the GPU cooled down and came back; the queue now"
sleep 2
run nodes l40s-1
run jobs --all --limit 40
run top --once

if [ -n "${DEMO_KEEP:-}" ]; then
    say "the cluster stays up: open the dashboard, Ctrl-C to stop"
    echo "   $CORRAL_SERVER/ui"
    echo "   token: $CORRAL_TOKEN"
    echo "   (the token is also in $DIR/ctl/admin.token; it goes in the login form, never in a URL)"
    job 600 dashboard-tour --kind batch --gpus 2 --gpu-type "H100 SXM"
    while :; do sleep 1; done
fi
