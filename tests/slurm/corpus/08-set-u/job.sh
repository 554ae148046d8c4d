#!/bin/bash
#SBATCH -J c08 --gres=gpu:1 -c 1
#SBATCH -o c08.out
set -euo pipefail
# Fails at once if one of these is unset.
echo "$SLURM_JOB_ID $SLURM_SUBMIT_DIR $SLURM_CPUS_PER_TASK $SLURM_JOB_NODELIST" > /dev/null
echo "ok" > setu.facts
