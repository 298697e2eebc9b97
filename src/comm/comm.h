/*
 * comm.h - one collective interface for every strategy: all-reduce (sum,
 * average, max), reduce-scatter, all-gather, broadcast and barrier, started
 * asynchronously so callers overlap communication with compute.
 *
 * A request is caller-owned storage: fill it with a dt_coll_* initializer,
 * dt_comm_start() it, later dt_comm_wait() it. Requests run one at a time in
 * the order they were started, which is the same order on every rank (the
 * callers are deterministic), on a dedicated communication thread; a request
 * started while nothing else is queued and immediately waited for
 * (dt_comm_do) runs on the caller's thread, so a synchronous call costs what
 * the backend's own call costs.
 *
 * A watchdog ends the job when a request has not finished after
 * compute.comm_timeout seconds, naming the operation, the step and the ranks
 * that have not reached it, instead of hanging (REFERENCE.md problems 4, 10,
 * 36). Backends plug in through struct dt_comm_backend: MPI for host memory (mpi.c),
 * NCCL for CUDA device memory (nccl.c; NCCL itself is in the CUDA module, and MPI beside it
 * answers the watchdog).
 */
#ifndef DT_COMM_H
#define DT_COMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/status.h"
#include "launch/world.h"

enum dt_coll_kind { DT_COLL_ALLREDUCE, DT_COLL_REDUCE_SCATTER, DT_COLL_ALLGATHER, DT_COLL_BROADCAST, DT_COLL_BARRIER };
enum dt_reduce { DT_RED_SUM, DT_RED_AVG, DT_RED_MAX };

struct dt_comm_req {
    enum dt_coll_kind kind;
    enum dt_reduce red;
    enum dt_dtype dtype;
    const void *send; /* NULL: in place (recv holds the input) */
    void *recv;
    size_t count;     /* elements: all-reduce and broadcast the buffer; reduce-scatter and all-gather
                         the whole (every rank's part, dt_comm_part) */
    int root;         /* broadcast */
    const char *what; /* for messages: "gradient bucket 3/7" */
    /* set by dt_comm_start */
    void *ordered;    /* the backend's, from its order to its run (NCCL: the event the run waits for) */
    bool averaged;    /* set by run: DT_RED_AVG is done, not left as a sum */
    int64_t step;
    uint64_t seq;
    atomic_int state; /* 0 queued, 1 running, 2 done */
    dt_status_t rc;
    struct dt_comm_req *next;
};

static inline struct dt_comm_req dt_coll_allreduce(void *buf, size_t n, enum dt_dtype t, enum dt_reduce r,
                                                   const char *what)
{
    return (struct dt_comm_req){.kind = DT_COLL_ALLREDUCE, .red = r, .dtype = t, .recv = buf, .count = n, .what = what};
}
/*
 * Rank r's part of n elements split over size ranks, in rank order: the first n % size ranks hold
 * one element more. Reduce-scatter and all-gather split their n this way, so n need not divide.
 */
static inline void dt_comm_part(size_t n, int size, int r, size_t *off, size_t *cnt)
{
    size_t q = n / (size_t)size, rem = n % (size_t)size, ur = (size_t)r;
    *cnt = q + (ur < rem);
    *off = ur * q + (ur < rem ? ur : rem);
}
/* send holds n elements (NULL: recv does); recv gets this rank's part of them, reduced over ranks */
static inline struct dt_comm_req dt_coll_reduce_scatter(const void *send, void *recv, size_t n, enum dt_dtype t,
                                                        enum dt_reduce r, const char *what)
{
    return (struct dt_comm_req){.kind = DT_COLL_REDUCE_SCATTER, .red = r, .dtype = t, .send = send, .recv = recv,
                                .count = n, .what = what};
}
/* send holds this rank's part of n elements (NULL: it is already at its place in recv); recv
 * gets all n, rank-ordered */
