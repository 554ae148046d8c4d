#!/bin/sh
# Connection limits and timeouts: a request head dripped byte by byte is
# closed at --header-timeout; a stalled request body frees the replica slot
# at --body-timeout (408); at the descriptor limit (RLIMIT_NOFILE set low)
# extra connections get a 503 and the admitted ones are still served.
. "$(dirname "$0")/lib.sh"

start_backend a
start_gateway main --service "chat=127.0.0.1:$PORT_a" --max-inflight 1 \
    --header-timeout 1s --body-timeout 4s --idle-timeout 60s
G=$GW_main

# 1. Slowloris: one header byte every 200 ms; closed within a few seconds
#    (the idle timeout is 60 s, so only the head deadline can do it).
python3 - "${G%:*}" "${G##*:}" <<'PY' || fail "a dripped request head was not closed"
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"GET /chat/x HTTP/1.1\r\nHost: chat\r\n")
s.settimeout(0.2)
end = time.time() + 8
while time.time() < end:
    try:
        s.send(b"X")
        if s.recv(4096) == b"":
            sys.exit(0)
    except socket.timeout:
        continue
    except OSError:
        sys.exit(0)
sys.exit(1)
PY

# 2. A request body that stops: 408 for it, and the only slot (max-inflight
#    1) serves the next request within seconds, not at the 300 s upstream
#    timeout. (A body timeout of 4 s: the probe that the stall holds the
#    slot must see it before it is freed, also on a loaded machine under
#    ASan, where 1 s was once missed.)
python3 - "${G%:*}" "${G##*:}" >stall.txt <<'PY' &
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"POST /chat/x HTTP/1.1\r\nHost: chat\r\nContent-Length: 100\r\n\r\n0123456789")
s.settimeout(20)
out = b""
try:
    while True:
        b = s.recv(4096)
        if not b:
            break
        out += b
except OSError:
    pass
print(out.decode("latin-1").split("\r\n")[0])
PY
STALL=$!
wait_for 5 sh -c "curl -s -o /dev/null -w '%{http_code}' http://$G/chat/x | grep -q 503" ||
    fail "the stalled body did not hold the slot (test premise)"
wait_for 15 sh -c "curl -sf -o /dev/null http://$G/chat/x" || fail "a stalled body kept the replica slot"
wait "$STALL" || true
grep -q "^HTTP/1.1 408 " stall.txt || { cat stall.txt; fail "stalled body not answered 408"; }
stop_gateway main

# 3. RLIMIT_NOFILE 128: (128 - 64) / 2 = 32 clients admitted. 100
#    connections: the extra ones get 503 and close, and an admitted one is
#    still served through a new backend connection.
start_backend b
(ulimit -n 128 && exec "$CORRAL_BIN" gateway --listen 127.0.0.1:0 \
    --service "chat=127.0.0.1:$PORT_b") 2>"$T/gw-low.log" &
PIDS="$PIDS $!"
LOWPID=$!
wait_for 10 grep -q "listening on" "$T/gw-low.log" || fail "gateway low did not start"
L=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$T/gw-low.log")
python3 - "${L%:*}" "${L##*:}" >fd.txt <<'PY' || { cat fd.txt; fail "at the descriptor limit"; }
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
conns, refused = [], 0
for i in range(100):
    conns.append(socket.create_connection((host, port)))
time.sleep(0.5)
live = []
for s in conns:
    s.setblocking(False)
    try:
        b = s.recv(4096)
        if b.startswith(b"HTTP/1.1 503 "):
            refused += 1
            continue
    except BlockingIOError:
        live.append(s)
print("refused", refused, "live", len(live))
if refused < 50 or not live:
    sys.exit(1)
ok = 0
for s in live[:5]:
    s.setblocking(True)
    s.settimeout(10)
    s.sendall(b"GET /chat/x HTTP/1.1\r\nHost: chat\r\n\r\n")
    if s.recv(4096).startswith(b"HTTP/1.1 200 "):
        ok += 1
print("served", ok)
sys.exit(0 if ok == 5 else 1)
PY
cat fd.txt
wait_for 5 sh -c "curl -sf http://$L/metrics | grep -q '^corral_gateway_connections_refused_total [1-9]'" ||
    fail "refusals not counted"
grep -q "refusing connections" "$T/gw-low.log" || fail "refusals not logged"
kill -TERM "$LOWPID"
wait "$LOWPID" || fail "gateway low exited $?"
echo ok
