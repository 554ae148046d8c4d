#!/bin/sh
# make demo: what a newcomer should see first.
# Until the cluster roles land, the demo is the advisor on the seed workloads.
set -eu
CORRAL=${1:-build/corral}
run() {
    echo
    echo "\$ corral $*"
    "$CORRAL" "$@"
}
echo "Corral demo: which GPU type suits each workload, and why."
run advise --kind pretrain --params 70b --tokens 2e12
run advise --kind finetune --method lora --params 7b --tokens 1e8
run advise --kind inference --params 70b --rate 10 --prompt 1000 --output 250 --ttft 500ms
run advise --kind visual --rate 30
run advise --kind hpc --needs fp64,ecc
