/*
 * test_nccl.c - the NCCL communication backend: the CUDA module's half (kernels/cuda/nccl.c,
 * through module.h's table) and dtrun's (src/comm/nccl.c, through dt_comm_open). Speaks TAP.
 *
 * Wherever the module loads: ncclGetUniqueId, and a communicator that cannot be created fails with
 * one message naming rank 0 and the cause, within its timeout: without a GPU (this is what runs in
 * a build container) the CUDA runtime's refusal, module and dtrun side both; with a GPU, a peer
 * that never comes (the timeout), and dtrun's backend on a world of one (an average over one
 * rank through the order/run path). With 2 GPUs: two forked ranks, the id handed over through a
 * pipe, check all-reduce (sum, average, max), reduce-scatter and all-gather on counts that do and
 * do not divide by 2 (in place and not), broadcast and barrier, in fp32, bf16 and fp16, against
 * values computed here: small integers and halves, exact in all three types, so every element is
 * compared exactly. Without 2 GPUs those are reported as skipped; without the module (a build
 * without CUDA) the whole test is. The verdict is the exit status (the .gpu tests' plain driver;
 * the TAP goes to the log): 1 when anything failed, 77 (skipped) when the two-GPU part could not
 * run, 0 when everything ran and passed.
 *
 * CUDA does not survive fork, so the parent never calls it: each part runs in a child that reports
 * through a pipe and is ended by alarm() if it hangs.
 *   make tests/unit/test_nccl.gpu && tests/unit/test_nccl.gpu
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cuda_module.h"

static const struct dt_cuda_module *mod;
static int tap_n, failed, gpus = -1;

// ---------------------------------------------------------------- children report, the parent prints

/* A child's line: "y text" ok, "n text" not ok, "s text" skipped, "# text" a note, "c N" GPUs seen. */
static int report_fd = -1;

static void say(char verdict, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(char verdict, const char *fmt, ...)
{
    char line[1200] = {verdict, ' '};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + 2, sizeof line - 3, fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    line[n++] = '\n';
    if (write(report_fd, line, n) != (ssize_t)n) _exit(3); /* one write: two ranks' lines never interleave */
}

/* a message of several lines, as notes */
static void note(const char *text)
{
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        say('#', "  %.*s", (int)len, p);
        p += len + (p[len] == '\n');
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run fn(0..n-1, arg) in n children at once and print what they report; a child that dies or
 * exits non-zero fails. alarm() bounds each, so the read below ends. */
static void in_children(int n, void (*fn)(int i, void *arg), void *arg, unsigned limit_s, const char *what)
{
    int p[2];
    pid_t pid[2];
    if (pipe(p)) {
        printf("Bail out! pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            printf("Bail out! fork: %s\n", strerror(errno));
            exit(1);
        }
        if (pid[i] == 0) {
            close(p[0]);
            report_fd = p[1];
            alarm(limit_s);
            fn(i, arg);
            _exit(0);
        }
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    char line[1300];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#') printf("#%s\n", line + 1);
        else if (line[0] == 'c') gpus = atoi(line + 2);
        else if (line[0] == 's') printf("ok %d # SKIP %s\n", ++tap_n, line + 2);
        else {
            printf("%sok %d - %s\n", line[0] == 'y' ? "" : "not ", ++tap_n, line + 2);
            failed += line[0] != 'y';
        }
    }
    if (f) fclose(f);
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pid[i], &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        printf("not ok %d - %s: child %d %s %d%s\n", ++tap_n, what, i, WIFSIGNALED(st) ? "ended by signal" : "exited",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
               WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (it hung past its time limit)" : "");
        failed++;
    }
}

// ---------------------------------------------------------------- host values and device buffers

static float contrib(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 7 + 1)); }

static void put(void *buf, enum dt_dtype t, size_t i, float v)
{
    if (t == DT_F32) ((float *)buf)[i] = v;
    else ((uint16_t *)buf)[i] = t == DT_BF16 ? dt_bf16_from_f32(v) : dt_f16_from_f32(v);
}

static float get(const void *buf, enum dt_dtype t, size_t i)
{
    if (t == DT_F32) return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return t == DT_BF16 ? dt_f32_from_bf16(h) : dt_f32_from_f16(h);
}

/* n values and a spare one past them (so an empty part has an address, and a write past the end
 * shows) on the device */
