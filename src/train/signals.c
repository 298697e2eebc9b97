/* signals.c - see signals.h. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "comm/comm.h"
#include "core/log.h"
#include "core/slurm_job.h"
#include "train/signals.h"

static const int caught[3] = {SIGUSR1, SIGTERM, SIGINT};
static volatile sig_atomic_t first, count;

static void on_signal(int sig)
{
    int saved = errno;
    if (!first) first = sig;
    dt_comm_note_stop();
    if (count++ == 1) { /* said once, from the handler: write(2) is safe here, stdio is not */
        static const char msg[] = "dtrun: signal noted; the run is already stopping at a step boundary\n";
        ssize_t k = write(2, msg, sizeof msg - 1);
        (void)k;
    }
    errno = saved;
}

void dt_signals_catch(void)
{
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    first = count = 0;
    for (int i = 0; i < 3; i++) sigaction(caught[i], &sa, NULL);
}

int dt_signals_pending(void) { return first; }

const char *dt_signals_name(int sig)
{
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal";
}

void dt_signals_requeue(int sig, const char *ckpt, bool *requeued)
{
    *requeued = false;
    char job[64], why[600];
    dt_slurm_job_self(job, sizeof job);
    if (sig == SIGINT || !job[0]) {
        DT_INFO(DT_SUB_TRAIN, "stopped by %s; run again to resume from %s", dt_signals_name(sig), ckpt);
        return;
    }
    struct dt_slurm_job j;
    if (!dt_slurm_job_show(job, &j, why, sizeof why)) {
        DT_WARN("job %s is not requeued: %s; resubmit it to resume from %s", job, why, ckpt);
        return;
    }
    if (!strcmp(j.state, "CANCELLED")) {
        DT_INFO(DT_SUB_TRAIN, "job %s was cancelled, so it is not requeued; resubmit it to resume from %s", job, ckpt);
        return;
    }
    if (!j.batch || !j.requeue) {
        DT_WARN("job %s is not requeued: %s; resubmit it to resume from %s", job,
                !j.batch ? "it is not a batch job (only sbatch jobs requeue)"
                         : "it may not requeue (submit with sbatch --requeue)", ckpt);
        return;
    }
    if (!dt_slurm_job_requeue(job, why, sizeof why)) {
        DT_WARN("job %s is not requeued: %s; resubmit it to resume from %s", job, why, ckpt);
        return;
    }
    *requeued = true;
    DT_INFO(DT_SUB_TRAIN, "job %s requeued: it resumes from %s when Slurm starts it again", job, ckpt);
}
