/*
 * matmul.c - linear layers through oneDNN's sgemm (row-major). oneDNN reaches
 * ~93% of this CPU's FMA ceiling where OpenBLAS, as these machines set it,
 * gets half (../shared/PERF.md). Without oneDNN a blocked OpenMP loop stands in.
 */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "dt_build_config.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"
#ifdef HAVE_DNNL
#include <dnnl.h>
#include <dnnl_debug.h>
#endif

/* the path and the instructions oneDNN dispatches to (the CPU's best, or ONEDNN_MAX_CPU_ISA's cap:
 * which machine's sums a run computes) */
const char *dt_cpu_gemm_path(void)
{
#ifdef HAVE_DNNL
    static char path[80];
    if (!path[0]) {
        const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
        snprintf(path, sizeof path, "oneDNN sgemm on %s", strncmp(isa, "cpu_isa_", 8) ? isa : isa + 8);
    }
    return path;
#else
    return "dtrun's OpenMP loops (built without oneDNN)";
#endif
}

/* C(M,N) = alpha * op(A) op(B) + beta * C, row-major, as dnnl_sgemm. */
void dt_cpu_gemm(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc)
{
#ifdef HAVE_DNNL
    dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    #pragma omp parallel for if (!omp_in_parallel() && (long)M * N * K > 32768)
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (ta == 'N' && tb == 'T') { /* rows of A against rows of B: contiguous dot products */
            const float *a = A + (size_t)i * lda;
            for (int j = 0; j < N; j++) {
                const float *b = B + (size_t)j * ldb;
                float dot = 0;
                #pragma omp simd reduction(+ : dot)
                for (int k = 0; k < K; k++) dot += a[k] * b[k];
                c[j] = alpha * dot + (beta == 0 ? 0 : beta * c[j]);
            }
            continue;
        }
        for (int j = 0; j < N; j++) c[j] = beta == 0 ? 0 : c[j] * beta;
        for (int k = 0; k < K; k++) {
            float a = alpha * (ta == 'N' ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i]);
            if (tb == 'N') {
                const float *b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += a * b[j];
            } else {
                for (int j = 0; j < N; j++) c[j] += a * B[(size_t)j * ldb + k];
            }
        }
    }
#endif
}

/* out[c] += (set: =) sum over rows of x(R, C), in DT_ROW_BLOCK's order (cpu.h; the GPU's): each
 * thread owns a range of columns and streams the rows in memory order (a column-at-a-time walk
 * misses cache), CB columns at a time summed in registers and added to out once. */
#define CB 32

static inline void colsum_block(float *out, const float *x, int R, int C, int c0, int w, bool set)
{
    float acc[CB] = {0};
    for (int r0 = 0; r0 < R; r0 += DT_ROW_BLOCK) {
        float part[CB] = {0};
        int r1 = R - r0 < DT_ROW_BLOCK ? R : r0 + DT_ROW_BLOCK;
        for (int i = r0; i < r1; i++) {
            const float *row = x + (size_t)i * C + c0;
            #pragma omp simd
            for (int c = 0; c < w; c++) part[c] += row[c];
        }
        #pragma omp simd
        for (int c = 0; c < w; c++) acc[c] += part[c];
    }
    for (int c = 0; c < w; c++) out[c0 + c] = set ? acc[c] : out[c0 + c] + acc[c];
}

DT_CLONES void dt_cpu_colsum(float *out, const float *x, int R, int C, bool set)
{
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int c0 = (int)((long)C * t / nt), c1 = (int)((long)C * (t + 1) / nt);
        for (int c = c0; c < c1; c += CB) {
            if (c1 - c >= CB) colsum_block(out, x, R, C, c, CB, set);
            else colsum_block(out, x, R, C, c, c1 - c, set);
        }
    }
}

void dt_cpu_matmul_forward(struct dt_kctx *kc, float *out, const float *inp, const float *weight, const float *bias, int BT, int C, int OC)
{
    float beta = 0;
    if (bias) {
        #pragma omp parallel for
        for (int i = 0; i < BT; i++) memcpy(out + (size_t)i * OC, bias, (size_t)OC * sizeof *out);
        beta = 1;
    }
    dt_cpu_gemm('N', 'T', BT, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void dt_cpu_matmul_backward(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int BT, int C, int OC, unsigned set)
{
    dt_cpu_gemm('N', 'N', BT, C, OC, 1.0f, dout, OC, weight, C, set & DT_SET_DINP ? 0.0f : 1.0f, dinp, C);
    dt_cpu_gemm('T', 'N', OC, C, BT, 1.0f, dout, OC, inp, C, set & DT_SET_DPARAMS ? 0.0f : 1.0f, dweight, C);
    if (dbias) dt_cpu_colsum(dbias, dout, BT, OC, set & DT_SET_DPARAMS);
}