static void *to_dev(const float *h, size_t n, enum dt_dtype t)
{
    size_t esz = dt_dtype_size(t);
    char *typed = calloc(n + 1, esz);
    void *d = NULL;
    for (size_t i = 0; i <= n; i++) put(typed, t, i, h[i]);
    if (mod->ops->malloc(&d, (n + 1) * esz) || mod->ops->to_device(d, typed, (n + 1) * esz)) {
        say('n', "cudaMalloc/cudaMemcpy of %zu elements failed", n);
        _exit(1);
    }
    free(typed);
    return d;
}

static float *from_dev(void *d, size_t n, enum dt_dtype t)
{
    size_t esz = dt_dtype_size(t);
    char *typed = calloc(n + 1, esz);
    float *h = calloc(n + 1, sizeof *h);
    if (mod->ops->to_host(typed, d, (n + 1) * esz)) {
        say('n', "cudaMemcpy back of %zu elements failed", n);
        _exit(1);
    }
    for (size_t i = 0; i <= n; i++) h[i] = get(typed, t, i);
    free(typed);
    mod->ops->free(d);
    return h;
}

// ---------------------------------------------------------------- everywhere: the id, creation failures

static void basics(int i, void *arg)
{
    (void)i, (void)arg;
    char why[2048] = "", msg[2048] = "";
    int count = mod->device_count(why, sizeof why);
    say('c', "%d", count);
    const char *reason = strncmp(why, "no GPU: ", 8) ? why : why + 8;

    unsigned char a[128] = {0}, b[128] = {0}, zero[128] = {0};
    bool ok = mod->nccl_unique_id(a, msg, sizeof msg) == 0 && mod->nccl_unique_id(b, msg, sizeof msg) == 0;
    say(ok && memcmp(a, zero, 128) && memcmp(a, b, 128) ? 'y' : 'n',
        "ncclGetUniqueId: 128 bytes, new ones each call%s%s", ok ? "" : ": ", ok ? "" : msg);

    /* the module: one message naming the rank and the cause, within the timeout */
    void *comm = (void *)&comm;
    double t0 = now_s(), limit = count ? 3 : 10;
    int rc = mod->nccl->init(&comm, a, 2, 0, 0, limit, msg, sizeof msg);
    double took = now_s() - t0;
    char want[256];
    if (count)
        snprintf(want, sizeof want, "rank 0 of 2 (cuda:0): ncclCommInitRankConfig did not finish within 3 s\n  hint: ");
    else snprintf(want, sizeof want, "rank 0 of 2 (cuda:0): cudaSetDevice failed: %s\n  hint: ", reason);
    ok = rc == -1 && !comm && !strncmp(msg, want, strlen(want)) && !strchr(msg + strlen(want), '\n') &&
         took <= limit + (count ? 30 : 0) && (!count || took >= limit);
    say(ok ? 'y' : 'n', "%s fails in %.2f s, one message naming rank 0 and %s", count ? "init with a peer that never "
        "comes" : "init without a GPU", took, count ? "the timeout" : "the CUDA runtime's reason");
    note(msg);

    /* dtrun's side: the backend on a world of one (MPI beside it, as a singleton) */
    struct dt_world w = {.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .nnodes = 1,
                         .source = DT_WORLD_SINGLE};
    struct dt_comm *c = NULL;
    dt_status_t st = dt_comm_open(&c, &w, dt_comm_gpu_backend(), 10);
    if (!count) {
        const char *m = dt_error_msg();
        snprintf(want, sizeof want, "dtrun: rank 0: error: NCCL on cuda:0: cudaGetDeviceProperties(0) failed: %s\n"
                 "  hint: ", reason);
        say(st == DT_ERR_COMM && !c && !strncmp(m, want, strlen(want)) && !strchr(m + strlen(want), '\n') ? 'y' : 'n',
            "dt_comm_open with the NCCL backend and no GPU: rank 0's GPU and the reason, named");
        note(m);
        return;
    }
    if (st != DT_SUCCESS) {
        say('n', "dt_comm_open with the NCCL backend on a world of one");
        note(dt_error_msg());
        return;
    }
    size_t n = 1001;
    float *h = calloc(n + 1, sizeof *h);
    for (size_t k = 0; k < n; k++) h[k] = contrib(0, k);
    void *d = to_dev(h, n, DT_BF16);
    st = dt_comm_do(c, dt_coll_allreduce(d, n, DT_BF16, DT_RED_AVG, "one rank's average"));
    float *got = from_dev(d, n, DT_BF16);
    size_t bad = n;
    for (size_t k = 0; k < n && bad == n; k++)
        if (got[k] != h[k]) bad = k;
    say(st == DT_SUCCESS && bad == n ? 'y' : 'n', "dtrun's NCCL backend on a world of one: bf16 average of %zu "
        "elements through order and run%s", n, st == DT_SUCCESS ? "" : ": failed");
    if (st != DT_SUCCESS) note(dt_error_msg());
    free(h);
    free(got);
    dt_comm_close(c, true);
}

