#!/bin/bash
#SBATCH -J c34 --ntasks=2 --gres=gpu:2
#SBATCH -o c34.out
# Two one-task steps side by side, each with one of the job's GPUs.
srun -n1 --gres=gpu:1 --exclusive bash -c 'echo "step a ntasks=$SLURM_NTASKS"' > a.facts &
srun -n1 --gres=gpu:1 --exclusive bash -c 'echo "step b ntasks=$SLURM_NTASKS"' > b.facts &
wait
echo "both done" > done.facts
