/*
 * nccl.c - the GPU communication backend: collectives on CUDA device memory through NCCL, which
 * lives in the CUDA module (kernels/cuda/nccl.c, reached through module.h's struct dt_cuda_nccl,
 * so dtrun itself links no CUDA), with the CPU backend (MPI) opened beside it on the same ranks as
 * the control plane. NCCL has no channel besides its collectives, and those are what is stuck when
 * the watchdog asks, so the watchdog's "where are you?" queries (serve, laggards) and the job-wide
 * end (abort) go through MPI; abort first calls ncclCommAbort, so that this rank's GPU lets go.
 *
 * Creation, collective over the world: every rank checks the GPU it will drive (launch/device.h's
 * mapping) and rank 0 makes the ncclUniqueId; the ranks agree over MPI that all of them could, so
 * a rank without a usable GPU ends the job at once instead of leaving the others in
 * ncclCommInitRank until the timeout; the id goes from rank 0 to all through the PMIx key-value
 * bootstrap (launch/bootstrap.h: srun --mpi=pmix, or mpirun under `dtrun -n N`); then
 * ncclCommInitRank, non-blocking, under compute.comm_timeout. NCCL reads its own settings
 * (NCCL_DEBUG, NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...) from the environment, which both launchers
 * pass to every rank (srun's default --export=ALL; mpirun's local children inherit it); they are
 * logged here, so a setting that did not arrive shows.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/cuda_module.h"
#include "launch/bootstrap.h"
#include "launch/device.h"

extern char **environ;

/* communicators opened by this process: each one's bootstrap key differs, and every rank opens
 * them in the same order */
static unsigned opened;

struct nccl_state {
    const struct dt_cuda_nccl *nccl;
    const struct dt_cuda_ops *ops; /* which memory a request's buffers are in */
    void *comm; /* the module's communicator */
    /* the control plane: the CPU backend's state for the same ranks, driven through its functions
     * only (no queue or threads of its own; started mirrors this communicator's for the queries) */
    struct dt_comm cpu;
};

/* The GPU this rank drives: launch/device.h's mapping; where nothing narrows what a process sees
 * (CUDA_VISIBLE_DEVICES unset, as under `dtrun -n N` on a workstation), one GPU per local rank. */
static dt_status_t device_of(const struct dt_world *w, int *dev)
{
    struct dt_devmap dm;
    DT_CHECK(dt_device_map(w, &dm));
    *dev = dm.ordinal >= 0 ? dm.ordinal : w->local_rank;
    return DT_SUCCESS;
}

/* "NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=ib0", or "none set" */
static void nccl_env(char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (char **e = environ; *e && o + 1 < n; e++)
        if (!strncmp(*e, "NCCL_", 5)) o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? " " : "", *e);
    if (!o) snprintf(buf, n, "none set");
}

static struct nccl_state *new_state(const struct dt_comm *c, const struct dt_cuda_nccl *nccl,
                                    const struct dt_cuda_ops *ops, const struct dt_comm_backend *cpu)
{
    struct nccl_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->nccl = nccl;
    st->ops = ops;
    st->cpu.be = cpu;
    st->cpu.world = c->world;
    st->cpu.timeout = c->timeout;
    return st;
}

/*
 * Every rank says whether its GPU (and, on rank 0, the NCCL id) is ready, over the control plane,
 * before anyone waits in NCCL. mine: this rank's failure, or ""; hint: how to fix it.
 */
static dt_status_t agree(struct dt_comm *c, struct nccl_state *st, int dev, const char *mine, const char *hint)
{
    int n = c->world.size, me = !!mine[0];
    int *bad = calloc((size_t)n, sizeof *bad);
    if (!bad) return dt_error(DT_ERR_NOMEM, "dtrun: rank %d: error: out of memory", c->world.rank);
    struct dt_comm_req r = dt_coll_allgather(&me, bad, (size_t)n, DT_I32, "NCCL readiness");
    dt_status_t rc = st->cpu.be->run(&st->cpu, &r);
    char who[256] = "";
    size_t o = 0;
    for (int i = 0; rc == DT_SUCCESS && i < n && o < sizeof who - 16; i++)
        if (bad[i]) o += (size_t)snprintf(who + o, sizeof who - o, "%s%d", o ? ", " : "", i);
    free(bad);
    if (rc != DT_SUCCESS) return rc;
    if (me)
        return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: NCCL on cuda:%d: %s\n  hint: %s", c->world.rank, dev, mine,
                        hint);
    if (o)
        return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: no NCCL communicator: rank %s could not prepare its GPU\n"
                        "  hint: that rank's own message says why", c->world.rank, who);
    return DT_SUCCESS;
}

