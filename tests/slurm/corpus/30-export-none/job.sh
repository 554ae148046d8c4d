#!/bin/bash
#SBATCH -J c30 --gres=gpu:1 -o c30-%x.out
echo "name=$SLURM_JOB_NAME mine=${MY_SETTING:-unset} extra=${EXTRA:-unset}" > "exp-$SLURM_JOB_NAME.facts"