// ---------------------------------------------------------------- two GPUs: every collective, checked

struct kase {
    enum dt_coll_kind kind;
    enum dt_reduce red;
    size_t n;
    bool in_place;
};

/* the rank whose part of n holds element i */
static int owner(size_t n, size_t i)
{
    for (int r = 0;; r++) {
        size_t off, cnt;
        dt_comm_part(n, 2, r, &off, &cnt);
        if (i < off + cnt) return r;
    }
}

static void one_case(void *comm, int rank, enum dt_dtype t, struct kase k)
{
    static const char *const reds[] = {"sum", "average", "max"};
    static const float factor[] = {3, 1.5f, 2}; /* ranks 0 and 1 contribute 1x and 2x: sum, average, max */
    size_t off, cnt, n = k.n;
    dt_comm_part(n, 2, rank, &off, &cnt);
    bool rs = k.kind == DT_COLL_REDUCE_SCATTER, ag = k.kind == DT_COLL_ALLGATHER;
    size_t nsend = ag ? cnt : n, nrecv = rs && !k.in_place ? cnt : n, ncheck = rs ? cnt : n;
    float *send = calloc(nsend + 1, sizeof *send), *recv = calloc(nrecv + 1, sizeof *recv);
    float *want = calloc(n + 1, sizeof *want), *in = k.in_place ? recv : send;
    const float past = -7; /* in the spare element past each buffer's end: nothing may write there */
    send[nsend] = recv[nrecv] = past;
    for (size_t i = 0; i < n; i++) {
        if (ag) {
            recv[i] = -1; /* what nobody sent */
            want[i] = contrib(owner(n, i), i);
        } else if (k.kind == DT_COLL_BROADCAST) {
            recv[i] = contrib(rank, i);
            want[i] = contrib(1, i);
        } else {
            in[i] = contrib(rank, i);
            if (i < ncheck) want[i] = factor[k.red] * (float)((rs ? off + i : i) % 7 + 1);
        }
    }
    for (size_t j = 0; ag && j < cnt; j++) (k.in_place ? recv + off : send)[j] = contrib(rank, off + j);
    void *dsend = k.in_place || k.kind == DT_COLL_BROADCAST ? NULL : to_dev(send, nsend, t);
    void *drecv = to_dev(recv, nrecv, t);
    char why[2048] = "";
    void *ev = mod->nccl->order(why, sizeof why);
    int rc = ev ? mod->nccl->run(comm, ev, k.kind, k.red, t, dsend, drecv, n, 1, why, sizeof why) : -1;
    float *got = from_dev(drecv, nrecv, t);
    if (dsend) mod->ops->free(dsend);
    size_t bad = ncheck;
    for (size_t i = 0; rc == 0 && i < ncheck && bad == ncheck; i++)
        if (got[i] != want[i]) bad = i;
    char what[200];
    snprintf(what, sizeof what, "rank %d: %s%s%s %s, %zu elements%s%s", rank, dt_coll_name(k.kind),
             rs || k.kind == DT_COLL_ALLREDUCE ? " " : "", rs || k.kind == DT_COLL_ALLREDUCE ? reds[k.red] : "",
             dt_dtype_str(t), n, n % 2 && (rs || ag) ? " (uneven parts)" : "", k.in_place ? ", in place" : "");
    if (rc) {
        say('n', "%s: failed", what);
        note(why);
    } else if (got[nrecv] != past) {
        say('n', "%s: wrote past the end of its %zu elements", what, nrecv);
    } else if (bad < ncheck) {
        say('n', "%s: element %zu is %g, expected %g", what, bad, (double)got[bad], (double)want[bad]);
    } else {
        say('y', "%s", what);
    }
    free(send), free(recv), free(want), free(got);
}

