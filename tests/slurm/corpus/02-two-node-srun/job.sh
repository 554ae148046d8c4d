#!/bin/bash
#SBATCH -J c02 --nodes=2 --ntasks-per-node=4 --gres=gpu:4
#SBATCH -o %x-%j.out
# The standard multi-node training script: the body once, srun 8 tasks.
echo "body ntasks=$SLURM_NTASKS tpn=$SLURM_TASKS_PER_NODE nnodes=$SLURM_NNODES procid=$SLURM_PROCID" > body.facts
srun sh -c 'echo "$SLURM_PROCID $SLURM_NODEID $SLURM_LOCALID"' | sort -n > ranks.facts
