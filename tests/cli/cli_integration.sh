#!/bin/sh
# cli_integration.sh - the real 'corral' client against the real controller on
# loopback: start 'corral controller' on a free port with a temp state dir,
# read the bootstrap admin token, then round trips of tenants, tokens, submit,
# jobs, show, cancel, nodes, usage, top; error display (the server's message,
# verbatim) and exit codes (0 ok, 1 server said no, 2 bad usage, 3 unreachable).
#
# Run by meson test with CORRAL_BIN set. Exits 77 (skipped) when the binary
# has no controller yet.
set -u

BIN=${CORRAL_BIN:?CORRAL_BIN not set}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-cli-it.XXXXXX")
CTL_PID=
AGENT_PID=
fails=0

cleanup() {
    for p in $AGENT_PID $CTL_PID; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    # stray jobs, the agent's cgroups (tests/integration/reap.sh)
    [ -z "${CORRAL_SRC:-}" ] || "$CORRAL_SRC/tests/integration/reap.sh" "$TMP"
    rm -rf "$TMP"
}
trap cleanup EXIT
# meson's timeout (SIGTERM) or ^C: through the EXIT trap.
trap 'exit 143' TERM
trap 'exit 130' INT

if "$BIN" controller --help 2>&1 | grep -q "not built yet"; then
    echo "SKIP: corral controller is not built yet"
    exit 77
fi

# The client must not read the user's own config or environment.
unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# run CODE ARGS...: run corral, expect exit CODE; output in $TMP/out, $TMP/err
run() {
    want=$1
    shift
    "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    if [ "$got" != "$want" ]; then
        fail "corral $* -> exit $got, want $want"
        sed 's/^/  out: /' "$TMP/out"
        sed 's/^/  err: /' "$TMP/err"
        return 1
    fi
    return 0
}

# has FILE TEXT: FILE contains TEXT (fixed string)
has() {
    grep -qF -- "$2" "$1" || {
        fail "$1 lacks '$2'"
        sed 's/^/  | /' "$1"
    }
}

# --- start the controller on an ephemeral port -----------------------------------
# Port 0: the kernel picks a free port; the controller writes its URL to
# <state-dir>/listen.addr once it listens.
STATE=$TMP/state
mkdir -p "$STATE"
# Checkpoints under $TMP too (the default root is /tmp/corral/ckpt).
printf '{"checkpoint_root": "%s/ckpt"}\n' "$TMP" >"$TMP/ctl.json"
"$BIN" controller --allow-legacy-join --config "$TMP/ctl.json" --listen 127.0.0.1:0 --state-dir "$STATE" \
    >"$TMP/ctl.log" 2>&1 &
CTL_PID=$!
started=
i=0
while [ $i -lt 300 ] && kill -0 "$CTL_PID" 2>/dev/null; do
    if [ -s "$STATE/listen.addr" ] && [ -s "$STATE/admin.token" ]; then
        SERVER=$(cat "$STATE/listen.addr")
        "$BIN" jobs --server "$SERVER" >/dev/null 2>&1
        if [ $? != 3 ]; then
            started=1
            break
        fi
    fi
    sleep 0.1
    i=$((i + 1))
done
if [ -z "$started" ]; then
    echo "FAIL: the controller did not start"
    cat "$TMP/ctl.log"
    exit 1
fi
ADMIN=$(cat "$STATE/admin.token")
export CORRAL_SERVER=$SERVER

# --- auth ---------------------------------------------------------------------------
run 1 jobs && has "$TMP/err" "corral jobs: "
run 1 jobs --token crl_not_a_token
CORRAL_TOKEN=$ADMIN run 0 jobs && has "$TMP/out" "NODES(REASON)"

# --- tenants and tokens (admin) ---------------------------------------------------
export CORRAL_TOKEN=$ADMIN
run 0 tenants create ml --weight 2 --quota "H100 SXM=16" && has "$TMP/out" "Created tenant ml"
run 0 tenants create nlp && has "$TMP/out" "Created tenant nlp"
run 0 tenants set nlp --weight 0.5 && has "$TMP/out" "Updated tenant nlp"
run 0 tenants && has "$TMP/out" "H100 SXM=16"
run 0 tenants --json && has "$TMP/out" '"name": "ml"'
run 0 tokens create --role user --tenant ml --name alice && ALICE=$(cat "$TMP/out")
run 0 tokens create --role user --tenant nlp --name bob && BOB=$(cat "$TMP/out")
case ${ALICE:-} in crl_*) ;; *) fail "user token '${ALICE:-}' lacks the crl_ prefix" ;; esac
run 0 tokens list && has "$TMP/out" "alice"
run 2 tokens create --role root
run 2 tokens create --role user
run 1 tokens create --role user --tenant nope && has "$TMP/err" "tenant 'nope' does not exist"

