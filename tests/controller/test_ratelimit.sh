#!/bin/bash
# The controller's request rate limits (docs/operations.md, "Request rate
# limits"): the real controller on loopback with a rate so slow (0.001 a
# second) that nothing refills during the test, so every assertion is a
# count: a user token's 4th request with burst 3 is 429 with Retry-After
# and the error body naming the limit, while at the same moment another
# tenant's token, an admin token and an agent's heartbeats get 200; bad
# tokens are limited per client address (another loopback address is
# not); the bucket tables stay at rate_limit_table however many tokens and
# addresses come; the CLI says why it does not wait; config errors name the
# field or flag.
# (no pipefail: "grep ... | grep -q" below must not fail on a SIGPIPE)
set -eu
BIN=${CORRAL_BIN:?CORRAL_BIN not set}
# $DIR, fail (with the log's tail) and the stop of the controller (PIDS) on
# exit or a signal.
. "$(dirname "$0")/../integration/lib.sh"
cr_setup ratelim
T=$DIR
unset CORRAL_SERVER CORRAL_TOKEN CORRAL_TOKEN_FILE
export CORRAL_CONFIG=/dev/null

# --- config errors name the field or the flag --------------------------------
bad_config() { # bad_config JSON WORD: refused at start, the message names WORD
    echo "$1" >"$T/bad.json"
    if "$BIN" controller --config "$T/bad.json" --state-dir "$T/never" >"$T/bad.out" 2>&1; then
        fail "config $1 accepted"
    fi
    grep -q "$2" "$T/bad.out" || fail "config $1: message does not name $2: $(cat "$T/bad.out")"
}
bad_config '{"rate_limit_rps": -1}' "field 'rate_limit_rps'"
bad_config '{"rate_limit_burst": 0}' "field 'rate_limit_burst'"
bad_config '{"rate_limit_anon_rps": "fast"}' "field 'rate_limit_anon_rps'"
bad_config '{"rate_limit_anon_burst": 1.5}' "field 'rate_limit_anon_burst'"
bad_config '{"rate_limit_table": 15}' "field 'rate_limit_table'"
for f in "--rate-limit-rps -2" "--rate-limit-burst 0" "--rate-limit-anon-rps x" \
    "--rate-limit-anon-burst 2000000" "--rate-limit-table 1"; do
    # shellcheck disable=SC2086
    if "$BIN" controller $f --state-dir "$T/never" >"$T/bad.out" 2>&1; then
        fail "flag $f accepted"
    fi
    grep -q -- "${f% *}:" "$T/bad.out" || fail "flag $f: message does not name it: $(cat "$T/bad.out")"
done
[ ! -e "$T/never" ] || fail "a refused config created the state directory"

# --- a controller with a tiny rate --------------------------------------------
cat >"$T/cfg.json" <<'JSON'
{"rate_limit_rps": 0.001, "rate_limit_burst": 3,
 "rate_limit_anon_rps": 0.001, "rate_limit_anon_burst": 5, "rate_limit_table": 16}
JSON
"$BIN" controller --listen 127.0.0.1:0 --state-dir "$T/state" --config "$T/cfg.json" \
    --allow-legacy-join >"$T/ctl.log" 2>&1 &
PID=$!
PIDS=("$PID")
i=0
until [ -s "$T/state/listen.addr" ] && [ -s "$T/state/admin.token" ]; do
    i=$((i + 1))
    [ $i -lt 400 ] || fail "the controller did not start"
    sleep 0.05
done
URL=$(cat "$T/state/listen.addr")
ADMIN=$(cat "$T/state/admin.token")

# code TOKEN [CURL ARGS...] PATH: the status of one request ("" token: none)
code() {
    tok=$1
    shift
    if [ -n "$tok" ]; then
        curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$@"
    else
        curl -s -m 10 -o /dev/null -w '%{http_code}' "$@"
    fi
}
# admin requests are not limited: set-up and checks use them freely
admin() { # admin METHOD PATH [BODY]
    curl -s -m 10 -X "$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        ${3:+-d "$3"} "$URL$2"
}
i=0
until [ "$(code "$ADMIN" "$URL/v1/whoami")" = 200 ]; do
    i=$((i + 1))
    [ $i -lt 400 ] || fail "the controller does not answer"
    sleep 0.05
done
admin POST /v1/tenants '{"name":"ta"}' >/dev/null
admin POST /v1/tenants '{"name":"tb"}' >/dev/null
UA=$(admin POST /v1/tokens '{"role":"user","tenant":"ta","name":"alice"}' | jq -r .token)
UB=$(admin POST /v1/tokens '{"role":"user","tenant":"tb","name":"bob"}' | jq -r .token)
case "$UA$UB" in *crl_*crl_*) ;; *) fail "tokens not minted" ;; esac

