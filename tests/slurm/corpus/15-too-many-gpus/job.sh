#!/bin/bash
#SBATCH -J c15 --nodes=1 --gres=gpu:9
# More GPUs on one node than any node has: refused at submit.
echo "should not run" > ran.facts
