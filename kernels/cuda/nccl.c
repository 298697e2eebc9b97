/*
 * nccl.c - the NCCL half of the GPU communication backend (module.h's struct dt_cuda_nccl; the
 * dtrun half, with the watchdog's control plane, is src/comm/nccl.c). Part of the CUDA module.
 *
 * Non-blocking communicators: every NCCL call returns at once (or with ncclInProgress) and this
 * file polls ncclCommGetAsyncError, so a creation ends at the caller's timeout (then
 * ncclCommAbort) and a collective that never completes ends when the watchdog calls abort while
 * run polls. A mutex per communicator keeps that abort, which frees NCCL's communicator, from
 * landing between a poll's check and its call.
 *
 * Streams: run makes the communicator's own non-blocking stream wait for the caller's event
 * (order: recorded on the starting thread's per-thread default stream, where that thread's
 * kernels run), enqueues there and polls cudaStreamQuery, so the collective overlaps whatever
 * compute its caller goes on with, and dtrun's request is complete when run returns.
 *
 * Uneven parts (comm.h's dt_comm_part: the first n % size ranks hold one element more):
 * ncclReduceScatter and ncclAllGather need one count on every rank, and run uses them as they
 * are when n divides. Otherwise it issues one group (ncclGroupStart/End) of ncclReduce calls, one
 * per rank as root with that rank's part (reduce-scatter), or of ncclBroadcast calls
 * (all-gather). NCCL still does every reduction (ncclAvg, bf16 sums as in the even case) in one
 * launch, with no scratch memory and no copy kernel. The price is traffic: size/(size - 1) times
 * the native collective's bytes per link (2x on 2 ranks). Padding instead needs a scratch buffer
 * as large as the whole request, allocated on the communication thread in mid-step, and copies in
 * and out; a grouped ncclSend/ncclRecv reduce-scatter needs a reduction kernel of our own besides.
 * Callers that move a lot (ZeRO's buckets) get the native path by sizing requests to a multiple of
 * the ranks, as DeepSpeed pads its flat buffers.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "kernels/cuda/nccl.h"

static const char gpu_hint[] = "the GPU is out of memory or in a failed state, or an earlier kernel on it faulted; "
                               "nvidia-smi on the rank's node and compute-sanitizer say which";

struct comm {
    ncclComm_t nc;       /* NULL once aborted */
    cudaStream_t stream; /* this communicator's collectives */
    int rank, size, dev;
    double timeout_s;    /* creation and teardown */
    pthread_mutex_t mu;  /* abort against the NCCL and stream calls of run */
    bool aborted;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The polls' pause, growing from 2 us (a short collective is not slowed) to 200 us (a long one
 * costs no CPU); returns the next one. */
static unsigned pause_us(unsigned us)
{
    nanosleep(&(struct timespec){0, (long)us * 1000}, NULL);
    return us < 200 ? 2 * us : 200;
}

static const char *nccl_hint(ncclResult_t r)
{
    switch (r) {
    case ncclRemoteError:
        return "another rank failed or ended (NCCL's text names the peer's address); its own message says why";
    case ncclSystemError:
        return "a system call or the network failed, which is also how a peer that died shows; NCCL_DEBUG=WARN says "
               "more, NCCL_SOCKET_IFNAME or NCCL_IB_HCA choose the interface";
    case ncclUnhandledCudaError:
        return "a CUDA call inside NCCL failed: this GPU, or an earlier kernel on it; NCCL_DEBUG=WARN names the call";
    case ncclInternalError:
        return "NCCL's own check failed; run with NCCL_DEBUG=INFO and report it with that output";
    default:
        return "NCCL refused what dtrun passed it (a dtrun bug); NCCL_DEBUG=WARN names the argument";
    }
}