# an agent: registered with the legacy join token (one request of the join
# token's bucket), then heartbeats with its node token
JOIN=$(cat "$T/state/join.token")
NODE_TOK=$(curl -s -m 10 -H "Authorization: Bearer $JOIN" -H 'Content-Type: application/json' \
    -d '{"node":"n1","addr":"127.0.0.1","port":1,"gpus":[]}' "$URL/v1/agents/register" |
    jq -r .node_token)
case "$NODE_TOK" in crl_*) ;; *) fail "agent registration: $NODE_TOK" ;; esac
beat() { code "$NODE_TOK" -H 'Content-Type: application/json' -d '{"gpus":[],"jobs":[]}' \
    "$URL/v1/agents/n1/status"; }

# --- a user over its limit ----------------------------------------------------
# One curl, six requests on one connection: 3 pass (the burst), 3 are 429.
codes=$(curl -s -m 20 -H "Authorization: Bearer $UA" -w '%{http_code}\n' -o /dev/null \
    "$URL/v1/jobs" -o /dev/null "$URL/v1/jobs" -o /dev/null "$URL/v1/jobs" \
    -o /dev/null "$URL/v1/jobs" -o /dev/null "$URL/v1/jobs" -o /dev/null "$URL/v1/jobs" | tr '\n' ' ')
[ "$codes" = "200 200 200 429 429 429 " ] || fail "user burst 3: got $codes"
# the 429: Retry-After, the API's error body naming the limit
curl -s -m 10 -D "$T/h" -o "$T/b" -H "Authorization: Bearer $UA" "$URL/v1/jobs"
head -1 "$T/h" | grep -q ' 429' || fail "not 429: $(head -1 "$T/h")"
ra=$(tr -d '\r' <"$T/h" | sed -n 's/^[Rr]etry-[Aa]fter: *//p')
[ "$ra" -ge 900 ] && [ "$ra" -le 1000 ] || fail "Retry-After '$ra' (expected ~1000 s at 0.001/s)"
[ "$(jq -r .error "$T/b")" = CR_EAGAIN ] || fail "error: $(cat "$T/b")"
[ "$(jq -r .limit "$T/b")" = rate_limit_rps ] || fail "limit: $(cat "$T/b")"
[ "$(jq -r .retry_after_s "$T/b")" = "$ra" ] || fail "retry_after_s: $(cat "$T/b")"
jq -r .message "$T/b" | grep -q "rate limit: this token" || fail "message: $(cat "$T/b")"
# a limited POST does nothing (no job, no audit entry)
[ "$(code "$UA" -H 'Content-Type: application/json' -d '{"command":["true"]}' "$URL/v1/jobs")" = 429 ] ||
    fail "a limited submit was not 429"
[ "$(admin GET /v1/jobs | jq .total)" = 0 ] || fail "a limited submit made a job"

# at the same moment: a flood from alice in the background, and another
# tenant, the admin and the agent's heartbeats in the foreground all pass
(for _ in $(seq 1 100); do code "$UA" "$URL/v1/jobs" >/dev/null; done) &
FLOOD=$!
[ "$(code "$UB" "$URL/v1/jobs")" = 200 ] || fail "another tenant's token was limited"
[ "$(code "$UB" "$URL/v1/whoami")" = 200 ] || fail "another tenant's 2nd request"
for _ in $(seq 1 20); do
    [ "$(beat)" = 200 ] || fail "an agent heartbeat was not 200 during a user flood"
    [ "$(code "$ADMIN" "$URL/v1/nodes")" = 200 ] || fail "the admin was limited"
done
wait $FLOOD
[ "$(code "$UB" "$URL/v1/jobs")" = 200 ] || fail "another tenant's 3rd request"
[ "$(code "$UB" "$URL/v1/jobs")" = 429 ] || fail "another tenant's 4th request was not limited"

# the CLI: a limit it will not wait for is said plainly, exit non-zero
if "$BIN" jobs --server "$URL" --token "$UA" >"$T/cli.out" 2>&1; then
    fail "corral jobs passed while limited"
fi
grep -q "rate limit: this token" "$T/cli.out" || fail "CLI message: $(cat "$T/cli.out")"
grep -q "longer than the client waits" "$T/cli.out" || fail "CLI reason: $(cat "$T/cli.out")"

