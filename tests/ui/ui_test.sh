#!/bin/bash
# ui_test.sh - the dashboard in a real browser: a controller and two agents
# with simulated GPUs on loopback, two tenants with user tokens, a running
# job that prints a marker, a job that cannot fit (pending with a reason),
# another tenant's job, then browser_test.mjs drives the system Chromium over
# the DevTools protocol (puppeteer-core, installed by `npm ci` into
# tests/ui/node_modules when missing). Screenshots of each view land in
# $UI_SHOTS (the build dir's tests/ui/screenshots).
#
# Skips (77) only when Chromium, Node.js or the npm packages are missing
# and cannot be installed.
set -u
. "$(dirname "$0")/../integration/lib.sh"
BIN=$CORRAL
HERE=$(cd "$(dirname "$0")" && pwd)
SHOTS=${UI_SHOTS:-$PWD/ui-screenshots}
cr_setup ui
TMP=$DIR

CHROME=${CHROME:-$(command -v chromium || true)}
if [ -z "$CHROME" ] || ! command -v node >/dev/null; then
    echo "SKIP: chromium or node missing (make deps installs them)"
    exit 77
fi
if [ ! -d "$HERE/node_modules/puppeteer-core" ]; then
    (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund >"$TMP/npm.log" 2>&1) || {
        cat "$TMP/npm.log"
        echo "SKIP: npm ci failed (no registry?)"
        exit 77
    }
fi

mkdir -p "$TMP/ctl"
"$BIN" controller --allow-legacy-join --config "$CKPT_CONF" --listen 127.0.0.1:0 \
    --state-dir "$TMP/ctl" --heartbeat 1 --history-step 1 >"$TMP/ctl.log" 2>&1 &
PIDS+=($!)
wait_for 30 test -s "$TMP/ctl/listen.addr" || { cat "$TMP/ctl.log"; echo "FAIL: controller did not start"; exit 1; }
wait_for 30 test -s "$TMP/ctl/admin.token" || { echo "FAIL: no admin token"; exit 1; }
SERVER=$(cat "$TMP/ctl/listen.addr")
ADMIN=$(cat "$TMP/ctl/admin.token")

agent() { # agent NODE RACK GPUS
    mkdir -p "$TMP/$1"
    "$BIN" agent --server "$SERVER" --join-token "$TMP/ctl/join.token" --node "$1" --rack "$2" \
        --gpus "sim:$3" --listen 127.0.0.1:0 --state-dir "$TMP/$1" --kill-on-exit \
        >"$TMP/agent-$1.log" 2>&1 &
    PIDS+=($!)
}
agent h100-0 r1 "4xH100 SXM"
agent a30-0 r2 "2xA30,mig=1g.6gb:4"

# call METHOD PATH TOKEN [BODY]: the answer's body on stdout
call() {
    curl -sS -X "$1" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
        ${4:+--data "$4"} "$SERVER$2"
}
nodes_up() { [ "$(call GET /v1/nodes "$ADMIN" | grep -o '"state":"up"' | wc -l)" -ge 2 ]; }
wait_for 30 nodes_up || { echo "FAIL: agents did not register"; cat "$TMP"/agent-*.log; exit 1; }

call POST /v1/tenants "$ADMIN" '{"name":"ml","weight":2,"quotas":{"H100 SXM":4}}' >/dev/null
call POST /v1/tenants "$ADMIN" '{"name":"vision","weight":1}' >/dev/null
tok() { call POST /v1/tokens "$ADMIN" "{\"role\":\"user\",\"tenant\":\"$1\",\"name\":\"$2\"}" |
    sed -n 's/.*"token":"\([^"]*\)".*/\1/p'; }
