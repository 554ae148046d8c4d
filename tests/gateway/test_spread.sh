#!/bin/sh
# Placement for availability (issue 30): the 3 replicas of a service on a
# 3-node cluster land on 3 nodes (the scheduler alone packs them best-fit
# onto one); with "pack" they may share one. Real controller and three sim
# agents; the replicas are gw_helper model servers, followed by a gateway
# with a key whose chat requests reach every node.
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

svc() { # NAME EXTRA-FLAGS...
    name=$1; shift
    C services create "$name" --tenant ml --gpus 1 --gpu-type A30 --min 3 --max 3 "$@" -- \
        sh -c "exec timeout --foreground 120 $GW_HELPER serve \$PORT $name-\$PORT" >/dev/null ||
        fail "services create $name"
}
# nodes NAME: the nodes of its running replicas, one per line, sorted
nodes() { api "$CTL/v1/services/$1" | grep -o '"state":"running","node":"[^"]*"' |
    sed 's/.*"node":"//; s/"$//' | sort; }
running3() { [ "$(nodes "$1" | wc -l)" -eq 3 ]; }

svc chat --model llama-8b,llama
wait_for 60 running3 chat || fail "chat: 3 replicas not running: $(api "$CTL/v1/services/chat")"
[ "$(nodes chat | uniq | wc -l)" -eq 3 ] || fail "chat's replicas share nodes: $(nodes chat | tr '\n' ' ')"
echo "chat replicas on: $(nodes chat | tr '\n' ' ')"

svc packed --pack
wait_for 60 running3 packed || fail "packed: 3 replicas not running: $(api "$CTL/v1/services/packed")"
echo "packed replicas on: $(nodes packed | tr '\n' ' ')"
[ "$(nodes packed | uniq | wc -l)" -lt 3 ] || fail "--pack spread anyway: $(nodes packed | tr '\n' ' ')"

# The models reach the gateway from the controller: routed by model, with a key.
KEY=$(C keys create --tenant ml 2>/dev/null) || fail "keys create"
start_gateway main --controller "$CTL" --token "$TOK"
G=$GW_main
chat() {
    curl -sf -H "Authorization: Bearer $KEY" -d '{"model":"llama","messages":[]}' \
        "http://$G/v1/chat/completions"
}
wait_for 30 chat || fail "no chat through the gateway"
seen=""
for i in $(seq 1 30); do seen="$seen $(chat | sed -n 's/.*hello from chat-\([0-9]*\).*/\1/p')"; done
[ "$(echo $seen | tr ' ' '\n' | sort -u | wc -l)" -eq 3 ] || fail "not every replica served: $seen"
stop_gateway main
echo "spread ok"
