#!/bin/bash
#SBATCH -J c03 --array=1-5%3 --gres=gpu:1
#SBATCH -o c03-%A_%a.out
echo "task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX" > "task-$SLURM_ARRAY_TASK_ID.facts"
