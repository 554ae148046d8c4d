#!/bin/bash
#SBATCH -J c29 --gres=gpu:1 -t 1-00:00:00
#SBATCH -o c29.out
echo "day limit ran" > time.facts
