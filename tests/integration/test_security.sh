#!/usr/bin/env bash
# test_security.sh SECTION... - the controller side of shared-cluster
# security, with the real controller, agents, CLI and curl on loopback
# (docs/security.md). Each section is its own meson test (tests/integration/
# meson.build) and fails on a Corral without the feature it checks:
#   modes      a state dir left 0755 becomes 0700 and the controller's files
#              0600 (nothing else in it is touched); /tmp-like dirs refused;
#   bootstrap  bootstrap tokens: single use, expiry, bound to a node;
#   nodecred   node credentials act only as their node (desired state,
#              status, job completion, registration); the legacy join token
#              cannot take over a registered node; admins get no desired state;
#   sanitize   control characters refused at submit; %0A in a URL is a 400
#              and forges no log line;
#   audit      audit entries for each admin action, readable by admins only;
#   tls        TLS with a private CA made by openssl: controller and agent
#              serve HTTPS, agent and CLI verify with --ca-file, the
#              controller verifies the agent (corral logs); manual node
#              approval; no token in the agent's argv; a restarted agent uses
#              its stored credential; and secrets: delivered to the job
#              intact, never in the API, show, events, metrics, logs, the
#              agent's state dir or corral.db in clear;
#   tenancy    a user sees another tenant's job only as a "busy" GPU (cluster
#              map, node list and detail), an open /metrics names no job
#              or tenant (the admin token reads tenants), the
#              agent's /metrics carries job labels only behind its token;
#   legacy     the long-lived join token only with --allow-legacy-join;
#   mtls       mutual TLS: an agent with --tls-client-ca serves only callers
#              with a certificate of its CA (the controller's
#              --tls-client-cert), made by openssl at test time.
# Polls with deadlines; no sleep synchronises anything.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "skip: needs curl"; exit 77; }
command -v openssl >/dev/null || { echo "skip: needs openssl"; exit 77; }
CR_FAIL_TAIL=15
cr_setup sec
mode() { stat -c %a "$1"; }
unset CORRAL_TOKEN CORRAL_SERVER CORRAL_TOKEN_FILE CORRAL_JOIN_TOKEN

