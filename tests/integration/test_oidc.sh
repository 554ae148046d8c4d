#!/usr/bin/env bash
# test_oidc.sh - OIDC/JWT bearer tokens (issue 33) against the real
# controller over HTTP. Keys are made here with the openssl CLI (RSA 2048
# for RS256, EC P-256 for ES256), published as a JWKS file, and tokens are
# signed with `openssl dgst`.
#   - an oidc.map rule naming a tenant that does not exist: the controller
#     refuses to start, naming the field;
#   - valid RS256 and ES256 tokens map to the configured tenant and role;
#   - expired, wrong issuer, wrong audience, alg none, tampered, unknown
#     key: 401, each with an audit entry naming the claimed subject and why;
#     a valid token no rule maps: 403;
#   - a key rotation in the JWKS (a new kid, the old key gone) is picked up
#     without a restart;
#   - Corral's own tokens keep working beside them.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup oidc
K=$DIR/keys
mkdir -p "$K"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/k1.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$K/k2.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/k3.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/k4.pem" 2>/dev/null

# jwk KID PEM: the public key as a JWK (from openssl's output)
jwk() {
    local kid=$1 pem=$2
    if openssl pkey -in "$pem" -noout -text 2>/dev/null | grep -q 'ASN1 OID: prime256v1'; then
        openssl pkey -in "$pem" -pubout -outform DER 2>/dev/null | python3 -c "
import base64,json,sys
d=sys.stdin.buffer.read(); pt=d[-65:]; assert pt[0]==4
b=lambda x: base64.urlsafe_b64encode(x).rstrip(b'=').decode()
print(json.dumps({'kty':'EC','crv':'P-256','kid':'$kid','use':'sig','x':b(pt[1:33]),'y':b(pt[33:])}))"
    else
        openssl rsa -in "$pem" -noout -modulus 2>/dev/null | python3 -c "
import base64,json,sys
n=bytes.fromhex(sys.stdin.read().strip().split('=')[1])
b=lambda x: base64.urlsafe_b64encode(x).rstrip(b'=').decode()
print(json.dumps({'kty':'RSA','kid':'$kid','use':'sig','n':b(n),'e':'AQAB'}))"
    fi
}
jwks() { # jwks JWK...: the set, written atomically (a rename)
    local IFS=,
    printf '{"keys":[%s]}\n' "$*" >"$DIR/jwks.json.tmp"
    mv "$DIR/jwks.json.tmp" "$DIR/jwks.json"
}
b64() { python3 -c "import base64,sys; print(base64.urlsafe_b64encode(sys.stdin.buffer.read()).rstrip(b'=').decode())"; }
# jwt PEM ALG KID PAYLOAD: a signed token (ES256: DER signature to r||s)
jwt() {
    local pem=$1 alg=$2 kid=$3 body=$4 h p
    h=$(printf '{"alg":"%s","typ":"JWT","kid":"%s"}' "$alg" "$kid" | b64)
    p=$(printf '%s' "$body" | b64)
    printf '%s.%s' "$h" "$p" >"$DIR/in"
    openssl dgst -sha256 -sign "$pem" -out "$DIR/sig" "$DIR/in"
    if [ "$alg" = ES256 ]; then
        python3 - "$DIR/sig" <<'PY' >"$DIR/sig.raw"
import sys
d = open(sys.argv[1], 'rb').read()
i = 2 if d[1] < 0x80 else 3
out = b''
for _ in range(2):
    assert d[i] == 2
    n = d[i + 1]
    v = d[i + 2:i + 2 + n].lstrip(b'\0')
    out += v.rjust(32, b'\0')
    i += 2 + n
sys.stdout.buffer.write(out)
PY
        mv "$DIR/sig.raw" "$DIR/sig"
    fi
    printf '%s.%s.%s' "$h" "$p" "$(b64 <"$DIR/sig")"
}
NOW=$(date +%s)
ISS=https://login.example.com
claims() { # claims SUB GROUP [ISS] [AUD] [EXP] [NBF]
    printf '{"iss":"%s","aud":["other","%s"],"sub":"%s","groups":["staff","%s"],"exp":%s,"nbf":%s}' \
        "${3:-$ISS}" "${4:-corral}" "$1" "$2" "${5:-$((NOW + 3600))}" "${6:-$((NOW - 60))}"
}

