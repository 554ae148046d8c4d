#!/bin/bash
#SBATCH -J c26 --ntasks=4 --time=00:10:00
#SBATCH -o c26.out
# An MPI-style CPU job: only a task count, no node count, no GPU.
echo "ntasks=$SLURM_NTASKS nprocs=$SLURM_NPROCS" > mpi.facts
srun bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS"' | sort -k2n >> mpi.facts
srun --ntasks=2 bash -c 'echo "sub $SLURM_PROCID of $SLURM_NTASKS"' | sort -k2n >> mpi.facts