ST=$DIR/st
S=
ADMIN=
start_ctl() { # start_ctl [FLAGS...]: the controller all sections but tls use, state dir $ST
    cr_start_controller "$ST" "$@"
    unset CORRAL_TOKEN
    S=$CORRAL_SERVER
    ADMIN=$(cat "$ST/admin.token")
    wait_for 20 curl -sf "$S/v1/health" || fail "controller not healthy"
    export CORRAL_TOKEN_FILE=$ST/admin.token
}
api() { # api METHOD PATH TOKEN [BODY] -> prints "STATUS BODY"
    local out args=(-s -o "$DIR/api.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $3")
    if [ $# -ge 4 ]; then args+=(-H 'Content-Type: application/json' --data "$4"); fi
    out=$(curl "${args[@]}" "$S$2")
    echo "$out $(cat "$DIR/api.out")"
}
reg_body() { # reg_body NODE PORT
    echo "{\"node\":\"$1\",\"addr\":\"127.0.0.1\",\"port\":${2:-1},\"gpus\":[{\"index\":0,\"uuid\":\"GPU-$1\",\"model\":\"L4\",\"mem_bytes\":25769803776}]}"
}
status_of() { echo "$1" | cut -d' ' -f1; }
boot() { "$CORRAL" admin bootstrap-token create "$@" 2>/dev/null; }
node_token() { echo "$1" | cut -d' ' -f2- | sed 's/.*"node_token":"\([^"]*\)".*/\1/'; }

section_modes() {
    # a state dir that already existed, with loose modes: the controller's
    # own files become 0600 and the dir 0700; other things in it are not
    # its to change (and are out of reach inside the 0700 dir)
    mkdir -m 0755 "$ST" "$ST/other"
    install -m 0644 /dev/null "$ST/corral.db"
    install -m 0644 /dev/null "$ST/leftover"
    start_ctl
    [ "$(mode "$ST")" = 700 ] || fail "state dir is $(mode "$ST"), want 700"
    for f in corral.db corral.db-wal corral.db-shm admin.token join.token secret.key cluster.id \
        listen.addr; do
        [ -e "$ST/$f" ] || continue
        [ "$(mode "$ST/$f")" = 600 ] || fail "$f is $(mode "$ST/$f"), want 600"
    done
    [ "$(mode "$ST/corral.db")" = 600 ] || fail "the existing corral.db was left $(mode "$ST/corral.db")"
    [ "$(mode "$ST/leftover")" = 644 ] || fail "a file not the controller's was changed"
    [ "$(mode "$ST/other")" = 755 ] || fail "a directory not the controller's was changed"
    [ -f "$ST/secret.key" ] && [ "$(stat -c %s "$ST/secret.key")" = 32 ] || fail "no 32-byte secret.key"
    # a shared directory (sticky, world-writable) is refused, never chmod-ed
    mkdir -m 1777 "$DIR/shared"
    before=$(mode "$DIR/shared")
    "$CORRAL" controller --listen 127.0.0.1:0 --state-dir "$DIR/shared" >"$DIR/shared.log" 2>&1 &&
        fail "a controller started in a sticky world-writable directory"
    grep -q "shared directory" "$DIR/shared.log" || fail "no reason given: $(cat "$DIR/shared.log")"
    [ "$(mode "$DIR/shared")" = "$before" ] || fail "the shared directory's mode was changed"
}

section_bootstrap() {
    start_ctl
    BT=$("$CORRAL" admin bootstrap-token create --uses 1 --name first 2>/dev/null)
    case "$BT" in crl_*) ;; *) fail "bootstrap-token create printed '$BT'" ;; esac
    r=$(api POST /v1/agents/register "$BT" "$(reg_body na)")
    [ "$(status_of "$r")" = 200 ] || fail "register with a fresh bootstrap token: $r"
    NA=$(echo "$r" | cut -d' ' -f2- | sed 's/.*"node_token":"\([^"]*\)".*/\1/')
    case "$NA" in crl_*) ;; *) fail "no node token in $r" ;; esac
    r=$(api POST /v1/agents/register "$BT" "$(reg_body nb)")
    [ "$(status_of "$r")" = 401 ] || fail "a used bootstrap token registered a node: $r"
    r=$(api GET /v1/nodes/nb "$ADMIN")
    [ "$(status_of "$r")" = 404 ] || fail "node nb exists after a refused registration: $r"
    # Expired: a 1-second token, used after its second has passed.
    BX=$("$CORRAL" admin bootstrap-token create --ttl 1s 2>/dev/null)
    end=$((SECONDS + 3))
    while [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
    r=$(api POST /v1/agents/register "$BX" "$(reg_body nx)")
    [ "$(status_of "$r")" = 401 ] || fail "an expired bootstrap token registered a node: $r"
    echo "$r" | grep -q expired || fail "refusal does not say expired: $r"
    # A bootstrap token bound to a node registers only that node.
    BN=$("$CORRAL" admin bootstrap-token create --node nb --uses 2 2>/dev/null)
    r=$(api POST /v1/agents/register "$BN" "$(reg_body nc)")
    [ "$(status_of "$r")" = 403 ] || fail "a token bound to nb registered nc: $r"
    r=$(api POST /v1/agents/register "$BN" "$(reg_body nb)")
    [ "$(status_of "$r")" = 200 ] || fail "a token bound to nb did not register nb: $r"
    NB=$(node_token "$r")
    # An unbound bootstrap token cannot take over a registered node ...
    r=$(api POST /v1/agents/register "$(boot)" "$(reg_body na)")
    [ "$(status_of "$r")" = 409 ] || fail "an unbound bootstrap token re-registered na: $r"
    # ... a bound one re-keys it: the node's old credential stops working.
    r=$(api POST /v1/agents/register "$BN" "$(reg_body nb)")
    [ "$(status_of "$r")" = 200 ] || fail "the bound token's second use: $r"
    r=$(api GET /v1/agents/nb/desired "$NB")
    [ "$(status_of "$r")" = 401 ] || fail "nb's old credential still works after a re-key: $r"
    r=$(api POST /v1/agents/register "$BN" "$(reg_body nb)")
    [ "$(status_of "$r")" = 401 ] || fail "a bootstrap token past its uses registered: $r"
}

