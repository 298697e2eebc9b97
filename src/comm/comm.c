/* comm.c - see comm.h: the request queue, the communication thread and the watchdog. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "comm/comm.h"
#include "core/dirlock.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"

struct dt_comm_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* queue changed, a request finished, or stop */
    struct dt_comm_req *head, *tail;
    bool busy, stop;
    uint64_t next_seq;
    pthread_t worker, watchdog;
    /* what is running now, for the watchdog */
    struct dt_comm_req *_Atomic running;
    _Atomic int64_t running_since_ns;
    /* the first failure, carried from the thread that saw it to the one that waits */
    char err[2048];
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
    bool wd_stop;
};

const char *dt_coll_name(enum dt_coll_kind k)
{
    static const char *const names[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast", "barrier"};
    return names[k];
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Run r on this thread: the backend's call, then the average's division. */
static void execute(struct dt_comm *c, struct dt_comm_req *r)
{
    struct dt_comm_sync *s = c->sync;
    /* before this rank counts the request as started, so the others' watchdog names it */
    if (dt_fault_hit(DT_FAULT_STALL, r->step + 1, c->world.rank)) dt_fault_stall_forever();
    atomic_store(&r->state, 1);
    atomic_store(&s->running_since_ns, now_ns());
    atomic_store(&s->running, r);
    atomic_store(&c->started, r->seq + 1);
    r->rc = c->be->run(c, r);
    if (r->rc == DT_SUCCESS && r->red == DT_RED_AVG && !r->averaged &&
        (r->kind == DT_COLL_ALLREDUCE || r->kind == DT_COLL_REDUCE_SCATTER)) {
        size_t n = r->count, off;
        if (r->kind == DT_COLL_REDUCE_SCATTER) dt_comm_part(r->count, c->world.size, c->world.rank, &off, &n);
        if (r->dtype == DT_F32) {
            float *x = r->recv, inv = 1.0f / (float)c->world.size;
            for (size_t i = 0; i < n; i++) x[i] *= inv;
        } else if (r->dtype == DT_F64) {
            double *x = r->recv, inv = 1.0 / c->world.size;
            for (size_t i = 0; i < n; i++) x[i] *= inv;
        } else if (r->dtype == DT_BF16) {
            uint16_t *x = r->recv;
            for (size_t i = 0; i < n; i++) x[i] = dt_bf16_from_f32(dt_f32_from_bf16(x[i]) / (float)c->world.size);
        } else if (r->dtype == DT_F16) {
            uint16_t *x = r->recv;
            for (size_t i = 0; i < n; i++) x[i] = dt_f16_from_f32(dt_f32_from_f16(x[i]) / (float)c->world.size);
        }
    }
    atomic_store(&s->running, NULL);
    atomic_store(&c->finished, r->seq + 1);
    if (r->rc != DT_SUCCESS) {
        pthread_mutex_lock(&s->mu);
        if (!s->err[0]) snprintf(s->err, sizeof s->err, "%s", dt_error_msg());
        pthread_mutex_unlock(&s->mu);
    }
}

static void *worker_main(void *arg)
{
    struct dt_comm *c = arg;
    struct dt_comm_sync *s = c->sync;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && !s->head) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head) break;
        struct dt_comm_req *r = s->head;
        s->head = r->next;
        if (!s->head) s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        execute(c, r);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
        atomic_store(&r->state, 2);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/*
 * The watchdog cannot return an error through a thread blocked inside the
 * backend's collective, so it is the one place besides main that ends the
 * process: it prints what hung and asks the backend to end every rank.
 */
static void trip(struct dt_comm *c, struct dt_comm_req *r, const int *ranks, const uint64_t *at, int n,
                 const char *why, const char *hint)
{
    char who[1024] = "";
    size_t o = 0;
    for (int i = 0; i < n && o < sizeof who - 100; i++) {
        if (at[i] == UINT64_MAX)
            o += (size_t)snprintf(who + o, sizeof who - o, "%srank %d did not answer (stopped, hung or dead)",
                                  i ? "; " : "", ranks[i]);
        else
            o += (size_t)snprintf(who + o, sizeof who - o, "%srank %d has not reached it (it is at request %llu)",
                                  i ? "; " : "", ranks[i], (unsigned long long)at[i]);
    }
    if (!n) snprintf(who, sizeof who, "every rank reached it, so the transport itself is stuck");
    char size[64] = ""; /* a barrier carries nothing */
    if (r->count) snprintf(size, sizeof size, "%zu %s elements, ", r->count, dt_dtype_str(r->dtype));
    dt_error(DT_ERR_COMM, "dtrun: rank %d: error: %s of %s (%srequest %llu) %s at step %lld: %s\n"
             "  hint: %s", c->world.rank, dt_coll_name(r->kind), r->what ? r->what : "?", size,
             (unsigned long long)r->seq + 1, why, (long long)r->step + 1, who, hint);
    dt_log_text(dt_error_msg());
    fflush(stderr);
    dt_dirlock_release_all(); /* the abort ends the process without the normal way out */
    c->be->abort(c, dt_status_exit_code(DT_ERR_COMM));
}

static atomic_int stop_noted;

void dt_comm_note_stop(void) { atomic_store(&stop_noted, 1); }

/* The request has run past the timeout: end the job, naming who did not come. */
static void timed_out(struct dt_comm *c, struct dt_comm_req *r)
{
    int ranks[64];
    uint64_t at[64];
    int n = c->be->laggards(c, r->seq, ranks, at, 64, c->timeout < 5 ? c->timeout : 5);
    char why[64];
    snprintf(why, sizeof why, "did not finish within %g s", c->timeout);
    trip(c, r, ranks, at, n, why, "a stalled or dead rank, or a step that takes longer than compute.comm_timeout; "
         "raise compute.comm_timeout if steps are legitimately that slow");
}

/* A stop was asked for (Slurm's SIGTERM, say, after a rank died) while this request waits: if a
 * rank no longer answers, the step boundary will never come, so end now with the reason rather
 * than be killed in silence at the end of Slurm's KillWait. Ranks that answer are left to finish. */
static void stop_probe(struct dt_comm *c, struct dt_comm_req *r, uint64_t seq, int64_t since)
{
    int ranks[64];
    uint64_t at[64];
    int n = c->be->laggards(c, seq, ranks, at, 64, 2);
    /* the query takes up to 2 s: a request that finished meanwhile (r may be gone) is left alone */
    if (atomic_load(&c->sync->running) != r || atomic_load(&c->sync->running_since_ns) != since) return;
    for (int i = 0; i < n; i++)
        if (at[i] == UINT64_MAX)
            trip(c, r, ranks, at, n, "could not finish after a stop signal",
                 "that rank died or was killed (its own output, or the task_failed event of dtrun's SPANK plugin, "
                 "says how); run again to resume from the last checkpoint");
}

static void *watchdog_main(void *arg)
{
    struct dt_comm *c = arg;
    struct dt_comm_sync *s = c->sync;
    int64_t limit = (int64_t)(c->timeout * 1e9);
    uint64_t probed = UINT64_MAX;
    pthread_mutex_lock(&s->wd_mu);
    while (!s->wd_stop) {
        struct timespec ts; /* on CLOCK_MONOTONIC (wd_cv's clock): a stepped wall clock moves no timeout */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->wd_cv, &s->wd_mu, &ts);
        if (s->wd_stop) break;
        c->be->serve(c);
        struct dt_comm_req *r = atomic_load(&s->running);
        int64_t since = atomic_load(&s->running_since_ns), ran = r ? now_ns() - since : 0;
        if (r && ran > limit) {
            pthread_mutex_unlock(&s->wd_mu);
            timed_out(c, r);
            pthread_mutex_lock(&s->wd_mu);
        } else if (r && ran > 1000000000 && atomic_load(&stop_noted) && r->seq != probed) {
            probed = r->seq; /* once per request */
            pthread_mutex_unlock(&s->wd_mu);
            stop_probe(c, r, probed, since);
            pthread_mutex_lock(&s->wd_mu);
        }
    }
    pthread_mutex_unlock(&s->wd_mu);
    return NULL;
}