/* "rank 1 of 4 (cuda:1): ncclAllReduce failed: <NCCL's error> (NCCL: <its last error>)" and a hint */
static int nccl_fail(const struct comm *s, ncclResult_t r, const char *call, char *why, size_t n)
{
    char last[512];
    const char *t = ncclGetLastError(NULL); /* NCCL keeps one, whatever the communicator */
    snprintf(last, sizeof last, "%s", t ? t : "");
    size_t len = strlen(last);
    while (len && (last[len - 1] == '\n' || last[len - 1] == ' ')) last[--len] = '\0';
    snprintf(why, n, "rank %d of %d (cuda:%d): %s failed: %s%s%s%s\n  hint: %s", s->rank, s->size, s->dev, call,
             ncclGetErrorString(r), len ? " (NCCL: " : "", last, len ? ")" : "", nccl_hint(r));
    return -1;
}

static int cuda_fail(const struct comm *s, cudaError_t e, const char *call, const char *hint, char *why, size_t n)
{
    snprintf(why, n, "rank %d of %d (cuda:%d): %s failed: %s\n  hint: %s", s->rank, s->size, s->dev, call,
             cudaGetErrorString(e), hint);
    return -1;
}

/* Poll a non-blocking creation or teardown until NCCL is done with it or timeout_s has passed
 * (then ncclInProgress is returned). */
static ncclResult_t settle(ncclComm_t nc, double timeout_s)
{
    double t0 = now_s();
    ncclResult_t r = ncclInProgress;
    for (unsigned us = 2; r == ncclInProgress && now_s() - t0 <= timeout_s; us = pause_us(us)) {
        ncclResult_t q = ncclCommGetAsyncError(nc, &r);
        if (q != ncclSuccess) r = q;
    }
    return r;
}

