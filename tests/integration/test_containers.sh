#!/bin/bash
# test_containers.sh - jobs in containers with podman (docs/containers.md):
# the real controller and a real agent with simulated GPUs on loopback, and
# a tiny image built here from the busybox-static package (podman import of
# a tar; no registry). Shows that
#   - a job runs in the image as its tenant's mapped uid, sees only its own
#     GPUs' placeholder device nodes (and nvidiactl), gets its env and
#     secrets, and its read-only mount is read-only; an "image pull" event;
#   - a mount outside the tenant's allowed host paths is refused at submit;
#   - cancel and a time limit leave no container (podman ps -a empty);
#   - the agent killed with -9 and restarted re-adopts the running
#     container (same container, not a second one);
#   - a missing image fails the job at once with the reason (no retries);
#   - an image missing from the store is loaded from --image-archive.
#   - image references are strict (issue 24): --image docker-archive:FILE
#     (a root-only file of another tenant), oci-archive:, oci:, dir:, the
#     SSRF shape host:port/x and image "" are refused at submit naming
#     'image'; a registry the controller allows but the node does not is
#     refused on the node without a pull; an image team-a loaded from its
#     archive cannot be used by team-b (by its name, by its private name,
#     or by a name an admin gave the same image id), and team-a uses it
#     again without the archive.
# Needs root and podman with runc or crun; exits 77 only when podman cannot
# run a container here at all.
set -u

. "$(dirname "$0")/lib.sh"
BIN=$CORRAL
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (rootful podman, setuid)"
    exit 77
fi
if ! command -v podman >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
    echo "SKIP: podman or busybox-static not installed (make deps)"
    exit 77
fi
RT=runc
command -v runc >/dev/null 2>&1 || RT=crun
TMPDIR=/var/tmp cr_setup ctr
TMP=$DIR
chmod 755 "$TMP"
# A failed run keeps $TMP (its logs); fail counts, every check runs.
CR_KEEP_ON_FAIL=1
fails=0
AGENT_PID=
IMG=localhost/corral-test:bb
ARCH_IMG=localhost/corral-test:arch$$
LRU1=localhost/corral-test:lru1-$$
LRU2=localhost/corral-test:lru2-$$
LEAK_IMG=localhost/corral-test:leak$$
# team-a's private name for ARCH_IMG on the node: the tenant's name in hex.
ARCH_PRIV=localhost/corral-tenant-$(printf team-a | od -An -tx1 | tr -d ' \n')/corral-test:arch$$
# The first agent (restarted: not in PIDS), the containers a failed check
# may have left (this test's node names only) and the images it made.
cleanup_extra() {
    [ -z "$AGENT_PID" ] || cr_stop_pids TERM "$AGENT_PID"
    for node in ctr-n1 ctr-n2; do
        for n in $(podman ps -a --filter label=corral.node=$node --format '{{.Names}}' 2>/dev/null); do
            podman rm -f -t 0 "$n" >/dev/null 2>&1
        done
    done
    podman rmi "$ARCH_IMG" "$LRU1" "$LRU2" "$LEAK_IMG" >/dev/null 2>&1
    for n in $(podman images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep "corral-tenant-.*:arch$$"); do
        podman rmi "$n" >/dev/null 2>&1
    done
}
unset CORRAL_SERVER CORRAL_TOKEN
export CORRAL_CONFIG=/dev/null

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
ok() { echo "ok: $*"; }

# --- the image: busybox-static, imported (no registry) ----------------------
mkdir -p "$TMP/rootfs/bin" "$TMP/rootfs/tmp" "$TMP/rootfs/etc" "$TMP/rootfs/data" \
    "$TMP/rootfs/www/web"
cp /bin/busybox "$TMP/rootfs/bin/busybox"
# A web server for the service replica (busybox httpd serves /www).
echo ok >"$TMP/rootfs/www/health"
echo served-from-container >"$TMP/rootfs/www/x"
echo served-from-container >"$TMP/rootfs/www/web/x"
chmod -R a+rX "$TMP/rootfs/www"
for a in sh id ls cat echo sleep touch grep wc env true httpd; do
    ln -s busybox "$TMP/rootfs/bin/$a"
