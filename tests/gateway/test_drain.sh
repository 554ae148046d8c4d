#!/bin/sh
# Scale-down without loss: a replica removed from the endpoints (config
# reload) is drained -- no new requests, in-flight ones finish -- and only
# then stopped. Scale from zero: a request to a service with no replica is
# held until one appears.
. "$(dirname "$0")/lib.sh"

start_backend a
start_backend b
write_conf() { # endpoints of chat, endpoints of cold
    cat >gw.json.tmp <<JSON
{"hold_timeout_s": 20,
 "services": [{"name": "chat", "endpoints": [$1]},
              {"name": "cold", "endpoints": [$2]}]}
JSON
    mv gw.json.tmp gw.json
}
write_conf "\"127.0.0.1:$PORT_a\", \"127.0.0.1:$PORT_b\"" ""
start_gateway main --config "$T/gw.json"
G=$GW_main
B="127.0.0.1:$PORT_b"

# Load with requests that take a while, so some are in flight on b at the change.
"$GW_HELPER" load "http://$G/chat/slow?ms=20" 600 6 >load.txt &
LOAD=$!
PIDS="$PIDS $LOAD"
b_busy() { [ "$(curl -sf "http://$B/stats" | awk '/^requests/ {print $2}')" -ge 30 ]; }
wait_for 20 b_busy || fail "b got no traffic"

# Drain b: remove it from the endpoints, wait until the gateway frees it
# (no request left on it), then stop it.
write_conf "\"127.0.0.1:$PORT_a\"" ""
kill -HUP "$GWPID_main"
gone() { ! metrics "$G" | grep -q "replica=\"$B\""; }
wait_for 20 gone || fail "b never drained"
kill -9 "$PID_b"
wait "$LOAD" || fail "load generator failed"
grep -q "^status 200 600$" load.txt || { cat load.txt; fail "requests lost during the drain"; }
grep -q "^failed 0$" load.txt || { cat load.txt; fail "transport failures during the drain"; }

# Scale from zero: held while cold has no replica, served once one appears.
curl -s -o cold.txt -w '%{http_code}' "http://$G/cold/x" >cold.code &
COLD=$!
PIDS="$PIDS $COLD"
wait_for 10 metric_is "$G" 'corral_gateway_held{service="cold"}' 1 || fail "request not held"
write_conf "\"127.0.0.1:$PORT_a\"" "\"127.0.0.1:$PORT_a\""
kill -HUP "$GWPID_main"
wait "$COLD" || true
[ "$(cat cold.code)" = 200 ] || fail "held request answered $(cat cold.code)"
grep -q "^a /x" cold.txt || fail "held request: $(cat cold.txt)"

# A held request whose client goes away gives its hold slot back at once
# (not at the hold timeout), and is counted as a client abort.
printf '{"hold_timeout_s": 60, "services": [{"name": "none", "endpoints": []}]}\n' >gone.json
start_gateway gone --config "$T/gone.json"
curl -s -o /dev/null "http://$GW_gone/none/x" &
GONE=$!
PIDS="$PIDS $GONE"
wait_for 10 metric_is "$GW_gone" 'corral_gateway_held{service="none"}' 1 || fail "request not held"
kill -9 "$GONE"
wait_for 10 metric_is "$GW_gone" 'corral_gateway_held{service="none"}' 0 ||
    fail "a held request whose client left keeps its hold slot"
stop_gateway gone

# A held request past the hold timeout gets 503 with Retry-After.
printf '{"hold_timeout_s": 0.3, "retry_after_s": 2, "services": [{"name": "none", "endpoints": []}]}\n' >short.json
start_gateway short --config "$T/short.json"
curl -s -i "http://$GW_short/none/x" >short.txt || true
head -1 short.txt | grep -q " 503 " || { cat short.txt; fail "no 503 after the hold timeout"; }
grep -qi "^Retry-After: 2" short.txt || fail "hold timeout 503 without Retry-After: 2"
[ "$(metric_value "$GW_short" 'corral_gateway_errors_total{service="none",reason="no_replica"}')" = 1 ] ||
    fail "hold timeout not counted"

# With holding off (--hold 0) the answer is 503 with Retry-After at once.
start_gateway nohold --service "cold=127.0.0.1:$PORT_a" --hold 0 --retry-after 3
kill -9 "$PID_a"
curl -s -o /dev/null "http://$GW_nohold/cold/x" || true # marks a down
curl -s -i "http://$GW_nohold/cold/x" >nohold.txt || true
head -1 nohold.txt | grep -q " 503 " || { cat nohold.txt; fail "no 503 with no replica"; }
grep -qi "^Retry-After: 3" nohold.txt || fail "503 without Retry-After: 3"
stop_gateway main
stop_gateway nohold
echo "gateway drain: ok"
