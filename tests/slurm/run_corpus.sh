#!/usr/bin/env bash
# run_corpus.sh - run the sbatch script corpus (tests/slurm/corpus/*)
# through one system and write, per case, what can be compared across
# systems (docs/slurm.md, "The script corpus"):
#
#   usage: run_corpus.sh slurm|corral OUTDIR [CASE...]
#   env:   slurm:  SLURM_CONF (a running cluster: ../shared/peers/slurm)
#          corral: CORRAL (the binary), CORRAL_SERVER, CORRAL_TOKEN
#          CORPUS_TIMEOUT (seconds a case may take, default 120)
#
# A case is a directory with job.sh and, when it submits more than one
# job, submit.sh (run with $SBATCH as the submit command). It is copied to
# OUTDIR/wd/CASE, which is the submit directory; OUTDIR/CASE.result gets:
#   submit: ok | refused         the submit's exit status
#   job NAME STATE EXIT          every job the case submitted, sorted
#   file PATH                    the files the case left (digit runs as N)
#   == FILE + its lines          every *.facts file, and the FACT: lines of
#                                every other file the jobs wrote
# Job ids, host names and times never appear, so the two systems' results
# compare with diff.
set -uo pipefail

sys=${1:?usage: run_corpus.sh slurm|corral OUTDIR [CASE...]}
out=${2:?usage: run_corpus.sh slurm|corral OUTDIR [CASE...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
corpus=$here/corpus
timeout_s=${CORPUS_TIMEOUT:-120}
mkdir -p "$out/wd"
out=$(cd "$out" && pwd)

case $sys in
slurm) SBATCH=sbatch ;;
corral) SBATCH="${CORRAL:?set CORRAL} submit" ;;
*) echo "run_corpus.sh: system '$sys': slurm or corral" >&2; exit 2 ;;
esac
export SBATCH

# "ID NAME STATE EXIT" of every job the system knows, one a line.
jobs_now() {
    if [ "$sys" = slurm ]; then
        scontrol show job -o 2>/dev/null | python3 -c '
import sys
for line in sys.stdin:
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    if "JobId" not in f:
        continue
    code = f.get("ExitCode", "0:0").split(":")
    ex = code[0] if code[1] == "0" else "sig" + code[1]
    print(f["JobId"], f.get("JobName", "?"), f.get("JobState", "?"), ex)'
    else
        "$CORRAL" jobs --all --limit 1000 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
for j in d.get("items", []):
    st = j["state"].upper()
    st = {"COMPLETED": "COMPLETED", "FAILED": "FAILED", "CANCELLED": "CANCELLED"}.get(st, st)
    ex = j.get("exit_code")
    sig = j.get("signal") or 0
    ex = "sig%d" % sig if sig else str(ex if ex is not None else 0)
    print(j["id"], j.get("name", "?"), st, ex)'
    fi
}

active() {
    jobs_now | awk -v floor="$1" '$1 + 0 > floor && $3 != "COMPLETED" && $3 != "FAILED" &&
        $3 != "CANCELLED" && $3 != "TIMEOUT" && $3 != "OUT_OF_MEMORY" && $3 != "NODE_FAIL"' |
        grep -q .
}

cases=("$@")
if [ ${#cases[@]} = 0 ]; then
    for d in "$corpus"/*/; do cases+=("$(basename "$d")"); done
fi

for c in "${cases[@]}"; do
    src=$corpus/$c
    [ -f "$src/job.sh" ] || { echo "run_corpus.sh: no case $c" >&2; exit 2; }
    w=$out/wd/$c
    rm -rf "$w"
    cp -r "$src" "$w"
    floor=$(jobs_now | awk 'BEGIN { m = 0 } { if ($1 + 0 > m) m = $1 + 0 } END { print m }')
    (
        cd "$w" || exit 1
        if [ -f submit.sh ]; then
            bash submit.sh
        else
            $SBATCH job.sh
        fi
    ) >"$out/$c.stdout" 2>"$out/$c.stderr"
    rc=$?
    end=$((SECONDS + timeout_s))
    while active "$floor" && [ $SECONDS -lt $end ]; do sleep 0.2; done
    {
        [ $rc = 0 ] && echo "submit: ok" || echo "submit: refused"
        if active "$floor"; then echo "timeout: jobs still active after ${timeout_s}s"; fi
        # (a refused submit may leave a failed record behind: Slurm's does)
        [ $rc != 0 ] || jobs_now | awk -v floor="$floor" '$1 + 0 > floor { print "job", $2, $3, $4 }' |
            sort
        (cd "$w" && find . -type f ! -name '.keep' | sed -e 's|^\./||' -e 's/[0-9][0-9]*/N/g' | sort |
            sed 's/^/file /')
        (cd "$w" && find . -type f -name '*.facts' | sort | while read -r f; do
            echo "== $f"
            cat "$f"
        done)
        (cd "$w" && find . -type f ! -name '*.facts' | sort | while read -r f; do
            if grep -q '^FACT:' "$f" 2>/dev/null; then
                echo "== $(echo "$f" | sed 's/[0-9][0-9]*/N/g')"
                grep '^FACT:' "$f"
            fi
        done)
    } >"$out/$c.result"
    echo "$sys $c: $(head -1 "$out/$c.result")"
done
