mkdir -p logs
$SBATCH job.sh > /dev/null
