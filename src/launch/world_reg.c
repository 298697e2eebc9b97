/* world_reg.c - whether the PMIx client is compiled in; the one #ifdef HAVE_PMIX of launch/. */
#include "dt_build_config.h"
#include "core/error.h"
#include "launch/world.h"

#ifdef HAVE_PMIX
bool dt_pmix_compiled(void) { return true; }
#else
bool dt_pmix_compiled(void) { return false; }

dt_status_t dt_pmix_world(struct dt_world *w)
{
    (void)w;
    return dt_error(DT_ERR_COMM, "dtrun: error: this dtrun was built without PMIx\n  hint: install libpmix-dev and "
                    "reconfigure (--with-pmix)");
}

dt_status_t dt_pmix_share(const char *key, void *blob, size_t n, int root, int timeout_s)
{
    (void)key;
    (void)blob;
    (void)n;
    (void)root;
    (void)timeout_s;
    return dt_pmix_world(NULL);
}

dt_status_t dt_pmix_barrier(const char *what, int timeout_s)
{
    (void)what;
    (void)timeout_s;
    return dt_pmix_world(NULL);
}

void dt_pmix_finalize(void) {}
#endif
