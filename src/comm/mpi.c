/*
 * mpi.c - the CPU communication backend: Open MPI, initialized by dtrun with
 * MPI_THREAD_MULTIPLE (the communication thread and the watchdog both call
 * MPI). Collectives run on one duplicate of MPI_COMM_WORLD with errors
 * returned, not fatal; the watchdog's "where are you?" queries on another, so
 * they never match a training message.
 *
 * Collectives are the blocking calls: on this machine Open MPI's
 * MPI_Iallreduce reaches 50-70% of MPI_Allreduce's bus bandwidth, and the
 * communication thread gives the overlap the nonblocking call would.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/error.h"
#include "launch/bootstrap.h"

enum { TAG_QUERY = 1, TAG_ANSWER = 2 };

struct mpi_state {
    MPI_Comm data, ctrl;
    MPI_Op sum_bf16, sum_f16; /* 16-bit sums, added in fp32 and rounded once per addition */
    int *counts, *displs;     /* per rank, for reduce-scatter and all-gather of uneven parts */
    bool we_initialized;
    uint64_t query_buf;
    MPI_Request query;
};

static MPI_Datatype mpi_type(enum dt_dtype t)
{
    switch (t) {
    case DT_F32: return MPI_FLOAT;
    case DT_F64: return MPI_DOUBLE;
    case DT_I32: return MPI_INT;
    case DT_BF16:
    case DT_F16: return MPI_UINT16_T; /* moved, never reduced here */
    case DT_U8: break;
    }
    return MPI_BYTE;
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = dt_bf16_from_f32(dt_f32_from_bf16(a[i]) + dt_f32_from_bf16(b[i]));
}

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = dt_f16_from_f32(dt_f32_from_f16(a[i]) + dt_f32_from_f16(b[i]));
}

static dt_status_t mpi_fail(struct dt_comm *c, int err, const char *call, const struct dt_comm_req *r)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: %s of %s at step %lld failed in %s: %s\n  hint: another "
                    "rank probably ended first; its own message (above) says why",
                    c->world.rank, dt_coll_name(r->kind), r->what ? r->what : "?", (long long)r->step + 1, call, msg);
}

/* What every communicator needs once m->data and m->ctrl exist: errors returned, the watchdog's
 * query posted, the 16-bit sums, the per-rank count arrays. */
static dt_status_t finish_state(struct dt_comm *c, struct mpi_state *m, int size)
{
    m->counts = calloc((size_t)size, sizeof *m->counts);
    m->displs = calloc((size_t)size, sizeof *m->displs);
    if (!m->counts || !m->displs) {
        free(m->counts);
        free(m->displs);
        free(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for MPI state");
    }
    MPI_Comm_set_errhandler(m->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(m->ctrl, MPI_ERRORS_RETURN);
    MPI_Irecv(&m->query_buf, 1, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_QUERY, m->ctrl, &m->query);
    MPI_Op_create(sum_bf16, 1, &m->sum_bf16);
    MPI_Op_create(sum_f16, 1, &m->sum_f16);
    c->impl = m;
    return DT_SUCCESS;
}

static dt_status_t mpi_init(struct dt_comm *c)
{
    struct mpi_state *m = calloc(1, sizeof *m);
    if (!m) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for MPI state");
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* Open MPI's blocking calls spin; the communication thread shares its core with the compute
         * thread (mpirun and srun bind a rank to its cores), so let it yield while it waits
         * (measured with bench/ddp_overhead.sh). An explicit setting wins. */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            free(m);
            return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: MPI_Init_thread failed\n  hint: start dtrun "
                            "through `dtrun -n N`, mpirun, or `srun --mpi=pmix`", c->world.rank);
        }
        m->we_initialized = true;
        /* Under srun's PMIx, Open MPI 4.1 lets a rank leave MPI_Init (and send: MPI_Comm_dup below)
         * while a slower one still waits there for the address exchange, its TCP transport already
         * accepting but its PML's receive callbacks not yet registered: the slower rank died in
         * MPI_Init calling a NULL callback for the message (tag 0x41, ob1's MATCH; core dumps on
         * the testbed, about one 2-node start in 60 under load). No rank sends before all are out. */
        dt_status_t rc = dt_bootstrap_barrier(&c->world, "every rank out of MPI_Init", (int)c->timeout);
        if (rc != DT_SUCCESS) {
            free(m);
            return rc;
        }
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        free(m);
        return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: this MPI grants thread level %d, and dtrun's "
                        "communication thread needs MPI_THREAD_MULTIPLE (%d)\n  hint: use an Open MPI built with "
                        "thread support (Debian's is)", c->world.rank, provided, MPI_THREAD_MULTIPLE);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != c->world.rank || size != c->world.size) {
        free(m);
        return dt_error(DT_ERR_COMM, "dtrun: error: MPI says rank %d of %d, but %s said rank %d of %d\n  hint: the "
                        "launcher and MPI disagree; start dtrun with `srun --mpi=pmix` or `dtrun -n N`", rank, size,
                        dt_world_source_str(c->world.source), c->world.rank, c->world.size);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &m->data);
    MPI_Comm_dup(MPI_COMM_WORLD, &m->ctrl);
    return finish_state(c, m, size);
}

