#!/usr/bin/env bash
# Node pools with the local provider (issue 31; docs/pools.md). One case a run:
#   scale   a job asking for a type no node has: the pool creates a node
#           (deploy/providers/local starts an agent with the bootstrap
#           token), the job runs on it, the node is deleted after the idle
#           time and the provider lists nothing left
#   refuse  a provider that refuses (capacity): the job stays pending with
#           the refusal in its reason, the pool says so, nothing is left
#   thrash  jobs arriving at the idle time's boundary: at most 2 creates
#           (one regret, then the idle time doubles) and every job runs
#   gang    a 2-node gang job: two nodes created, the job runs across them
#   max     3 jobs, max_nodes 2: two nodes, the third waits with the reason
#   restart the controller restarts with a pool node running: adopted from
#           the provider's list, deleted after the idle time
#   vanish  a node the provider no longer lists is forgotten
#   bad     a provider that exits non-zero, prints no JSON or hangs: an
#           event each, backoff, nothing leaked, the controller answers
#   reclaim a spot node's reclaim notice mid-job: the job gets its checkpoint
#           signal, is requeued without using a retry and resumes from its
#           checkpoint on a replacement node; the reclaimed node goes
#   power   power saving: an idle static node (started through the local
#           provider) is suspended after suspend_s (its agent stops), a job
#           it fits resumes it (no cloud node is booted for it), runs there,
#           the node is suspended again; a failed resume is an event, backs
#           off, and the job runs once the provider behaves
#   netns   the provider's nodes each in a network namespace of its own with
#           its own address on a bridge (root): the job runs there, the
#           namespace goes with the node
#   burst   the hybrid policy: a tenant whose locked constraint keeps it
#           on-prem gets site=onprem on its jobs, is refused site=cloud and
#           boots nothing; a tenant with a burst budget boots a node, its
#           cloud cost shows in corral usage (the tenants' sum is the pool's
#           cost) and, over its budget, its next job boots nothing and says
#           why; a tenant with a budget of 0 never bursts
set -euo pipefail
. "$(dirname "$0")/lib.sh"
CASE=${1:-scale}
cr_setup "pools-$CASE"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PROVIDER=$SRC/deploy/providers/local
PDIR=$DIR/provider
mkdir -p "$PDIR"
command -v python3 >/dev/null || { echo "SKIP: python3"; exit 77; }

