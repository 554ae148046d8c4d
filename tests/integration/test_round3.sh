#!/bin/bash
# test_round3.sh SECTION - issue 24's smaller reproductions that need a real
# agent (simulated GPUs, a controller on loopback), one section per meson
# test, each failing on a Corral without its fix:
#   reasons    a job that cannot open its output file, or whose podman
#              fails (a fake podman: exit 125 with podman's "Error: ..."),
#              ends with that message as its reason in `corral show`, not
#              a bare exit code 125/126.
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
    wait_for 60 node_up n1 || fail "agent did not register"
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
    echo "ok: reasons"
}

case "$SECTION" in
reasons) section_reasons ;;
*)
    echo "unknown section $SECTION"
    exit 2
    ;;
esac