static dt_status_t mpi_split(struct dt_comm *parent, struct dt_comm *child, int color, int key)
{
    struct mpi_state *pm = parent->impl, *m = calloc(1, sizeof *m);
    if (!m) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for MPI state");
    if (MPI_Comm_split(pm->data, color, key, &m->data) != MPI_SUCCESS ||
        MPI_Comm_split(pm->ctrl, color, key, &m->ctrl) != MPI_SUCCESS) {
        free(m);
        return dt_error(DT_ERR_COMM, "dtrun: rank %d: error: MPI_Comm_split failed", parent->world.rank);
    }
    int rank, size;
    MPI_Comm_rank(m->data, &rank);
    MPI_Comm_size(m->data, &size);
    child->world.rank = rank;
    child->world.size = size;
    return finish_state(child, m, size);
}

/* Element counts beyond INT_MAX go in pieces (all-reduce and broadcast are elementwise). */
static dt_status_t mpi_run(struct dt_comm *c, struct dt_comm_req *r)
{
    struct mpi_state *m = c->impl;
    MPI_Datatype t = mpi_type(r->dtype);
    size_t esz = dt_dtype_size(r->dtype);
    int err = MPI_SUCCESS;
    const char *call = "";
    bool half = r->dtype == DT_BF16 || r->dtype == DT_F16;
    bool reduces = r->kind == DT_COLL_ALLREDUCE || r->kind == DT_COLL_REDUCE_SCATTER;
    if (reduces && (r->dtype == DT_U8 || (half && r->red == DT_RED_MAX)))
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: %s of %s: no %s reduction in %s", dt_coll_name(r->kind),
                        r->what, r->red == DT_RED_MAX ? "max" : "sum", dt_dtype_str(r->dtype));
    MPI_Op op = r->red == DT_RED_MAX ? MPI_MAX
              : r->dtype == DT_BF16  ? m->sum_bf16
              : r->dtype == DT_F16   ? m->sum_f16
                                     : MPI_SUM;
    const size_t chunk = (size_t)1 << 30;
    switch (r->kind) {
    case DT_COLL_ALLREDUCE:
        call = "MPI_Allreduce";
        for (size_t o = 0; o < r->count && err == MPI_SUCCESS; o += chunk) {
            int n = (int)(r->count - o < chunk ? r->count - o : chunk);
            char *recv = (char *)r->recv + o * esz;
            const void *send = r->send ? (const char *)r->send + o * esz : MPI_IN_PLACE;
            err = MPI_Allreduce(send, recv, n, t, op, m->data);
        }
        break;
    case DT_COLL_BROADCAST:
        call = "MPI_Bcast";
        for (size_t o = 0; o < r->count && err == MPI_SUCCESS; o += chunk) {
            int n = (int)(r->count - o < chunk ? r->count - o : chunk);
            err = MPI_Bcast((char *)r->recv + o * esz, n, t, r->root, m->data);
        }
        break;
    case DT_COLL_REDUCE_SCATTER:
    case DT_COLL_ALLGATHER: {
        int size = c->world.size;
        if (r->count / (size_t)size >= INT_MAX)
            return dt_error(DT_ERR_INTERNAL, "dtrun: error: %s of %s: %zu elements per rank is more than MPI's int "
                            "count\n  hint: use more ranks or smaller buckets", dt_coll_name(r->kind), r->what,
                            r->count / (size_t)size);
        /* the block forms when the parts are equal; counts per rank otherwise */
        bool even = r->count % (size_t)size == 0;
        int part = (int)(r->count / (size_t)size);
        for (int i = 0; !even && i < size; i++) {
            size_t off, n;
            dt_comm_part(r->count, size, i, &off, &n);
            m->counts[i] = (int)n;
            m->displs[i] = (int)off;
        }
        if (r->kind == DT_COLL_REDUCE_SCATTER) {
            const void *send = r->send ? r->send : MPI_IN_PLACE;
            call = even ? "MPI_Reduce_scatter_block" : "MPI_Reduce_scatter";
            err = even ? MPI_Reduce_scatter_block(send, r->recv, part, t, op, m->data)
                       : MPI_Reduce_scatter(send, r->recv, m->counts, t, op, m->data);
        } else if (even) {
            call = "MPI_Allgather";
            err = MPI_Allgather(r->send ? r->send : MPI_IN_PLACE, part, t, r->recv, part, t, m->data);
        } else {
            call = "MPI_Allgatherv";
            int me = c->world.rank;
            err = MPI_Allgatherv(r->send ? r->send : MPI_IN_PLACE, m->counts[me], t, r->recv, m->counts, m->displs, t,
                                 m->data);
        }
        break;
    }
    case DT_COLL_BARRIER:
        call = "MPI_Barrier";
        err = MPI_Barrier(m->data);
        break;
    }
    return err == MPI_SUCCESS ? DT_SUCCESS : mpi_fail(c, err, call, r);
}

