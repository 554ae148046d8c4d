#!/bin/bash
#SBATCH -J c33 --array=1-2 --gres=gpu:1
#SBATCH -o logs/%x_%A_%a.out
#SBATCH -e logs/%x_%A_%a.err
# Output into an existing subdirectory of the submit directory.
echo "FACT: out $SLURM_ARRAY_TASK_ID"
echo "FACT: err $SLURM_ARRAY_TASK_ID" >&2
