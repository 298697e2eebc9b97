/*
 * launch.h - the modes that start other dtrun processes (DESIGN.md, modes):
 * the local launcher (`dtrun -n N`) and the srun wrapper (`dtrun CONFIG`
 * inside an allocation, outside a step).
 */
#ifndef DT_LAUNCH_H
#define DT_LAUNCH_H

#include <stdbool.h>
#include "config/config.h"
#include "core/status.h"

/* Run `dtrun ARGV...` as n workers through mpirun; *exit_code is the job's (the first failing
 * worker's code, 128+signal when one was killed). */
dt_status_t dt_launch_local(int n, int argc, char **argv, int *exit_code);

/* In an allocation (SLURM_JOB_ID) but not in a step, not under a launcher, and
 * DTRUN_NO_SRUN unset: the srun wrapper applies. */
bool dt_srun_wanted(void);
/* Replace this process by `srun --mpi=pmix --kill-on-bad-exit=1 --nodes=N --ntasks-per-node=M
 * [--gpus-per-task=1] dtrun run ARGV...`; with dry_run print that line and return. */
dt_status_t dt_srun(const struct dt_config *cfg, int argc, char **argv, bool dry_run);

#endif
