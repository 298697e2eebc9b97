/*
 * bootstrap.h - hand a small blob from one rank to all before any
 * communicator exists (NCCL's ncclUniqueId, 128 bytes). PMIx's key-value
 * store when a PMIx server is there (srun --mpi=pmix, mpirun); a world of one
 * needs nothing. Callers log which bootstrap ran (REFERENCE.md problem 18).
 */
#ifndef DT_BOOTSTRAP_H
#define DT_BOOTSTRAP_H

#include <stddef.h>
#include "core/status.h"
#include "launch/world.h"

/* On return blob holds rank root's n bytes on every rank; *how names the mechanism. */
dt_status_t dt_bootstrap_share(const struct dt_world *w, const char *key, void *blob, size_t n, int root,
                               int timeout_s, const char **how);
/* Every rank has reached this point, where PMIx can tell (a world from PMIx); elsewhere nothing
 * to wait on, and a no-op. */
dt_status_t dt_bootstrap_barrier(const struct dt_world *w, const char *what, int timeout_s);

#endif
