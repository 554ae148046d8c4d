#!/bin/sh
# bench_gateway: wrk through 'corral gateway' and through nginx (1 worker,
# least_conn, upstream keep-alive: ../shared/peers/nginx/start.sh beside the
# repository, or the same config written here) to the same two backends, same machine, same
# run, and straight to a backend. Prints req/s, p50/p99, the proxy's CPU
# seconds (from /proc) and requests per CPU-second (throughput per core),
# at 32 connections (throughput) and 1 connection (added latency).
# With the controller built, also "gw+keys": a second gateway with API keys
# required (from a real controller) and a key with limits on (requests/s,
# concurrency, tokens/min, a token budget, all far above what the run
# reaches, so every request is checked against each and none refused).
#   env: DURATION=5 (seconds per wrk run), CONNS=32
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
CORRAL=${CORRAL_BIN:-$HERE/../../corral}
HELPER=${GW_HELPER:-$HERE/../../tests/gateway/gw_helper}
DURATION=${DURATION:-5}
CONNS=${CONNS:-32}
for tool in wrk nginx; do
    command -v $tool >/dev/null || { echo "bench_gateway: $tool not installed (make bench-deps)"; exit 0; }
done
T=$(mktemp -d)
PIDS=""
cleanup() {
    # nginx (the peer's start.sh leaves it running, not our child): TERM,
    # then wait until it has gone, at most 10 s, so the next bench starts
    # on a quiet machine and a free port
    if [ -s "$T/nginx/nginx.pid" ]; then
        np=$(cat "$T/nginx/nginx.pid")
        kill "$np" 2>/dev/null || true
        i=0
        while kill -0 "$np" 2>/dev/null && [ $i -lt 200 ]; do i=$((i+1)); sleep 0.05; done
        kill -9 "$np" 2>/dev/null || true
    fi
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
wait_file() { i=0; while ! grep -q "$2" "$1" 2>/dev/null; do i=$((i+1)); [ $i -gt 200 ] && { echo "timeout: $1"; exit 1; }; sleep 0.05; done; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + $$ % 20000)); }

for n in a b; do
    "$HELPER" serve 0 $n >"$T/$n.out" 2>/dev/null &
    PIDS="$PIDS $!"
    wait_file "$T/$n.out" listening
done
PA=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$T/a.out")
PB=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$T/b.out")

"$CORRAL" gateway --listen 127.0.0.1:0 --service "bench=127.0.0.1:$PA,127.0.0.1:$PB" \
    --max-inflight 100000 2>"$T/gw.log" &
GWPID=$!
PIDS="$PIDS $GWPID"
wait_file "$T/gw.log" "listening on"
GW=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$T/gw.log")

# The gateway with keys and limits on: a real controller publishes the key.
KGWPID=-
if ! "$CORRAL" controller --help 2>&1 | grep -q "not built yet"; then
    printf '{"checkpoint_root": "%s/ckpt"}\n' "$T" >"$T/ctl.json"
    "$CORRAL" controller --config "$T/ctl.json" --state-dir "$T/st" --listen 127.0.0.1:0 \
        >"$T/ctl.out" 2>"$T/ctl.log" &
    PIDS="$PIDS $!"
    wait_file "$T/ctl.log" "listening on http"
    CTL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$T/ctl.log" | head -1)
    i=0
    while [ ! -s "$T/st/admin.token" ]; do i=$((i+1)); [ $i -gt 200 ] && exit 1; sleep 0.05; done
    TOK=$(cat "$T/st/admin.token")
    curl -sf -H "Authorization: Bearer $TOK" -X POST "$CTL/v1/tenants" -d '{"name":"bench"}' >/dev/null
    KEY=$(CORRAL_SERVER=$CTL CORRAL_TOKEN=$TOK "$CORRAL" keys create --tenant bench --name wrk \
        --rps 1000000 --concurrency 10000 --tpm 1000000000 --token-budget 1000000000000 2>"$T/key.err") ||
        { echo "bench_gateway: keys create: $(cat "$T/key.err")"; exit 1; }
    "$CORRAL" gateway --listen 127.0.0.1:0 --controller "$CTL" --token "$TOK" --require-keys \
        --service "bench=127.0.0.1:$PA,127.0.0.1:$PB" --max-inflight 100000 2>"$T/kgw.log" &
    KGWPID=$!
    PIDS="$PIDS $KGWPID"
    wait_file "$T/kgw.log" "listening on"
    KGW=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$T/kgw.log")
    i=0
    while ! curl -sf -o /dev/null -H "Authorization: Bearer $KEY" "http://$KGW/bench/x"; do
        i=$((i+1)); [ $i -gt 200 ] && { echo "bench_gateway: the key never worked"; exit 1; }; sleep 0.05
    done
    curl -s -o /dev/null -w '%{http_code}' "http://$KGW/bench/x" | grep -q 401 ||
        { echo "bench_gateway: the keyed gateway served a request without a key"; exit 1; }
fi

NPORT=$(free_port)
mkdir -p "$T/nginx"
NGINX_PEER=$HERE/../../../shared/peers/nginx
if [ -x "$NGINX_PEER/start.sh" ]; then
    DIR="$T/nginx" WORKERS=1 "$NGINX_PEER/start.sh" "$NPORT" "127.0.0.1:$PA" "127.0.0.1:$PB" >/dev/null
