/*
 * device.h - which GPU each rank drives, from what the scheduler made visible
 * (REFERENCE.md problems 1-3, 5, 6):
 *   one GPU visible (srun --gpus-per-task=1; with cgroups it is renumbered 0)
 *       -> ordinal 0
 *   at least as many visible as ranks on the node (--gres=gpu:N, one task per GPU)
 *       -> ordinal local_rank
 *   fewer visible than ranks on the node -> refused: ranks would share a GPU
 *   none -> the CPU
 * CUDA_VISIBLE_DEVICES lists what this process sees; SLURM_STEP_GPUS (or
 * SLURM_JOB_GPUS in a batch step) the node's GPU ids, for the printout.
 */
#ifndef DT_DEVICE_H
#define DT_DEVICE_H

#include <stddef.h>
#include "core/status.h"
#include "launch/world.h"

struct dt_devmap {
    int ordinal;      /* CUDA device ordinal in this process; -1: CPU */
    int visible;      /* how many GPUs this process sees */
    char id[32];      /* the node's id of that GPU ("3"), or "" */
    char source[160]; /* the variables it came from */
};

dt_status_t dt_device_map(const struct dt_world *w, struct dt_devmap *d);
/* "cuda:0 (GPU 1 of the node; CUDA_VISIBLE_DEVICES=1, SLURM_STEP_GPUS=1)" or "cpu (no GPU visible)" */
void dt_device_describe(const struct dt_devmap *d, char *buf, size_t n);

#endif
