#!/usr/bin/env bash
# data_cold_start.sh [MB] - cold versus warm start of a job that names a
# dataset (docs/data.md): a real controller and agent on loopback, the
# object (MB megabytes of random bytes, default 1024) served by python3 -m
# http.server. Three jobs in turn, each with --data of it, each printing
# the wall time its process started; from submit to that start:
#   cold:  the first job (the agent fetches and hashes the object),
#   warm:  the second (its cache holds it: a stat, --data-verify's default),
#   check: the third, on an agent restarted with --data-verify 0 (it
#          hashes the object again at every use).
# Prints the three times in ms and cold/warm. Uses CORRAL_BIN or
# build/corral; writes MB of data under TMPDIR (default /tmp).
set -euo pipefail
MB=${1:-1024}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export CORRAL_BIN=${CORRAL_BIN:-$ROOT/build/corral}
. "$ROOT/tests/integration/lib.sh"
cr_setup bench-data
mkdir -p "$DIR/www"
head -c $((MB * 1000000)) /dev/urandom >"$DIR/www/w.bin"
(cd "$DIR/www" && exec python3 -m http.server 0 --bind 127.0.0.1) >"$DIR/http.log" 2>&1 &
PIDS+=($!)
wait_for 20 grep -q 'port [0-9]' "$DIR/http.log" || fail "http.server did not start"
port=$(grep -o 'port [0-9]*' "$DIR/http.log" | head -1 | grep -o '[0-9]*')
cr_start_controller "$DIR/ctl" --allow-legacy-join
agent() { # agent FLAGS...: (re)start n1
    cr_start_agent n1 "$DIR/n1" "$DIR/agent.log" --gpus "sim:1xA100 80GB SXM" \
        --data-cache-max $((MB * 3))M "$@"
    APID=${PIDS[-1]}
    wait_for 60 sh -c "'$CORRAL' nodes | grep -q '^n1 *up'" || fail "agent n1 did not register"
}
agent
"$CORRAL" data add w "http://127.0.0.1:$port/w.bin" --sha256 "$(sha256sum "$DIR/www/w.bin" | cut -c1-64)" \
    --size $((MB * 1000000)) >/dev/null
run() { # run: ms from submit to the job's start
    local t0 id
    t0=$(date +%s%N)
    id=$("$CORRAL" submit --gpus 1 --data w -- sh -c "date +%s%N > $DIR/started" | grep -o '[0-9][0-9]*' | head -1)
    rm -f "$DIR/started"
    wait_for 600 sh -c "'$CORRAL' show $id | grep -q 'State: *completed'" || fail "job $id did not complete"
    echo $((($(cat "$DIR/started") - t0) / 1000000))
}
cold=$(run)
warm=$(run)
cr_stop_pids TERM "$APID"
wait_for 30 sh -c "'$CORRAL' nodes | grep -q '^n1 *lost'" || true
agent --data-verify 0
check=$(run)
echo "object ${MB} MB over http://127.0.0.1 (python3 -m http.server)"
echo "cold start (fetch + sha256):         ${cold} ms"
echo "warm start (cache, stat):            ${warm} ms"
echo "warm start, --data-verify 0 (hash):  ${check} ms"
awk -v c="$cold" -v w="$warm" 'BEGIN { printf "cold/warm: %.1fx\n", c / (w > 0 ? w : 1) }'
