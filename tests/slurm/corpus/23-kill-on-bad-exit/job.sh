#!/bin/bash
#SBATCH -J c23 --ntasks=2 --gres=gpu:2
#SBATCH -o c23.out
# One task fails: -K stops the other, the step fails.
srun -K -n2 sh -c 'if [ "$SLURM_PROCID" = 1 ]; then exit 2; fi; sleep 60'
echo "failed=$([ $? -ne 0 ] && echo yes || echo no)" > kill.facts
