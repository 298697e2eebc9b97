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

#endif