done
chmod 1777 "$TMP/rootfs/tmp"
tar -C "$TMP/rootfs" -cf "$TMP/bb.tar" .
if ! podman import -q "$TMP/bb.tar" "$IMG" >"$TMP/import.out" 2>&1; then
    echo "SKIP: podman import failed: $(cat "$TMP/import.out")"
    exit 77
fi
if ! podman --runtime "$RT" run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    "$IMG" true >"$TMP/probe.out" 2>&1; then
    echo "SKIP: podman cannot run a container here: $(cat "$TMP/probe.out")"
    exit 77
fi
mkdir -p "$TMP/data"
# An archive of an image of its own (a file the others lack), then the image
# removed: the job must load it, and it is new to the store (team-a's).
echo team-a-archive >"$TMP/rootfs/arch-marker"
tar -C "$TMP/rootfs" -cf "$TMP/arch-root.tar" .
rm -f "$TMP/rootfs/arch-marker"
podman import -q "$TMP/arch-root.tar" "$ARCH_IMG" >/dev/null &&
    podman save -q -o "$TMP/data/arch.tar" "$ARCH_IMG" || fail "podman save"
podman rmi "$ARCH_IMG" >/dev/null 2>&1
podman image exists "$ARCH_IMG" && fail "$ARCH_IMG still in the store"
# Another tenant's root-only file: an archive too, so podman would load it.
mkdir -p "$TMP/other"
cp "$TMP/data/arch.tar" "$TMP/other/b-secret.tar"
chmod 0600 "$TMP/other/b-secret.tar"
echo hello-from-host >"$TMP/data/hello"
chmod -R a+rX "$TMP/data"

# --- controller and agent ---------------------------------------------------
cat >"$TMP/ctl.json" <<EOF
{"run_as": {"tenants": {"team-a": {"uid": 64001, "gid": 64001},
                        "team-b": {"uid": 64002, "gid": 64002}}},
 "mounts_allowed": {"team-a": ["$TMP/data"]},
 "image_registries": ["127.0.0.1:9"],
 "checkpoint_root": "$TMP/ckpt", "grace_s": 5}
EOF
cr_start_controller "$TMP/ctl" --allow-legacy-join --config "$TMP/ctl.json"
c tenants create team-a >/dev/null || fail "tenant"
c tenants create team-b >/dev/null || fail "tenant team-b"

start_agent() {
    "$BIN" agent --server "$SERVER" --join-token "$TMP/ctl/join.token" --node ctr-n1 \
        --gpus "sim:4xL40S" --listen 127.0.0.1:0 --state-dir "$TMP/n1" \
        --container-runtime "$RT" >>"$TMP/agent.log" 2>&1 &
    AGENT_PID=$!
}
start_agent
up() { c nodes | grep -q 'ctr-n1.* up '; }
wait_for 60 up || { fail "agent did not register: $(cat "$TMP/agent.log")"; exit 1; }
if grep -q "containers: .*runtime $RT" "$TMP/agent.log"; then
    ok "agent says: $(grep -o 'containers: .*' "$TMP/agent.log" | head -1)"
else
    fail "the agent did not say which container runtime it uses: $(cat "$TMP/agent.log")"
fi

submit() { c submit --tenant team-a "$@" | grep -o '[0-9][0-9]*' | head -1; }
state_is() { c show "$1" | grep -qi "^ *state: *$2"; }
ctr_of() { podman ps -a --filter "label=corral.job=$1" --filter label=corral.node=ctr-n1 --format '{{.ID}}'; }
no_ctr() { [ -z "$(ctr_of "$1")" ]; }
running_ctr() { podman ps --filter "label=corral.job=$1" --filter label=corral.node=ctr-n1 --format '{{.ID}}' | grep -q .; }