static dt_status_t nccl_init(struct dt_comm *c)
{
    const struct dt_comm_backend *cpu = dt_comm_cpu_backend();
    if (!cpu)
        return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: the NCCL backend needs MPI beside it (for the watchdog's "
                        "queries and to end every rank), and this dtrun was built without MPI\n  hint: install "
                        "libopenmpi-dev and rebuild (./configure reports what it found)", c->world.rank);
    const struct dt_cuda_module *m;
    int dev;
    DT_CHECK(dt_cuda_module_get(&m));
    DT_CHECK(device_of(&c->world, &dev));
    struct nccl_state *st = new_state(c, m->nccl, m->ops, cpu);
    if (!st) return dt_error(DT_ERR_NOMEM, "dtrun: rank %d: error: out of memory for NCCL state", c->world.rank);
    dt_status_t rc = cpu->init(&st->cpu);
    if (rc != DT_SUCCESS) {
        free(st);
        return rc;
    }
    unsigned char id[128] = {0};
    struct dt_cuda_device info;
    char why[2048] = "";
    const char *hint = "";
    if (m->device_info(dev, &info, why, sizeof why) != 0)
        hint = "nvidia-smi on the rank's node shows its GPUs and driver; CUDA_VISIBLE_DEVICES says which of them the "
               "rank sees (srun --gpus-per-task=1 gives each rank one)";
    else if (c->world.rank == 0 && m->nccl_unique_id(id, why, sizeof why) != 0)
        hint = "the id holds the address the other ranks connect to: NCCL_SOCKET_IFNAME chooses its interface, "
               "NCCL_DEBUG=INFO says more";
    rc = agree(c, st, dev, why, hint);
    char key[32];
    snprintf(key, sizeof key, "dtrun.nccl.%u", opened++);
    const char *how = "";
    int share_s = c->timeout < 1 ? 1 : (int)c->timeout;
    if (rc == DT_SUCCESS) rc = dt_bootstrap_share(&c->world, key, id, sizeof id, 0, share_s, &how);
    if (rc == DT_SUCCESS &&
        st->nccl->init(&st->comm, id, c->world.size, c->world.rank, dev, c->timeout, why, sizeof why) != 0)
        rc = dt_error(DT_ERR_COMM, "dtrun: error: no NCCL communicator of %d ranks: %s", c->world.size, why);
    if (rc != DT_SUCCESS) {
        cpu->finalize(&st->cpu, false);
        free(st);
        return rc;
    }
    char env[512];
    nccl_env(env, sizeof env);
    DT_INFO(DT_SUB_COMM, "NCCL: rank %d of %d on cuda:%d (%s), id through the %s bootstrap; environment: %s",
            c->world.rank, c->world.size, dev, info.name, how, env);
    c->impl = st;
    return DT_SUCCESS;
}

static dt_status_t nccl_split(struct dt_comm *parent, struct dt_comm *child, int color, int key)
{
    struct nccl_state *ps = parent->impl, *st = new_state(child, ps->nccl, ps->ops, ps->cpu.be);
    if (!st) return dt_error(DT_ERR_NOMEM, "dtrun: rank %d: error: out of memory for NCCL state", parent->world.rank);
    dt_status_t rc = ps->cpu.be->split(&ps->cpu, &st->cpu, color, key);
    if (rc != DT_SUCCESS) {
        free(st);
        return rc;
    }
    char why[2048];
    if (ps->nccl->split(ps->comm, color, key, &st->comm, parent->timeout, why, sizeof why) != 0) {
        st->cpu.be->finalize(&st->cpu, false);
        free(st);
        return dt_error(DT_ERR_COMM, "dtrun: error: cannot split the NCCL communicator (color %d, key %d): %s", color,
                        key, why);
    }
    /* MPI_Comm_split and ncclCommSplit order the ranks alike: by key, then by parent rank */
    child->world.rank = st->cpu.world.rank;
    child->world.size = st->cpu.world.size;
    child->impl = st;
    return DT_SUCCESS;
}

/* A request on host memory (the loss and the step's decisions, the norm, a barrier) goes through
 * the MPI communicator beside NCCL: NCCL moves device memory only. 1: on the host, 0: on the
 * device, -1: one buffer of each, which neither can move. */
static int on_host(const struct nccl_state *st, const struct dt_comm_req *r)
{
    bool recv = st->ops->is_device(r->recv), send = r->send ? st->ops->is_device(r->send) : recv;
    return recv && send ? 0 : !recv && !send ? 1 : -1;
}

