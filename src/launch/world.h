/*
 * world.h - who this process is in the job: rank, size, local rank and size,
 * node index and count, job/step ids and restart count.
 *
 * Sources, first found wins, each cross-checked against the others present:
 *   pmix    PMIx_Get of PMIX_JOB_SIZE, PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE,
 *           PMIX_NODEID, PMIX_NUM_NODES (there are no such environment
 *           variables); served by `srun --mpi=pmix` and by Open MPI's mpirun
 *   slurm   step-level SLURM_* (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
 *           SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_NODES,
 *           SLURM_STEP_TASKS_PER_NODE), never the job-level SLURM_NTASKS
 *   mpirun  OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
 *   single  one process
 * Ranks of a multi-task step must be able to find each other: a Slurm step
 * of several tasks without PMIx is refused with the fix (REFERENCE.md 7, 14-18).
 */
#ifndef DT_WORLD_H
#define DT_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include "core/status.h"

enum dt_world_source { DT_WORLD_SINGLE, DT_WORLD_SLURM, DT_WORLD_MPIRUN, DT_WORLD_PMIX };

struct dt_world {
    int rank, size, local_rank, local_size, node, nnodes;
    char job_id[32], step_id[32];
    int restarts;
    enum dt_world_source source;
};

/* From the environment and, when a PMIx server is there, from PMIx. */
dt_status_t dt_world_discover(struct dt_world *w);
/* The environment only (no PMIx): what the cross-checks compare PMIx against. */
dt_status_t dt_world_from_env(struct dt_world *w, bool pmix_present);
const char *dt_world_source_str(enum dt_world_source s);
/* "rank 1/4 (local 1/2, node 0/2) from pmix; Slurm job 12 step 3, restart 0" */
void dt_world_describe(const struct dt_world *w, char *buf, size_t n);

/* PMIx queries (launch/pmix.c; world_reg.c says whether it is compiled in). */
bool dt_pmix_compiled(void);
dt_status_t dt_pmix_world(struct dt_world *w);
/* The key-value bootstrap (put, commit, fence collecting data, get): rank root's n bytes
 * reach every rank under key; how NCCL's ncclUniqueId travels. Waits at most timeout_s. */
dt_status_t dt_pmix_share(const char *key, void *blob, size_t n, int root, int timeout_s);
/* A fence without data: every rank of the job has reached it (`what` names it in the error). */
dt_status_t dt_pmix_barrier(const char *what, int timeout_s);
void dt_pmix_finalize(void);

#endif
