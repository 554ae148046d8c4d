#!/bin/bash
#SBATCH -J c31a --gres=gpu:1 -o a.out
echo "first fails" > first.facts
exit 3
