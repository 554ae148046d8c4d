#!/bin/sh
# tests/tsan_wrap.sh TEST [ARGS...] - run one test of the gcc build against
# the ThreadSanitizer build of corral (meson test --setup tsan; make test
# runs it on the tests named in the Makefile). The test itself is the gcc
# build's; every corral process it starts (controller, agents, gateway) is
# $CORRAL_TSAN_BIN, and each writes its reports to a directory of this run.
# The test fails when any report was written, whatever the test said:
# the reports are printed, with the test's own exit status.
#   CORRAL_TSAN_BIN   build-tsan/corral (absolute)
#   suppressions      tests/tsan.supp (each entry says why it is benign)
set -u
: "${CORRAL_TSAN_BIN:?CORRAL_TSAN_BIN not set (the ThreadSanitizer build of corral)}"
here=$(cd "$(dirname "$0")" && pwd)
reports=$(mktemp -d "${TMPDIR:-/tmp}/corral-tsan-XXXXXX")
CORRAL_BIN=$CORRAL_TSAN_BIN
TSAN_OPTIONS="log_path=$reports/report suppressions=$here/tsan.supp halt_on_error=0 second_deadlock_stack=1 history_size=4"
export CORRAL_BIN TSAN_OPTIONS
"$@"
rc=$?
n=0
for f in "$reports"/report.*; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    echo "--- ThreadSanitizer report $f"
    cat "$f"
done
rm -rf "$reports"
if [ "$n" -gt 0 ]; then
    echo "tsan: $n report file(s) from the corral processes of this test"
    exit 1
fi
exit "$rc"
