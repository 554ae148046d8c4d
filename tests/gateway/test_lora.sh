#!/bin/sh
# LoRA adapters (issue 30): a service declares its base model and the
# adapters its replicas hold; a request naming an adapter goes only to a
# replica that holds it (A holds every adapter, B only "sql", C none);
# /v1/models lists the adapters with their base as parent; with no holder
# left (a reload took A away) an adapter's request is a 503 in OpenAI's
# shape at once, not held; bad adapter config names the member. Then a
# controller-managed service's adapters reach a gateway that follows it.
. "$(dirname "$0")/lib.sh"

start_backend A
start_backend B
start_backend C
conf() { # the endpoints' JSON
    cat >gw.json <<JSON
{"services": [{"name": "chat", "models": ["llama-8b", "llama"], "adapters": ["sql", "support"],
  "endpoints": [$1]}]}
JSON
}
ALL="\"127.0.0.1:$PORT_A\", {\"address\": \"127.0.0.1:$PORT_B\", \"adapters\": [\"sql\"]},
     {\"address\": \"127.0.0.1:$PORT_C\", \"adapters\": []}"
conf "$ALL"
start_gateway main --config gw.json
G=$GW_main

curl -sf "http://$G/v1/models" >models.json || fail "/v1/models"
python3 - models.json <<'PY' || fail "models: $(cat models.json)"
import json, sys
d = {m["id"]: m for m in json.load(open(sys.argv[1]))["data"]}
assert sorted(d) == ["llama", "llama-8b", "sql", "support"], sorted(d)
assert d["sql"]["parent"] == "llama-8b" and d["support"]["parent"] == "llama-8b", d
assert "parent" not in d["llama"], d
PY

# ask MODEL N: N chat completions; the replicas that answered, one a line.
ask() {
    i=0
    : >replicas.txt
    while [ "$i" -lt "$2" ]; do
        curl -sf -D h.txt -o b.txt "http://$G/v1/chat/completions" -H 'Content-Type: application/json' \
            -d "{\"model\":\"$1\",\"messages\":[{\"role\":\"user\",\"content\":\"q $i\"}]}" ||
            fail "$1 request $i: $(cat b.txt)"
        grep -q "\"model\":\"$1\"" b.txt || fail "the replica was not asked for $1: $(cat b.txt)"
        sed -n 's/^X-Replica: \([A-Z]*\).*/\1/p' h.txt >>replicas.txt
        i=$((i + 1))
    done
}
seen() { sort -u replicas.txt | tr '\n' ' '; }

ask sql 30
[ "$(seen)" = "A B " ] || fail "sql went to: $(seen) (want A and B, never C)"
ask support 20
[ "$(seen)" = "A " ] || fail "support went to: $(seen) (want A alone)"
ask llama-8b 30
[ "$(seen)" = "A B C " ] || fail "the base model went to: $(seen) (want every replica)"
metric_is "$G" 'corral_gateway_adapter_requests_total{service="chat",adapter="sql"}' 30 &&
    metric_is "$G" 'corral_gateway_adapter_requests_total{service="chat",adapter="support"}' 20 ||
    fail "adapter counters: $(metrics "$G" | grep adapter_requests)"

# A gone (reload): nobody holds "support": 503 at once; "sql" goes to B.
conf "{\"address\": \"127.0.0.1:$PORT_B\", \"adapters\": [\"sql\"]}, \"127.0.0.1:$PORT_C\""
sed -i "s/\"127.0.0.1:$PORT_C\"\]/{\"address\": \"127.0.0.1:$PORT_C\", \"adapters\": []}]/" gw.json
kill -HUP "$GWPID_main"
a_gone() { metrics "$G" >m.txt && ! grep -q "replica=\"127.0.0.1:$PORT_A\"} 1" m.txt; }
wait_for 10 a_gone || fail "A not drained after the reload: $(metrics "$G" | grep replica_up)"
code=$(curl -s -o no.json -w '%{http_code}' "http://$G/v1/chat/completions" \
    -d '{"model":"support","messages":[{"role":"user","content":"x"}]}')
[ "$code" = 503 ] && grep -q '"code":"adapter_not_loaded"' no.json ||
    fail "support with no holder: $code $(cat no.json)"
ask sql 5
[ "$(seen)" = "B " ] || fail "sql after the reload went to: $(seen)"
# Back again: support is served by A once more.
conf "$ALL"
kill -HUP "$GWPID_main"
a_back() { metrics "$G" | grep -q "replica=\"127.0.0.1:$PORT_A\"} 1"; }
wait_for 10 a_back || fail "A not back after the reload"
ask support 3
[ "$(seen)" = "A " ] || fail "support after A came back went to: $(seen)"
# The counters outlive reloads that keep the list (30 + 5 sql, 20 + 3 support).
metric_is "$G" 'corral_gateway_adapter_requests_total{service="chat",adapter="sql"}' 35 &&
    metric_is "$G" 'corral_gateway_adapter_requests_total{service="chat",adapter="support"}' 23 ||
    fail "adapter counters after the reloads: $(metrics "$G" | grep adapter_requests)"
stop_gateway main

# Scraped (vLLM's vllm:lora_requests_info): a replica where the adapter is
# active already is preferred among those that hold it. D says "sql" is
# running; E says nothing of adapters; both hold every adapter.
GW_LORA_RUNNING=sql,ops
export GW_LORA_RUNNING
start_backend D
unset GW_LORA_RUNNING
start_backend E
cat >scr.json <<JSON
{"services": [{"name": "chat", "models": ["llama-8b"], "adapters": ["sql", "old"], "scrape_metrics": true,
  "endpoints": ["127.0.0.1:$PORT_D", "127.0.0.1:$PORT_E"]}]}
JSON
start_gateway scr --config scr.json --probe-interval 100ms
G=$GW_scr
active() { metric_is "$G" "corral_gateway_replica_adapter_active{service=\"chat\",replica=\"127.0.0.1:$PORT_D\",adapter=\"sql\"}" 1; }
wait_for 10 active || fail "D's active adapters not scraped: $(metrics "$G" | grep adapter_active)"
metric_is "$G" "corral_gateway_replica_adapter_active{service=\"chat\",replica=\"127.0.0.1:$PORT_D\",adapter=\"old\"}" 0 ||
    fail "the older lora_requests_info sample was taken: $(metrics "$G" | grep adapter_active)"
ask sql 20
[ "$(seen)" = "D " ] || fail "sql went to: $(seen) (want D, where it is active)"
ask old 20
[ "$(seen)" = "D E " ] || fail "old (active nowhere) went to: $(seen) (want both)"
stop_gateway scr

# Bad adapter configuration: exit 2, the member named.
bad() { # WANT SERVICE-JSON
    printf '{"services": [%s]}\n' "$2" >bad.json
    rc=0
    "$CORRAL_BIN" gateway --listen 127.0.0.1:0 --config bad.json 2>bad.err || rc=$?
    [ "$rc" = 2 ] && grep -qF -- "$1" bad.err || fail "$2: exit $rc, $(cat bad.err)"
}
bad 'services[0].endpoints[0].adapters[0]: is not one of the service' \
    '{"name": "s", "models": ["m"], "adapters": ["a"], "endpoints": [{"address": "127.0.0.1:9", "adapters": ["b"]}]}'
bad 'services[0].adapters: need the base model' \
    '{"name": "s", "adapters": ["a"], "endpoints": ["127.0.0.1:9"]}'
bad 'services[0].adapters[0]: is also one of the service' \
    '{"name": "s", "models": ["m"], "adapters": ["m"], "endpoints": ["127.0.0.1:9"]}'
bad 'services[0].adapters[1]: is listed twice' \
    '{"name": "s", "models": ["m"], "adapters": ["a", "a"], "endpoints": ["127.0.0.1:9"]}'
bad 'services[0].endpoints[0].port: unknown member' \
    '{"name": "s", "models": ["m"], "endpoints": [{"address": "127.0.0.1:9", "port": 1}]}'
# From the controller: a service's adapters (corral services create
# --adapters) reach a gateway that follows it; bad ones are refused by name.
if "$CORRAL_BIN" controller --help 2>&1 | grep -q "not built yet"; then
    echo "corral controller not built: the controller part skipped"
    echo "lora ok"
    exit 0
fi
printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >ctl.json
"$CORRAL_BIN" controller --config ctl.json --state-dir "$T/st" --listen 127.0.0.1:0 >c.out 2>c.log &
PIDS="$PIDS $!"
wait_for 10 grep -q "listening on http" c.log c.out || fail "controller did not start"
URL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' c.log c.out | head -1)
wait_for 10 test -s "$T/st/admin.token" || fail "no admin token"
TOK=$(cat "$T/st/admin.token")
C() { CORRAL_SERVER=$URL CORRAL_TOKEN=$TOK "$CORRAL_BIN" "$@"; }
C services create llm --model llama-8b,llama --adapters sql,support -- srv >create.out 2>&1 ||
    fail "services create --adapters: $(cat create.out)"
C services create bad1 --model m --adapters m -- srv >bad1.out 2>&1 && fail "an adapter named as a model accepted"
grep -q "adapters\[0\]" bad1.out || fail "bad adapter: $(cat bad1.out)"
C services create bad2 --adapters a -- srv >bad2.out 2>&1 && fail "adapters without a model accepted"
grep -q "needs the base model" bad2.out || fail "adapters without a model: $(cat bad2.out)"
start_gateway ctl --controller "$URL" --token "$TOK" --no-require-keys
listed() {
    curl -sf "http://$GW_ctl/v1/models" >cm.json &&
        python3 -c 'import json,sys; d={m["id"]: m.get("parent") for m in json.load(open(sys.argv[1]))["data"]}; sys.exit(d != {"llama-8b": None, "llama": None, "sql": "llama-8b", "support": "llama-8b"})' cm.json
}
wait_for 10 listed || fail "the controller's adapters did not reach the gateway: $(cat cm.json)"
stop_gateway ctl
echo "lora ok"