static dt_status_t nccl_order(struct dt_comm *c, struct dt_comm_req *r)
{
    struct nccl_state *st = c->impl;
    int host = on_host(st, r);
    if (host < 0)
        return dt_error(DT_ERR_INTERNAL, "dtrun: rank %d: error: %s of %s: one buffer is in GPU memory, the other in "
                        "host memory; NCCL and MPI each need both in theirs\n  hint: a dtrun bug: please report it",
                        c->world.rank, dt_coll_name(r->kind), r->what ? r->what : "?");
    if (host) return DT_SUCCESS; /* the host's own order is the program's */
    char why[1024];
    r->ordered = st->nccl->order(why, sizeof why);
    if (!r->ordered)
        return dt_error(DT_ERR_CUDA, "dtrun: rank %d: error: %s of %s: %s", c->world.rank, dt_coll_name(r->kind),
                        r->what ? r->what : "?", why);
    return DT_SUCCESS;
}

static dt_status_t nccl_run(struct dt_comm *c, struct dt_comm_req *r)
{
    struct nccl_state *st = c->impl;
    char why[2048];
    void *after = r->ordered;
    r->ordered = NULL; /* consumed by the run, whatever it returns */
    if (!after && on_host(st, r) == 1) return st->cpu.be->run(&st->cpu, r); /* dt_comm averages it */
    if (st->nccl->run(st->comm, after, (int)r->kind, (int)r->red, (int)r->dtype, r->send, r->recv, r->count, r->root,
                      why, sizeof why) == 0) {
        r->averaged = true;
        return DT_SUCCESS;
    }
    return dt_error(DT_ERR_COMM, "dtrun: error: %s of %s (%zu %s elements) at step %lld failed on NCCL %s",
                    dt_coll_name(r->kind), r->what ? r->what : "?", r->count, dt_dtype_str(r->dtype),
                    (long long)r->step + 1, why);
}

static void nccl_serve(struct dt_comm *c)
{
    struct nccl_state *st = c->impl;
    atomic_store(&st->cpu.started, atomic_load(&c->started));
    st->cpu.be->serve(&st->cpu);
}

static int nccl_laggards(struct dt_comm *c, uint64_t seq, int *ranks, uint64_t *at, int max, double wait_s)
{
    struct nccl_state *st = c->impl;
    atomic_store(&st->cpu.started, atomic_load(&c->started));
    return st->cpu.be->laggards(&st->cpu, seq, ranks, at, max, wait_s);
}

/* ncclCommAbort can itself hang in some NCCL versions (NVIDIA/nccl#829): it runs on a thread of
 * its own, given a few seconds; the state is shared with that thread and left to it if it is
 * still running then. */
struct abort_call {
    const struct dt_cuda_nccl *nccl;
    void *comm;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void *abort_main(void *arg)
{
    struct abort_call *a = arg;
    a->nccl->abort(a->comm);
    pthread_mutex_lock(&a->mu);
    a->done = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Whether ncclCommAbort returned within wait_s seconds (then destroy may free the rest). */
static bool abort_within(struct nccl_state *st, double wait_s)
{
    struct abort_call *a = calloc(1, sizeof *a);
    if (!a) return false;
    *a = (struct abort_call){.nccl = st->nccl, .comm = st->comm};
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca; /* the wait below is on CLOCK_MONOTONIC: a stepped wall clock moves no deadline */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_t t;
    if (pthread_create(&t, NULL, abort_main, a)) {
        free(a);
        return false;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)wait_s;
    pthread_mutex_lock(&a->mu);
    while (!a->done && pthread_cond_timedwait(&a->cv, &a->mu, &until) == 0) continue;
    bool done = a->done;
    pthread_mutex_unlock(&a->mu);
    if (!done) {
        pthread_detach(t);
        return false;
    }
    pthread_join(t, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
    return true;
}

static void nccl_abort(struct dt_comm *c, int code)
{
    struct nccl_state *st = c->impl;
    abort_within(st, 5);
    st->cpu.be->abort(&st->cpu, code);
}

static void nccl_finalize(struct dt_comm *c, bool clean)
{
    struct nccl_state *st = c->impl;
    /* not clean: no finalize that needs the peers; an abort that hangs leaves its memory to the exit */
    if (clean || abort_within(st, 5)) st->nccl->destroy(st->comm);
    st->cpu.be->finalize(&st->cpu, clean);
    free(st);
}

const struct dt_comm_backend dt_comm_nccl = {
    .name = "nccl",
    .init = nccl_init,
    .split = nccl_split,
    .run = nccl_run,
    .order = nccl_order,
    .serve = nccl_serve,
    .laggards = nccl_laggards,
    .abort = nccl_abort,
    .finalize = nccl_finalize,
};
