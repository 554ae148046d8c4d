#!/usr/bin/env bash
# test_install.sh - `make install` (meson install with DESTDIR) gives a
# tree that works on its own, the way docs/install.md describes:
#  - the tree is moved elsewhere (a relocated prefix) and `corral advise`
#    still finds the catalog and prices under <prefix>/share/corral;
#  - with the installed catalog gone, advise and the controller stop with
#    an error naming the installed path: no silent fallback to the
#    source tree or to "any type";
#  - the systemd units verify (systemd-analyze verify), with the man page
#    they name;
#  - the example configs pass `corral config check`, a broken one fails
#    with its line and column, an unknown field by name;
#  - logs: --log-format json gives JSON lines, journald priorities when
#    stderr is the JOURNAL_STREAM, an unknown CORRAL_LOG is an error.
set -euo pipefail

BUILD=${CORRAL_BUILD:?CORRAL_BUILD not set}
DIR=$(mktemp -d /tmp/corral-install-XXXXXX)
trap '[ -n "${CORRAL_KEEP:-}" ] || rm -rf "$DIR"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

meson install -C "$BUILD" --no-rebuild --quiet --destdir "$DIR/stage" >"$DIR/install.log" 2>&1 ||
    fail "meson install: $(tail -5 "$DIR/install.log")"
