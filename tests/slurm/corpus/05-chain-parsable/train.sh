#!/bin/bash
#SBATCH -J c05b --gres=gpu:2 -o b.out
grep -q prepared chain.facts && echo trained >> chain.facts
