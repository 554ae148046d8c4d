#!/bin/bash
# test_prometheus.sh - a real Prometheus (Debian package prometheus) scrapes
# a real cluster found through the controller's http_sd endpoint
# (GET /v1/prometheus/targets with the admin token), and a PromQL join of
# the agent's DCGM utilisation with corral_gpu_allocation answers "the GPU
# utilisation of job N" through Prometheus' HTTP API. Also: dcgm-exporter's
# job mapping files, MIG labels, --no-dcgm, the controller's node info
# series, and the shipped rules and dashboards (promtool). The controller
# and the H100 agent take --metrics-token-file (Prometheus sends it): their
# tenant and job labels need it; the A30 agent's open /metrics has none.
set -u
. "$(dirname "$0")/lib.sh"
BIN=$CORRAL
SRC=${CORRAL_SRC:?CORRAL_SRC not set}
cr_setup prom
TMP=$DIR
fails=0
# Counted, not fatal (lib.sh's fail exits): every check runs.
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
PROM=$(command -v prometheus || true)
PROMTOOL=$(command -v promtool || true)
if [ -z "$PROM" ] || [ -z "$PROMTOOL" ]; then
    echo "SKIP: prometheus/promtool missing (make deps installs the prometheus package)"
    exit 77
fi
# --- the shipped rules and dashboards --------------------------------------
"$PROMTOOL" check rules "$SRC/deploy/prometheus/rules.yml" || fail "promtool check rules"
(cd "$SRC/deploy/prometheus" && "$PROMTOOL" test rules rules_test.yml) || fail "promtool test rules"
# the example scrape configuration (its files are the installer's: syntax only)
"$PROMTOOL" check config --syntax-only "$SRC/deploy/prometheus/prometheus.yml" || fail "promtool check config"
for f in "$SRC"/deploy/grafana/*.json; do
    python3 - "$f" <<'PY' || fail "$f"
import json, sys
d = json.load(open(sys.argv[1]))
panels = [p for p in d["panels"] if p.get("type") != "row"]
assert d["title"] and d["uid"] and panels, "dashboard needs title, uid, panels"
for p in panels:
    assert p.get("targets") and all(t.get("expr") for t in p["targets"]), "panel %r has no query" % p.get("title")
PY
done

# --- a cluster --------------------------------------------------------------
mkdir -p "$TMP/ctl"
# a metrics token file that cannot serve: refused at start, naming the flag
echo short >"$TMP/short.token"
for f in "$TMP/short.token" "$TMP/missing.token"; do
    out=$("$BIN" controller --listen 127.0.0.1:0 --state-dir "$TMP/bad" --metrics-token-file "$f" 2>&1) &&
        fail "the controller started with --metrics-token-file $f"
    case "$out" in *"--metrics-token-file $f: "*) ;; *) fail "bad metrics token file $f: '$out'" ;; esac
done
MT=prom-metrics-$$-$RANDOM-token
echo "$MT" >"$TMP/metrics.token"
"$BIN" controller --allow-legacy-join --config "$CKPT_CONF" --listen 127.0.0.1:0 \
    --state-dir "$TMP/ctl" --heartbeat 1 --metrics-token-file "$TMP/metrics.token" >"$TMP/ctl.log" 2>&1 &
PIDS+=($!)
wait_for 30 test -s "$TMP/ctl/listen.addr" || { cat "$TMP/ctl.log"; echo "FAIL: controller"; exit 1; }
wait_for 30 test -s "$TMP/ctl/admin.token"
SERVER=$(cat "$TMP/ctl/listen.addr")
ADMIN=$(cat "$TMP/ctl/admin.token")
agent() { # agent NODE GPUS [flags...]
    local n=$1 g=$2
    shift 2
    mkdir -p "$TMP/$n"
    "$BIN" agent --server "$SERVER" --join-token "$TMP/ctl/join.token" --node "$n" --rack r1 \
        --gpus "sim:$g" --listen 127.0.0.1:0 --state-dir "$TMP/$n" --kill-on-exit "$@" \
        >"$TMP/agent-$n.log" 2>&1 &
    PIDS+=($!)
}
agent h100-0 "3xH100 SXM" --dcgm-job-map "$TMP/jobmap" --metrics-token-file "$TMP/metrics.token"
agent a30-0 "1xA30,mig=1g.6gb:4" --no-dcgm
call() {
    curl -sS -X "$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        ${3:+--data "$3"} "$SERVER$2"
}
nodes_up() { [ "$(call GET /v1/nodes | grep -o '"state":"up"' | wc -l)" -ge 2 ]; }
wait_for 30 nodes_up || { fail "agents did not register"; exit 1; }
call POST /v1/tenants '{"name":"ml"}' >/dev/null
id_of() { sed -n 's/.*"ids":\[\([0-9]*\).*/\1/p'; }
# A busy loop drives the simulated GPU's utilisation.
BUSY=$(call POST /v1/jobs '{"name":"busy-train","tenant":"ml","command":["sh","-c","while :; do :; done"],"gpus":1,"gpu_type":"H100 SXM"}' | id_of)
MIG=$(call POST /v1/jobs '{"name":"mig-job","tenant":"ml","command":["sleep","300"],"gpus":1,"gpu_type":"A30","mig_profile":"1g.6gb"}' | id_of)
running() { call GET "/v1/jobs/$1" | grep -q '"state":"running"'; }
wait_for 30 running "$BUSY" || fail "job $BUSY did not start"
wait_for 30 running "$MIG" || fail "job $MIG did not start"

