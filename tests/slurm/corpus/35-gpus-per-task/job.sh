#!/bin/bash
#SBATCH -J c35 --ntasks=2 --gpus-per-task=1
#SBATCH -o c35.out
# One GPU per task (--gpus-per-task), the tasks started by srun.
echo "ntasks=$SLURM_NTASKS gpt=$SLURM_GPUS_PER_TASK" > gpt.facts
srun bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS"' | sort -k2n >> gpt.facts