section_nodecred() {
    start_ctl --allow-legacy-join
    NA=$(node_token "$(api POST /v1/agents/register "$(boot)" "$(reg_body na)")")
    NB=$(node_token "$(api POST /v1/agents/register "$(boot)" "$(reg_body nb)")")
    case "$NA$NB" in crl_*crl_*) ;; *) fail "nodes na, nb did not register" ;; esac
    # The legacy join token cannot take over a registered node (it would get its jobs).
    JOIN=$(cat "$ST/join.token")
    r=$(api POST /v1/agents/register "$JOIN" "$(reg_body na)")
    [ "$(status_of "$r")" = 409 ] || fail "the join token re-registered node na: $r"
    r=$(api GET /v1/agents/na/desired "$JOIN")
    [ "$(status_of "$r")" = 403 ] || fail "the join token read a node's desired state: $r"
    r=$(api GET /v1/agents/na/desired "$ADMIN")
    [ "$(status_of "$r")" = 403 ] || fail "an admin token read a node's desired state (secrets): $r"
    r=$(api GET /v1/jobs "$JOIN")
    [ "$(status_of "$r")" = 403 ] || fail "the join token listed jobs: $r"
    r=$(api GET /v1/agents/nb/desired "$NA")
    [ "$(status_of "$r")" = 403 ] || fail "na's credential read nb's desired state: $r"
    r=$(api POST /v1/agents/nb/status "$NA" '{"jobs":[]}')
    [ "$(status_of "$r")" = 403 ] || fail "na's credential reported for nb: $r"
    r=$(api POST /v1/agents/register "$NA" "$(reg_body nb)")
    [ "$(status_of "$r")" = 403 ] || fail "na's credential re-registered as nb: $r"
    "$CORRAL" drain na >/dev/null || fail "drain na"
    jid=$("$CORRAL" submit -n onb -- sleep 600 | grep -o '[0-9][0-9]*' | head -1)
    on_nb() { "$CORRAL" show "$jid" | grep -q 'State: *running'; }
    wait_for 30 on_nb || fail "job $jid did not start on nb"
    "$CORRAL" show "$jid" | grep -q '^  nb ' || fail "job $jid is not on nb: $("$CORRAL" show "$jid")"
    r=$(api POST /v1/agents/na/status "$NA" "{\"jobs\":[{\"job\":$jid,\"state\":\"exited\",\"exit_code\":0}]}")
    [ "$(status_of "$r")" = 200 ] || fail "na's own status: $r"
    "$CORRAL" show "$jid" | grep -q 'State: *running' || fail "na completed nb's job $jid"
    "$CORRAL" cancel "$jid" >/dev/null
    "$CORRAL" undrain na >/dev/null
}

section_sanitize() {
    start_ctl
    set +e
    out=$(CORRAL_TOKEN=$ADMIN "$CORRAL" submit -n "$(printf 'evil\033[2Jname')" -- true 2>&1)
    rc=$?
    set -e
    [ "$rc" = 1 ] || fail "a name with ESC was accepted (exit $rc): $out"
    echo "$out" | grep -q "control characters" || fail "unclear refusal: $out"
    # A control byte in the target is refused at the head (cr_http_strict.h:
    # 400, logged without the request's bytes); an escaped one in a failed
    # authentication's path is logged escaped.
    code=$(curl -s -o /dev/null -w '%{http_code}' "$S/v1/jobs%0AFORGED-LINE%20INFO%20admin" || true)
    [ "$code" = 400 ] || fail "a %0A in a URL was answered $code, not 400"
    wait_for 10 grep -q 'malformed request' "$DIR/controller.log" || fail "the refused request was not logged"
    curl -s -H "Authorization: Bearer crl_bad" "$S/v1/x%5CnFORGED-LINE2" >/dev/null || true
    wait_for 10 grep -q 'FORGED-LINE2' "$DIR/controller.log" || fail "the failed authentication was not logged"
    if grep -q '^FORGED-LINE' "$DIR/controller.log"; then fail "a %0A in a URL forged a log line"; fi
}