static void rank_main(int rank, void *arg)
{
    int *idp = arg;
    unsigned char id[128];
    char why[2048] = "";
    if (rank == 0) {
        if (mod->nccl_unique_id(id, why, sizeof why) || write(idp[1], id, sizeof id) != (ssize_t)sizeof id) {
            say('n', "rank 0: no id to hand over: %s", why);
            return;
        }
    } else {
        close(idp[1]);
        size_t got = 0;
        for (ssize_t r = 1; got < sizeof id && r > 0; got += r > 0 ? (size_t)r : 0)
            r = read(idp[0], id + got, sizeof id - got);
        if (got < sizeof id) {
            say('n', "rank 1: no id from rank 0 (the pipe closed)");
            return;
        }
    }
    void *comm = NULL;
    if (mod->nccl->init(&comm, id, 2, rank, rank, 60, why, sizeof why)) {
        say('n', "rank %d: two-rank communicator", rank);
        note(why);
        return;
    }
    static const enum dt_dtype types[] = {DT_F32, DT_BF16, DT_F16};
    static const struct kase kases[] = {
        {DT_COLL_ALLREDUCE, DT_RED_SUM, 1001, false},    {DT_COLL_ALLREDUCE, DT_RED_AVG, 1001, true},
        {DT_COLL_ALLREDUCE, DT_RED_MAX, 1001, true},     {DT_COLL_REDUCE_SCATTER, DT_RED_SUM, 1001, false},
        {DT_COLL_REDUCE_SCATTER, DT_RED_SUM, 1001, true}, {DT_COLL_REDUCE_SCATTER, DT_RED_AVG, 1001, true},
        {DT_COLL_REDUCE_SCATTER, DT_RED_SUM, 1000, true}, {DT_COLL_REDUCE_SCATTER, DT_RED_MAX, 1000, false},
        {DT_COLL_REDUCE_SCATTER, DT_RED_SUM, 1, false},   {DT_COLL_ALLGATHER, DT_RED_SUM, 1001, false},
        {DT_COLL_ALLGATHER, DT_RED_SUM, 1001, true},     {DT_COLL_ALLGATHER, DT_RED_SUM, 1000, false},
        {DT_COLL_ALLGATHER, DT_RED_SUM, 1, true},        {DT_COLL_BROADCAST, DT_RED_SUM, 1001, true},
    };
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t ki = 0; ki < sizeof kases / sizeof *kases; ki++) one_case(comm, rank, types[ti], kases[ki]);
    int rc = mod->nccl->run(comm, NULL, DT_COLL_BARRIER, 0, DT_U8, NULL, NULL, 0, 0, why, sizeof why);
    say(rc ? 'n' : 'y', "rank %d: barrier", rank);
    if (rc) note(why);
    mod->nccl->destroy(comm);
}

int main(void)
{
    if (dt_cuda_module_get(&mod) != DT_SUCCESS) {
        const char *msg = dt_error_msg();
        printf("1..0 # SKIP no CUDA module: %.*s\n", (int)strcspn(msg, "\n"), msg);
        return 77;
    }
    in_children(1, basics, NULL, 120, "the id and creation failures");
    static const char *const two[] = {"all-reduce (sum, average, max)", "reduce-scatter (uneven and even parts)",
                                      "all-gather (uneven and even parts)", "broadcast", "barrier"};
    if (gpus >= 2) {
        int idp[2];
        if (pipe(idp)) {
            printf("Bail out! pipe: %s\n", strerror(errno));
            return 1;
        }
        in_children(2, rank_main, idp, 300, "two ranks");
        close(idp[0]);
        close(idp[1]);
    } else {
        for (size_t i = 0; i < sizeof two / sizeof *two; i++)
            printf("ok %d # SKIP %s on 2 ranks: this machine has %d GPU%s, 2 are needed\n", ++tap_n, two[i],
                   gpus < 0 ? 0 : gpus, gpus == 1 ? "" : "s");
    }
    printf("1..%d\n", tap_n);
    return failed ? 1 : gpus >= 2 ? 0 : 77;
}
