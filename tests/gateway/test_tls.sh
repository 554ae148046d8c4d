#!/bin/sh
# Client-side TLS on the gateway (issue 30): a CA made here with the openssl
# CLI, the gateway serving HTTPS to curl and to the real OpenAI client (npm
# "openai", where installed), large bodies both ways, plain HTTP refused on
# the TLS port with a 400 that says so, and SIGHUP swapping the certificate
# (a new serial is served) without dropping the listener or a request in
# flight; a broken pair on reload keeps the old certificate.
HERE=$(cd "$(dirname "$0")" && pwd)/openai # before lib.sh moves to its temporary dir
. "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || { echo "SKIP: no openssl CLI"; exit 77; }

# The CA, and two server certificates for 127.0.0.1 with serials 1001, 2002.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=corral test CA" -keyout ca.key -out ca.pem 2>ca.log || fail "CA"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
mkcert() { # NAME SERIAL
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$1.key" -out "$1.csr" 2>>ca.log &&
        openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -set_serial "$2" -days 2 \
            -extfile san.ext -out "$1.pem" 2>>ca.log || fail "certificate $1"
}
mkcert one 0x1001
mkcert two 0x2002
cp one.pem srv.pem
cp one.key srv.key

# Start-up errors name the flag.
bad() { # WANT ARGS...: exits 2 with WANT on stderr
    want=$1; shift
    rc=0
    "$CORRAL_BIN" gateway --listen 127.0.0.1:0 --service s=127.0.0.1:9 "$@" 2>bad.err || rc=$?
    [ "$rc" = 2 ] && grep -q -- "$want" bad.err || fail "$*: exit $rc, $(cat bad.err)"
}
bad "--tls-cert: needs --tls-key too" --tls-cert srv.pem
bad "--tls-key: cannot read" --tls-cert srv.pem --tls-key nothere.key
bad "does not match the certificate" --tls-cert srv.pem --tls-key two.key
bad "--tls-cert ca.key" --tls-cert ca.key --tls-key srv.key

start_backend A
cat >gw.json <<JSON
{"tls_cert": "srv.pem", "tls_key": "srv.key",
 "services": [{"name": "chat", "models": ["llama"], "endpoints": ["127.0.0.1:$PORT_A"]}]}
JSON
start_gateway main --config gw.json
grep -q "tls=on" gw-main.log || fail "the log does not say tls=on"
G=$GW_main
PORT=${G#*:}
S="https://127.0.0.1:$PORT"

# HTTPS with the CA; the replica sees X-Forwarded-Proto: https.
curl -sf --cacert ca.pem -D hdr.txt -o body.txt "$S/chat/x" || fail "https request"
grep -q "^A /x" body.txt || fail "body: $(cat body.txt)"
grep -qi "^X-Seen-Proto: https" hdr.txt || fail "no X-Forwarded-Proto https: $(cat hdr.txt)"
# A client claiming https over TLS gets ours anyway; no CA: not trusted.
curl -s -o /dev/null "$S/chat/x" && fail "a certificate from an unknown CA was accepted"
# A large response (many records, partial writes) and a large request body.
curl -sf --cacert ca.pem -o big.out "$S/chat/big?kb=4096" || fail "big response"
[ "$(wc -c <big.out)" = 4194304 ] || fail "big response: $(wc -c <big.out) bytes"
head -c 300000 /dev/zero | tr '\0' 'x' >up.bin
curl -sf --cacert ca.pem --data-binary @up.bin "$S/chat/up" >up.out || fail "big upload"
grep -q "^A /up 300000" up.out || fail "upload: $(cat up.out)"
# Keep-alive: several requests on one connection.
curl -sf --cacert ca.pem "$S/chat/1" "$S/chat/2" "$S/chat/3" >ka.out 2>ka.err || fail "keep-alive"
[ "$(grep -c '^A /' ka.out)" = 3 ] || fail "keep-alive: $(cat ka.out)"

# Plain HTTP on the TLS port: a 400 saying to use https://, no replica reached.
before=$(curl -sf "http://127.0.0.1:$PORT_A/stats" | awk '/^requests/ {print $2}')
code=$(curl -s -o plain.out -w '%{http_code}' "http://$G/chat/x") || true
[ "$code" = 400 ] && grep -q '"code":"tls_required"' plain.out ||
    fail "plain http on the TLS port: $code $(cat plain.out)"
after=$(curl -sf "http://127.0.0.1:$PORT_A/stats" | awk '/^requests/ {print $2}')
# (each /stats counts itself)
[ "$after" = $((before + 1)) ] || fail "the plain request reached the replica ($before -> $after)"
curl -sf --cacert ca.pem "$S/metrics" >m.txt || fail "metrics over https"
grep -q '^corral_gateway_tls_handshake_errors_total{reason="plain_http"} 1$' m.txt ||
    fail "plain_http not counted: $(grep tls m.txt)"
if command -v promtool >/dev/null; then
    promtool check metrics <m.txt >promtool.out 2>&1 || fail "promtool: $(cat promtool.out)"
fi

# The real OpenAI client over https, trusting the test's CA.
if command -v node >/dev/null && [ -d "$HERE/node_modules/openai" ]; then
    GW_URL="$S" NODE_EXTRA_CA_CERTS="$T/ca.pem" node "$HERE/test_tls.mjs" >node.out 2>node.err ||
        fail "the openai client over https: $(cat node.out node.err)"
    cat node.out
else
    echo "note: node or the openai package missing: curl alone"
fi

serial() {
    openssl s_client -connect "127.0.0.1:$PORT" -servername localhost -CAfile ca.pem \
        </dev/null 2>/dev/null | openssl x509 -noout -serial
}
[ "$(serial)" = "serial=1001" ] || fail "serial before the reload: $(serial)"

# SIGHUP with the second pair in place: its serial is served, on the same
# listener, and a request in flight through the reload completes.
curl -sf --cacert ca.pem -o slow.out "$S/chat/slow?ms=1500" &
SLOW=$!
wait_for 10 sh -c "curl -sf http://127.0.0.1:$PORT_A/stats | grep -q '^requests [1-9]'" || true
cp two.key srv.key.new && cp two.pem srv.pem.new && mv srv.key.new srv.key && mv srv.pem.new srv.pem
kill -HUP "$GWPID_main"
is_two() { [ "$(serial)" = "serial=2002" ]; }
wait_for 10 is_two || fail "after SIGHUP the gateway serves $(serial), not 2002"
wait "$SLOW" || fail "the request in flight through the reload failed"
grep -q "^A /slow" slow.out || fail "slow: $(cat slow.out)"
curl -sf --cacert ca.pem "$S/chat/after" | grep -q "^A /after" || fail "no service after reload"
grep -q "TLS certificate reloaded: serial 2002" gw-main.log || fail "no reload log line"

# A broken pair on reload: logged, the old certificate stays in service.
echo garbage >srv.key
kill -HUP "$GWPID_main"
wait_for 10 grep -q "TLS reload failed" gw-main.log || fail "a broken key was not reported"
is_two || fail "after a failed reload the gateway serves $(serial)"
curl -sf --cacert ca.pem "$S/metrics" >m2.txt || fail "metrics after a failed reload"
grep -q '^corral_gateway_tls_reloads_total{result="failed"} 1$' m2.txt &&
    grep -q '^corral_gateway_tls_reloads_total{result="ok"} 1$' m2.txt ||
    fail "reload counters: $(grep reloads m2.txt)"
stop_gateway main
echo "tls ok"