static inline struct dt_comm_req dt_coll_allgather(const void *send, void *recv, size_t n, enum dt_dtype t,
                                                   const char *what)
{
    return (struct dt_comm_req){.kind = DT_COLL_ALLGATHER, .dtype = t, .send = send, .recv = recv, .count = n,
                                .what = what};
}
static inline struct dt_comm_req dt_coll_broadcast(void *buf, size_t n, enum dt_dtype t, int root, const char *what)
{
    return (struct dt_comm_req){.kind = DT_COLL_BROADCAST, .dtype = t, .recv = buf, .count = n, .root = root,
                                .what = what};
}
static inline struct dt_comm_req dt_coll_barrier(const char *what)
{
    return (struct dt_comm_req){.kind = DT_COLL_BARRIER, .dtype = DT_U8, .what = what};
}

struct dt_comm;

struct dt_comm_backend {
    const char *name;
    /* set up c->impl for this world */
    dt_status_t (*init)(struct dt_comm *c);
    /* set up child->impl for the ranks of parent with the same color, ordered by key, and
     * child->world.rank / size within them */
    dt_status_t (*split)(struct dt_comm *parent, struct dt_comm *child, int color, int key);
    /* run r to completion (blocking); averages may be left as sums, which dt_comm divides in host
     * memory, unless run sets r->averaged (NCCL's ncclAvg on device memory, which dt_comm cannot
     * touch) */
    dt_status_t (*run)(struct dt_comm *c, struct dt_comm_req *r);
    /* (optional) on the thread that starts r, before it is queued: what r must come after (NCCL:
     * an event on that thread's compute stream, into r->ordered for run) */
    dt_status_t (*order)(struct dt_comm *c, struct dt_comm_req *r);
    /* watchdog tick, every few ms: answer other ranks' "where are you?" */
    void (*serve)(struct dt_comm *c);
    /* Ask every other rank how far it got, for up to wait_s seconds. Write the ranks that
     * have not started request seq to ranks[], with the number of requests each has started
     * in at[] (UINT64_MAX: no answer); return how many. */
    int (*laggards)(struct dt_comm *c, uint64_t seq, int *ranks, uint64_t *at, int max, double wait_s);
    /* end every rank of the job with this exit code (never returns) */
    void (*abort)(struct dt_comm *c, int code);
    /* clean: every rank closes; otherwise release this process's memory only (no shutdown that
     * needs the peers) */
    void (*finalize)(struct dt_comm *c, bool clean);
};

struct dt_comm {
    const struct dt_comm_backend *be;
    struct dt_world world;
    double timeout; /* seconds */
    void *impl;
    /* progress, read by the watchdog and by laggards queries of other ranks */
    atomic_uint_fast64_t started, finished; /* requests started / finished on this rank */
    _Atomic int64_t step;
    struct dt_comm_sync *sync; /* comm.c: queue, threads */
};

/* The backend compiled in for CPU tensors (MPI), or NULL (comm_reg.c). */
const struct dt_comm_backend *dt_comm_cpu_backend(void);
/* The backend for CUDA device memory (NCCL, loaded with the CUDA module; it opens the CPU backend
 * beside it), or NULL in a build without CUDA (comm_reg.c). */
const struct dt_comm_backend *dt_comm_gpu_backend(void);

dt_status_t dt_comm_open(struct dt_comm **out, const struct dt_world *w, const struct dt_comm_backend *be,
                         double timeout_s);
/* A communicator over the ranks of c with the same color (collective over c), ranked by key: the
 * ranks of one node, or one rank of each node. what names it in messages. */
dt_status_t dt_comm_split(struct dt_comm *c, int color, int key, const char *what, struct dt_comm **out);
/* clean: every rank got here. Otherwise an error is on its way out: nothing that needs the
 * peers is done (they may never join), and a thread stuck in a collective is left to the
 * process exit; the launcher ends the other ranks. */
void dt_comm_close(struct dt_comm *c, bool clean);
/* A stop signal arrived (async-signal-safe): a request then blocked by a rank that no longer
 * answers ends the job at once, naming it, instead of waiting for compute.comm_timeout. */
void dt_comm_note_stop(void);
/* The training step requests belong to (for messages). */
void dt_comm_set_step(struct dt_comm *c, int64_t step);
dt_status_t dt_comm_start(struct dt_comm *c, struct dt_comm_req *r);
dt_status_t dt_comm_wait(struct dt_comm *c, struct dt_comm_req *r);
/* start and wait */
dt_status_t dt_comm_do(struct dt_comm *c, struct dt_comm_req r);

const char *dt_coll_name(enum dt_coll_kind k);

#endif
