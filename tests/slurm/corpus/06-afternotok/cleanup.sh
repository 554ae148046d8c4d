#!/bin/bash
#SBATCH -J c06b -o b.out
echo cleaned >> chain.facts
