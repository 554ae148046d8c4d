#!/bin/bash
#SBATCH -J c05a --gres=gpu:1 -o a.out
echo prepared > chain.facts