jwks "$(jwk k1 "$K/k1.pem")" "$(jwk k2 "$K/k2.pem")"
oidc_conf() { # oidc_conf TENANT-OF-THE-USER-RULE
    printf '{"checkpoint_root":"%s/ckpt","oidc":{"issuer":"%s","audience":"corral","jwks":"%s","leeway_s":0,"map":[{"claim":"groups","value":"corral-admins","role":"admin"},{"claim":"groups","value":"ml-a1","tenant":"%s","role":"user"}]}}\n' \
        "$DIR" "$ISS" "$DIR/jwks.json" "$1" >"$CKPT_CONF"
}

# The tenant exists before the rule naming it: made by a first start.
cr_start_controller "$DIR/ctl"
c tenants create team-a1 >/dev/null
cr_stop_pids TERM "$CTL_PID"
# A rule naming a tenant that does not exist: refused at start.
oidc_conf team-zz
if timeout 60 "$CORRAL" controller --config "$CKPT_CONF" --listen 127.0.0.1:0 \
    --state-dir "$DIR/ctl" >"$DIR/refused.out" 2>&1; then
    fail "the controller started with an oidc rule for a missing tenant"
fi
grep -q "oidc.map\[1\].tenant" "$DIR/refused.out" ||
    fail "the refusal does not name oidc.map[1].tenant: $(cat "$DIR/refused.out")"
oidc_conf team-a1
cr_start_controller "$DIR/ctl"

call() { # call TOKEN: "BODY CODE" of GET /v1/whoami
    curl -s -H "Authorization: Bearer $1" -w ' %{http_code}' "$SERVER/v1/whoami"
}
expect() { # expect CODE WHAT TOKEN [BODY-GREP]
    local r
    r=$(call "$3")
    case "$r" in *" $1") ;; *) fail "$2: want $1, got $r" ;; esac
    [ -z "${4:-}" ] || echo "$r" | grep -q "$4" || fail "$2: the answer lacks $4: $r"
}

