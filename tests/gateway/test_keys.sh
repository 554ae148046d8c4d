#!/bin/sh
# API keys, scopes and limits, OpenAI routes by model, token usage (issue
# 30): the real controller publishes the keys (corral keys create/revoke),
# a gateway with static services that declare their models and tenant
# verifies them; gw_helper serve is the model server (deterministic usage:
# a prompt token per 4 body bytes, 3 completion tokens).
. "$(dirname "$0")/lib.sh"

if "$CORRAL_BIN" controller --help 2>&1 | grep -q "not built yet"; then
    echo "corral controller not built: skipped"
    exit 77
fi
printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >"$T/ctl.json"
"$CORRAL_BIN" controller --config "$T/ctl.json" --state-dir "$T/st" --listen 127.0.0.1:0 \
    >ctl.out 2>ctl.log &
CTLPID=$!
PIDS="$PIDS $CTLPID"
wait_for 10 grep -q "listening on http" ctl.log ctl.out || fail "controller did not start"
CTL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' ctl.log ctl.out | head -1)
wait_for 10 test -s "$T/st/admin.token" || fail "no admin token"
TOK=$(cat "$T/st/admin.token")
C() { CORRAL_SERVER=$CTL CORRAL_TOKEN=$TOK "$CORRAL_BIN" "$@"; }
api() { curl -sf -H "Authorization: Bearer $TOK" "$@"; }
api -X POST "$CTL/v1/tenants" -d '{"name":"ml"}' >/dev/null || fail "tenant ml"
api -X POST "$CTL/v1/tenants" -d '{"name":"other"}' >/dev/null || fail "tenant other"

start_backend A
start_backend B
cat >gw.json <<JSON
{"controller": "$CTL", "token": "$TOK", "max_body_bytes": 4096, "report_interval_s": 0.3,
 "services": [
  {"name": "chat", "tenant": "ml", "models": ["llama-8b", "llama"],
   "endpoints": ["127.0.0.1:$PORT_A"]},
  {"name": "embed", "tenant": "ml", "models": ["embed-small"], "endpoints": ["127.0.0.1:$PORT_B"]},
  {"name": "rival", "tenant": "other", "models": ["rival-model"],
   "endpoints": ["127.0.0.1:$PORT_B"]}]}
JSON
start_gateway main --config gw.json
G=$GW_main
grep -q "api_keys=required" "$T/gw-main.log" || fail "keys are not required by default with a controller"

newkey() { C keys create "$@" 2>>keys.err; }
K1=$(newkey --tenant ml --name app) || fail "keys create: $(cat keys.err)"
case "$K1" in crk_*) ;; *) fail "key text: '$K1'" ;; esac
K2=$(newkey --tenant ml --name scoped --model llama-8b --concurrency 1) || fail "scoped key"
K3=$(newkey --tenant ml --name slowpoke --rps 2) || fail "rps key"
K4=$(newkey --tenant other --name rival) || fail "other tenant's key"
K5=$(newkey --tenant ml --name brief --expires 2s) || fail "expiring key"
C keys list >keys.txt || fail "keys list"
grep -q "slowpoke" keys.txt && ! grep -q "$K1" keys.txt || fail "list: $(cat keys.txt)"
api "$CTL/v1/keys" | grep -q crk_ && fail "the list shows key text"
api "$CTL/v1/keys/published" | grep -q "\"hash\"" || fail "no hashes published"

