#!/bin/bash
#SBATCH -J c09 --ntasks=2 --gres=gpu:2
#SBATCH -o c09.out
# Job steps one after another: each its own step id.
srun -n1 sh -c 'echo "first $SLURM_STEP_ID $SLURM_NTASKS"' > steps.facts
srun -n2 sh -c 'echo "second $SLURM_STEP_ID $SLURM_PROCID"' | sort >> steps.facts
srun sh -c 'echo "third $SLURM_STEP_ID $SLURM_STEP_NUM_TASKS"' | sort -u >> steps.facts
