#!/bin/bash
# The controller's history (GET /v1/history, src/controller/ctl_hist.c):
# a controller sampling every second and one sim agent with 4 GPUs; tenant
# ml runs a 2-GPU job, tenant vision a 1-GPU job. The series fill in (the
# cluster's and each tenant's allocation as the jobs hold it); a user token
# lists and reads the cluster totals and its own tenant's series only, never
# another tenant's nor the admin-only node and GPU series, whichever way it
# asks (by name, by prefix, by listing); bad ranges are 400s naming the
# parameter.
set -eu
. "$(dirname "$0")/../integration/lib.sh"
cr_setup history
unset CORRAL_SERVER CORRAL_TOKEN CORRAL_TOKEN_FILE
# the config's history_step_s and the flag: a bad one names itself
echo '{"history_step_s": 61}' >"$DIR/bad.json"
if "$CORRAL" controller --config "$DIR/bad.json" --state-dir "$DIR/never" >"$DIR/bad.out" 2>&1; then
    fail "history_step_s 61 accepted"
fi
grep -q history_step_s "$DIR/bad.out" || fail "the message does not name history_step_s: $(cat "$DIR/bad.out")"
if "$CORRAL" controller --history-step x --state-dir "$DIR/never" >"$DIR/bad.out" 2>&1; then
    fail "--history-step x accepted"
fi
grep -q -- --history-step "$DIR/bad.out" || fail "the message does not name --history-step"
cr_start_controller "$DIR/ctl" --allow-legacy-join --history-step 1
cr_start_agent n1 "$DIR/n1" "$DIR/agent.log" --gpus "sim:4xH100 SXM"

call() { # call METHOD PATH TOKEN [BODY]: the body on stdout
    curl -sS -X "$1" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
        ${4:+--data "$4"} "$SERVER$2"
}
code() { # code PATH TOKEN: the status; the body in $DIR/body
    curl -s -o "$DIR/body" -w '%{http_code}' -H "Authorization: Bearer $2" "$SERVER$1"
}
up() { call GET /v1/nodes "$ADMIN" | grep -q '"state":"up"'; }
wait_for 30 up || fail "the agent did not register"
call POST /v1/tenants "$ADMIN" '{"name":"ml","weight":1}' >/dev/null
call POST /v1/tenants "$ADMIN" '{"name":"vision","weight":1}' >/dev/null
tok() { call POST /v1/tokens "$ADMIN" "{\"role\":\"user\",\"tenant\":\"$1\",\"name\":\"$2\"}" | jq -r .token; }
ML=$(tok ml alice)
VIS=$(tok vision bob)
call POST /v1/jobs "$ML" '{"command":["sleep","300"],"gpus":2,"gpu_type":"H100 SXM"}' >/dev/null
call POST /v1/jobs "$VIS" '{"command":["sleep","300"],"gpus":1,"gpu_type":"H100 SXM"}' >/dev/null

# last VALUE of SERIES as TOKEN sees it over the last minute
last() { call GET "/v1/history?series=$1&from=$(($(date +%s) - 60))" "$2" | jq -r '.series[0].points[-1][1] // empty'; }
is() { [ "$(last "$1" "$ADMIN")" = "$2" ]; }
wait_for 30 is tenant.ml.gpus_allocated 2 || fail "tenant.ml.gpus_allocated: $(last tenant.ml.gpus_allocated "$ADMIN")"
wait_for 30 is tenant.vision.gpus_allocated 1 || fail "tenant.vision.gpus_allocated never 1"
wait_for 30 is cluster.gpus_allocated 3 || fail "cluster.gpus_allocated never 3"
# the two jobs that started: the wait from submit to start, all and ml's
[ -n "$(last queue.start_wait_s "$ADMIN")" ] || fail "no queue.start_wait_s"
[ -n "$(last tenant.ml.start_wait_s "$ML")" ] || fail "no tenant.ml.start_wait_s"
[ "$(last queue.wait_p50_s "$ADMIN")" = 0 ] || fail "queue.wait_p50_s with nothing pending: $(last queue.wait_p50_s "$ADMIN")"
is cluster.gpus_total 4 || fail "cluster.gpus_total: $(last cluster.gpus_total "$ADMIN")"
[ -n "$(last gpu.n1.0.temp_c "$ADMIN")" ] || fail "no gpu.n1.0.temp_c for the admin"
[ -n "$(last node.n1.gpu_util "$ADMIN")" ] || fail "no node.n1.gpu_util for the admin"