ML=$(tok ml alice)
VIS=$(tok vision bob)
[ -n "$ML" ] && [ -n "$VIS" ] || { echo "FAIL: could not make user tokens"; exit 1; }
id_of() { sed -n 's/.*"ids":\[\([0-9]*\).*/\1/p'; }
# a LoRA fine-tune of a 7B model: the advisor plans it on the type it gets
RUN=$(call POST /v1/jobs "$ML" '{"name":"<img src=x id=xss>train","command":["sh","-c","echo ui-marker-$CORRAL_JOB_ID; sleep 300"],"gpus":2,"gpu_type":"H100 SXM","kind":"finetune","model":{"params":7e9,"method":"lora","tokens":1e8}}' | id_of)
PEND=$(call POST /v1/jobs "$ML" '{"name":"too-big","command":["true"],"gpus":64,"gpu_type":"H100 SXM"}' | id_of)
CANCEL=$(call POST /v1/jobs "$ML" '{"name":"to-cancel","command":["true"],"gpus":64,"gpu_type":"H100 SXM"}' | id_of)
OTHER=$(call POST /v1/jobs "$VIS" '{"name":"secret-vision","command":["sleep","300"],"gpus":1,"gpu_type":"A30","mig_profile":"1g.6gb"}' | id_of)
[ -n "$RUN" ] && [ -n "$PEND" ] && [ -n "$CANCEL" ] && [ -n "$OTHER" ] || { echo "FAIL: submit failed"; exit 1; }
running() { call GET "/v1/jobs/${RUN}" "$ADMIN" | grep -q '"state":"running"'; }
wait_for 30 running || { echo "FAIL: job $RUN did not start"; call GET "/v1/jobs/$RUN" "$ADMIN"; exit 1; }
RUN=$OTHER wait_for 30 running || { echo "FAIL: MIG job $OTHER did not start"; exit 1; }

