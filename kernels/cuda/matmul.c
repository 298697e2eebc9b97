/*
 * matmul.c - the matmuls through cuBLASLt, with the CPU kernels' row-major semantics (kernels.h):
 *   forward   out(BT,OC) = inp(BT,C) @ weight(OC,C)^T + bias(OC)          (bias fused: EPILOGUE_BIAS)
 *   backward  dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout
 *             (= instead of += for the outputs the DT_SET_* bits name)
 * cuBLASLt is column-major: plan.h turns each product into its gemm (tested without a GPU by
 * tests/unit/test_cuda_plan.c). With lp (bf16, fp16) the operands are rounded into the context's
 * scratch by the cast kernel (the CPU's rounding) and multiplied with fp32 accumulation into fp32;
 * a weight already of type lp (wt == lp: a strategy's 16-bit copy) is used as it is, and its
 * 16-bit bias widened to fp32 for the epilogue.
 * The state (the cuBLASLt handle, its workspace, the scratch) lives in a context, not in statics;
 * so does a cuBLAS handle, for the strided-batched gemms of attention's reference path.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define WORKSPACE (32u << 20) /* what cuBLASLt may use for its faster algorithms */

struct dt_cuda_ctx {
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *ws;
    uint16_t *lp[3]; /* scratch for rounded operands */
    size_t lp_n[3];
    float *bias; /* scratch for a 16-bit bias widened to fp32 (OC) */
    size_t bias_n;
};

static int lt_err(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? 0 : DT_CUDA_CUBLAS_ERR + (int)s; }

int dt_cuda_ctx_create(struct dt_cuda_ctx **out)
{
    struct dt_cuda_ctx *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c) return (int)cudaErrorMemoryAllocation;
    int e = lt_err(cublasLtCreate(&c->lt));
    if (!e) e = lt_err(cublasCreate(&c->blas));
    /* the stream the kernels launch on (a handle's default, stream 0, is the legacy stream) */
    if (!e) e = lt_err(cublasSetStream(c->blas, cudaStreamPerThread));
    if (!e) e = (int)cudaMalloc(&c->ws, WORKSPACE);
    if (e) {
        dt_cuda_ctx_destroy(c);
        return e;
    }
    *out = c;
    return 0;
}

void dt_cuda_ctx_destroy(struct dt_cuda_ctx *c)
{
    if (!c) return;
    for (int i = 0; i < 3; i++) cudaFree(c->lp[i]);
    cudaFree(c->bias);
    cudaFree(c->ws);
    if (c->blas) cublasDestroy(c->blas);
    if (c->lt) cublasLtDestroy(c->lt);
    free(c);
}

cublasHandle_t dt_cuda_ctx_blas(struct dt_cuda_ctx *c) { return c->blas; }

/* x rounded to t in scratch slot i (grown as needed) */
static int rounded(struct dt_cuda_ctx *c, int i, const float *x, size_t n, int t, const uint16_t **out)
{
    if (c->lp_n[i] < n) {
        cudaFree(c->lp[i]);
        c->lp[i] = NULL;
        c->lp_n[i] = 0;
        int e = (int)cudaMalloc((void **)&c->lp[i], n * sizeof *c->lp[i]);
        if (e) return e;
        c->lp_n[i] = n;
    }
    *out = c->lp[i];
    return (int)dt_cuda_cast_to_lp(c->lp[i], x, n, t);
}

/* a 16-bit bias of type t widened to fp32 in the context's scratch (grown as needed) */
static int widened_bias(struct dt_cuda_ctx *c, const void *bias, size_t n, int t, const float **out)
{
    if (c->bias_n < n) {
        cudaFree(c->bias);
        c->bias = NULL;
        c->bias_n = 0;
        int e = (int)cudaMalloc((void **)&c->bias, n * sizeof *c->bias);
        if (e) return e;
        c->bias_n = n;
    }
    *out = c->bias;
    return (int)dt_cuda_cast_from_lp(c->bias, bias, n, t);
}

/* the largest power of two up to 256 that divides p */
static uint32_t alignment(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    uint32_t a = 256;
    while (a > 1 && u % a) a >>= 1;
    return a;
}

