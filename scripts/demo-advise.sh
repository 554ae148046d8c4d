#!/bin/sh
# demo-advise.sh: the advisor on the six seed workloads.
# (docs/model.md explains the model behind every number)
set -eu
CORRAL=${1:-build/corral}
run() {
    echo
    echo "\$ corral $* --top 8"
    "$CORRAL" "$@" --top 8
}
echo "Corral demo: which GPU type suits each workload, and why."
echo "(prices: data/prices.csv; catalog: data/gpus/catalog.csv; the 8 best types of each;"
echo " 'corral advise --help' for flags, docs/model.md for the model)"
# 1. Pre-training a 70B model: NVLink-domain hardware, tp inside the node, dp across nodes.
run advise --kind pretrain --params 70b --tokens 2e12
# 2. LoRA fine-tuning of a 7B model: a PCIe card wins on cost; H100 is flagged as wasteful.
run advise --kind finetune --method lora --params 7b --tokens 1e8
# 3. 70B chat with a 500 ms time-to-first-token target: HBM cards, sized for the KV cache.
run advise --kind inference --params 70b --rate 10 --prompt 1000 --output 250 --ttft 500ms
# 4. Multi-stream video analytics: video engines and RT cores.
run advise --kind visual --streams 64 --needs nvenc,rt
# 5. FP64 molecular dynamics with ECC: L40S/A10 are refused for their FP64 rate.
run advise --kind hpc --needs fp64,ecc
# 6. Many small inference tenants: MIG slices.
run advise --kind inference --params 1b --rate 0.5 --tenants 7 --prompt 500 --output 200
