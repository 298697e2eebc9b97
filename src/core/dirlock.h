/*
 * dirlock.h - a directory that belongs to one process at a time (a run.dir:
 * two runs writing one events.jsonl, or later one checkpoint directory,
 * corrupt each other).
 *
 * The lock is a file DIR/dtrun.lock naming its holder: host, boot id, pid and
 * the process's start time, Slurm job, restart count and node. It is created
 * with link(2) from a file written beside it, which is atomic on local file
 * systems and on the NFS, Lustre and GPFS mounts Slurm clusters share, where
 * flock(2) may not reach other nodes. A lock is stale only when its holder is
 * provably gone:
 *   same machine (boot id)   no process with that pid and start time
 *   another machine          Slurm says the holder's job is no longer running,
 *                            or has been requeued since (a later restart count)
 * A stale lock is taken over with a notice; a live one refuses, naming the
 * holder and what to do. The holder's lock is released on every way out:
 * dt_dirlock_release, the fatal-exit paths (dt_dirlock_release_all, safe in a
 * signal handler) and SIGINT, SIGTERM and SIGHUP; SIGKILL leaves it for the
 * next start to judge stale.
 */
#ifndef DT_DIRLOCK_H
#define DT_DIRLOCK_H

#include <stdbool.h>
#include "core/status.h"

#define DT_DIRLOCK_FILE "dtrun.lock"

struct dt_dirlock {
    char path[4200]; /* DIR/dtrun.lock */
    bool held;
};

/* Take dir's lock; what names the directory in messages ("run.dir"). */
dt_status_t dt_dirlock_take(struct dt_dirlock *l, const char *dir, const char *what);
void dt_dirlock_release(struct dt_dirlock *l);
/* Unlink every lock this process holds: for exits that skip the normal path. Async-signal-safe. */
void dt_dirlock_release_all(void);

#endif
