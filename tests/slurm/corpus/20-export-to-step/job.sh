#!/bin/bash
#SBATCH -J c20 --gres=gpu:1
#SBATCH -o c20.out
# What the script exports reaches its steps.
export STAGE=finetune
srun -n1 sh -c 'echo "stage=$STAGE"' > export.facts
