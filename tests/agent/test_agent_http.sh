#!/usr/bin/env bash
# The agent's HTTP server (issue 24): strict request framing (the cases of
# tests/integration/http_framing.py: 400 and the connection closed), and a
# bounded server: 300 connections that never send a request (from
# 127.0.0.2) do not add a thread each (a pool of event threads; per-address
# and total connection caps), and a request from another address is still
# answered while they are held. No sleep synchronises anything: the thread
# count is read after a request on a later connection was answered, so the
# idle ones were accepted (or refused) by then.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
cr_setup agenthttp

cr_start_controller "$DIR/ctl"
cr_start_agent n0 "$DIR/n0" "$DIR/agent.log" --gpus "sim:1xA100 80GB SXM"
APID=${PIDS[-1]}
wait_for 30 grep -q 'listening on' "$DIR/agent.log" || fail "the agent did not start"
PORT=$(grep -o 'listening on [0-9.:]*' "$DIR/agent.log" | head -1 | sed 's/.*://')

python3 "$(dirname "$0")/../integration/http_framing.py" 127.0.0.1 "$PORT" /v1/health \
    >"$DIR/framing.out" || { cat "$DIR/framing.out"; fail "the agent served a malformed request"; }

before=$(ls "/proc/$APID/task" | wc -l)
python3 - "$PORT" "$APID" "$before" <<'PY' || fail "idle connections grew the agent's threads"
import os, socket, sys
port, pid, before = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
idle = []
for _ in range(300):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /v1/health HTTP/1.1\r\n")  # a head never finished
    except OSError:
        pass  # refused over a cap
    idle.append(s)
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
out = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    out += b
after = len(os.listdir("/proc/%s/task" % pid))
print("threads before", before, "with 300 idle connections", after, "answer",
      out.split(b"\r\n", 1)[0])
ok = out.startswith(b"HTTP/1.1 200 ") and after <= before + 2
sys.exit(0 if ok else 1)
PY
echo ok
