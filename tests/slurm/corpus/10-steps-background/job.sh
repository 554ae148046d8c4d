#!/bin/bash
#SBATCH -J c10 --ntasks=2 --gres=gpu:2
#SBATCH -o c10.out
# Two steps at once, a GPU each, then wait.
srun -n1 --gpus-per-task=1 sh -c 'echo "a $SLURM_STEP_NUM_TASKS"' > a.facts &
srun -n1 --gpus-per-task=1 sh -c 'echo "b $SLURM_STEP_NUM_TASKS"' > b.facts &
wait
echo "waited" > wait.facts
