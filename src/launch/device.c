/* device.c - see device.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "launch/device.h"

/* the i-th entry of a comma list, or "" */
static void nth(const char *list, int i, char *out, size_t n)
{
    out[0] = '\0';
    for (int k = 0; list && *list; k++) {
        size_t len = strcspn(list, ",");
        if (k == i) {
            snprintf(out, n, "%.*s", (int)len, list);
            return;
        }
        list += len + (list[len] == ',');
    }
}

static int count(const char *list)
{
    if (!list || !*list) return 0;
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    return n;
}

dt_status_t dt_device_map(const struct dt_world *w, struct dt_devmap *d)
{
    *d = (struct dt_devmap){.ordinal = -1};
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    const char *ids = getenv("SLURM_STEP_GPUS");
    const char *ids_name = "SLURM_STEP_GPUS";
    if (!ids || !*ids) {
        ids = getenv("SLURM_JOB_GPUS");
        ids_name = "SLURM_JOB_GPUS";
    }
    /* "NoDevFiles" and "-1" are how Slurm and users say "none" */
    if (cvd && (!*cvd || !strcmp(cvd, "NoDevFiles") || !strcmp(cvd, "-1"))) cvd = NULL;
    d->visible = count(cvd);
    if (cvd && ids && *ids) snprintf(d->source, sizeof d->source, "CUDA_VISIBLE_DEVICES=%s, %s=%s", cvd, ids_name, ids);
    else if (cvd) snprintf(d->source, sizeof d->source, "CUDA_VISIBLE_DEVICES=%s", cvd);
    if (d->visible == 0) return DT_SUCCESS;
    /* one GPU each, unless the node has fewer GPUs than ranks (--gres=gpu:1 with 2 tasks) */
    const char *on_node = getenv("SLURM_GPUS_ON_NODE");
    int node_gpus = on_node && *on_node ? atoi(on_node) : 0;
    if (node_gpus > 0 && node_gpus < w->local_size)
        return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: %d ranks on this node but the step has %d GPU%s here "
                        "(SLURM_GPUS_ON_NODE=%d; %s), so ranks would share a GPU\n  hint: ask for one GPU per task "
                        "(srun --gpus-per-task=1) or as many tasks per node as GPUs (--ntasks-per-node)",
                        w->rank, w->local_size, node_gpus, node_gpus > 1 ? "s" : "", node_gpus, d->source);
    if (d->visible == 1) d->ordinal = 0;
    else if (d->visible >= w->local_size) d->ordinal = w->local_rank;
    else
        return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: %d ranks on this node but only %d GPUs visible to each "
                        "(%s), so ranks would share a GPU\n  hint: ask for one GPU per task (srun --gpus-per-task=1) "
                        "or as many tasks per node as GPUs (--ntasks-per-node)",
                        w->rank, w->local_size, d->visible, d->source);
    /* with cgroup confinement CUDA_VISIBLE_DEVICES is renumbered from 0; the Slurm list keeps node ids */
    if (ids && count(ids) == d->visible) nth(ids, d->ordinal, d->id, sizeof d->id);
    else nth(cvd, d->ordinal, d->id, sizeof d->id);
    return DT_SUCCESS;
}

void dt_device_describe(const struct dt_devmap *d, char *buf, size_t n)
{
    if (d->ordinal < 0) snprintf(buf, n, "cpu (no GPU visible)");
    else snprintf(buf, n, "cuda:%d (GPU %s of the node; %s)", d->ordinal, d->id, d->source);
}
