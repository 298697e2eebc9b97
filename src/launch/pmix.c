/*
 * pmix.c - the PMIx client: rank, sizes and node from the PMIx server that
 * `srun --mpi=pmix` or mpirun runs beside each process. PMIx stays
 * initialized for the key-value bootstrap until dt_pmix_finalize.
 */
#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include "core/error.h"
#include "launch/world.h"

static pmix_proc_t me;
static bool initialized;

static dt_status_t get_u32(const pmix_proc_t *who, const char *key, uint32_t *out)
{
    pmix_value_t *val = NULL;
    pmix_status_t rc = PMIx_Get(who, key, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || !val)
        return dt_error(DT_ERR_COMM, "dtrun: error: PMIx_Get(%s) failed: %s\n  hint: the PMIx server did not "
                        "publish the job layout; check the launcher (srun --mpi=pmix, or mpirun)", key,
                        PMIx_Error_string(rc));
    switch (val->type) {
    case PMIX_UINT32: *out = val->data.uint32; break;
    case PMIX_UINT16: *out = val->data.uint16; break;
    case PMIX_INT: *out = (uint32_t)val->data.integer; break;
    case PMIX_PROC_RANK: *out = val->data.rank; break;
    default: {
        int type = val->type;
        PMIX_VALUE_RELEASE(val);
        return dt_error(DT_ERR_COMM, "dtrun: error: PMIx_Get(%s) returned type %d, not a number", key, type);
    }
    }
    PMIX_VALUE_RELEASE(val);
    return DT_SUCCESS;
}

dt_status_t dt_pmix_world(struct dt_world *w)
{
    if (!initialized) {
        pmix_status_t rc = PMIx_Init(&me, NULL, 0);
        if (rc != PMIX_SUCCESS)
            return dt_error(DT_ERR_COMM, "dtrun: error: PMIx_Init failed: %s\n  hint: PMIX_* variables are set but "
                            "no PMIx server answers; start dtrun through srun --mpi=pmix or mpirun",
                            PMIx_Error_string(rc));
        initialized = true;
    }
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    memcpy(job.nspace, me.nspace, sizeof job.nspace);
    job.rank = PMIX_RANK_WILDCARD;
    uint32_t size, lrank, lsize, node, nnodes;
    DT_CHECK(get_u32(&job, PMIX_JOB_SIZE, &size));
    DT_CHECK(get_u32(&me, PMIX_LOCAL_RANK, &lrank));
    DT_CHECK(get_u32(&job, PMIX_LOCAL_SIZE, &lsize));
    DT_CHECK(get_u32(&me, PMIX_NODEID, &node));
    if (get_u32(&job, PMIX_NUM_NODES, &nnodes) != DT_SUCCESS) nnodes = (size + lsize - 1) / lsize;
    w->rank = (int)me.rank;
    w->size = (int)size;
    w->local_rank = (int)lrank;
    w->local_size = (int)lsize;
    w->node = (int)node;
    w->nnodes = (int)nnodes;
    return DT_SUCCESS;
}

void dt_pmix_finalize(void)
{
    if (initialized) PMIx_Finalize(NULL, 0);
    initialized = false;
}
