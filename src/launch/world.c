/* world.c - see world.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "launch/alloc.h"
#include "launch/world.h"

const char *dt_world_source_str(enum dt_world_source s)
{
    static const char *const names[] = {"single", "slurm", "mpirun", "pmix"};
    return names[s];
}


static void env_str(char *dst, size_t n, const char *name)
{
    const char *v = getenv(name);
    snprintf(dst, n, "%s", v ? v : "");
}

static dt_status_t from_slurm(struct dt_world *w, bool pmix_present)
{
    int size = dt_env_int("SLURM_STEP_NUM_TASKS");
    if (size < 1) size = 1;
    if (size > 1 && !pmix_present && getenv("PMIX_RANK"))
        return dt_error(DT_ERR_COMM, "dtrun: error: srun started %d tasks with PMIx, but this dtrun was built without "
                        "PMIx, so they cannot find each other\n  hint: install libpmix-dev and rebuild dtrun", size);
    if (size > 1 && !pmix_present)
        return dt_error(DT_ERR_COMM, "dtrun: error: srun started %d tasks without PMIx, so they cannot find each other "
                        "(each would train alone)\n  hint: run `srun --mpi=pmix dtrun ...`, or set MpiDefault=pmix "
                        "in slurm.conf; `srun --mpi=list` shows what this cluster has", size);
    w->source = DT_WORLD_SLURM;
    w->rank = dt_env_int("SLURM_PROCID");
    w->size = size;
    w->local_rank = dt_env_int("SLURM_LOCALID");
    w->node = dt_env_int("SLURM_NODEID");
    w->nnodes = dt_env_int("SLURM_STEP_NUM_NODES");
    if (w->rank < 0 || w->local_rank < 0 || w->node < 0 || w->nnodes < 1 || w->rank >= w->size)
        return dt_error(DT_ERR_COMM, "dtrun: error: the Slurm step variables are incomplete or inconsistent "
                        "(SLURM_PROCID %s, SLURM_STEP_NUM_TASKS %s, SLURM_LOCALID %s, SLURM_NODEID %s, "
                        "SLURM_STEP_NUM_NODES %s)\n  hint: start dtrun through srun, not with copied variables",
                        getenv("SLURM_PROCID") ? getenv("SLURM_PROCID") : "unset",
                        getenv("SLURM_STEP_NUM_TASKS") ? getenv("SLURM_STEP_NUM_TASKS") : "unset",
                        getenv("SLURM_LOCALID") ? getenv("SLURM_LOCALID") : "unset",
                        getenv("SLURM_NODEID") ? getenv("SLURM_NODEID") : "unset",
                        getenv("SLURM_STEP_NUM_NODES") ? getenv("SLURM_STEP_NUM_NODES") : "unset");
    int counts[4096];
    const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
    int n = tpn ? dt_slurm_counts_parse(tpn, counts, 4096) : -1;
    if (n != w->nnodes || w->node >= n)
        return dt_error(DT_ERR_COMM, "dtrun: error: SLURM_STEP_TASKS_PER_NODE '%s' does not describe %d nodes\n"
                        "  hint: start dtrun through srun", tpn ? tpn : "unset", w->nnodes);
    w->local_size = counts[w->node];
    return DT_SUCCESS;
}

static dt_status_t from_mpirun(struct dt_world *w)
{
    w->source = DT_WORLD_MPIRUN;
    w->rank = dt_env_int("OMPI_COMM_WORLD_RANK");
    w->size = dt_env_int("OMPI_COMM_WORLD_SIZE");
    w->local_rank = dt_env_int("OMPI_COMM_WORLD_LOCAL_RANK");
    w->local_size = dt_env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (w->rank < 0 || w->size < 1 || w->local_rank < 0 || w->local_size < 1)
        return dt_error(DT_ERR_COMM, "dtrun: error: Open MPI's OMPI_COMM_WORLD_* variables are incomplete\n"
                        "  hint: start dtrun through mpirun, or through `dtrun -n N`");
    /* mpirun does not export a node index; ranks are placed by node, so derive it */
    w->node = w->rank / w->local_size;
    w->nnodes = (w->size + w->local_size - 1) / w->local_size;
    return DT_SUCCESS;
}

