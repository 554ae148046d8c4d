#!/usr/bin/env python3
"""http_framing.py HOST PORT PATH - strict request framing (issue 24).

Sends each malformed request head below on its own connection to a Corral
HTTP server (the controller or the agent) and expects 400 (431 for the
oversized head) and the connection closed by the server after the answer,
so nothing after a refused head is read as a request. Then a well-framed
request on PATH must not be refused as malformed. Prints one line per
case; exits 1 when any case was served or left the connection open.
No timing: each read waits for the server's close (30 s bound).
"""
import socket
import sys

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
L = b"GET " + path + b" HTTP/1.1\r\n"
P = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
CASES = [
    ("CL + TE", P + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE + CL", P + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400),
    ("CL, CL differing", P + b"Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}xyz", 400),
    ("CL, CL the same", P + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400),
    ("CL list", P + b"Content-Length: 2, 2\r\n\r\n{}", 400),
    ("CL with a sign", P + b"Content-Length: +2\r\n\r\n{}", 400),
    ("TE gzip, chunked", P + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE chunked", P + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400),
    ("bare LF lines", b"GET " + path + b" HTTP/1.1\nHost: x\n\n", 400),
    ("bare LF in a header", L + b"Host: x\nContent-Length: 0\r\n\r\n", 400),
    ("bare CR ends a line", L + b"Host: x\rX-A: b\r\n\r\n", 400),
    ("CR inside a value", L + b"Host: x\r\nX-A: a\rb\r\n\r\n", 400),
    ("obs-fold (space)", L + b"Host: x\r\nX-A: a\r\n Content-Length: 5\r\n\r\n", 400),
    ("obs-fold (tab)", L + b"Host: x\r\nX-A: a\r\n\tb\r\n\r\n", 400),
    ("NUL in a value", L + b"Host: x\r\nX-A: a\x00b\r\n\r\n", 400),
    ("control byte in a name", L + b"Host: x\r\nX\x01A: b\r\n\r\n", 400),
    ("space before colon", L + b"Host : x\r\n\r\n", 400),
    ("no Host", L + b"\r\n", 400),
    ("two Hosts", L + b"Host: x\r\nHost: y\r\n\r\n", 400),
    ("oversized head", L + b"Host: x\r\nX-A: " + b"a" * 70000 + b"\r\n\r\n", 431),
    ("%00 in the path", b"GET " + path + b"/%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("%01 in the path", b"GET " + path + b"/%01 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("raw control byte in the path", b"GET " + path + b"/\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("%0A in the query", b"GET " + path + b"?state=a%0Ab HTTP/1.1\r\nHost: x\r\n\r\n", 400),
]


def exchange(data):
    """The status line and whether the server closed the connection."""
    s = socket.create_connection((host, port), timeout=30)
    try:
        s.sendall(data)
    except OSError:
        pass  # refused while sending (the oversized head): read what came
    out, closed = b"", False
    try:
        while True:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except socket.timeout:
        pass
    except OSError:
        closed = True
    s.close()
    return out.split(b"\r\n", 1)[0].decode("latin-1"), closed


bad = 0
for name, data, want in CASES:
    status, closed = exchange(data)
    ok = status.startswith("HTTP/1.1 %d " % want) and closed
    bad += not ok
    print("%-30s %-45s closed=%s%s" % (name, status, closed, "" if ok else "  <- FAIL"))
# A well-framed request (Connection: close so the read ends) is not a 400.
status, closed = exchange(L + b"Host: x\r\nX-Trailing: b  \r\nX-Empty:\r\nConnection: close\r\n\r\n")
good = status.startswith("HTTP/1.1 ") and not status.startswith("HTTP/1.1 400")
print("%-30s %s" % ("well framed", status))
sys.exit(0 if bad == 0 and good else 1)
