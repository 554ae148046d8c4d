#!/bin/bash
#SBATCH -J c24 --nodes=2 --gpus-per-node=2 --ntasks-per-node=2
#SBATCH -o c24.out
# GPUs asked per node (--gpus-per-node), tasks per node, srun across both.
echo "ntasks=$SLURM_NTASKS nnodes=$SLURM_JOB_NUM_NODES tpn=$SLURM_NTASKS_PER_NODE" > alloc.facts
srun bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS node $SLURM_NODEID"' | sort -k2n > tasks.facts
