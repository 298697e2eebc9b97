/* bench.c - see bench.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/clock.h"
#include "dt_build_config.h"
#include "comm/bench.h"
#include "core/error.h"
#ifdef HAVE_MPI
#include <mpi.h>
#endif

enum { MODE_PEER, MODE_SYNC, MODE_ASYNC, NMODES };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* seconds per all-reduce of n floats, over iters calls, in one mode */
static dt_status_t timed(struct dt_comm *c, int mode, float *buf, size_t n, int iters, double *sec)
{
    DT_CHECK(dt_comm_do(c, dt_coll_barrier("bench barrier")));
    double t0 = dt_now();
    for (int i = 0; i < iters; i++) {
        if (mode == MODE_SYNC) {
            DT_CHECK(dt_comm_do(c, dt_coll_allreduce(buf, n, DT_F32, DT_RED_SUM, "bench all-reduce")));
        } else if (mode == MODE_ASYNC) {
            struct dt_comm_req r = dt_coll_allreduce(buf, n, DT_F32, DT_RED_SUM, "bench all-reduce");
            DT_CHECK(dt_comm_start(c, &r));
            DT_CHECK(dt_comm_wait(c, &r));
        } else {
#ifdef HAVE_MPI
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
        }
    }
    double t = (dt_now() - t0) / iters;
    /* the slowest rank's time is the collective's */
    DT_CHECK(dt_comm_do(c, dt_coll_allreduce(&t, 1, DT_F64, DT_RED_MAX, "bench timing")));
    *sec = t;
    return DT_SUCCESS;
}

dt_status_t dt_comm_bench(struct dt_comm *c, size_t max_bytes, int rounds, FILE *out)
{
    int n = c->world.size;
    if (n < 2)
        return dt_error(DT_ERR_USAGE, "dtrun: error: bench comm measures collectives between ranks, and this world "
                        "has one\n  hint: dtrun -n 2 bench comm, or srun -n 2 --mpi=pmix dtrun bench comm");
    float *buf = calloc(max_bytes / sizeof(float), sizeof(float));
    if (!buf) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for a %zu-byte buffer", max_bytes);
    bool peer = strcmp(c->be->name, "mpi") == 0;
    if (c->world.rank == 0) {
        fprintf(out, "all-reduce (sum, fp32, in place), %d ranks, backend %s; bus bandwidth in GB/s, median of %d "
                "rounds (busbw = bytes / time x 2(n-1)/n)\n", n, c->be->name, rounds);
        fprintf(out, "%10s %14s %10s %12s %10s\n", "size", peer ? "MPI_Allreduce" : "-", "dtrun", "dtrun async",
                "dtrun/MPI");
    }
    double *t = malloc((size_t)rounds * NMODES * sizeof *t);
    dt_status_t rc = t ? DT_SUCCESS : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    for (size_t bytes = 1024; rc == DT_SUCCESS && bytes <= max_bytes; bytes *= 4) {
        size_t cnt = bytes / sizeof(float);
        int iters = bytes <= (64u << 10) ? 200 : bytes <= (4u << 20) ? 40 : bytes <= (64u << 20) ? 8 : 3;
        double bw[NMODES];
        for (int mode = 0; mode < NMODES && rc == DT_SUCCESS; mode++)
            if (mode == MODE_PEER && !peer) continue;
            else rc = timed(c, mode, buf, cnt, 1, &t[0]); /* warm up: connections, pages */
        for (int r = 0; r < rounds && rc == DT_SUCCESS; r++)
            for (int mode = 0; mode < NMODES && rc == DT_SUCCESS; mode++) /* interleaved: noise hits all alike */
                rc = mode == MODE_PEER && !peer ? DT_SUCCESS : timed(c, mode, buf, cnt, iters, &t[mode * rounds + r]);
        for (int mode = 0; mode < NMODES && rc == DT_SUCCESS; mode++) {
            qsort(t + mode * rounds, (size_t)rounds, sizeof *t, cmp);
            double med = t[mode * rounds + rounds / 2];
            bw[mode] = (double)bytes / med * 2.0 * (n - 1) / n / 1e9;
        }
        if (rc == DT_SUCCESS && c->world.rank == 0) {
            char size[16];
            if (bytes >= (1u << 20)) snprintf(size, sizeof size, "%zu MiB", bytes >> 20);
            else snprintf(size, sizeof size, "%zu KiB", bytes >> 10);
            if (peer)
                fprintf(out, "%10s %14.2f %10.2f %12.2f %9.1f%%\n", size, bw[MODE_PEER], bw[MODE_SYNC], bw[MODE_ASYNC],
                        100.0 * bw[MODE_SYNC] / bw[MODE_PEER]);
            else
                fprintf(out, "%10s %14s %10.2f %12.2f %10s\n", size, "-", bw[MODE_SYNC], bw[MODE_ASYNC], "-");
            fflush(out);
        }
    }
    free(t);
    free(buf);
    return rc;
}
