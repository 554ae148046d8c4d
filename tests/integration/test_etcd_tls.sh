#!/usr/bin/env bash
# The controller on an etcd that requires TLS with client certificates and
# has authentication enabled (docs/operations.md, "The store"), all real:
# a throwaway CA, server and client certificates made with openssl, one
# etcd member with --client-cert-auth, users and roles made with etcdctl.
#   - refusals, each a clear message naming the flag: a CA that did not
#     sign the server (--etcd-cacert), no client certificate, a client
#     certificate of another CA, a wrong password, no user while auth is
#     on, a user with no role on /corral/, an http:// endpoint for an https
#     member, http and https mixed, a password file readable by everyone,
#     --etcd-user without --etcd-password-file, --etcd-* with no etcd;
#   - a controller standing for election with TLS and a user: it leads,
#     jobs are stored; etcd's auth revision is bumped (a role added) and
#     the user's tokens invalidated (password set again): both the store's
#     and the election's clients authenticate again (submits succeed, the
#     leader keeps its lease); the password rotated (file, then etcd): the
#     client reads the file again; SIGKILL and restart: every job is back;
#   - an ordinary user token of Corral reaches no etcd data: only its own
#     jobs, 403 on tokens and audit, and no answer (nor any log) carries
#     the etcd password;
#   - corral admin migrate from this etcd, with the same flags (and a clear
#     refusal without them).
set -euo pipefail

. "$(dirname "$0")/lib.sh"
ETCD=${ETCD_BIN:-$(command -v etcd || true)}
ETCDCTL=$(command -v etcdctl || true)
if [ -z "$ETCD" ] || [ -z "$ETCDCTL" ]; then
    echo "no etcd/etcdctl (apt-get install etcd-server etcd-client): skipped"
    exit 77
fi
command -v openssl >/dev/null || { echo "no openssl (apt-get install openssl): skipped"; exit 77; }
# No orderly stop on exit: the controllers are killed.
CR_STOP=KILL CR_FAIL_TAIL=15 CR_FAIL_OUT=1
cr_setup etcdtls

# --- certificates -------------------------------------------------------
cd "$DIR"
mkcert() { # NAME CA-NAME SUBJECT EXT
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
        -out "$1.csr" -subj "$3" 2>/dev/null
    printf '%s\n' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
        -out "$1.pem" -extfile "$1.ext" 2>/dev/null
}
for ca in ca otherca; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$ca.key" \
        -out "$ca.pem" -days 2 -subj "/CN=corral test $ca" 2>/dev/null
done
# The server certificate is also etcd's gateway's client certificate (it
# dials its own gRPC port): clientAuth too, and a CN that is no etcd user.
mkcert server ca /CN=etcd-test-server \
    "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
