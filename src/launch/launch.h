/*
 * launch.h - the modes that start other dtrun processes (DESIGN.md, modes):
 * the local launcher (`dtrun -n N`), the srun wrapper (`dtrun CONFIG`
 * inside an allocation, outside a step) and `dtrun submit` (an sbatch script).
 */
#ifndef DT_LAUNCH_H
#define DT_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "config/config.h"
#include "core/status.h"

/* Run `dtrun ARGV...` as n workers through mpirun; *exit_code is the job's (the first failing
 * worker's code, 128+signal when one was killed). */
dt_status_t dt_launch_local(int n, int argc, char **argv, int *exit_code);
/* A worker of the local launcher notes the step it is in (1-based; 0 before the first, -N at exit
 * after step N) on the launcher's step board, so that the launcher can say in which step a rank
 * died; a store to shared memory, nothing elsewhere (under srun, Slurm's records say it). */
void dt_launch_note_step(int rank, int64_t step);

/* In an allocation (SLURM_JOB_ID) but not in a step, not under a launcher, and
 * DTRUN_NO_SRUN unset: the srun wrapper applies. */
bool dt_srun_wanted(void);
/* Replace this process by `srun --mpi=pmix --kill-on-bad-exit=1 --nodes=N --ntasks-per-node=M
 * [--gpus-per-task=1] dtrun run ARGV...`; with dry_run print that line and return. */
dt_status_t dt_srun(const struct dt_config *cfg, int argc, char **argv, bool dry_run);
/* s as a POSIX shell reads it back as one word */
void dt_shell_quote(FILE *f, const char *s);

/* `dtrun submit CONFIG [key=value ...] [--dry-run] [-- SBATCH-OPTIONS...]`: the sbatch template
 * (slurm.template, or templates/sbatch/{single,multi}-node.sh) with its #SBATCH lines filled in
 * from the resolved config, written to run.dir/sbatch.sh and given to sbatch, which prints the job
 * id; with dry_run only printed. config: the CONFIG path as given (NULL: the built-in default). */
dt_status_t dt_submit(const struct dt_config *cfg, const char *config, int noverrides, char *const *overrides,
                      int nsbatch, char *const *sbatch_args, bool dry_run);

#endif
