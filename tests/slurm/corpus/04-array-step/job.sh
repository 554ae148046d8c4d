#!/bin/bash
#SBATCH -J c04 --array=0-6:2 --gres=gpu:1
#SBATCH -o /dev/null
echo "task=$SLURM_ARRAY_TASK_ID step=$SLURM_ARRAY_TASK_STEP count=$SLURM_ARRAY_TASK_COUNT" > "t$SLURM_ARRAY_TASK_ID.facts"
