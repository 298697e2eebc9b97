/*
 * slurm_job.h - what Slurm says of a job, asked through scontrol (bounded by
 * timeout(1): a slurmctld that does not answer is an answer too), and its
 * requeue. Used by the run directory's lock (is its holder's job gone?) and
 * by preemption (may this job requeue?).
 */
#ifndef DT_SLURM_JOB_H
#define DT_SLURM_JOB_H

#include <stdbool.h>
#include <stddef.h>

struct dt_slurm_job {
    char state[32]; /* JobState: RUNNING, TIMEOUT, CANCELLED, ... ("unknown to Slurm": no such job) */
    int restarts;   /* Restarts */
    bool requeue;   /* Requeue=1: the job may be requeued */
    bool batch;     /* BatchFlag=1: an sbatch job (only those requeue) */
};

/* false, with why, when Slurm cannot be asked or job is not a job id. */
bool dt_slurm_job_show(const char *job, struct dt_slurm_job *out, char *why, size_t wn);
/* scontrol requeue job: false, with scontrol's answer in why, when it refused. */
bool dt_slurm_job_requeue(const char *job, char *why, size_t wn);
/* This process's job as scontrol names it (array task: ARRAYJOB_TASK), "" outside Slurm. */
void dt_slurm_job_self(char *buf, size_t n);

#endif