IDLE=${IDLE:-3}
LIFE=${LIFE:-0}
pool_conf() { # pool_conf EXTRA-PROVIDER-CONFIG
    cat >"$CKPT_CONF" <<JSON
{"checkpoint_root": "$DIR/ckpt",
 "pools": [{"name": "burst", "gpu_type": "L4", "gpus_per_node": 1, "min_nodes": 0,
            "max_nodes": 2, "cost_per_hour": 0.8, "boot_s": 1, "boot_timeout_s": 30,
            "idle_s": $IDLE, "min_lifetime_s": $LIFE, "pending_s": 0, "provider_timeout_s": 5,
            "refusal_retry_s": 2, "labels": {"site": "cloud", "spot": "true"},
            "provider": "$PROVIDER",
            "provider_config": {"dir": "$PDIR", "corral": "$CORRAL"$1}},
           {"name": "onprem", "gpu_type": "L40S", "labels": {"site": "onprem"},
            "nodes": ["static*"]}]}
JSON
}
cleanup_extra() { # whatever the provider still runs
    local f
    for f in "$PDIR"/*/pid "$DIR"/power/*/pid; do
        [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null || true
    done
    sleep 0.5
    for f in "$PDIR"/*/pid "$DIR"/power/*/pid; do
        [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true
    done
}
fail_context() {
    c pools --events 64 || true
    for f in "$PDIR"/*/agent.log "$PDIR"/.deleted/*/agent.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }
    done
}
pools_json() { c pools --json; }
pool_field() { pools_json | python3 -c "import json,sys; p=json.load(sys.stdin)['items'][0]; print($1)"; }
job_field() { c show --json "$1" | python3 -c "import json,sys; j=json.load(sys.stdin); print($2)"; }
listed() { echo '{"version":1,"op":"list","config":{"dir":"'"$PDIR"'"}}' | "$PROVIDER" |
    python3 -c "import json,sys; print(len(json.load(sys.stdin)['nodes']))"; }
submit_id() { c submit "$@" | sed -nE 's/^Submitted job ([0-9]+).*/\1/p'; }
is() { [ "$1" = "$2" ]; }                 # is A B
at_least() { [ "$1" -ge "$2" ] 2>/dev/null; } # at_least A B
job_is() { is "$(job_field "$1" "j['state']")" "$2"; }
creates_at_least() { at_least "$(pool_field "p['creates']")" "$1"; }
pool_nodes_is() { is "$(pool_field "len(p['nodes'])")" "$1"; }
reason_has() { job_field "$1" "j.get('reason') or ''" | grep -q "$2"; }
event_seen() { pool_field "' '.join(e['what'] for e in p.get('events', []))" | grep -qw "$1"; }

case $CASE in
scale)
    # bad pool configs are refused naming the member
    printf '{"pools":[{"name":"x","gpu_type":"L4","provider":"/bin/true"}]}' >"$DIR/bad.json"
    "$CORRAL" controller --config "$DIR/bad.json" --state-dir "$DIR/bad" --listen 127.0.0.1:0 \
        >"$DIR/bad.out" 2>&1 && fail "a pool with a provider and no max_nodes was accepted"
    grep -q "pools\[0\].max_nodes" "$DIR/bad.out" || fail "the refusal does not name pools[0].max_nodes: $(cat "$DIR/bad.out")"
    pool_conf ""
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    # a static node of another type: the job's type is only in the pool
    cr_start_agent static1 "$DIR/a1" "$DIR/agent1.log" --gpus 'sim:1xL40S'
    wait_for 30 eval 'c nodes 2>/dev/null | grep -q static1' || fail "static1 did not register"
    id=$(submit_id --gpus 1 --gpu-type L4 --constraint site=cloud -- sh -c 'sleep 2; echo ran-on-pool')
    [ -n "$id" ] || fail "submit"
    wait_for 30 creates_at_least 1 || fail "the pool created no node"
    wait_for 60 job_is "$id" completed || fail "job $id did not complete"
    node=$(job_field "$id" "j.get('run_nodes') or ''")
    case "$node" in *burst-*) ;; *) fail "job $id ran on '$node', not a pool node" ;; esac
    c pools
    wait_for 60 pool_nodes_is 0 || fail "the idle node was not deleted"
    [ "$(listed)" = 0 ] || fail "the provider still lists nodes"
    c nodes | grep -q "burst-" && fail "the controller still shows the pool node"
    ev=$(pools_json | python3 -c "import json,sys; print(' '.join(e['what'] for e in json.load(sys.stdin)['items'][0]['events']))")
    for w in create up drain deleted; do
        case " $ev " in *" $w "*) ;; *) fail "no '$w' event in: $ev" ;; esac
    done
    c show "$id" | grep -q "pool burst creates node" || fail "the job has no event of its node's create"
    pools_json | python3 -c "
import json,sys
p=json.load(sys.stdin)['items'][0]
cr=[e for e in p['events'] if e['what']=='create'][0]
de=[e for e in p['events'] if e['what']=='drain'][0]
assert 'job $id' in cr['why'], cr
assert 'idle' in de['why'], de
" || fail "the create and drain events do not say why"
    curl -sf "$SERVER/metrics" -H "Authorization: Bearer $ADMIN" >"$DIR/metrics.txt" || fail "GET /metrics"
    grep -q '^corral_pool_creates_total{pool="burst"} 1$' "$DIR/metrics.txt" || fail "corral_pool_creates_total: $(grep corral_pool "$DIR/metrics.txt")"
    grep -q '^corral_pool_deletes_total{pool="burst"} 1$' "$DIR/metrics.txt" || fail "corral_pool_deletes_total"
    grep -q '^corral_pool_nodes{pool="burst",state="up"} 0$' "$DIR/metrics.txt" || fail "corral_pool_nodes"
    # the static pool holds the static node
    pools_json | python3 -c "
