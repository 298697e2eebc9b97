/*
 * signals.h - preemption: SIGUSR1 (sbatch --signal=USR1@120), SIGTERM (Slurm's
 * time limit, preemption, a launcher stopping its workers) and SIGINT (a
 * terminal) are caught and only noted; the trainer makes every rank agree on
 * one step boundary through the all-reduce it does anyway, saves, and stops.
 * A second signal changes nothing (the save in progress goes on and stays
 * whole). They are blocked in every thread and taken by one of their own
 * (signals.c says why).
 */
#ifndef DT_SIGNALS_H
#define DT_SIGNALS_H

#include <stdbool.h>
#include "core/status.h"

/* Catch the three from here on, for the rest of the process: a worker calls it first thing, before
 * any other thread exists (MPI, OpenMP), so that all of them inherit the block; a signal forwarded
 * during start-up is noted, not fatal. */
dt_status_t dt_signals_catch(void);
/* The first signal caught, 0 when none. */
int dt_signals_pending(void);
/* "SIGUSR1" */
const char *dt_signals_name(int sig);
/*
 * Rank 0, once the run stopped for sig with its state saved in ckpt: requeue the Slurm job when sig
 * is SIGUSR1 or SIGTERM, the job is a batch job submitted with --requeue and was not cancelled.
 * *requeued says whether it was; what was done or why not is logged.
 */
void dt_signals_requeue(int sig, const char *ckpt, bool *requeued);

#endif