# --- a job in the image: uid, devices, env, secret, read-only mount ---------
A=$(submit --image "$IMG" --gpus 2 --mount "$TMP/data:/data:ro" --env GREETING=hi \
    --secret MYSECRET=s3cr3t-value -- sh -c \
    'echo uid=$(id -u) gid=$(id -g); ls /dev | grep nvidia | tr "\n" " "; echo;
     if touch /data/x 2>/dev/null; then echo data=WRITABLE; else echo data=READONLY; fi;
     cat /data/hello; echo greeting=$GREETING secret=$MYSECRET;
     echo cvd=$CUDA_VISIBLE_DEVICES nvd=$NVIDIA_VISIBLE_DEVICES;
     touch $CORRAL_CHECKPOINT_DIR/ckpt && echo ckpt=ok')
[ -n "$A" ] || fail "submit with --image failed"
wait_for 90 state_is "$A" completed || fail "job $A did not complete: $(c show "$A"; c logs "$A" --stderr)"
c logs "$A" >"$TMP/a.out" 2>&1
grep -q "^uid=64001 gid=64001" "$TMP/a.out" && ok "in the container as the mapped uid: $(head -1 "$TMP/a.out")" ||
    fail "uid in the container: $(cat "$TMP/a.out")"
devs=$(sed -n 2p "$TMP/a.out")
ngpu=$(echo "$devs" | tr ' ' '\n' | grep -c '^nvidia[0-9]')
if [ "$ngpu" = 2 ] && echo "$devs" | grep -q nvidiactl; then
    ok "only its 2 GPUs' device nodes inside: $devs"
else
    fail "device nodes inside: '$devs' (want exactly 2 nvidiaN + nvidiactl)"
fi
grep -q "^data=READONLY" "$TMP/a.out" && ok "--mount ...:ro is read-only" || fail "ro mount: $(cat "$TMP/a.out")"
[ -e "$TMP/data/x" ] && fail "the job wrote through a :ro mount"
grep -q "^hello-from-host" "$TMP/a.out" || fail "mount content not seen: $(cat "$TMP/a.out")"
grep -q "greeting=hi secret=s3cr3t-value" "$TMP/a.out" && ok "env and secret inside" ||
    fail "env/secret: $(cat "$TMP/a.out")"
grep -q "^cvd=GPU-.* nvd=GPU-" "$TMP/a.out" || fail "CUDA/NVIDIA_VISIBLE_DEVICES: $(cat "$TMP/a.out")"
grep -q "^ckpt=ok" "$TMP/a.out" && ok "checkpoint dir mounted and writable" || fail "checkpoint dir: $(cat "$TMP/a.out")"
c show "$A" | grep -q "image pull.*present" && ok "event: $(c show "$A" | grep -o 'image pull.*' | head -1)" ||
    fail "no 'image pull' event: $(c show "$A")"
wait_for 30 no_ctr "$A" && ok "finished job $A left no container" || fail "container of $A left: $(ctr_of "$A")"
[ -z "$(ls -A "$TMP/n1/ctr" 2>/dev/null)" ] || fail "secret env file left: $(ls "$TMP/n1/ctr")"
if grep -q "s3cr3t-value" "$TMP/n1/jobs.journal"; then fail "the secret is in the journal"; fi

# --- a mount outside the allow-list is refused at submit --------------------
if c submit --tenant team-a --image "$IMG" --mount "$TMP/other:/o" -- true >"$TMP/o" 2>&1; then
    fail "a mount outside mounts_allowed was accepted"
elif grep -q "mounts\[0\]" "$TMP/o" && grep -q "mounts_allowed" "$TMP/o"; then
    ok "mount outside the allow-list refused: $(cat "$TMP/o")"
else
    fail "mount refusal: $(cat "$TMP/o")"
fi
if c submit --tenant team-a --image "$IMG" --mount "$TMP/data/../other:/o" -- true >"$TMP/o" 2>&1; then
    fail "a mount with .. was accepted"
fi
# A symbolic link inside the allowed directory: refused on the node.
ln -s "$TMP/other" "$TMP/data/link"
L=$(submit --image "$IMG" --mount "$TMP/data/link:/o" -- true)
wait_for 60 state_is "$L" failed && c show "$L" | grep -q "symbolic link" &&
    ok "a mount through a symbolic link fails the job" || fail "symlink mount: $(c show "$L")"
rm -f "$TMP/data/link"

# --- cancel and time limit leave no container -------------------------------
C=$(submit --image "$IMG" -- sh -c 'trap "" TERM; sleep 300')
wait_for 60 running_ctr "$C" || fail "job $C: no running container: $(c show "$C")"
c cancel "$C" >/dev/null
wait_for 60 state_is "$C" cancelled || fail "job $C not cancelled: $(c show "$C")"
wait_for 60 no_ctr "$C" && ok "cancel (a job ignoring SIGTERM) left no container" ||
    fail "container of cancelled $C left: $(ctr_of "$C")"

T=$(submit --image "$IMG" --time 3s -- sleep 300)
wait_for 90 state_is "$T" failed || fail "job $T past its time limit did not fail: $(c show "$T")"
wait_for 60 no_ctr "$T" && ok "time limit left no container" || fail "container of $T left: $(ctr_of "$T")"

# --- agent kill -9 and restart: the container is re-adopted -----------------
K=$(submit --image "$IMG" -- sleep 300)
wait_for 60 running_ctr "$K" || fail "job $K: no running container"
before=$(ctr_of "$K")
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
start_agent
wait_for 60 grep -q "job=$K still running: adopted" "$TMP/agent.log" || fail "job $K not adopted: $(tail -5 "$TMP/agent.log")"
# Past a sweep of the restarted agent (every 5 s while containers run).
sleep 7
after=$(ctr_of "$K")
if [ -n "$before" ] && [ "$before" = "$after" ] && running_ctr "$K" && state_is "$K" running; then
    ok "agent kill -9 + restart: container $after re-adopted, still running, no second one"
else
    fail "after the agent restart: before '$before' after '$after' ($(c show "$K" | grep -i state))"
fi
c cancel "$K" >/dev/null
wait_for 60 no_ctr "$K" && ok "the re-adopted container stops on cancel" || fail "container of $K left"

# --- a missing image fails at once, with the reason, not retried ------------
M=$(submit --image localhost/corral-missing:none --retries 3 -- true)
wait_for 60 state_is "$M" failed || fail "job $M with a missing image did not fail: $(c show "$M")"
if c show "$M" | grep -q "not in this node's image store" && c show "$M" | grep -qi "retries: *0"; then
    ok "missing image: $(c show "$M" | grep -i '^ *reason' | head -1)"
else
    fail "missing image reason/retries: $(c show "$M")"
fi

# --- an image loaded from --image-archive -----------------------------------
R=$(submit --image "$ARCH_IMG" --image-archive "$TMP/data/arch.tar" -- echo from-archive)
wait_for 90 state_is "$R" completed || fail "job $R (archive) did not complete: $(c show "$R")"
c logs "$R" | grep -q from-archive || fail "job $R output: $(c logs "$R")"
c show "$R" | grep -q "image pull.*loaded from $TMP/data/arch.tar" && ok "image loaded from the archive (event)" ||
    fail "no 'loaded from' event: $(c show "$R")"
if c submit --tenant team-a --image "$IMG" --image-archive "$TMP/other/x.tar" -- true >"$TMP/o" 2>&1; then
    fail "an archive outside mounts_allowed was accepted"
fi

# --- image references: strict, allowed registries, tenants' archives --------
# The file-read primitive of issue 24: a transport in --image made root
# podman load any file. Each is refused at submit, naming the field.
for bad in "docker-archive:$TMP/other/b-secret.tar" "docker-archive:$TMP/other/b-secret.tar:x:1" \
    "oci-archive:$TMP/other/b-secret.tar" "oci:$TMP/other" "dir:$TMP/other" \
    "containers-storage:$ARCH_IMG" "docker-daemon:busybox:latest" "docker://127.0.0.1:9/x"; do
    if c submit --tenant team-b --image "$bad" -- cat /etc/hostname >"$TMP/o" 2>&1; then
        fail "--image $bad was accepted: $(cat "$TMP/o")"
    elif ! grep -q "image" "$TMP/o" || ! grep -q "400\|not a registry\|transport\|want \[registry" "$TMP/o"; then
        fail "--image $bad: refusal does not say why: $(cat "$TMP/o")"
    fi
done
ok "transports in --image refused at submit: $(c submit --tenant team-b --image "docker-archive:$TMP/other/b-secret.tar" -- true 2>&1 | head -1)"
podman image exists "$ARCH_IMG" && fail "$ARCH_IMG is in the store after the refused submits"
# The same through the API, and image "" given explicitly.
for body in "{\"command\":[\"true\"],\"tenant\":\"team-b\",\"image\":\"docker-archive:$TMP/other/b-secret.tar\"}" \
    '{"command":["true"],"tenant":"team-b","image":""}'; do
    code=$(curl -s -o "$TMP/o" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" \
        -H 'Content-Type: application/json' -d "$body" "$SERVER/v1/jobs")
    [ "$code" = 400 ] && grep -q '"image"' "$TMP/o" || fail "API submit $body: $code $(cat "$TMP/o")"
done
ok "API: a transport and image \"\" refused with 400 naming 'image'"
# The SSRF shape: a registry no one allowed is refused at submit.
if c submit --tenant team-b --image evil-host:1234/x -- true >"$TMP/o" 2>&1; then
    fail "--image evil-host:1234/x was accepted"
elif grep -q "registry evil-host:1234 is not one jobs may use" "$TMP/o"; then
    ok "a registry not in image_registries refused at submit: $(head -1 "$TMP/o")"
else
    fail "evil-host:1234/x refusal: $(cat "$TMP/o")"
fi
# A registry the controller allows but this node does not pull from: the
# node refuses it without calling podman pull (nothing listens there).
P=$(c submit --tenant team-b --image 127.0.0.1:9/x:1 -- true | grep -o '[0-9][0-9]*' | head -1)
if wait_for 60 state_is "$P" failed && c show "$P" | grep -q "registry 127.0.0.1:9 is not one this node pulls from"; then
    ok "the node refuses a pull from a registry not in its image_registries"
else
    fail "node-side registry refusal: $(c show "$P")"
fi
grep -q "podman pull failed" "$TMP/agent.log" && fail "a pull was tried: $(grep 'pull' "$TMP/agent.log")"
# team-a's archive image: team-a's own, under its private name only.
podman image exists "$ARCH_PRIV" && ok "team-a's archive image is $ARCH_PRIV on the node" ||
    fail "no $ARCH_PRIV: $(podman images --format '{{.Repository}}:{{.Tag}}')"
podman image exists "$ARCH_IMG" && fail "the archive's own name $ARCH_IMG stayed in the node's store"
logs_have() { c logs "$1" 2>/dev/null | grep -q "$2"; }
R2=$(submit --image "$ARCH_IMG" -- cat /arch-marker)
wait_for 90 state_is "$R2" completed && wait_for 30 logs_have "$R2" team-a-archive &&
    ok "team-a runs its archive image again without the archive" ||
    fail "team-a's job $R2 on its loaded image: $(c show "$R2"; c logs "$R2")"
B1=$(c submit --tenant team-b --image "$ARCH_IMG" -- cat /arch-marker | grep -o '[0-9][0-9]*' | head -1)
wait_for 60 state_is "$B1" failed && c show "$B1" | grep -q "not in this node's image store" &&
    ! c logs "$B1" 2>/dev/null | grep -q team-a-archive &&
    ok "team-b cannot use the image team-a loaded (by its name)" ||
    fail "team-b's job $B1 on team-a's image: $(c show "$B1"; c logs "$B1")"
if c submit --tenant team-b --image "$ARCH_PRIV" -- true >"$TMP/o" 2>&1; then
    fail "team-b submitted team-a's private name $ARCH_PRIV"
else
    grep -q "node agent's own" "$TMP/o" && ok "the private names are refused at submit" ||
        fail "private name refusal: $(cat "$TMP/o")"
fi
# An admin names the same image id publicly: the record still refuses team-b.
podman tag "$ARCH_PRIV" "$LEAK_IMG" || fail "podman tag $LEAK_IMG"
B2=$(c submit --tenant team-b --image "$LEAK_IMG" -- cat /arch-marker | grep -o '[0-9][0-9]*' | head -1)
wait_for 60 state_is "$B2" failed && c show "$B2" | grep -q "loaded from another tenant's image archive" &&
    ok "team-b refused team-a's image id under another name" ||
    fail "team-b's job $B2 on $LEAK_IMG: $(c show "$B2"; c logs "$B2")"
podman rmi "$LEAK_IMG" >/dev/null 2>&1

# --- an inference service replica from the image, behind the gateway --------
c services create web --tenant team-a --image "$IMG" --gpus 1 --min 1 --max 1 \
    --ready-path /health -- sh -c 'exec httpd -f -p $PORT -h /www' >"$TMP/svc.out" 2>&1 ||
    fail "services create with --image: $(cat "$TMP/svc.out")"
"$BIN" gateway --listen 127.0.0.1:0 --no-require-keys --controller "$SERVER" --token "$ADMIN" \
    2>"$TMP/gw.log" &
PIDS+=($!)
wait_for 20 grep -q "listening on" "$TMP/gw.log" || fail "gateway did not start: $(cat "$TMP/gw.log")"
G=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$TMP/gw.log" | head -1)
served() { curl -sf -m 5 "http://$G/web/x" | grep -q served-from-container; }
if wait_for 90 served; then
    ok "service replica in a container served through the gateway"
else
    fail "service 'web' not served through the gateway: $(c services show web 2>&1 | tail -5; tail -3 "$TMP/gw.log")"
fi
c services delete web >/dev/null 2>&1
web_gone() { [ -z "$(podman ps -a --filter label=corral.node=ctr-n1 --format '{{.ID}}')" ]; }
wait_for 60 web_gone && ok "service deleted: no container left" || fail "containers left after the service delete"

# --- image cache cap: the least recently used image the jobs used goes ------
# Two distinct images of about 2 MB each; a second agent capped at 3M.
for t in 1 2; do
    echo "$t" >"$TMP/rootfs/lru"
    tar -C "$TMP/rootfs" -cf "$TMP/lru$t.tar" .
done
podman import -q "$TMP/lru1.tar" "$LRU1" >/dev/null && podman import -q "$TMP/lru2.tar" "$LRU2" >/dev/null ||
    fail "podman import of the cache images"
c drain ctr-n1 >/dev/null
"$BIN" agent --server "$SERVER" --join-token "$TMP/ctl/join.token" --node ctr-n2 \
    --gpus "sim:1xL40S" --listen 127.0.0.1:0 --state-dir "$TMP/n2" --container-runtime "$RT" \
    --image-cache-max 3M >"$TMP/agent2.log" 2>&1 &
PIDS+=($!)
up2() { c nodes | grep -q 'ctr-n2.* up '; }
wait_for 60 up2 || fail "agent ctr-n2 did not register"
U1=$(submit --image "$LRU1" -- true)
wait_for 60 state_is "$U1" completed || fail "job $U1 ($LRU1): $(c show "$U1")"
podman image exists "$LRU1" || fail "$LRU1 removed while under the cap"
U2=$(submit --image "$LRU2" -- true)
wait_for 60 state_is "$U2" completed || fail "job $U2 ($LRU2): $(c show "$U2")"
lru1_gone() { ! podman image exists "$LRU1"; }
if wait_for 30 lru1_gone && podman image exists "$LRU2" && podman image exists "$IMG"; then
    ok "image cache cap 3M: $(grep -o 'image cache over.*' "$TMP/agent2.log" | head -1)"
else
    fail "image cache: $LRU1 $(podman image exists "$LRU1" && echo kept || echo gone), $LRU2 $(podman image exists "$LRU2" && echo kept || echo gone): $(grep 'image cache' "$TMP/agent2.log")"
fi

echo "$fails failure(s)"
[ "$fails" = 0 ]
