/*
 * comm_check.c - the communicator's collectives between real ranks: started
 * by tests/cli/test_comm.sh under mpirun with 2 and 3 ranks. Reduce-scatter
 * (out of place and in place, sum and average), all-gather (out of place and
 * in place) and broadcast, in fp32, bf16 and fp16, on element counts that do
 * not divide by the number of ranks (and fewer elements than ranks), plus an
 * all-reduce for reference. Values are small integers, so every sum is exact
 * in 16 bits and any misplaced, missing or doubled element shows.
 *
 * Every rank checks what it received; the verdicts are combined, and rank 0
 * prints one line per case: "ok - WHAT" or "not ok - WHAT: first difference".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/error.h"
#include "launch/world.h"

static struct dt_comm *comm;
static int rank, size, failures;

/* element i as contributed by rank r: 1..7 times r+1, exact in bf16 after summing over ranks */
static double contrib(int r, size_t i) { return (double)(r + 1) * (double)(i % 7 + 1); }

static void put(void *buf, enum dt_dtype t, size_t i, double v)
{
    if (t == DT_F32) ((float *)buf)[i] = (float)v;
    else if (t == DT_BF16) ((uint16_t *)buf)[i] = dt_bf16_from_f32((float)v);
    else ((uint16_t *)buf)[i] = dt_f16_from_f32((float)v);
}

static double get(const void *buf, enum dt_dtype t, size_t i)
{
    if (t == DT_F32) return ((const float *)buf)[i];
    if (t == DT_BF16) return dt_f32_from_bf16(((const uint16_t *)buf)[i]);
    return dt_f32_from_f16(((const uint16_t *)buf)[i]);
}

/* every rank's verdict combined; rank 0 says it */
static void verdict(const char *what, const char *why)
{
    double bad = why[0] != '\0';
    if (dt_comm_do(comm, dt_coll_allreduce(&bad, 1, DT_F64, DT_RED_MAX, "verdict")) != DT_SUCCESS) {
        fprintf(stderr, "%s\n", dt_error_msg());
        exit(1);
    }
    failures += bad > 0;
    if (rank != 0) return;
    if (bad > 0) printf("not ok - %s: %s\n", what, why[0] ? why : "another rank saw a difference");
    else printf("ok - %s\n", what);
    fflush(stdout);
}

/* the first i in [0, n) where buf holds something else than want(i), as text */
#define CHECK(buf, t, n, want, why)                                                                          \
    do {                                                                                                     \
        for (size_t i_ = 0; i_ < (n) && !(why)[0]; i_++) {                                                   \
            size_t i = i_;                                                                                   \
            double w_ = (want), g_ = get((buf), (t), i_);                                                    \
            if (g_ != w_) snprintf((why), 160, "rank %d: element %zu is %g, expected %g", rank, i_, g_, w_); \
        }                                                                                                    \
    } while (0)

static void run_or_die(struct dt_comm_req r)
{
    if (dt_comm_do(comm, r) != DT_SUCCESS) {
        fprintf(stderr, "%s\n", dt_error_msg());
        exit(1);
    }
}

static void reduce_scatter(enum dt_dtype t, size_t n, bool in_place, enum dt_reduce red)
{
    size_t esz = dt_dtype_size(t), off, cnt;
    dt_comm_part(n, size, rank, &off, &cnt);
    char *send = malloc(n * esz + 1), *recv = malloc(n * esz + 1), why[160] = "", what[160];
    for (size_t i = 0; i < n; i++) put(in_place ? recv : send, t, i, contrib(rank, i));
    /* (size (size + 1) / 2) x (i % 7 + 1): the sum over ranks; the average divides by size */
    double per = size * (size + 1) / 2.0 / (red == DT_RED_AVG ? size : 1);
    run_or_die(dt_coll_reduce_scatter(in_place ? NULL : send, recv, n, t, red, "reduce-scatter"));
    CHECK(recv, t, cnt, per * (double)((off + i) % 7 + 1), why);
    snprintf(what, sizeof what, "reduce-scatter %s, %s, %zu elements over %d ranks%s: rank %d holds [%zu, %zu)",
             red == DT_RED_AVG ? "average" : "sum", dt_dtype_str(t), n, size, in_place ? ", in place" : "", rank, off,
             off + cnt);
    verdict(what, why);
    free(send);
    free(recv);
}

