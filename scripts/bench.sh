#!/bin/sh
# make bench: run every benchmark built under bench/ and print its numbers.
set -eu
BUILD=${1:-build}
for b in "$BUILD"/bench/*/bench_*; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    "$b"
done
