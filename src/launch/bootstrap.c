/* bootstrap.c - see bootstrap.h. */
#include "core/error.h"
#include "launch/bootstrap.h"

dt_status_t dt_bootstrap_share(const struct dt_world *w, const char *key, void *blob, size_t n, int root,
                               int timeout_s, const char **how)
{
    if (w->size == 1) {
        *how = "single";
        return DT_SUCCESS;
    }
    if (w->source == DT_WORLD_PMIX) {
        *how = "pmix";
        return dt_pmix_share(key, blob, n, root, timeout_s);
    }
    *how = "none";
    return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: %d ranks found each other through %s, which has no key-value "
                    "store to share '%s'\n  hint: start dtrun with `srun --mpi=pmix` or `dtrun -n N` (mpirun serves "
                    "PMIx)%s", w->rank, w->size, dt_world_source_str(w->source), key,
                    dt_pmix_compiled() ? "" : "; this dtrun was also built without PMIx (install libpmix-dev)");
}

dt_status_t dt_bootstrap_barrier(const struct dt_world *w, const char *what, int timeout_s)
{
    if (w->size == 1 || w->source != DT_WORLD_PMIX) return DT_SUCCESS;
    return dt_pmix_barrier(what, timeout_s);
}
