#!/bin/bash
#SBATCH -J c27main --gres=gpu:1 -o main.out
echo main > main.facts