import json,sys
p=json.load(sys.stdin)['items'][1]
assert p['name']=='onprem' and not p['elastic'], p
assert [n['name'] for n in p['nodes']]==['static1'], p['nodes']
assert p['nodes'][0]['state']=='up', p['nodes']
" || fail "the static pool does not list static1 up"
    echo "PASS pools scale: job $id ran on $node, the node went after ${IDLE}s idle"
    ;;
netns)
    # Each pool node a host of its own (the provider's "netns"): a network
    # namespace on a bridge with its own address; the controller listens on
    # the bridge's address. The burst job runs there, the node is deleted
    # after the idle time and its namespace goes with it.
    cr_netns_require pn
    cr_netns_hosts 0
    netns_cleanup() {
        ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TAG-" | while read -r ns; do
            ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
            ip netns del "$ns" 2>/dev/null || true
        done
        cr_netns_down 0
    }
    eval "orig_$(declare -f cleanup_extra)"
    cleanup_extra() { orig_cleanup_extra; netns_cleanup; }
    pool_conf ', "netns": {"bridge": "'"$TAG-br"'", "prefix": "'"$NET"'", "first": 20, "tag": "'"$TAG"'"}'
    cr_start_controller "$DIR/ctl" --allow-legacy-join --listen "$NET.1:0"
    case $SERVER in "http://$NET.1:"*) ;; *) fail "the controller is not on the bridge: $SERVER" ;; esac
    here=$(readlink /proc/self/ns/net)
    id=$(submit_id --gpus 1 --gpu-type L4 --constraint site=cloud -- \
        sh -c "readlink /proc/self/ns/net > $DIR/job-ns.txt; cat /proc/net/fib_trie > $DIR/job-fib.txt")
    [ -n "$id" ] || fail "submit"
    wait_for 60 job_is "$id" completed || fail "job $id did not complete"
    node=$(job_field "$id" "j.get('run_nodes') or ''")
    case "$node" in burst-*) ;; *) fail "job $id ran on '$node', not a pool node" ;; esac
    [ -s "$DIR/job-ns.txt" ] || fail "the job wrote no namespace"
    [ "$(cat "$DIR/job-ns.txt")" != "$here" ] || fail "the pool node ran in the test's own network namespace"
    grep -q "$NET.20" "$DIR/job-fib.txt" || fail "the job's namespace has no $NET.20: $(head -20 "$DIR/job-fib.txt")"
    ip netns list | grep -q "^$TAG-$node" || fail "no namespace $TAG-$node while the node lives"
    wait_for 60 pool_nodes_is 0 || fail "the idle node was not deleted"
    [ "$(listed)" = 0 ] || fail "the provider still lists nodes"
    wait_for 20 eval '! ip netns list | grep -q "^$TAG-"' || fail "namespaces left: $(ip netns list)"
    echo "PASS pools netns: job $id ran on $node at $NET.20 in a namespace of its own, deleted with it"
    ;;
reclaim)
    pool_conf ""
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    # A checkpointable job: counts steps into its checkpoint, writes it on
    # USR1 and exits 75 (the suspend contract, docs/api.md); resumed, it
    # goes on from the checkpoint and completes.
    cat >"$DIR/train.sh" <<'SH'
#!/bin/sh
ck=$CORRAL_CHECKPOINT_DIR/step
step=0
[ "${CORRAL_RESUME:-}" = 1 ] && [ -f "$ck" ] && step=$(cat "$ck")
echo "start run=${CORRAL_RESUME:-0} step=$step node=$CORRAL_NODE" >>"$LOGF"
trap 'echo $step >"$ck"; echo "checkpoint step=$step node=$CORRAL_NODE" >>"$LOGF"; exit 75' USR1
while [ "$step" -lt 1000000 ]; do
    step=$((step + 1))
    if [ "${CORRAL_RESUME:-}" = 1 ] && [ "$step" -gt "$(cat "$ck")" ]; then
        echo "resumed past step=$(cat "$ck") node=$CORRAL_NODE" >>"$LOGF"; exit 0
    fi
    sleep 0.01
