/*
 * resolve.h - fill every "auto" and check what must agree, before anything is
 * allocated (phase 1 of REFERENCE.md B2; the model dimensions are config, so
 * Hugging Face's phase-2 values such as reduce_bucket_size = n_embd^2 are
 * known here too). The geometry comes from the launcher layer (src/launch).
 */
#ifndef DT_RESOLVE_H
#define DT_RESOLVE_H

#include "config/config.h"

struct dt_geometry {
    int nodes;          /* 0: not known (no allocation) */
    int tasks_per_node; /* 0: not known */
    int gpus;           /* GPUs this process can use; 0: none */
    int ranks;          /* ranks the launcher started (a Slurm step, mpirun); 0: not launched */
    bool even;          /* ranks are spread evenly over nodes (tasks_per_node holds for every node) */
    char source[128];   /* where the numbers came from, for `dtrun check` */
    char gpu_note[160]; /* why there are no GPUs, when there are none */
};

dt_status_t dt_config_resolve(struct dt_config *cfg, const struct dt_geometry *geo);

#endif
