#!/usr/bin/env bash
# test_partition.sh - the node lease across a real network partition: the
# controller in the root network namespace, two agents each in its own
# (own address, veth to a bridge). A checkpointing job writes a line with
# its copy's instance and the wall-clock time every 0.2 s into a file of
# its own copy ($DIR/hb/JOB.NODE.INSTANCE). The node it runs on is cut off
# (`ip link set down` on its veth, or `tc netem loss 100%` in its
# namespace, alternately); its agent's lease runs out and stops the copy,
# the controller requeues the job on the other node only after lease +
# grace + margin. Then the partition heals and the next one cuts the node
# the job moved to. Pass condition, from the files alone: sorted by first
# write, every copy's last write comes before the next copy's first write
# (never two copies at once), and there is one copy per partition plus the
# first (the job was neither lost nor started twice). A job marked
# --keep-running-on-partition on the first node keeps one copy that wrote
# through every partition of its node and stays running.
#
#   PARTITIONS=N (default 3; bench/agent/bench_partition.sh runs 20)
#
# Needs root and iproute2; skips (77) otherwise. Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_netns_require cp
PARTITIONS=${PARTITIONS:-3}
cr_setup partition
cleanup_extra() { cr_netns_down 2; }
fail_context() {
    for f in "$DIR"/hb/*; do
        [ -f "$f" ] || continue
        echo "--- $f: $(wc -l <"$f") lines, first $(head -1 "$f"), last $(tail -1 "$f")"
    done
    "$CORRAL" nodes || true
}

cr_netns_hosts 2
# netem where the kernel has it (else every partition is a link down)
NETEM=0
if ip netns exec "$TAG-0" tc qdisc add dev "$TAG-p0" root netem loss 100% 2>/dev/null; then
    ip netns exec "$TAG-0" tc qdisc del dev "$TAG-p0" root
    NETEM=1
fi

# Lease 3 s (lost_after_s), grace 1 s: a lost node's jobs are requeued
# 3 + 1 + 5 (margin) s after it was last heard.
printf '{"checkpoint_root": "%s/ckpt", "grace_s": 1}\n' "$DIR" >"$CKPT_CONF"
PORT=$((20000 + $$ % 20000))
export CORRAL_SERVER=http://$NET.1:$PORT
cr_start_controller "$DIR/ctl" --allow-legacy-join --listen "$NET.1:$PORT" --lost-after 3
wait_for 30 curl -sf "$CORRAL_SERVER/v1/health" || fail "controller did not start"
for i in 0 1; do
    CR_EXEC="ip netns exec $TAG-$i" cr_start_agent "host$i" "$DIR/host$i" "$DIR/agent-$i.log" \
        --gpus "sim:2xA100 80GB SXM" --listen "$NET.$((10 + i)):0"
done
nodes_up() { [ "$("$CORRAL" nodes | grep -c ' up ')" -eq 2 ]; }
wait_for 60 nodes_up || fail "agents did not register from their namespaces"

mkdir -p "$DIR/hb"
cat >"$DIR/beat.py" <<'PY'
import os, signal, sys, time, uuid
d, tag = sys.argv[1], sys.argv[2]
inst = uuid.uuid4().hex[:12]
path = f"{d}/{tag}.{os.environ['CORRAL_NODE']}.{inst}"
# A checkpointing job: on SIGTERM it writes its checkpoint line and ends.
def term(*_):
    with open(path, "a") as f:
        f.write(f"{inst} {time.time_ns()} checkpoint\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
while True:
    with open(path, "a") as f:
        f.write(f"{inst} {time.time_ns()} {os.getpid()}\n")
    time.sleep(0.2)
PY
submit() { "$CORRAL" submit "$@" | grep -o '[0-9][0-9]*' | head -1; }
keep=$(submit -n keep --gpus 1 --nodelist host0 --keep-running-on-partition \
    -- python3 "$DIR/beat.py" "$DIR/hb" keep)
job=$(submit -n ckpt --gpus 1 -- python3 "$DIR/beat.py" "$DIR/hb" job)
[ -n "$keep" ] && [ -n "$job" ] || fail "submit"
copies() { ls "$DIR/hb" | grep -c "^$1\." || true; }
more_copies() { [ "$(copies "$1")" -gt "$2" ]; } # more_copies TAG N: more than N copies
wait_for 60 more_copies job 0 || fail "job $job did not start"
wait_for 60 more_copies keep 0 || fail "job $keep did not start"

# The node the job's newest copy runs on.
current_node() { ls -t "$DIR/hb" | grep '^job\.' | head -1 | cut -d. -f2; }
cut_off() { # cut_off I N: partition host I, the Nth time
    if [ "$NETEM" = 1 ] && [ $(($2 % 2)) = 1 ]; then
        ip netns exec "$TAG-$1" tc qdisc add dev "$TAG-p$1" root netem loss 100%
    else
        ip link set "$TAG-v$1" down
    fi
}
heal() {
    ip netns exec "$TAG-$1" tc qdisc del dev "$TAG-p$1" root 2>/dev/null || true
    ip link set "$TAG-v$1" master "$TAG-br" up
}
for n in $(seq 1 "$PARTITIONS"); do
    before=$(copies job)
    host=$(current_node)
    i=${host#host}
    cut_off "$i" "$n"
    # The job's next copy starts on the other node (no wall-clock bound
    # passes or fails the test: the files below do).
    wait_for 90 more_copies job "$before" ||
        fail "partition $n of $host: the job was not requeued"
    wait_for 30 grep -q "node lease expired" "$DIR/agent-$i.log" ||
        fail "partition $n: $host's agent did not say its lease expired"
    heal "$i"
    wait_for 60 nodes_up || fail "partition $n: $host did not come back"
    [ "$(current_node)" != "$host" ] || fail "partition $n: the new copy is on $host again"
done

# Every copy stopped before the next started, judged from their own writes.
python3 - "$DIR/hb" "$((PARTITIONS + 1))" <<'PY' || fail "two copies of the job at once"
import os, sys
d, want = sys.argv[1], int(sys.argv[2])
copies = []
for name in os.listdir(d):
    if not name.startswith("job."):
        continue
    ts = [int(l.split()[1]) for l in open(os.path.join(d, name)) if len(l.split()) >= 2]
    copies.append((min(ts), max(ts), name))
copies.sort()
for (f0, l0, a), (f1, l1, b) in zip(copies, copies[1:]):
    if l0 >= f1:
        print(f"overlap: {a} wrote until {l0}, {b} began at {f1} ({(l0 - f1) / 1e9:.2f}s)")
        sys.exit(1)
    print(f"{a} -> {b}: gap {(f1 - l0) / 1e9:.2f}s")
if len(copies) != want:
    print(f"{len(copies)} copies, want {want}")
    sys.exit(1)
PY
# The acknowledged job lives on (one copy running, requeued without a retry).
"$CORRAL" show "$job" | grep -q 'State: *running' || fail "job $job: $("$CORRAL" show "$job")"
# The kept job: one copy, which wrote during each partition and after.
[ "$(copies keep)" = 1 ] || fail "the keep-running job has $(copies keep) copies"
"$CORRAL" show "$keep" | grep -q 'State: *running' || fail "job $keep: $("$CORRAL" show "$keep")"
kf=$(ls "$DIR/hb" | grep '^keep\.')
k0=$(wc -l <"$DIR/hb/$kf")
grew() { [ "$(wc -l <"$DIR/hb/$kf")" -gt "$k0" ]; }
wait_for 10 grew || fail "the keep-running job stopped"
echo "ok: $PARTITIONS partitions (netem=$NETEM), never two copies of job $job; job $keep kept running"