expect 200 "RS256 user" "$(jwt "$K/k1.pem" RS256 k1 "$(claims alice ml-a1)")" '"tenant": *"team-a1"'
expect 200 "RS256 user role" "$(jwt "$K/k1.pem" RS256 k1 "$(claims alice ml-a1)")" '"role": *"user"'
expect 200 "RS256 user name" "$(jwt "$K/k1.pem" RS256 k1 "$(claims alice ml-a1)")" '"name": *"alice"'
expect 200 "ES256 admin" "$(jwt "$K/k2.pem" ES256 k2 "$(claims root corral-admins)")" '"role": *"admin"'
expect 200 "Corral's own admin token" "$ADMIN" '"role": *"admin"'
expect 401 expired "$(jwt "$K/k1.pem" RS256 k1 "$(claims exp-user ml-a1 "" "" $((NOW - 10)))")"
expect 401 "not yet valid" "$(jwt "$K/k1.pem" RS256 k1 "$(claims nbf-user ml-a1 "" "" "" $((NOW + 600)))")"
expect 401 "wrong issuer" "$(jwt "$K/k1.pem" RS256 k1 "$(claims iss-user ml-a1 https://evil.example)")"
expect 401 "wrong audience" "$(jwt "$K/k2.pem" ES256 k2 "$(claims aud-user ml-a1 "" someone-else)")"
none_h=$(printf '{"alg":"none","typ":"JWT"}' | b64)
expect 401 "alg none" "$none_h.$(claims none-user corral-admins | b64)."
good=$(jwt "$K/k1.pem" RS256 k1 "$(claims tamper-user ml-a1)")
forged=$(claims tamper-user corral-admins | b64)
expect 401 tampered "${good%%.*}.$forged.${good##*.}"
expect 401 "unknown key" "$(jwt "$K/k4.pem" RS256 k4 "$(claims k4-user ml-a1)")"
expect 401 "RS256 key under the EC kid (alg confusion)" "$(jwt "$K/k1.pem" RS256 k2 "$(claims conf-user ml-a1)")"
expect 403 "no rule maps it" "$(jwt "$K/k1.pem" RS256 k1 "$(claims nobody no-such-group)")"

# Every refusal is audited with the subject it claimed and why.
audited() { # audited SUBJECT WHY
    c audit --limit 1000 --json | python3 -c '
import json,sys
items=json.load(sys.stdin)["items"]
who, why = "oidc:" + sys.argv[1], sys.argv[2]
sys.exit(0 if any(who in json.dumps(i) and why in i["action"] for i in items) else 1)' "$1" "$2"
}
for case in "exp-user:expired" "nbf-user:not yet valid" "iss-user:wrong issuer" \
    "aud-user:wrong audience" "none-user:alg 'none' refused" "tamper-user:bad signature" \
    "k4-user:unknown key" "conf-user:unknown key" "nobody:no oidc.map rule"; do
    wait_for 20 audited "${case%%:*}" "${case#*:}" ||
        fail "no audit entry for ${case%%:*} ($case): $(c audit --limit 30)"
done

# Rotation: k3 replaces k1 in the JWKS; no restart.
old=$(jwt "$K/k1.pem" RS256 k1 "$(claims alice ml-a1)")
jwks "$(jwk k3 "$K/k3.pem")" "$(jwk k2 "$K/k2.pem")"
expect 200 "the rotated-in key k3" "$(jwt "$K/k3.pem" RS256 k3 "$(claims alice ml-a1)")" '"tenant": *"team-a1"'
expect 401 "the rotated-out key k1" "$old"
[ "$(cat "$CTL_STATE/listen.addr")" = "$SERVER" ] || fail "the controller restarted"
kill -0 "$CTL_PID" || fail "the controller is gone"

# corral login: the token pasted on stdin is checked, kept (0600) and used
# by later commands; a refused one is not kept.
L() { env -u CORRAL_TOKEN -u CORRAL_TOKEN_FILE -u XDG_CONFIG_HOME HOME="$DIR/home" "$CORRAL" "$@"; }
idt=$(jwt "$K/k3.pem" RS256 k3 "$(claims alice ml-a1)")
out=$(printf '%s\n' "$idt" | L login --server "$SERVER") || fail "corral login refused a valid JWT: $out"
echo "$out" | grep -q "as alice (role user, tenant team-a1)" || fail "corral login said: $out"
[ "$(stat -c %a "$DIR/home/.config/corral/token")" = 600 ] || fail "the kept token is not 0600"
L jobs --server "$SERVER" >/dev/null || fail "a command after corral login did not use its token"
if printf 'eyJhbGciOiJub25lIn0.e30.\n' | L login --server "$SERVER" --to "$DIR/home/bad" 2>/dev/null; then
    fail "corral login kept a refused token"
fi
[ ! -e "$DIR/home/bad" ] || fail "corral login wrote a refused token"

# Corral's own tokens: scopes and an expiry.
ro=$(c tokens create --role user --tenant team-a1 --name ro --scope read)
sub=$(c tokens create --role user --tenant team-a1 --name sub --scope submit)
short=$(c tokens create --role user --tenant team-a1 --name short --expires 1s)
long=$(c tokens create --role user --tenant team-a1 --name long --expires 1h)
post() { # post TOKEN PATH BODY: the HTTP code
    curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' --data "$3" "$SERVER$2"
}
expect 200 "a read-only token reads" "$ro" '"tenant": *"team-a1"'
[ "$(post "$ro" /v1/jobs '{"name":"x","command":["true"],"gpus":0}')" = 403 ] ||
    fail "a read-only token submitted a job"
[ "$(post "$sub" /v1/jobs '{"name":"x","command":["true"],"gpus":0}')" = 201 ] ||
    fail "a submit token could not submit"
[ "$(post "$sub" /v1/tokens '{"role":"user","tenant":"team-a1"}')" = 403 ] ||
    fail "a submit token reached /v1/tokens past its scope"
denied_scope() { c audit --limit 1000 | grep -q "DENIED POST /v1/jobs: scope read"; }
wait_for 20 denied_scope || fail "the refused read-scope submit is not audited"
expect 200 "a token expiring in an hour" "$long"
gone() { [ "$(call "$short" | sed 's/.* //')" = 401 ]; }
wait_for 30 gone || fail "a token created with --expires 1s still works: $(call "$short")"
c tokens --json | grep -q '"expires": "20' || fail "tokens list does not show the expiry"
echo ok
