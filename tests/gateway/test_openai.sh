#!/bin/sh
# The real OpenAI client (npm "openai", pinned in openai/package-lock.json,
# installed by `npm ci` into tests/gateway/openai/node_modules when missing)
# driven by node against the gateway, keys from the real controller
# (issue 30's done-when). Skips (77) when node or the package is missing and
# cannot be installed.
HERE=$(cd "$(dirname "$0")" && pwd)/openai # before lib.sh moves to its temporary dir
. "$(dirname "$0")/lib.sh"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIP: node or npm missing (make deps installs them)"
    exit 77
fi
if [ ! -d "$HERE/node_modules/openai" ]; then
    (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund >"$T/npm.log" 2>&1) || {
        cat "$T/npm.log"
        echo "SKIP: npm ci of the openai package failed (no registry?)"
        exit 77
    }
fi
if "$CORRAL_BIN" controller --help 2>&1 | grep -q "not built yet"; then
    echo "corral controller not built: skipped"
    exit 77
fi
printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >"$T/ctl.json"
"$CORRAL_BIN" controller --config "$T/ctl.json" --state-dir "$T/st" --listen 127.0.0.1:0 \
    >ctl.out 2>ctl.log &
PIDS="$PIDS $!"
wait_for 10 grep -q "listening on http" ctl.log ctl.out || fail "controller did not start"
CTL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' ctl.log ctl.out | head -1)
wait_for 10 test -s "$T/st/admin.token" || fail "no admin token"
TOK=$(cat "$T/st/admin.token")
C() { CORRAL_SERVER=$CTL CORRAL_TOKEN=$TOK "$CORRAL_BIN" "$@"; }
curl -sf -H "Authorization: Bearer $TOK" -X POST "$CTL/v1/tenants" -d '{"name":"ml"}' >/dev/null ||
    fail "tenant ml"
start_backend A
cat >gw.json <<JSON
{"controller": "$CTL", "token": "$TOK",
 "services": [{"name": "chat", "tenant": "ml", "models": ["llama-8b", "llama"],
               "endpoints": ["127.0.0.1:$PORT_A"]}]}
JSON
start_gateway main --config gw.json
G=$GW_main
KEY=$(C keys create --tenant ml --name app) || fail "keys create"
REVOKED=$(C keys create --tenant ml --name gone 2>revoke.err) || fail "keys create"
RID=$(sed -n 's/Created key \([0-9]*\).*/\1/p' revoke.err)
C keys revoke "$RID" >/dev/null || fail "keys revoke $RID"
LIMITED=$(C keys create --tenant ml --name limited --rps 1) || fail "keys create --rps"
SCOPED=$(C keys create --tenant ml --name scoped --model llama-8b) || fail "keys create --model"
ready() { curl -sf -H "Authorization: Bearer $SCOPED" "http://$G/v1/models" | grep -q llama-8b; }
wait_for 10 ready || fail "the gateway did not take the keys"

GW_URL="http://$G" KEY=$KEY REVOKED=$REVOKED LIMITED=$LIMITED SCOPED=$SCOPED \
    node "$HERE/test_openai.mjs" >node.out 2>node.err || {
    cat node.out node.err
    fail "the openai client test failed"
}
cat node.out
set -- $(sed -n 's/^usage \([0-9]*\) \([0-9]*\)$/\1 \2/p' node.out)
[ $# -eq 2 ] || fail "no usage line from the client"
metric_is "$G" 'corral_gateway_tenant_tokens_total{tenant="ml",kind="prompt"}' "$1" &&
    metric_is "$G" 'corral_gateway_tenant_tokens_total{tenant="ml",kind="completion"}' "$2" ||
    fail "the gateway counted other tokens than the client got ($1, $2): $(metrics "$G" | grep tokens)"
[ "$(curl -sf "http://127.0.0.1:$PORT_A/stats" | awk '/^openai/ {print $2}')" = 3 ] ||
    fail "refused requests reached the replica: $(curl -sf "http://127.0.0.1:$PORT_A/stats")"
stop_gateway main
echo "openai ok"
