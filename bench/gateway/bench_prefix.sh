#!/bin/sh
# bench_prefix: prefix-aware routing against least-outstanding p2c on a
# shared-prefix workload (many users, few long system prompts: issue 30),
# same replicas, same run. The replicas are gw_helper's prefix-cache
# stand-in (GW_PREFIX_CACHE blocks of 128 prompt bytes each, LRU; one
# prefill at a time at GW_PREFILL_US per uncached byte), started afresh for
# each policy so both begin cold. Prints the mean TTFT of each, their ratio,
# the stand-ins' cache hit rates and their most requests at once, and exits
# 1 when prefix-aware is above 0.6x p2c or a replica went over its limit.
# The default cache holds about 4 of the 8 system prompts (64 blocks of a
# ~2.1 KiB prompt's 16): p2c sends every replica all 8, prefix-aware about 2.
#   env: REPLICAS=4 PROMPTS=8 REQUESTS=400 CONC=8 CACHE_BLOCKS=64
#        PREFILL_US=10 MAX_INFLIGHT=8 RATIO_MAX=0.6
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
CORRAL=${CORRAL_BIN:-$HERE/../../corral}
HELPER=${GW_HELPER:-$HERE/../../tests/gateway/gw_helper}
REPLICAS=${REPLICAS:-4}
PROMPTS=${PROMPTS:-8}
REQUESTS=${REQUESTS:-400}
CONC=${CONC:-8}
CACHE_BLOCKS=${CACHE_BLOCKS:-64}
PREFILL_US=${PREFILL_US:-10}
MAX_INFLIGHT=${MAX_INFLIGHT:-8}
RATIO_MAX=${RATIO_MAX:-0.6}
T=$(mktemp -d)
PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
wait_file() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 400 ] && { echo "bench_prefix: timeout waiting for $1"; exit 1; }
        sleep 0.05
    done
}

# run POLICY: fresh replicas and a gateway; prints the ttft line, then
# "replica NAME max_in_flight hits/blocks" per replica
run() {
    eps="" RPIDS=""
    for r in $(seq 1 "$REPLICAS"); do
        out="$T/$1-r$r.out" # a file of its own: never the last run's line
        GW_PREFIX_CACHE=$CACHE_BLOCKS GW_PREFILL_US=$PREFILL_US \
            "$HELPER" serve 0 "r$r" >"$out" 2>/dev/null &
        RPIDS="$RPIDS $!"
        PIDS="$PIDS $!"
        wait_file "$out" listening
        port=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$out")
        eps="$eps${eps:+, }\"127.0.0.1:$port\""
        eval "PORT_r$r=$port"
    done
    printf '{"balance": "%s", "max_inflight": %s, "services": [{"name": "chat", "models": ["llama"], "endpoints": [%s]}]}\n' \
        "$1" "$MAX_INFLIGHT" "$eps" >"$T/gw.json"
    "$CORRAL" gateway --listen 127.0.0.1:0 --config "$T/gw.json" 2>"$T/gw-$1.log" &
    gwpid=$!
    PIDS="$PIDS $gwpid"
    wait_file "$T/gw-$1.log" "listening on"
    gw=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$T/gw-$1.log")
    "$HELPER" ttft "http://$gw/v1/chat/completions" "$REQUESTS" "$CONC" "$PROMPTS"
    for r in $(seq 1 "$REPLICAS"); do
        eval "port=\$PORT_r$r"
        curl -sf "http://127.0.0.1:$port/stats" |
            awk -v r="r$r" '{v[$1] = $2} END { printf "replica %s max_in_flight %d hits %d/%d\n", r, v["max_in_flight"], v["hit_blocks"], v["prompt_blocks"] }'
    done
    curl -sf "http://$gw/metrics" | grep '^corral_gateway_affinity_total' || true
    kill -9 $gwpid $RPIDS 2>/dev/null || true
}

echo "workload: $REQUESTS streamed chats, $CONC at once, $PROMPTS system prompts of 2 KiB, $REPLICAS replicas (cache $CACHE_BLOCKS blocks, ${PREFILL_US} us/byte prefill, max_inflight $MAX_INFLIGHT)"
run p2c >"$T/p2c.txt"
run prefix >"$T/prefix.txt"
for p in p2c prefix; do
    sed "s/^/$p: /" "$T/$p.txt"
done
mp=$(sed -n 's/.*ttft_mean_ms \([0-9.]*\).*/\1/p' "$T/p2c.txt")
mx=$(sed -n 's/.*ttft_mean_ms \([0-9.]*\).*/\1/p' "$T/prefix.txt")
over=$(cat "$T/p2c.txt" "$T/prefix.txt" | awk -v m="$MAX_INFLIGHT" '/^replica/ && $4 > m' | wc -l)
ratio=$(awk -v a="$mx" -v b="$mp" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 99) }')
echo "mean TTFT: p2c ${mp} ms, prefix-aware ${mx} ms: ${ratio}x (want <= ${RATIO_MAX}x); replicas over max_inflight: $over"
awk -v r="$ratio" -v m="$RATIO_MAX" 'BEGIN { exit !(r <= m) }' && [ "$over" -eq 0 ] || { echo "bench_prefix: FAIL"; exit 1; }
echo "bench_prefix: ok"