done
SH
    chmod +x "$DIR/train.sh"
    export LOGF=$DIR/train.log
    id=$(submit_id --gpus 1 --gpu-type L4 --checkpointable --retries 0 --export ALL -- "$DIR/train.sh")
    [ -n "$id" ] || fail "submit"
    wait_for 60 job_is "$id" running || fail "job $id did not start"
    wait_for 30 grep -q "^start run=0" "$LOGF" || fail "the job did not start its work"
    node=$(job_field "$id" "(j.get('placement') or [{}])[0].get('node','')")
    case "$node" in burst-*) ;; *) fail "job $id runs on '$node', not a pool node" ;; esac
    echo 20 >"$PDIR/$node/reclaim" # the provider's notice: 20 s left
    wait_for 30 grep -q "^checkpoint step=" "$LOGF" || fail "no checkpoint signal reached the job"
    wait_for 30 eval 'c nodes | grep "$node" | grep -q "spot reclaim"' ||
        fail "the node is not drained for the reclaim: $(c nodes)"
    # The provider takes the node back (the cloud would at the deadline).
    kill -TERM "$(cat "$PDIR/$node/pid")" 2>/dev/null || true
    wait_for 90 job_is "$id" completed || fail "job $id did not complete after the reclaim"
    grep -q "^start run=1 step=[1-9]" "$LOGF" || fail "the job did not resume from its checkpoint: $(cat "$LOGF")"
    grep -q "^resumed past" "$LOGF" || fail "no resumed run: $(cat "$LOGF")"
    [ "$(job_field "$id" "j.get('retries', 0)")" = 0 ] || fail "the reclaim used a retry"
    c show "$id" | grep -q "reclaimed by its provider" || fail "the job's events do not say reclaimed"
    node2=$(grep "^resumed past" "$LOGF" | sed 's/.*node=//')
    [ "$node2" != "$node" ] || fail "resumed on the reclaimed node $node"
    echo "PASS pools reclaim: job $id checkpointed on $node, resumed on $node2 without a retry"
    ;;
refuse)
    pool_conf ', "capacity": 0'
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    id=$(submit_id --gpus 1 --gpu-type L4 -- true)
    [ -n "$id" ] || fail "submit"
    wait_for 30 reason_has "$id" 'provider refused' ||
        fail "job $id's reason does not say the provider refused: $(job_field "$id" "j.get('reason')")"
    [ "$(job_field "$id" "j['state']")" = pending ] || fail "job $id is not pending"
    c pools | grep -q "refused.*capacity" || fail "corral pools does not show the refusal"
    # each refused create's bootstrap token is revoked: none piles up
    ntok=$(c admin bootstrap-token list --json | python3 -c "import json,sys; print(sum(1 for t in json.load(sys.stdin)['items'] if t['name'].startswith('pool:')))")
    [ "$ntok" -le 1 ] || fail "$ntok pool bootstrap tokens kept after refusals"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$SERVER/v1/pools/nope")
    [ "$code" = 404 ] || fail "GET /v1/pools/nope answered $code"
    echo 1 >"$PDIR/capacity" # capacity comes back: the job runs
    wait_for 60 job_is "$id" completed || fail "job $id did not run once capacity came"
    echo "PASS pools refuse: $(job_field "$id" "j['events'][-1]['why'] if j.get('events') else ''")"
    ;;
thrash)
    IDLE=4 pool_conf ""
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    # 8 one-second jobs, each submitted when the last one ended plus the idle time
    last=""
    for i in 1 2 3 4 5 6 7 8; do
        id=$(submit_id --gpus 1 --gpu-type L4 -- sleep 1)
        [ -n "$id" ] || fail "submit $i"
        wait_for 60 job_is "$id" completed || fail "job $id did not complete"
        sleep "$((IDLE + 2))"
        last=$id
    done
    creates=$(pool_field "p['creates']")
    deletes=$(pool_field "p['deletes']")
    c pools
    [ "$creates" -le 2 ] || fail "$creates creates for 8 jobs at the boundary (at most 2)"
    [ "$deletes" -le 1 ] || fail "$deletes deletes for 8 jobs at the boundary (at most 1)"
    event_seen hysteresis || event_seen kept || fail "no hysteresis event: the idle time never grew"
    at_least "$(pool_field "p['idle_s']")" $((IDLE * 2)) || fail "the idle time did not grow"
    echo "PASS pools thrash: 8 jobs, $creates create(s), $deletes delete(s), last job $last"
    ;;
