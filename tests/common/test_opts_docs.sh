#!/bin/sh
# test_opts_docs.sh - every option table (src/common/cr_opt.h) against the
# options table of its docs page: the flags `corral ROLE --help` prints
# (made from the table) and the flags named in the first column of the
# docs' table must be the same set. A documented option that does not
# exist fails, and so does one that exists but is not documented.
set -eu
: "${CORRAL_BIN:?}" "${CORRAL_SRC:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/corral-optdocs-XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0

# check ROLE DOC HEADING: the first table after the line HEADING of DOC
check() {
    "$CORRAL_BIN" "$1" --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p' | sort -u >"$T/code"
    awk -v h="$3" '
        $0 == h { on = 1; next }
        on && /^\|/ { seen = 1; if ($0 !~ /^\|[-|]+$/) { split($0, c, "|"); print c[2] } next }
        on && seen { exit }' "$CORRAL_SRC/$2" |
        grep -o -- '--[a-z0-9-]*' | sort -u >"$T/docs"
    if ! [ -s "$T/code" ] || ! [ -s "$T/docs" ]; then
        echo "FAIL: $1: no flags read (help: $(wc -l <"$T/code"), $2: $(wc -l <"$T/docs"))"
        fails=$((fails + 1))
        return
    fi
    before=$fails
    for f in $(comm -13 "$T/code" "$T/docs"); do
        echo "FAIL: $2 documents $f, which 'corral $1' does not have"
        fails=$((fails + 1))
    done
    for f in $(comm -23 "$T/code" "$T/docs"); do
        echo "FAIL: 'corral $1' has $f, which $2 does not document"
        fails=$((fails + 1))
    done
    [ "$fails" != "$before" ] || echo "$1: $(wc -l <"$T/code") flags, the same in $2"
}

check gateway docs/gateway.md "## Running it"
check sim docs/sim.md "## Running it"
[ "$fails" = 0 ] || exit 1
echo "options against docs: ok"
