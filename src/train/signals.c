/* signals.c - see signals.h. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "core/slurm_job.h"
#include "train/signals.h"

static const int caught[3] = {SIGUSR1, SIGTERM, SIGINT};
static volatile sig_atomic_t first, count;
static sigset_t set;

static void note(int sig)
{
    if (!first) first = sig;
    dt_comm_note_stop();
    if (count++ == 1) {
        static const char msg[] = "dtrun: signal noted; the run is already stopping at a step boundary\n";
        ssize_t k = write(2, msg, sizeof msg - 1);
        (void)k;
    }
}

/*
 * The signals are taken by this thread alone (sigwait), never by an asynchronous handler. A handler
 * runs on the stack of whatever code the signal interrupts; with one, about one stop in a hundred
 * under load died of heap corruption inside the oneDNN sgemm the signal had interrupted ("corrupted
 * size vs. prev_size while consolidating", its free in dnnl_sgemm, the neighbouring chunk headers
 * overwritten with float data): JIT-generated code that keeps data below its stack pointer is what
 * an interrupting signal frame would destroy. Taken here, 600 stops under the same load: none.
 */
static void *waiter(void *arg)
{
    (void)arg;
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) == 0) note(sig);
    }
    return NULL;
}

dt_status_t dt_signals_catch(void)
{
    sigemptyset(&set);
    for (int i = 0; i < 3; i++) sigaddset(&set, caught[i]);
    first = count = 0;
    /* blocked here, first thing, so every thread started later (OpenMP's, MPI's, the writers)
     * inherits the block and only the waiter takes them */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* A write to a socket or pipe whose other end is gone (a killed peer's MPI connection, a webhook
     * connection) must come back as EPIPE to the code that wrote, which reports it: SIGPIPE's default
     * killed rank 0 silently after rank 1 was killed ("task 0: Broken pipe", tests/cli/test_spank.sh),
     * before it could say which rank had stopped it. */
    signal(SIGPIPE, SIG_IGN);
    pthread_t t;
    int e = pthread_create(&t, NULL, waiter, NULL);
    if (e != 0)
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot start the thread that takes SIGTERM/SIGUSR1/SIGINT: %s\n"
                        "  hint: the process is out of threads or memory (ulimit -u, ulimit -v)", strerror(e));
    pthread_detach(t);
    return DT_SUCCESS;
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