PREFIX=$(meson introspect "$BUILD" --buildoptions |
    python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
# Relocate: the installed tree must not depend on where it was staged.
mv "$DIR/stage$PREFIX" "$DIR/moved"
ROOT=$DIR/moved
BIN=$ROOT/bin/corral
for f in bin/corral share/corral/gpus/catalog.csv share/corral/prices.csv \
    share/corral/traces/gavel/simulation_throughputs.json share/corral/examples/agent.json \
    share/man/man1/corral.1 share/bash-completion/completions/corral; do
    [ -e "$ROOT/$f" ] || fail "not installed: $f"
done
units=$(find "$DIR/stage" "$ROOT" -name 'corral-*.service' | sort)
[ "$(echo "$units" | wc -l)" -eq 3 ] || fail "units: $units"

unset CORRAL_DATA
cd "$DIR"
out=$("$BIN" advise --kind finetune --params 7b 2>&1) || fail "advise from the install: $out"
echo "$out" | grep -q "Best by cost" || fail "advise output: $out"
out=$("$BIN" advise --kind inference --model llama-3.1-8b --rate 2 2>&1) || fail "advise --model from the install: $out"
# The binary is not in the build tree, so it reads the installed data:
# prove it by taking that away.
mv "$ROOT/share/corral/gpus/catalog.csv" "$DIR/catalog.csv"
out=$("$BIN" advise --kind finetune --params 7b 2>&1) && fail "advise without a catalog succeeded"
echo "$out" | grep -q "$ROOT/bin/../share/corral/gpus/catalog.csv\|/share/corral/gpus/catalog.csv" ||
    fail "advise error does not name the installed catalog: $out"
out=$("$BIN" controller --listen 127.0.0.1:0 --state-dir "$DIR/st" 2>&1) &&
    fail "controller without a catalog started"
echo "$out" | grep -q "GPU catalog: .*catalog.csv" || fail "controller error: $out"
# --data-dir and CORRAL_DATA point elsewhere.
mkdir -p "$DIR/alt/gpus"
cp "$DIR/catalog.csv" "$DIR/alt/gpus/"
cp "$ROOT/share/corral/prices.csv" "$DIR/alt/"
"$BIN" --data-dir "$DIR/alt" advise --kind finetune --params 7b | grep -q "Best by cost" ||
    fail "--data-dir"
CORRAL_DATA=$DIR/alt "$BIN" advise --kind finetune --params 7b | grep -q "Best by cost" ||
    fail "CORRAL_DATA"
mv "$DIR/catalog.csv" "$ROOT/share/corral/gpus/catalog.csv"

# systemd units: verify with ExecStart pointing at this install.
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$DIR/units"
    for u in $units; do
        sed "s|^ExecStart=[^ ]*/corral |ExecStart=$BIN |" "$u" >"$DIR/units/$(basename "$u")"
    done
    grep -q '^Delegate=yes' "$DIR/units/corral-agent.service" || fail "agent unit: no Delegate=yes"
    grep -q '^KillMode=process' "$DIR/units/corral-agent.service" || fail "agent: KillMode"
    for u in controller gateway; do
        grep -q '^ProtectSystem=strict' "$DIR/units/corral-$u.service" || fail "$u: ProtectSystem"
        grep -q '^NoNewPrivileges=yes' "$DIR/units/corral-$u.service" || fail "$u: NoNewPrivileges"
    done
    MANPATH=$ROOT/share/man systemd-analyze verify "$DIR"/units/*.service >"$DIR/verify.log" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$DIR/verify.log")"
    [ ! -s "$DIR/verify.log" ] || fail "systemd-analyze verify warned: $(cat "$DIR/verify.log")"
else
    echo "skip: systemd-analyze missing (make deps installs systemd)"
    exit 77
fi

# config check: every example as its role, then broken files.
for r in controller agent gateway cli; do
    "$BIN" config check "$r" "$ROOT/share/corral/examples/$r.json" >/dev/null ||
        fail "example $r.json does not pass config check"
done
printf '{\n  "server": "http://ctl:8620",\n  "gpus": "auto"\n  "node": "x"\n}\n' >"$DIR/bad.json"
out=$("$BIN" config check agent "$DIR/bad.json" 2>&1) && fail "broken agent config passed"
echo "$out" | grep -q "bad.json:4:" || fail "no line number: $out"
printf '{"server": "http://ctl:8620", "gpu": "auto"}' >"$DIR/bad.json"
out=$("$BIN" config check agent "$DIR/bad.json" 2>&1) && fail "unknown agent field passed"
echo "$out" | grep -q "field 'gpu': unknown member" || fail "unknown field: $out"
printf '{"listen": "0.0.0.0:8620", "policy": "fastest"}' >"$DIR/bad.json"
out=$("$BIN" config check controller "$DIR/bad.json" 2>&1) && fail "bad policy passed"
echo "$out" | grep -q "field 'policy'" || fail "bad policy: $out"
# The agent reads its flags from --config; a flag on the command line wins.
printf '{"server": "http://127.0.0.1:1", "join_token": "x", "gpus": "sim:1xA100 80GB SXM",
 "listen": "127.0.0.1:0", "state_dir": "%s/ag", "run_for": "1s"}' "$DIR" >"$DIR/agent.json"
out=$("$BIN" agent --config "$DIR/agent.json" --gpus sim:1xNoSuchGPU 2>&1) &&
    fail "agent with a bad --gpus flag over a good config started"
echo "$out" | grep -q "NoSuchGPU" || fail "the flag did not win over the config: $out"
out=$("$BIN" agent --config "$DIR/agent.json" --gpus "sim:1xA100 80GB SXM" 2>&1 | head -c 8000)
echo "$out" | grep -q "gpus=1 (sim)" || fail "agent from its config: $out"
# A switch member takes true/false: false is --job-pid-namespace off, said at start.
printf '{"server": "http://127.0.0.1:1", "join_token": "x", "gpus": "sim:1xA100 80GB SXM",
 "listen": "127.0.0.1:0", "state_dir": "%s/ag", "run_for": "1s", "job_pid_namespace": false}' \
    "$DIR" >"$DIR/agent.json"
out=$("$BIN" agent --config "$DIR/agent.json" 2>&1 | head -c 8000)
echo "$out" | grep -q "isolation processes: .*--job-pid-namespace off" ||
    fail "job_pid_namespace false not taken as off: $out"
printf '{"server": "http://ctl:8620", "job_pid_namespace": "yes"}' >"$DIR/bad.json"
out=$("$BIN" config check agent "$DIR/bad.json" 2>&1) && fail "job_pid_namespace \"yes\" passed"
echo "$out" | grep -q "field 'job_pid_namespace': expected true, false" || fail "bad switch: $out"
set +e
"$BIN" config check nosuchrole "$DIR/bad.json" 2>/dev/null
[ $? -eq 2 ] || fail "unknown role: not a usage error"
set -e

# Logs. An unknown level is an error, not silence.
out=$(CORRAL_LOG=verbose "$BIN" version 2>&1) && fail "CORRAL_LOG=verbose accepted"
echo "$out" | grep -q "CORRAL_LOG: expected debug|info|warn|error|off" || fail "CORRAL_LOG: $out"
# Global options: among a daemon's flags too; never inside a client
# command's arguments (a job's command line is not ours).
out=$("$BIN" controller --log-format yaml 2>&1) && fail "controller --log-format yaml accepted"
echo "$out" | grep -q "log-format: expected json|text, got 'yaml'" || fail "daemon global: $out"
out=$("$BIN" advise --kind hpc --params 1b --data-dir /nonexistent 2>&1) &&
    fail "a client command took --data-dir after its name"
echo "$out" | grep -q "unknown option --data-dir" || fail "client global: $out"
# A controller run until its first lines are out, in JSON then for journald.
run_ctl() { # run_ctl LOGFILE ARGS... : start, wait for 'listening', stop
    "$BIN" "${@:2}" controller --listen 127.0.0.1:0 --state-dir "$DIR/st" 2>>"$1" &
    local pid=$! end=$((SECONDS + 30))
    until grep -q "listening" "$1" 2>/dev/null; do
        [ "$SECONDS" -ge "$end" ] && {
            kill "$pid"
            fail "controller did not start: $(cat "$1")"
        }
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid" || true
}
: >"$DIR/json.log"
run_ctl "$DIR/json.log" --log-format json
python3 - "$DIR/json.log" <<'PY' || fail "JSON log lines: $(head -3 "$DIR/json.log")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert lines and all({"ts", "level", "msg"} <= set(l) for l in lines), lines
assert any(l["level"] == "info" and "listening" in l["msg"] for l in lines), lines
PY
: >"$DIR/journal.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$DIR/journal.log") run_ctl "$DIR/journal.log"
grep -q '^<6>INFO controller listening' "$DIR/journal.log" ||
    fail "no journald priority: $(head -3 "$DIR/journal.log")"
# JOURNAL_STREAM inherited by a process whose stderr is elsewhere: plain text.
: >"$DIR/plain.log"
JOURNAL_STREAM=1:2 run_ctl "$DIR/plain.log"
grep -q '^20[0-9-]*T.* INFO  controller listening' "$DIR/plain.log" ||
    fail "plain text log: $(head -3 "$DIR/plain.log")"
echo "ok: relocated install, data from the prefix, units verify, config check, log formats"
