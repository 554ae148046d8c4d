#!/bin/bash
#SBATCH -J c21 --gres=gpu:1
#SBATCH -o logs/c21.out
# Relative paths resolve in the submit directory.
mkdir -p out
cp input.txt out/copy.txt
wc -l < out/copy.txt > rel.facts
echo "FACT: logged"
