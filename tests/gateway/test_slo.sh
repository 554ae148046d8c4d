#!/bin/sh
# Serving SLOs (issue 30): the replica stand-in models token timing (a
# prefill of GW_PREFILL_US per uncached prompt byte, GW_TPOT_MS between
# streamed tokens); the gateway's TTFT, TPOT and tokens/s histograms count
# the streamed completions (not the others) with values the timing bounds
# from below, promtool accepts them, and the load reports carry the p95s.
# Then the real controller: a service with target {"ttft_ms", "tpot_ms"}
# scales up when the reported p95 TTFT is over its target, says so in its
# events, and bad targets and reports are refused naming the field.
. "$(dirname "$0")/lib.sh"

export GW_PREFIX_CACHE=64 GW_PREFILL_US=1000 GW_TPOT_MS=30
start_backend A
unset GW_PREFIX_CACHE GW_PREFILL_US GW_TPOT_MS
printf '{"version":1,"models":["llama"],"target":{"ttft_ms":30000,"tpot_ms":1},"endpoints":[{"addr":"127.0.0.1","port":%s,"ready":true}]}\n' \
    "$PORT_A" >eps.json
"$GW_HELPER" ctl 0 "$T/eps.json" >ctl.out 2>ctl.log &
PIDS="$PIDS $!"
wait_for 10 grep -q listening ctl.out || fail "fake controller did not start"
CTL=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' ctl.out)
start_gateway main --no-require-keys --controller "http://127.0.0.1:$CTL" --token t0k --service chat \
    --report-interval 200ms
G=$GW_main
routed() { curl -sf "http://$G/v1/models" | grep -q '"llama"'; }
wait_for 10 routed || fail "the model did not reach the gateway: $(curl -s "http://$G/v1/models")"

# chat N STREAM [USAGE]: N chat completions with distinct ~200-byte prompts
# (each an uncached prefill of about 200 ms at the stand-in).
chat() {
    i=0
    while [ "$i" -lt "$1" ]; do
        opts=""
        [ "${3:-}" = usage ] && opts=',"stream_options":{"include_usage":true}'
        curl -sf -o c.out "http://$G/v1/chat/completions" -H 'Content-Type: application/json' \
            -d "{\"model\":\"llama\",\"stream\":$2$opts,\"messages\":[{\"role\":\"user\",\"content\":\"$i $2 ${3:-} tell me about the cluster and its GPUs, the queue, the partitions, and the jobs of every tenant, at length, please, with examples\"}]}" ||
            fail "chat $i: $(cat c.out)"
        grep -qE "from A|\"content\":\"A\"" c.out || fail "chat $i answered: $(cat c.out)"
        i=$((i + 1))
    done
}
chat 3 true
chat 3 true usage
chat 2 false

curl -sf "http://$G/metrics" >m.txt || fail "metrics"
v() { awk -v k="$1" '$1 == k { print $2 }' m.txt; }
[ "$(v 'corral_gateway_ttft_seconds_count{service="chat"}')" = 6 ] ||
    fail "TTFT count: $(grep ttft m.txt)" # the 2 non-streamed are not counted
[ "$(v 'corral_gateway_tpot_seconds_count{service="chat"}')" = 6 ] || fail "TPOT count: $(grep tpot m.txt)"
[ "$(v 'corral_gateway_output_tokens_per_second_count{service="chat"}')" = 6 ] ||
    fail "tokens/s count: $(grep tokens_per m.txt)"
[ "$(v 'corral_gateway_output_tokens_total{service="chat"}')" = 18 ] ||
    fail "output tokens (3 a completion, with usage or by events): $(grep output_tokens_total m.txt)"
# Lower bounds from the stand-in's sleeps: a prefill of >= 100 ms; >= 30 ms between tokens.
awk '$1 == "corral_gateway_ttft_seconds_sum{service=\"chat\"}" { exit !($2 / 6 >= 0.1) }' m.txt ||
    fail "mean TTFT under the modelled prefill: $(grep ttft_seconds_sum m.txt)"
awk '$1 == "corral_gateway_tpot_seconds_sum{service=\"chat\"}" { exit !($2 / 6 >= 0.029) }' m.txt ||
    fail "mean TPOT under the modelled 30 ms: $(grep tpot_seconds_sum m.txt)"
awk '$1 == "corral_gateway_ttft_seconds_bucket{service=\"chat\",le=\"0.05\"}" { exit !($2 == 0) }' m.txt ||
    fail "a TTFT under 50 ms: $(grep ttft_seconds_bucket m.txt)"
# The service's targets (from the controller's spec) and attainment: every
# TTFT within 30 s, no TPOT within 1 ms (the stand-in sleeps 30 ms a token).
[ "$(v 'corral_gateway_slo_target_seconds{service="chat",slo="ttft"}')" = 30 ] &&
    [ "$(v 'corral_gateway_slo_target_seconds{service="chat",slo="tpot"}')" = 0.001 ] ||
    fail "SLO targets: $(grep slo_target m.txt)"
[ "$(v 'corral_gateway_slo_met_total{service="chat",slo="ttft"}')" = 6 ] &&
    [ "$(v 'corral_gateway_slo_met_total{service="chat",slo="tpot"}')" = 0 ] ||
    fail "SLO attainment: $(grep slo_met m.txt)"
