#!/bin/bash
#SBATCH -J c07 -c 2 --mem=1G
#SBATCH -o c07.out
# A CPU preprocessing step: no --gres, so no GPU.
echo "cpus=$SLURM_CPUS_PER_TASK gpus=${CUDA_VISIBLE_DEVICES:-none}" > cpu.facts
