#!/bin/bash
#SBATCH -J c28 --array=0-6:3 --gres=gpu:1
#SBATCH -o c28-%a.out
# Array bounds and step in the environment.
echo "task=$SLURM_ARRAY_TASK_ID min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX step=$SLURM_ARRAY_TASK_STEP count=$SLURM_ARRAY_TASK_COUNT" > "arr-$SLURM_ARRAY_TASK_ID.facts"
