#!/bin/bash
#SBATCH --job-name=c32
#SBATCH --gres=gpu:1
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=someone@example.org
#SBATCH --comment="nightly eval"
#SBATCH --nice=10
#SBATCH --output=c32.out
# Options a site's template carries that change nothing here.
echo "ran with name $SLURM_JOB_NAME" > misc.facts
