#!/bin/sh
# Request smuggling (RFC 9112 7.1): a chunk-size line ended by a bare LF.
# The replica here reads chunk lines strictly by CRLF (the bare LF is part of
# a chunk extension to it), so a proxy that accepted the LF would frame the
# body differently and the replica would run the request hidden inside it
# (GET /smuggled, which leaves the file smuggled.hit). The gateway must
# answer 400 and forward nothing; a well-framed chunked POST still passes.
. "$(dirname "$0")/lib.sh"

start_backend a
start_gateway main --service "chat=127.0.0.1:$PORT_a"
G=$GW_main
HOST=${G%:*}
PORT=${G##*:}

# raw BYTES: send them on one connection, print what came back (5 s at most).
raw() {
    python3 - "$HOST" "$PORT" "$1" <<'PY'
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(sys.argv[3].encode().decode('unicode_escape').encode('latin-1'))
s.settimeout(5)
out = b''
end = time.time() + 5
try:
    while time.time() < end:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    pass
sys.stdout.write(out.decode('latin-1'))
PY
}

# Lenient reader: "2;" then 2 bytes, then a 0x29-byte chunk holding
# "0\r\n\r\n" + the smuggled request. Strict reader: "2;\nxx" then "29",
# then the last chunk: the body ends and GET /smuggled follows.
SMUG='GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n'
BODY="2;\\nxx\\r\\n29\\r\\n0\\r\\n\\r\\n${SMUG}\\r\\n0\\r\\n\\r\\n"
HEAD='POST /chat/x HTTP/1.1\r\nHost: chat\r\nTransfer-Encoding: chunked\r\n\r\n'
raw "${HEAD}${BODY}" >resp.txt
head -1 resp.txt | grep -q "^HTTP/1.1 400 " || { cat resp.txt; fail "bare-LF chunk line not refused"; }
sleep 0.5 # give a smuggled request (if one went through) time to land
[ ! -e smuggled.hit ] || fail "the replica ran a smuggled request"

# Bare LF after chunk data, and CL + TE together: refused too.
raw 'POST /chat/x HTTP/1.1\r\nHost: chat\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n' >r2.txt
head -1 r2.txt | grep -q "^HTTP/1.1 400 " || { cat r2.txt; fail "bare LF after data not refused"; }
raw 'POST /chat/x HTTP/1.1\r\nHost: chat\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' >r3.txt
head -1 r3.txt | grep -q "^HTTP/1.1 400 " || { cat r3.txt; fail "CL + TE not refused"; }

# A correct chunked request still goes through, and the replica saw one request.
raw 'POST /chat/x HTTP/1.1\r\nHost: chat\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n' >ok.txt
head -1 ok.txt | grep -q "^HTTP/1.1 200 " || { cat ok.txt; fail "valid chunked POST failed"; }
[ ! -e smuggled.hit ] || fail "the replica ran a smuggled request"
stop_gateway main
echo ok
