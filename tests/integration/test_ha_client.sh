#!/usr/bin/env bash
# test_ha_client.sh - clients that name several controllers (no etcd needed):
# the real controller, one real agent and the real CLI on loopback, with
# small Python stand-ins for a dead controller, a follower and a network
# that loses an answer.
#   - the agent and the CLI given "DEAD,LIVE" skip the controller that
#     refuses connections and use the live one;
#   - a follower's 307 (Location: the leader's URL, same path and query) is
#     followed by the CLI, for reads and for a submit (method and body kept),
#     and the submit carries an Idempotency-Key; a 307 to a controller the
#     CLI was not given is refused, naming it;
#   - a submit whose answer is lost after the controller acted on it is
#     repeated at the next controller with the same Idempotency-Key: the job
#     exists exactly once and the CLI prints its id;
#   - a redirect loop ends with an error naming it, not a hang.
# Polls with deadlines; no sleeps as synchronisation.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup hacli

unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null
cr_start_controller "$DIR/ctl" --allow-legacy-join
LIVE=$CORRAL_SERVER
DEAD="http://127.0.0.1:$(free_ports 1)" # nothing listens there

# --- a dead controller first in the list --------------------------------------
cr_start_agent "hacli$$-n0" "$DIR/n0" "$DIR/agent0.log" --server "$DEAD,$LIVE" \
    --gpus "sim:2xA100 80GB SXM"
export CORRAL_SERVER="$DEAD,$LIVE"
up() { [ "$("$CORRAL" nodes | grep -c ' up ')" = 1 ]; }
wait_for 30 up || fail "the agent given DEAD,LIVE did not register"
out=$("$CORRAL" submit --name first -- sleep 300) || fail "submit via DEAD,LIVE: $out"
id1=$(echo "$out" | sed -nE 's/^Submitted job ([0-9]+).*/\1/p')
[ -n "$id1" ] || fail "no id in '$out'"
running() { "$CORRAL" show --json "$1" | grep -q '"state": *"running"'; }
wait_for 30 running "$id1" || fail "job $id1 did not run"
# a single dead URL still fails at once with exit 3 (cannot reach)
set +e
CORRAL_SERVER=$DEAD "$CORRAL" jobs >/dev/null 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || fail "a dead single controller: exit $rc, want 3"

# --- stand-ins: follower (307), lossy proxy, loop -----------------------------
cat >"$DIR/standin.py" <<'EOF'
import http.server, socket, sys, threading, urllib.request
mode, port, target, logf = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lost = [0]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def note(self):
        with open(logf, "a") as f:
            f.write("%s %s idem=%s\n" % (self.command, self.path, self.headers.get("Idempotency-Key")))
    def handle_any(self):
        self.note()
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if mode == "follower" or mode == "loop":
            where = target if mode == "follower" else "http://127.0.0.1:%d" % port
            self.send_response(307)
            self.send_header("Location", where + self.path)
            self.send_header("Content-Type", "application/json")
            msg = b'{"error":"CR_EUNAVAIL","message":"not the leader"}'
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        # lossy: hand the request to the controller, then drop its answer
        req = urllib.request.Request(target + self.path, data=body, method=self.command)
        for k in ("Authorization", "Content-Type", "Idempotency-Key"):
            if self.headers.get(k):
                req.add_header(k, self.headers.get(k))
        try:
            urllib.request.urlopen(req).read()
        except Exception:
            pass
        lost[0] += 1
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
    do_GET = do_POST = do_PUT = do_DELETE = handle_any
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
FP=$(free_ports 1)
python3 "$DIR/standin.py" follower "$FP" "$LIVE" "$DIR/follower.log" &
PIDS+=($!)
LP=$(free_ports 1)
python3 "$DIR/standin.py" lossy "$LP" "$LIVE" "$DIR/lossy.log" &
PIDS+=($!)
OP=$(free_ports 1)
python3 "$DIR/standin.py" loop "$OP" "$LIVE" "$DIR/loop.log" &
PIDS+=($!)
listening() { python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),1)"; }
wait_for 30 listening "$FP" || fail "follower stand-in did not start"
wait_for 30 listening "$LP" || fail "lossy stand-in did not start"
wait_for 30 listening "$OP" || fail "loop stand-in did not start"

# --- a follower's redirect ------------------------------------------------------
# only to a configured controller: the follower alone names LIVE, which the
# CLI was not given, so the redirect is refused (the token stays here)
set +e
out=$(CORRAL_SERVER="http://127.0.0.1:$FP" "$CORRAL" show "$id1" 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] || fail "a 307 to an unlisted controller: exit $rc, want 3 ($out)"
echo "$out" | grep -qF "redirected to $LIVE/v1/jobs/$id1" || fail "the refusal names no URL: '$out'"
echo "$out" | grep -q "not one of the configured controllers" || fail "the refusal: '$out'"
export CORRAL_SERVER="http://127.0.0.1:$FP,$LIVE"
"$CORRAL" show "$id1" >/dev/null || fail "show through a follower's 307"
out=$("$CORRAL" submit --name redirected -- sleep 300) || fail "submit through a 307: $out"
id2=$(echo "$out" | sed -nE 's/^Submitted job ([0-9]+).*/\1/p')
[ -n "$id2" ] || fail "no id in '$out'"
grep -q "^POST /v1/jobs idem=cli-[0-9a-f]\{32\}$" "$DIR/follower.log" ||
    fail "the submit carried no Idempotency-Key: $(cat "$DIR/follower.log")"
grep -q "^GET /v1/jobs/$id1" "$DIR/follower.log" || fail "the read did not go to the follower first"

# --- a lost answer: repeated elsewhere with the same key, done once -----------
export CORRAL_SERVER="http://127.0.0.1:$LP,$LIVE"
out=$("$CORRAL" submit --name once-only -- sleep 300) || fail "submit with a lost answer: $out"
id3=$(echo "$out" | sed -nE 's/^Submitted job ([0-9]+).*/\1/p')
[ -n "$id3" ] || fail "no id in '$out'"
grep -q "^POST /v1/jobs idem=cli-" "$DIR/lossy.log" || fail "the lossy proxy saw no submit"
export CORRAL_SERVER=$LIVE
n=$("$CORRAL" jobs --all --json | python3 -c 'import json,sys; d=json.load(sys.stdin); d=d["items"]; print(sum(1 for j in d if j.get("name")=="once-only"))')
[ "$n" = 1 ] || fail "the submit whose answer was lost made $n jobs, want 1"
# the same user key twice: the second is the first's answer
o1=$("$CORRAL" submit --idempotency-key k-42 --name keyed -- true)
o2=$("$CORRAL" submit --idempotency-key k-42 --name keyed -- true)
[ "$o1" = "$o2" ] || fail "the same --idempotency-key gave '$o1' then '$o2'"

# --- a redirect loop ends ------------------------------------------------------
set +e
out=$(CORRAL_SERVER="http://127.0.0.1:$OP" timeout 20 "$CORRAL" jobs 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] || fail "a redirect loop: exit $rc, want 3 ($out)"
echo "$out" | grep -q "too many redirects" || fail "a redirect loop: '$out'"
echo "PASS"
