#!/bin/bash
#SBATCH -J c16 -p nosuchpart --gres=gpu:1
echo "should not run" > ran.facts