/* D(m,n) = op(A)(m,k) . op(B)(k,n) + beta D [+ bias(m)], column-major, D and bias fp32 */
static int gemm(struct dt_cuda_ctx *c, bool ta, bool tb, int m, int n, int k, const void *A, int lda, const void *B,
                int ldb, float *D, int ldd, float beta, const float *bias, cudaDataType_t ab)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    size_t ws = WORKSPACE;
    int e = lt_err(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (!e && bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    /* stored shapes: op(X) = X^T means X is stored (k, m) */
    if (!e) e = lt_err(cublasLtMatrixLayoutCreate(&la, ab, ta ? k : m, ta ? m : k, lda));
    if (!e) e = lt_err(cublasLtMatrixLayoutCreate(&lb, ab, tb ? n : k, tb ? k : n, ldb));
    if (!e) e = lt_err(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd));
    if (!e) e = lt_err(cublasLtMatmulPreferenceCreate(&pref));
    if (!e) e = lt_err(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* slices of the parameter and activation buffers start anywhere: say how aligned they are (the
     * default assumes 256 bytes, and would pick an algorithm that faults on a slice) */
    static const cublasLtMatmulPreferenceAttributes_t align[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const void *ptr[4] = {A, B, D, D};
    for (int i = 0; i < 4 && !e; i++) {
        uint32_t a = alignment(ptr[i]);
        e = lt_err(cublasLtMatmulPreferenceSetAttribute(pref, align[i], &a, sizeof a));
    }
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (!e) e = lt_err(cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, ld, ld, pref, 1, &h, &found));
    if (!e && found == 0) e = DT_CUDA_CUBLAS_ERR + (int)CUBLAS_STATUS_NOT_SUPPORTED;
    const float alpha = 1.0f;
    if (!e)
        e = lt_err(cublasLtMatmul(c->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &h.algo, c->ws, WORKSPACE, cudaStreamPerThread));
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return e;
}

/* one of plan.h's gemms; operands[] by enum dt_mm_operand */
static int run_plan(struct dt_cuda_ctx *c, const struct dt_gemm_plan *p, const void *const *operands, float *D,
                    const float *bias, cudaDataType_t ab)
{
    return gemm(c, p->ta, p->tb, p->m, p->n, p->k, operands[p->a], p->lda, operands[p->b], p->ldb, D, p->ldd, p->beta,
                bias, ab);
}

static cudaDataType_t ab_type(int lp) { return lp == DT_CUDA_BF16 ? CUDA_R_16BF : lp == DT_CUDA_F16 ? CUDA_R_16F : CUDA_R_32F; }

/* weight's type wt: fp32, or lp itself when lp is 16-bit */
static bool weight_type_ok(int wt, int lp) { return wt == DT_CUDA_F32 || (wt == lp && lp != DT_CUDA_F32); }

int dt_cuda_matmul_forward(struct dt_cuda_ctx *c, float *out, const float *inp, const void *weight, const void *bias,
                           int wt, int BT, int C, int OC, int lp)
{
    if (!weight_type_ok(wt, lp)) return (int)cudaErrorInvalidValue;
    const void *a = weight, *b = inp;
    const float *bias32 = bias;
    int e = 0;
    if (lp != DT_CUDA_F32) {
        const uint16_t *ra = weight, *rb = NULL;
        if (wt == DT_CUDA_F32) e = rounded(c, 0, weight, (size_t)OC * C, lp, &ra);
        else if (bias) e = widened_bias(c, bias, (size_t)OC, lp, &bias32);
        if (!e) e = rounded(c, 1, inp, (size_t)BT * C, lp, &rb);
        a = ra, b = rb;
    }
    struct dt_gemm_plan p[2];
    dt_matmul_plans(false, BT, C, OC, p);
    const void *in[] = {[DT_MM_INP] = b, [DT_MM_WEIGHT] = a};
    if (!e) e = run_plan(c, &p[0], in, out, bias32, ab_type(lp));
    return e;
}

int dt_cuda_matmul_backward(struct dt_cuda_ctx *c, float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const void *weight, int wt, int BT, int C, int OC, int lp, unsigned set)
{
    if (!weight_type_ok(wt, lp)) return (int)cudaErrorInvalidValue;
    const void *w = weight, *x = inp, *dy = dout;
    int e = 0;
    if (lp != DT_CUDA_F32) {
        const uint16_t *rw = weight, *rx = NULL, *rdy = NULL;
        if (wt == DT_CUDA_F32) e = rounded(c, 0, weight, (size_t)OC * C, lp, &rw);
        if (!e) e = rounded(c, 1, inp, (size_t)BT * C, lp, &rx);
        if (!e) e = rounded(c, 2, dout, (size_t)BT * OC, lp, &rdy);
        w = rw, x = rx, dy = rdy;
    }
    struct dt_gemm_plan p[2];
    dt_matmul_plans(true, BT, C, OC, p);
    if (set & DT_CUDA_SET_DINP) p[0].beta = 0.0f;
    if (set & DT_CUDA_SET_DPARAMS) p[1].beta = 0.0f;
    const void *in[] = {[DT_MM_WEIGHT] = w, [DT_MM_INP] = x, [DT_MM_DOUT] = dy};
    if (!e) e = run_plan(c, &p[0], in, dinp, NULL, ab_type(lp));
    if (!e) e = run_plan(c, &p[1], in, dweight, NULL, ab_type(lp));
    /* the bias from fp32 dout, as the CPU sums it */
    if (!e && dbias) e = (int)dt_cuda_column_sums(dbias, dout, BT, OC, (set & DT_CUDA_SET_DPARAMS) != 0);
    return e;
}

const char *dt_cuda_error_string(int err)
{
    if (err >= DT_CUDA_CUBLAS_ERR) return cublasLtGetStatusString((cublasStatus_t)(err - DT_CUDA_CUBLAS_ERR));
    return cudaGetErrorString((cudaError_t)err);
}
