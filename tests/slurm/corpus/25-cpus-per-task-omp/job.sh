#!/bin/bash
#SBATCH -J c25 --ntasks=1 --cpus-per-task=4 --gres=gpu:1
#SBATCH -o c25.out
# An OpenMP-style step: threads from --cpus-per-task.
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
echo "omp=$OMP_NUM_THREADS cpt=$SLURM_CPUS_PER_TASK ntasks=$SLURM_NTASKS" > omp.facts
srun bash -c 'echo "step omp=$OMP_NUM_THREADS cpt=$SLURM_CPUS_PER_TASK"' >> omp.facts