five_points() { [ "$(call GET "/v1/history?series=cluster.gpus_total&from=$(($(date +%s) - 30))" "$ADMIN" | jq ".series[0].points | length")" -ge 5 ]; }
wait_for 30 five_points || fail "fewer than 5 points in 30 s"
# A point is [unix seconds, value], in the range, in steps of the answer's step.
call GET "/v1/history?series=cluster.gpus_total&from=$(($(date +%s) - 30))&step=2" "$ADMIN" >"$DIR/pts"
jq -e '.step == 2 and (.series[0].points | length) >= 2 and
    all(.series[0].points[]; .[0] >= $f and .[0] % 2 == 0) and .series[0].points[-1][1] == 4' \
    --argjson f $(($(date +%s) - 32)) "$DIR/pts" >/dev/null || fail "points: $(cat "$DIR/pts")"

# top=N: the N series of the highest mean over the range, highest first.
[ "$(call GET "/v1/history?series=tenant.vision.gpus_allocated,tenant.ml.gpus_allocated&top=1&from=$(($(date +%s) - 3))" "$ADMIN" |
    jq -r '[.series[].name] | join(",")')" = tenant.ml.gpus_allocated ] || fail "top=1 is not ml's allocation"
[ "$(call GET "/v1/history?series=gpu.*&top=3" "$ADMIN" | jq '.series | length')" = 3 ] || fail "top=3 of gpu.*"

# The user of ml: the cluster totals and ml's own series, nothing of vision's.
[ "$(code /v1/history "$ML")" = 200 ] || fail "listing as ml: $(cat "$DIR/body")"
names=$(jq -r '.series[].name' "$DIR/body" | sort | tr '\n' ' ')
for want in cluster.gpu_util cluster.gpus_allocated queue.pending queue.wait_s queue.wait_p90_s tenant.ml.gpus_allocated; do
    case " $names" in *" $want "*) ;; *) fail "ml's list lacks $want: $names" ;; esac
done
case "$names" in *vision* | *gpu.n1* | *node.n1*) fail "ml's list shows $names" ;; esac
[ "$(last tenant.vision.gpus_allocated "$ML")" = "" ] || fail "ml reads vision's allocation"
[ "$(last tenant.ml.gpus_allocated "$ML")" = 2 ] || fail "ml cannot read its own allocation"
[ "$(last cluster.gpus_allocated "$ML")" = 3 ] || fail "ml cannot read the cluster total"
[ "$(code "/v1/history?series=tenant.*,gpu.*,node.*" "$ML")" = 200 ] || fail "prefixes as ml: $(cat "$DIR/body")"
[ "$(jq -r '[.series[].name | select(startswith("tenant.ml.") | not)] | length' "$DIR/body")" = 0 ] ||
    fail "ml's prefix query shows $(jq -c '[.series[].name]' "$DIR/body")"
[ "$(code "/v1/history?series=*" "$VIS")" = 200 ] || fail "* as vision"
jq -r '.series[].name' "$DIR/body" | grep -q '^tenant\.ml\.' && fail "vision reads ml's series"
jq -r '.series[].name' "$DIR/body" | grep -q '^tenant\.vision\.gpus_allocated$' || fail "vision lacks its own"

# Bad ranges name the parameter.
now=$(date +%s)
[ "$(code "/v1/history?series=x&from=$now&to=$((now - 10))" "$ML")" = 400 ] && grep -q '"field":"from"' "$DIR/body" ||
    fail "from after to: $(cat "$DIR/body")"
[ "$(code "/v1/history?series=x&step=abc" "$ML")" = 400 ] && grep -q '"field":"step"' "$DIR/body" ||
    fail "step abc: $(cat "$DIR/body")"
[ "$(code "/v1/history?series=x&from=0&step=1" "$ML")" = 400 ] && grep -q '"field":"step"' "$DIR/body" ||
    fail "too many points: $(cat "$DIR/body")"