# --- discovery ----------------------------------------------------------------
# A service replica (its port comes from the agent) and a gateway that
# reports load with its /metrics port (only an admin token is listed).
call POST /v1/services '{"name":"chat","tenant":"ml","command":["sleep","300"],"gpus":1,"gpu_type":"H100 SXM","min_replicas":1,"max_replicas":1}' >/dev/null
replica_up() { call GET /v1/prometheus/targets | grep -q '"corral_role":"replica"'; }
wait_for 30 replica_up || fail "no replica target: $(call GET /v1/services/chat)"
call POST /v1/services/chat/metrics '{"in_flight":0,"rps":0,"metrics_port":9399}' >/dev/null
USER=$(call POST /v1/tokens '{"role":"user","tenant":"ml","name":"u"}' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
curl -sS -H "Authorization: Bearer $USER" -H 'Content-Type: application/json' \
    --data '{"in_flight":0,"metrics_port":9400}' "$SERVER/v1/services/chat/metrics" >/dev/null
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $USER" "$SERVER/v1/prometheus/targets")
[ "$code" = 403 ] || fail "targets with a user token: $code (want 403)"
call GET /v1/prometheus/targets >"$TMP/targets.json"
python3 - "$TMP/targets.json" <<'PY' || fail "http_sd answer: $(cat "$TMP/targets.json")"
import json, sys
t = json.load(open(sys.argv[1]))
agents = [x for x in t if x["labels"].get("corral_role") == "agent"]
assert sorted(a["labels"]["node"] for a in agents) == ["a30-0", "h100-0"], agents
assert all(len(a["targets"]) == 1 and ":" in a["targets"][0] for a in agents)
reps = [x for x in t if x["labels"].get("corral_role") == "replica"]
assert len(reps) == 1 and reps[0]["labels"]["service"] == "chat" and reps[0]["labels"]["tenant"] == "ml", reps
gws = [x for x in t if x["labels"].get("corral_role") == "gateway"]
assert [g["targets"] for g in gws] == [["127.0.0.1:9399"]], gws
PY
code=$(curl -s -o /dev/null -w '%{http_code}' "$SERVER/v1/prometheus/targets")
[ "$code" = 401 ] || fail "targets without a token: $code"

# --- agent metrics -------------------------------------------------------------
H100=$(python3 -c 'import json,sys; print([x["targets"][0] for x in json.load(open(sys.argv[1])) if x["labels"].get("node")=="h100-0"][0])' "$TMP/targets.json")
A30=$(python3 -c 'import json,sys; print([x["targets"][0] for x in json.load(open(sys.argv[1])) if x["labels"].get("node")=="a30-0"][0])' "$TMP/targets.json")
has_alloc() { curl -s -H "Authorization: Bearer $MT" "http://$H100/metrics" | grep -q "corral_gpu_allocation{.*job=\"$BUSY\",tenant=\"ml\""; }
wait_for 30 has_alloc || fail "no corral_gpu_allocation for job $BUSY"
curl -s -H "Authorization: Bearer $MT" "http://$H100/metrics" >"$TMP/h100.prom"
curl -s "http://$A30/metrics" >"$TMP/a30.prom"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$H100/metrics")
[ "$code" = 401 ] || fail "the H100 agent's /metrics without its token: $code (want 401)"
grep -q '^# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter' "$TMP/h100.prom" || fail "ECC_DBE_VOL_TOTAL is not a counter"
for f in MEM_CLOCK MEMORY_TEMP TOTAL_ENERGY_CONSUMPTION PCIE_REPLAY_COUNTER ENC_UTIL DEC_UTIL \
    MEM_COPY_UTIL CORRECTABLE_REMAPPED_ROWS UNCORRECTABLE_REMAPPED_ROWS ROW_REMAP_FAILURE NVLINK_BANDWIDTH_TOTAL; do
    grep -q "^DCGM_FI_DEV_$f{gpu=\"0\"" "$TMP/h100.prom" || fail "no DCGM_FI_DEV_$f"
done
grep -q '^# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter' "$TMP/h100.prom" || fail "energy type"
grep -q '^DCGM_' "$TMP/a30.prom" && fail "--no-dcgm agent still exports DCGM series"
grep -q '^corral_gpu_utilization_percent' "$TMP/a30.prom" || fail "--no-dcgm dropped the corral series"
# the A30 agent's /metrics is open: the MIG job's GPU is counted, with no
# job, tenant or service label (another tenant's job could read them)
grep -q "^corral_gpu_allocation{node=\"a30-0\",gpu=\"[0-9]*\",UUID=\"[^\"]*\",GPU_I_ID=\"[0-9]*\",GPU_I_PROFILE=\"1g.6gb\"} 1$" "$TMP/a30.prom" ||
    fail "MIG allocation lacks GPU_I_ID/GPU_I_PROFILE: $(grep allocation "$TMP/a30.prom")"
grep -E 'job=|tenant=|service=|"ml"' "$TMP/a30.prom" && fail "the A30 agent's open /metrics names a job or tenant"
[ "$(grep -c '^corral_gpu_mig_instance_memory_bytes{.*GPU_I_PROFILE="1g.6gb"' "$TMP/a30.prom")" = 4 ] ||
    fail "want 4 MIG instance series"
# dcgm-exporter's job mapping: a file per GPU index with the job id
gpu=$(call GET "/v1/jobs/$BUSY" | sed -n 's/.*"gpus":\[\([0-9]*\)\].*/\1/p')
jm() { [ "$(cat "$TMP/jobmap/$gpu" 2>/dev/null)" = "$BUSY" ]; }
wait_for 20 jm || fail "job map $TMP/jobmap/$gpu: '$(cat "$TMP/jobmap/$gpu" 2>/dev/null)' (want $BUSY)"
# the busy job and the replica hold two GPUs; the third, idle, has no file
[ "$(ls "$TMP/jobmap" | wc -l)" = 2 ] || fail "job map files: $(ls "$TMP/jobmap")"

# --- controller metrics ------------------------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' "$SERVER/metrics")
[ "$code" = 401 ] || fail "the controller's /metrics without a token: $code (want 401)"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-$MT" "$SERVER/metrics")
[ "$code" = 401 ] || fail "the controller's /metrics with a wrong token: $code (want 401)"
curl -s -H "Authorization: Bearer $USER" "$SERVER/metrics" | grep -q 'tenant=' &&
    fail "a user token reads the controller's tenant series"
curl -s -H "Authorization: Bearer $ADMIN" "$SERVER/metrics" | grep -q 'corral_jobs{tenant="ml"' ||
    fail "the admin token does not read the tenant series"
curl -s -H "Authorization: Bearer $MT" "$SERVER/metrics" >"$TMP/ctl.prom"
grep -q 'corral_node_info{node="h100-0",rack="r1",state="up"' "$TMP/ctl.prom" || fail "no node info"
grep -q 'corral_queue_wait_seconds_count{tenant="ml"} 3' "$TMP/ctl.prom" || fail "queue wait count: $(grep queue_wait_seconds_count "$TMP/ctl.prom")"
grep -q '^corral_jobs_pending_by_reason{reason="resources"}' "$TMP/ctl.prom" || fail "no pending by reason"
"$PROMTOOL" check metrics <"$TMP/ctl.prom" >"$TMP/lint" 2>&1 || fail "controller /metrics lint: $(cat "$TMP/lint")"

# --- a real Prometheus ------------------------------------------------------------
PPORT=$((20000 + RANDOM % 20000))
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: corral
    honor_labels: true
    authorization:
      type: Bearer
      credentials_file: $TMP/metrics.token
    http_sd_configs:
      - url: $SERVER/v1/prometheus/targets
        refresh_interval: 1s
        authorization:
          type: Bearer # Prometheus 2.42's http_sd leaves the default type out
          credentials_file: $TMP/ctl/admin.token
  - job_name: corral-controller
    authorization:
      type: Bearer
      credentials_file: $TMP/metrics.token
    static_configs:
      - targets: ['${SERVER#http://}']
YML
start_prom() {
    "$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
        --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prom.log" 2>&1 &
    PROM_PID=$!
    PIDS+=($PROM_PID)
    wait_for 30 curl -sf "http://127.0.0.1:$PPORT/-/ready"
}
for try in 1 2 3; do
    start_prom && break
    kill "$PROM_PID" 2>/dev/null
    PPORT=$((PPORT + 1 + RANDOM % 100))
done
Q="DCGM_FI_DEV_GPU_UTIL * on(UUID) group_left(job, tenant) corral_gpu_allocation{job=\"$BUSY\"}"
query() {
    curl -s "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$Q" >"$TMP/q.json"
    python3 - "$TMP/q.json" "$BUSY" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["data"]["result"]
assert len(r) == 1 and r[0]["metric"]["job"] == sys.argv[2] and r[0]["metric"]["tenant"] == "ml", r
assert float(r[0]["value"][1]) > 0, r  # the busy loop drives the simulated GPU
print("utilisation of job %s: %s%%" % (sys.argv[2], r[0]["value"][1]))
PY
}
wait_for 60 query || fail "PromQL join: $(cat "$TMP/q.json"); $(tail -5 "$TMP/prom.log")"
query
Q='corral_node_info{node="a30-0"}'
nodeinfo() { curl -s "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$Q" | grep -q '"rack":"r1"'; }
wait_for 30 nodeinfo || fail "Prometheus has no corral_node_info from the controller"

[ "$fails" -eq 0 ] && echo "test_prometheus: all checks passed"
[ "$fails" -eq 0 ]
