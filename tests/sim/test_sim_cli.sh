#!/bin/sh
# test_sim_cli.sh - 'corral sim' end to end: every reader on the bundled
# traces with the invariant check on, byte-for-byte determinism, the JSON,
# CSV and HTML reports, and exit code 2 with file:line:field for bad input.
set -eu
BIN=${CORRAL_BIN:?}
SRC=${CORRAL_SRC:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Each reader, each policy, invariants checked after every event.
for p in fifo priority hetero las; do
    "$BIN" sim --check --policy $p "$SRC/data/traces/tiresias/60_job.csv" --gpus v100:32,k80:32 \
        >"$T/t.out" || fail "tiresias $p"
    grep -q "60 jobs, 60 finished" "$T/t.out" || fail "tiresias $p: not all finished"
    "$BIN" sim --check --policy $p "$SRC/data/traces/gavel/physical_cluster_small_test.trace" \
        >"$T/g.out" || fail "gavel $p"
    grep -q "20 jobs, 20 finished" "$T/g.out" || fail "gavel $p: not all finished"
done
# Cluster files (sched's format), MIG GPUs and node failures included.
"$BIN" sim --check --compare fifo,priority,hetero,las --mtbf 2h \
    --cluster "$SRC/data/clusters/hetero-small.cluster" "$SRC/data/traces/tiresias/60_job.csv" \
    >"$T/c.out" || { cat "$T/c.out"; fail "cluster file with failures"; }
grep -q "^finished  *60  *60  *60  *60$" "$T/c.out" || fail "cluster file: not all finished"
"$BIN" sim --check --policy hetero --cluster "$SRC/data/clusters/gavel-108.cluster" \
    "$SRC/data/traces/gavel/physical_cluster_max_min_fairness.trace" >"$T/c2.out" ||
    fail "gavel-108 cluster"
grep -q "96 jobs, 96 finished, 108 GPUs of 3 types" "$T/c2.out" || fail "gavel-108: not all finished"
cat >"$T/native.txt" <<'X'
# native format: one job per line
submit=0 gpus=4 duration=2h tenant=alice
submit=10m gpus=1 duration=30m tenant=bob type=k80
submit=20m gpus=8 duration=1h tenant=alice priority=5
X
"$BIN" sim --check --compare fifo,priority,hetero,las "$T/native.txt" --gpus v100:8,k80:8 \
    --mtbf 30d >"$T/n.out" || fail "native compare"
grep -q "^finished  *3  *3  *3  *3$" "$T/n.out" || { cat "$T/n.out"; fail "native compare rows"; }

# Exact times: 2 GPUs, strict FIFO. j0 holds both for 1h; j1 (30m) and j2
# (2h, arriving at 10m) start at 1h: JCTs 1h, 1h30m, 2h50m.
cat >"$T/exact.txt" <<'X'
submit=0 gpus=2 duration=1h
submit=0 gpus=1 duration=30m
submit=10m gpus=1 duration=2h
X
"$BIN" sim --check --policy fifo --gpus v100:2 --json "$T/exact.txt" >"$T/exact.json"
grep -q '"avg": 6400' "$T/exact.json" || { cat "$T/exact.json"; fail "exact: average JCT"; }
grep -q '"makespan_s": 10800' "$T/exact.json" || fail "exact: makespan"
grep -q '"p99": 10200' "$T/exact.json" || fail "exact: p99 JCT"
# Rates from a throughput table: 100 steps at 10/s on V100, 2/s on K80.
printf '{"v100": {"(%s, 1)": {"null": 10}}, "k80": {"(%s, 1)": {"null": 2}}}' "'A'" "'A'" \
    >"$T/tput.json"
printf 'submit=0 gpus=1 model=A steps=100 type=k80\n' >"$T/k80.txt"
printf 'submit=0 gpus=1 model=A steps=100 type=v100\n' >"$T/v100.txt"
"$BIN" sim --gpus v100:1,k80:1 --throughputs "$T/tput.json" --json "$T/k80.txt" |
    grep -q '"avg": 50.0,' || fail "k80 runtime from the table"
"$BIN" sim --gpus v100:1,k80:1 --throughputs "$T/tput.json" --json "$T/v100.txt" |
    grep -q '"avg": 10.0,' || fail "v100 runtime from the table"

# Runtimes from the performance model (GPU catalog): every job finishes,
# and hetero puts the 8-GPU fine-tune, alone in the cluster, on H100s.
cat >"$T/perf.txt" <<'X'
submit=0 gpus=8 kind=finetune params=7b tokens=200m method=lora tenant=ml
submit=30d gpus=4 kind=hpc flops=1e18 tenant=sci
X
"$BIN" sim --check --policy hetero --gpus h100:8,l4:8 --gpus-per-node 8 --csv "$T/perf.csv" \
    "$T/perf.txt" >"$T/perf.out" || fail "performance-model jobs"
grep -q "2 jobs, 2 finished" "$T/perf.out" || fail "performance-model jobs: not all finished"
grep -q "^hetero,0,0,ml,,8,.*,h100," "$T/perf.csv" || { cat "$T/perf.csv"; fail "fine-tune not on h100"; }

# A job that can never fit: the others finish, the report says why it did not.
printf 'submit=0 gpus=5000 duration=1h id=huge\nsubmit=0 gpus=1 duration=1h\n' >"$T/huge.txt"
"$BIN" sim --check "$T/huge.txt" >"$T/huge.out" || fail "unfinishable job"
grep -q "2 jobs, 1 finished" "$T/huge.out" || fail "unfinishable job: counts"
grep -q "job huge: needs 5000" "$T/huge.out" || { cat "$T/huge.out"; fail "unfinishable job: reason"; }

# The rounds policy: every job finishes, an unfinishable one is named, the
# same input gives the same bytes, and its flags are checked.
for f in "$SRC/data/traces/tiresias/60_job.csv" "$SRC/data/traces/gavel/physical_cluster_small_test.trace"; do
    "$BIN" sim --policy rounds "$f" --gpus v100:8,p100:8,k80:8 >"$T/r.out" || fail "rounds $f"
    grep -Eq "(60|20) jobs, \1 finished" "$T/r.out" || { cat "$T/r.out"; fail "rounds: not all finished"; }
done
"$BIN" sim --policy rounds "$T/huge.txt" >"$T/rh.out" || fail "rounds: unfinishable job"
grep -q "job huge: no GPU type" "$T/rh.out" || { cat "$T/rh.out"; fail "rounds: unfinishable reason"; }
"$BIN" sim --generate 300 --rate 5 --multi-gpu --seed 3 --compare las,rounds --switch 30s \
    --round 10m --json >"$T/r1.json"
"$BIN" sim --generate 300 --rate 5 --multi-gpu --seed 3 --compare las,rounds --switch 30s \
    --round 10m --json >"$T/r2.json"
cmp "$T/r1.json" "$T/r2.json" || fail "rounds: JSON differs between identical runs"
grep -q '"policy": *"rounds"' "$T/r1.json" || fail "rounds: not in the JSON"

# Batched cycles: every job still finishes, invariants hold.
"$BIN" sim --check --generate 300 --rate 6 --multi-gpu --interval 10m --compare fifo,las \
    >"$T/i.out" || fail "--interval"
grep -q "^finished  *300  *300$" "$T/i.out" || fail "--interval: not all finished"

# Same input and seed: the same bytes, for every output format.
run() {
    "$BIN" sim --generate 400 --rate 5 --multi-gpu --tenants 3 --seed 11 --mtbf 60d \
        --compare fifo,hetero,las --csv "$1.csv" --html "$1.html" >"$1.out"
}
run "$T/a"
run "$T/b"
cmp "$T/a.out" "$T/b.out" || fail "text report differs between identical runs"
cmp "$T/a.csv" "$T/b.csv" || fail "CSV differs between identical runs"
cmp "$T/a.html" "$T/b.html" || fail "HTML differs between identical runs"
"$BIN" sim --generate 400 --rate 5 --seed 11 --json >"$T/j1.json"
"$BIN" sim --generate 400 --rate 5 --seed 11 --json >"$T/j2.json"
cmp "$T/j1.json" "$T/j2.json" || fail "JSON differs between identical runs"
"$BIN" sim --generate 400 --rate 5 --seed 12 --json >"$T/j3.json"
cmp -s "$T/j1.json" "$T/j3.json" && fail "another seed gave the same JSON"

# Report contents.
[ "$(wc -l <"$T/a.csv")" -eq 1201 ] || fail "CSV: expected header + 3x400 rows"
head -1 "$T/a.csv" | grep -q "^policy,index,job,tenant,model,gpus,submit_s" || fail "CSV header"
grep -q "<svg" "$T/a.html" || fail "HTML without SVG"
[ "$(grep -c "<svg" "$T/a.html")" -eq 3 ] || fail "HTML: expected 3 plots"
for k in '"jct_s"' '"p99"' '"makespan_s"' '"utilisation"' '"fragmentation"' '"rho_avg"' \
    '"energy_kwh"' '"tenants"' '"types"'; do
    grep -q "$k" "$T/j1.json" || fail "JSON lacks $k"
done

# Bad input: exit 2 and a message naming file, line and field (or the flag).
expect2() {
    want=$1
    shift
    set +e
    "$BIN" sim "$@" >/dev/null 2>"$T/err"
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "exit $rc (want 2) for: $*"
    grep -q -- "$want" "$T/err" || { cat "$T/err"; fail "message lacks '$want' for: $*"; }
}
printf 'submit=0 gpus=1 duration=1h\nsubmit=0 gpus=-1 duration=1h\n' >"$T/bad.txt"
expect2 "bad.txt:2: field 'gpus'" "$T/bad.txt"
printf 'job_id,num_gpu,submit_time,duration\n1,1,0,10\n2,1,0,abc\n' >"$T/bad.csv"
expect2 "bad.csv:3: field 'duration'" "$T/bad.csv"
printf 'A\tcmd\tdir\t-n\t1\t10\t1\t1\t-1\t0\nA\tcmd\n' >"$T/bad.trace"
expect2 "bad.trace:2: expected 10 (or 7)" "$T/bad.trace"
expect2 "cannot open" "$T/missing.trace"
printf 'submit=0 gpus=1 kind=inference\n' >"$T/svc.txt"
expect2 "svc.txt:1: field 'kind'" "$T/svc.txt"
printf 'submit=0 gpus=1 kind=finetune params=7b\n' >"$T/notok.txt"
expect2 "notok.txt:1: field 'tokens': missing" "$T/notok.txt"
printf 'gpu-type v100\nnode a gpus=4xv100 bogus=1\n' >"$T/bad.cluster"
expect2 "bad.cluster: line 2: field bogus" --generate 3 --cluster "$T/bad.cluster"
expect2 "--policy" --generate 5 --policy nope
expect2 "--gpus" --generate 5 --gpus v100
expect2 "--window" --generate 5 --window 3:1
expect2 "--round" --generate 5 --policy rounds --round 0s
expect2 "--switch" --generate 5 --policy rounds --switch forever
expect2 "--mtbf" --generate 5 --compare las,rounds --mtbf 2h
expect2 "--rate" --generate 5 --rate -1
expect2 "unknown option" --generate 5 --frobnicate
printf 'submit=0 gpus=1 duration=1h type=h100\n' >"$T/typed.txt"
expect2 "type 'h100' is not in the cluster" "$T/typed.txt"
# --generate on a cluster whose types Gavel's table lacks: plain durations
"$BIN" sim --cluster "$CORRAL_SRC/data/clusters/hetero-small.cluster" --generate 20 >"$T/gen.txt" ||
    fail "--generate on hetero-small exits $?"
grep -q "20 finished" "$T/gen.txt" || { cat "$T/gen.txt"; fail "--generate: not all finished"; }
"$BIN" sim --generate 20 --throughputs none >"$T/gen2.txt" || fail "--throughputs none exits $?"
grep -q "20 finished" "$T/gen2.txt" || { cat "$T/gen2.txt"; fail "--throughputs none: not all finished"; }
# --inflate on files of our own in the Alibaba openb layout: two shareable
# GPUs, tasks of 0.6 GPU: one per GPU, 40% left unallocated under every
# share policy; with --gpu-only CPU-only pods and unknown models skipped;
# invariants on. Without it the CPU-only pod is kept (it takes CPU on n0).
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1024,2,A10\nc0,32000,1024,0,nan\n' \
    >"$T/nodes.csv"
H=name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
printf '%s\np0,1000,10,1,600,nan,LS,Running,0,10,0\np1,1000,10,0,0,,BE,Running,0,10,0\np2,1000,10,1,600,V100M32,LS,Running,0,10,0\n' \
    "$H" >"$T/pods.csv"
"$BIN" sim --inflate --check --gpu-only --openb-nodes "$T/nodes.csv" --openb-pods "$T/pods.csv" \
    --inflate-step 0.5 >"$T/inf.out" || { cat "$T/inf.out"; fail "inflate"; }
grep -q "1 GPU nodes, 2 GPUs.*1 GPU pods (100% fractional; 1 CPU-only and 1 of unknown models" \
    "$T/inf.out" || { cat "$T/inf.out"; fail "inflate: header"; }
grep -q "^ *100.0%  *40.00%  *40.00%  *40.00%$" "$T/inf.out" || { cat "$T/inf.out"; fail "inflate: 40%"; }
grep -q "# frag: 2 tasks placed, 2 dropped" "$T/inf.out" || fail "inflate: placed/dropped"
"$BIN" sim --inflate --gpu-only --openb-nodes "$T/nodes.csv" --openb-pods "$T/pods.csv" \
    --inflate-step 0.5 | cmp -s - "$T/inf.out" || fail "inflate: not deterministic"
"$BIN" sim --inflate --check --openb-nodes "$T/nodes.csv" --openb-pods "$T/pods.csv" \
    --inflate-step 0.5 >"$T/infh.out" || { cat "$T/infh.out"; fail "inflate (host)"; }
grep -q "0 CPU-only and 1 of unknown models skipped" "$T/infh.out" &&
    grep -q "^# CPU and host memory modelled where the files give them; 1 CPU-only pods kept" \
        "$T/infh.out" || { cat "$T/infh.out"; fail "inflate (host): header"; }
grep -q "^ *100.0%  *40.00%  *40.00%  *40.00%$" "$T/infh.out" ||
    { cat "$T/infh.out"; fail "inflate (host): 40%"; }
# CPU binds: 2 cores on the node, each pod asks 1.5: one GPU pod at a time
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,2000,1024,2,A10\n' >"$T/cpun.csv"
printf '%s\np0,1500,10,1,600,nan,LS,Running,0,10,0\n' "$H" >"$T/cpup.csv"
"$BIN" sim --inflate --check --openb-nodes "$T/cpun.csv" --openb-pods "$T/cpup.csv" \
    --inflate-step 0.5 >"$T/infc.out" || { cat "$T/infc.out"; fail "inflate (cpu)"; }
grep -q "^ *100.0%  *70.00%  *70.00%  *70.00%$" "$T/infc.out" ||
    { cat "$T/infc.out"; fail "inflate (cpu): one pod only"; }
# --inflate-window: a step is the mean over the arrivals near it (FGD's
# analysis). Four GPUs, 1-GPU tasks: at 100% arrived the point value is 0%;
# the window 0.6 holds the arrivals at 75%, 100%, 125% (25%, 0%, 0%).
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1024,4,A10\n' >"$T/winn.csv"
printf '%s\np0,1000,10,1,1000,nan,LS,Running,0,10,0\n' "$H" >"$T/winp.csv"
"$BIN" sim --inflate --check --openb-nodes "$T/winn.csv" --openb-pods "$T/winp.csv" \
    --inflate-step 1 >"$T/winpt.out" || { cat "$T/winpt.out"; fail "inflate (point)"; }
grep -q "^ *100.0%  *0.00%  *0.00%  *0.00%$" "$T/winpt.out" || { cat "$T/winpt.out"; fail "inflate: point 0%"; }
"$BIN" sim --inflate --check --openb-nodes "$T/winn.csv" --openb-pods "$T/winp.csv" \
    --inflate-step 1 --inflate-window 0.6 >"$T/win.out" || { cat "$T/win.out"; fail "inflate (window)"; }
grep -q "^ *100.0%  *8.33%  *8.33%  *8.33%$" "$T/win.out" || { cat "$T/win.out"; fail "inflate: window mean"; }
expect2 "--inflate-window 2: expected 0..1" --inflate --openb-nodes "$T/winn.csv" \
    --openb-pods "$T/winp.csv" --inflate-window 2
# --inflate-in-order: the pods as listed, each once (a 2-GPU then two 1-GPU
# pods on 4 GPUs: 50% at the first, 100% at the third); a step the list
# does not reach says n/a.
printf '%s\np0,1000,10,2,1000,nan,LS,Running,0,10,0\np1,1000,10,1,1000,nan,LS,Running,0,10,0\np2,1000,10,1,1000,nan,LS,Running,0,10,0\n' \
    "$H" >"$T/ordp.csv"
"$BIN" sim --inflate --check --inflate-in-order --openb-nodes "$T/winn.csv" \
    --openb-pods "$T/ordp.csv" --inflate-step 0.5 --inflate-to 1.5 >"$T/ord.out" ||
    { cat "$T/ord.out"; fail "inflate (in order)"; }
grep -q "^ *50.0%  *50.00%  *50.00%  *50.00%$" "$T/ord.out" &&
    grep -q "^ *100.0%  *0.00%  *0.00%  *0.00%$" "$T/ord.out" &&
    grep -q "^ *150.0%  *n/a  *n/a  *n/a$" "$T/ord.out" &&
    grep -q "# frag: 3 tasks placed, 0 dropped" "$T/ord.out" || { cat "$T/ord.out"; fail "inflate: in order"; }
printf '%s\np0,1000,10,x,600,nan,LS,Running,0,10,0\n' "$H" >"$T/badpod.csv"
expect2 "badpod.csv:2: field 'num_gpu'" --inflate --openb-nodes "$T/nodes.csv" --openb-pods "$T/badpod.csv"
printf '%s\np0,1000,10,2,600,nan,LS,Running,0,10,0\n' "$H" >"$T/badpod2.csv"
expect2 "badpod2.csv:2: field 'gpu_milli': a part of a GPU needs num_gpu 1" --inflate \
    --openb-nodes "$T/nodes.csv" --openb-pods "$T/badpod2.csv"
printf 'name,num_gpu\np0,1\n' >"$T/nomilli.csv"
expect2 "nomilli.csv:2: field 'gpu_milli': missing" --inflate --openb-nodes "$T/nodes.csv" \
    --openb-pods "$T/nomilli.csv"
printf 'sn,gpu,model\nn0,65,A10\n' >"$T/badnode.csv"
expect2 "badnode.csv:2: field 'gpu'" --inflate --openb-nodes "$T/badnode.csv" --openb-pods "$T/pods.csv"
expect2 "--share-policy" --inflate --openb-nodes "$T/nodes.csv" --openb-pods "$T/pods.csv" \
    --share-policy tightest
expect2 "needs --openb-nodes" --inflate --openb-pods "$T/pods.csv"
# Time-based replay of the openb files (not --inflate): pods arrive at
# creation_time and run until deletion_time; with half the nodes shareable
# the three fractional pods (0.6, 0.5, 0.4) share n1's two GPUs, the
# 2-GPU pod takes n0, and the whole pod waits for a GPU to empty (p1 ends
# at 600 s); a pod without times is skipped with a message.
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1024,2,A10\nn1,96000,1024,2,A10\n' >"$T/rn.csv"
printf '%s\np0,1,1,1,600,nan,LS,Running,100,1100,100\np1,1,1,1,500,nan,LS,Running,100,700,100\np2,1,1,1,400,A10,LS,Running,200,800,200\np3,1,1,2,0,nan,LS,Running,300,1300,300\np5,1,1,1,300,nan,LS,Running,nan,nan,nan\np6,1,1,1,1000,nan,LS,Running,400,500,450\n' \
    "$H" >"$T/rp.csv"
"$BIN" sim --openb-nodes "$T/rn.csv" --openb-pods "$T/rp.csv" --shared-nodes 0.5 --check \
    --csv "$T/rp.out.csv" >"$T/rp.out" 2>"$T/rp.err" || { cat "$T/rp.out" "$T/rp.err"; fail "openb replay"; }
grep -q "1 GPU pods without creation/deletion times skipped" "$T/rp.err" || fail "openb replay: untimed"
grep -q "sharing      3 fractional starts" "$T/rp.out" || { cat "$T/rp.out"; fail "openb replay: fractional"; }
grep -q "^fifo,4,p6,default,,1,300.000,600.000,650.000," "$T/rp.out.csv" ||
    { cat "$T/rp.out.csv"; fail "openb replay: the whole pod waits for a GPU"; }
grep -q "^fifo,2,p2,default,,1,100.000,100.000,700.000," "$T/rp.out.csv" ||
    { cat "$T/rp.out.csv"; fail "openb replay: the 0.4 pod shares at once"; }
expect2 "needs both --openb-nodes and --openb-pods" --openb-nodes "$T/rn.csv"
expect2 "no TRACE" --openb-nodes "$T/rn.csv" --openb-pods "$T/rp.csv" --generate 3
expect2 "--shared-nodes" --generate 3 --shared-nodes 0.5

# Dynamic MIG in the simulator: an A100 with two 3g.40gb and dynamic=on; a
# 1g.10gb job that fits no instance waits for an idle one to be rewritten
# and then --mig-reconfig (default 10 s) before it runs; fractional tasks on
# shareable L40S GPUs next to it.
cat >"$T/mig.cluster" <<'EOF2'
gpu-type a100 name="A100 80GB SXM" mem=80g mig=7/8
gpu-type l40s name=L40S mem=48g
node m0 gpus=1xa100 mig=all
gpu m0 0 layout=3g.40gb,3g.40gb dynamic=on
node s0 gpus=2xl40s share=all
EOF2
cat >"$T/mig.txt" <<'EOF2'
submit=0 gpus=1 mig=3g.40gb duration=1h id=a
submit=0 gpus=1 mig=3g.40gb duration=2h id=b
submit=10m gpus=1 mig=1g.10gb duration=30m id=c
submit=0 gpus=1 gpu_milli=300 duration=1h id=f1
submit=0 gpus=1 gpu_milli=800 duration=1h id=f2
submit=0 gpus=1 gpu_milli=300 duration=1h id=f3
EOF2
"$BIN" sim --cluster "$T/mig.cluster" "$T/mig.txt" --check --csv "$T/mig.csv" >"$T/mig.out" ||
    { cat "$T/mig.out"; fail "mig sim"; }
grep -q "3 fractional starts   3 MIG starts (1 repartitioned, 10 s waited" "$T/mig.out" ||
    { cat "$T/mig.out"; fail "mig sim: sharing line"; }
grep -q "^fifo,5,c,default,,1,600.000,3600.000,5410.000," "$T/mig.csv" ||
    { cat "$T/mig.csv"; fail "mig sim: c runs after a's instance is rewritten, +10 s"; }
"$BIN" sim --cluster "$T/mig.cluster" "$T/mig.txt" --mig-reconfig 2m --csv "$T/mig2.csv" >/dev/null
grep -q "^fifo,5,c,default,,1,600.000,3600.000,5520.000," "$T/mig2.csv" ||
    { cat "$T/mig2.csv"; fail "mig sim: --mig-reconfig 2m"; }
expect2 "--mig-reconfig" --cluster "$T/mig.cluster" "$T/mig.txt" --mig-reconfig soon
printf 'submit=0 gpus=2 gpu_milli=300 duration=1h\n' >"$T/badfrac.txt"
expect2 "badfrac.txt:1: field 'gpu_milli'" --cluster "$T/mig.cluster" "$T/badfrac.txt"
# --learn (issue 26): side by side without and with learning; its flags'
# bad values name the flag, a bad truth= names the field.
cat >"$T/learn.txt" <<'EOF3'
submit=0 gpus=1 kind=finetune params=8b tokens=20m method=lora
submit=1h gpus=1 kind=finetune params=8b tokens=20m method=lora
submit=2h gpus=1 kind=finetune params=8b tokens=20m method=lora truth=1.3
EOF3
"$BIN" sim --check "$T/learn.txt" --gpus h100:8 --gpus-per-node 8 --truth-spread 0.4 --learn \
    >"$T/learn.out" || { cat "$T/learn.out"; fail "sim --learn"; }
grep -q "^metric  *fifo  *fifo+learn$" "$T/learn.out" || { cat "$T/learn.out"; fail "--learn columns"; }
grep -q "^advisor err first" "$T/learn.out" || { cat "$T/learn.out"; fail "--learn error rows"; }
expect2 "--truth-spread" "$T/learn.txt" --gpus h100:8 --truth-spread 2
expect2 "--metric-noise" "$T/learn.txt" --gpus h100:8 --metric-noise lots
expect2 "--learn" "$T/learn.txt" --gpus h100:8 --learn --policy rounds
printf 'submit=0 gpus=1 kind=finetune params=8b tokens=20m truth=-1\n' >"$T/badtruth.txt"
expect2 "badtruth.txt:1: field 'truth'" "$T/badtruth.txt" --gpus h100:8
# --cloud (issue 31): a public trace on a static cluster, with a cloud
# pool, and with always-on cloud GPUs of the pool's spend, side by side;
# the pool boots, buys GPU-hours, and cuts the queueing.
"$BIN" sim "$SRC/data/traces/gavel/msr_seed0_2869ce.trace" --gpus v100:24,p100:32,k80:32 \
    --cloud v100:16 >"$T/cloud.out" || { cat "$T/cloud.out"; fail "sim --cloud"; }
python3 - "$T/cloud.out" <<'PY' || { cat "$T/cloud.out"; fail "--cloud table"; }
import sys
rows = {}
for line in open(sys.argv[1]):
    for name in ("static + cloud pool", "static + same budget", "static"):
        if line.startswith(name + " "):
            f = line[len(name):].split()
            rows.setdefault(name, f)
            break
s, p, b = rows["static"], rows["static + cloud pool"], rows["static + same budget"]
# columns after GPUs: finished cost cloud_GPUh boots avg_JCT_h avg_q_h p95_q_h span_h
assert s[-8] == p[-8] == "533/533", (s, p)
assert float(s[-6]) == 0 and int(s[-5]) == 0, s
assert float(p[-6]) > 0 and int(p[-5]) > 0, p
assert float(p[-3]) < float(s[-3]) and float(p[-4]) < float(s[-4]), (s, p)
assert int(b[-5]) == 0, b
PY
expect2 "--cloud" "$SRC/data/traces/gavel/msr_seed0_2869ce.trace" --cloud v100
expect2 "--cloud" "$SRC/data/traces/gavel/msr_seed0_2869ce.trace" --cloud v100:4 --compare fifo,las
expect2 "--cloud-cost" "$SRC/data/traces/gavel/msr_seed0_2869ce.trace" --cloud-cost 2
expect2 "--cloud-idle" "$SRC/data/traces/gavel/msr_seed0_2869ce.trace" --cloud v100:4 --cloud-idle 0
echo "sim-cli: ok"