dt_status_t dt_world_from_env(struct dt_world *w, bool pmix_present)
{
    *w = (struct dt_world){.size = 1, .local_size = 1, .nnodes = 1};
    env_str(w->job_id, sizeof w->job_id, "SLURM_JOB_ID");
    env_str(w->step_id, sizeof w->step_id, "SLURM_STEP_ID");
    int restarts = dt_env_int("SLURM_RESTART_COUNT");
    w->restarts = restarts > 0 ? restarts : 0;
    if (getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID")) return from_slurm(w, pmix_present);
    if (getenv("OMPI_COMM_WORLD_RANK")) return from_mpirun(w);
    w->source = DT_WORLD_SINGLE;
    return DT_SUCCESS;
}

/* The same quantity from two sources must agree, or the job is miswired. */
static dt_status_t agree(const char *what, int pmix, int env, const struct dt_world *e)
{
    if (pmix == env) return DT_SUCCESS;
    return dt_error(DT_ERR_COMM, "dtrun: error: PMIx says %s %d but %s says %d\n  hint: the launcher and the "
                    "environment disagree; start dtrun with `srun --mpi=pmix` or mpirun without editing its variables",
                    what, pmix, dt_world_source_str(e->source), env);
}

/* The SPANK plugin (spank/) exports Slurm's own view of each task; it must be the world's. */
static dt_status_t agree_spank(const struct dt_world *w)
{
    if (!getenv("DTRUN_RANK")) return DT_SUCCESS;
    const struct {
        const char *var;
        int have;
        const char *what;
    } v[] = {{"DTRUN_RANK", w->rank, "rank"}, {"DTRUN_WORLD_SIZE", w->size, "world size"},
             {"DTRUN_LOCAL_RANK", w->local_rank, "local rank"}, {"DTRUN_LOCAL_WORLD_SIZE", w->local_size, "local size"},
             {"DTRUN_NODE_RANK", w->node, "node"}, {"DTRUN_NUM_NODES", w->nnodes, "node count"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int e = dt_env_int(v[i].var);
        if (e == -1) continue; /* the batch step has no node count, for one */
        if (e != v[i].have)
            return dt_error(DT_ERR_COMM, "dtrun: error: the dtrun SPANK plugin says %s=%s (from Slurm) but %s says %s %d"
                            "\n  hint: the task's environment was changed after Slurm started it; start dtrun with "
                            "`srun --mpi=pmix` and leave the DTRUN_* variables alone", v[i].var, getenv(v[i].var),
                            dt_world_source_str(w->source), v[i].what, v[i].have);
    }
    return DT_SUCCESS;
}

dt_status_t dt_world_discover(struct dt_world *w)
{
    /* a PMIx server without the client library compiled in: the environment has to do */
    bool pmix_present = (getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE")) && dt_pmix_compiled();
    struct dt_world env;
    DT_CHECK(dt_world_from_env(&env, pmix_present));
    *w = env;
    if (!pmix_present) return env.source == DT_WORLD_SLURM ? agree_spank(w) : DT_SUCCESS;
    DT_CHECK(dt_pmix_world(w));
    w->source = DT_WORLD_PMIX;
    if (env.source != DT_WORLD_SINGLE) {
        DT_CHECK(agree("rank", w->rank, env.rank, &env));
        DT_CHECK(agree("the world size", w->size, env.size, &env));
        DT_CHECK(agree("the local rank", w->local_rank, env.local_rank, &env));
        DT_CHECK(agree("the local size", w->local_size, env.local_size, &env));
    }
    return env.source == DT_WORLD_SLURM ? agree_spank(w) : DT_SUCCESS;
}

void dt_world_describe(const struct dt_world *w, char *buf, size_t n)
{
    int o = snprintf(buf, n, "rank %d/%d (local %d/%d, node %d/%d) from %s", w->rank, w->size, w->local_rank,
                     w->local_size, w->node, w->nnodes, dt_world_source_str(w->source));
    if (w->job_id[0] && o > 0 && (size_t)o < n)
        snprintf(buf + o, n - (size_t)o, "; Slurm job %s step %s, restart %d", w->job_id,
                 w->step_id[0] ? w->step_id : "-", w->restarts);
}