static struct comm *new_comm(int rank, int size, int dev, double timeout_s, char *why, size_t n)
{
    struct comm *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, n, "rank %d of %d (cuda:%d): out of memory for the communicator", rank, size, dev);
        return NULL;
    }
    *s = (struct comm){.rank = rank, .size = size, .dev = dev, .timeout_s = timeout_s};
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void release(struct comm *s)
{
    if (s->stream) cudaStreamDestroy(s->stream);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* What a communicator holds besides NCCL's: its device and its stream. */
static int prepare(struct comm *s, char *why, size_t n)
{
    cudaError_t e = cudaSetDevice(s->dev);
    if (e != cudaSuccess)
        return cuda_fail(s, e, "cudaSetDevice", "this rank has no usable GPU of that number: nvidia-smi on its node "
                         "shows the GPUs and the driver, CUDA_VISIBLE_DEVICES which of them it sees (srun "
                         "--gpus-per-task=1 gives each rank one)", why, n);
    e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_fail(s, e, "cudaStreamCreateWithFlags", gpu_hint, why, n);
    return 0;
}

/* The end of a non-blocking creation: wait for it under the timeout. One that failed or ran out
 * of time is aborted, so that no NCCL thread stays behind waiting for peers. */
static int created(struct comm *s, ncclResult_t r, const char *call, void **out, char *why, size_t n)
{
    if (s->nc && (r == ncclSuccess || r == ncclInProgress)) r = settle(s->nc, s->timeout_s);
    if (r == ncclSuccess) {
        *out = s;
        return 0;
    }
    if (r == ncclInProgress)
        snprintf(why, n, "rank %d of %d (cuda:%d): %s did not finish within %g s\n  hint: a rank never got there (its "
                 "own message says why) or the ranks cannot reach each other: NCCL_DEBUG=INFO shows how far each got, "
                 "NCCL_SOCKET_IFNAME chooses the interface", s->rank, s->size, s->dev, call, s->timeout_s);
    else nccl_fail(s, r, call, why, n);
    if (s->nc) ncclCommAbort(s->nc);
    release(s);
    return -1;
}

static int nccl_init(void **out, const unsigned char id[128], int nranks, int rank, int dev, double timeout_s,
                     char *why, size_t n)
{
    *out = NULL;
    struct comm *s = new_comm(rank, nranks, dev, timeout_s, why, n);
    if (!s) return -1;
    if (prepare(s, why, n)) {
        release(s);
        return -1;
    }
    ncclUniqueId uid;
    _Static_assert(sizeof uid == 128, "ncclUniqueId is the 128 bytes module.h passes");
    memcpy(&uid, id, sizeof uid);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    return created(s, ncclCommInitRankConfig(&s->nc, nranks, uid, rank, &cfg), "ncclCommInitRankConfig", out, why, n);
}

static int nccl_split(void *comm, int color, int key, void **child, double timeout_s, char *why, size_t n)
{
    struct comm *p = comm;
    *child = NULL;
    /* named by the parent's rank until it has its own */
    struct comm *s = new_comm(p->rank, p->size, p->dev, timeout_s, why, n);
    if (!s) return -1;
    if (prepare(s, why, n)) {
        release(s);
        return -1;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    /* A non-blocking split runs as a job of the parent's: NCCL writes the child into s->nc only when
     * that job is done, so it is the parent that is polled. The parent's queue is idle meanwhile
     * (dt_comm_split is collective and called between requests). */
    pthread_mutex_lock(&p->mu); /* one caller of the parent's NCCL at a time */
    ncclResult_t r = ncclCommSplit(p->nc, color, key, &s->nc, &cfg);
    if (r == ncclSuccess || r == ncclInProgress) r = settle(p->nc, timeout_s);
    pthread_mutex_unlock(&p->mu);
    if (r == ncclInProgress) {
        /* NCCL may still write the child into s->nc: s is left to it (a few bytes), never freed */
        snprintf(why, n, "rank %d of %d (cuda:%d): ncclCommSplit did not finish within %g s\n  hint: a rank never got "
                 "there (its own message says why): NCCL_DEBUG=INFO shows how far each got", p->rank, p->size, p->dev,
                 timeout_s);
        return -1;
    }
    s->nc = __atomic_load_n(&s->nc, __ATOMIC_ACQUIRE);
    if (r == ncclSuccess && !s->nc) r = ncclInvalidUsage; /* NCCL_SPLIT_NOCOLOR is never asked for */
    if (created(s, r, "ncclCommSplit", child, why, n)) return -1;
    if ((r = ncclCommUserRank(s->nc, &s->rank)) != ncclSuccess || (r = ncclCommCount(s->nc, &s->size)) != ncclSuccess) {
        *child = NULL;
        nccl_fail(s, r, "ncclCommUserRank", why, n);
        ncclCommAbort(s->nc);
        release(s);
        return -1;
    }
    return 0;
}

static void *nccl_order(char *why, size_t n)
{
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, cudaStreamPerThread);
    if (e == cudaSuccess) return ev;
    snprintf(why, n, "%s on this thread's compute stream failed: %s\n  hint: %s",
             ev ? "cudaEventRecord" : "cudaEventCreateWithFlags", cudaGetErrorString(e), gpu_hint);
    if (ev) cudaEventDestroy(ev);
    return NULL;
}

static bool nccl_type(int dtype, ncclDataType_t *t)
{
    switch (dtype) {
    case DT_F32: *t = ncclFloat32; return true;
    case DT_BF16: *t = ncclBfloat16; return true;
    case DT_F16: *t = ncclFloat16; return true;
    /* not training's: the engine's int32 embedding rows, fp64 statistics, bytes */
    case DT_I32: *t = ncclInt32; return true;
    case DT_F64: *t = ncclFloat64; return true;
    case DT_U8: *t = ncclUint8; return true;
    }
    return false;
}

static bool nccl_op(int red, ncclRedOp_t *op)
{
    switch (red) {
    case DT_RED_SUM: *op = ncclSum; return true;
    case DT_RED_AVG: *op = ncclAvg; return true;
    case DT_RED_MAX: *op = ncclMax; return true;
    }
    return false;
}

/* An in-place reduce-scatter's part, from where NCCL leaves it (its offset in recv) to where
 * comm.h wants it (the start of recv), copied on the stream once NCCL's calls are enqueued. */
struct move {
    void *dst;
    const void *src;
    size_t bytes;
};

/* Uneven parts: one ncclReduce (reduce-scatter) or ncclBroadcast (all-gather) per rank as root,
 * of that rank's part, in one group. in: all n (reduce-scatter) or this rank's part (all-gather);
 * out: this rank's part (reduce-scatter) or all n (all-gather). */
static ncclResult_t per_rank(struct comm *s, bool reduce, const char *in, char *out, size_t count, size_t esz,
                             ncclDataType_t t, ncclRedOp_t op)
{
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    for (int r = 0; r < s->size; r++) {
        size_t ro, rc;
        dt_comm_part(count, s->size, r, &ro, &rc);
        if (!rc) continue; /* fewer elements than ranks: every rank skips the same roots */
        /* a root's own part in place when it already sits at its offset, as NCCL's in-place form wants */
        ncclResult_t x = reduce ? ncclReduce(in + ro * esz, out, rc, t, op, r, s->nc, s->stream)
                                : ncclBroadcast(r == s->rank ? in : out + ro * esz, out + ro * esz, rc, t, r, s->nc,
                                                s->stream);
        if (first == ncclSuccess) first = x;
    }
    ncclResult_t end = ncclGroupEnd(); /* always: the group must close */
    return first != ncclSuccess ? first : end;
}

/* Enqueue one request's NCCL calls on s->stream; *call names them for messages. */
static ncclResult_t issue(struct comm *s, int kind, ncclRedOp_t op, ncclDataType_t t, size_t esz, const void *send,
                          void *recv, size_t count, int root, struct move *mv, const char **call)
{
    char *rb = recv;
    size_t off, cnt;
    dt_comm_part(count, s->size, s->rank, &off, &cnt);
    bool even = count % (size_t)s->size == 0;
    switch (kind) {
    case DT_COLL_ALLREDUCE:
        *call = "ncclAllReduce";
        return ncclAllReduce(send ? send : recv, recv, count, t, op, s->nc, s->stream);
    case DT_COLL_BROADCAST:
        *call = "ncclBroadcast";
        return ncclBroadcast(recv, recv, count, t, root, s->nc, s->stream);
    case DT_COLL_REDUCE_SCATTER: {
        /* in place recv holds all n; [0, cnt) and [off, off + cnt) never overlap (off >= cnt when off > 0) */
        const char *in = send ? send : rb;
        char *out = send ? rb : rb + off * esz;
        if (!send && off) *mv = (struct move){rb, out, cnt * esz};
        *call = even ? "ncclReduceScatter" : "ncclReduce (grouped, one per rank: uneven parts)";
        return even ? ncclReduceScatter(in, out, cnt, t, op, s->nc, s->stream)
                    : per_rank(s, true, in, out, count, esz, t, op);
    }
    case DT_COLL_ALLGATHER: {
        const char *mine = send ? send : rb + off * esz;
        *call = even ? "ncclAllGather" : "ncclBroadcast (grouped, one per rank: uneven parts)";
        return even ? ncclAllGather(mine, rb, cnt, t, s->nc, s->stream)
                    : per_rank(s, false, mine, rb, count, esz, t, op);
    }
    }
    *call = "a collective of unknown kind";
    return ncclInvalidArgument;
}

/* Wait until NCCL has enqueued run's calls (stream false) or the stream has run them (true). An
 * error NCCL reports meanwhile (a peer that died, say) ends the wait, and so does an abort from
 * the watchdog; no timeout of its own, since the watchdog bounds every request. */
static int wait_for(struct comm *s, bool stream, const char *call, char *why, size_t n)
{
    for (unsigned us = 2;; us = pause_us(us)) {
        ncclResult_t a = ncclSuccess;
        cudaError_t e = cudaSuccess;
        pthread_mutex_lock(&s->mu);
        bool aborted = s->aborted;
        if (!aborted) {
            ncclResult_t q = ncclCommGetAsyncError(s->nc, &a);
            if (q != ncclSuccess) a = q;
            if (stream && a == ncclSuccess) e = cudaStreamQuery(s->stream);
        }
        pthread_mutex_unlock(&s->mu);
        if (aborted) {
            snprintf(why, n, "rank %d of %d (cuda:%d): %s was aborted (ncclCommAbort)\n  hint: the watchdog ended it; "
                     "its message says why", s->rank, s->size, s->dev, call);
            return -1;
        }
        if (a != ncclSuccess && a != ncclInProgress) return nccl_fail(s, a, call, why, n);
        if (e != cudaSuccess && e != cudaErrorNotReady) return cuda_fail(s, e, call, gpu_hint, why, n);
        if (a == ncclSuccess && e == cudaSuccess) return 0;
    }
}

static int nccl_run(void *comm, void *after, int kind, int red, int dtype, const void *send, void *recv, size_t count,
                    int root, char *why, size_t n)
{
    struct comm *s = comm;
    cudaError_t e = cudaSetDevice(s->dev); /* this thread's NCCL and stream calls */
    if (after) { /* consumed whatever happens next */
        if (e == cudaSuccess) e = cudaStreamWaitEvent(s->stream, after, 0);
        cudaEventDestroy(after);
    }
    if (e != cudaSuccess)
        return cuda_fail(s, e, "waiting for the compute stream (cudaStreamWaitEvent)", gpu_hint, why, n);
    ncclDataType_t t;
    ncclRedOp_t op = ncclSum;
    bool reduces = kind == DT_COLL_ALLREDUCE || kind == DT_COLL_REDUCE_SCATTER;
    if (!nccl_type(dtype, &t) || (reduces && !nccl_op(red, &op))) {
        snprintf(why, n, "rank %d of %d (cuda:%d): no NCCL form of element type %d with reduction %d\n  hint: a dtrun "
                 "bug: comm.h's enum dt_dtype and enum dt_reduce name what the NCCL backend maps", s->rank, s->size,
                 s->dev, dtype, red);
        return -1;
    }
    if (!count) return 0;
    struct move mv = {0};
    const char *call = "the collective";
    pthread_mutex_lock(&s->mu);
    ncclResult_t r = s->aborted ? ncclSuccess
                                : issue(s, kind, op, t, dt_dtype_size((enum dt_dtype)dtype), send, recv, count, root,
                                        &mv, &call);
    pthread_mutex_unlock(&s->mu);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(s, r, call, why, n);
    /* NCCL's rule for non-blocking communicators: nothing else on its stream before its calls are enqueued */
    if (wait_for(s, false, call, why, n)) return -1;
    if (mv.bytes) {
        pthread_mutex_lock(&s->mu);
        e = s->aborted ? cudaSuccess : cudaMemcpyAsync(mv.dst, mv.src, mv.bytes, cudaMemcpyDeviceToDevice, s->stream);
        pthread_mutex_unlock(&s->mu);
        if (e != cudaSuccess)
            return cuda_fail(s, e, "moving the part to the start (cudaMemcpyAsync)", gpu_hint, why, n);
    }
    return wait_for(s, true, call, why, n);
}

static void nccl_abort(void *comm)
{
    struct comm *s = comm;
    pthread_mutex_lock(&s->mu);
    if (s->nc) ncclCommAbort(s->nc);
    s->nc = NULL;
    s->aborted = true;
    pthread_mutex_unlock(&s->mu);
}

static void nccl_destroy(void *comm)
{
    struct comm *s = comm;
    cudaSetDevice(s->dev);
    if (s->nc) {
        /* a peer that never joins the finalize is given the timeout, then left to the abort */
        ncclResult_t r = ncclCommFinalize(s->nc);
        if (r == ncclSuccess || r == ncclInProgress) r = settle(s->nc, s->timeout_s);
        if (r == ncclSuccess) ncclCommDestroy(s->nc);
        else ncclCommAbort(s->nc);
    }
    release(s);
}

const struct dt_cuda_nccl dt_cuda_nccl = {
    .init = nccl_init,
    .split = nccl_split,
    .order = nccl_order,
    .run = nccl_run,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};
