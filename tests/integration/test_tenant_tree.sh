#!/usr/bin/env bash
# test_tenant_tree.sh - the tenant tree (issue 33) against the real
# controller and a sim agent over HTTP: an org of 2 departments x 2 teams
# on 8 simulated GPUs, each team guaranteed 2 and team-b1 lending at most 1.
#   - bad trees are refused naming the field (a cycle, over-deep, a
#     guarantee above its parent's, an unknown parent), nothing changed;
#   - a borrowing job larger than the lending limits allow waits, saying so;
#   - the fair tree ranks as computed by hand (docs/scheduler.md);
#   - team-b1's guaranteed GPUs, lent to team-a1, come back when it submits
#     (team-a1's borrowed job is preempted, team-b1's starts);
#   - a flat tenant keeps working beside the tree.
# Polls with deadlines; no sleep decides an outcome.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup tenant-tree
printf '{"checkpoint_root": "%s/ckpt", "grace_s": 1}\n' "$DIR" >"$CKPT_CONF"
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n0 "$DIR/n0" "$DIR/agent.log" --gpus "sim:8xA100 80GB SXM"
up() { c nodes | grep -q ' up '; }
wait_for 60 up || fail "the agent did not register"
T=$(c nodes --json | python3 -c "import json,sys; print(json.load(sys.stdin)['items'][0]['gpus'][0]['model'])")

api() { # api METHOD PATH [BODY]: prints "CODE BODY"
    curl -s -X "$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        ${3:+--data "$3"} -w ' %{http_code}' "$SERVER$2"
}
q() { printf '{"%s":%s}' "$T" "$1"; }
mk() { # mk NAME PARENT GUARANTEE [EXTRA JSON MEMBERS]
    local r
    r=$(api POST /v1/tenants "{\"name\":\"$1\",\"parent\":\"$2\",\"quotas\":$(q "$3")${4:+,$4}}")
    case "$r" in *" 201") ;; *) fail "creating $1: $r" ;; esac
}
refused() { # refused FIELD METHOD PATH BODY: a 400 naming FIELD
    local r
    r=$(api "$2" "$3" "$4")
    case "$r" in *" 400") ;; *) fail "$2 $3 $4 was not refused: $r" ;; esac
    echo "$r" | grep -qF "\"field\": \"$1\"" || echo "$r" | grep -qF "\"field\":\"$1\"" ||
        fail "the refusal of $4 does not name field $1: $r"
}
field() { # field TENANT PYEXPR (t: the tenant's JSON)
    api GET "/v1/tenants/$1" | sed 's/ [0-9]*$//' |
        python3 -c "import json,sys; t=json.load(sys.stdin); print($2)"
}

mk org "" 8
mk dept-a org 4
mk dept-b org 4
mk team-a1 dept-a 2
mk team-a2 dept-a 2
mk team-b1 dept-b 2 "\"lending_limits\":$(q 1)"
mk team-b2 dept-b 2
r=$(api POST /v1/tenants '{"name":"solo"}') # a flat tenant, as before the tree
case "$r" in *" 201") ;; *) fail "creating solo: $r" ;; esac

# Bad trees: refused naming the field, nothing changed.
refused "quotas.$T" POST /v1/tenants "{\"name\":\"team-a0\",\"parent\":\"dept-a\",\"quotas\":$(q 1)}"
refused "quotas.$T" PUT /v1/tenants/team-a1 "{\"parent\":\"dept-a\",\"quotas\":$(q 3)}"
refused "quotas.$T" PUT /v1/tenants/dept-a "{\"parent\":\"org\",\"quotas\":$(q 3)}"
refused parent PUT /v1/tenants/org "{\"parent\":\"team-a1\",\"quotas\":$(q 8)}"
refused parent PUT /v1/tenants/dept-a "{\"parent\":\"dept-a\"}"
refused parent POST /v1/tenants '{"name":"orphan","parent":"no-such"}'
refused "limits.$T" PUT /v1/tenants/team-a2 "{\"quotas\":$(q 2),\"limits\":$(q 1)}"
p=team-a1
for i in 4 5 6 7 8; do mk "deep$i" "$p" 0; p=deep$i; done # levels 4..8
refused parent POST /v1/tenants "{\"name\":\"deep9\",\"parent\":\"$p\"}"
[ "$(field org "t['parent']")" = "" ] || fail "the refused cycle changed org's parent"
[ "$(field team-a1 "t['quotas']['$T']")" = 2 ] || fail "a refused PUT changed team-a1's guarantee"
[ "$(field dept-a "t['parent']")" = org ] || fail "a refused PUT moved dept-a"
api GET /v1/tenants/deep9 | grep -q ' 404$' || fail "the over-deep tenant was created"

# A tenant-admin token of dept-a manages the tenants below dept-a only.
TA=$(c tokens create --role user --tenant dept-a --name dept-a-admin --scope tenant-admin)
ta() { curl -s -X "$1" -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
    ${3:+--data "$3"} -w ' %{http_code}' "$SERVER$2"; }
