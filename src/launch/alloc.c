/* alloc.c - see alloc.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "launch/alloc.h"

int dt_slurm_counts_parse(const char *s, int *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1000000) return -1;
        long rep = 1;
        s = end;
        if (*s == '(') {
            if (s[1] != 'x') return -1;
            rep = strtol(s + 2, &end, 10);
            if (end == s + 2 || *end != ')' || rep < 1 || rep > 1000000) return -1;
            s = end + 1;
        }
        for (long i = 0; i < rep; i++) {
            if (n < max) out[n] = (int)v;
            n++;
        }
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

int dt_env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0 || x > 100000000) ? -2 : (int)x;
}

/* a count from the environment, 0 when unknown */
static int env_count(const char *name)
{
    int n = dt_env_int(name);
    return n > 0 ? n : 0;
}

void dt_alloc_geometry(struct dt_geometry *geo)
{
    geo->nodes = env_count("SLURM_JOB_NUM_NODES");
    if (!geo->nodes) geo->nodes = env_count("SLURM_NNODES");
    geo->tasks_per_node = 0;
    const char *tpn = getenv("SLURM_TASKS_PER_NODE");
    int counts[1];
    if (tpn && dt_slurm_counts_parse(tpn, counts, 1) > 0) geo->tasks_per_node = counts[0];
    if (geo->nodes)
        snprintf(geo->source, sizeof geo->source, "Slurm job %s: %d node%s, %s tasks per node",
                 getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "?", geo->nodes, geo->nodes > 1 ? "s" : "",
                 tpn ? tpn : "?");
}

void dt_step_geometry(const struct dt_world *w, struct dt_geometry *geo)
{
    geo->ranks = w->size;
    geo->nodes = w->nnodes;
    geo->tasks_per_node = w->local_size;
    geo->even = w->local_size * w->nnodes == w->size;
    if (w->source == DT_WORLD_MPIRUN || (w->source == DT_WORLD_PMIX && !w->job_id[0]))
        snprintf(geo->source, sizeof geo->source, "mpirun");
    else
        snprintf(geo->source, sizeof geo->source, "Slurm step %s.%s", w->job_id, w->step_id[0] ? w->step_id : "?");
}