# req KEY PATH [BODY]: status on the first line of out.txt, the body after
req() {
    k=$1 p=$2; shift 2
    if [ $# -gt 0 ]; then
        curl -s -o body.txt -D head.txt -w '%{http_code}' ${k:+-H "Authorization: Bearer $k"} \
            -H 'Content-Type: application/json' --data "$1" "http://$G$p"
    else
        curl -s -o body.txt -D head.txt -w '%{http_code}' ${k:+-H "Authorization: Bearer $k"} \
            "http://$G$p"
    fi
}
expect() { # CODE TYPE ERRCODE: the last answer
    [ "$st" = "$1" ] || fail "want $1, got $st: $(cat body.txt)"
    [ -z "${2:-}" ] || grep -q "\"type\":\"$2\"" body.txt || fail "want type $2: $(cat body.txt)"
    [ -z "${3:-}" ] || grep -q "\"code\":\"$3\"" body.txt || fail "want code $3: $(cat body.txt)"
}
openai_hits() { curl -sf "http://127.0.0.1:$1/stats" | awk '/^openai/ {print $2}'; }
CHAT='{"model":"llama","messages":[{"role":"user","content":"hi"}]}'
keys_ready() { [ "$(req "$K1" /v1/models)" = 200 ]; }
wait_for 10 keys_ready || fail "the gateway never took the keys: $(cat body.txt)"

# No key, a malformed one, a wrong one: 401 in OpenAI's shape, no replica.
st=$(req "" /v1/chat/completions "$CHAT"); expect 401 authentication_error missing_api_key
grep -qi "^WWW-Authenticate: Bearer" head.txt || fail "401 without WWW-Authenticate"
st=$(curl -s -o body.txt -w '%{http_code}' -H "Authorization: Basic eDp5" \
    --data "$CHAT" "http://$G/v1/chat/completions"); expect 401 authentication_error invalid_api_key
st=$(req "crk_nosuchkeynosuchkeynosuchkeynosuchkeynosuch" /v1/chat/completions "$CHAT")
expect 401 authentication_error invalid_api_key
st=$(req "" /chat/x); expect 401 authentication_error missing_api_key
[ "$(openai_hits "$PORT_A")" = 0 ] || fail "an unauthenticated request reached a replica"

# Routed by model (aliases too), the key not forwarded.
st=$(req "$K1" /v1/chat/completions "$CHAT"); expect 200
grep -q '"hello from A"' body.txt || fail "chat: $(cat body.txt)"
st=$(req "$K1" /v1/chat/completions '{"model":"llama-8b","messages":[]}'); expect 200
st=$(req "$K1" /v1/completions '{"model":"llama-8b","prompt":"x"}'); expect 200
grep -q text_completion body.txt || fail "completions: $(cat body.txt)"
st=$(req "$K1" /v1/embeddings '{"model":"embed-small","input":"x"}'); expect 200
grep -q '"embedding"' body.txt || fail "embeddings: $(cat body.txt)"
grep -qi "^X-Replica: B" head.txt || fail "embeddings not on B: $(cat head.txt)"
[ "$(curl -sf "http://127.0.0.1:$PORT_A/stats" | awk '/^authorization/ {print $2}')" = 0 ] ||
    fail "the client's key reached the replica"

# Bad input: each a clear 4xx, none reaching a replica.
a0=$(openai_hits "$PORT_A") b0=$(openai_hits "$PORT_B")
st=$(req "$K1" /v1/chat/completions '{"messages":[]}'); expect 400 invalid_request_error model_required
st=$(req "$K1" /v1/chat/completions '{"model":7}'); expect 400 invalid_request_error model_required
st=$(req "$K1" /v1/chat/completions '{"model":"gpt-9"}'); expect 404 not_found_error model_not_found
grep -q 'gpt-9' body.txt || fail "the 404 does not name the model"
st=$(req "$K1" /v1/chat/completions 'not json'); expect 400 invalid_request_error invalid_json
st=$(req "$K1" /v1/chat/completions '{"model":"rival-model"}'); expect 404 not_found_error model_not_found
st=$(req "$K2" /v1/embeddings '{"model":"embed-small","input":"x"}')
expect 403 permission_error model_not_permitted
big=$(head -c 5000 /dev/zero | tr '\0' a)
st=$(req "$K1" /v1/chat/completions "{\"model\":\"llama\",\"prompt\":\"$big\"}")
expect 413 invalid_request_error request_too_large
st=$(curl -s -o body.txt -w '%{http_code}' -H "Authorization: Bearer $K1" -X GET \
    "http://$G/v1/chat/completions"); expect 405 invalid_request_error
[ "$(openai_hits "$PORT_A")" = "$a0" ] && [ "$(openai_hits "$PORT_B")" = "$b0" ] ||
    fail "a refused request reached a replica"

# /v1/models: what the key may use.
st=$(req "$K1" /v1/models); expect 200
for m in llama-8b llama embed-small; do grep -q "\"id\":\"$m\"" body.txt || fail "models: no $m"; done
grep -q rival-model body.txt && fail "models shows another tenant's model"
st=$(req "$K2" /v1/models); expect 200
[ "$(grep -o '"id":"[^"]*"' body.txt)" = '"id":"llama-8b"' ] || fail "scoped models: $(cat body.txt)"
st=$(req "$K4" /v1/models); expect 200
[ "$(grep -o '"id":"[^"]*"' body.txt)" = '"id":"rival-model"' ] || fail "rival models: $(cat body.txt)"

# requests/s: 2 per second, a burst of 2: the third at once is 429 + Retry-After.
codes=""
for i in 1 2 3 4; do codes="$codes $(req "$K3" /v1/chat/completions "$CHAT")"; done
case "$codes" in *429*) ;; *) fail "no 429 over the rps limit: $codes" ;; esac
st=429; expect 429 rate_limit_error rate_limit_exceeded
grep -qi "^Retry-After: [1-9]" head.txt || fail "429 without Retry-After"
# concurrency 1: a second request while one is under way.
curl -s -o /dev/null -H "Authorization: Bearer $K2" "http://$G/chat/slow?ms=1500" &
SLOW=$!
busy() { [ "$(metric_value "$G" 'corral_gateway_in_flight{service="chat"}')" = 1 ]; }
wait_for 5 busy || fail "the slow request did not start"
st=$(req "$K2" /v1/chat/completions '{"model":"llama-8b"}'); expect 429 rate_limit_error rate_limit_exceeded
wait "$SLOW"
st=$(req "$K2" /v1/chat/completions '{"model":"llama-8b"}'); expect 200

# Usage: non-streamed and streamed (the last chunk's usage), per key and tenant.
B1='{"model":"rival-model","messages":[{"role":"user","content":"count me"}]}'
B2='{"model":"rival-model","stream":true,"stream_options":{"include_usage":true},"messages":[]}'
st=$(req "$K4" /v1/chat/completions "$B1"); expect 200
st=$(req "$K4" /v1/chat/completions "$B2"); expect 200
grep -q '"usage":{"prompt_tokens":' body.txt || fail "no usage in the stream: $(cat body.txt)"
grep -q 'data: \[DONE\]' body.txt || fail "stream not whole: $(cat body.txt)"
p1=$((${#B1} / 4)) p2=$((${#B2} / 4))
K4ID=$(api "$CTL/v1/keys" | grep -o '"id":[0-9]*,"tenant":"other"' | grep -o '[0-9]*' | head -1)
tok_is() { metric_is "$G" "corral_gateway_key_tokens_total{tenant=\"other\",key=\"$K4ID\",kind=\"$1\"}" "$2"; }
tok_is prompt $((p1 + p2)) || fail "prompt tokens: $(metrics "$G" | grep key_tokens)"
tok_is completion 6 || fail "completion tokens: $(metrics "$G" | grep key_tokens)"
metric_is "$G" 'corral_gateway_tenant_tokens_total{tenant="other",kind="completion"}' 6 ||
    fail "tenant tokens: $(metrics "$G" | grep tenant_tokens)"
counted() { C usage | grep -Eq "^other +3 +$((p1 + p2)) +6 +$((p1 + p2 + 6))"; }
wait_for 10 counted || fail "corral usage: $(C usage)"
C usage | grep -Eq "^ *$K4ID +other +rival +3 +$((p1 + p2)) +6 " || fail "corral usage per key: $(C usage)"
if command -v promtool >/dev/null; then
    metrics "$G" | promtool check metrics || fail "promtool"
fi

# Tokens per minute (taken after each answer from a bucket of that size)
# and a token budget over every gateway: each answer here is 3 completion
# tokens and a prompt token per 4 body bytes (CHAT: 15 + 3 = 18).
K6=$(newkey --tenant ml --name tpm --tpm 20) || fail "tpm key"
K7=$(newkey --tenant other --name budget --token-budget 30) || fail "budget key"
C keys list >keys.txt || fail "keys list"
grep -Eq " tpm .* 20 +- " keys.txt && grep -Eq " budget .* - +30 " keys.txt ||
    fail "keys list shows no TPM/BUDGET: $(cat keys.txt)"
st=$(curl -s -o body.txt -w '%{http_code}' -H "Authorization: Bearer $TOK" -X POST     "$CTL/v1/keys" -d '{"tenant":"ml","tpm":-5}'); [ "$st" = 400 ] && grep -q "tpm" body.txt ||
    fail "a negative tpm: $st $(cat body.txt)"
keys_now() { [ "$(req "$K6" /v1/models)" = 200 ] && [ "$(req "$K7" /v1/models)" = 200 ]; }
wait_for 10 keys_now || fail "the gateway never took the tpm/budget keys: $(cat body.txt)"
st=$(req "$K6" /v1/chat/completions "$CHAT"); expect 200 # 20 - 18 = 2 left
st=$(req "$K6" /v1/chat/completions "$CHAT"); expect 200 # 2 > 0: admitted, then -16
st=$(req "$K6" /v1/chat/completions "$CHAT"); expect 429 rate_limit_error rate_limit_exceeded
grep -q "tokens per minute" body.txt || fail "tpm 429 does not say why: $(cat body.txt)"
grep -qi "^Retry-After: [1-9]" head.txt || fail "tpm 429 without Retry-After"
metric_is "$G" "corral_gateway_key_limited_total{tenant=\"ml\",key=\"$(api "$CTL/v1/keys" |
    grep -o '"id":[0-9]*,"tenant":"ml","name":"tpm"' | grep -o '[0-9]*' | head -1)\",limit=\"tpm\"}" 1 ||
    fail "tpm limited metric: $(metrics "$G" | grep key_limited)"
RB='{"model":"rival-model","messages":[{"role":"user","content":"hi"}]}'
st=$(req "$K7" /v1/chat/completions "$RB"); expect 200 # 16 + 3 = 19 of 30
st=$(req "$K7" /v1/chat/completions "$RB"); expect 200 # 38: spent
st=$(req "$K7" /v1/chat/completions "$RB"); expect 429 insufficient_quota insufficient_quota
grep -qi "^Retry-After" head.txt && fail "a spent budget's 429 carries a Retry-After"
# Another gateway, which never served the key, refuses it once the
# controller has the count: the crossing is published to every gateway.
start_gateway two --config gw.json
spent_there() {
    [ "$(curl -s -o body2.txt -w '%{http_code}' -H "Authorization: Bearer $K7" \
        -H 'Content-Type: application/json' --data "$RB" "http://$GW_two/v1/chat/completions")" = 429 ]
}
wait_for 10 spent_there || fail "the second gateway serves a spent key: $(cat body2.txt)"
grep -q insufficient_quota body2.txt || fail "second gateway: $(cat body2.txt)"
stop_gateway two

# Expired and revoked keys stop working; the revoke within seconds.
sleep_until_expired() { [ "$(req "$K5" /v1/models)" = 401 ]; }
wait_for 10 sleep_until_expired || fail "the expired key still works"
grep -q expired_api_key body.txt || fail "expiry: $(cat body.txt)"
K1ID=$(api "$CTL/v1/keys" | grep -o '"id":[0-9]*,"tenant":"ml","name":"app"' | grep -o '[0-9]*' | head -1)
C keys revoke "$K1ID" >/dev/null || fail "keys revoke"
t0=$(date +%s%N)
revoked() { [ "$(req "$K1" /v1/chat/completions "$CHAT")" = 401 ]; }
wait_for 5 revoked || fail "the revoked key still works"
echo "revoked key refused after $((($(date +%s%N) - t0) / 1000000)) ms"
C keys list | grep -q "revoked" || fail "list: no revoked key"
st=$(req "$K2" /v1/chat/completions '{"model":"llama-8b"}'); expect 200

# Keys, revocations and counted usage survive a controller restart.
used_before=$(api "$CTL/v1/keys/usage" | grep -o '"id":'"$K4ID"',"tenant":"other","name":"rival","requests":[0-9]*')
kill -TERM "$CTLPID"
wait_exit 20 "$CTLPID" || fail "the controller did not stop"
"$CORRAL_BIN" controller --config "$T/ctl.json" --state-dir "$T/st" --listen 127.0.0.1:0 \
    >ctl2.out 2>ctl2.log &
PIDS="$PIDS $!"
wait_for 10 grep -q "listening on http" ctl2.log ctl2.out || fail "controller did not restart"
CTL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' ctl2.log ctl2.out | head -1)
[ "$(api "$CTL/v1/keys/usage" | grep -o '"id":'"$K4ID"',"tenant":"other","name":"rival","requests":[0-9]*')" = "$used_before" ] ||
    fail "usage after the restart: $(api "$CTL/v1/keys/usage") (before: $used_before)"
C keys list | grep -Eq "^ *$K1ID +ml +app .* revoked" || fail "revoke lost in the restart: $(C keys list)"
api "$CTL/v1/keys/published" | grep -q "\"id\":$K1ID," && fail "a revoked key is published after the restart"
[ "$(api "$CTL/v1/keys/published" | grep -o '"hash"' | wc -l)" = 6 ] ||
    fail "published after the restart: $(api "$CTL/v1/keys/published")"
stop_gateway main
echo "keys ok"