# --- bad tokens, per client address --------------------------------------------
# 127.0.0.1 has its 5 (nothing unauthenticated came from it so far): 5 x 401
# then 429, with no log line per refusal; /healthz from it is limited too
codes=$(for _ in $(seq 1 8); do code crl_bogus "$URL/v1/jobs"; echo; done | tr '\n' ' ')
[ "$codes" = "401 401 401 401 401 429 429 429 " ] || fail "bad tokens: got $codes"
[ "$(code "" "$URL/healthz")" = 429 ] || fail "/healthz from a limited address"
[ "$(code "" "$URL/metrics")" = 429 ] || fail "open /metrics from a limited address"
[ "$(code "$ADMIN" "$URL/metrics")" = 200 ] || fail "/metrics with the admin token"
# another address is not: 127.0.0.2 (loopback) still gets 401, then /healthz 200
[ "$(code crl_bogus --interface 127.0.0.2 "$URL/v1/jobs")" = 401 ] ||
    fail "bad token from another address"
[ "$(code "" --interface 127.0.0.2 "$URL/healthz")" = 200 ] || fail "/healthz from another address"
# a valid token from the limited address still works (its own bucket)
U3=$(admin POST /v1/tokens '{"role":"user","tenant":"ta","name":"carol"}' | jq -r .token)
[ "$(code "$U3" "$URL/v1/jobs")" = 200 ] || fail "a fresh token from a limited address"

# --- bounded tables ----------------------------------------------------------
# 40 more user tokens, one request each; 30 more addresses with bad tokens
for n in $(seq 1 40); do
    tok=$(admin POST /v1/tokens "{\"role\":\"user\",\"tenant\":\"tb\",\"name\":\"u$n\"}" | jq -r .token)
    [ "$(code "$tok" "$URL/v1/whoami")" = 200 ] || fail "token u$n's first request"
done
for n in $(seq 10 39); do
    [ "$(code crl_bogus --interface "127.0.0.$n" "$URL/v1/jobs")" = 401 ] ||
        fail "first bad token from 127.0.0.$n"
done
admin GET /metrics >"$T/metrics"
metric() { # metric NAME KIND
    awk -v m="$1{kind=\"$2\"}" '$1 == m { print $2 }' "$T/metrics"
}
[ "$(metric corral_http_rate_limit_buckets token)" = 16 ] ||
    fail "token buckets: $(metric corral_http_rate_limit_buckets token)"
[ "$(metric corral_http_rate_limit_buckets address)" = 16 ] ||
    fail "address buckets: $(metric corral_http_rate_limit_buckets address)"
# tokens seen: join, alice, bob, carol, 40 more = 44 > 16; addresses 2 + 30
[ "$(metric corral_http_rate_limit_evicted_total token)" = 28 ] ||
    fail "token evictions: $(metric corral_http_rate_limit_evicted_total token)"
[ "$(metric corral_http_rate_limit_evicted_total address)" = 16 ] ||
    fail "address evictions: $(metric corral_http_rate_limit_evicted_total address)"
lt=$(metric corral_http_rate_limited_total token)
la=$(metric corral_http_rate_limited_total address)
# alice: 3 + 1 + 1 + 100 (the flood) + 1 (the CLI); bob: 1
[ "$lt" -eq 107 ] || fail "rate_limited{token} = $lt"
[ "$la" -eq 5 ] || fail "rate_limited{address} = $la (3 bad tokens, /healthz, /metrics)"
grep -q 'WARN.*rate limit: .* answered 429' "$T/ctl.log" || fail "no rate limit WARN line"
[ "$(grep -c 'auth failed' "$T/ctl.log")" -le 40 ] || fail "a log line per refused bad token"
# the open /metrics names no tenant in these families
grep '^corral_http_rate_limit' "$T/metrics" | grep -q tenant && fail "tenant label in rate limit metrics"

# --- 0 turns a limit off ------------------------------------------------------
kill "$PID"
wait "$PID" 2>/dev/null || true
PIDS=()
rm -f "$T/state/listen.addr"
"$BIN" controller --listen 127.0.0.1:0 --state-dir "$T/state" --config "$T/cfg.json" \
    --rate-limit-rps 0 --rate-limit-anon-rps 0 >"$T/ctl.log" 2>&1 &
PID=$!
PIDS=("$PID")
i=0
until [ -s "$T/state/listen.addr" ] && [ "$(code "$ADMIN" "$(cat "$T/state/listen.addr")/v1/whoami")" = 200 ]; do
    i=$((i + 1))
    [ $i -lt 400 ] || fail "the controller did not restart"
    sleep 0.05
done
URL=$(cat "$T/state/listen.addr")
codes=$(for _ in $(seq 1 10); do code "$UA" "$URL/v1/jobs"; code crl_bogus "$URL/v1/jobs"; echo; done | sort -u | tr '\n' ' ')
[ "$codes" = "200401 " ] || fail "limits off: got $codes"
echo "ok"