section_audit() {
    start_ctl
    NB=$(node_token "$(api POST /v1/agents/register "$(boot)" "$(reg_body nb)")")
    jid=$("$CORRAL" submit -n audited -- sleep 600 | grep -o '[0-9][0-9]*' | head -1)
    "$CORRAL" cancel "$jid" >/dev/null
    "$CORRAL" tenants create teamx >/dev/null
    USER_TOK=$("$CORRAL" tokens create --role user --tenant teamx --name alice 2>/dev/null)
    "$CORRAL" tenants set teamx --weight 2 --quota "L4=4" >/dev/null
    tmp=$("$CORRAL" tokens create --role admin --name tmp --json | grep -o '"id": *[0-9]*' | grep -o '[0-9]*$')
    "$CORRAL" tokens revoke "$tmp" >/dev/null
    "$CORRAL" drain nb --reason audit-me >/dev/null
    "$CORRAL" undrain nb >/dev/null
    # An audit entry is stored apart from the request it records (its own
    # store transaction): the last one may land just after the reply.
    wait_for 20 sh -c "\"$CORRAL\" audit --limit 1000 --json | grep -q '\"action\": \"POST /v1/nodes/nb/undrain'" ||
        true
    aud=$("$CORRAL" audit --limit 1000 --json)
    for want in "POST /v1/tenants" "PUT /v1/tenants/teamx" "POST /v1/tokens" \
        "DELETE /v1/tokens/$tmp" "POST /v1/nodes/nb/drain" \
        "POST /v1/nodes/nb/undrain" "POST /v1/bootstrap-tokens" "POST /v1/jobs" \
        "POST /v1/jobs/$jid/cancel" "POST /v1/agents/register"; do
        echo "$aud" | grep -q "\"action\": \"$want" || fail "no audit entry for '$want'"
    done
    echo "$aud" | grep -q '"who": "bootstrap-admin"' || fail "audit entries do not say who"
    echo "$aud" | grep -q '"from": "127.0.0.1"' || fail "audit entries do not say from where"
    "$CORRAL" audit | grep -q 'POST /v1/nodes/nb/drain' || fail "corral audit table"
    set +e
    CORRAL_TOKEN=$USER_TOK "$CORRAL" audit >/dev/null 2>&1
    rc=$?
    set -e
    [ "$rc" = 1 ] || fail "a user token read the audit log (exit $rc)"
    # Retention: restarted with audit_retention_s 1, the controller prunes
    # what is older at its first timer tick.
    kill -TERM "${PIDS[0]}"
    wait "${PIDS[0]}" 2>/dev/null || true
    end=$((SECONDS + 2))
    while [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
    echo '{"audit_retention_s": 1}' >"$DIR/ret.json"
    "$CORRAL" controller --config "$CKPT_CONF" --config "$DIR/ret.json" --listen "${S#http://}" \
        --state-dir "$ST" >"$DIR/controller-ret.log" 2>&1 &
    PIDS=($!)
    wait_for 20 curl -sf "$S/v1/health" || fail "controller did not restart"
    pruned() { ! "$CORRAL" audit --limit 1000 --json | grep -q 'POST /v1/tenants'; }
    wait_for 20 pruned || fail "audit entries older than the retention were not pruned"
    grep -q 'audit: .* entries older than 1s pruned' "$DIR/controller-ret.log" || fail "no prune log line"
}

section_tls() {
    # A private CA, a server certificate for 127.0.0.1 each for controller and agent.
    cd "$DIR"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
        -subj "/CN=Corral test CA" >/dev/null 2>&1
    for who in ctl agent; do
        openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj "/CN=$who" \
            >/dev/null 2>&1
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >$who.ext
        openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile $who.ext -out $who.pem >/dev/null 2>&1
    done
    cd - >/dev/null
    T=$DIR/tls
    mkdir "$T"
    printf '{"node_approval": "manual", "agent_ca_file": "%s", "heartbeat_s": 1}\n' "$DIR/ca.pem" \
        >"$DIR/tls.json"
    "$CORRAL" controller --config "$CKPT_CONF" --config "$DIR/tls.json" --listen 127.0.0.1:0 \
        --state-dir "$T" --tls-cert "$DIR/ctl.pem" --tls-key "$DIR/ctl.key" \
        >"$DIR/controller-tls.log" 2>&1 &
    TLS_CTL=$!
    PIDS+=($TLS_CTL)
    wait_for 30 test -s "$T/listen.addr" || fail "TLS controller did not start"
    TS=$(cat "$T/listen.addr")
    case "$TS" in https://*) ;; *) fail "TLS controller listens on $TS" ;; esac
    export CORRAL_SERVER=$TS CORRAL_TOKEN_FILE=$T/admin.token
    C() { # the CLI trusting the private CA
        local cmd=$1
        shift
        "$CORRAL" "$cmd" --ca-file "$DIR/ca.pem" "$@"
    }
    wait_for 20 C nodes || fail "the CLI with --ca-file"
    set +e
    "$CORRAL" nodes >/dev/null 2>&1
    rc=$?
    set -e
    [ "$rc" = 3 ] || fail "the CLI trusted a private CA without --ca-file (exit $rc)"
    C admin bootstrap-token create --name agent1 2>/dev/null >"$DIR/agent1.bt"
    chmod 600 "$DIR/agent1.bt"
    "$CORRAL" agent --server "$TS" --ca-file "$DIR/ca.pem" --join-token "$DIR/agent1.bt" \
        --node tls1 --gpus "sim:1xL4" --listen 127.0.0.1:0 --state-dir "$DIR/agent1" \
        --tls-cert "$DIR/agent.pem" --tls-key "$DIR/agent.key" --kill-on-exit \
        >"$DIR/agent.log" 2>&1 &
    AG=$!
    PIDS+=($AG)
    registered() { C nodes tls1 --json | grep -q '"pending_approval": *true'; }
    wait_for 30 registered || fail "agent did not register over TLS (pending approval)"
    tr '\0' ' ' </proc/$AG/cmdline | grep -q crl_ && fail "a token is in the agent's argv"
    # the agent writes its credential once the registration's answer is in:
    # the node shows as registered a moment before that
    wait_for 30 test -s "$DIR/agent1/node.cred" || fail "no node.cred after the registration"
    [ "$(mode "$DIR/agent1/node.cred")" = 600 ] || fail "node.cred is $(mode "$DIR/agent1/node.cred")"
    SECRET=sekrit-$$-XYZZY
    MYVAL=env-$$-PLUGH # given to the CLI's environment only, never to the agent's
    printf '%s\n' "also-$$-FROTZ" >"$DIR/sec.txt"
    # The job prints a digest of what it got: the values appear in no command line.
    want=$(printf '%s|%s|%s' "$SECRET" "$MYVAL" "also-$$-FROTZ" | sha256sum | cut -d' ' -f1)
    out=$(MYSEC=$MYVAL C submit -n sec --secret HF_TOKEN=$SECRET --secret MYSEC --secret-file THIRD="$DIR/sec.txt" \
        -- sh -c 'printf "%s|%s|%s" "$HF_TOKEN" "$MYSEC" "$THIRD" | sha256sum')
    sid=$(echo "$out" | grep -o '[0-9][0-9]*' | head -1)
    [ -n "$sid" ] || fail "submit with secrets: $out"
    sleep_pending() { C show "$sid" | grep -q 'State: *pending'; }
    sleep_pending || fail "job $sid ran on a node awaiting approval"
    # Holding and cancelling a job with secrets (the controller copies the
    # job to commit the change first) leaves the controller serving.
    out=$(C submit -n sec2 --secret K2=v2 -- true)
    sid2=$(echo "$out" | grep -o '[0-9][0-9]*' | head -1)
    C hold "$sid2" >/dev/null || fail "hold of a job with secrets"
    C cancel "$sid2" >/dev/null || fail "cancel of a job with secrets"
    C show "$sid2" | grep -q 'State: *cancelled' || fail "job $sid2 not cancelled: $(C show "$sid2")"
    # A controller restart in between: the job's sealed secrets and the
    # agent's secret come back from the store (same port, same state).
    kill -TERM $TLS_CTL
    wait $TLS_CTL 2>/dev/null || true
    "$CORRAL" controller --config "$CKPT_CONF" --config "$DIR/tls.json" --listen "${TS#https://}" \
        --state-dir "$T" --tls-cert "$DIR/ctl.pem" --tls-key "$DIR/ctl.key" \
        >>"$DIR/controller-tls.log" 2>&1 &
    PIDS+=($!)
    wait_for 30 C nodes || fail "TLS controller did not restart"
    C nodes approve tls1 >/dev/null || fail "corral nodes approve"
    sec_done() { C show "$sid" | grep -Eq 'State: *(completed|failed)'; }
    wait_for 60 sec_done || fail "job $sid did not end: $(C show "$sid")"
    C show "$sid" | grep -q 'State: *completed' || fail "job $sid failed: $(C show "$sid")"
    # The gateway follows the TLS controller, trusting the CA with --ca-file
    # and reading its token from a file (a service that does not exist: the
    # controller's 404 proves the TLS session and the token worked).
    "$CORRAL" gateway --listen 127.0.0.1:0 --service nosuch --controller "$TS" \
        --ca-file "$DIR/ca.pem" --token-file "$T/admin.token" >"$DIR/gateway.log" 2>&1 &
    PIDS+=($!)
    wait_for 20 grep -q 'nosuch.*status 404' "$DIR/gateway.log" ||
        fail "the gateway did not reach the TLS controller with --ca-file"
    grep -q unreachable "$DIR/gateway.log" && fail "the gateway could not reach the TLS controller"
    # The controller fetches the log from the agent over HTTPS with the agent
    # secret; the digest says the job got each secret intact.
    C logs "$sid" | grep -q "$want" || fail "job $sid did not get its secrets: $(C logs "$sid")"
    # Nowhere in clear: API, show, events, metrics, logs, state dirs, the store.
    TOK=$(cat "$T/admin.token")
    for path in "/v1/jobs/$sid" "/v1/jobs/$sid?events=1" "/v1/jobs" /metrics "/v1/audit?limit=1000"; do
        body=$(curl -s --cacert "$DIR/ca.pem" -H "Authorization: Bearer $TOK" "$TS$path")
        [ -n "$body" ] || fail "GET $path answered nothing"
        for v in "$SECRET" "$MYVAL" FROTZ secrets_enc; do
            case "$body" in *"$v"*) fail "GET $path shows a secret ($v)" ;; esac
        done
    done
    C show "$sid" | grep -q 'Secrets:.*HF_TOKEN' || fail "show does not name the secrets"
    C show "$sid" --json | grep -q 'secret_names' || fail "no secret_names in the API"
    agent_port=$(grep -o 'listening on [0-9.:]*' "$DIR/agent.log" | head -1 | sed 's/.*://')
    curl -s --cacert "$DIR/ca.pem" "https://127.0.0.1:$agent_port/metrics" >"$DIR/agent.metrics" ||
        fail "agent metrics over HTTPS"
    for v in "$SECRET" "$MYVAL" FROTZ; do
        for f in "$DIR/agent.metrics" "$DIR/controller-tls.log" "$DIR/agent.log"; do
            grep -q -- "$v" "$f" && fail "a secret is in $f"
        done
        grep -rqa -- "$v" "$DIR/agent1" && fail "a secret is in the agent's state dir in clear"
        grep -rqa -- "$v" "$T" && fail "a secret is in the controller's state dir in clear"
    done
    # The agent's own HTTPS endpoint refuses the join or node token for logs.
    code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$DIR/ca.pem" \
        -H "Authorization: Bearer $(cat "$DIR/agent1.bt")" "https://127.0.0.1:$agent_port/v1/logs/$sid")
    [ "$code" = 401 ] || fail "the agent served logs to the bootstrap token ($code)"
    # A restarted agent re-registers with its own credential (the bootstrap token
    # is used up) and stays the same node.
    kill -TERM $AG
    wait $AG 2>/dev/null || true
    "$CORRAL" agent --server "$TS" --ca-file "$DIR/ca.pem" --node tls1 --gpus "sim:1xL4" \
        --listen 127.0.0.1:0 --state-dir "$DIR/agent1" --tls-cert "$DIR/agent.pem" \
        --tls-key "$DIR/agent.key" --kill-on-exit >"$DIR/agent2.log" 2>&1 &
    PIDS+=($!)
    wait_for 30 grep -q 'registered node=tls1' "$DIR/agent2.log" || fail "restarted agent did not re-register"
}

