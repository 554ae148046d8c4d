#!/usr/bin/env bash
# test_logcap.sh - job logs on the agent's disk (docs/agent.md "Job logs"):
#   1. an agent with --log-max-bytes 65536 and a job that writes 1 MiB to
#      stdout and 1 MiB to stderr: the job completes (never blocked), each
#      file under STATE-DIR/logs is at most 65536 bytes (its head, then the
#      notice), the agent logs "output capped" and the job has the event
#      "output capped at 65536 bytes";
#   2. (root) an agent whose state dir is a 2 MiB tmpfs and a job writing
#      4 MiB (the cap above the disk): the agent logs "output lost" and the
#      job has the event "output lost ... no space left on device"; a job
#      after it on the full disk gets the event too.
# Polls with deadlines.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cr_setup logcap
cleanup_extra() {
    if [ -n "${SMALL:-}" ]; then
        umount -l "$SMALL" 2>/dev/null || true
    fi
}
cr_start_controller "$DIR/ctl" --allow-legacy-join
cr_start_agent n1 "$DIR/n1" "$DIR/agent-1.log" --gpus "sim:1xA100 80GB SXM" --log-max-bytes 65536
up() { "$CORRAL" nodes | grep -q '^n1 *up'; }
wait_for 60 up || fail "agent n1 did not register"

submit() { "$CORRAL" submit "$@" | grep -o '[0-9][0-9]*' | head -1; }
state_is() { "$CORRAL" show "$1" | grep -q "State: *$2"; }

# 1. The cap.
id=$(submit -n loud --gpus 1 -- python3 -c '
import sys
line = "x" * 1023 + "\n"
for _ in range(1024):
    sys.stdout.write(line)
    sys.stderr.write(line)
')
[ -n "$id" ] || fail "submit"
wait_for 60 state_is "$id" completed || fail "job $id did not complete: $("$CORRAL" show "$id")"
for s in out err; do
    f=$DIR/n1/logs/$id/$s
    [ -f "$f" ] || fail "no $f"
    size=$(stat -c %s "$f")
    [ "$size" -le 65536 ] || fail "$s log is $size bytes, over the 65536 cap"
    [ "$size" -ge 60000 ] || fail "$s log is $size bytes: its head was not kept"
    tail -1 "$f" | grep -q "output capped at 65536 bytes" || fail "$s log ends without the notice"
done
wait_for 10 grep -q "job=$id output capped at 65536 bytes" "$DIR/agent-1.log" ||
    fail "the agent did not log the cap"
ev() { "$CORRAL" show "$1" | grep -q "$2"; }
wait_for 10 ev "$id" "output capped at 65536 bytes on node n1" ||
    fail "no 'output capped' event: $("$CORRAL" show "$id")"
# A job under the cap: its whole output, no event.
id2=$(submit -n quiet --gpus 1 -- sh -c 'echo hello')
wait_for 60 state_is "$id2" completed || fail "job $id2 did not complete"
[ "$(cat "$DIR/n1/logs/$id2/out")" = hello ] || fail "job $id2's log: $(cat "$DIR/n1/logs/$id2/out")"
! ev "$id2" "output capped" || fail "job $id2 got a cap event"

# 2. A full disk.
if [ "$(id -u)" -ne 0 ]; then
    echo "ok: cap (skipped the full disk: needs root for a tmpfs)"
    exit 0
fi
SMALL=$DIR/small
mkdir -p "$SMALL"
mount -t tmpfs -o size=2m,mode=0700 tmpfs "$SMALL" || {
    echo "ok: cap (skipped the full disk: cannot mount a tmpfs here)"
    exit 0
}
cr_start_agent n2 "$SMALL/state" "$DIR/agent-2.log" --gpus "sim:1xL4" --log-max-bytes 64M
up2() { "$CORRAL" nodes | grep -q '^n2 *up'; }
wait_for 60 up2 || fail "agent n2 did not register"
id3=$(submit -n filler --gpus 1 --gpu-type L4 -- python3 -c '
import sys
line = "y" * 1023 + "\n"
for _ in range(4096):
    try:
        sys.stdout.write(line)
    except OSError:
        pass
')
[ -n "$id3" ] || fail "submit"
wait_for 60 state_is "$id3" completed || fail "job $id3 did not complete: $("$CORRAL" show "$id3")"
wait_for 10 grep -q "job=$id3 output lost" "$DIR/agent-2.log" ||
    fail "the agent did not log the lost output"
wait_for 10 ev "$id3" "output lost on node n2: no space left on device" ||
    fail "no 'output lost' event: $("$CORRAL" show "$id3")"
# The next job on the full disk: its output is lost too, and it is said.
id4=$(submit -n next --gpus 1 --gpu-type L4 -- sh -c 'yes next | head -c 200000')
wait_for 60 state_is "$id4" "completed\|failed" || fail "job $id4 did not end: $("$CORRAL" show "$id4")"
wait_for 10 ev "$id4" "output lost on node n2" || fail "no 'output lost' event for the next job: $("$CORRAL" show "$id4")"
echo "ok: logs capped at 65536 bytes with an event; a full disk said in the agent's log and events"