gang)
    # a gang of 2 nodes x 1 L4: the pool creates both, the job runs across them
    pool_conf ""
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    id=$(submit_id --nodes 2 --gpus 2 --gpu-type L4 -- true)
    [ -n "$id" ] || fail "submit"
    wait_for 60 job_is "$id" completed || fail "gang job $id did not complete"
    nodes=$(job_field "$id" "j.get('run_nodes') or ''")
    case "$nodes" in burst-*,burst-*) ;; *) fail "gang job $id ran on '$nodes'" ;; esac
    [ "$(pool_field "p['creates']")" = 2 ] || fail "$(pool_field "p['creates']") creates for a gang of 2"
    wait_for 60 pool_nodes_is 0 || fail "the gang's nodes were not deleted"
    echo "PASS pools gang: job $id ran on $nodes"
    ;;
max)
    # 3 jobs of 1 L4 at once, max_nodes 2: two nodes, the third job waits
    # for one of them with the reason, and all three run
    pool_conf ""
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    ids=""
    for k in 1 2 3; do ids="$ids $(submit_id --gpus 1 --gpu-type L4 -- sleep 4)"; done
    any_at_max() { local j; for j in $ids; do reason_has "$j" "at max_nodes (2)" && return 0; done; return 1; }
    wait_for 30 any_at_max || fail "no job's reason says the pool is at max_nodes"
    for j in $ids; do wait_for 90 job_is "$j" completed || fail "job $j did not complete"; done
    [ "$(pool_field "p['creates']")" = 2 ] || fail "$(pool_field "p['creates']") creates with max_nodes 2"
    echo "PASS pools max: 3 jobs on 2 nodes (max_nodes 2), the third waited with the reason"
    ;;
restart)
    # the controller restarts while the pool's node runs: the provider's list
    # is read at start, the node adopted, and deleted after the idle time
    IDLE=6 pool_conf ""
    port=$(free_ports 1)
    cr_start_controller "$DIR/ctl" --allow-legacy-join --listen "127.0.0.1:$port"
    id=$(submit_id --gpus 1 --gpu-type L4 -- true)
    [ -n "$id" ] || fail "submit"
    wait_for 60 job_is "$id" completed || fail "job $id did not complete"
    kill -TERM "$CTL_PID"
    wait "$CTL_PID" 2>/dev/null || true
    [ "$(listed)" = 1 ] || fail "the provider does not list the node before the restart"
    cr_start_controller "$DIR/ctl" --allow-legacy-join --listen "127.0.0.1:$port"
    wait_for 30 event_seen adopted || fail "the node was not adopted from the provider's list"
    wait_for 60 pool_nodes_is 0 || fail "the adopted node was not deleted after the idle time"
    [ "$(listed)" = 0 ] || fail "the provider still lists nodes"
    c pools --events 5
    echo "PASS pools restart: the node left running across a restart was adopted and deleted"
    ;;
vanish)
    # the provider loses a node behind the controller's back (a reclaim):
    # its next list (list_s 2) says so and the controller forgets it
    IDLE=600 pool_conf ""
    sed -i 's/"refusal_retry_s": 2,/"refusal_retry_s": 2, "list_s": 2,/' "$CKPT_CONF"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    id=$(submit_id --gpus 1 --gpu-type L4 -- true)
    [ -n "$id" ] || fail "submit"
    wait_for 60 job_is "$id" completed || fail "job $id did not complete"
    kill -KILL "$(cat "$PDIR/burst-1/pid")"
    mv "$PDIR/burst-1" "$PDIR/.gone-burst-1"
    wait_for 30 event_seen vanished || fail "no vanished event"
    wait_for 30 pool_nodes_is 0 || fail "the vanished node is still in the pool"
    c nodes | grep -q "burst-1" && fail "the controller still shows the vanished node"
    echo "PASS pools vanish: a node gone from the provider's list is forgotten"
    ;;
