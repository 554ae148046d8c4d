#!/bin/bash
#SBATCH -J c14 --gres=gpu:1
#SBATCH -o log.out --open-mode=append
echo "FACT: new line"
