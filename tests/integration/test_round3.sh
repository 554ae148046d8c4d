#!/bin/bash
# test_round3.sh SECTION - issue 24's smaller reproductions that need a real
# agent (simulated GPUs, a controller on loopback), one section per meson
# test, each failing on a Corral without its fix:
#   reasons    a job that cannot open its output file, or whose podman
#              fails (a fake podman: exit 125 with podman's "Error: ..."),
#              ends with that message as its reason in `corral show`, not
#              a bare exit code 125/126.
#   inventory  a node whose agent comes back with other GPUs (2 L40S, then
#              8 H100): the scheduler places on the new GPUs, and the job
#              on the old ones is requeued with the reason.
# Waits poll a condition with a deadline; nothing depends on timing.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
SECTION=${1:?usage: test_round3.sh SECTION}
cr_setup "round3-$SECTION"
unset CORRAL_TOKEN_FILE CORRAL_JOIN_TOKEN
export CORRAL_CONFIG=/dev/null

jid() { grep -o '[0-9][0-9]*' | head -1; }
ended() { c show "$1" | grep -Eq 'State: *(completed|failed|cancelled)'; }
node_up() { c nodes "$1" --json | tr -d ' \n' | grep -q '"state":"up"'; }

section_reasons() {
    # A fake podman: it answers the agent's probe and image checks, and a
    # run fails as podman's own errors do (exit 125, "Error: " on stderr).
    cat >"$DIR/podman" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && echo "podman version 4.9.9" && exit 0
# the image lookup (image inspect --format={{.Id}}): one image id
case "$*" in *absent*) [ "$1" = image ] && exit 1 ;; esac # an image the node does not have
[ "$1" = image ] && [ "$2" = inspect ] && echo "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" && exit 0
for a in "$@"; do
    if [ "$a" = run ]; then
        echo "Error: crun: creating container: fake podman says no" >&2
        exit 125
    fi
done
exit 0
EOF
    chmod 755 "$DIR/podman"
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    cr_start_agent n1 "$DIR/n1" "$DIR/agent.log" --gpus "sim:1xL4" --podman "$DIR/podman"
    local ag=$!
    wait_for 60 node_up n1 || fail "agent did not register"
    local fd0
    fd0=$(readlink "/proc/$ag/fd/0")
    local nodir=$DIR/no-such-dir
    j1=$(c submit -n out -o "$nodir/x.log" -- true | jid)
    wait_for 60 ended "$j1" || fail "job $j1 did not end: $(c show "$j1")"
    c show "$j1" | grep -q "cannot open output file $nodir/x.log: No such file or directory" ||
        fail "job $j1's show does not say why it failed: $(c show "$j1")"
    j2=$(c submit -n wd --chdir "$nodir" -- true | jid)
    wait_for 60 ended "$j2" || fail "job $j2 did not end: $(c show "$j2")"
    c show "$j2" | grep -q "cannot open the working directory $nodir: No such file" ||
        fail "job $j2's show does not say why it failed: $(c show "$j2")"
    j3=$(c submit -n ctr --image localhost/fake:1 -- true | jid)
    wait_for 60 ended "$j3" || fail "job $j3 did not end: $(c show "$j3")"
    c show "$j3" | grep -q "Error: crun: creating container: fake podman says no (exit code 125)" ||
        fail "job $j3's show does not quote podman: $(c show "$j3")"
    # A job's own exit 126 with nothing of ours on stderr keeps the plain words.
    j4=$(c submit -n own -- sh -c 'echo "corral-ish but not ours" >&2; exit 126' | jid)
    wait_for 60 ended "$j4" || fail "job $j4 did not end"
    c show "$j4" | grep -q "exited with code 126" || fail "job $j4: $(c show "$j4")"
    # Starts that fail before the job exists (an image the node lacks): once
    # the controller has seen their end, the agent forgets them (journal
    # "F ID"), and that must close none of the agent's own descriptors (an
    # entry left with init_fd 0 closed descriptor 0, by then a client's
    # socket or a device filter program: libmicrohttpd aborted with "Close
    # socket failed", issue 24).
    for k in 5 6; do
        jk=$(c submit -n absent --image localhost/absent:1 -- true | jid)
        wait_for 60 ended "$jk" || fail "job $jk did not end: $(c show "$jk")"
        c show "$jk" | grep -q "not in this node's image store" || fail "job $jk: $(c show "$jk")"
        wait_for 60 grep -qx "F $jk" "$DIR/n1/jobs.journal" || fail "the agent did not forget job $jk"
    done
    [ "$(readlink "/proc/$ag/fd/0")" = "$fd0" ] ||
        fail "the agent's descriptor 0 was $fd0, now $(readlink "/proc/$ag/fd/0"): closed by a forgotten entry"
    c nodes | grep -q 'n1.* up ' || fail "agent n1 not up after the failed starts: $(c nodes)"
    echo "ok: reasons"
}

section_inventory() {
    # The node comes back (its agent restarted, same state) with other GPUs:
    # the scheduler must see 8 H100 now, not the 2 L40S it had.
    cr_start_controller "$DIR/ctl" --allow-legacy-join
    CR_STOP=KILL
    cr_start_agent n1 "$DIR/n1" "$DIR/agent1.log" --gpus "sim:2xL40S"
    local ag=$!
    wait_for 60 node_up n1 || fail "agent did not register"
    l40=$(c submit -n l40 --gpu-type L40S -- sleep 600 | jid)
    # --nodelist: its node mask (made at queueing) must learn the new entry
    h100=$(c submit -n h100 --gpus 8 --gpu-type "H100 SXM" --nodelist n1 -- sleep 600 | jid)
    running() { c show "$1" | grep -q 'State: *running'; }
    wait_for 60 running "$l40" || fail "job $l40 did not start: $(c show "$l40")"
    c show "$h100" | grep -q 'State: *pending' || fail "job $h100: $(c show "$h100")"
    kill -KILL "$ag"
    wait "$ag" 2>/dev/null || true
    "$CORRAL" agent --server "$SERVER" --join-token "$CTL_STATE/join.token" --node n1 \
        --listen 127.0.0.1:0 --state-dir "$DIR/n1" --kill-on-exit --gpus "sim:8xH100 SXM" \
        >"$DIR/agent2.log" 2>&1 &
    PIDS+=($!)
    wait_for 60 running "$h100" || fail "the 8-GPU H100 job did not start on the node that has them: $(c show "$h100")"
    requeued() { c show "$l40" | grep -q 'State: *pending'; }
    wait_for 60 requeued || fail "the L40S job still runs on a node without L40S: $(c show "$l40")"
    c show "$l40" --json | grep -q "node n1 re-registered with other GPUs (8x H100 SXM, was 2x L40S)" ||
        fail "job $l40 does not say why it was requeued: $(c show "$l40" --json)"
    c nodes n1 --json | tr -d ' \n' | grep -q '"model":"L40S"' && fail "node n1 still lists an L40S"
    echo "ok: inventory"
}

case "$SECTION" in
reasons) section_reasons ;;
inventory) section_inventory ;;
*)
    echo "unknown section $SECTION"
    exit 2
    ;;
esac
