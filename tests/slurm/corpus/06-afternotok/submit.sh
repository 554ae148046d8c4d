# A clean-up job that runs only when the first one failed.
a=$($SBATCH --parsable job.sh)
$SBATCH --parsable --dependency=afternotok:${a%%;*} cleanup.sh > /dev/null
