#!/bin/sh
# Proxying: traffic spreads over replicas; prefix and Host routing; bodies;
# SSE events arrive before the stream ends; 503 + Retry-After when every
# replica is saturated; /metrics passes promtool.
. "$(dirname "$0")/lib.sh"

start_backend a
start_backend b
start_gateway main --service "chat=127.0.0.1:$PORT_a,127.0.0.1:$PORT_b" \
    --service "one=127.0.0.1:$PORT_a" --service "chat@beta=127.0.0.1:$PORT_b" --max-inflight 64
G=$GW_main

# Concurrent load: every request answered.
"$GW_HELPER" load "http://$G/chat/x" 400 8 >load.txt
grep -q "^status 200 400$" load.txt || { cat load.txt; fail "not all 400 requests answered 200"; }
grep -q "^failed 0$" load.txt || fail "transport failures"
# Spread: one request at a time, both replicas are always idle when chosen,
# so the choice is a fair coin: 400 requests give each 200 +- 10.
"$GW_HELPER" load "http://$G/chat/x" 400 1 >spread.txt
for r in a b; do
    n=$(awk -v r=$r '$1 == "replica" && $2 == r { print $3 }' spread.txt)
    [ "${n:-0}" -ge 120 ] || { cat spread.txt; fail "replica $r got ${n:-0} of 400 requests"; }
done

# Prefix stripped; Host routing keeps the path; unknown service is 404.
body=$(curl -sf "http://$G/chat/v1/models?q=1")
case "$body" in *" /v1/models?q=1 "*) ;; *) fail "prefix not stripped: $body" ;; esac
body=$(curl -sf "http://$G/chat")
case "$body" in *" / "*) ;; *) fail "bare prefix should map to /: $body" ;; esac
# Another tenant's service of the same name, as the controller's ref names it.
body=$(curl -sf "http://$G/chat@beta/v1/models") || fail "no route for chat@beta"
case "$body" in *" /v1/models "*) ;; *) fail "chat@beta prefix not stripped: $body" ;; esac
body=$(curl -sf -H "Host: chat.example.com" "http://$G/v1/x")
case "$body" in *" /v1/x "*) ;; *) fail "Host routing: $body" ;; esac
curl -sf -D hdr.txt -o /dev/null -H "X-Forwarded-For: 10.9.8.7" "http://$G/chat/x"
grep -qi "^X-Seen-For: 10.9.8.7, 127.0.0.1" hdr.txt || { cat hdr.txt; fail "X-Forwarded-For not extended"; }
grep -qi "^X-Seen-Prefix: /chat" hdr.txt || { cat hdr.txt; fail "no X-Forwarded-Prefix"; }
# X-Forwarded-Proto is the gateway's: a plain-HTTP client cannot claim https.
curl -sf -D hdr.txt -o /dev/null -H "X-Forwarded-Proto: https" "http://$G/chat/x"
grep -qi "^X-Seen-Proto: http[[:space:]]*$" hdr.txt || { cat hdr.txt; fail "X-Forwarded-Proto not replaced"; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$G/nosuch/x")
[ "$code" = 404 ] || fail "unknown service answered $code"
# Priorities: batch and interactive pass; any other value is a 400 naming the header.
curl -sf -o /dev/null -H "X-Corral-Priority: batch" "http://$G/chat/x" || fail "a batch request was refused"
curl -sf -o /dev/null -H "X-Corral-Priority: interactive" "http://$G/chat/x" || fail "an interactive request was refused"
code=$(curl -s -o prio.txt -w '%{http_code}' -H "X-Corral-Priority: urgent" "http://$G/chat/x")
[ "$code" = 400 ] && grep -q "X-Corral-Priority" prio.txt || fail "a bad priority answered $code: $(cat prio.txt)"
code=$(printf 'GARBAGE\r\n\r\n' | curl -s -o /dev/null -w '%{http_code}' --data-binary @- -X 'B@D' "http://$G/chat/" || true)
[ "$code" = 400 ] || [ "$code" = 000 ] || fail "bad method answered $code"

# A request body goes through (Content-Length and chunked).
body=$(curl -sf --data-binary "0123456789" "http://$G/one/post")
case "$body" in *" 10"*) ;; *) fail "POST body: $body" ;; esac
body=$(printf 'abcdefgh' | curl -sf -H 'Transfer-Encoding: chunked' --data-binary @- "http://$G/one/chunked" || true)
[ -n "$body" ] || fail "chunked POST got no answer"

