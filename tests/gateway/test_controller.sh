#!/bin/sh
# Endpoints from the controller: the gateway long-polls
# GET /v1/services/{name}/endpoints (a fake controller serves a file here),
# follows each new version (ready flags included), and reports its load to
# POST /v1/services/{name}/metrics, at once when a request is held at zero
# replicas (the autoscaler's activation signal).
. "$(dirname "$0")/lib.sh"

start_backend a
start_backend b
eps() { # version, endpoints JSON
    printf '{"version":%s,"endpoints":[%s]}\n' "$1" "$2" >eps.tmp
    mv eps.tmp eps.json
}
eps 1 "{\"addr\":\"127.0.0.1\",\"port\":$PORT_a,\"ready\":true}"
"$GW_HELPER" ctl 0 "$T/eps.json" >ctl.out 2>ctl.log &
PIDS="$PIDS $!"
wait_for 10 grep -q listening ctl.out || fail "fake controller did not start"
CTL=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' ctl.out)
start_gateway main --no-require-keys --controller "http://127.0.0.1:$CTL" --token t0k --service chat \
    --report-interval 200ms
G=$GW_main

served_by() { curl -sf "http://$G/chat/x" | grep -q "^$1 "; }
wait_for 10 served_by a || fail "endpoints from the controller not used"

# Version 2 adds b, not ready yet: listed but takes no traffic.
eps 2 "{\"addr\":\"127.0.0.1\",\"port\":$PORT_a,\"ready\":true},{\"addr\":\"127.0.0.1\",\"port\":$PORT_b,\"ready\":false}"
UP_B="corral_gateway_replica_up{service=\"chat\",replica=\"127.0.0.1:$PORT_b\"}"
wait_for 10 metric_is "$G" "$UP_B" 0 || fail "b not listed after version 2"
"$GW_HELPER" load "http://$G/chat/x" 50 2 >load1.txt
grep -q "^replica b " load1.txt && fail "b got traffic while not ready"

# Version 3: b ready.
eps 3 "{\"addr\":\"127.0.0.1\",\"port\":$PORT_a,\"ready\":true},{\"addr\":\"127.0.0.1\",\"port\":$PORT_b,\"ready\":true}"
wait_for 10 metric_is "$G" "$UP_B" 1 || fail "b not ready after version 3"
"$GW_HELPER" load "http://$G/chat/x" 100 1 >load2.txt
grep -q "^replica b " load2.txt || fail "b got no traffic once ready"

# Load reports reach the controller with the contract's members.
reported() { grep -qE '^/v1/services/chat/metrics \{"in_flight":[0-9]+,"rps":[0-9.]+,"p95_ms":-?[0-9.]+,"metrics_port":[0-9]+\}$' eps.json.metrics; }
wait_for 10 reported || fail "no metrics report: $(tail -2 eps.json.metrics 2>/dev/null)"

# The reported concurrency is the time average: 4 clients, each always
# waiting on a 100 ms request, report about 4.
: >eps.json.metrics
"$GW_HELPER" load "http://$G/chat/slow?ms=100" 60 4 >slow.txt
grep -q '"in_flight":[34],' eps.json.metrics || { cat eps.json.metrics; fail "concurrency 4 not reported"; }

# Scale to zero and back: version 4 empties the service; a request is held
# and reported with in_flight >= 1; version 5 brings a replica; it is served.
start_backend late # for its port; stopped until version 5 is out
kill -9 "$PID_late"
wait "$PID_late" 2>/dev/null || true
eps 4 ""
gone() { ! metrics "$G" | grep -q 'replica_up{service="chat"'; }
wait_for 10 gone || fail "replicas not removed at version 4"
: >eps.json.metrics
curl -s -o cold.txt "http://$G/chat/x" &
COLD=$!
PIDS="$PIDS $COLD"
activated() { grep -q '"in_flight":[1-9]' eps.json.metrics; }
wait_for 10 activated || fail "held request not reported to the controller"
# Version 5 announces a replica that does not listen yet (ready too early):
# the held request finds it refusing, is held again, and is served once the
# replica's readiness check passes.
eps 5 "{\"addr\":\"127.0.0.1\",\"port\":$PORT_late,\"ready\":true}"
UP_LATE="corral_gateway_replica_up{service=\"chat\",replica=\"127.0.0.1:$PORT_late\"}"
wait_for 10 metric_is "$G" "$UP_LATE" 0 || fail "refusing replica not marked down"
kill -0 "$COLD" 2>/dev/null || { cat cold.txt; fail "held request answered before a replica listened"; }
start_backend late "$PORT_late"
wait "$COLD" || fail "held request failed"
grep -q "^late /x" cold.txt || fail "held request: $(cat cold.txt)"
stop_gateway main
echo "gateway controller: ok"