/* A communicator whose backend state init_fn sets up (open: the world; split: part of a parent). */
static dt_status_t make(struct dt_comm **out, const struct dt_world *w, const struct dt_comm_backend *be,
                        double timeout_s, struct dt_comm *parent, int color, int key)
{
    *out = NULL;
    struct dt_comm *c = calloc(1, sizeof *c);
    struct dt_comm_sync *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the communicator");
    }
    c->be = be;
    c->world = *w;
    c->timeout = timeout_s;
    c->sync = s;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->wd_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    dt_status_t rc = parent ? be->split(parent, c, color, key) : be->init(c);
    if (rc != DT_SUCCESS) {
        free(s);
        free(c);
        return rc;
    }
    if (pthread_create(&s->worker, NULL, worker_main, c) || pthread_create(&s->watchdog, NULL, watchdog_main, c)) {
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot start the communication threads\n  hint: the process "
                        "limit (ulimit -u) may be reached");
    }
    *out = c;
    return DT_SUCCESS;
}

dt_status_t dt_comm_open(struct dt_comm **out, const struct dt_world *w, const struct dt_comm_backend *be,
                         double timeout_s)
{
    *out = NULL;
    if (!be)
        return dt_error(DT_ERR_COMM, "dtrun: error: %d ranks need a communication backend, and this dtrun was built "
                        "without MPI\n  hint: install libopenmpi-dev and rebuild (./configure reports what it found)",
                        w->size);
    DT_CHECK(make(out, w, be, timeout_s, NULL, 0, 0));
    DT_INFO(DT_SUB_COMM, "communicator: %s, %d ranks found through %s, watchdog %g s", be->name, w->size,
            dt_world_source_str(w->source), timeout_s);
    return DT_SUCCESS;
}

