# One-liners with --wrap, and a script piped to sbatch on stdin.
$SBATCH -J c27wrap -o wrap.out --gres=gpu:1 --wrap="echo wrapped \$SLURM_JOB_NAME > wrap.facts" > /dev/null
$SBATCH -o stdin.out --gres=gpu:1 <<'SCRIPT' > /dev/null
#!/bin/bash
#SBATCH -J c27stdin
echo "from stdin $SLURM_JOB_NAME" > stdin.facts
SCRIPT
