# A pipeline built with --parsable and a dependency.
a=$($SBATCH --parsable job.sh)
case $a in *[!0-9\;a-z]*|'') echo "bad id '$a'" >&2; exit 1 ;; esac
$SBATCH --parsable --dependency=afterok:${a%%;*} train.sh > /dev/null
