#!/bin/bash
# ui_bench.sh - how fast the web dashboard's views load on a big cluster:
# 1,000 nodes (8 GPUs each, four types, 20 racks; registered through the
# agent API, no agent processes) and 10,000 jobs (arrays; most run, the rest
# pend with reasons). Reports, per view, the API answer time (curl, median
# of 5) and the page load in headless Chromium (navigation to the view's
# data rendered, median of 5) - the target is under 300 ms. The History
# view is measured over 1 h and over 90 days of imported history, a node's
# GPUs over 7 days, the Services view (a service's replicas and load) over
# 90 days.
#
#   usage: bench/ui/ui_bench.sh [build/corral]
# Needs chromium and tests/ui/node_modules (make deps). Not a test.
set -euo pipefail
BIN=$(cd "$(dirname "${1:-build/corral}")" && pwd)/$(basename "${1:-build/corral}")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NODES=${UI_BENCH_NODES:-1000}
JOBS=${UI_BENCH_JOBS:-10000}
TMP=$(mktemp -d /tmp/corral-ui-bench.XXXXXX)
CTL=
cleanup() {
    [ -n "$CTL" ] && kill "$CTL" 2>/dev/null && wait "$CTL" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
[ -d "$ROOT/tests/ui/node_modules/puppeteer-core" ] ||
    (cd "$ROOT/tests/ui" && npm ci --ignore-scripts --no-audit --no-fund --silent)

"$BIN" controller --allow-legacy-join --listen 127.0.0.1:0 --state-dir "$TMP/ctl" --lost-after 86400 --heartbeat 3600 \
    --sync normal --rate-limit-rps 0 --rate-limit-anon-rps 0 >"$TMP/ctl.log" 2>&1 &
CTL=$!
for _ in $(seq 100); do [ -s "$TMP/ctl/listen.addr" ] && [ -s "$TMP/ctl/admin.token" ] && break; sleep 0.1; done
SERVER=$(cat "$TMP/ctl/listen.addr")
ADMIN=$(cat "$TMP/ctl/admin.token")

echo "== setting up $NODES nodes and $JOBS jobs on $SERVER"
python3 - "$SERVER" "$TMP/ctl/join.token" "$ADMIN" "$NODES" "$JOBS" <<'PY'
import json, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
server, join, admin, nodes, jobs = sys.argv[1], open(sys.argv[2]).read().strip(), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def call(method, path, token, body):
    r = urllib.request.Request(server + path, data=json.dumps(body).encode(), method=method,
                               headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=60) as f:
        return json.loads(f.read() or b"{}")
types = [("H100 SXM", 80), ("A100 80GB SXM", 80), ("L40S", 48), ("A30", 24)]
def register(i):
    t, mem = types[i % len(types)]
    gpus = [{"index": g, "uuid": "GPU-bench-%05d-%d" % (i, g), "model": t, "mem_bytes": mem << 30,
             "nvlink_domain": 0 if "SXM" in t else 1000 + g, "health": "ok", "reason": "", "mig": []}
            for g in range(8)]
    call("POST", "/v1/agents/register", join, {"node": "node-%04d" % i, "addr": "10.%d.%d.%d" % (i // 65536, i // 256 % 256, i % 256),
         "port": 8621, "rack": "rack-%02d" % (i % 20), "gpus": gpus, "cpus": 64, "mem_bytes": 512 << 30, "running": []})
with ThreadPoolExecutor(8) as ex:
    list(ex.map(register, range(nodes)))
for t in ("ml", "vision", "research"):
    call("POST", "/v1/tenants", admin, {"name": t, "weight": 1})
# arrays of up to 2000; sizes and types mixed so some pend with reasons
left, k = jobs, 0
while left > 0:
    n = min(2000, left)
    t = types[k % len(types)][0]
    call("POST", "/v1/jobs", admin, {"name": "bench-%d" % k, "tenant": ["ml", "vision", "research"][k % 3],
         "command": ["sleep", "3600"], "gpus": [1, 2, 4, 8][k % 4], "gpu_type": t, "array": n})
    left -= n
    k += 1
# 90 days of history at 5 min (POST /v1/history, a series a request): the
# cluster, the queue, the tenants and a dozen nodes (a read ranks all 1,000
# nodes' rings whatever they hold, so the others' few minutes cost the same)
import math, time
now = int(time.time())
ts = list(range((now - 90 * 86400) // 300 * 300 + 300, now - 600, 300))
names = ["cluster.gpu_util", "cluster.gpus_allocated", "cluster.gpus_total", "queue.pending",
         "queue.running", "queue.wait_s", "queue.wait_p50_s", "queue.wait_p90_s", "queue.wait_max_s",
         "queue.start_wait_s"]
names += ["tenant.%s.%s" % (t, m) for t in ("ml", "vision", "research")
          for m in ("gpus_allocated", "gpu_util", "pending", "wait_s", "start_wait_s")]
names += ["node.node-%04d.gpu_util" % i for i in range(12)]
# a service of ml's (its replicas pend: no agent runs them) and its 90 days
names += ["service.chat@ml.%s" % m for m in ("replicas", "ready", "rps", "in_flight")]
call("POST", "/v1/services", admin, {"name": "chat", "tenant": "ml", "command": ["sleep", "3600"], "gpus": 1,
     "gpu_type": "L40S", "min_replicas": 2, "max_replicas": 8})
for i, n in enumerate(names):
    pts = [[t, round(50 + 40 * math.sin(t / 86400 * 2 * math.pi + i), 2)] for t in ts]
    call("POST", "/v1/history", admin, {"series": [{"name": n, "points": pts}]})
# node-0000's 8 GPUs over the 7 days a GPU series keeps
ts7 = [t for t in ts if t > now - 7 * 86400]
for g in range(8):
    for k, m in enumerate(("util", "mem_bytes", "power_w", "temp_c")):
        pts = [[t, round(50 + 40 * math.sin(t / 86400 * 2 * math.pi + g + k), 2)] for t in ts7]
        call("POST", "/v1/history", admin, {"series": [{"name": "gpu.node-0000.%d.%s" % (g, m), "points": pts}]})
PY
sleep 3 # let the scheduler place what fits
curl -s -H "Authorization: Bearer $ADMIN" "$SERVER/metrics" | grep -E '^corral_jobs\{' | sort | head -12

echo
echo "== API answers behind each view (median of 5, curl time_total)"
api() { # api LABEL PATH
    local t
    t=$(for _ in 1 2 3 4 5; do
        curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $ADMIN" "$SERVER$2"
    done | sort -n | sed -n 3p)
    local size
    size=$(curl -s -H "Authorization: Bearer $ADMIN" "$SERVER$2" | wc -c)
    awk -v l="$1" -v t="$t" -v s="$size" 'BEGIN { printf "  %-28s %7.1f ms  %8d bytes\n", l, t * 1000, s }'
}
api "cluster (/v1/cluster)" /v1/cluster
api "queue (/v1/jobs active)" "/v1/jobs?state=active&limit=1000"
api "queue pending" "/v1/jobs?state=pending&limit=1000"
api "job (/v1/jobs/5000)" /v1/jobs/5000
api "tenants" /v1/tenants
api "usage" "/v1/usage?by=tenant"
api "services" /v1/services
api "history (the page's read)" "/v1/history?series=cluster.*,queue.*,tenant.*"
api "history, 12 busiest nodes" "/v1/history?series=node.*&top=12"
from90=$(($(date +%s) - 90 * 86400))
api "history 90 days" "/v1/history?series=cluster.*,queue.*,tenant.*&from=$from90"
api "history 90 days, 12 busiest" "/v1/history?series=node.*&top=12&from=$from90"
from7=$(($(date +%s) - 7 * 86400))
api "node-0000's GPUs, 7 days" "/v1/history?series=gpu.node-0000.*&from=$from7"
api "services' history, 90 days" "/v1/history?series=service.*&from=$from90"

echo
echo "== page loads in headless Chromium (navigation to rendered data, median of 5)"
UI_URL="$SERVER/ui" UI_TOKEN="$ADMIN" NODE_PATH="$ROOT/tests/ui/node_modules" \
    CHROME=${CHROME:-$(command -v chromium)} node "$HERE/ui_bench.mjs"
