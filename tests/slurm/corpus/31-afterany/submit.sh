# A clean-up that runs whatever the first job's end (afterany).
a=$($SBATCH --parsable job.sh)
$SBATCH -J c31b -o b.out --gres=gpu:1 --dependency=afterany:${a%%;*} --wrap="echo cleanup ran > cleanup.facts" > /dev/null
