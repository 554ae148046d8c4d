#!/bin/sh
# A killed replica: its failure is seen (connection refused), requests are
# retried on the other replica, it gets no more requests while down, and a
# passing health check brings it back.
. "$(dirname "$0")/lib.sh"

start_backend a
start_backend b
start_gateway main --service "chat=127.0.0.1:$PORT_a,127.0.0.1:$PORT_b" --probe-interval 100ms
G=$GW_main
REQ_B="corral_gateway_replica_requests_total{service=\"chat\",replica=\"127.0.0.1:$PORT_b\"}"
UP_B="corral_gateway_replica_up{service=\"chat\",replica=\"127.0.0.1:$PORT_b\"}"

"$GW_HELPER" load "http://$G/chat/x" 100 1 >load1.txt
grep -q "^replica b " load1.txt || fail "b got no traffic before the kill"

# Kill b: no request is lost (GETs are retried on a), b is marked down.
kill -9 "$PID_b"
wait "$PID_b" 2>/dev/null || true
"$GW_HELPER" load "http://$G/chat/x" 200 4 >load2.txt
grep -q "^status 200 200$" load2.txt || { cat load2.txt; fail "requests lost when b died"; }
grep -q "^failed 0$" load2.txt || fail "transport failures when b died"
wait_for 10 metric_is "$G" "$UP_B" 0 || fail "b not marked down"
seen=$(metric_value "$G" "$REQ_B")

# While down, b gets nothing more.
"$GW_HELPER" load "http://$G/chat/x" 200 4 >load3.txt
grep -q "^status 200 200$" load3.txt || fail "requests failed while b was down"
[ "$(metric_value "$G" "$REQ_B")" = "$seen" ] || fail "b got requests after its failure was seen"
[ "$(metric_value "$G" 'corral_gateway_retries_total{service="chat"}')" -ge 1 ] || fail "no retry counted"

# Restart b on its port, with its readiness failing at first: still no traffic.
touch "$PORT_b.unready"
start_backend b "$PORT_b"
"$GW_HELPER" load "http://$G/chat/x" 50 2 >load4.txt
[ "$(metric_value "$G" "$REQ_B")" = "$seen" ] || fail "b got traffic before its health check passed"
rm -f "$PORT_b.unready"
wait_for 10 metric_is "$G" "$UP_B" 1 || fail "b not back after its health check passed"
"$GW_HELPER" load "http://$G/chat/x" 200 1 >load5.txt
grep -q "^replica b " load5.txt || { cat load5.txt; fail "b got no traffic after coming back"; }

# Load signals: with --scrape, a replica that reports a long queue of its own
# (vllm:num_requests_waiting) loses every power-of-two choice.
export GW_WAITING=100
start_backend busy
unset GW_WAITING
start_backend idle
start_gateway sig --service "llm=127.0.0.1:$PORT_busy,127.0.0.1:$PORT_idle" --scrape --probe-interval 100ms
wait_for 10 metric_is "$GW_sig" "corral_gateway_replica_waiting{service=\"llm\",replica=\"127.0.0.1:$PORT_busy\"}" 100 ||
    fail "load signal not scraped"
"$GW_HELPER" load "http://$GW_sig/llm/x" 200 1 >sig.txt
grep -q "^replica busy " sig.txt && { cat sig.txt; fail "the replica with a long queue got traffic"; }
grep -q "^replica idle 200$" sig.txt || { cat sig.txt; fail "the idle replica did not take the load"; }
echo "gateway failover: ok"