[ "$(code "/v1/history?bogus=1" "$ML")" = 400 ] && grep -q 'bogus' "$DIR/body" || fail "unknown parameter"
# 90 days back answers from the coarse ring (5 min at a 1 s step: 30 s).
[ "$(code "/v1/history?series=cluster.gpus_total&from=$((now - 90 * 86400))" "$ML")" = 200 ] &&
    jq -e '.resolution == 30' "$DIR/body" >/dev/null || fail "90 days: $(head -c 300 "$DIR/body")"
# POST /v1/history (admin): imported points read back like sampled ones, at
# the coarse resolution too (times rising, past; checked whole first).
post() { curl -s -o "$DIR/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $2" \
    -H 'Content-Type: application/json' --data "$3" "$SERVER$1"; }
t=$(($(date +%s) - 7200))
t=$((t / 120 * 120))
[ "$(post /v1/history "$ADMIN" "{\"series\":[{\"name\":\"tenant.ml.gpus_allocated\",\"points\":[[$t,5],[$((t + 60)),7]]},{\"name\":\"tenant.vision.gpus_allocated\",\"points\":[[$t,9]]}]}")" = 200 ] &&
    jq -e '.imported == 3 and .refused == 0' "$DIR/body" >/dev/null || fail "import: $(cat "$DIR/body")"
[ "$(call GET "/v1/history?series=tenant.ml.gpus_allocated&from=$t&to=$((t + 119))&step=60" "$ML" | jq -c '.series[0].points')" = "[[$t,5],[$((t + 60)),7]]" ] ||
    fail "imported points: $(call GET "/v1/history?series=tenant.ml.gpus_allocated&from=$t&to=$((t + 119))&step=60" "$ML")"
[ "$(call GET "/v1/history?series=tenant.ml.gpus_allocated&from=$t&to=$((t + 119))&step=120" "$ML" | jq -c '.series[0].points')" = "[[$t,6]]" ] ||
    fail "imported mean"
[ "$(call GET "/v1/history?series=tenant.*&from=$t&to=$((t + 119))" "$ML" | jq -r '[.series[].name] | join(",")')" = "tenant.ml.gpus_allocated,tenant.ml.gpu_util,tenant.ml.pending,tenant.ml.wait_s,tenant.ml.start_wait_s" ] ||
    fail "ml sees an imported series of vision's"
[ "$(post /v1/history "$ML" '{"series":[]}')" = 403 ] || fail "a user imports history"
[ "$(post /v1/history "$ADMIN" "{\"series\":[{\"name\":\"cluster.x\",\"points\":[[$t,1],[$t,2]]}]}")" = 400 ] &&
    grep -q '"field":"series\[0\].points\[1\]"' "$DIR/body" || fail "times not rising: $(cat "$DIR/body")"
[ "$(post /v1/history "$ADMIN" "{\"series\":[{\"name\":\"cluster.ok\",\"points\":[[$t,1]]},{\"name\":\"evil.x\",\"points\":[]}]}")" = 400 ] &&
    grep -q '"field":"series\[1\].name"' "$DIR/body" || fail "a bad name: $(cat "$DIR/body")"
[ "$(call GET "/v1/history?series=cluster.ok&from=$t" "$ADMIN" | jq '.series | length')" = 0 ] ||
    fail "a refused import wrote part of itself"
[ "$(post /v1/history "$ADMIN" "{\"series\":[{\"name\":\"cluster.x\",\"points\":[[$(($(date +%s) + 3600)),1]]}]}")" = 400 ] ||
    fail "a point in the future"

# /metrics: the pools' series counts and the memory they take
curl -s -H "Authorization: Bearer $ADMIN" "$SERVER/metrics" >"$DIR/metrics"
grep -q '^corral_history_series{kind="gpu"} 16$' "$DIR/metrics" || fail "GPU series: $(grep history "$DIR/metrics")"
other=$(sed -n 's/^corral_history_series{kind="other"} //p' "$DIR/metrics")
bytes=$(sed -n 's/^corral_history_bytes //p' "$DIR/metrics")
[ "$bytes" = $((16 * 42976 + other * 139720)) ] || fail "history bytes $bytes for 16 + $other series"
grep -q '^corral_history_values_refused_total 0$' "$DIR/metrics" || fail "refused values"
echo "ok - history"