# Client certificates without a CN: etcd (>= 3.4.22) refuses gateway
# requests made with one that has a CN (cn.pem checks the message).
mkcert client ca /O=corral-controller "extendedKeyUsage=clientAuth"
mkcert cn ca /CN=corral-controller "extendedKeyUsage=clientAuth"
mkcert rogue otherca /O=corral-controller "extendedKeyUsage=clientAuth"
chmod 600 ./*.key
PW="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$PW" >pw
printf 'wrong-%s\n' "$PW" >badpw
printf '%s\n' "$PW" >openpw
chmod 600 pw badpw
chmod 644 openpw

# --- etcd: TLS with client certificates, then users and auth ------------
read -r CP PP <<<"$(free_ports 2)"
URL=https://127.0.0.1:$CP
"$ETCD" --data-dir "$DIR/etcd" --listen-client-urls "$URL" --advertise-client-urls "$URL" \
    --cert-file server.pem --key-file server.key --client-cert-auth --trusted-ca-file ca.pem \
    --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "default=http://127.0.0.1:$PP" --log-level warn >"$DIR/etcd.log" 2>&1 &
PIDS+=($!)
wait_for 60 curl -sf -m 2 --cacert ca.pem --cert client.pem --key client.key "$URL/health" ||
    fail "etcd did not start"
ctl() { ETCDCTL_API=3 "$ETCDCTL" --endpoints "$URL" --cacert ca.pem --cert client.pem \
    --key client.key "$@" >>"$DIR/etcdctl.out" 2>&1; }
ctl user add root --new-user-password=rootpw || fail "etcdctl user add root"
ctl user grant-role root root || fail "grant root"
ctl role add corral || fail "role add"
ctl role grant-permission corral --prefix=true readwrite /corral/ || fail "grant-permission"
ctl user add corral-svc --new-user-password="$PW" || fail "user add corral-svc"
ctl user grant-role corral-svc corral || fail "grant-role"
ctl user add norole --new-user-password="$PW" || fail "user add norole"
ctl auth enable || fail "auth enable"
root() { ctl --user root:rootpw "$@"; }

# --- refusals -----------------------------------------------------------
TLS=(--etcd-cacert ca.pem --etcd-cert client.pem --etcd-key client.key)
AUTH=(--etcd-user corral-svc --etcd-password-file pw)
refused() { # NAME PATTERN ARGS... : the controller refuses to start, saying PATTERN
    local name=$1 pat=$2
    shift 2
    if timeout 60 "$CORRAL" controller --listen 127.0.0.1:0 --state-dir "$DIR/ref-$name" \
        "$@" >"$DIR/ref-$name.out" 2>&1; then
        fail "$name: the controller started"
    fi
    grep -q -e "$pat" "$DIR/ref-$name.out" || fail "$name: no '$pat' in: $(cat "$DIR/ref-$name.out")"
}
refused wrong-ca "etcd-cacert" --store "etcd:$URL" --etcd-cacert otherca.pem \
    --etcd-cert client.pem --etcd-key client.key "${AUTH[@]}"
grep -q "does not verify" "$DIR/ref-wrong-ca.out" || fail "wrong CA: $(cat "$DIR/ref-wrong-ca.out")"
refused no-client-cert "etcd-cert FILE" --store "etcd:$URL" --etcd-cacert ca.pem "${AUTH[@]}"
refused rogue-client-cert "etcd-cert" --store "etcd:$URL" --etcd-cacert ca.pem \
    --etcd-cert rogue.pem --etcd-key rogue.key "${AUTH[@]}"
refused cn-client-cert "no CN in its subject" --store "etcd:$URL" --etcd-cacert ca.pem \
    --etcd-cert cn.pem --etcd-key cn.key "${AUTH[@]}"
refused wrong-password "authentication failed" --store "etcd:$URL" "${TLS[@]}" \
    --etcd-user corral-svc --etcd-password-file badpw
grep -q "etcd-password-file" "$DIR/ref-wrong-password.out" || fail "wrong password: no flag named"
refused no-user "etcd-user" --store "etcd:$URL" "${TLS[@]}"
refused no-role "permission denied" --store "etcd:$URL" "${TLS[@]}" \
    --etcd-user norole --etcd-password-file pw
refused http-endpoint "serves\? https" --store "etcd:http://127.0.0.1:$CP" "${AUTH[@]}"
refused mixed "mix http:// and https://" --store "etcd:$URL,http://127.0.0.1:1" "${TLS[@]}" "${AUTH[@]}"
refused open-password "readable or writable by every user" --store "etcd:$URL" "${TLS[@]}" \
    --etcd-user corral-svc --etcd-password-file openpw
grep -q "openpw" "$DIR/ref-open-password.out" || fail "open password file not named"
refused user-no-file "etcd-password-file FILE" --store "etcd:$URL" "${TLS[@]}" --etcd-user corral-svc
refused tls-no-etcd "no etcd is in use" "${TLS[@]}"
refused key-not-pem "etcd-key" --store "etcd:$URL" --etcd-cacert ca.pem --etcd-cert client.pem \
    --etcd-key client.pem "${AUTH[@]}"
for f in "$DIR"/ref-*.out; do
    ! grep -q -- "$PW" "$f" || fail "the password is printed in $f"
done

# --- a controller on it: election and store over TLS, authenticated -----
CTLPORT=$(free_ports 1)
S=http://127.0.0.1:$CTLPORT
start_ctl() { # extra args
    cr_start_controller "$DIR/ctl" --listen "127.0.0.1:$CTLPORT" --store "etcd:$URL" \
        --store-cluster tls "${TLS[@]}" "${AUTH[@]}" "$@"
    CTL=$CTL_PID
    TOK=$CORRAL_TOKEN
}
api() { curl -sf -m 20 -H "Authorization: Bearer $TOK" "$@"; }
field() { api "$S$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }
submit() { api -X POST "$S/v1/jobs" -d "{\"name\":\"$1\",\"gpus\":64,\"command\":[\"true\"]}" >/dev/null; }
leader() { curl -sf -m 5 "$S/healthz" | grep -q '"leader"'; }

# TTL 8 s: a re-authentication (etcd's bcrypt, twice on a rotation) under
# ASan on a loaded machine must fit in a renewal's TTL/3 request timeout.
start_ctl --advertise-url "$S" --election-ttl 8
wait_for 30 leader || fail "the controller did not become the leader"
for i in 1 2 3; do submit "j$i" || fail "submit j$i"; done
[ "$(field "/v1/jobs?limit=5" "d['total']")" = 3 ] || fail "3 jobs not listed"
# New auth revision: every token is now "old"; then the password set again
# (to the same): the user's tokens are invalid.
root role add other || fail "role add other"
submit j4 || fail "submit after the auth revision changed: $(tail -3 "$DIR/controller.log")"
printf '%s\n' "$PW" | root user passwd corral-svc --interactive=false || fail "user passwd"
submit j5 || fail "submit after the password was set again: $(tail -3 "$DIR/controller.log")"
# Rotation: the file first, then etcd; the refused old password makes the
# client read the file again.
PW2="pw2-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$PW2" >pw
printf '%s\n' "$PW2" | root user passwd corral-svc --interactive=false || fail "user passwd (rotation)"
submit j6 || fail "submit after the password was rotated: $(tail -3 "$DIR/controller.log")"
# The election's own client renews every TTL/3 with the refused token: it
# must authenticate again too, or the leader exits 75 within TTL - 1.6 s.
sleep 7
kill -0 "$CTL" 2>/dev/null || fail "the leader exited after its token was invalidated"
leader || fail "no longer the leader after its token was invalidated"
[ "$(field "/v1/jobs?limit=10" "d['total']")" = 6 ] || fail "6 jobs not listed"

# An ordinary user of Corral: its own tenant only, no admin data.
api -X POST "$S/v1/tenants" -d '{"name":"ml"}' >/dev/null || fail "tenant ml"
USER_TOK=$(api -X POST "$S/v1/tokens" -d '{"role":"user","tenant":"ml","name":"u"}' |
    python3 -c "import json,sys; print(json.load(sys.stdin)['token'])") || fail "user token"
uapi() { curl -s -m 20 -H "Authorization: Bearer $USER_TOK" -o "$DIR/u.out" -w '%{http_code}' "$@"; }
[ "$(uapi "$S/v1/jobs?limit=10")" = 200 ] || fail "user: GET /v1/jobs"
python3 -c "import json,sys; d=json.load(open('$DIR/u.out')); sys.exit(d['total'] != 0)" ||
    fail "a user of tenant ml sees other tenants' jobs: $(cat "$DIR/u.out")"
for p in /v1/tokens /v1/audit; do
    code=$(uapi "$S$p")
    [ "$code" = 403 ] || fail "user: GET $p gave $code"
done
for p in /v1/cluster /v1/whoami /metrics /healthz /v1/nodes; do
    uapi "$S$p" >/dev/null
    ! grep -q -- "$PW" "$DIR/u.out" || fail "GET $p shows the etcd password"
    ! grep -q -- "client.key" "$DIR/u.out" || fail "GET $p shows the etcd key file"
done

# SIGKILL and restart (no election): everything acknowledged is back.
kill -9 "$CTL"
wait "$CTL" 2>/dev/null || true
start_ctl
[ "$(field "/v1/jobs?limit=10" "d['total']")" = 6 ] || fail "after restart: not 6 jobs"
[ "$(field "/v1/jobs?limit=10" "sorted(i['name'] for i in d['items'])")" = \
    "['j1', 'j2', 'j3', 'j4', 'j5', 'j6']" ] || fail "after restart: names"
kill "$CTL"
wait "$CTL" 2>/dev/null || true

# --- bench_controller --etcd with the same flags (passed through) --------
BENCH=$(dirname "$CORRAL")/bench/controller/bench_controller
if [ -x "$BENCH" ]; then
    bench() { CORRAL_BIN=$CORRAL "$BENCH" --seconds 0.3 --clients 1 --no-slurm --etcd "$URL" "$@"; }
    if bench >"$DIR/bench0.out" 2>&1; then
        fail "bench_controller on the TLS etcd without its flags succeeded"
    fi
    grep -q "etcd-cacert\|etcd-cert\|does not verify" "$DIR/bench0.out" ||
        fail "bench_controller refusal: $(cat "$DIR/bench0.out")"
    bench "${TLS[@]}" "${AUTH[@]}" >"$DIR/bench.out" 2>&1 || fail "bench_controller: $(cat "$DIR/bench.out")"
    grep -Eq "corral etcd +clients=1 +submits=[1-9][0-9]* +errors=0 " "$DIR/bench.out" ||
        fail "bench_controller on etcd: $(cat "$DIR/bench.out")"
else
    echo "no $BENCH: bench_controller --etcd-* not checked"
fi

# --- admin migrate from the TLS etcd ------------------------------------
if "$CORRAL" admin migrate --from "etcd:$URL" --to "sqlite:$DIR/mig0" --cluster tls \
    >"$DIR/mig0.out" 2>&1; then
    fail "migrate without the TLS flags succeeded"
fi
grep -q "etcd-cacert\|etcd-cert\|does not verify" "$DIR/mig0.out" || fail "migrate refusal: $(cat "$DIR/mig0.out")"
"$CORRAL" admin migrate --from "etcd:$URL" --to "sqlite:$DIR/mig" --cluster tls "${TLS[@]}" \
    "${AUTH[@]}" >"$DIR/mig.out" 2>&1 || fail "migrate: $(cat "$DIR/mig.out")"
grep -q "6 jobs" "$DIR/mig.out" || fail "migrate said: $(cat "$DIR/mig.out")"

for f in "$DIR"/*.log "$DIR"/*.out; do
    ! grep -q -e "$PW" -e "$PW2" "$f" || fail "a password is in $f"
done
echo "etcd TLS and auth: all checks passed"
