#!/bin/bash
#SBATCH -J c06a -o a.out
echo failing > chain.facts
exit 3
