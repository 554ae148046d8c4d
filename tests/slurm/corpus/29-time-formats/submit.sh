# --time in Slurm's formats: D-HH:MM:SS, MM, MM:SS, HH:MM:SS, D-HH.
$SBATCH job.sh > /dev/null
for t in 90 5:30 02:00:00 2-12; do
    $SBATCH -J "c29-$t" -o "t-$t.out" --gres=gpu:1 --time="$t" --wrap="echo ran > t-${t//:/_}.facts" > /dev/null
done
