#!/usr/bin/env bash
# test_hosts.sh - the four-server walk-through of docs/install.md on one
# machine: a controller and three agents, each in its own network
# namespace with its own address (a bridge joins them), and the gateway
# on the controller host: every role started
# from the installed tree (meson install --destdir; or, with
# CORRAL_HOSTS_INSTALLED=1, as test_deb.sh runs it, /usr/bin/corral and
# /etc/corral of the installed .deb) with config files written from the
# installed examples and checked with `corral config check`, the join
# token carried to the agents as a file, and TLS everywhere as
# docs/security.md says: a private CA made with openssl, a certificate per
# host naming its address, the controller, agents (which serve HTTPS too),
# gateway and CLI verifying against the CA. Then:
#  - a gang job across the three hosts (ranks, MASTER_ADDR a host's own);
#  - node labels; `nodes delete` refused while a job runs there, done once
#    the node is retired (agent stopped); the node rejoins and runs work;
#  - `corral admin backup` while the controller serves, restore into a new
#    state directory, the controller started from it: the agents carry
#    on with their node tokens, old jobs are there, a new gang job runs.
#  - TLS: plain HTTP is not served on the controller's port, a client
#    without the CA is refused, `corral logs` reaches an agent over HTTPS.
# Needs root, iproute2 and openssl; skips (77) otherwise. Polls with
# deadlines.
set -euo pipefail

INSTALLED=${CORRAL_HOSTS_INSTALLED:-}
[ -n "$INSTALLED" ] || BUILD=${CORRAL_BUILD:?CORRAL_BUILD not set}
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v openssl >/dev/null; then
    echo "skip: needs root, iproute2 and openssl"
    exit 77
fi
TAG=ch$$
NET=10.$((100 + $$ % 100)).$((($$ / 100) % 200 + 1))
DIR=$(mktemp -d /tmp/corral-hosts-XXXXXX)
HOSTS="ctl a1 a2 a3"
declare -A PID IP
GWPID=
IP[ctl]=$NET.2
IP[a1]=$NET.11
IP[a2]=$NET.12
IP[a3]=$NET.13