# --- submit / jobs / show / cancel (user alice) --------------------------------------
export CORRAL_TOKEN=${ALICE:-none}
run 1 tokens create --role admin && has "$TMP/err" "corral tokens: "
run 0 submit --gpus 2 --gpu-type any --name it-job --time 10m --env A=1 -- sleep 30 &&
    has "$TMP/out" "Submitted job "
ID=$(sed -n 's/^Submitted job \([0-9]*\)$/\1/p' "$TMP/out")
[ -n "$ID" ] || fail "no job id in '$(cat "$TMP/out")'"
run 0 jobs && has "$TMP/out" "it-job"
run 0 jobs --json && has "$TMP/out" "\"id\": $ID"
run 0 show "$ID" && has "$TMP/out" "Job $ID" && has "$TMP/out" "Command:        sleep 30" &&
    has "$TMP/out" "Tenant:         ml"
run 0 show "$ID" --json && has "$TMP/out" '"events"'
run 0 submit --array 3 --gpus 1 -- true && has "$TMP/out" "Submitted 3 jobs "
run 0 submit --json --gpus 1 -- true && has "$TMP/out" '"ids"'

# another tenant cannot see alice's job; the same answer as a missing job
CORRAL_TOKEN=${BOB:-none} run 1 show "$ID"
cp "$TMP/err" "$TMP/err.other"
run 1 show 999999
sed "s/$ID/N/; s/999999/N/" "$TMP/err.other" >"$TMP/a"
sed "s/999999/N/" "$TMP/err" >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" || fail "another tenant's job and a missing job differ: $(cat "$TMP/a") / $(cat "$TMP/b")"

# the server's message is shown verbatim
if command -v curl >/dev/null 2>&1; then
    curl -s -H "Authorization: Bearer $ALICE" "$SERVER/v1/jobs/999999" >"$TMP/body"
    msg=$(sed 's/^corral show: //' "$TMP/err")
    has "$TMP/body" "$msg"
fi

run 1 logs "$ID" && has "$TMP/err" "corral logs: "
run 0 cancel "$ID" && has "$TMP/out" "Cancelled job $ID"
i=0
while [ $i -lt 100 ]; do
    "$BIN" show "$ID" >"$TMP/out" 2>&1
    grep -q "State:  *cancelled" "$TMP/out" && break
    sleep 0.1
    i=$((i + 1))
done
has "$TMP/out" "cancelled"
run 0 jobs --all && has "$TMP/out" "cancelled"
run 0 jobs --state cancelled && has "$TMP/out" "it-job"

# a body over the server's 1 MiB limit: its answer (413), shown as written
big=$(head -c 100000 /dev/zero | tr '\0' 'a')
run 1 submit -- $big $big $big $big $big $big $big $big $big $big $big $big &&
    has "$TMP/err" "corral submit: "

# --- bad usage never reaches the server --------------------------------------------
run 2 submit --gpus lots -- true && has "$TMP/err" "--gpus: 'lots' is not an integer"
run 2 submit --kind training -- true && has "$TMP/err" "(allowed: pretrain, finetune"
run 2 show abc
run 2 jobs --state sleeping
run 2 frobnicate

