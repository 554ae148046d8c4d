#!/usr/bin/env bash
# test_ratelimit_v6.sh - the per-address rate limit of requests without a
# valid token groups IPv6 clients by their /64 (docs/operations.md,
# "Request rate limits"): one host holds a whole /64, so counting each of
# its addresses apart would let it multiply its limit at will. The
# controller runs in a network namespace of its own that holds three IPv6
# addresses (fd00:a::1 and fd00:a::2 share a /64, fd00:b::1 does not), on
# [::]:PORT, with a rate so slow (0.001 a second) that nothing refills
# during the test: every assertion is a count. Bad tokens from fd00:a::1
# spend the burst (5) and get 429; the first one from fd00:a::2 is 429 at
# once (same /64); fd00:b::1 still gets 401. Needs root and iproute2;
# skips (77) otherwise.
set -euo pipefail

. "$(dirname "$0")/../integration/lib.sh"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
    echo "skip: needs root and iproute2"
    exit 77
fi
NS=crv6$$
cr_setup ratelimit-v6
cleanup_extra() {
    ip netns pids "$NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
}
if ! ip netns add "$NS" 2>/dev/null; then
    echo "skip: cannot create a network namespace here"
    exit 77
fi
ip -n "$NS" link set lo up
if ! ip netns exec "$NS" sysctl -qw net.ipv6.conf.lo.disable_ipv6=0 2>/dev/null ||
    ! ip -n "$NS" -6 addr add fd00:a::1/64 dev lo nodad 2>/dev/null; then
    echo "skip: no IPv6 in a network namespace here"
    exit 77
fi
ip -n "$NS" -6 addr add fd00:a::2/64 dev lo nodad
ip -n "$NS" -6 addr add fd00:b::1/64 dev lo nodad

cat >"$DIR/cfg.json" <<JSON
{"checkpoint_root": "$DIR/ckpt", "rate_limit_rps": 0.001, "rate_limit_burst": 3,
 "rate_limit_anon_rps": 0.001, "rate_limit_anon_burst": 5}
JSON
PORT=$((20000 + $$ % 20000))
ip netns exec "$NS" "$CORRAL" controller --config "$DIR/cfg.json" --listen "[::]:$PORT" \
    --state-dir "$DIR/state" >"$DIR/controller.log" 2>&1 &
PIDS+=($!)
wait_for 30 test -s "$DIR/state/admin.token" || fail "the controller did not start"
wait_for 30 test -s "$DIR/state/listen.addr" || fail "the controller wrote no address"
# its address file is a URL: an IPv6 address in brackets
[ "$(cat "$DIR/state/listen.addr")" = "http://[::]:$PORT" ] ||
    fail "listen.addr: $(cat "$DIR/state/listen.addr"), not http://[::]:$PORT"
ADMIN=$(cat "$DIR/state/admin.token")
URL="http://[fd00:a::1]:$PORT"
# bad FROM: the status of one request with a bad token from source address FROM
bad() {
    ip netns exec "$NS" curl -s -m 10 -o /dev/null -w '%{http_code}' --interface "$1" \
        -H "Authorization: Bearer crl_not_a_token" "$URL/v1/jobs"
}
# (the admin's requests are not limited: this one spends nothing)
up() {
    [ "$(ip netns exec "$NS" curl -s -m 5 -o /dev/null -w '%{http_code}' \
        -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs")" = 200 ]
}
wait_for 30 up || fail "the controller does not answer on [fd00:a::1]:$PORT"

codes=""
for _ in 1 2 3 4 5 6; do
    codes="$codes$(bad fd00:a::1) "
done
[ "$codes" = "401 401 401 401 401 429 " ] || fail "fd00:a::1, burst 5: got $codes"
got=$(bad fd00:a::2)
[ "$got" = 429 ] || fail "fd00:a::2 (the same /64 as fd00:a::1) got $got, not 429"
got=$(bad fd00:b::1)
[ "$got" = 401 ] || fail "fd00:b::1 (another /64) got $got, not 401"
# and the admin, from the limited /64, is not limited
got=$(ip netns exec "$NS" curl -s -m 10 -o /dev/null -w '%{http_code}' --interface fd00:a::2 \
    -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs")
[ "$got" = 200 ] || fail "the admin from fd00:a::2 got $got, not 200"
echo "ok: IPv6 clients limited by their /64 (fd00:a::1 and ::2 one bucket, fd00:b::1 another)"