section_tenancy() {
    # What a user of one tenant sees of another's work on a shared node:
    # GPUs "busy", never the job's id, tenant or name (cluster map, node
    # list and detail, /metrics); an admin sees all.
    warned0=$(cat "$DIR/controller.log" 2>/dev/null | grep -c '/metrics is open' || true)
    start_ctl
    "$CORRAL" tenants create team-a >/dev/null && "$CORRAL" tenants create team-b >/dev/null
    TA=$("$CORRAL" tokens create --role user --tenant team-a --name ua 2>/dev/null | tail -1)
    TB=$("$CORRAL" tokens create --role user --tenant team-b --name ub 2>/dev/null | tail -1)
    boot >"$DIR/ten.bt"
    MT=metrics-$$-$RANDOM-token
    echo "$MT" >"$DIR/metrics.token"
    "$CORRAL" agent --server "$S" --join-token "$DIR/ten.bt" --node shared1 --gpus "sim:2xL4" \
        --metrics-token-file "$DIR/metrics.token" --dcgm-job-map "$DIR/jobmap" --listen 127.0.0.1:0 --state-dir "$DIR/ten-agent" --kill-on-exit >"$DIR/ten-agent.log" 2>&1 &
    PIDS+=($!)
    wait_for 30 sh -c "\"$CORRAL\" nodes | grep -q ' up '" || fail "agent did not register"
    NAME=hidden-name-$$
    jid=$(CORRAL_TOKEN_FILE= CORRAL_TOKEN=$TA "$CORRAL" submit -n "$NAME" --preemptible -- sleep 600 |
        grep -o '[0-9][0-9]*' | head -1)
    [ -n "$jid" ] || fail "team-a could not submit"
    running() { "$CORRAL" show "$jid" | grep -q 'State: *running'; }
    wait_for 30 running || fail "job $jid did not start"
    for path in /v1/cluster /v1/nodes /v1/nodes/shared1; do
        r=$(api GET "$path" "$TB")
        [ "$(status_of "$r")" = 200 ] || fail "team-b GET $path: $r"
        body=$(echo "$r" | cut -d' ' -f2- | tr -d ' ')
        case "$body" in *"\"job\":$jid"* | *"[$jid]"* | *"team-a"* | *"$NAME"*)
            fail "team-b sees team-a's job $jid in $path: $body" ;;
        esac
        r=$(api GET "$path" "$TA")
        body=$(echo "$r" | cut -d' ' -f2- | tr -d ' ')
        case "$body" in *"\"job\":$jid"*) ;; *) fail "team-a does not see its job $jid in $path: $body" ;; esac
        r=$(api GET "$path" "$ADMIN")
        body=$(echo "$r" | cut -d' ' -f2- | tr -d ' ')
        case "$body" in *"\"job\":$jid"*) ;; *) fail "the admin does not see job $jid in $path: $body" ;; esac
    done
    r=$(api GET /v1/cluster "$TB")
    echo "$r" | grep -q '"state":"busy"' || fail "team-b's map does not show the GPU busy: $r"
    api GET /v1/nodes/shared1 "$TB" | grep -q '"other_jobs": *1' ||
        fail "team-b's node detail does not count the other job"
    # dcgm-exporter's job map (which job on which GPU) is the agent's only.
    wait_for 20 test -s "$DIR/jobmap/0" || fail "no job map file for GPU 0"
    [ "$(mode "$DIR/jobmap")" = 700 ] || fail "the job map dir is $(mode "$DIR/jobmap")"
    [ "$(mode "$DIR/jobmap/0")" = 600 ] || fail "the job map file is $(mode "$DIR/jobmap/0")"
    # /metrics without --metrics-token-file is open: counts only, never a
    # tenant's name or a job's id or name (warned once at start); the admin
    # token reads the tenant series.
    m=$(curl -s "$S/metrics")
    echo "$m" | grep -q '^corral_jobs{state="running"} 1$' || fail "no aggregate corral_jobs in /metrics"
    case "$m" in *"$NAME"* | *"job=\"$jid\""* | *"job_id"*) fail "/metrics names a job" ;; esac
    case "$m" in *team-a* | *team-b* | *"tenant="*) fail "the open /metrics names a tenant" ;; esac
    m=$(curl -s -H "Authorization: Bearer $TB" "$S/metrics")
    case "$m" in *team-a* | *"tenant="*) fail "a user token reads the tenant series of /metrics" ;; esac
    m=$(curl -s -H "Authorization: Bearer $ADMIN" "$S/metrics")
    echo "$m" | grep -q '^corral_jobs{tenant="team-a",state="running"} 1$' ||
        fail "the admin token does not read corral_jobs by tenant"
    warned1=$(grep -c '/metrics is open' "$DIR/controller.log" || true)
    [ $((warned1 - warned0)) = 1 ] || fail "the open /metrics was warned $((warned1 - warned0)) times (want 1)"
    # The agent's /metrics (reachable by every job on its node) carries job
    # and tenant labels: with --metrics-token-file only for that token.
    ap=$(grep -o 'listening on [0-9.:]*' "$DIR/ten-agent.log" | head -1 | sed 's/.*://')
    labelled() { curl -s -H "Authorization: Bearer $MT" "http://127.0.0.1:$ap/metrics" | grep -q "job=\"$jid\""; }
    wait_for 30 labelled || fail "the metrics token does not read the job labels"
    am=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$ap/metrics")
    case "$am" in *" 401") ;; *) fail "the agent's /metrics answered without its token: $am" ;; esac
    case "$am" in *"job=\"$jid\""* | *"team-a"*) fail "the agent's /metrics shows job $jid to anyone" ;; esac
    am=$(curl -s -H "Authorization: Bearer wrong-$MT" "http://127.0.0.1:$ap/metrics")
    case "$am" in *"job=\"$jid\""*) fail "the agent's /metrics took a wrong token" ;; esac
    # A preemption's event names the job it made room for: team-a reads it
    # without team-b's job id or name; the admin reads it whole.
    pj=$("$CORRAL" submit --tenant team-b --priority 10 --gpus 2 -n "preemptor-$$" -- sleep 600 |
        grep -o '[0-9][0-9]*' | head -1)
    preempted() { api GET "/v1/jobs/$jid" "$ADMIN" | grep -q "preempted for job $pj"; }
    wait_for 30 preempted || fail "job $pj did not preempt job $jid: $(api GET "/v1/jobs/$jid" "$ADMIN")"
    r=$(api GET "/v1/jobs/$jid" "$TA")
    case "$r" in *"job $pj"* | *team-b* | *"preemptor-$$"*) fail "team-a reads team-b's job in its events: $r" ;; esac
    echo "$r" | grep -q "preempted for another tenant's job" || fail "the redacted event lost its sense: $r"
    "$CORRAL" cancel "$jid" "$pj" >/dev/null
}

