#!/bin/sh
# Bad command lines and config files: a message naming the flag or the
# member (with line and column for syntax errors), exit code 2.
. "$(dirname "$0")/lib.sh"

expect2() { # WHAT-TO-FIND ARGS...
    want=$1; shift
    rc=0
    "$CORRAL_BIN" gateway "$@" >out.txt 2>err.txt || rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2"
    grep -qF -- "$want" err.txt || fail "'$*': message lacks '$want': $(cat err.txt)"
}
expect2 "--listen" --listen nope
expect2 "--service" --service "bad name=127.0.0.1:1"
expect2 "--service" --service "@beta=127.0.0.1:1"
expect2 "--service" --service "chat@a@b=127.0.0.1:1"
expect2 "--service" --service "chat=127.0.0.1:notaport"
expect2 "--service chat: no endpoints" --service chat
expect2 "--max-inflight" --service chat=127.0.0.1:1 --max-inflight 0
expect2 "--hold-timeout" --service chat=127.0.0.1:1 --hold-timeout soon
expect2 "--controller" --controller ftp://x
expect2 "unknown flag" --service chat=127.0.0.1:1 --frobnicate
expect2 "metrics" --service metrics=127.0.0.1:1
printf '{"services": [{"name": "chat", "endpoints": ["127.0.0.1:1"], "weight": 2}]}' >unknown.json
expect2 "services[0].weight: unknown member" --config unknown.json
printf '{"services": [{"name": "chat", "endpoints": ["127.0.0.1"]}]}' >badep.json
expect2 "services[0].endpoints[0]" --config badep.json
printf '{"services": [\n  {"name": "chat",,}\n]}' >syntax.json
expect2 "syntax.json:2:" --config syntax.json
"$CORRAL_BIN" gateway --help >help.txt || fail "--help did not exit 0"
grep -q -- "--listen" help.txt || fail "--help lacks --listen"
echo "gateway cli: ok"