cleanup() {
    [ -n "$GWPID" ] && kill -TERM "$GWPID" 2>/dev/null && wait "$GWPID" 2>/dev/null
    for h in $HOSTS; do
        [ -n "${PID[$h]:-}" ] && kill -TERM "${PID[$h]}" 2>/dev/null || true
    done
    for h in $HOSTS; do
        [ -n "${PID[$h]:-}" ] && wait "${PID[$h]}" 2>/dev/null || true
        ip netns pids "$TAG-$h" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$TAG-$h" 2>/dev/null || true
    done
    ip link del "$TAG-br" 2>/dev/null || true
    [ -n "${CORRAL_KEEP:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT
fail() { # to stderr: it may run inside $(...)
    {
        echo "FAIL: $*"
        for f in "$DIR"/*.log; do
            echo "--- $f"
            tail -15 "$f"
        done
    } >&2
    exit 1
}
wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.1
    done
}
# edit FILE KEY=JSON... : set members of a JSON config file
edit() {
    python3 - "$@" <<'PY'
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    doc[k] = json.loads(v)
json.dump(doc, open(path, "w"), indent=2)
PY
}

# The installed tree.
if [ -n "$INSTALLED" ]; then
    CORRAL=/usr/bin/corral
    EX=/etc/corral
else
    meson install -C "$BUILD" --no-rebuild --quiet --destdir "$DIR/stage" >"$DIR/install.log" 2>&1 ||
        fail "meson install"
    PREFIX=$(meson introspect "$BUILD" --buildoptions |
        python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
    ROOT=$DIR/stage$PREFIX
    CORRAL=$ROOT/bin/corral
    EX=$ROOT/share/corral/examples
fi
[ -x "$CORRAL" ] && [ -f "$EX/controller.json" ] || fail "no installed binary or examples"

# The private CA and one certificate per host (docs/security.md, "TLS").
PKI=$DIR/pki
mkdir -p "$PKI"
(
    cd "$PKI"
    openssl req -x509 -newkey rsa:3072 -nodes -keyout ca.key -out ca.pem -days 825 \
        -subj "/CN=Corral CA"
    for h in $HOSTS; do
        openssl req -newkey rsa:3072 -nodes -keyout "$h.key" -out "$h.csr" -subj "/CN=$h"
        printf 'subjectAltName=DNS:%s,IP:%s\nextendedKeyUsage=serverAuth\n' "$h" "${IP[$h]}" >"$h.ext"
        openssl x509 -req -in "$h.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
            -extfile "$h.ext" -out "$h.pem"
    done
    chmod 600 ./*.key
) >"$DIR/pki.log" 2>&1 || fail "openssl: $(tail -5 "$DIR/pki.log")"
CA=$PKI/ca.pem

if ! ip link add "$TAG-br" type bridge 2>/dev/null; then
    echo "skip: cannot create a bridge here"
    exit 77
fi
ip addr add "$NET.1/24" dev "$TAG-br"
ip link set "$TAG-br" up
for h in $HOSTS; do
    ip netns add "$TAG-$h"
    ip link add "$TAG-v$h" type veth peer name "$TAG-p$h"
    ip link set "$TAG-p$h" netns "$TAG-$h"
    ip link set "$TAG-v$h" master "$TAG-br" up
    ip -n "$TAG-$h" addr add "${IP[$h]}/24" dev "$TAG-p$h"
    ip -n "$TAG-$h" link set "$TAG-p$h" up
    ip -n "$TAG-$h" link set lo up
    mkdir -p "$DIR/$h/etc/corral" "$DIR/$h/var/lib"
done

# Controller host: the example config, edited, checked, started.
CCONF=$DIR/ctl/etc/corral/controller.json
cp "$EX/controller.json" "$CCONF"
edit "$CCONF" "listen=\"${IP[ctl]}:8620\"" "state_dir=\"$DIR/ctl/var/lib/corral\"" \
    'heartbeat_s=1' "checkpoint_root=\"$DIR/ckpt\"" "tls_cert=\"$PKI/ctl.pem\"" \
    "tls_key=\"$PKI/ctl.key\"" "agent_ca_file=\"$CA\""
"$CORRAL" config check controller "$CCONF" >/dev/null || fail "controller config check"
start_ctl() {
    ip netns exec "$TAG-ctl" "$CORRAL" controller --config "$CCONF" >>"$DIR/controller.log" 2>&1 &
    PID[ctl]=$!
}
start_ctl
SERVER=https://${IP[ctl]}:8620
wait_for 30 curl -sf --cacert "$CA" "$SERVER/v1/health" || fail "controller did not start"
# TLS only: no plain HTTP on the port, and no trust without the CA.
curl -sf --max-time 5 "http://${IP[ctl]}:8620/v1/health" >/dev/null 2>&1 &&
    fail "the TLS controller answered plain HTTP"
curl -sf --max-time 5 "$SERVER/v1/health" >/dev/null 2>&1 &&
    fail "a client without the CA trusted the controller"
STATE=$DIR/ctl/var/lib/corral
wait_for 20 test -s "$STATE/admin.token" || fail "no admin token"
[ "$(stat -c %a "$STATE")" = 700 ] || fail "state dir mode $(stat -c %a "$STATE")"

# The admin's client config (JSON), as on a workstation.
printf '{"server": "%s", "token_file": "%s", "ca_file": "%s"}\n' "$SERVER" "$STATE/admin.token" \
    "$CA" >"$DIR/cli.json"
"$CORRAL" config check cli "$DIR/cli.json" >/dev/null || fail "cli config check"
export CORRAL_CONFIG=$DIR/cli.json
unset CORRAL_SERVER CORRAL_TOKEN

# Agent hosts: a bootstrap token each (bound to the node), carried over as a
# file, the example config edited.
start_agent() { # start_agent HOST
    local h=$1
    ip netns exec "$TAG-$h" "$CORRAL" agent --config "$DIR/$h/etc/corral/agent.json" \
        >>"$DIR/agent-$h.log" 2>&1 &
    PID[$h]=$!
}
for h in a1 a2 a3; do
    (umask 077 && "$CORRAL" admin bootstrap-token create --node "$h" >"$DIR/$h/etc/corral/join.token") ||
        fail "bootstrap token for $h"
    A=$DIR/$h/etc/corral/agent.json
    cp "$EX/agent.json" "$A"
    edit "$A" "server=\"$SERVER\"" "join_token_file=\"$DIR/$h/etc/corral/join.token\"" \
        "node=\"$h\"" 'gpus="sim:2xA100 80GB SXM"' "listen=\"${IP[$h]}:8621\"" \
        "state_dir=\"$DIR/$h/var/lib/corral-agent\"" 'kill_on_exit=true' \
        "ca_file=\"$CA\"" "tls_cert=\"$PKI/$h.pem\"" "tls_key=\"$PKI/$h.key\""
    "$CORRAL" config check agent "$A" >/dev/null || fail "agent config check $h"
    start_agent "$h"
done
nodes_up() { [ "$("$CORRAL" nodes | grep -c ' up ')" -eq "$1" ]; }
wait_for 60 nodes_up 3 || fail "three agents did not register: $("$CORRAL" nodes)"

# The gateway on the controller host, with a token of its own.
gwtok=$("$CORRAL" tokens create --role admin --name gateway | grep -o 'crl_[A-Za-z0-9_-]*' | head -1 || true)
[ -n "$gwtok" ] || fail "no token for the gateway"
G=$DIR/ctl/etc/corral/gateway.json
cp "$EX/gateway.json" "$G"
edit "$G" "listen=\"${IP[ctl]}:8630\"" "controller=\"$SERVER\"" "token=\"$gwtok\"" \
    "ca_file=\"$CA\""
"$CORRAL" config check gateway "$G" >/dev/null || fail "gateway config check"
ip netns exec "$TAG-ctl" "$CORRAL" gateway --config "$G" >"$DIR/gateway.log" 2>&1 &
GWPID=$!
wait_for 30 curl -sf "http://${IP[ctl]}:8630/healthz" || fail "gateway did not start"

job_state() { "$CORRAL" show "$1" | sed -n 's/^ *State: *\([a-z]*\).*/\1/p'; }
is_state() { [ "$(job_state "$1")" = "$2" ]; }
submit() { "$CORRAL" submit "$@" | grep -o '[0-9][0-9]*' | head -1; }

# A gang job across the three hosts.
gang() { # gang TAG: run, wait, check ranks and master
    local t=$1 id
    local s='cd '"$DIR"' && env > '"$t"'-$CORRAL_NODE.env; '
    s+='while [ $(ls '"$t"'-*.env | wc -l) -lt 3 ]; do sleep 0.05; done'
    id=$(submit -n "$t" --nodes 3 --gpus 6 --gpu-type "A100 80GB SXM" -- sh -c "$s")
    [ -n "$id" ] || fail "submit $t"
    wait_for 60 is_state "$id" completed || fail "gang $t ($id): $("$CORRAL" show "$id")"
    local ranks="" m
    m=$(grep -h '^MASTER_ADDR=' "$DIR/$t"-*.env | sort -u)
    [ "$(echo "$m" | wc -l)" = 1 ] || fail "$t: MASTER_ADDR differs: $m"
    case "${m#MASTER_ADDR=}" in
    "${IP[a1]}" | "${IP[a2]}" | "${IP[a3]}") ;;
    *) fail "$t: $m is no agent host's address" ;;
    esac
    ranks=$(grep -h '^NODE_RANK=' "$DIR/$t"-*.env | sort | tr '\n' ' ')
    [ "$ranks" = "NODE_RANK=0 NODE_RANK=1 NODE_RANK=2 " ] || fail "$t: ranks $ranks"
    echo "$id"
}
g1=$(gang g1)
# A job's output through `corral logs` (the controller reads it from the
# agent over HTTPS, verifying the agent's certificate against the CA).
lj=$(submit -n logs --gpus 1 -- sh -c 'echo tls-log-line-$CORRAL_NODE')
[ -n "$lj" ] || fail "submit logs job"
wait_for 60 is_state "$lj" completed || fail "logs job ($lj): $("$CORRAL" show "$lj")"
out=$("$CORRAL" logs "$lj" 2>&1) || fail "corral logs $lj: $out"
echo "$out" | grep -q '^tls-log-line-a[123]$' || fail "corral logs $lj: $out"

# Labels.
"$CORRAL" nodes label a1 zone=west gpu.vendor=nvidia >/dev/null || fail "label"
"$CORRAL" nodes label a1 gpu.vendor= >/dev/null || fail "label removal"
"$CORRAL" nodes a1 --json | python3 -c '
import json, sys
l = json.load(sys.stdin)["labels"]
assert l == {"zone": "west"}, l' || fail "labels: $("$CORRAL" nodes a1 --json)"
out=$("$CORRAL" nodes label a1 'bad key=x' 2>&1) && fail "a bad label key was accepted"
echo "$out" | grep -q "label key" || fail "bad label key: $out"

# Only an admin changes nodes.
utok=$("$CORRAL" tokens create --role user --tenant default --name u | grep -o 'crl_[A-Za-z0-9_-]*' | head -1 || true)
[ -n "$utok" ] || fail "no user token"
out=$("$CORRAL" nodes delete a2 --token "$utok" 2>&1) && fail "a user deleted a node"
echo "$out" | grep -q "only an admin" || fail "user delete: $out"
out=$("$CORRAL" nodes label a2 x=y --token "$utok" 2>&1) && fail "a user labelled a node"
out=$("$CORRAL" nodes delete nosuchnode 2>&1) && fail "deleting a missing node succeeded"
echo "$out" | grep -q "not found" || fail "missing node: $out"

# Retire a3: refused while a job runs there, done once its agent is gone.
long=$(submit -n long --nodes 3 --gpus 6 --gpu-type "A100 80GB SXM" -- sleep 300)
wait_for 60 is_state "$long" running || fail "long job did not start"
out=$("$CORRAL" nodes delete a3 2>&1) && fail "delete with a running job succeeded"
echo "$out" | grep -q "job(s) placed on it" || fail "delete refusal: $out"
"$CORRAL" cancel "$long" >/dev/null
wait_for 120 is_state "$long" cancelled || fail "long job not cancelled"
kill -TERM "${PID[a3]}"
wait "${PID[a3]}" || true
PID[a3]=
"$CORRAL" nodes delete a3 >/dev/null || fail "delete of a retired node"
"$CORRAL" nodes | grep -q '^ *a3 ' && fail "a3 still listed after delete"
nodes_up 2 || fail "after delete: $("$CORRAL" nodes)"
# Rejoin: the deleted node's credential is gone; a new bootstrap token.
(umask 077 && "$CORRAL" admin bootstrap-token create --node a3 >"$DIR/a3/etc/corral/join.token") ||
    fail "bootstrap token for a3's rejoin"
start_agent a3
wait_for 60 nodes_up 3 || fail "a3 did not rejoin: $("$CORRAL" nodes)"
g2=$(gang g2)

# Backup while serving, restore into a new state directory.
"$CORRAL" admin backup "$DIR/corral-backup.db" --state-dir "$STATE" >/dev/null ||
    fail "admin backup"
[ "$(stat -c %a "$DIR/corral-backup.db")" = 600 ] || fail "backup mode"
kill -TERM "${PID[ctl]}"
wait "${PID[ctl]}" || fail "controller exit"
NEW=$DIR/ctl/var/lib/corral-restored
"$CORRAL" admin restore "$DIR/corral-backup.db" --state-dir "$NEW" >/dev/null ||
    fail "admin restore"
out=$("$CORRAL" admin restore "$DIR/corral-backup.db" --state-dir "$NEW" 2>&1) &&
    fail "restore over a database succeeded"
install -m 0600 "$STATE/admin.token" "$NEW/"
edit "$CCONF" "state_dir=\"$NEW\""
"$CORRAL" config check controller "$CCONF" >/dev/null || fail "config check after edit"
start_ctl
wait_for 30 curl -sf --cacert "$CA" "$SERVER/v1/health" || fail "restored controller did not start"
wait_for 60 nodes_up 3 || fail "agents did not come back: $("$CORRAL" nodes)"
is_state "$g1" completed || fail "job $g1 lost in the restore"
g3=$(gang g3)
[ "$g3" -gt "$g2" ] || fail "job ids restarted: $g3 after $g2"
grep -q "no such\|unknown node" "$DIR"/agent-a1.log && fail "agent a1 lost its node token"
echo "ok: 1 controller + 3 agents in namespaces from the installed tree, TLS with a private CA; gang jobs $g1 $g2 $g3;" \
    "labels; delete refused then done; rejoin; backup/restore carried on"