section_legacy() {
    # The long-lived join token is off unless --allow-legacy-join: none is
    # minted, and one left from an earlier start is refused (with a warning).
    start_ctl
    [ -e "$ST/join.token" ] && fail "a join.token was minted without --allow-legacy-join"
    stop_ctl() { kill -TERM "$CTL_PID"; wait "$CTL_PID" 2>/dev/null || true; }
    stop_ctl
    start_ctl --allow-legacy-join
    [ -s "$ST/join.token" ] || fail "no join.token with --allow-legacy-join"
    grep -q 'legacy join token on' "$DIR/controller.log" || fail "no warning at start"
    JOIN=$(cat "$ST/join.token")
    r=$(api POST /v1/agents/register "$JOIN" "$(reg_body la)")
    [ "$(status_of "$r")" = 200 ] || fail "the allowed join token did not register: $r"
    stop_ctl
    start_ctl
    r=$(api POST /v1/agents/register "$JOIN" "$(reg_body lb)")
    [ "$(status_of "$r")" = 401 ] || fail "the join token registered without --allow-legacy-join: $r"
    grep -q 'join token .* is NOT accepted' "$DIR/controller.log" || fail "no warning about join.token"
    # The config key still turns it on (with the same warning).
    stop_ctl
    echo '{"join_token": true}' >"$DIR/legacy.json"
    start_ctl --config "$DIR/legacy.json"
    r=$(api POST /v1/agents/register "$JOIN" "$(reg_body lc)")
    [ "$(status_of "$r")" = 200 ] || fail "\"join_token\": true did not allow the join token: $r"
}

