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
#   locality a job whose data a node holds goes there before the best-fit
#            node (two agents: 1 and 2 GPUs)
#   container (root, podman, busybox-static; else skipped) a job with an
#            image sees each object bind-mounted read-only at its mount
#            point (else /corral/data/NAME), CORRAL_DATA_<NAME> naming it
#   logs     a finished job's stdout and stderr are shipped to the
#            controller: corral logs answers after corral nodes delete;
#            a retried run gets CORRAL_CHECKPOINT_LATEST
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
    err=$(ml data add mine "file:$DIR/a.bin" 2>&1) && fail "a user added a file: path outside mounts_allowed"
    echo "$err" | grep -q "field 'uri': dataset 'mine': a user adds file: paths only under" || fail "$err"
    ml data add mine "http://h/mine.bin" --sha256 "$z" --size 5 >/dev/null || fail "ml data add"
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


# The node's cache holds at most CAP bytes: entries and partial fetches.
CAP=4000000
cache_bytes() {
    # by inode: a fetch renamed from .partial while find runs counts once
    find "$DIR/n1/data" -type f -printf '%i %s\n' 2>/dev/null | sort -u -k1,1 |
        awk '{t += $2} END {print t + 0}'
}
cleanup_extra() {
    [ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null
    [ -n "${HTTP_PID:-}" ] && kill "$HTTP_PID" 2>/dev/null
    return 0
}
gets() { grep -c "\"GET /$1 " "$DIR/http.log" || true; }
reason_has() { "$CORRAL" show "$1" | grep -q "Reason: .*$2"; }

stage() {
    mkdir -p "$DIR/www"
    for f in d1 d2 d4; do head -c 3000000 /dev/urandom >"$DIR/www/$f.bin"; done
    head -c 5000000 /dev/urandom >"$DIR/www/d3.bin"
    (cd "$DIR/www" && exec python3 -m http.server 0 --bind 127.0.0.1) >"$DIR/http.log" 2>&1 &
    HTTP_PID=$!
    PIDS+=("$HTTP_PID")
    wait_for 20 grep -q 'port [0-9]' "$DIR/http.log" || fail "http.server did not start"
    port=$(grep -o 'port [0-9]*' "$DIR/http.log" | head -1 | grep -o '[0-9]*')
    URL=http://127.0.0.1:$port
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:2xA100 80GB SXM" \
        --data-cache-max "$CAP"
    up() { "$CORRAL" nodes | grep -q '^n1 *up'; }
    wait_for 60 up || fail "agent n1 did not register"
    # A sampler of the cache's size the whole test long: never past the cap.
    (while :; do cache_bytes >>"$DIR/sizes"; sleep 0.05; done) &
    SAMPLER=$!
    add() { "$CORRAL" data add "$1" "$2" --sha256 "${3:-$(sha "$DIR/www/$1.bin")}" \
        --size "$(stat -c %s "$DIR/www/$1.bin")" >/dev/null || fail "data add $1"; }
    add d1 "$URL/d1.bin"
    add d2 "file:$DIR/www/d2.bin"
    add d3 "$URL/d3.bin"
    add d4 "$URL/d4.bin" "$(printf '%064d' 4)"
    "$CORRAL" data add d5 "file:$DIR/www/none.bin" --sha256 "$(printf '%064d' 5)" --size 10 >/dev/null

    # 1. Two jobs asking for d1 at once on one node: one fetch.
    j1=$(submit --gpus 1 --data d1 -- sh -c "cmp \"\$CORRAL_DATA_D1\" $DIR/www/d1.bin && echo same")
    j2=$(submit --gpus 1 --data d1:/data/d1 -- sh -c "cmp \"\$CORRAL_DATA_D1\" $DIR/www/d1.bin && echo same")
    for j in "$j1" "$j2"; do
        wait_for 60 state_is "$j" completed || fail "job $j did not complete: $("$CORRAL" show "$j")"
        [ "$("$CORRAL" logs "$j")" = same ] || fail "job $j did not read d1: $("$CORRAL" logs "$j")"
    done
    [ "$(gets d1.bin)" = 1 ] || fail "d1 was fetched $(gets d1.bin) times for two jobs"
    [ "$(grep -c 'data: fetched d1@1' "$DIR/agent-1.log")" = 1 ] || fail "the agent fetched d1 twice"
    entry=$DIR/n1/data/$(sha "$DIR/www/d1.bin")
    [ -f "$entry" ] || fail "no cache entry $entry"
    [ "$(stat -c %a "$entry")" = 444 ] || fail "entry mode $(stat -c %a "$entry")"

    # 2. A corrupted entry is found at the next job's check and fetched again.
    chmod u+w "$entry"
    printf 'X' | dd of="$entry" bs=1 seek=1000 conv=notrunc 2>/dev/null
    j3=$(submit --gpus 1 --data d1 -- sh -c "cmp \"\$CORRAL_DATA_D1\" $DIR/www/d1.bin && echo same")
    wait_for 60 state_is "$j3" completed || fail "job $j3 did not complete: $("$CORRAL" show "$j3")"
    [ "$("$CORRAL" logs "$j3")" = same ] || fail "job $j3 read a corrupted d1"
    grep -q 'data: d1@1: the cached copy is damaged' "$DIR/agent-1.log" || fail "no 'damaged' line"
    [ "$(gets d1.bin)" = 2 ] || fail "the damaged d1 was not fetched again ($(gets d1.bin) GETs)"

    # 3. The cap: d1 held by a running job, d2 (file:) waits for room,
    # says so in its reason, and gets it once d1's job ended (d1 evicted).
    j4=$(submit --gpus 1 --data d1 -- sh -c "touch $DIR/j4.started; while [ ! -e $DIR/go ]; do sleep 0.1; done")
    wait_for 60 test -e "$DIR/j4.started" || fail "job $j4 did not start: $("$CORRAL" show "$j4")"
    j5=$(submit --gpus 1 --data d2 -- sh -c "cmp \"\$CORRAL_DATA_D2\" $DIR/www/d2.bin && echo same")
    wait_for 60 reason_has "$j5" "staging d2@1: waiting for room in the node's data cache" ||
        fail "job $j5's reason: $("$CORRAL" show "$j5" | grep Reason)"
    state_is "$j5" running || fail "job $j5 is not running (holding its GPU) while staged"
    touch "$DIR/go"
    wait_for 60 state_is "$j5" completed || fail "job $j5 did not complete: $("$CORRAL" show "$j5")"
    [ "$("$CORRAL" logs "$j5")" = same ] || fail "job $j5 did not read d2"
    grep -q 'data: evicted d1@1 (3000000 bytes, least recently used) for d2@1' "$DIR/agent-1.log" ||
        fail "d1 was not evicted for d2"
    [ ! -e "$entry" ] || fail "d1's entry is still there"

    # 4. Failures: one run each (no retry), the reason names the dataset,
    # nothing half-written left.
    failed_with() { # failed_with DATASET TEXT
        local j
        j=$(submit --gpus 1 --data "$1" -- true)
        wait_for 60 state_is "$j" failed || fail "job $j ($1) did not fail: $("$CORRAL" show "$j")"
        "$CORRAL" show "$j" | grep -q "Reason: *$2" ||
            fail "job $j's reason does not say '$2': $("$CORRAL" show "$j" | grep Reason)"
        "$CORRAL" show "$j" | grep -q "Retries: *0" || fail "job $j was retried"
    }
    failed_with d3 "data d3@1: 5000000 bytes, larger than this node's data cache (cap $CAP bytes)"
    failed_with d4 "data d4@1: checksum mismatch: what came does not have the object's sha256 $(printf '%064d' 4)"
    grep -q "data: d4@1: what came has sha256 $(sha "$DIR/www/d4.bin")" "$DIR/agent-1.log" ||
        fail "the agent did not log what came"
    failed_with d5 "data d5@1: cannot open $DIR/www/none.bin"
    [ -z "$(ls -A "$DIR/n1/data/.partial")" ] || fail "partial files left: $(ls "$DIR/n1/data/.partial")"
    [ ! -e "$DIR/n1/data/$(printf '%064d' 4)" ] || fail "a bad d4 is in the cache"
    [ "$(gets d3.bin)" = 0 ] || fail "d3 (larger than the cache) was fetched"

    # 5. A partial fetch is resumed (file:): its first 1000000 bytes planted.
    head -c 1000000 "$DIR/www/d2.bin" >/dev/null
    head -c 2000000 /dev/urandom >"$DIR/www/d6.bin"
    add d6 "file:$DIR/www/d6.bin"
    head -c 1000000 "$DIR/www/d6.bin" >"$DIR/n1/data/.partial/$(sha "$DIR/www/d6.bin").part"
    j6=$(submit --gpus 1 --data d6 -- sh -c "cmp \"\$CORRAL_DATA_D6\" $DIR/www/d6.bin && echo same")
    wait_for 60 state_is "$j6" completed || fail "job $j6 did not complete: $("$CORRAL" show "$j6")"
    [ "$("$CORRAL" logs "$j6")" = same ] || fail "job $j6 did not read d6"
    grep -q 'data: d6@1: resuming a partial fetch at 1000000 bytes' "$DIR/agent-1.log" ||
        fail "the partial fetch was not resumed"
    grep -q 'data: fetched d6@1 (2000000 bytes, sha256 ok, resumed' "$DIR/agent-1.log" ||
        fail "no 'resumed' fetch line"

    # 6. A service's --model-weights: each replica reads the model at
    # CORRAL_MODEL_WEIGHTS; the second replica on the node starts from the
    # cache (one GET for both).
    before=$(gets d1.bin)
    err=$("$CORRAL" services create bad --gpus 1 --model-weights nope -- true 2>&1) &&
        fail "a service with an unknown model was created"
    echo "$err" | grep -q "field 'model_weights': dataset 'nope' not found" || fail "$err"
    "$CORRAL" services create chat --gpus 1 --min 2 --max 2 --model-weights d1 -- sh -c \
        "cmp \"\$CORRAL_MODEL_WEIGHTS\" $DIR/www/d1.bin && echo same; sleep 600" >/dev/null ||
        fail "services create --model-weights"
    replicas_same() {
        local ids n=0 j
        ids=$("$CORRAL" jobs --json | python3 -c '
import json, sys
print(" ".join(str(j["id"]) for j in json.load(sys.stdin)["items"]
               if j.get("name") == "chat" and j.get("state") == "running"))')
        for j in $ids; do
            [ "$("$CORRAL" logs "$j" 2>/dev/null)" = same ] && n=$((n + 1))
        done
        [ "$n" = 2 ]
    }
    wait_for 60 replicas_same || fail "the replicas did not read the model: $("$CORRAL" jobs)"
    [ "$(gets d1.bin)" = $((before + 1)) ] ||
        fail "two replicas fetched the model $(( $(gets d1.bin) - before )) times"
    "$CORRAL" services delete chat >/dev/null || fail "services delete"

    # The agent's /metrics counts it all (rendered once a second: polled).
    aport=$(grep -o 'agent n1 listening on [^ ]*' "$DIR/agent-1.log" | grep -o '[0-9]*$')
    metrics_ok() {
        local m ev
        m=$(curl -s "http://127.0.0.1:$aport/metrics")
        ev=$(echo "$m" | sed -n 's/^corral_data_evictions_total //p')
        echo "$m" | grep -q "^corral_data_cache_cap_bytes $CAP$" &&
            echo "$m" | grep -q "^corral_data_corrupt_total 1$" &&
            echo "$m" | grep -q "^corral_data_resumed_total 1$" && [ "${ev:-0}" -ge 1 ]
    }
    wait_for 10 metrics_ok || fail "the data cache's /metrics: $(curl -s "http://127.0.0.1:$aport/metrics" | grep '^corral_data')"

    kill "$SAMPLER"
    SAMPLER=
    max=$(sort -n "$DIR/sizes" | tail -1)
    [ "$max" -le "$CAP" ] || fail "the cache held $max bytes, over its cap $CAP"
    [ "$(wc -l <"$DIR/sizes")" -gt 10 ] || fail "the sampler took too few samples"
    echo "ok: one fetch for two jobs, corruption refetched, cap kept (max $max of $CAP bytes), failures named, resume, model weights"
}

logs() {
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xA100 80GB SXM"
    apid=${PIDS[-1]}
    up() { "$CORRAL" nodes | grep -q '^n1 *up'; }
    wait_for 60 up || fail "agent n1 did not register"
    # A small job (both streams whole) and a loud one (more than the 64 KiB
    # shipped: its end is kept, with a note).
    j1=$(submit --gpus 1 -- sh -c 'echo out-line; echo err-line >&2; exit 3')
    j2=$(submit --gpus 1 -- python3 -c '
for i in range(20000):
    print("line %06d" % i)
')
    wait_for 60 state_is "$j1" failed || fail "job $j1 did not fail: $("$CORRAL" show "$j1")"
    wait_for 60 state_is "$j2" completed || fail "job $j2 did not complete: $("$CORRAL" show "$j2")"
    [ "$("$CORRAL" logs "$j1")" = out-line ] || fail "logs of $j1 from the agent"
    # A retried run gets CORRAL_CHECKPOINT_LATEST (the first run none).
    j3=$(submit --gpus 1 --retries 1 -- sh -c '
if [ -n "${CORRAL_CHECKPOINT_LATEST:-}" ]; then echo "latest=$CORRAL_CHECKPOINT_LATEST"; exit 0; fi
mkdir -p "$CORRAL_CHECKPOINT_DIR/step-5" && exit 1')
    wait_for 60 state_is "$j3" completed || fail "job $j3 did not complete: $("$CORRAL" show "$j3")"
    "$CORRAL" show "$j3" | grep -q "Retries: *1" || fail "job $j3 ran once: the first run had a latest"
    out=$("$CORRAL" logs "$j3")
    case $out in
    latest=*/"$j3"/step-5) ;;
    *) fail "job $j3's retry: '$out'" ;;
    esac
    # The agent goes, then the node: the logs answer from the store.
    cr_stop_pids TERM "$apid"
    out=$("$CORRAL" nodes delete n1 --force 2>&1) || fail "nodes delete n1: $out"
    "$CORRAL" nodes | grep -q '^n1 ' && fail "n1 still listed"
    out=$("$CORRAL" logs "$j1") || fail "logs of $j1 after its node was deleted: $out"
    [ "$out" = out-line ] || fail "stdout of $j1 after the delete: '$out'"
    err=$("$CORRAL" logs "$j1" --stderr 2>&1) || fail "stderr of $j1: $err"
    [ "$err" = err-line ] || fail "stderr of $j1 after the delete: '$err'"
    big=$("$CORRAL" logs "$j2")
    first=${big%%$'\n'*} last=${big##*$'\n'}
    echo "$first" | grep -q '^\[corral: the first [0-9]* bytes of this log were not kept' ||
        fail "no note on the truncated log: $first"
    [ "$last" = "line 019999" ] || fail "the end of $j2's log: $last"
    n=$(echo "$big" | wc -c)
    [ "$n" -le 66000 ] || fail "$j2's stored log is $n bytes, over the bound"
    # ... and after a controller restart.
    cr_stop_pids TERM "$CTL_PID"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    [ "$("$CORRAL" logs "$j1")" = out-line ] || fail "logs of $j1 after a controller restart"
    echo "ok: logs of finished jobs answer after their node was deleted (and a restart)"
}

locality() {
    mkdir -p "$DIR/www"
    head -c 2000000 /dev/urandom >"$DIR/www/w.bin"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    # n1: 1 GPU (best fit for a 1-GPU job), n2: 2 GPUs of the same type.
    cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xA100 80GB SXM"
    cr_start_agent n2 "$DIR/n2" "$DIR/agent-2.log" --gpus "sim:2xA100 80GB SXM"
    up() { "$CORRAL" nodes | grep -q "^$1 *up"; }
    wait_for 60 up n1 || fail "agent n1 did not register"
    wait_for 60 up n2 || fail "agent n2 did not register"
    "$CORRAL" data add w "file:$DIR/www/w.bin" >/dev/null || fail "data add w"
    node_of() { "$CORRAL" show "$1" --json | python3 -c '
import json, sys
print(json.load(sys.stdin).get("run_nodes", ""))'; }
    done_on() { # done_on ID: completed, prints its node
        wait_for 60 state_is "$1" completed || fail "job $1 did not complete: $("$CORRAL" show "$1")"
        node_of "$1"
    }
    # Without data a 1-GPU job goes to n1 (best fit).
    p1=$(submit --gpus 1 -- true)
    [ "$(done_on "$p1")" = n1 ] || fail "the probe job did not go to n1 (best fit)"
    # w fetched on n2 (the job is sent there), which then reports it held.
    a=$(submit --gpus 1 --data w --nodelist n2 -- true)
    [ "$(done_on "$a")" = n2 ] || fail "job $a is not on n2"
    held() { "$CORRAL" nodes --json | python3 -c '
import json, sys
n = [x for x in json.load(sys.stdin)["items"] if x["name"] == "n2"][0]
sys.exit(0 if n["data_held"] >= 1 else 1)'; }
    wait_for 30 held || fail "n2 does not report holding w"
    # A job with w goes where w is (n2), not to the best fit (n1) ...
    b=$(submit --gpus 1 --data w -- true)
    [ "$(done_on "$b")" = n2 ] || fail "job $b with w did not go to n2 (where w is)"
    [ "$(grep -c 'data: fetched w@1' "$DIR/agent-2.log")" = 1 ] || fail "w fetched again on n2"
    grep -q 'data: fetched w@1' "$DIR/agent-1.log" && fail "w was fetched on n1"
    # ... and a job without it still to n1.
    p2=$(submit --gpus 1 -- true)
    [ "$(done_on "$p2")" = n1 ] || fail "job $p2 without data did not go to n1"
    echo "ok: locality: a job goes to the node that holds its data before the best fit"
}

container() {
    if [ "$(id -u)" != 0 ] || ! command -v podman >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
        echo "SKIP: needs root, podman and busybox-static"
        exit 77
    fi
    IMG=localhost/corral-data-test:bb$$
    cleanup_extra() {
        for n in $(podman ps -a --filter label=corral.node=dn1 --format '{{.Names}}' 2>/dev/null); do
            podman rm -f -t 0 "$n" >/dev/null 2>&1
        done
        podman rmi -f "$IMG" >/dev/null 2>&1
        return 0
    }
    mkdir -p "$DIR/rootfs/bin" "$DIR/www"
    cp /bin/busybox "$DIR/rootfs/bin/busybox"
    for t in sh sha256sum cat echo; do ln -s busybox "$DIR/rootfs/bin/$t"; done
    tar -C "$DIR/rootfs" -cf "$DIR/bb.tar" .
    podman import -q "$DIR/bb.tar" "$IMG" >/dev/null || { echo "SKIP: podman import failed"; exit 77; }
    head -c 100000 /dev/urandom >"$DIR/www/m.bin"
    chmod 755 "$DIR"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    cr_start_agent dn1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xA100 80GB SXM" --cgroup off
    wait_for 60 sh -c "'$CORRAL' nodes | grep -q '^dn1 *up'" || fail "agent dn1 did not register"
    "$CORRAL" data add m "file:$DIR/www/m.bin" >/dev/null || fail "data add m"
    "$CORRAL" data add m2 "file:$DIR/www/m.bin" >/dev/null || fail "data add m2"
    j=$(submit --gpus 1 --image "$IMG" --data m:/models/m.bin --data m2 -- \
        sh -c 'sha256sum /models/m.bin "$CORRAL_DATA_M2"; echo "$CORRAL_DATA_M $CORRAL_DATA_M2"')
    wait_for 120 state_is "$j" completed || fail "job $j did not complete: $("$CORRAL" show "$j")"
    out=$("$CORRAL" logs "$j")
    want=$(sha "$DIR/www/m.bin")
    echo "$out" | grep -q "^$want  /models/m.bin$" || fail "the mount point: $out"
    echo "$out" | grep -q "^$want  /corral/data/m2$" || fail "the default mount: $out"
    echo "$out" | grep -q "^/models/m.bin /corral/data/m2$" || fail "the variables: $out"
    echo "ok: a container job sees its data at its mount points, read-only"
}

case $SECTION in
objects) objects ;;
stage) stage ;;
logs) logs ;;
locality) locality ;;
container) container ;;
*) fail "unknown section $SECTION" ;;
esac
