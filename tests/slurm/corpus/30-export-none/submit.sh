# What reaches the job of the submitting shell's environment. (Slurm's
# default is ALL; Corral's is an allow-list, issue 24, so ALL is named.)
export MY_SETTING=from-submit
$SBATCH -J all --export=ALL job.sh > /dev/null
$SBATCH -J none --export=NONE job.sh > /dev/null
$SBATCH -J plus --export=ALL,EXTRA=given job.sh > /dev/null
$SBATCH -J only --export=EXTRA=only job.sh > /dev/null