/* Answer every pending query with how many requests this rank has started. */
static void mpi_serve(struct dt_comm *c)
{
    struct mpi_state *m = c->impl;
    for (;;) {
        int done = 0;
        MPI_Status st;
        if (MPI_Test(&m->query, &done, &st) != MPI_SUCCESS || !done) return;
        uint64_t started = atomic_load(&c->started);
        MPI_Request ans;
        if (MPI_Isend(&started, 1, MPI_UINT64_T, st.MPI_SOURCE, TAG_ANSWER, m->ctrl, &ans) == MPI_SUCCESS)
            MPI_Request_free(&ans); /* 8 bytes go eagerly; the value is copied */
        MPI_Irecv(&m->query_buf, 1, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_QUERY, m->ctrl, &m->query);
    }
}

static int mpi_laggards(struct dt_comm *c, uint64_t seq, int *ranks, uint64_t *at, int max, double wait_s)
{
    struct mpi_state *m = c->impl;
    int n = c->world.size;
    uint64_t *got = calloc((size_t)n, sizeof *got);
    MPI_Request *rq = calloc((size_t)n, sizeof *rq);
    int *answered = calloc((size_t)n, sizeof *answered);
    if (!got || !rq || !answered) {
        free(got);
        free(rq);
        free(answered);
        return 0;
    }
    uint64_t ask = seq;
    for (int i = 0; i < n; i++) {
        rq[i] = MPI_REQUEST_NULL;
        if (i == c->world.rank) continue;
        MPI_Request s;
        if (MPI_Isend(&ask, 1, MPI_UINT64_T, i, TAG_QUERY, m->ctrl, &s) == MPI_SUCCESS) MPI_Request_free(&s);
        MPI_Irecv(&got[i], 1, MPI_UINT64_T, i, TAG_ANSWER, m->ctrl, &rq[i]);
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int pending = n - 1;
    while (pending > 0) {
        mpi_serve(c); /* everyone may be asking at once */
        for (int i = 0; i < n; i++) {
            int done = 0;
            if (rq[i] != MPI_REQUEST_NULL && MPI_Test(&rq[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
                answered[i] = 1;
                pending--;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > wait_s) break;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    /* a receive still posted would write a late answer into got after it is freed: cancel it
     * (the stop probe, unlike the timeout, goes on running) */
    for (int i = 0; i < n; i++)
        if (rq[i] != MPI_REQUEST_NULL && !answered[i]) {
            MPI_Cancel(&rq[i]);
            MPI_Wait(&rq[i], MPI_STATUS_IGNORE);
        }
    int k = 0;
    for (int i = 0; i < n && k < max; i++) {
        if (i == c->world.rank) continue;
        if (!answered[i]) {
            ranks[k] = i;
            at[k++] = UINT64_MAX;
        } else if (got[i] <= seq) {
            ranks[k] = i;
            at[k++] = got[i];
        }
    }
    free(got);
    free(rq);
    free(answered);
    return k;
}

static void mpi_abort(struct dt_comm *c, int code)
{
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, code);
    _Exit(code);
}

static void mpi_finalize(struct dt_comm *c, bool clean)
{
    struct mpi_state *m = c->impl;
    MPI_Cancel(&m->query);
    MPI_Request_free(&m->query);
    if (clean) { /* collective calls: only when every rank is here */
        MPI_Op_free(&m->sum_bf16);
        MPI_Op_free(&m->sum_f16);
        MPI_Comm_free(&m->ctrl);
        MPI_Comm_free(&m->data);
        if (m->we_initialized) MPI_Finalize();
    }
    free(m->counts);
    free(m->displs);
    free(m);
}

const struct dt_comm_backend dt_comm_mpi = {
    .name = "mpi",
    .init = mpi_init,
    .split = mpi_split,
    .run = mpi_run,
    .serve = mpi_serve,
    .laggards = mpi_laggards,
    .abort = mpi_abort,
    .finalize = mpi_finalize,
};
