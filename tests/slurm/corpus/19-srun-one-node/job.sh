#!/bin/bash
#SBATCH -J c19 --nodes=2 --ntasks-per-node=2 --gres=gpu:2
#SBATCH -o c19.out
# A step on the first node only, then one spread with -l labels.
srun -N1 -n1 sh -c 'echo "one $SLURM_NODEID $SLURM_STEP_NUM_NODES"' > one.facts
srun -l -n2 -N2 sh -c 'echo node$SLURM_NODEID' | sort > label.facts
