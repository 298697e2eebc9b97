#!/bin/bash
# dtrun on several nodes. Runs as it is: `sbatch multi-node.sh [CONFIG] [key=value ...]` (no
# CONFIG: dtrun's built-in default). `dtrun submit CONFIG` fills the #SBATCH lines in from the
# config (compute.num_nodes, compute.num_devices, compute.device, slurm.*) and names the dtrun,
# config and overrides below them. On GPU nodes add --gpus-per-task=1 (submit does for
# compute.device: cuda) and as many tasks per node as GPUs.
# --signal: 120 s before the time limit every task gets SIGUSR1: dtrun saves a checkpoint at a step boundary
# and requeues the job, which resumes from it; append keeps the first run's output
#SBATCH --job-name=dtrun
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --time=01:00:00
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=dtrun-%j.out
set -eu
# each task learns its rank, node and GPU from Slurm and PMIx; a task that dies ends the step at
# once instead of leaving the others waiting in a collective
exec srun --mpi=pmix --kill-on-bad-exit=1 "${DTRUN:-dtrun}" run "$@"
