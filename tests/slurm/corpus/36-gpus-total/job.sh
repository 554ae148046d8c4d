#!/bin/bash
#SBATCH -J c36 -G 2
#SBATCH -o c36.out
# GPUs in all (-G/--gpus), and the GPU variables a script reads.
{
    echo "gpus=${SLURM_GPUS:-unset} on_node=${SLURM_GPUS_ON_NODE:-unset} nnodes=$SLURM_JOB_NUM_NODES"
    echo "job_gpus=${SLURM_JOB_GPUS:-unset}"
} > gpus.facts
