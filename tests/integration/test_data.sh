#!/usr/bin/env bash
# test_data.sh SECTION - datasets and models (issue 32, docs/data.md), one
# meson test per section:
#   objects  corral data add/list/show/rm: versions, per-tenant visibility,
#            sha256 and size worked out for file:, and each bad input a 400
#            naming the field and the dataset (unknown scheme, bad name, bad
#            checksum, unknown dataset or version at submit); the objects
#            survive a controller restart
#   stage    the agent's node cache over real HTTP (python3 -m http.server)
#            and file:: two jobs asking for one dataset on one node cause one
#            GET; the job reads it at CORRAL_DATA_<NAME> and its bytes match;
#            a corrupted cache entry is found (sha256) and fetched again; the
#            cache's cap is never exceeded (LRU eviction of unpinned
#            entries); a checksum mismatch, an object larger than the cache
#            and a missing file each fail the job once (no retry) with a
#            reason naming the dataset, and leave nothing in the cache
#   logs     a finished job's stdout and stderr are shipped to the
#            controller: corral logs answers after corral nodes delete
# Polls with deadlines; no sleep is a synchronisation.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
SECTION=${1:?section}
cr_setup "data-$SECTION"

submit() { "$CORRAL" submit "$@" | grep -o '[0-9][0-9]*' | head -1; }
state_is() { "$CORRAL" show "$1" | grep -q "State: *$2"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

objects() {
    cr_start_controller "$DIR/ctl"
    head -c 100000 /dev/urandom >"$DIR/a.bin"
    out=$("$CORRAL" data add ds1 "file:$DIR/a.bin")
    echo "$out" | grep -q "added ds1@1 (100000 bytes, sha256 $(sha "$DIR/a.bin"))" ||
        fail "data add: $out"
    out=$("$CORRAL" data add ds1 "file://$DIR/a.bin")
    echo "$out" | grep -q "added ds1@2" || fail "second add is not version 2: $out"
    # Bad input: a 400 naming the field and the dataset; nothing stored.
    bad() { # bad EXPECT ARGS...
        local want=$1 err
        shift
        if err=$("$CORRAL" data add "$@" 2>&1); then fail "data add $* was accepted"; fi
        echo "$err" | grep -q -- "$want" || fail "data add $*: '$err' does not say '$want'"
    }
    z=$(printf '%064d' 0)
    bad "field 'uri': dataset 'x': unknown scheme 'ftp'" x ftp://h/x --sha256 "$z" --size 1
    bad "field 'sha256': dataset 'x': must be 64 hex digits" x http://h/x --sha256 abc --size 1
    bad "field 'name': dataset 'b@d'" 'b@d' http://h/x --sha256 "$z" --size 1
    bad "field 'uri': dataset 'x': s3:// needs a bucket and a key" x s3://bucket --sha256 "$z" --size 1
    bad "field 'uri': dataset 'x': file: needs an absolute path" x file:rel/x --sha256 "$z" --size 1
    bad "dataset 'x': --sha256 and --size are needed" x http://h/x
    bad "'world' is not allowed (allowed: tenant, all)" x http://h/x --sha256 "$z" --size 1 \
        --visibility world
    [ "$("$CORRAL" data list | grep -c '^ds1 ')" = 2 ] || fail "list: $("$CORRAL" data list)"
    "$CORRAL" data list | grep -q '^x ' && fail "a refused object was stored"
    # s3:// is accepted (fetched with SigV4; see docs/data.md: untested here).
    "$CORRAL" data add s3obj s3://bucket/key/x.bin --sha256 "$z" --size 10 >/dev/null ||
        fail "s3:// refused"
    # Tenants: ml sees its own and the shared one, not default's.
    c tenants create ml >/dev/null
    tok=$(c tokens create --role user --tenant ml --name alice 2>/dev/null | tail -1)
    [ -n "$tok" ] || fail "no token for ml"
    ml() { "$CORRAL" "$1" --token "$tok" "${@:2}"; }
    "$CORRAL" data add shared "file:$DIR/a.bin" --visibility all >/dev/null
    ml data list | grep -q '^ds1 ' && fail "tenant ml sees default's ds1"
    ml data list | grep -q '^shared ' || fail "tenant ml does not see the shared object"
    ml data show ds1 >/dev/null 2>&1 && fail "tenant ml may show default's ds1"
    ml data add mine "file:$DIR/a.bin" >/dev/null || fail "ml data add"
    "$CORRAL" data list | grep -q '^mine .*ml ' || fail "admin does not see ml's object"
    # Submit: resolved names, clear errors.
    err=$(ml submit --gpus 0 --data ds1 -- true 2>&1) && fail "ml used default's ds1"
    echo "$err" | grep -q "field 'data\[0\]': dataset 'ds1' not found for tenant 'ml'" || fail "$err"
    err=$("$CORRAL" submit --gpus 0 --data ds1@9 -- true 2>&1) && fail "ds1@9 accepted"
    echo "$err" | grep -q "dataset 'ds1' has no version 9 (latest 2)" || fail "$err"
    err=$("$CORRAL" submit --gpus 0 --data 'ds1:rel' -- true 2>&1) && fail "a relative mount accepted"
    echo "$err" | grep -q "field 'data\[0\]': dataset 'ds1': the mount point must be an absolute" ||
        fail "$err"
    id=$(ml submit --gpus 0 --data shared --data mine@1:/data/mine -- true | grep -o "[0-9][0-9]*" | head -1)
    [ -n "$id" ] || fail "submit with data"
    "$CORRAL" show "$id" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
assert [x["name"] for x in d] == ["shared", "mine"], d
assert d[1]["mount"] == "/data/mine" and d[1]["version"] == 1, d
assert d[0]["env"] == "CORRAL_DATA_SHARED", d
' || fail "the job's resolved data: $("$CORRAL" show "$id" --json)"
    # rm: one version, then the name.
    "$CORRAL" data rm ds1@1 | grep -q "removed ds1 (1 versions)" || fail "rm ds1@1"
    "$CORRAL" data show ds1 | grep -q '^ds1 *2 ' || fail "ds1@2 gone too"
    err=$("$CORRAL" data rm ds1@1 2>&1) && fail "rm of a removed version"
    echo "$err" | grep -q "dataset 'ds1' has no version 1" || fail "$err"
    # A restart keeps them.
    cr_stop_pids TERM "$CTL_PID"
    cr_start_controller "$DIR/ctl"
    "$CORRAL" data show ds1 | grep -q '^ds1 *2 ' || fail "ds1@2 lost in a restart"
    "$CORRAL" data show ds1 | grep -q '^ds1 *1 ' && fail "ds1@1 back after a restart"
    "$CORRAL" data add ds1 "file:$DIR/a.bin" | grep -q "added ds1@3" || fail "version after restart"
    "$CORRAL" data rm ds1 | grep -q "removed ds1 (2 versions)" || fail "rm ds1"
    echo "ok: data objects (versions, tenants, bad input named, restart)"
}

case $SECTION in
objects) objects ;;
*) fail "unknown section $SECTION" ;;
esac
