/*
 * alloc.h - the geometry of the Slurm allocation this process runs in, from
 * the job-level environment (read by `dtrun check` and the srun wrapper to
 * fill compute.num_nodes / num_devices "auto"). Rank discovery inside a step
 * is world.c's job.
 */
#ifndef DT_ALLOC_H
#define DT_ALLOC_H

#include "config/resolve.h"
#include "launch/world.h"

/* An integer environment variable: -1 when unset or empty, -2 when not a number in [0, 1e8]. */
int dt_env_int(const char *name);
/* Fill nodes / tasks_per_node / source from SLURM_* (zeros outside an allocation). */
void dt_alloc_geometry(struct dt_geometry *geo);
/* The geometry of the step this process was launched in (ranks, nodes, per node). */
void dt_step_geometry(const struct dt_world *w, struct dt_geometry *geo);
/* Parse Slurm's compressed per-node counts ("2(x3),1") into out[0..max); returns the
 * number of nodes described, or -1 when the text is malformed. */
int dt_slurm_counts_parse(const char *s, int *out, int max);

#endif