# --- cluster views ----------------------------------------------------------------------
export CORRAL_TOKEN=$ADMIN
run 0 nodes && has "$TMP/out" "NAME"
if command -v curl >/dev/null 2>&1 && [ -s "$STATE/join.token" ]; then
    # clear the queue, then a node registers as an agent would and a new
    # job lands on it
    "$BIN" jobs --state pending >"$TMP/out"
    ids=$(awk 'NR > 1 { print $1 }' "$TMP/out")
    [ -z "$ids" ] || run 0 cancel $ids
    gpus=
    for g in 0 1 2 3; do
        gpus="$gpus${gpus:+,}{\"index\":$g,\"uuid\":\"GPU-it-$g\",\"model\":\"H100 SXM\",\"mem_bytes\":85899345920,\"nvlink_domain\":0,\"health\":\"ok\",\"reason\":\"\"}"
    done
    curl -s -o "$TMP/reg" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $(cat "$STATE/join.token")" \
        -d "{\"node\":\"it-0\",\"addr\":\"127.0.0.1\",\"port\":1,\"rack\":\"r1\",\"gpus\":[$gpus],\"cpus\":8,\"mem_bytes\":1073741824,\"running\":[]}" \
        "$SERVER/v1/agents/register" >"$TMP/code"
    has "$TMP/code" "200"
    run 0 nodes && has "$TMP/out" "it-0" && has "$TMP/out" "H100 SXM"
    run 0 nodes it-0 && has "$TMP/out" "GPU-it-3"
    CORRAL_TOKEN=$ALICE run 0 submit --gpus 2 --gpu-type "H100 SXM" --name placed -- sleep 60
    i=0
    while [ $i -lt 100 ]; do
        "$BIN" jobs --state running >"$TMP/out" 2>&1
        grep -q "placed" "$TMP/out" && break
        sleep 0.1
        i=$((i + 1))
    done
    has "$TMP/out" "it-0"
    run 0 top --once && has "$TMP/out" "[##..]"
    run 0 drain it-0 --reason "fan swap" && has "$TMP/out" "Drained it-0"
    run 0 nodes && has "$TMP/out" "fan swap"
    run 0 undrain it-0 && has "$TMP/out" "Undrained it-0"
    run 1 drain no-such-node
fi
run 0 usage --by tenant,gpu_type && has "$TMP/out" "GPU_HOURS"
run 0 top --once && has "$TMP/out" "corral top - $SERVER" && has "$TMP/out" "Jobs: "
run 0 top --json && has "$TMP/out" '"nodes"'

# --- a real agent (once the agent role is built): logs and logs -f -------------------------
if ! "$BIN" agent --help 2>&1 | grep -q "not built yet"; then
    mkdir -p "$TMP/agent"
    "$BIN" agent --server "$SERVER" --join-token "$STATE/join.token" --node sim-0 \
        --gpus "sim:2xL40S" --listen 127.0.0.1:0 --state-dir "$TMP/agent" --kill-on-exit \
        --run-for 120s >"$TMP/agent.log" 2>&1 &
    AGENT_PID=$!
    i=0
    while [ $i -lt 200 ]; do
        "$BIN" nodes >"$TMP/out" 2>&1
        grep -q "^sim-0 *up" "$TMP/out" && break
        sleep 0.1
        i=$((i + 1))
    done
    has "$TMP/out" "sim-0"
    run 0 submit --gpus 1 --gpu-type L40S --tenant ml -- sh -c 'echo line-1; sleep 1; echo line-2; echo oops >&2'
    LID=$(sed -n 's/^Submitted job \([0-9]*\)$/\1/p' "$TMP/out")
    # -f returns once the job has ended, with every line
    run 0 logs "$LID" -f && has "$TMP/out" "line-1" && has "$TMP/out" "line-2"
    run 0 logs "$LID" --stderr && has "$TMP/out" "oops"
    run 0 logs "$LID" --offset 7 && has "$TMP/out" "line-2"
    run 0 show "$LID" && has "$TMP/out" "completed"
    kill "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
    AGENT_PID=
fi

# --- services ---------------------------------------------------------------------------
run 0 services create chat --gpus 1 --gpu-type auto --min 1 --max 4 --concurrency 4 -- python serve.py &&
    has "$TMP/out" "Created service chat"
run 0 services && has "$TMP/out" "concurrency 4"
run 0 services scale chat 2 && has "$TMP/out" "Scaled service chat to 2 replicas"
run 0 services show chat && has "$TMP/out" "Service chat" && has "$TMP/out" "scaled"
run 0 services --json && has "$TMP/out" '"desired_replicas": 2'
run 2 services create bad --min 3 --max 1 -- x
run 0 services delete chat && has "$TMP/out" "Deleted service chat"
run 1 services show chat

# --- the server gone: exit 3 ---------------------------------------------------------------
kill "$CTL_PID" 2>/dev/null
wait "$CTL_PID" 2>/dev/null
CTL_PID=
run 3 jobs && has "$TMP/err" "cannot reach the server at $SERVER"

if [ "$fails" -gt 0 ]; then
    echo "$fails check(s) failed; controller log:"
    tail -20 "$TMP/ctl.log"
    exit 1
fi
echo "ok"