else
    cat >"$T/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    upstream backends { least_conn; server 127.0.0.1:$PA; server 127.0.0.1:$PB; keepalive 64; }
    server {
        listen 127.0.0.1:$NPORT;
        location / { proxy_pass http://backends; proxy_http_version 1.1;
                     proxy_set_header Connection ""; proxy_buffering off; }
    }
}
CONF
    # in the foreground of a background job, as the peer's start.sh does: a
    # daemonised nginx lands in a CPU autogroup of its own and the
    # side-by-side CPU shares are no longer fair
    nginx -c "$T/nginx/nginx.conf" -g 'daemon off;' </dev/null >/dev/null 2>&1 &
fi
i=0
while [ ! -s "$T/nginx/nginx.pid" ]; do i=$((i+1)); [ $i -gt 100 ] && exit 1; sleep 0.05; done
NMASTER=$(cat "$T/nginx/nginx.pid")
sleep 0.2
NWORKER=$(pgrep -P "$NMASTER" | head -1)

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
to_us() { # "123.45us" / "1.2ms" / "1.00s" -> microseconds
    echo "$1" | awk '{ v = $1 + 0; if ($1 ~ /us$/) print v; else if ($1 ~ /ms$/) print v * 1000; else if ($1 ~ /s$/) print v * 1e6; else print v }'
}
HZ=$(getconf CLK_TCK)

# run NAME URL CONNS PID [WRK ARGS...]
run() {
    name=$1 url=$2 c=$3 pid=$4
    shift 4
    before=0
    [ "$pid" != - ] && before=$(cpu_ticks "$pid")
    wrk -t1 -c"$c" -d"${DURATION}s" --latency "$@" "$url" >"$T/wrk.txt" 2>&1
    after=0
    [ "$pid" != - ] && after=$(cpu_ticks "$pid")
    rps=$(awk '/^Requests\/sec/ { print $2 }' "$T/wrk.txt")
    total=$(awk '/requests in/ { print $1 }' "$T/wrk.txt")
    p50=$(to_us "$(awk '$1 == "50%" { print $2 }' "$T/wrk.txt")")
    p99=$(to_us "$(awk '$1 == "99%" { print $2 }' "$T/wrk.txt")")
    errs=$(awk '/Non-2xx|Socket errors/ { print }' "$T/wrk.txt" | tr '\n' ' ')
    cpu=$(awk -v a="$after" -v b="$before" -v hz="$HZ" 'BEGIN { printf "%.2f", (a - b) / hz }')
    per=$(awk -v t="$total" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", t / c; else print "-" }')
    printf "%-8s %5s %10.0f %9.0f %9.0f %7s %12s %s\n" "$name" "$c" "$rps" "$p50" "$p99" "$cpu" "$per" "$errs"
    echo "$name $c $rps $p50 $p99 $per" >>"$T/results"
}

echo "bench_gateway: wrk -t1 -d${DURATION}s --latency; 2 backends (gw_helper serve); nginx 1 worker least_conn keepalive 64"
printf "%-8s %5s %10s %9s %9s %7s %12s\n" target conns req/s p50_us p99_us cpu_s req/cpu_s
run direct "http://127.0.0.1:$PA/x" "$CONNS" -
run gateway "http://$GW/bench/x" "$CONNS" "$GWPID"
[ "$KGWPID" != - ] && run gw+keys "http://$KGW/bench/x" "$CONNS" "$KGWPID" -H "Authorization: Bearer $KEY"
run nginx "http://127.0.0.1:$NPORT/x" "$CONNS" "$NWORKER"
run direct "http://127.0.0.1:$PA/x" 1 -
run gateway "http://$GW/bench/x" 1 "$GWPID"
[ "$KGWPID" != - ] && run gw+keys "http://$KGW/bench/x" 1 "$KGWPID" -H "Authorization: Bearer $KEY"
run nginx "http://127.0.0.1:$NPORT/x" 1 "$NWORKER"
awk -v C="$CONNS" '
    { rps[$1 "," $2] = $3; p50[$1 "," $2] = $4; p99[$1 "," $2] = $5; per[$1 "," $2] = $6 }
    END {
        printf "throughput gateway/nginx at %d conns: %.2fx (per CPU-second: %.2fx)\n", C,
            rps["gateway," C] / rps["nginx," C], per["gateway," C] / per["nginx," C]
        if (("gw+keys," C) in rps)
            printf "with keys and limits on: gw+keys/nginx at %d conns: %.2fx (per CPU-second: %.2fx; vs the gateway without keys: %.2fx)\n", C,
                rps["gw+keys," C] / rps["nginx," C], per["gw+keys," C] / per["nginx," C],
                per["gw+keys," C] / per["gateway," C]
        printf "added latency at 1 conn vs direct: gateway p50 +%.0f us p99 +%.0f us; nginx p50 +%.0f us p99 +%.0f us\n",
            p50["gateway,1"] - p50["direct,1"], p99["gateway,1"] - p99["direct,1"],
            p50["nginx,1"] - p50["direct,1"], p99["nginx,1"] - p99["direct,1"]
        printf "added latency at %d conns vs direct: gateway p50 +%.0f us p99 +%.0f us; nginx p50 +%.0f us p99 +%.0f us\n", C,
            p50["gateway," C] - p50["direct," C], p99["gateway," C] - p99["direct," C],
            p50["nginx," C] - p50["direct," C], p99["nginx," C] - p99["direct," C]
    }' "$T/results"
