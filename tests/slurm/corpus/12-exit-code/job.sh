#!/bin/bash
#SBATCH -J c12 --gres=gpu:1
#SBATCH -o c12.out
echo "FACT: about to fail"
exit 7