static void allgather(enum dt_dtype t, size_t n, bool in_place)
{
    size_t esz = dt_dtype_size(t), off, cnt;
    dt_comm_part(n, size, rank, &off, &cnt);
    char *send = malloc(n * esz + 1), *recv = malloc(n * esz + 1), why[160] = "", what[160];
    for (size_t i = 0; i < n; i++) put(recv, t, i, -1); /* what nobody sent */
    for (size_t i = 0; i < cnt; i++) put(in_place ? recv : send, t, in_place ? off + i : i, contrib(rank, off + i));
    run_or_die(dt_coll_allgather(in_place ? NULL : send, recv, n, t, "all-gather"));
    /* element i comes from the rank whose part holds it */
    for (int r = 0; r < size && !why[0]; r++) {
        size_t ro, rc;
        dt_comm_part(n, size, r, &ro, &rc);
        CHECK((char *)recv + ro * esz, t, rc, contrib(r, ro + i), why);
    }
    snprintf(what, sizeof what, "all-gather %s, %zu elements from %d ranks%s", dt_dtype_str(t), n, size,
             in_place ? ", in place" : "");
    verdict(what, why);
    free(send);
    free(recv);
}

static void broadcast(enum dt_dtype t, size_t n)
{
    int root = size - 1;
    char *buf = malloc(n * dt_dtype_size(t) + 1), why[160] = "", what[160];
    for (size_t i = 0; i < n; i++) put(buf, t, i, rank == root ? contrib(root, i) : -1);
    run_or_die(dt_coll_broadcast(buf, n, t, root, "broadcast"));
    CHECK(buf, t, n, contrib(root, i), why);
    snprintf(what, sizeof what, "broadcast %s, %zu elements from rank %d of %d", dt_dtype_str(t), n, root, size);
    verdict(what, why);
    free(buf);
}

static void allreduce(enum dt_dtype t, size_t n)
{
    char *buf = malloc(n * dt_dtype_size(t) + 1), why[160] = "", what[160];
    for (size_t i = 0; i < n; i++) put(buf, t, i, contrib(rank, i));
    run_or_die(dt_coll_allreduce(buf, n, t, DT_RED_SUM, "all-reduce"));
    CHECK(buf, t, n, size * (size + 1) / 2.0 * (double)(i % 7 + 1), why);
    snprintf(what, sizeof what, "all-reduce sum %s, %zu elements over %d ranks", dt_dtype_str(t), n, size);
    verdict(what, why);
    free(buf);
}

int main(void)
{
    struct dt_world w;
    if (dt_world_discover(&w) != DT_SUCCESS ||
        dt_comm_open(&comm, &w, dt_comm_cpu_backend(), 60) != DT_SUCCESS) {
        fprintf(stderr, "%s\n", dt_error_msg());
        return 1;
    }
    rank = w.rank;
    size = w.size;
    /* fewer than the ranks, odd, prime, past 64 KiB */
    const size_t counts[] = {1, 7, 1001, 65537};
    const enum dt_dtype types[] = {DT_F32, DT_BF16, DT_F16};
    for (int ti = 0; ti < 3; ti++)
        for (int ci = 0; ci < 4; ci++) {
            enum dt_dtype t = types[ti];
            size_t n = counts[ci];
            reduce_scatter(t, n, false, DT_RED_SUM);
            reduce_scatter(t, n, true, DT_RED_SUM);
            allgather(t, n, false);
            allgather(t, n, true);
            broadcast(t, n);
            allreduce(t, n);
        }
    for (int ti = 0; ti < 3; ti++) {
        reduce_scatter(types[ti], 1001, false, DT_RED_AVG);
        reduce_scatter(types[ti], 1001, true, DT_RED_AVG);
    }
    dt_comm_close(comm, true);
    dt_pmix_finalize();
    return failures != 0;
}