section_mtls() {
    # Mutual TLS: an agent given --tls-client-ca serves only callers with a
    # certificate of that CA; the controller shows --tls-client-cert.
    cd "$DIR"
    for ca in ca rogue; do
        openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -out $ca.pem -days 2 \
            -subj "/CN=Corral $ca CA" >/dev/null 2>&1
    done
    mkcert() { # mkcert NAME CA EKU [SAN]
        openssl req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "/CN=$1" >/dev/null 2>&1
        printf 'extendedKeyUsage=%s\n%s' "$3" "${4:+subjectAltName=$4
}" >$1.ext
        openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -days 2 \
            -extfile $1.ext -out $1.pem >/dev/null 2>&1
    }
    mkcert agent ca serverAuth IP:127.0.0.1
    mkcert ctlclient ca clientAuth
    mkcert intruder rogue clientAuth
    cd - >/dev/null
    printf '{"agent_ca_file": "%s"}\n' "$DIR/ca.pem" >"$DIR/mtls.json"
    start_ctl --config "$DIR/mtls.json" --tls-client-cert "$DIR/ctlclient.pem" \
        --tls-client-key "$DIR/ctlclient.key"
    boot >"$DIR/mtls.bt"
    "$CORRAL" agent --server "$S" --join-token "$DIR/mtls.bt" --node m1 --gpus "sim:1xL4" \
        --listen 127.0.0.1:0 --state-dir "$DIR/mtls-agent" --tls-cert "$DIR/agent.pem" \
        --tls-key "$DIR/agent.key" --tls-client-ca "$DIR/ca.pem" --kill-on-exit \
        >"$DIR/mtls-agent.log" 2>&1 &
    PIDS+=($!)
    wait_for 30 sh -c "\"$CORRAL\" nodes | grep -q ' up '" || fail "mTLS agent did not register"
    grep -q 'mutual TLS' "$DIR/mtls-agent.log" || fail "the agent does not say mutual TLS is on"
    jid=$("$CORRAL" submit -n m -- echo mtls-hello-$$ | grep -o '[0-9][0-9]*' | head -1)
    done_() { "$CORRAL" show "$jid" | grep -q 'State: *completed'; }
    wait_for 30 done_ || fail "job $jid did not complete: $("$CORRAL" show "$jid")"
    "$CORRAL" logs "$jid" | grep -q "mtls-hello-$$" || fail "corral logs through mutual TLS"
    ap=$(grep -o 'listening on [0-9.:]*' "$DIR/mtls-agent.log" | head -1 | sed 's/.*://')
    code() { curl -s -o /dev/null -w '%{http_code}' --cacert "$DIR/ca.pem" "$@"; }
    u=https://127.0.0.1:$ap
    [ "$(code "$u/v1/health")" = 200 ] || fail "health needs no client certificate"
    c=$(code "$u/metrics")
    [ "$c" = 403 ] || [ "$c" = 000 ] || fail "/metrics without a client certificate: $c"
    c=$(code --cert "$DIR/intruder.pem" --key "$DIR/intruder.key" "$u/metrics")
    [ "$c" = 403 ] || [ "$c" = 000 ] || fail "/metrics with another CA's certificate: $c"
    c=$(code --cert "$DIR/intruder.pem" --key "$DIR/intruder.key" "$u/v1/logs/$jid")
    [ "$c" = 403 ] || [ "$c" = 000 ] || fail "logs with another CA's certificate: $c"
    [ "$(code --cert "$DIR/ctlclient.pem" --key "$DIR/ctlclient.key" "$u/metrics")" = 200 ] ||
        fail "/metrics with the CA's client certificate"
    # Flags that do not go together are refused.
    set +e
    out=$("$CORRAL" agent --server "$S" --join-token "$DIR/mtls.bt" --tls-client-ca "$DIR/ca.pem" \
        --state-dir "$DIR/x" 2>&1)
    set -e
    echo "$out" | grep -q -- '--tls-client-ca' || fail "--tls-client-ca without --tls-cert: $out"
}

[ $# -gt 0 ] || set -- modes bootstrap nodecred sanitize audit tls tenancy legacy mtls
for sec in "$@"; do
    declare -F "section_$sec" >/dev/null || fail "no section '$sec'"
    "section_$sec"
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
    rm -rf "$ST"
    echo "ok: $sec"
done
