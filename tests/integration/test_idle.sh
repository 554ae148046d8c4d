#!/usr/bin/env bash
# test_idle.sh - idle-GPU reclaim (issue 33) with the real controller and a
# sim agent: a sim GPU's utilisation follows the CPU share of the job on it
# (docs/agent.md), so `sleep` holds its GPU idle and a busy loop keeps it
# busy. The org's idle policy (after 3 s, grace 2 s, requeue) is inherited
# by its team; another tenant's policy only warns.
#   - the idle job is warned (an "idle" event, corral_jobs_idle_warned_total)
#     and then requeued ("idle-requeue", corral_jobs_idle_reclaimed_total);
#   - the busy job beside it is never warned nor requeued;
#   - the warn-only tenant's idle job is warned and keeps running;
#   - an idle interactive allocation (corral alloc) is ended, not requeued;
#   - corral usage shows the idle share of the allocated GPU-hours, by
#     tenant and rolled up to the org (--level 1), as CSV and JSON.
# Polls with deadlines: an outcome never depends on a sleep.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup idle
printf '{"checkpoint_root": "%s/ckpt", "grace_s": 1}\n' "$DIR" >"$CKPT_CONF"
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n0 "$DIR/n0" "$DIR/agent.log" --gpus "sim:4xA100 80GB SXM"
up() { c nodes | grep -q ' up '; }
wait_for 60 up || fail "the agent did not register"

api() { # api METHOD PATH [BODY]: "BODY CODE"
    curl -s -X "$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        ${3:+--data "$3"} -w ' %{http_code}' "$SERVER$2"
}
mk() {
    local r
    r=$(api POST /v1/tenants "$1")
    case "$r" in *" 201") ;; *) fail "creating a tenant ($1): $r" ;; esac
}
mk '{"name":"org","idle":{"after_s":3,"grace_s":2,"action":"requeue"}}'
mk '{"name":"team","parent":"org"}'
mk '{"name":"watch","idle":{"after_s":3,"action":"warn"}}'
# Bad policies are refused naming the field.
r=$(api PUT /v1/tenants/watch '{"idle":{"after_s":0}}')
case "$r" in *'idle.after_s'*" 400") ;; *) fail "idle.after_s 0 was not refused by name: $r" ;; esac
r=$(api PUT /v1/tenants/watch '{"idle":{"after_s":5,"action":"kill"}}')
case "$r" in *'idle.action'*" 400") ;; *) fail "idle.action kill was not refused by name: $r" ;; esac

submit() { # submit TENANT NAME CMD...
    local t=$1 n=$2
    shift 2
    c submit --tenant "$t" --gpus 1 -n "$n" -- "$@" | grep -o '[0-9][0-9]*' | head -1
}
job() { c show --json "$1"; }
state() { job "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['state'])"; }
runs() { job "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['runs'])"; }
has_event() { # has_event JOB KIND
    job "$1" | python3 -c "
import json,sys
ev=json.load(sys.stdin).get('events',[])
sys.exit(0 if any('$2' in json.dumps(e) for e in ev) else 1)"
}
idle=$(submit team idle sleep 600)
busy=$(submit team busy sh -c 'while :; do :; done')
watch=$(submit watch watched sleep 600)
# an interactive allocation (what corral alloc submits: "interactive")
alloc=$(api POST /v1/jobs '{"name":"shell","tenant":"team","gpus":1,"interactive":true,"command":["sleep","600"]}' |
    sed 's/ [0-9]*$//' | python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('id') or d['ids'][0])" || true)
[ -n "$alloc" ] || fail "the interactive allocation was not accepted"
running() { [ "$(state "$1")" = running ]; }
for j in "$idle" "$busy" "$watch" "$alloc"; do
    wait_for 60 running "$j" || fail "job $j did not start: $(job "$j")"
done

wait_for 60 has_event "$idle" '"idle"' || fail "the idle job was not warned: $(job "$idle")"
wait_for 60 has_event "$idle" 'idle-requeue' || fail "the idle job was not requeued: $(job "$idle")"
wait_for 60 has_event "$watch" '"idle"' || fail "the warn-only tenant's idle job was not warned"
# The idle interactive allocation is ended, not requeued.
cancelled() { [ "$(state "$alloc")" = cancelled ]; }
wait_for 60 cancelled || fail "the idle interactive allocation was not ended: $(job "$alloc")"
has_event "$alloc" 'idle-cancel' || fail "the ended allocation does not say why: $(job "$alloc")"
# The busy job held its GPU busy all the while: never warned, never stopped.
has_event "$busy" '"idle' && fail "the busy job got an idle event: $(job "$busy")"
[ "$(state "$busy")" = running ] && [ "$(runs "$busy")" = 1 ] ||
    fail "the busy job was stopped: $(job "$busy")"
# The warn-only policy does not requeue.
has_event "$watch" 'idle-requeue' && fail "the warn-only tenant's job was requeued"
[ "$(runs "$watch")" = 1 ] || fail "the warn-only tenant's job ran again: $(job "$watch")"
# The requeued job comes back (the GPU is free) as a new run.
again() { [ "$(runs "$idle")" -ge 2 ]; }
wait_for 60 again || fail "the requeued idle job did not run again: $(job "$idle")"

m=$(curl -s -H "Authorization: Bearer $ADMIN" "$SERVER/metrics")
echo "$m" | grep -Eq '^corral_jobs_idle_warned_total [1-9]' || fail "no idle warning counted"
echo "$m" | grep -Eq '^corral_jobs_idle_reclaimed_total [1-9]' || fail "no idle reclaim counted"

# Showback: the idle share of allocated GPU-hours.
share() { # share TENANT [FLAGS]: idle_share of the tenant's row, from the CSV
    c usage --by tenant --period all --csv "${@:2}" |
        python3 -c "
import csv,sys
rows=[r for r in csv.DictReader(sys.stdin) if r['tenant']=='$1']
print(rows[0]['idle_share'] if rows else 'none')"
}
c usage --by tenant --period all --csv >"$DIR/usage.csv"
head -1 "$DIR/usage.csv" | grep -q '^tenant,gpu_type,day,gpu_hours,idle_gpu_hours,idle_share,' ||
    fail "usage CSV header: $(head -1 "$DIR/usage.csv")"
idle_some() { python3 -c "import sys; v='$(share team)'; sys.exit(0 if v!='none' and 0<float(v)<1 else 1)"; }
wait_for 30 idle_some || fail "team's idle share is not between 0 and 1 (one idle, one busy GPU): $(share team)"
org=$(share org --level 1)
python3 -c "import sys; sys.exit(0 if 0<float('$org')<1 else 1)" ||
    fail "--level 1 does not roll team up to org: $(c usage --by tenant --period all --level 1 --csv)"
c usage --by tenant --period all --level 1 --csv | grep -q '^team,' &&
    fail "--level 1 still shows team apart"
w=$(share watch)
python3 -c "import sys; sys.exit(0 if float('$w')>0.5 else 1)" ||
    fail "the idle-only tenant's idle share is $w, not most of its GPU time"
c usage --json --by tenant,day --period month | grep -q '"idle_gpu_hours"' || fail "usage JSON lacks idle_gpu_hours"
c cancel "$idle" "$busy" "$watch" >/dev/null
echo ok
