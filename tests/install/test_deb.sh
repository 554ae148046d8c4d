#!/usr/bin/env bash
# test_deb.sh - the Debian package, as an admin gets it (docs/install.md):
#  - dpkg-buildpackage -b -us -uc from a clean copy of the tree (the files
#    git knows; DEB_BUILD_OPTIONS=nocheck: `make test` runs the suite);
#  - lintian: no error or warning (info tags are overridden with reasons
#    in debian/corral.lintian-overrides);
#  - Depends names the libraries loaded with dlopen;
#  - apt-get install ./corral_*.deb into this machine (the maintainer
#    scripts must run: a DESTDIR or `dpkg -x` would not test them): the
#    corral system user, /var/lib/corral 0700, /etc/corral configs;
#  - with the source copy deleted, /usr/bin/corral advise works from the
#    installed data, the installed units verify, the configs check;
#  - the walk-through of docs/install.md on network-namespace hosts with
#    TLS (test_hosts.sh with CORRAL_HOSTS_INSTALLED=1) from the package;
#  - then the machine is put back: the package purged, and the user and
#    /var/lib/corral removed when this test created them.
# Needs root, git and the packaging tools (make deps installs them);
# skips (77) only when they are missing, or corral is already installed
# here (an admin's own install is never touched).
set -euo pipefail

SRC=${CORRAL_SRC:?CORRAL_SRC not set}
for t in git dpkg-buildpackage dh lintian apt-get systemd-analyze fakeroot flock setpriv; do
    command -v "$t" >/dev/null || {
        echo "skip: $t missing (make deps)"
        exit 77
    }
done
if [ "$(id -u)" -ne 0 ]; then
    echo "skip: needs root to install the package"
    exit 77
fi
# One package test at a time on this machine (several checkouts may run
# their suites at once): they would install and purge the same package.
exec 9>/var/lock/corral-deb-test.lock
flock -w 900 9 || {
    echo "skip: another package test held the lock for 15 minutes"
    exit 77
}
if dpkg-query -W -f='${Status}' corral 2>/dev/null | grep -q "install ok installed"; then
    echo "skip: a corral package is already installed on this machine"
    exit 77