power)
    POWER=$DIR/power
    pool_conf ""
    sed -i 's|"gpu_type": "L40S", "labels": {"site": "onprem"},|"gpu_type": "L4", "labels": {"site": "onprem"}, "power_provider": "'"$PROVIDER"'", "suspend_s": 3, "resume_timeout_s": 30, "pending_s": 0, "backoff_s": 2, "power_budget_w": 40, "provider_config": {"dir": "'"$POWER"'", "corral": "'"$CORRAL"'"},|' "$CKPT_CONF"
    grep -q power_provider "$CKPT_CONF" || fail "the power config was not written"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    # the static node, started through the provider (its power-on command kept)
    python3 - "$SERVER" "$(cat "$CTL_STATE/join.token")" "$POWER" "$CORRAL" <<'PY' | "$PROVIDER" >"$DIR/create.out" || fail "create static1: $(cat "$DIR/create.out")"
import json, sys
print(json.dumps({"version": 1, "op": "create", "pool": "onprem", "server": sys.argv[1],
                  "gpu_type": "L4", "gpus_per_node": 1, "boot_s": 0,
                  "labels": {"site": "onprem"}, "config": {"dir": sys.argv[3], "corral": sys.argv[4]},
                  "nodes": [{"name": "static1", "bootstrap_token": sys.argv[2]}]}))
PY
    onprem_field() { pools_json | python3 -c "import json,sys; p=[x for x in json.load(sys.stdin)['items'] if x['name']=='onprem'][0]; print($1)"; }
    power_is() { is "$(onprem_field "p['power']['nodes'].get('static1')")" "$1"; }
    wait_for 30 eval 'c nodes 2>/dev/null | grep -q static1' || fail "static1 did not register: $(tail -3 "$POWER/static1/agent.log")"
    wait_for 30 power_is suspended || fail "static1 was not suspended: $(onprem_field "p['power']")"
    pid=$(cat "$POWER/static1/pid")
    wait_for 20 eval '! kill -0 '"$pid"' 2>/dev/null' || fail "static1's agent still runs while suspended"
    # an L4 job: static1 (suspended, on-prem) takes it; no cloud node boots
    id=$(submit_id --gpus 1 --gpu-type L4 -- sleep 4)
    [ -n "$id" ] || fail "submit"
    wait_for 60 job_is "$id" running || fail "job $id did not start: $(job_field "$id" "j.get('reason')")"
    # the pool's power budget (40 W over its one GPU in service) caps the
    # GPU: the agent applied it (the sim backend holds the power under it)
    gpu_field() { c nodes --json | python3 -c "import json,sys; n=[x for x in json.load(sys.stdin)['items'] if x['name']=='static1'][0]; g=n['gpus'][0]; print($1)"; }
    wait_for 30 eval 'is "$(gpu_field "g.get('"'"'power_cap_w'"'"')")" 40' ||
        fail "static1's GPU is not capped at 40 W: $(gpu_field "g")"
    w=$(gpu_field "g['power_w']")
    python3 -c "import sys; sys.exit(0 if $w <= 40.0 else 1)" || fail "static1's GPU draws $w W over its 40 W cap"
    is "$(onprem_field "p.get('power_cap_w')")" 40 || fail "corral pools does not show the 40 W cap"
    grep -q "power limit 40 W" "$POWER/static1/agent.log" || fail "the agent did not log the power limit"
    wait_for 60 job_is "$id" completed || fail "job $id did not complete"
    is "$(job_field "$id" "j.get('run_nodes') or ''")" static1 || fail "job $id ran on $(job_field "$id" "j.get('run_nodes')")"
    is "$(pool_field "p['creates']")" 0 || fail "a cloud node was booted for a job a suspended node fits"
    at_least "$(onprem_field "p['power']['resumes']")" 1 || fail "no resume counted"
    wait_for 30 eval '[ "$(onprem_field "p['"'"'power'"'"']['"'"'suspends'"'"']")" -ge 2 ]' ||
        fail "static1 was not suspended again after the job: $(onprem_field "p['power']")"
    wait_for 30 power_is suspended || fail "static1 is not suspended again"
    # a resume that fails: an event, a backoff, then the job runs
    touch "$POWER/fail_resume"
    id2=$(submit_id --gpus 1 --gpu-type L4 -- true)
    power_ev() { onprem_field "' '.join(e['what'] for e in p.get('events', []))" | grep -qw "$1"; }
    wait_for 30 power_ev resume-failed || fail "no resume-failed event"
    wait_for 30 reason_has "$id2" "resumes back off" || fail "job $id2's reason does not say the resume backs off: $(job_field "$id2" "j.get('reason')")"
    rm "$POWER/fail_resume"
    wait_for 60 job_is "$id2" completed || fail "job $id2 did not run once the resume worked"
    is "$(pool_field "p['creates']")" 0 || fail "a cloud node was booted"
    c pools onprem --events 20
    echo "PASS pools power: static1 suspended when idle, resumed for jobs $id and $id2 (one failed resume backed off), no cloud boot"
    ;;
