/*
 * sgemm_bench.c - GFLOP/s of oneDNN's sgemm, or of its fp32 matmul primitive
 * (created once, as a cache of primitives would keep it), on a given shape,
 * best of N runs, on the current OpenMP thread count.
 *   sgemm_bench M N K [TA TB] [reps] [sgemm|matmul]      e.g. sgemm_bench 1024 3072 768
 * sgemm is the ceiling bench/train_gpt2.sh compares dtrun against (../shared/PERF.md);
 * matmul shows which shapes oneDNN's primitive would multiply faster.
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* C = op(A) op(B) through a matmul primitive: its best time over reps runs after the first, or -1 */
static double matmul_best(long M, long N, long K, char ta, char tb, const float *A, const float *B, float *C, int reps)
{
    long lda = ta == 'N' ? K : M, ldb = tb == 'N' ? N : K;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t st = NULL;
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_dims_t adims = {M, K}, bdims = {K, N}, cdims = {M, N};
    dnnl_dims_t as = {ta == 'N' ? lda : 1, ta == 'N' ? 1 : lda}, bs = {tb == 'N' ? ldb : 1, tb == 'N' ? 1 : ldb},
                cs = {N, 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    double best = -1;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) == dnnl_success &&
        dnnl_stream_create(&st, eng, dnnl_stream_default_flags) == dnnl_success &&
        dnnl_memory_desc_init_by_strides(&ad, 2, adims, dnnl_f32, as) == dnnl_success &&
        dnnl_memory_desc_init_by_strides(&bd, 2, bdims, dnnl_f32, bs) == dnnl_success &&
        dnnl_memory_desc_init_by_strides(&cd, 2, cdims, dnnl_f32, cs) == dnnl_success &&
        dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) == dnnl_success &&
        dnnl_primitive_create(&p, pd) == dnnl_success &&
        dnnl_memory_create(&ma, &ad, eng, (void *)A) == dnnl_success &&
        dnnl_memory_create(&mb, &bd, eng, (void *)B) == dnnl_success &&
        dnnl_memory_create(&mc, &cd, eng, C) == dnnl_success) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            dnnl_primitive_execute(p, st, 3, args);
            dnnl_stream_wait(st);
            double dt = now() - t0;
            if (r > 0 && dt < best) best = dt;
        }
    }
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: sgemm_bench M N K [TA TB] [reps] [sgemm|matmul]\n");
        return 2;
    }
    long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
    char ta = argc > 5 ? argv[4][0] : 'N', tb = argc > 5 ? argv[5][0] : 'N';
    int reps = argc > 6 ? atoi(argv[6]) : 10;
    const char *what = argc > 7 ? argv[7] : "sgemm";
    if (strcmp(what, "sgemm") && strcmp(what, "matmul")) {
        fprintf(stderr, "sgemm_bench: '%s' is neither sgemm nor matmul\n", what);
        return 2;
    }
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
    if (!strcmp(what, "matmul")) {
        best = matmul_best(M, N, K, ta, tb, A, B, C, reps);
        if (best < 0) {
            fprintf(stderr, "sgemm_bench: oneDNN made no fp32 matmul primitive for %ld x %ld x %ld %c%c here\n", M, N, K,
                    ta, tb);
            return 1;
        }
    }
    for (int r = 0; r < reps && !strcmp(what, "sgemm"); r++) {
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