# Large bodies both ways stream through the 16 KiB buffers intact.
head -c 300000 /dev/zero | tr '\0' 'x' >big.in
body=$(curl -sf --data-binary @big.in "http://$G/one/upload")
case "$body" in *" 300000"*) ;; *) fail "large POST: $body" ;; esac
curl -sf -o big.out "http://$G/one/big?kb=1000" || fail "large GET failed"
[ "$(wc -c <big.out)" = 1024000 ] || fail "large GET: $(wc -c <big.out) bytes"
curl -sf "http://127.0.0.1:$PORT_a/big?kb=1000" | cmp -s - big.out || fail "large GET corrupted"

# Interim 1xx answers pass through; a body delimited by the connection's end
# arrives whole (and that client connection closes after it).
curl -s -D hints.txt "http://$G/one/hints" >hints.body || fail "103 then 200 failed"
grep -q " 103 " hints.txt && grep -q " 200 " hints.txt || { cat hints.txt; fail "1xx not relayed"; }
grep -q "after hints" hints.body || fail "body after 1xx lost"
body=$(curl -sf "http://$G/one/eof") || fail "EOF-delimited response failed"
[ "$body" = "until close" ] || fail "EOF-delimited body: $body"

# An HTTP/1.0 client is served too.
body=$(curl -sf --http1.0 "http://$G/chat/old") || fail "HTTP/1.0 request failed"
case "$body" in *" /old "*) ;; *) fail "HTTP/1.0: $body" ;; esac

# Pipelined requests on one connection are answered in order.
printf 'GET /one/p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /one/p2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >pipe.in
if command -v nc >/dev/null; then
    nc -q 2 127.0.0.1 "${G#*:}" <pipe.in >pipe.out 2>/dev/null || nc 127.0.0.1 "${G#*:}" <pipe.in >pipe.out || true
    grep -q "a /p1" pipe.out && grep -q "a /p2" pipe.out || { cat pipe.out; fail "pipelined requests"; }
fi

# SSE: the first event arrives while the server still holds the rest.
"$GW_HELPER" sse "http://$G/one/sse?n=4" "http://127.0.0.1:$PORT_a/release" >sse.txt ||
    { cat sse.txt; fail "SSE events were buffered"; }

# Saturation: one slot per replica, one held stream fills it: 503 + Retry-After.
start_gateway sat --service "one=127.0.0.1:$PORT_a" --max-inflight 1
S=$GW_sat
curl -sN "http://$S/one/sse?n=2" >held.txt &
HELD=$!
PIDS="$PIDS $HELD"
wait_for 10 metric_is "$S" "corral_gateway_replica_in_flight{service=\"one\",replica=\"127.0.0.1:$PORT_a\"}" 1 ||
    fail "held stream not in flight"
curl -s -i "http://$S/one/x" >sat.txt
head -1 sat.txt | grep -q " 503 " || { cat sat.txt; fail "saturated replica did not answer 503"; }
grep -qi "^Retry-After: 1" sat.txt || { cat sat.txt; fail "503 without Retry-After"; }
curl -sf "http://127.0.0.1:$PORT_a/release" >/dev/null
wait $HELD || fail "held stream failed"
grep -q "event 1" held.txt || fail "held stream incomplete"
curl -sf "http://$S/one/x" >/dev/null || fail "not served again after the stream ended"

# Metrics: the format passes promtool; the counters say what happened.
metrics "$G" >metrics.txt
if command -v promtool >/dev/null; then
    promtool check metrics <metrics.txt || fail "promtool rejects /metrics"
else
    echo "promtool not installed: format check skipped" >&2
fi
grep -q 'corral_gateway_requests_total{service="chat",code="200"}' metrics.txt || fail "no 200 counter"
grep -q 'corral_gateway_request_duration_seconds_bucket{service="chat",le="+Inf"}' metrics.txt ||
    fail "no histogram"
[ "$(metric_value "$S" 'corral_gateway_errors_total{service="one",reason="saturated"}')" -ge 1 ] ||
    fail "saturation not counted"
stop_gateway sat

# Graceful stop: SIGTERM closes the listener but lets a stream under way end.
curl -sN "http://$G/one/sse?n=3" >last.txt &
LAST=$!
PIDS="$PIDS $LAST"
wait_for 10 metric_is "$G" 'corral_gateway_in_flight{service="one"}' 1 || fail "stream not in flight"
kill -TERM "$GWPID_main"
refused() { ! curl -s -o /dev/null "http://$G/healthz"; }
wait_for 10 refused || fail "still accepting after SIGTERM"
kill -0 "$GWPID_main" || fail "gateway exited with a stream under way"
curl -sf "http://127.0.0.1:$PORT_a/release" >/dev/null
wait "$LAST" || fail "stream cut by the graceful stop"
grep -q "event 2" last.txt || fail "stream incomplete after the graceful stop"
wait_exit 60 "$GWPID_main" || fail "gateway still running 60 s after draining"
[ "$rc" = 0 ] || fail "gateway exited $rc after draining"
echo "gateway proxy: ok"