burst)
    pool_conf ""
    # a node costs 1 a second: a budget of 4 is spent within one job
    sed -i 's/"cost_per_hour": 0.8,/"cost_per_hour": 3600,/' "$CKPT_CONF"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    cr_start_agent static1 "$DIR/a1" "$DIR/agent1.log" --gpus 'sim:1xL40S' --label site=onprem
    wait_for 30 eval 'c nodes 2>/dev/null | grep -q static1' || fail "static1 did not register"
    c tenants create sec --constraint site=onprem --constraint-locked >/dev/null || fail "tenant sec"
    c tenants create ml --burst-budget 4 >/dev/null || fail "tenant ml"
    c tenants create free --burst-budget 0 >/dev/null || fail "tenant free"
    # bad hybrid policies are refused naming the field
    out=$(c tenants create bad1 --constraint 'site' 2>&1) && fail "a constraint without a value was taken"
    echo "$out" | grep -q "hybrid.constraint" || fail "the refusal does not name hybrid.constraint: $out"
    out=$(c tenants create bad2 --constraint-locked 2>&1) && fail "a lock without a constraint was taken"
    echo "$out" | grep -q "hybrid.locked" || fail "the refusal does not name hybrid.locked: $out"
    # sec: its jobs get site=onprem; another site is refused; L40S runs on-prem
    out=$(c submit --tenant sec --gpus 1 --gpu-type L4 --constraint site=cloud -- true 2>&1) &&
        fail "tenant sec submitted site=cloud past its locked constraint"
    echo "$out" | grep -q "constraint" || fail "the refusal does not name the constraint: $out"
    sec1=$(submit_id --tenant sec --gpus 1 --gpu-type L40S -- true)
    sec2=$(submit_id --tenant sec --gpus 1 --gpu-type L4 -- true)
    [ -n "$sec1" ] && [ -n "$sec2" ] || fail "submit for sec"
    is "$(job_field "$sec2" "j.get('constraint')")" "site=onprem" ||
        fail "sec's job has constraint '$(job_field "$sec2" "j.get('constraint')")', not site=onprem"
    wait_for 30 job_is "$sec1" completed || fail "sec's L40S job did not run on-prem"
    is "$(job_field "$sec1" "j.get('run_nodes') or ''")" static1 || fail "sec's job ran off-prem"
    # ml bursts: one node, its time charged to ml
    ml1=$(submit_id --tenant ml --gpus 1 --gpu-type L4 -- sleep 6)
    [ -n "$ml1" ] || fail "submit for ml"
    wait_for 60 job_is "$ml1" completed || fail "ml's job $ml1 did not complete"
    case "$(job_field "$ml1" "j.get('run_nodes') or ''")" in burst-*) ;; *) fail "ml's job did not run on the pool" ;; esac
    # sec's L4 job was never demand: the only create is ml's
    job_is "$sec2" pending || fail "sec's L4 job is not pending"
    is "$(pool_field "p['creates']")" 1 || fail "$(pool_field "p['creates']") creates (want 1, ml's)"
    pool_field "[e['why'] for e in p['events'] if e['what']=='create'][0]" | grep -q "job $ml1 " ||
        fail "the create was not for ml's job"
    wait_for 60 pool_nodes_is 0 || fail "the idle node was not deleted"
    # every node-second is charged: the tenants' cloud cost is the pool's
    sums_match() { c usage --by tenant --json | python3 -c "
import json,sys,subprocess
u=json.load(sys.stdin)['items']
cost={r['tenant']: r.get('cloud_cost', 0) for r in u}
pool=float(sys.argv[1])
assert cost.get('ml', 0) >= 4, cost
assert abs(sum(cost.values()) - pool) < 0.05 * pool, (cost, pool)
assert cost.get('sec', 0) == 0 and cost.get('free', 0) == 0, cost
" "$(pool_field "p['cost']")"; }
    wait_for 30 sums_match || { c usage --by tenant; fail "ml's cloud cost is not the pool's: $(c usage --by tenant --json)"; }
    c usage --by tenant | grep -q CLOUD_COST || fail "corral usage shows no CLOUD_COST"
    c tenants list --json | python3 -c "
import json,sys
t={x['name']: x for x in json.load(sys.stdin)['items']}
b=t['ml']['usage']['burst']
assert b['budget']==4 and b['spent_this_month']>=4, b
assert t['sec']['hybrid']['constraint']=='site=onprem' and t['sec']['hybrid']['locked'], t['sec']
" || fail "the tenants do not show their hybrid policy and spend"
    # over budget: ml's next job boots nothing and says why; free never bursts
    ml2=$(submit_id --tenant ml --gpus 1 --gpu-type L4 -- true)
    fr1=$(submit_id --tenant free --gpus 1 --gpu-type L4 -- true)
    wait_for 30 reason_has "$ml2" "over its burst budget" ||
        fail "ml's job's reason does not say over budget: $(job_field "$ml2" "j.get('reason')")"
    wait_for 30 reason_has "$fr1" "no burst budget" ||
        fail "free's job's reason does not say no budget: $(job_field "$fr1" "j.get('reason')")"
    is "$(pool_field "p['creates']")" 1 || fail "a tenant over its budget caused a boot"
    job_is "$ml2" pending || fail "ml's job over budget is not pending"
    # a raised budget lets it burst again
    c tenants set ml --burst-budget 1000 >/dev/null || fail "raise ml's budget"
    wait_for 60 job_is "$ml2" completed || fail "ml's job did not run once its budget was raised"
    [ "$(listed)" -le 1 ] || fail "the provider lists more than one node"
    echo "PASS pools burst: sec stays on-prem, ml bursts then stops at its budget, free never bursts"
    ;;
bad)
    pool_conf ""
    sed -i 's/"refusal_retry_s": 2,/"refusal_retry_s": 2, "backoff_s": 1,/' "$CKPT_CONF"
    touch "$PDIR/exit"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    id=$(submit_id --gpus 1 --gpu-type L4 -- true)
    [ -n "$id" ] || fail "submit"
    err_has() { pool_field "' '.join(e['why'] for e in p.get('events', []))" | grep -q "$1"; }
    wait_for 30 err_has "exited with status 3" || fail "no event of the provider's exit status"
    mv "$PDIR/exit" "$PDIR/garbage"
    wait_for 30 err_has "invalid JSON answer" || fail "no event of the provider's invalid JSON"
    mv "$PDIR/garbage" "$PDIR/hang"
    wait_for 30 err_has "no answer within provider_timeout_s" || fail "no event of the hung provider"
    c jobs >/dev/null || fail "the controller does not answer"
    mv "$PDIR/hang" "$PDIR/extra"
    wait_for 60 job_is "$id" completed || fail "job $id did not run once the provider behaved"
    wait_for 30 err_has "not asked for" || fail "no event of the node not asked for"
    rm "$PDIR/extra"
    wait_for 60 pool_nodes_is 0 || fail "the pool's nodes were not all deleted"
    [ "$(listed)" = 0 ] || fail "the provider still lists nodes"
    ! pgrep -f "sleep 3600" -u "$(id -u)" -a | grep -q . || echo "note: a sleep 3600 runs (not necessarily ours)"
    c pools --events 64
    echo "PASS pools bad: exit status, invalid JSON, a hang and an extra node: events, no leak"
    ;;
esac
