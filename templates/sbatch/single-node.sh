#!/bin/bash
# dtrun on one node. Runs as it is: `sbatch single-node.sh [CONFIG] [key=value ...]` (no CONFIG:
# dtrun's built-in default). `dtrun submit CONFIG` fills the #SBATCH lines in from the config
# (compute.* and slurm.*) and names the dtrun, config and overrides below them.
# --signal: 120 s before the time limit every task gets SIGUSR1: dtrun saves a checkpoint at a step boundary
# and requeues the job, which resumes from it; append keeps the first run's output
#SBATCH --job-name=dtrun
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=01:00:00
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=dtrun-%j.out
set -eu
# each task learns its rank from Slurm and PMIx; a task that dies ends the step at once
exec srun --mpi=pmix --kill-on-bad-exit=1 "${DTRUN:-dtrun}" run "$@"