# The API behind the dashboard, from outside the browser.
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
code() { curl -s -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer $2" ${3:+--data "$3"} "$SERVER$1"; }
[ "$(code /v1/prometheus/targets "$ML")" = 403 ] || fail "a user token lists scrape targets"
[ "$(code /v1/advise "$ML" '{"kind":"finetune","params":"7b"}')" = 400 ] && grep -q '"field":"params"' "$TMP/body" ||
    fail "advise with a bad params: $(cat "$TMP/body")"
[ "$(code /v1/advise "$ML" '{"kind":"finetune","params":7e9,"bogus":1}')" = 400 ] && grep -q 'bogus' "$TMP/body" ||
    fail "advise with an unknown member: $(cat "$TMP/body")"
[ "$(code /ui/nope.js "")" = 404 ] || fail "/ui/nope.js is not a 404"
curl -sI -H "Authorization: Bearer $ML" "$SERVER/v1/jobs" | grep -qi '^Cache-Control: no-store' || fail "API answers may be cached"
curl -sI "$SERVER/ui/app.js" | grep -qi "^Content-Security-Policy: default-src 'none'" || fail "no CSP on /ui/app.js"
# another tenant sees the GPUs busy: not which job holds them, nor whose
[ "$(code /v1/cluster "$VIS")" = 200 ] || fail "/v1/cluster as a user"
grep -q "\"job\":$RUN" "$TMP/body" && fail "the cluster map shows ml's job $RUN to tenant vision"
grep -q '"state":"busy"' "$TMP/body" || fail "the cluster map does not show ml's GPUs busy"
grep -q '"tenant":"ml"' "$TMP/body" && fail "the cluster map shows tenant ml to tenant vision"
[ "$(code /v1/cluster "$ML")" = 200 ] && grep -q "\"job\":$RUN" "$TMP/body" ||
    fail "the cluster map lacks ml's own job $RUN"
# GET /v1/events: ml's stream has ml's jobs and not vision's, the
# admin's both (each waits for the later of the two: written in order).
curl -sN -H "Authorization: Bearer $ML" "$SERVER/v1/events" >"$TMP/ev-ml" 2>&1 &
EVML=$!
curl -sN -H "Authorization: Bearer $ADMIN" "$SERVER/v1/events" >"$TMP/ev-admin" 2>&1 &
EVAD=$!
PIDS+=($EVML $EVAD)
wait_for 10 grep -q 'corral events' "$TMP/ev-ml" && wait_for 10 grep -q 'corral events' "$TMP/ev-admin" ||
    fail "no event stream: $(cat "$TMP/ev-ml")"
VJ=$(call POST /v1/jobs "$VIS" '{"name":"vision-waits","command":["true"],"gpus":64,"gpu_type":"A30"}' | id_of)
MJ=$(call POST /v1/jobs "$ML" '{"name":"ml-waits","command":["true"],"gpus":64,"gpu_type":"H100 SXM"}' | id_of)
call POST "/v1/jobs/$VJ/hold" "$VIS" >/dev/null
call POST "/v1/jobs/$MJ/hold" "$ML" >/dev/null
wait_for 20 grep -q "\"id\":$MJ,\"state\":\"held\"" "$TMP/ev-ml" || fail "ml's stream lacks its job $MJ held: $(cat "$TMP/ev-ml")"
wait_for 20 grep -q "\"id\":$MJ,\"state\":\"held\"" "$TMP/ev-admin" || fail "the admin's stream lacks job $MJ held"
grep -q "\"first\":$MJ,\"count\":1" "$TMP/ev-ml" || fail "ml's stream lacks the submit of $MJ"
grep -q "\"id\":$VJ,\"state\":\"held\"" "$TMP/ev-admin" || fail "the admin's stream lacks vision's job $VJ"
grep -q "\"id\":$VJ\b\|\"first\":$VJ\b" "$TMP/ev-ml" && fail "ml's stream shows vision's job $VJ: $(cat "$TMP/ev-ml")"
[ "$(code /v1/events "$(cat "$TMP/ctl/join.token" 2>/dev/null || echo x)")" != 200 ] || fail "a join token opens an event stream"
[ "$(code '/v1/events?x=1' "$ML")" = 400 ] && grep -q '"field":"x"' "$TMP/body" || fail "an unknown query: $(cat "$TMP/body")"
kill "$EVML" "$EVAD" 2>/dev/null
# a revoked token's stream ends at once (curl exits)
call POST /v1/tokens "$ADMIN" '{"role":"user","tenant":"ml","name":"carol"}' >"$TMP/carol.json"
CAROL=$(sed -n 's/.*"token":"\([^"]*\)".*/\1/p' "$TMP/carol.json")
CAROL_ID=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' "$TMP/carol.json")
curl -sN -H "Authorization: Bearer $CAROL" "$SERVER/v1/events" >"$TMP/ev-carol" 2>&1 &
EVC=$!
PIDS+=($EVC)
wait_for 10 grep -q 'corral events' "$TMP/ev-carol" || fail "no stream for carol: $(cat "$TMP/ev-carol") $(cat "$TMP/carol.json")"
call DELETE "/v1/tokens/$CAROL_ID" "$ADMIN" | grep -q '"revoked":true' || fail "revoking carol's token"
gone() { ! kill -0 "$EVC" 2>/dev/null; }
wait_for 20 gone || fail "the revoked token's event stream is still open"
[ "$(code /v1/events "$CAROL")" = 401 ] || fail "a revoked token opens a stream: $(cat "$TMP/body")"
call POST "/v1/jobs/$VJ/cancel" "$VIS" >/dev/null
call POST "/v1/jobs/$MJ/cancel" "$ML" >/dev/null
# The history has a few seconds of the jobs (one sample a second) before
# the browser plots it.
alloc_points() {
    [ "$(call GET "/v1/history?series=cluster.gpus_allocated&from=$(($(date +%s) - 60))" "$ML" |
        grep -o '\],\[' | wc -l)" -ge 3 ]
}
wait_for 30 alloc_points || fail "the history has no points: $(call GET '/v1/history?series=cluster.*' "$ML")"
# A synthetic day before that (POST /v1/history, admin): a point a minute
# of the cluster, queue, both tenants, both nodes, h100-0's GPUs and a
# service of vision's.
python3 - "$(date +%s)" >"$TMP/day.json" <<'PY'
import json, math, sys
now = int(sys.argv[1])
ts = range((now - 86400) // 60 * 60, now - 120, 60)
def wave(t, lo, hi, phase=0.0):
    return round(lo + (hi - lo) * (0.5 + 0.5 * math.sin(2 * math.pi * (t % 86400) / 86400 + phase)), 2)
series = {
    "cluster.gpu_util": lambda t: wave(t, 20, 85),
    "cluster.gpus_allocated": lambda t: round(wave(t, 1, 6)),
    "cluster.gpus_total": lambda t: 6,
    "tenant.ml.gpus_allocated": lambda t: round(wave(t, 0, 4)),
    "tenant.ml.gpu_util": lambda t: wave(t, 30, 95, 0.5),
    "tenant.vision.gpus_allocated": lambda t: round(wave(t, 0, 2, 2.0)),
    "tenant.vision.gpu_util": lambda t: wave(t, 10, 60, 2.0),
    "queue.pending": lambda t: round(wave(t, 0, 12, 1.0)),
    "queue.running": lambda t: round(wave(t, 1, 5)),
    "queue.wait_s": lambda t: wave(t, 5, 600, 1.0),
    "queue.wait_max_s": lambda t: wave(t, 30, 1800, 1.0),
    "queue.wait_p50_s": lambda t: wave(t, 3, 400, 1.0),
    "queue.wait_p90_s": lambda t: wave(t, 10, 1200, 1.0),
    "node.h100-0.gpu_util": lambda t: wave(t, 20, 90),
    "node.a30-0.gpu_util": lambda t: wave(t, 5, 50, 3.0),
}
# h100-0's four GPUs: utilisation, memory, power and temperature
for g in range(4):
    series["gpu.h100-0.%d.util" % g] = lambda t, g=g: wave(t, 10, 95, g)
    series["gpu.h100-0.%d.mem_bytes" % g] = lambda t, g=g: round(wave(t, 2e9, 70e9, g))
    series["gpu.h100-0.%d.power_w" % g] = lambda t, g=g: wave(t, 90, 690, g)
    series["gpu.h100-0.%d.temp_c" % g] = lambda t, g=g: wave(t, 35, 78, g)
# another tenant's service: ml must never see it
series["service.chat@vision.replicas"] = lambda t: round(wave(t, 1, 4))
series["service.chat@vision.rps"] = lambda t: wave(t, 0, 40)
out = [{"name": n, "points": [[t, f(t)] for t in ts]} for n, f in series.items()]
# jobs start now and then: a wait every 20 minutes, ml's every 40
out.append({"name": "queue.start_wait_s", "points": [[t, wave(t, 2, 900, 1.3)] for t in ts if t % 1200 == 0]})
out.append({"name": "tenant.ml.start_wait_s", "points": [[t, wave(t, 1, 700, 1.6)] for t in ts if t % 2400 == 0]})
print(json.dumps({"series": out}))
PY
curl -sS -X POST -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    --data-binary @"$TMP/day.json" "$SERVER/v1/history" >"$TMP/import.out"
grep -q '"refused":0' "$TMP/import.out" || fail "importing a synthetic day: $(cat "$TMP/import.out")"
[ "$fails" -eq 0 ] || exit 1

mkdir -p "$SHOTS"
# TMPDIR: the browser's profile and its shared-memory files stay in $TMP.
TMPDIR="$TMP" UI_URL="$SERVER/ui" UI_TOKEN="$ML" UI_RUN="$RUN" UI_PEND="$PEND" UI_OTHER="$OTHER" \
    UI_CANCEL="$CANCEL" UI_ADMIN="$ADMIN" \
    UI_SHOTS="$SHOTS" CHROME="$CHROME" node "$HERE/browser_test.mjs"
rc=$?
[ $rc -ne 0 ] && tail -20 "$TMP/ctl.log"
exit $rc