dt_status_t dt_comm_split(struct dt_comm *c, int color, int key, const char *what, struct dt_comm **out)
{
    DT_CHECK(make(out, &c->world, c->be, c->timeout, c, color, key));
    DT_DEBUG(DT_SUB_COMM, "communicator %s: rank %d of %d", what, (*out)->world.rank, (*out)->world.size);
    return DT_SUCCESS;
}

void dt_comm_close(struct dt_comm *c, bool clean)
{
    if (!c) return;
    struct dt_comm_sync *s = c->sync;
    pthread_mutex_lock(&s->mu);
    bool busy = s->busy || s->head;
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* a request that may never finish (a peer is gone) keeps its thread: the process exit ends it */
    if (busy && !clean) return;
    pthread_join(s->worker, NULL);
    pthread_mutex_lock(&s->wd_mu);
    s->wd_stop = true;
    pthread_cond_signal(&s->wd_cv);
    pthread_mutex_unlock(&s->wd_mu);
    pthread_join(s->watchdog, NULL);
    c->be->finalize(c, clean);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->wd_mu);
    pthread_cond_destroy(&s->wd_cv);
    free(s);
    free(c);
}

void dt_comm_set_step(struct dt_comm *c, int64_t step) { atomic_store(&c->step, step); }

dt_status_t dt_comm_start(struct dt_comm *c, struct dt_comm_req *r)
{
    struct dt_comm_sync *s = c->sync;
    r->step = atomic_load(&c->step);
    r->next = NULL;
    r->ordered = NULL;
    r->averaged = false;
    atomic_store(&r->state, 0);
    pthread_mutex_lock(&s->mu);
    if (s->err[0]) {
        dt_status_t rc = dt_error(DT_ERR_COMM, "%s", s->err);
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    if (c->be->order) {
        /* after the check: what order makes, only the request's run releases */
        pthread_mutex_unlock(&s->mu);
        DT_CHECK(c->be->order(c, r));
        pthread_mutex_lock(&s->mu);
    }
    r->seq = s->next_seq++;
    if (s->tail) s->tail->next = r;
    else s->head = r;
    s->tail = r;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return DT_SUCCESS;
}

dt_status_t dt_comm_wait(struct dt_comm *c, struct dt_comm_req *r)
{
    struct dt_comm_sync *s = c->sync;
    /* no timeout here: the watchdog bounds every running request */
    pthread_mutex_lock(&s->mu);
    while (atomic_load(&r->state) != 2) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (r->rc != DT_SUCCESS) return dt_error(r->rc, "%s", s->err);
    return DT_SUCCESS;
}

dt_status_t dt_comm_do(struct dt_comm *c, struct dt_comm_req r)
{
    struct dt_comm_sync *s = c->sync;
    pthread_mutex_lock(&s->mu);
    bool idle = !s->head && !s->busy && !s->err[0];
    if (idle) {
        r.seq = s->next_seq++;
        r.step = atomic_load(&c->step);
        s->busy = true;
    }
    pthread_mutex_unlock(&s->mu);
    if (!idle) {
        DT_CHECK(dt_comm_start(c, &r));
        return dt_comm_wait(c, &r);
    }
    r.ordered = NULL; /* on the starting thread, as dt_comm_start does */
    r.averaged = false;
    if (c->be->order) r.rc = c->be->order(c, &r);
    if (r.rc == DT_SUCCESS) execute(c, &r);
    pthread_mutex_lock(&s->mu);
    s->busy = false;
    pthread_mutex_unlock(&s->mu);
    return r.rc;
}
