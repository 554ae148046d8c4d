#!/bin/bash
#SBATCH --job-name=c01 --gres=gpu:1
# The plainest GPU job: default output file, the submit directory as the
# working directory. (GPU binding is not compared: the Slurm peer's GPUs
# are placeholder files, for which it sets no CUDA_VISIBLE_DEVICES.)
echo "FACT: name=$SLURM_JOB_NAME nnodes=$SLURM_NNODES ntasks=${SLURM_NTASKS:-unset}"
[ "$PWD" = "$SLURM_SUBMIT_DIR" ] && echo "cwd=submitdir" >> env.facts
echo "nodeid=$SLURM_NODEID procid=$SLURM_PROCID localid=$SLURM_LOCALID" >> env.facts
