#!/bin/bash
# bench/controller/submit_instr.sh [N] CORRAL [CORRAL...]
#
# Instructions the controller executes per durable submit, counted by
# valgrind's callgrind (instructions, not seconds: the same binary and input
# give the same count whatever else the machine is doing, so two builds
# compare on a loaded machine where a timing would not). For each corral
# binary: a controller (SQLite, synchronous=FULL, no nodes) under
# callgrind; once it listens, its counters are zeroed, N jobs are submitted
# one POST each over one keep-alive connection (python3's http.client),
# the counters are dumped; the figure is that window's instructions / N,
# all threads (HTTP workers, the store's writer, the scheduler's cycles
# over the growing queue). N defaults to 1000. INSTR_KEEP=DIR keeps each
# run's dump there (callgrind_annotate DIR/K.cg: where they went).
# INSTR_ARRAY=1: the N jobs as one array POST ("array": N) instead, the
# same window (zeroed once it listens, dumped once the 201 is back), so the
# two figures compare: instructions per task of an array against per submit.
#
#   bench/controller/submit_instr.sh 1000 /tmp/corral-ab/SHA/build/corral build/corral
set -euo pipefail
N=1000
case ${1:-} in '' | *[!0-9]*) ;; *)
    N=$1
    shift
    ;;
esac
[ $# -gt 0 ] || {
    echo "usage: $0 [N] CORRAL [CORRAL...]" >&2
    exit 2
}
for t in valgrind callgrind_control python3; do
    command -v $t >/dev/null || {
        echo "submit_instr: $t not installed" >&2
        exit 2
    }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/corral-instr-XXXXXX")
PID=
cleanup() {
    [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
ARRAY=${INSTR_ARRAY:-0}
if [ "$ARRAY" = 1 ]; then
    echo "# instructions per task of one array POST (callgrind; array of $N)"
else
    echo "# instructions per durable submit (callgrind; $N submits, one keep-alive connection)"
fi
for bin in "$@"; do
    [ -x "$bin" ] || {
        echo "submit_instr: $bin is not an executable" >&2
        exit 2
    }
    d=$T/run
    rm -rf "$d"
    mkdir -p "$d/ctl"
    printf '{"checkpoint_root": "%s/ckpt"}\n' "$d" >"$d/ctl.json"
    valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p" --collect-atstart=yes \
        "$bin" controller --listen 127.0.0.1:0 --state-dir "$d/ctl" --config "$d/ctl.json" \
        >"$d/log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        [ -s "$d/ctl/listen.addr" ] && [ -s "$d/ctl/admin.token" ] && break
        sleep 0.1
    done
    [ -s "$d/ctl/listen.addr" ] || {
        echo "submit_instr: $bin: the controller did not start: $(tail -3 "$d/log")" >&2
        exit 1
    }
    sleep 1 # past the first scheduler cycle and the start-up writes
    callgrind_control -z "$PID" >/dev/null
    python3 - "$(cat "$d/ctl/listen.addr")" "$(cat "$d/ctl/admin.token")" "$N" "$ARRAY" <<'EOF'
import http.client, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
h = {"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"}
body = '{"name":"instr","command":["true"],"gpus":1}'
n = int(sys.argv[3])
if sys.argv[4] == "1":
    body = '{"name":"instr","command":["true"],"gpus":1,"array":%d}' % n
    n = 1
for i in range(n):
    c.request("POST", "/v1/jobs", body, h)
    r = c.getresponse()
    r.read()
    if r.status != 201:
        sys.exit("submit %d: HTTP %d" % (i, r.status))
EOF
    callgrind_control -d "$PID" >/dev/null
    kill -TERM "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
    k=$((${k:-0} + 1))
    [ -z "${INSTR_KEEP:-}" ] || { mkdir -p "$INSTR_KEEP" && cat "$d"/cg.*.1* >"$INSTR_KEEP/$k.cg"; }
    # the dump (cg.PID.1: the submit window), every thread's part
    ir=$(cat "$d"/cg.*.1* 2>/dev/null | awk '/^summary:/ { s += $2 } END { print s + 0 }')
    printf "%-60s %12.0f instructions/%s\n" "$bin" "$(awk -v a="$ir" -v n="$N" 'BEGIN { print a / n }')" "$([ "$ARRAY" = 1 ] && echo task || echo submit)"
done
