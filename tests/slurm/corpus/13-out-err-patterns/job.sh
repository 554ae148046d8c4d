#!/bin/bash
#SBATCH -J c13 --gres=gpu:1
#SBATCH -o %x-%j.out
#SBATCH -e %x-%j.err
echo "FACT: to stdout"
echo "FACT: to stderr" >&2