if command -v promtool >/dev/null; then
    promtool check metrics <m.txt >promtool.out 2>&1 || fail "promtool: $(cat promtool.out)"
fi
# The load report carries the p95s (ms) the autoscaler follows.
reported() { grep -qE '"ttft_p95_ms":[0-9.]+,"tpot_p95_ms":[0-9.]+' eps.json.metrics; }
wait_for 10 reported || fail "no SLO signals in the reports: $(tail -2 eps.json.metrics)"
grep -oE '"ttft_p95_ms":[0-9.]+' eps.json.metrics | tail -1 | awk -F: '{ exit !($2 >= 100) }' ||
    fail "reported p95 TTFT: $(grep -oE '"ttft_p95_ms":[0-9.]+' eps.json.metrics | tail -1)"
stop_gateway main

# A static service's targets in the config; bad ones name the member.
printf '{"services":[{"name":"s","models":["m"],"slo":{"ttft_ms":500,"tpot_ms":40},"endpoints":["127.0.0.1:%s"]}]}\n' \
    "$PORT_A" >st.json
start_gateway st --config st.json
metric_is "$GW_st" 'corral_gateway_slo_target_seconds{service="s",slo="tpot"}' 0.04 ||
    fail "static SLO target: $(metrics "$GW_st" | grep slo_target)"
stop_gateway st
printf '{"services":[{"name":"s","slo":{"ttft_ms":-1},"endpoints":["127.0.0.1:9"]}]}\n' >bad.json
rc=0
"$CORRAL_BIN" gateway --listen 127.0.0.1:0 --config bad.json 2>bad.err || rc=$?
[ "$rc" = 2 ] && grep -qF 'services[0].slo.ttft_ms' bad.err || fail "a bad SLO: exit $rc $(cat bad.err)"

# The real controller's autoscaler follows the TTFT target.
if "$CORRAL_BIN" controller --help 2>&1 | grep -q "not built yet"; then
    echo "corral controller not built: the autoscaler part skipped"
    echo "slo ok"
    exit 0
fi
printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >ctl.json
"$CORRAL_BIN" controller --config ctl.json --state-dir "$T/st" --listen 127.0.0.1:0 >c.out 2>c.log &
PIDS="$PIDS $!"
wait_for 10 grep -q "listening on http" c.log c.out || fail "controller did not start"
URL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' c.log c.out | head -1)
wait_for 10 test -s "$T/st/admin.token" || fail "no admin token"
TOK=$(cat "$T/st/admin.token")
api() { curl -s -H "Authorization: Bearer $TOK" -X "$1" "$URL$2" ${3:+-d "$3"}; }
r=$(api POST /v1/services '{"name":"x","command":["srv"],"target":{"concurrency":2,"ttft_ms":100}}')
echo "$r" | grep -q '"field": *"target"' || fail "concurrency and ttft_ms together: $r"
r=$(api POST /v1/services '{"name":"x","command":["srv"],"target":{"ttft_ms":-5}}')
echo "$r" | grep -q 'target.ttft_ms' || fail "a negative ttft_ms: $r"
CORRAL_SERVER=$URL CORRAL_TOKEN=$TOK "$CORRAL_BIN" services create llm --min 1 --max 4 \
    --ttft-ms 100 --tpot-ms 50 -- srv >create.out 2>&1 || fail "services create: $(cat create.out)"
api GET /v1/services/llm | grep -q '"target":{"ttft_ms":100.0*,"tpot_ms":50.0*}' ||
    fail "the CLI's target: $(api GET /v1/services/llm)"
CORRAL_SERVER=$URL CORRAL_TOKEN=$TOK "$CORRAL_BIN" services create bad --p95-ms 5 --ttft-ms 100 \
    -- srv >bad.out 2>&1 && fail "two kinds of target accepted"
grep -q "give one target" bad.out || fail "two targets: $(cat bad.out)"
r=$(api POST /v1/services/llm/metrics '{"in_flight":2,"rps":5,"ttft_p95_ms":"slow"}')
echo "$r" | grep -q 'ttft_p95_ms' || fail "a bad ttft_p95_ms: $r"
# p95 TTFT 400 ms against 100 ms (TPOT within its target): scale up.
report() { api POST /v1/services/llm/metrics '{"in_flight":2,"rps":5,"p95_ms":900,"ttft_p95_ms":400,"tpot_p95_ms":20}' >/dev/null; }
desired() { api GET /v1/services/llm | python3 -c 'import json,sys; print(json.load(sys.stdin)["desired_replicas"])'; }
scaled() { report; [ "$(desired)" -gt 1 ]; }
wait_for 20 scaled || fail "no scale-up with p95 TTFT 4x its target: desired $(desired)"
api GET /v1/services/llm >svc.json
grep -q 'TTFT/TPOT p95 400 ms against a target of 100 ms' svc.json ||
    fail "the event does not name the TTFT: $(cat svc.json)"
grep -q '"ttft_p95_ms": *400' svc.json || fail "load does not show the TTFT: $(cat svc.json)"
echo "slo ok"