fi
git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 || {
    echo "skip: $SRC is not a git checkout"
    exit 77
}
DIR=$(mktemp -d /tmp/corral-deb-XXXXXX)
had_user=0
getent passwd corral >/dev/null && had_user=1
had_state=0
[ -e /var/lib/corral ] && had_state=1
installed=0
cleanup() {
    if [ "$installed" = 1 ]; then
        apt-get purge -y -q -o DPkg::Lock::Timeout=300 corral >"$DIR/purge.log" 2>&1 ||
            cat "$DIR/purge.log"
        [ "$had_user" = 1 ] || deluser --quiet --system corral >/dev/null 2>&1 || true
        [ "$had_state" = 1 ] || rm -rf /var/lib/corral
    fi
    [ -n "${CORRAL_KEEP:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

mkdir -p "$DIR/src/corral"
(cd "$SRC" && git ls-files -co --exclude-standard -z |
    tar --null --ignore-failed-read -cf - -T - 2>/dev/null) | tar -xf - -C "$DIR/src/corral"
[ ! -e "$DIR/src/corral/build" ] || fail "the clean copy has a build directory"
start=$SECONDS
(cd "$DIR/src/corral" &&
    DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -b -us -uc >"$DIR/build.log" 2>&1) ||
    fail "dpkg-buildpackage: $(tail -30 "$DIR/build.log")"
echo "dpkg-buildpackage: $((SECONDS - start)) s"
deb=$(ls "$DIR"/src/corral_*_*.deb | grep -v dbgsym)
[ -f "$deb" ] || fail "no .deb: $(ls "$DIR/src")"

# TMPDIR: lintian leaves its mldbm-elf-* caches there.
TMPDIR=$DIR lintian --allow-root --fail-on error,warning "$DIR"/src/corral_*.changes >"$DIR/lintian.log" 2>&1 ||
    fail "lintian: $(cat "$DIR/lintian.log")"
if grep -E '^[EW]: ' "$DIR/lintian.log"; then fail "lintian warnings"; fi

deps=$(dpkg-deb -f "$deb" Depends)
for d in libmicrohttpd12 libcurl4 libjansson4 libsqlite3-0 libsodium23 adduser; do
    echo "$deps" | grep -q "$d" || fail "Depends lacks $d: $deps"
done
dpkg-deb -c "$deb" | grep -q ' ./usr/share/man/man1/corral.1.gz$' || fail "no man page in the .deb"

# The source copy (the binary's compiled-in build tree) goes away first.
rm -rf "$DIR/src/corral"
apt-get install -y -q -o DPkg::Lock::Timeout=300 "$deb" >"$DIR/install.log" 2>&1 ||
    fail "apt-get install: $(tail -20 "$DIR/install.log")"
installed=1
getent passwd corral >/dev/null || fail "no corral user"
[ "$(stat -c '%a %U' /var/lib/corral)" = "700 corral" ] ||
    fail "/var/lib/corral: $(stat -c '%a %U' /var/lib/corral)"
for r in controller agent gateway; do
    [ -f "/etc/corral/$r.json" ] || fail "/etc/corral/$r.json missing"
    /usr/bin/corral config check "$r" "/etc/corral/$r.json" >/dev/null || fail "config check $r"
done
cd /
unset CORRAL_DATA
out=$(/usr/bin/corral advise --kind inference --params 8b --rate 5 2>&1) ||
    fail "installed advise: $out"
echo "$out" | grep -q "Best by" || fail "installed advise output: $out"
# Units as installed; the man page they name is checked when dpkg kept it.
man=--man=yes
[ -e /usr/share/man/man1/corral.1.gz ] || man=--man=no
systemd-analyze verify "$man" /lib/systemd/system/corral-controller.service \
    /lib/systemd/system/corral-agent.service /lib/systemd/system/corral-gateway.service \
    >"$DIR/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "$DIR/verify.log")"
[ ! -s "$DIR/verify.log" ] || fail "systemd-analyze verify warned: $(cat "$DIR/verify.log")"
# The controller starts as the corral user with the packaged config, in
# a scratch state directory under the packaged /var/lib/corral, and serves.
st=/var/lib/corral/deb-test-$$
setpriv --reuid=corral --regid=corral --init-groups /usr/bin/corral controller \
    --config /etc/corral/controller.json --listen 127.0.0.1:0 --state-dir "$st" \
    >"$DIR/ctl.log" 2>&1 &
pid=$!
end=$((SECONDS + 30))
until [ -s "$st/listen.addr" ]; do
    [ "$SECONDS" -lt "$end" ] || {
        kill "$pid" 2>/dev/null || true
        fail "installed controller did not start: $(cat "$DIR/ctl.log")"
    }
    sleep 0.1
done
curl -sf "$(cat "$st/listen.addr")/v1/health" >/dev/null || fail "installed controller: no health"
kill -TERM "$pid"
wait "$pid" || fail "controller exit: $(cat "$DIR/ctl.log")"
rm -rf "$st"
# The four-server walk-through of docs/install.md, TLS included, on network
# namespace hosts, with the installed /usr/bin/corral and /etc/corral.
CORRAL_HOSTS_INSTALLED=1 "$SRC/tests/install/test_hosts.sh" >"$DIR/hosts.log" 2>&1 || {
    rc=$?
    [ "$rc" = 77 ] && echo "hosts walk-through skipped: $(tail -1 "$DIR/hosts.log")" ||
        fail "hosts walk-through from the .deb (rc $rc): $(tail -40 "$DIR/hosts.log")"
}
tail -1 "$DIR/hosts.log"
echo "ok: .deb built from a clean tree, lintian clean, installed, advise from /usr/share/corral, units verify," \
    "the install walk-through with TLS on namespace hosts from the package"