r=$(ta POST /v1/tenants '{"name":"team-a0","parent":"dept-a"}')
case "$r" in *" 201") ;; *) fail "dept-a's tenant admin could not add team-a0: $r" ;; esac
r=$(ta POST /v1/tenants '{"name":"team-b3","parent":"dept-b"}')
case "$r" in *" 403") ;; *) fail "dept-a's tenant admin added a team under dept-b: $r" ;; esac
r=$(ta PUT /v1/tenants/dept-a "{\"parent\":\"org\",\"quotas\":$(q 8)}")
case "$r" in *" 403") ;; *) fail "dept-a's tenant admin changed dept-a itself: $r" ;; esac
r=$(ta PUT /v1/tenants/team-a0 '{"parent":"dept-b"}')
case "$r" in *" 403") ;; *) fail "dept-a's tenant admin moved team-a0 out of its subtree: $r" ;; esac
r=$(ta GET /v1/tenants)
echo "$r" | grep -q '"team-a1"' || fail "dept-a's tenant admin does not see team-a1: $r"
echo "$r" | grep -q '"team-b1"' && fail "dept-a's tenant admin sees dept-b's team-b1: $r"
r=$(ta POST /v1/tokens '{"role":"admin"}')
case "$r" in *" 403") ;; *) fail "a tenant-admin token minted a token: $r" ;; esac
r=$(api POST /v1/tokens '{"role":"admin","scope":"tenant-admin"}')
case "$r" in *'"scope"'*" 400") ;; *) fail "an admin token with scope tenant-admin was not refused: $r" ;; esac

submit() { # submit TENANT GPUS NAME
    c submit --tenant "$1" --gpus "$2" --gpu-type "$T" --preemptible -n "$3" -- sleep 600 |
        grep -o '[0-9][0-9]*' | head -1
}
state() { c show --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['state'])"; }
reason() { c show --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin).get('reason',''))"; }
is() { [ "$(state "$1")" = "$2" ]; }

# A job of team-a1 (guaranteed 2) larger than 2 runs borrowed, on the idle
# guarantees: its own 2, team-a2's 2, team-b2's 2 and 1 of team-b1's 2 (its
# lending limit): 7 GPUs at most, so 8 wait on the lending limits ...
big=$(submit team-a1 8 big)
says_lend() { reason "$big" | grep -q "lending limits"; }
wait_for 30 says_lend || fail "an 8-GPU borrower did not wait on the lending limits: $(reason "$big")"
c cancel "$big" >/dev/null
# ... and 7 start on borrowed capacity.
a1=$(submit team-a1 7 lent)
wait_for 30 is "$a1" running || fail "team-a1's 7-GPU job did not start: $(reason "$a1")"
a2=$(submit team-a2 1 own)
wait_for 30 is "$a2" running || fail "team-a2's job within its guarantee did not start: $(reason "$a2")"

# The fair tree, by hand: only dept-a's subtree has used GPUs, so under org
# dept-b (unused: LevelFS infinite) goes before dept-a; under dept-b both
# teams are unused (tie: by name); under dept-a team-a2 (1 GPU, weight 1)
# is below its share against team-a1 (7 GPUs). Among the roots, solo is
# unused (infinite) and goes before org, after "default" (unused too:
# ties go by name). Depth first: default, solo, org, dept-b,
# team-b1, team-b2, dept-a, team-a0 (unused, added by the tenant admin:
# first whether team-a2 has accrued usage yet or is unused too and tied,
# by name), team-a2, team-a1
# (deep4.. below team-a1 last).
ranks() {
    api GET /v1/tenants | sed 's/ [0-9]*$//' | python3 -c "
import json,sys
items=json.load(sys.stdin)['items']
r={t['name']:t['fair_rank'] for t in items}
order=sorted((v,k) for k,v in r.items() if v is not None and not k.startswith('deep'))
print(' '.join(k for v,k in order))"
}
want="default solo org dept-b team-b1 team-b2 dept-a team-a0 team-a2 team-a1"
ranked() { [ "$(ranks)" = "$want" ]; }
# (the ranks are published after a cycle that saw the usage: the agent's
# reports drive cycles)
wait_for 60 ranked || fail "fair-tree order: got '$(ranks)', want '$want'"
c tenants tree >"$DIR/tree.out"
grep -q "^    team-a1 " "$DIR/tree.out" || fail "tenants tree does not indent team-a1 under dept-a: $(cat "$DIR/tree.out")"
grep -E "^  dept-a .*$T=8" "$DIR/tree.out" >/dev/null ||
    fail "tenants tree does not show dept-a's 8 GPUs in use: $(cat "$DIR/tree.out")"

# team-b1 claims its guarantee: a1's borrowed job is preempted for it.
b1=$(submit team-b1 2 claim)
wait_for 30 is "$b1" running || fail "team-b1's guaranteed GPUs did not come back: $(reason "$b1"); a1 $(state "$a1")"
[ "$(state "$a1")" = pending ] || fail "team-a1's borrowed job is $(state "$a1"), not requeued"
c show --json "$a1" | grep -q "borrowed" || fail "the preemption does not say the capacity was borrowed"
is "$a2" running || fail "team-a2's job within its guarantee was preempted"

# A flat tenant beside the tree works as before.
s1=$(submit solo 1 flat)
wait_for 30 is "$s1" running || is "$s1" pending || fail "the flat tenant's job is $(state "$s1")"
c cancel "$a1" "$a2" "$b1" "$s1" >/dev/null
echo "ok"
