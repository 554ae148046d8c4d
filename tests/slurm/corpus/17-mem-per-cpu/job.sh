#!/bin/bash
#SBATCH -J c17 -c 2 --mem-per-cpu=512M --gres=gpu:1
#SBATCH -o c17.out
echo "cpus=$SLURM_CPUS_PER_TASK mem_per_cpu=$SLURM_MEM_PER_CPU" > mem.facts
