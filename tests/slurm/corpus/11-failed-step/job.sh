#!/bin/bash
#SBATCH -J c11 --gres=gpu:1
#SBATCH -o c11.out
# A step that fails: srun's exit code is the task's; the script goes on.
srun -n1 sh -c 'exit 3'
echo "rc=$?" > rc.facts
