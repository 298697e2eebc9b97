/*
 * sgemm_bench.c - GFLOP/s of oneDNN's sgemm, and of its matmul primitive, on a
 * given shape, best of N runs, on the current OpenMP thread count.
 *   sgemm_bench M N K [TA TB] [reps]      e.g. sgemm_bench 1024 3072 768
 * The ceiling bench/train_gpt2.sh compares dtrun against (../shared/PERF.md).
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: sgemm_bench M N K [TA TB] [reps]\n");
        return 2;
    }
    long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
    char ta = argc > 5 ? argv[4][0] : 'N', tb = argc > 5 ? argv[5][0] : 'N';
    int reps = argc > 6 ? atoi(argv[6]) : 10;
    if (M <= 0 || N <= 0 || K <= 0 || reps < 2) {
        fprintf(stderr, "sgemm_bench: M, N and K must be positive and reps at least 2 (the first run is left out)\n");
        return 2;
    }
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
    if (!A || !B || !C) {
        fprintf(stderr, "sgemm_bench: out of memory for a %ld x %ld x %ld product\n", M, N, K);
        return 1;
    }
    for (long i = 0; i < M * K; i++) A[i] = (float)(i % 7) * 0.01f;
    for (long i = 0; i < K * N; i++) B[i] = (float)(i % 5) * 0.01f;
    long lda = ta == 'N' ? K : M, ldb = tb == 'N' ? N : K;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
        double dt = now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    printf("%.1f\n", 2.0 * M * N * K / best / 1e9);
    free(A);
    free(B);
    free(C);
    return 0;
}
