#!/bin/sh
# End to end with the real controller and agent (skipped where they are not
# built): a service's replicas run under the agent, the gateway follows the
# controller's endpoints, a burst through the gateway makes the autoscaler
# add replicas (panic window) with no request lost, and a service at zero
# replicas is started by a request the gateway holds.
. "$(dirname "$0")/lib.sh"

for role in controller agent; do
    if "$CORRAL_BIN" $role --help 2>&1 | grep -q "not built yet"; then
        echo "corral $role not built: skipped"
        exit 77
    fi
done

# Checkpoints under $T too (the default root is /tmp/corral/ckpt).
printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >"$T/ctl.json"
"$CORRAL_BIN" controller --allow-legacy-join --config "$T/ctl.json" --state-dir "$T/st" \
    --listen 127.0.0.1:0 >ctl.out 2>ctl.log &
CTLPID=$!
PIDS="$PIDS $CTLPID"
wait_for 10 grep -q "listening on http" ctl.log ctl.out || fail "controller did not start"
CTL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' ctl.log ctl.out | head -1)
"$CORRAL_BIN" agent --server "$CTL" --join-token "$T/st/join.token" --node n1 \
    --gpus 'sim:4xA30' --listen 127.0.0.1:0 --state-dir "$T/agent" --kill-on-exit >agent.out 2>agent.log &
AGENT=$!
PIDS="$PIDS $AGENT"
# The agent stops the replicas when it exits gracefully; kill -9 would orphan
# them (they also end on their own after 120 s).
ON_EXIT='kill -TERM $AGENT 2>/dev/null; wait_exit 30 $AGENT || true'
TOK=$(cat "$T/st/admin.token")
api() { curl -sf -H "Authorization: Bearer $TOK" "$@"; }
service() { # NAME MIN MAX
    api -X POST "$CTL/v1/services" -d "{\"name\":\"$1\",
        \"command\":[\"sh\",\"-c\",\"exec timeout --foreground 120 $GW_HELPER serve \$PORT $1-\$PORT\"],
        \"gpus\":1,\"gpu_type\":\"A30\",\"min_replicas\":$2,\"max_replicas\":$3,
        \"target\":{\"concurrency\":2},\"ready_path\":\"/health\"}" >/dev/null ||
        fail "cannot create service $1"
}
service chat 1 3
start_gateway main --no-require-keys --controller "$CTL" --token "$TOK" --report-interval 500ms
G=$GW_main
served() { curl -sf "http://$G/chat/x" | grep -q "^chat-"; }
wait_for 60 served || fail "chat never served through the gateway"

# A burst: 8 clients on 200 ms requests against a target of 2 per replica.
"$GW_HELPER" load "http://$G/chat/slow?ms=200" 300 8 >burst.txt &
BURST=$!
PIDS="$PIDS $BURST"
scaled() { api "$CTL/v1/services/chat" | grep -q '"ready_replicas":[2-9]'; }
wait_for 60 scaled || fail "no scale-up: $(api "$CTL/v1/services/chat")"
wait "$BURST" || fail "load generator failed"
grep -q "^status 200 300$" burst.txt || { cat burst.txt; fail "requests lost in the burst"; }
api "$CTL/v1/services/chat" | grep -q "panic" || fail "no panic decision in the events"

# Scale from zero: the first request is held while the replica starts.
service cold 0 2
known() { metrics "$G" | grep -q 'corral_gateway_in_flight{service="cold"}'; }
wait_for 30 known || fail "gateway did not discover cold"
body=$(curl -s -m 60 "http://$G/cold/x") || fail "held request failed"
case "$body" in cold-*) ;; *) fail "scale from zero: $body" ;; esac
stop_gateway main
echo "gateway e2e: ok"
