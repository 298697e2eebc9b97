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

dt_status_t dt_pmix_share(const char *key, void *blob, size_t n, int root, int timeout_s)
{
    if (!initialized)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: the PMIx bootstrap was asked for before PMIx_Init");
    pmix_status_t rc;
    if ((int)me.rank == root) {
        pmix_value_t v;
        PMIX_VALUE_CONSTRUCT(&v);
        v.type = PMIX_BYTE_OBJECT;
        v.data.bo.bytes = blob;
        v.data.bo.size = n;
        rc = PMIx_Put(PMIX_GLOBAL, key, &v);
        if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS)
            return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: PMIx_Put/Commit of '%s' failed: %s", root, key,
                            PMIx_Error_string(rc));
    }
    pmix_proc_t all;
    PMIX_PROC_CONSTRUCT(&all);
    memcpy(all.nspace, me.nspace, sizeof all.nspace);
    all.rank = PMIX_RANK_WILDCARD;
    pmix_info_t info[2];
    bool collect = true;
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    rc = PMIx_Fence(&all, 1, info, 2);
    if (rc != PMIX_SUCCESS)
        return dt_error(DT_ERR_COMM, "dtrun: rank %u: error: PMIx_Fence (collecting '%s') failed after at most %d s: "
                        "%s\n  hint: a rank did not reach the bootstrap; look for its own error, or check that "
                        "every task runs dtrun", me.rank, key, timeout_s, PMIx_Error_string(rc));
    if ((int)me.rank == root) return DT_SUCCESS;
    pmix_proc_t from;
    PMIX_PROC_CONSTRUCT(&from);
    memcpy(from.nspace, me.nspace, sizeof from.nspace);
    from.rank = (pmix_rank_t)root;
    pmix_value_t *val = NULL;
    rc = PMIx_Get(&from, key, &info[1], 1, &val);
    if (rc != PMIX_SUCCESS || !val)
        return dt_error(DT_ERR_COMM, "dtrun: rank %u: error: PMIx_Get of '%s' from rank %d failed: %s", me.rank, key,
                        root, PMIx_Error_string(rc));
    bool fits = val->type == PMIX_BYTE_OBJECT && val->data.bo.size == n;
    if (fits) memcpy(blob, val->data.bo.bytes, n);
    size_t got = val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0;
    PMIX_VALUE_RELEASE(val);
    if (!fits)
        return dt_error(DT_ERR_COMM, "dtrun: rank %u: error: '%s' from rank %d holds %zu bytes, not %zu", me.rank, key,
                        root, got, n);
    return DT_SUCCESS;
}

dt_status_t dt_pmix_barrier(const char *what, int timeout_s)
{
    if (!initialized)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: a PMIx fence (%s) was asked for before PMIx_Init", what);
    pmix_proc_t all;
    PMIX_PROC_CONSTRUCT(&all);
    memcpy(all.nspace, me.nspace, sizeof all.nspace);
    all.rank = PMIX_RANK_WILDCARD;
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(&all, 1, &info, 1);
    if (rc != PMIX_SUCCESS)
        return dt_error(DT_ERR_COMM, "dtrun: rank %u: error: PMIx_Fence (%s) failed after at most %d s: %s\n  hint: "
                        "a rank did not get there; look for its own error", me.rank, what, timeout_s,
                        PMIx_Error_string(rc));
    return DT_SUCCESS;
}

void dt_pmix_finalize(void)
{
    if (initialized) PMIx_Finalize(NULL, 0);
    initialized = false;
}
