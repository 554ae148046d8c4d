#!/bin/bash
# reap.sh [--rm] DIR - what a test's daemons leave outside DIR once they are gone
# (the test's own cleanup, and meson's timeout: SIGTERM to the process
# group, SIGKILL 0.5 s later):
#   - jobs: their processes lead their own sessions, outside the process
#     group meson signals; they are found by DIR in their command line (a
#     job's shim is a fork of its agent, whose --state-dir is in DIR) and
#     their process groups killed;
#   - cgroups: an agent names its cgroup corral-NODE-INSTANCE (INSTANCE:
#     STATE-DIR/instance.id) under each hierarchy it uses: cgroup v2 at
#     /sys/fs/cgroup or /sys/fs/cgroup/unified, and the v1 devices, memory,
#     cpu and pids controllers below its own cgroup there. An agent stopped
#     in order removes its own; one killed leaves them, with the job-ID
#     cgroups of its jobs. Only empty cgroups go (rmdir).
# --rm: then DIR itself (unless CORRAL_KEEP is set). On a signal the tests
# run it in a session of its own (setsid), out of the process group that
# meson kills 0.5 s after its SIGTERM, and exit at once.
# Used by lib.sh and the C tests that start agents (reap.h).
rm_dir=0
if [ "${1:-}" = --rm ]; then
    rm_dir=1
    shift
fi
[ -d "${1:-}" ] || exit 0
for p in $(pgrep -f -- "$1/"); do
    [ "$p" != $$ ] && [ "$p" != "$PPID" ] || continue
    kill -KILL -- "-$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
done
roots=(/sys/fs/cgroup /sys/fs/cgroup/unified)
# This shell's cgroups are the agents' (they were started from it).
while IFS=: read -r _ ctrls path; do
    for c in ${ctrls//,/ }; do
        case $c in devices | memory | cpu | pids) roots+=("/sys/fs/cgroup/$c${path%/}") ;; esac
    done
done </proc/self/cgroup
shopt -s nullglob
while IFS= read -r f; do
    inst=$(head -c 64 "$f" 2>/dev/null | tr -cd '0-9a-zA-Z')
    [ -n "$inst" ] || continue
    for r in "${roots[@]}"; do
        for d in "$r"/corral-*-"$inst"; do
            find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
        done
    done
done < <([ -d /sys/fs/cgroup ] && find "$1" -maxdepth 3 -name instance.id 2>/dev/null)
if [ "$rm_dir" = 1 ] && [ -z "${CORRAL_KEEP:-}" ]; then
    rm -rf "$1"
fi
exit 0
