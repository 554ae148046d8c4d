#!/bin/sh
# Rolling update of a service (issue 30): 3 replicas on a 3-node cluster
# (real controller, three sim agents, gw_helper model servers) behind a
# gateway that follows the controller; two clients send requests without
# pause while `corral services update` replaces the replicas' command: no
# request fails, the ready count never drops below 3 meanwhile, and after
# the roll-out every answer comes from the new replicas, again on 3 nodes.
. "$(dirname "$0")/lib.sh"

for role in controller agent; do
    if "$CORRAL_BIN" $role --help 2>&1 | grep -q "not built yet"; then
        echo "corral $role not built: skipped"
        exit 77
    fi
done
printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >"$T/ctl.json"
"$CORRAL_BIN" controller --allow-legacy-join --config "$T/ctl.json" --state-dir "$T/st" \
    --listen 127.0.0.1:0 >ctl.out 2>ctl.log &
PIDS="$PIDS $!"
wait_for 10 grep -q "listening on http" ctl.log ctl.out || fail "controller did not start"
CTL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' ctl.log ctl.out | head -1)
AGENTS=""
for n in n1 n2 n3; do
    "$CORRAL_BIN" agent --server "$CTL" --join-token "$T/st/join.token" --node $n \
        --gpus 'sim:4xA30' --listen 127.0.0.1:0 --state-dir "$T/agent-$n" --kill-on-exit \
        >"agent-$n.out" 2>"agent-$n.log" &
    AGENTS="$AGENTS $!"
    PIDS="$PIDS $!"
done
ON_EXIT='for a in $AGENTS; do kill -TERM $a 2>/dev/null; done; for a in $AGENTS; do wait_exit 30 $a || true; done'
TOK=$(cat "$T/st/admin.token")
C() { CORRAL_SERVER=$CTL CORRAL_TOKEN=$TOK "$CORRAL_BIN" "$@"; }
api() { curl -sf -H "Authorization: Bearer $TOK" "$@"; }
up3() { [ "$(api "$CTL/v1/nodes" | grep -o '"state":"up"' | wc -l)" -ge 3 ]; }
wait_for 30 up3 || fail "3 nodes did not register"
api -X POST "$CTL/v1/tenants" -d '{"name":"ml"}' >/dev/null || fail "tenant"

C services create chat --tenant ml --gpus 1 --gpu-type A30 --min 3 --max 3 --model llama -- \
    sh -c "exec timeout --foreground 300 $GW_HELPER serve \$PORT v1" >/dev/null ||
    fail "services create"
# ready GEN: 3 ready replicas of generation GEN and no other replica
ready() {
    api "$CTL/v1/services/chat" >svc.json || return 1
    [ "$(grep -o '"ready":true,"draining":false,"generation":'"$1" svc.json | wc -l)" -eq 3 ] &&
        [ "$(grep -o '"job":' svc.json | wc -l)" -eq 3 ]
}
wait_for 60 ready 0 || fail "3 replicas not ready: $(cat svc.json)"

KEY=$(C keys create --tenant ml 2>/dev/null) || fail "keys create"
start_gateway main --controller "$CTL" --token "$TOK"
G=$GW_main
chat() {
    curl -s -o "$1" -w '%{http_code}\n' -H "Authorization: Bearer $KEY" \
        -d '{"model":"llama","messages":[]}' "http://$G/v1/chat/completions"
}
wait_for 30 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $KEY' \
    -d '{\"model\":\"llama\",\"messages\":[]}' http://$G/v1/chat/completions)\" = 200 ]" ||
    fail "no chat through the gateway"

# Two clients without pause, each a line per answer: the status and who.
: >stop.flag && rm -f stop.flag
client() {
    while [ ! -e stop.flag ]; do
        code=$(chat "body-$1.txt")
        echo "$code $(sed -n 's/.*hello from \([a-z0-9]*\).*/\1/p' "body-$1.txt")" >>"load-$1.txt"
    done
}
client a &
CA=$!
client b &
CB=$!
PIDS="$PIDS $CA $CB"
wait_for 10 sh -c '[ "$(cat load-a.txt 2>/dev/null | wc -l)" -ge 5 ]' || fail "the clients do not run"

C services update chat --gpus 1 --gpu-type A30 --min 3 --max 3 --model llama -- \
    sh -c "exec timeout --foreground 300 $GW_HELPER serve \$PORT v2" >update.out ||
    fail "services update: $(cat update.out)"
grep -q "generation 1" update.out || fail "update said: $(cat update.out)"
# Meanwhile the ready count never drops below 3.
low=0
rolled() {
    api "$CTL/v1/services/chat" >svc.json || return 1
    r=$(grep -o '"ready_replicas":[0-9]*' svc.json | grep -o '[0-9]*$')
    [ "${r:-0}" -ge 3 ] || low=$((low + 1))
    ready 1
}
wait_for 120 rolled || fail "the roll-out did not finish: $(cat svc.json)"
[ "$low" = 0 ] || fail "the ready replicas dropped below 3 $low times during the roll-out"
grep -q '"rolled-out"' svc.json || api "$CTL/v1/services/chat" | grep -q rolled-out ||
    fail "no rolled-out event: $(cat svc.json)"
# A few more answers from the new replicas only, then stop the clients.
n0=$(cat load-a.txt | wc -l)
wait_for 30 sh -c "[ \$(cat load-a.txt | wc -l) -ge $((n0 + 20)) ]" || fail "the clients stalled"
touch stop.flag
wait "$CA" "$CB"
total=$(cat load-a.txt load-b.txt | wc -l)
bad=$(cat load-a.txt load-b.txt | grep -vc '^200 ' || true)
echo "rolling update: $total requests, $bad failed"
[ "$total" -ge 50 ] || fail "only $total requests during the roll-out"
[ "$bad" = 0 ] || fail "$bad of $total requests failed: $(grep -v '^200 ' load-a.txt load-b.txt | head -5)"
tail -10 load-a.txt | grep -v ' v2$' && fail "old replicas answered after the roll-out"
grep -q ' v1$' load-a.txt || fail "no answer from the old replicas at all"
nodes=$(grep -o '"state":"running","node":"[^"]*"' svc.json | sed 's/.*"node":"//; s/"$//' | sort -u | wc -l)
[ "$nodes" -eq 3 ] || fail "after the roll-out the replicas are on $nodes nodes: $(cat svc.json)"
# Bad input: another name, a tenant, a bad field.
st=$(curl -s -o body.txt -w '%{http_code}' -H "Authorization: Bearer $TOK" \
    -d '{"name":"other","command":["true"]}' "$CTL/v1/services/chat/update")
[ "$st" = 400 ] && grep -q "name" body.txt || fail "update with another name: $st $(cat body.txt)"
st=$(curl -s -o body.txt -w '%{http_code}' -H "Authorization: Bearer $TOK" \
    -d '{"command":["true"],"gpus":-1}' "$CTL/v1/services/chat/update")
[ "$st" = 400 ] || fail "update with gpus -1: $st $(cat body.txt)"
st=$(curl -s -o body.txt -w '%{http_code}' -H "Authorization: Bearer $TOK" \
    -d '{"command":["true"]}' "$CTL/v1/services/nosuch/update")
[ "$st" = 404 ] || fail "update of no service: $st $(cat body.txt)"
stop_gateway main
echo "rolling ok"
