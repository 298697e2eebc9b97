/*
 * task_failed.h - what slurmstepd tells the job's webhook when a task dies
 * from outside (a signal, the OOM killer, SIGKILL at the time limit): one
 * `task_failed` event (src/events/events.schema.json), POSTed within a short
 * deadline, signed like dtrun's own events when the admin gave a secret.
 */
#ifndef DT_SPANK_TASK_FAILED_H
#define DT_SPANK_TASK_FAILED_H

#include <stdbool.h>
#include <stddef.h>

struct dt_task_end {
    unsigned job, step, restart; /* step: Slurm's step id (the batch step is a large constant) */
    const char *node;            /* SLURMD_NODENAME */
    const char *run_name;        /* --dt-run-name, or NULL */
    int task, local_task, node_rank;
    long pid;
    int status;                  /* the wait status */
    int oom;                     /* 1: the OOM killer killed in the step's cgroup, 0: it did not, -1: unknown */
};

/* Whether a task that ended with status is one to report: a signal, or (for a program that is
 * not dtrun, which reports its own failures) a non-zero exit status. */
bool dt_task_failed_wanted(int status, bool is_dtrun);
/* The event as one JSON document (malloc'd), or NULL when memory ran out. */
char *dt_task_failed_json(const struct dt_task_end *e, double now);
/* POST json to url, whose host (dt_url_host) the caller checked, within timeout seconds (connect
 * included); secret NULL: unsigned. 0 when the receiver answered 2xx; else -1 and why. */
int dt_task_failed_post(const char *url, const char *host, const char *secret, const char *json, double timeout,
                        char *why, size_t n);
/* The OOM killer's kills in the cgroup directory dir (memory.events' oom_kill), or -1 when
 * there is no such file (cgroup v1, or no task/cgroup plugin). */
long dt_oom_kills(const char *dir);
/* The cgroup v2 directory of a process (from /proc/PID/cgroup), or "" when unknown. */
void dt_cgroup_dir(long pid, char *dir, size_t n);

#endif
