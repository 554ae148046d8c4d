#!/bin/bash
#SBATCH -J c22 --array=3,5,9 --gres=gpu:1
#SBATCH -o /dev/null
echo "task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX" > "t$SLURM_ARRAY_TASK_ID.facts"
