#!/bin/bash
# The controller on etcd (--store etcd:URL), end to end with a real etcd,
# a real agent and the HTTP API:
#   - jobs submitted (single and an array) run and complete; a big array
#     over etcd's txn limit is refused with 413, not half stored;
#   - the controller is killed with SIGKILL and started again: every job
#     acknowledged is back with its state, events and pages; new ids follow
#     the old ones (never reused);
#   - corral admin migrate etcd -> sqlite: a controller on the copy lists
#     the same jobs; a non-empty target is refused; sqlite -> etcd back
#     into another cluster prefix, counts verified.
set -eu
. "$(dirname "$0")/lib.sh"
BIN=$CORRAL
ETCD=
for e in "${ETCD_BIN:-}" /usr/bin/etcd /usr/local/bin/etcd; do
    [ -n "$e" ] && [ -x "$e" ] && ETCD=$e && break
done
[ -n "$ETCD" ] || { echo "SKIP: no etcd binary (Debian package etcd-server)"; exit 77; }
CR_STOP=KILL
cr_setup etcd
T=$DIR
ports=$(free_ports 2)
CP=${ports% *} PP=${ports#* }
URL=http://127.0.0.1:$CP
"$ETCD" --data-dir "$T/etcd" --listen-client-urls "$URL" --advertise-client-urls "$URL" \
    --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "default=http://127.0.0.1:$PP" --log-level warn >"$T/etcd.log" 2>&1 &
PIDS+=($!)
wait_for 60 curl -sf -m 2 "$URL/health" || fail "etcd did not start"

start_ctl() { # DIR STORE-ARGS...
    d=$1; shift
    cr_start_controller "$d" --allow-legacy-join "$@"
    CTL=$CTL_PID
    S=$CORRAL_SERVER
    TOK=$CORRAL_TOKEN
}
api() { curl -sf -m 20 -H "Authorization: Bearer $TOK" "$@"; }
field() { api "$S$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }

# Bad store flags are refused with a message naming the flag.
if "$BIN" controller --store etcd:ftp://x --state-dir "$T/bad" >"$T/bad.out" 2>&1; then
    fail "--store etcd:ftp://x accepted"
fi
grep -q -- "--store" "$T/bad.out" || fail "bad --store message: $(cat "$T/bad.out")"

rm -f "$T/ctl1/listen.addr"
start_ctl "$T/ctl1" --store "etcd:$URL" --store-cluster itest
grep -q "store: etcd" "$T/controller.log" || true
"$BIN" agent --server "$S" --join-token "$T/ctl1/join.token" --node n1 \
    --gpus "sim:2xA100 80GB SXM" --listen 127.0.0.1:0 --state-dir "$T/agent" --wait 5s \
    >"$T/agent.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
node_up() { [ "$(field /v1/nodes "d['items'][0]['state']")" = up ]; }
wait_for 30 node_up || fail "the agent did not register"

ids=""
for i in 1 2 3 4 5 6; do
    id=$(api -X POST "$S/v1/jobs" -d "{\"name\":\"j$i\",\"gpus\":1,\"command\":[\"true\"]}" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['ids'][0])") || fail "submit $i"
    ids="$ids $id"
done
arr=$(api -X POST "$S/v1/jobs" -d '{"name":"arr","gpus":1,"array":20,"command":["true"]}' |
    python3 -c "import json,sys; print(len(json.load(sys.stdin)['ids']))") || fail "array of 20"
[ "$arr" = 20 ] || fail "array of 20 gave $arr ids"
# Over etcd's txn limit in one submission: 413, and nothing of it stored.
code=$(curl -s -o "$T/big.json" -w '%{http_code}' -m 20 -H "Authorization: Bearer $TOK" \
    -X POST "$S/v1/jobs" -d '{"name":"big","gpus":1,"array":500,"command":["true"]}')
[ "$code" = 413 ] || fail "array of 500 on etcd: HTTP $code $(cat "$T/big.json")"
grep -q "max-txn-ops" "$T/big.json" || fail "413 without the reason: $(cat "$T/big.json")"
# A pending job that can never run (no such GPU count) stays pending.
pend=$(api -X POST "$S/v1/jobs" -d '{"name":"waits","gpus":64,"command":["true"]}' |
    python3 -c "import json,sys; print(json.load(sys.stdin)['ids'][0])")
done_all() { [ "$(field "/v1/jobs?state=completed&limit=100" "d['total']")" = 26 ]; }
wait_for 90 done_all || fail "26 jobs did not complete: $(api "$S/v1/jobs?limit=100" | head -c 600)"
total=$(field "/v1/jobs?limit=5" "d['total']")
[ "$total" = 27 ] || fail "total $total, want 27"

# --- SIGKILL and restart: everything acknowledged is back ------------------
kill -9 "$CTL"; wait "$CTL" 2>/dev/null || true
rm -f "$T/ctl1/listen.addr"
start_ctl "$T/ctl1" --store "etcd:$URL" --store-cluster itest
[ "$(field "/v1/jobs?limit=5" "d['total']")" = 27 ] || fail "after restart: total $(field "/v1/jobs?limit=5" "d['total']")"
[ "$(field "/v1/jobs?state=completed&limit=100" "d['total']")" = 26 ] || fail "completed jobs lost"
[ "$(field "/v1/jobs/$pend" "d['state']")" = pending ] || fail "pending job $pend: $(api "$S/v1/jobs/$pend")"
for id in $ids; do
    [ "$(field "/v1/jobs/$id" "d['state']")" = completed ] || fail "job $id after restart"
done
first=${ids# }; first=${first%% *}
nev=$(field "/v1/jobs/$first" "len(d.get('events', []))")
[ "$nev" -ge 3 ] || fail "job $first has $nev events after restart: $(api "$S/v1/jobs/$first")"
# Pages: 27 jobs, 10 at a time, newest first, every id once.
seen=$(python3 - "$S" "$TOK" <<'PY'
import json, sys, urllib.request
s, tok = sys.argv[1], sys.argv[2]
ids, cur = [], None
while True:
    u = s + "/v1/jobs?limit=10" + (f"&cursor={cur}" if cur else "")
    r = urllib.request.Request(u, headers={"Authorization": "Bearer " + tok})
    d = json.load(urllib.request.urlopen(r))
    ids += [i["id"] for i in d["items"]]
    cur = d.get("next_cursor")
    if not cur:
        break
print(len(ids), len(set(ids)))
PY
)
[ "$seen" = "27 27" ] || fail "paging after restart saw '$seen'"
new=$(api -X POST "$S/v1/jobs" -d '{"name":"after","gpus":64,"command":["true"]}' |
    python3 -c "import json,sys; print(json.load(sys.stdin)['ids'][0])")
[ "$new" -gt "$pend" ] || fail "new id $new not above the old $pend (ids reused)"
[ "$(field "/v1/jobs?limit=5" "d['total']")" = 28 ] || fail "total after a new submit"

# --- migrate etcd -> sqlite and back ---------------------------------------
kill "$AGENT"; wait "$AGENT" 2>/dev/null || true; AGENT=
kill "$CTL"; wait "$CTL" 2>/dev/null || true; CTL=
"$BIN" admin migrate --from "etcd:$URL" --to "sqlite:$T/mig" --cluster itest >"$T/mig.out" 2>&1 ||
    fail "migrate etcd->sqlite: $(cat "$T/mig.out")"
grep -q "28 jobs" "$T/mig.out" || fail "migrate said: $(cat "$T/mig.out")"
if "$BIN" admin migrate --from "etcd:$URL" --to "sqlite:$T/mig" --cluster itest >"$T/mig2.out" 2>&1; then
    fail "migrate into a non-empty target accepted"
fi
grep -q "not empty" "$T/mig2.out" || fail "non-empty target message: $(cat "$T/mig2.out")"
cp "$T/ctl1/admin.token" "$T/ctl1/join.token" "$T/mig/"
start_ctl "$T/mig"
[ "$(field "/v1/jobs?limit=5" "d['total']")" = 28 ] || fail "sqlite copy: total"
[ "$(field "/v1/jobs?state=completed&limit=100" "d['total']")" = 26 ] || fail "sqlite copy: completed"
[ "$(field "/v1/jobs/$first" "d['state']")" = completed ] || fail "sqlite copy: job $first"
kill "$CTL"; wait "$CTL" 2>/dev/null || true; CTL=
"$BIN" admin migrate --from "sqlite:$T/mig" --to "etcd:$URL" --cluster back >"$T/back.out" 2>&1 ||
    fail "migrate sqlite->etcd: $(cat "$T/back.out")"
grep -q "28 jobs" "$T/back.out" || fail "migrate back said: $(cat "$T/back.out")"
rm -f "$T/mig/listen.addr"
start_ctl "$T/mig" --store "etcd:$URL" --store-cluster back
[ "$(field "/v1/jobs?limit=5" "d['total']")" = 28 ] || fail "etcd copy: total"
echo "etcd store: all checks passed"
