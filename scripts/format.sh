#!/bin/sh
# clang-format decides layout. --check fails on any file that differs.
set -eu
cd "$(dirname "$0")/.."
files=$(git ls-files --cached --others --exclude-standard -- '*.c' '*.h')
[ -z "$files" ] && exit 0
if [ "${1:-}" = "--check" ]; then
    clang-format --dry-run --Werror $files
    echo "format: clean"
else
    clang-format -i $files
fi
