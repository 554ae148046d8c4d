#!/bin/bash
#SBATCH -J c18 --nodes=2 --ntasks-per-node=1 --gres=gpu:1
#SBATCH -o c18.out
echo "hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | wc -l) nnodes=$SLURM_JOB_NUM_NODES" > hosts.facts
srun --ntasks-per-node=1 sh -c 'echo "node $SLURM_NODEID"' | sort > nodes.facts
