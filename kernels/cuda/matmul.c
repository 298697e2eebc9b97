/*
 * matmul.c - the matmuls through cuBLASLt, with the CPU kernels' row-major semantics (kernels.h):
 *   forward   out(BT,OC) = inp(BT,C) @ weight(OC,C)^T + bias(OC)          (bias fused: EPILOGUE_BIAS)
 *   backward  dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout
 *             (= instead of += for the outputs the DT_SET_* bits name)
 * cuBLASLt is column-major: plan.h turns each product into its gemm (tested without a GPU by
 * tests/unit/test_cuda_plan.c). Every gemm computes in CUBLAS_COMPUTE_32F: fp32 operands are
 * multiplied in fp32, never TF32 (that takes CUBLAS_COMPUTE_32F_FAST_TF32, which nothing here asks
 * for), and 16-bit operands are multiplied exactly and accumulated in fp32.
 *
 * Mixed precision (lp = bf16, fp16): inp (and dout, when it comes in lp) are the 16-bit activations
 * themselves; a weight of type wt = fp32 is rounded into the context's scratch by the cast kernel
 * (the CPU's rounding), one already of type lp (a strategy's 16-bit copy) is used as it is; the
 * fp32 gradient of a residual stream (dout in fp32) is rounded into scratch, the one cast a step
 * keeps. The forward's out is fp32 or lp: cuBLASLt rounds the fp32 sum (plus the bias, in the
 * epilogue's fp32) once into a 16-bit D. A bias the epilogue would have to take in D's type but
 * that is fp32 (wt = fp32, out 16-bit) goes the long way: D in fp32 scratch with the fp32 bias,
 * then the cast kernel rounds it into out. Split-k schemes that would reduce in a 16-bit output
 * type are excluded, so a 16-bit D is rounded exactly once. dbias is the column sums of dout as
 * the products read it (rounded to lp), in the CPU's order (ops.h's row blocks): the CPU's bits.
 *
 * FP8 (fp8-mixed, #42; kernels.h's struct dt_fp8_q): fp8.cu quantises the operands into scratch, the
 * codes and the transposed copies the backward reads (on Ada and Hopper FP8 gemms take only the "TN"
 * layout, plan.h), and computes their scales on the device. The gemms are cuBLASLt's FP8 ones, under
 * its FP8 requirements: CUBLAS_COMPUTE_32F with fp32 scale type; A and B E4M3 or E5M2 (E4M3 x E4M3
 * forward, E4M3 x the gradient's format in dgrad and wgrad: E5M2 x E5M2 is not offered); D, and C,
 * bf16 or fp32; every dimension a multiple of 16 and every matrix 16-byte aligned (other shapes
 * return DT_CUDA_ERR_FP8_SHAPE). The sums are multiplied by one device float,
 * CUBLASLT_MATMUL_DESC_A_SCALE_POINTER at the product of both scales' inverses (B's scale left at
 * 1), which is the CPU reference's alpha bit for bit (two scale pointers would round twice).
 * FAST_ACCUM stays off: cuBLASLt promotes the tensor cores' partial sums into fp32, closest to the
 * reference's fp32 sums (Transformer Engine turns it on for the forward, a speed to measure). The
 * bias, rounded to bf16 (the BIAS epilogue's type for FP8 gemms with a bf16 or fp32 D), is added in
 * fp32 in the epilogue, and dbias is the column sums of dout rounded to bf16, in the CPU's order.
 *
 * The state (the cuBLASLt handle, its workspace, the scratch) lives in a context, not in statics;
 * so does a cuBLAS handle, for the strided-batched gemms of attention's reference path.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define WORKSPACE (32u << 20) /* what cuBLASLt may use for its faster algorithms */

/* what cuBLASLt's heuristic answers from: a gemm's shape, types, epilogue and alignments */
struct algo_key {
    int ta, tb, m, n, k, lda, ldb, ldd, at, bt, dt, bias, beta0, gelu, bgrad;
    uint32_t align[4];
    uint32_t aux_align; /* the heuristic infers the GELU aux matrix's from its address */
};

/* heuristic answers kept per context: a step runs a few dozen shapes, each asked once */
#define ALGO_CACHE 128

struct dt_cuda_ctx {
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *ws;
    struct algo_key keys[ALGO_CACHE];
    cublasLtMatmulAlgo_t algos[ALGO_CACHE];
    bool none[ALGO_CACHE]; /* the heuristic found no algorithm for that key (an epilogue not offered) */
    int nalgos;
    void *scratch[DT_CUDA_SCRATCH_SLOTS]; /* cudaMalloc'ed: 256-byte aligned */
    size_t scratch_n[DT_CUDA_SCRATCH_SLOTS];
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
    /* said, not assumed: fp32 gemms in fp32 (CUBLAS_TF32_TENSOR_OP_MATH would allow TF32) */
    if (!e) e = lt_err(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
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
    for (int i = 0; i < DT_CUDA_SCRATCH_SLOTS; i++) cudaFree(c->scratch[i]);
    cudaFree(c->ws);
    if (c->blas) cublasDestroy(c->blas);
    if (c->lt) cublasLtDestroy(c->lt);
    free(c);
}

cublasHandle_t dt_cuda_ctx_blas(struct dt_cuda_ctx *c) { return c->blas; }

size_t dt_cuda_ctx_bytes(const struct dt_cuda_ctx *c)
{
    size_t n = WORKSPACE;
    for (int i = 0; i < DT_CUDA_SCRATCH_SLOTS; i++) n += c->scratch_n[i];
    return n;
}

/* Slot i, grown as needed. The old buffer's cudaFree waits for the device, so no kernel still
 * queued reads it. */
int dt_cuda_ctx_scratch(struct dt_cuda_ctx *c, int slot, size_t bytes, void **out)
{
    *out = NULL;
    if (slot < 0 || slot >= DT_CUDA_SCRATCH_SLOTS) return (int)cudaErrorInvalidValue;
    if (c->scratch_n[slot] < bytes) {
        int e = (int)cudaFree(c->scratch[slot]);
        c->scratch[slot] = NULL;
        c->scratch_n[slot] = 0;
        if (!e) e = (int)cudaMalloc(&c->scratch[slot], bytes);
        if (e) {
            cudaGetLastError(); /* an allocation's failure is this call's, not the next launch's */
            return e;
        }
        c->scratch_n[slot] = bytes;
    }
    *out = c->scratch[slot];
    return 0;
}

/* x (fp32) rounded to t in scratch slot i */
static int rounded(struct dt_cuda_ctx *c, int slot, const float *x, size_t n, int t, const void **out)
{
    void *p;
    int e = dt_cuda_ctx_scratch(c, slot, n * sizeof(uint16_t), &p);
    if (!e) e = (int)dt_cuda_cast_to_lp(p, x, n, t);
    *out = p;
    return e;
}

/* the largest power of two up to 256 that divides p */
static uint32_t alignment(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    uint32_t a = 256;
    while (a > 1 && u % a) a >>= 1;
    return a;
}

static cudaDataType_t cuda_type(int t) { return t == DT_CUDA_BF16 ? CUDA_R_16BF : t == DT_CUDA_F16 ? CUDA_R_16F : CUDA_R_32F; }

/* GELU in a gemm's epilogue (DTRUN_CUDA_TRY's gelu): none; GELU_AUX(_BIAS), which writes gelu(sum)
 * to D and the sum to aux; DGELU, which writes sum * gelu'(aux) to D. aux is shaped as D, its
 * leading dimension D's, of D's type (cuBLASLt's default). */
enum { GELU_NONE, GELU_FORWARD, GELU_BACKWARD };

/* a gemm's types: its matrices' and its bias's (cuBLASLt's default: D's), for the FP8 gemms the
 * device scalar their sums are multiplied by (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER; NULL: 1), a
 * GELU epilogue's mode and auxiliary matrix, and where the BGRADB epilogue is to write op(B)'s
 * column sums over k (D's type; NULL: no BGRADB) */
struct gemm_types {
    cudaDataType_t a, b, d, bias;
    const float *scale_a;
    int gelu;
    const void *aux;
    void *bgrad;
};

#define NOT_SUPPORTED (DT_CUDA_CUBLAS_ERR + (int)CUBLAS_STATUS_NOT_SUPPORTED) /* gemm(): the heuristic found none */

/* The heuristic's answer for a gemm of key's kind, asked with a preference saying what the gemm
 * may use: the workspace, a 16-bit D's split-k partials reduced in fp32 only, never in D's own type
 * (INPLACE and OUTPUT_TYPE would round each partial, and D is rounded once), and how aligned its
 * matrices are (slices of the parameter and activation buffers start anywhere; the default assumes
 * 256 bytes, and would pick an algorithm that faults on a slice). Kept in c's cache, "none" too. */
static int ask_heuristic(struct dt_cuda_ctx *c, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                         cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, cudaDataType_t dt,
                         const struct algo_key *key, cublasLtMatmulHeuristicResult_t *h)
{
    static const cublasLtMatmulPreferenceAttributes_t align[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasLtMatmulPreference_t pref = NULL;
    size_t ws = WORKSPACE;
    int found = 0;
    int e = lt_err(cublasLtMatmulPreferenceCreate(&pref));
    if (!e) e = lt_err(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    if (!e && dt != CUDA_R_32F) {
        uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        e = lt_err(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                        sizeof schemes));
    }
    for (int i = 0; i < 4 && !e; i++)
        e = lt_err(cublasLtMatmulPreferenceSetAttribute(pref, align[i], &key->align[i], sizeof key->align[i]));
    if (!e) e = lt_err(cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, ld, ld, pref, 1, h, &found));
    if (!e && found == 0) e = NOT_SUPPORTED;
    if ((!e || e == NOT_SUPPORTED) && c->nalgos < ALGO_CACHE) {
        c->keys[c->nalgos] = *key;
        c->none[c->nalgos] = e == NOT_SUPPORTED;
        if (!e) c->algos[c->nalgos] = h->algo;
        c->nalgos++;
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    return e;
}

/* D(m,n) = scale_a op(A)(m,k) . op(B)(k,n) + beta D [+ bias(m)], column-major, of types ty */
static int gemm(struct dt_cuda_ctx *c, bool ta, bool tb, int m, int n, int k, const void *A, int lda, const void *B,
                int ldb, void *D, int ldd, float beta, const void *bias, const struct gemm_types *ty)
{
    /* the heuristic is asked once per kind of gemm (it costs more host time than the launch), its
     * "none" too: an epilogue on trial that it does not offer falls back at no cost a call */
    struct algo_key key = {ta, tb, m, n, k, lda, ldb, ldd, ty->a, ty->b, ty->d, bias ? (int)ty->bias + 1 : 0,
                           beta == 0.0f, ty->gelu, ty->bgrad != NULL, {alignment(A), alignment(B), alignment(D),
                           alignment(D)}, ty->gelu ? alignment(ty->aux) : 0};
    const cublasLtMatmulAlgo_t *algo = NULL;
    for (int i = 0; i < c->nalgos && !algo; i++)
        if (!memcmp(&c->keys[i], &key, sizeof key)) {
            if (c->none[i]) return NOT_SUPPORTED;
            algo = &c->algos[i];
        }
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int e = lt_err(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (!e && ty->gelu) {
        cublasLtEpilogue_t epi = ty->gelu == GELU_BACKWARD ? CUBLASLT_EPILOGUE_DGELU
                                 : bias                    ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                           : CUBLASLT_EPILOGUE_GELU_AUX;
        int64_t aux_ld = ldd;
        e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        if (!e)
            e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ty->aux,
                                                      sizeof ty->aux));
        if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    if (!e && ty->bgrad) { /* written, not added to, whatever beta */
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BGRADB;
        e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ty->bgrad,
                                                          sizeof ty->bgrad));
    }
    if (!e && bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        if (!ty->gelu) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        if (!e) e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        int32_t bt = (int32_t)ty->bias;
        if (!e && ty->bias != ty->d)
            e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    if (!e && ty->scale_a)
        e = lt_err(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ty->scale_a,
                                                  sizeof ty->scale_a));
    /* stored shapes: op(X) = X^T means X is stored (k, m) */
    if (!e) e = lt_err(cublasLtMatrixLayoutCreate(&la, ty->a, ta ? k : m, ta ? m : k, lda));
    if (!e) e = lt_err(cublasLtMatrixLayoutCreate(&lb, ty->b, tb ? n : k, tb ? k : n, ldb));
    if (!e) e = lt_err(cublasLtMatrixLayoutCreate(&ld, ty->d, m, n, ldd));
    cublasLtMatmulHeuristicResult_t h;
    if (!e && !algo) {
        e = ask_heuristic(c, op, la, lb, ld, ty->d, &key, &h);
        algo = &h.algo;
    }
    const float alpha = 1.0f;
    if (!e)
        e = lt_err(cublasLtMatmul(c->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, algo, c->ws, WORKSPACE,
                                  cudaStreamPerThread));
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return e;
}

/* one of plan.h's gemms; operands[] by enum dt_mm_operand */
static int run_plan_typed(struct dt_cuda_ctx *c, const struct dt_gemm_plan *p, const void *const *operands, void *D,
                          const void *bias, const struct gemm_types *ty)
{
    return gemm(c, p->ta, p->tb, p->m, p->n, p->k, operands[p->a], p->lda, operands[p->b], p->ldb, D, p->ldd, p->beta,
                bias, ty);
}

/* A and B of type ab, D and the bias of type dt (DT_CUDA_*) */
static int run_plan(struct dt_cuda_ctx *c, const struct dt_gemm_plan *p, const void *const *operands, void *D,
                    const void *bias, int ab, int dt)
{
    struct gemm_types ty = {.a = cuda_type(ab), .b = cuda_type(ab), .d = cuda_type(dt), .bias = cuda_type(dt)};
    return run_plan_typed(c, p, operands, D, bias, &ty);
}

/* weight's type wt: fp32, or lp itself when lp is 16-bit */
static bool weight_type_ok(int wt, int lp) { return wt == DT_CUDA_F32 || (wt == lp && lp != DT_CUDA_F32); }
/* an activation (out, dout) of type t: fp32, or lp itself */
static bool act_type_ok(int t, int lp) { return t == DT_CUDA_F32 || t == lp; }

/* The bias as the BIAS epilogue takes it: of D's type ot (cuBLASLt's default), 16-byte aligned (an
 * under-aligned bias pointer faults, whatever its type), holding the values of type lp the products
 * take (an fp32 bias under 16-bit products rounded to them first, as autocast's F.linear rounds it,
 * and as the CPU does). Into scratch unless the bias already is all that. */
static int epilogue_bias(struct dt_cuda_ctx *c, const void *bias, int wt, int ot, int lp, int OC, const void **out)
{
    bool round = lp != DT_CUDA_F32 && wt == DT_CUDA_F32;
    size_t esz = ot == DT_CUDA_F32 ? sizeof(float) : sizeof(uint16_t);
    *out = bias;
    if (wt == ot && !round && alignment(bias) >= 16) return 0;
    void *s;
    int e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_BIAS, (size_t)OC * esz, &s);
    if (e) return e;
    *out = s;
    if (wt == ot && !round) /* moved to an aligned address */
        return (int)cudaMemcpyAsync(s, bias, (size_t)OC * esz, cudaMemcpyDeviceToDevice, cudaStreamPerThread);
    if (wt != DT_CUDA_F32) /* a 16-bit bias into an fp32 D */
        return (int)dt_cuda_cast_from_lp(s, bias, (size_t)OC, wt);
    if (ot != DT_CUDA_F32) return (int)dt_cuda_cast_to_lp(s, bias, (size_t)OC, ot);
    return (int)dt_cuda_round_lp(s, bias, (size_t)OC, lp); /* rounded to lp, kept in fp32 for an fp32 D */
}

/* Whether cuBLASLt's 16-byte-aligned kernels run a forward gemm: every operand's address and row
 * (C inputs of isz bytes, OC outputs of osz) on 16 bytes. The others (align1: an odd width, a slice
 * of a buffer) add the BIAS epilogue to a 16-bit D after rounding the product to it: measured on an
 * H200 (cutlass_75 ... align1), 2 ulps off the once-rounded sum in test_cuda_ops. */
static bool aligned_forward(const void *inp, const void *w, const void *out, int C, int OC, size_t isz, size_t osz)
{
    return alignment(inp) >= 16 && alignment(w) >= 16 && alignment(out) >= 16 && (size_t)C * isz % 16 == 0 &&
           (size_t)OC * osz % 16 == 0;
}

int dt_cuda_matmul_forward(struct dt_cuda_ctx *c, void *out, int ot, const void *inp, const void *weight,
                           const void *bias, int wt, int BT, int C, int OC, int lp)
{
    if (!weight_type_ok(wt, lp) || !act_type_ok(ot, lp)) return (int)cudaErrorInvalidValue;
    struct dt_gemm_plan p[2];
    dt_matmul_plans(false, BT, C, OC, p);
    const void *w = weight;
    int e = 0;
    if (lp != DT_CUDA_F32 && wt == DT_CUDA_F32) e = rounded(c, DT_CUDA_SCRATCH_WEIGHT, weight, (size_t)OC * C, lp, &w);
    const void *in[] = {[DT_MM_INP] = inp, [DT_MM_WEIGHT] = w};
    const void *b = bias;
    if (!e && bias && ot != DT_CUDA_F32 && !aligned_forward(inp, w, out, C, OC, sizeof(uint16_t), sizeof(uint16_t))) {
        /* the sum and the bias in fp32, rounded once here */
        void *o32;
        e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_OUT, (size_t)BT * OC * sizeof(float), &o32);
        if (!e) e = epilogue_bias(c, bias, wt, DT_CUDA_F32, lp, OC, &b);
        if (!e) e = run_plan(c, &p[0], in, o32, b, lp, DT_CUDA_F32);
        return e ? e : (int)dt_cuda_cast_to_lp(out, (const float *)o32, (size_t)BT * OC, ot);
    }
    if (!e && bias) e = epilogue_bias(c, bias, wt, ot, lp, OC, &b);
    return e ? e : run_plan(c, &p[0], in, out, b, lp, ot);
}

int dt_cuda_matmul_backward(struct dt_cuda_ctx *c, float *dinp, float *dweight, float *dbias, const void *dout, int dt,
                            const void *inp, const void *weight, int wt, int BT, int C, int OC, int lp, unsigned set)
{
    if (!weight_type_ok(wt, lp) || !act_type_ok(dt, lp)) return (int)cudaErrorInvalidValue;
    const void *w = weight, *dy = dout;
    int e = 0;
    if (lp != DT_CUDA_F32 && wt == DT_CUDA_F32) e = rounded(c, DT_CUDA_SCRATCH_WEIGHT, weight, (size_t)OC * C, lp, &w);
    if (!e && dt != lp) e = rounded(c, DT_CUDA_SCRATCH_DOUT, dout, (size_t)BT * OC, lp, &dy);
    struct dt_gemm_plan p[2];
    dt_matmul_plans(true, BT, C, OC, p);
    if (set & DT_CUDA_SET_DINP) p[0].beta = 0.0f;
    if (set & DT_CUDA_SET_DPARAMS) p[1].beta = 0.0f;
    const void *in[] = {[DT_MM_WEIGHT] = w, [DT_MM_INP] = inp, [DT_MM_DOUT] = dy};
    if (!e) e = run_plan(c, &p[0], in, dinp, NULL, lp, DT_CUDA_F32);
    if (!e && dbias && lp != DT_CUDA_F32 && (dt_cuda_tries() & DT_CUDA_TRY_BGRADB)) {
        /* bgradb (on trial): the weight's gemm writes dout's column sums too (op(B) is dout, k the
         * rows), into 16-byte aligned scratch (a slice of the gradients may not be), then set or
         * added into dbias */
        void *s;
        e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_BIAS, (size_t)OC * sizeof(float), &s);
        struct gemm_types ty = {.a = cuda_type(lp), .b = cuda_type(lp), .d = CUDA_R_32F, .bias = CUDA_R_32F, .bgrad = s};
        if (!e) e = run_plan_typed(c, &p[1], in, dweight, NULL, &ty);
        int add = !(set & DT_CUDA_SET_DPARAMS);
        if (e != NOT_SUPPORTED) return e ? e : (int)dt_cuda_convert(dbias, DT_CUDA_F32, s, DT_CUDA_F32, (size_t)OC, add);
        e = 0; /* no algorithm with the epilogue for this gemm: nothing ran, the gemm and the sums apart */
    }
    if (!e) e = run_plan(c, &p[1], in, dweight, NULL, lp, DT_CUDA_F32);
    /* the bias from dout as the products read it, in the CPU's order */
    void *s = NULL;
    if (!e && dbias) e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_PARTIALS, dt_cuda_row_partials(BT, OC) * sizeof(float), &s);
    if (!e && dbias) e = (int)dt_cuda_column_sums(dbias, dy, lp, BT, OC, (set & DT_CUDA_SET_DPARAMS) != 0, s);
    return e;
}

/* ---- GELU in the epilogue (kernels.h's matmul_gelu_forward_lp and matmul_dgelu_backward_lp, on
 * trial as DTRUN_CUDA_TRY's gelu): cuBLASLt's GELU_AUX_BIAS writes the pre-activation and its GELU
 * from one gemm, DGELU the backward's dinp times GELU's derivative at the pre-activation, in lp,
 * from one gemm and without the fp32 dinp between. Where the operands are not what the 16-byte
 * kernels take (aligned_forward) or lp is fp32, the same results come from the matmul and the GELU
 * kernels apart. */

static bool gelu_fusable(int lp, const void *a, const void *b, const void *d, const void *aux, int C, int OC)
{
    return lp != DT_CUDA_F32 && aligned_forward(a, b, d, C, OC, sizeof(uint16_t), sizeof(uint16_t)) &&
           alignment(aux) >= 16 && OC % 8 == 0;
}

int dt_cuda_matmul_gelu_forward(struct dt_cuda_ctx *c, void *out, void *pre, const void *inp, const void *weight,
                                const void *bias, int wt, int BT, int C, int OC, int lp)
{
    if (!weight_type_ok(wt, lp)) return (int)cudaErrorInvalidValue;
    const void *w = weight, *b = bias;
    int e = 0;
    if (lp != DT_CUDA_F32 && wt == DT_CUDA_F32) e = rounded(c, DT_CUDA_SCRATCH_WEIGHT, weight, (size_t)OC * C, lp, &w);
    if (!e && gelu_fusable(lp, inp, w, out, pre, C, OC)) {
        if (bias) e = epilogue_bias(c, bias, wt, lp, lp, OC, &b);
        struct dt_gemm_plan p[2];
        dt_matmul_plans(false, BT, C, OC, p);
        const void *in[] = {[DT_MM_INP] = inp, [DT_MM_WEIGHT] = w};
        struct gemm_types ty = {.a = cuda_type(lp), .b = cuda_type(lp), .d = cuda_type(lp), .bias = cuda_type(lp),
                                .gelu = GELU_FORWARD, .aux = pre};
        if (!e) e = run_plan_typed(c, &p[0], in, out, b, &ty);
        if (e != NOT_SUPPORTED) return e; /* no algorithm with the epilogue for this gemm: nothing ran */
        e = 0;
    }
    if (!e) e = dt_cuda_matmul_forward(c, pre, lp, inp, weight, bias, wt, BT, C, OC, lp);
    return e ? e : (int)dt_cuda_gelu_forward(out, pre, lp, (size_t)BT * OC);
}

int dt_cuda_matmul_dgelu_backward(struct dt_cuda_ctx *c, void *dpre, const void *pre, float *dweight, float *dbias,
                                  const void *dout, int dt, const void *inp, const void *weight, int wt, int BT, int C,
                                  int OC, int lp, unsigned set)
{
    if (!weight_type_ok(wt, lp) || !act_type_ok(dt, lp) || lp == DT_CUDA_F32) return (int)cudaErrorInvalidValue;
    const void *w = weight, *dy = dout;
    int e = 0;
    if (wt == DT_CUDA_F32) e = rounded(c, DT_CUDA_SCRATCH_WEIGHT, weight, (size_t)OC * C, lp, &w);
    if (!e && dt != lp) e = rounded(c, DT_CUDA_SCRATCH_DOUT, dout, (size_t)BT * OC, lp, &dy);
    if (e) return e;
    struct dt_gemm_plan p[2];
    dt_matmul_plans(true, BT, C, OC, p);
    p[0].beta = 0.0f;
    if (set & DT_CUDA_SET_DPARAMS) p[1].beta = 0.0f;
    const void *in[] = {[DT_MM_WEIGHT] = w, [DT_MM_INP] = inp, [DT_MM_DOUT] = dy};
    struct gemm_types ty = {.a = cuda_type(lp), .b = cuda_type(lp), .d = cuda_type(lp), .bias = cuda_type(lp),
                            .gelu = GELU_BACKWARD, .aux = pre};
    /* dinp's gemm reads dout (BT, OC) and the weight, writes (BT, C): the forward's shape turned round */
    e = gelu_fusable(lp, dy, w, dpre, pre, OC, C) ? run_plan_typed(c, &p[0], in, dpre, NULL, &ty) : NOT_SUPPORTED;
    if (e == NOT_SUPPORTED) { /* the ops apart (nothing ran): dinp in fp32, then GELU's backward */
        void *d32;
        e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_OUT, (size_t)BT * C * sizeof(float), &d32);
        if (!e) e = dt_cuda_matmul_backward(c, d32, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, lp,
                                            set | DT_CUDA_SET_DINP);
        return e ? e : (int)dt_cuda_gelu_backward(dpre, pre, d32, lp, (size_t)BT * C);
    }
    if (!e) e = run_plan(c, &p[1], in, dweight, NULL, lp, DT_CUDA_F32);
    void *s = NULL;
    if (!e && dbias) e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_PARTIALS, dt_cuda_row_partials(BT, OC) * sizeof(float), &s);
    if (!e && dbias) e = (int)dt_cuda_column_sums(dbias, dy, lp, BT, OC, (set & DT_CUDA_SET_DPARAMS) != 0, s);
    return e;
}

/* ---- FP8 (fp8-mixed, the file's opening comment) */

static cudaDataType_t fp8_type(int fmt) { return fmt == DT_CUDA_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }

/* What cuBLASLt's FP8 gemms take (cublasLtMatmul's FP8 requirements): every dimension a multiple of
 * 16 (m, n, k and the leading dimensions, which are BT, C and OC here) and every matrix on 16 bytes;
 * the codes live in scratch (256-byte aligned), the outputs are the caller's */
static bool fp8_shape_ok(int BT, int C, int OC, const void *o1, const void *o2)
{
    return BT > 0 && C > 0 && OC > 0 && BT % 16 == 0 && C % 16 == 0 && OC % 16 == 0 && alignment(o1) >= 16 &&
           (!o2 || alignment(o2) >= 16);
}

/* scratch for one FP8 matmul: its state and the codes of its operands (bytes per slot, 0: none) */
static int fp8_scratch(struct dt_cuda_ctx *c, struct dt_cuda_fp8_state **st, size_t nx, uint8_t **x, size_t nw,
                       uint8_t **w, size_t ng, uint8_t **g)
{
    void *p[4] = {NULL, NULL, NULL, NULL};
    int e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_FP8_STATE, sizeof **st, &p[0]);
    if (!e) e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_FP8_X, nx, &p[1]);
    if (!e) e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_FP8_W, nw, &p[2]);
    if (!e && ng) e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_FP8_G, ng, &p[3]);
    *st = p[0], *x = p[1], *w = p[2];
    if (g) *g = p[3];
    return e;
}

/* one of plan.h's FP8 gemms: A and B the codes of formats fa and fb, D of type dt (fp32 or bf16), the
 * sums multiplied by *alpha (device memory), a bias (bf16) added after */
static int run_plan_fp8(struct dt_cuda_ctx *c, const struct dt_gemm_plan *p, const void *const *operands, void *D,
                        const void *bias, int fa, int fb, int dt, const float *alpha)
{
    struct gemm_types ty = {.a = fp8_type(fa), .b = fp8_type(fb), .d = cuda_type(dt), .bias = CUDA_R_16BF, .scale_a = alpha};
    return run_plan_typed(c, p, operands, D, bias, &ty);
}

int dt_cuda_matmul_forward_fp8(struct dt_cuda_ctx *c, void *out, int ot, const void *inp, const void *weight,
                               const void *bias, int wt, int BT, int C, int OC, const struct dt_cuda_fp8_q *qx,
                               const struct dt_cuda_fp8_q *qw)
{
    if (!weight_type_ok(wt, DT_CUDA_BF16) || !act_type_ok(ot, DT_CUDA_BF16) ||
        (qx->fmt == DT_CUDA_FP8_E5M2 && qw->fmt == DT_CUDA_FP8_E5M2)) /* no E5M2 x E5M2 gemm */
        return (int)cudaErrorInvalidValue;
    if (!fp8_shape_ok(BT, C, OC, out, NULL)) return DT_CUDA_ERR_FP8_SHAPE;
    struct dt_cuda_fp8_state *st;
    uint8_t *x8, *w8;
    int e = fp8_scratch(c, &st, (size_t)BT * C, &x8, (size_t)OC * C, &w8, 0, NULL);
    struct dt_cuda_fp8_operand op[DT_CUDA_FP8_SLOTS] = {
        [DT_CUDA_FP8_X] = {inp, DT_CUDA_BF16, BT, C, qx->scale, qx->amax, qx->fmt, qx->current, x8, NULL},
        [DT_CUDA_FP8_W] = {weight, wt, OC, C, qw->scale, qw->amax, qw->fmt, qw->current, w8, NULL},
    };
    if (!e) e = (int)dt_cuda_fp8_quantise(st, op);
    /* the bias rounded to bf16, the type the FP8 gemms' BIAS epilogue takes with a bf16 or fp32 D */
    const void *b = NULL;
    if (!e && bias) e = epilogue_bias(c, bias, wt, DT_CUDA_BF16, DT_CUDA_BF16, OC, &b);
    struct dt_gemm_plan p[2];
    dt_matmul_plans_fp8(false, BT, C, OC, p);
    const void *in[DT_MM_OPERANDS] = {[DT_MM_INP] = x8, [DT_MM_WEIGHT] = w8};
    return e ? e : run_plan_fp8(c, &p[0], in, out, b, qw->fmt, qx->fmt, ot, &st->alpha[DT_CUDA_FP8_FWD]);
}

int dt_cuda_matmul_backward_fp8(struct dt_cuda_ctx *c, float *dinp, float *dweight, float *dbias, const void *dout,
                                int dt, const void *inp, const void *weight, int wt, int BT, int C, int OC,
                                const struct dt_cuda_fp8_q *qx, const struct dt_cuda_fp8_q *qw,
                                const struct dt_cuda_fp8_q *qg, unsigned set)
{
    if (!weight_type_ok(wt, DT_CUDA_BF16) || !act_type_ok(dt, DT_CUDA_BF16) ||
        (qg->fmt == DT_CUDA_FP8_E5M2 && (qx->fmt == DT_CUDA_FP8_E5M2 || qw->fmt == DT_CUDA_FP8_E5M2)))
        return (int)cudaErrorInvalidValue;
    if (!fp8_shape_ok(BT, C, OC, dinp, dweight)) return DT_CUDA_ERR_FP8_SHAPE;
    size_t ng = (size_t)BT * OC;
    struct dt_cuda_fp8_state *st;
    uint8_t *xt8, *wt8, *g8;
    int e = fp8_scratch(c, &st, (size_t)BT * C, &xt8, (size_t)OC * C, &wt8, 2 * ng, &g8);
    /* the backward reads inp and weight transposed only, dout both ways (plan.h) */
    struct dt_cuda_fp8_operand op[DT_CUDA_FP8_SLOTS] = {
        [DT_CUDA_FP8_X] = {inp, DT_CUDA_BF16, BT, C, qx->scale, qx->amax, qx->fmt, qx->current, NULL, xt8},
        [DT_CUDA_FP8_W] = {weight, wt, OC, C, qw->scale, qw->amax, qw->fmt, qw->current, NULL, wt8},
        [DT_CUDA_FP8_G] = {dout, dt, BT, OC, qg->scale, qg->amax, qg->fmt, qg->current, g8, g8 ? g8 + ng : NULL},
    };
    if (!e) e = (int)dt_cuda_fp8_quantise(st, op);
    /* the bias's gradient from dout rounded to bf16, unquantised, in the CPU's order */
    void *s = NULL;
    if (!e && dbias)
        e = dt_cuda_ctx_scratch(c, DT_CUDA_SCRATCH_PARTIALS, dt_cuda_row_partials(BT, OC) * sizeof(float), &s);
    if (!e && dbias) e = (int)dt_cuda_column_sums_bf16(dbias, dout, dt, BT, OC, (set & DT_CUDA_SET_DPARAMS) != 0, s);
    struct dt_gemm_plan p[2];
    dt_matmul_plans_fp8(true, BT, C, OC, p);
    if (set & DT_CUDA_SET_DINP) p[0].beta = 0.0f;
    if (set & DT_CUDA_SET_DPARAMS) p[1].beta = 0.0f;
    const void *in[DT_MM_OPERANDS] = {[DT_MM_WEIGHT_T] = wt8, [DT_MM_DOUT] = g8, [DT_MM_INP_T] = xt8,
                                      [DT_MM_DOUT_T] = g8 ? g8 + ng : NULL};
    if (!e) e = run_plan_fp8(c, &p[0], in, dinp, NULL, qw->fmt, qg->fmt, DT_CUDA_F32, &st->alpha[DT_CUDA_FP8_DGRAD]);
    if (!e) e = run_plan_fp8(c, &p[1], in, dweight, NULL, qx->fmt, qg->fmt, DT_CUDA_F32, &st->alpha[DT_CUDA_FP8_WGRAD]);
    return e;
}

const char *dt_cuda_error_string(int err)
{
    if (err == DT_CUDA_ERR_FP8_SHAPE)
        return "cuBLASLt's FP8 gemms need BT (batch x sequence), C and OC that are multiples of 16, and outputs on "
               "16-byte boundaries";
    if (err >= DT_CUDA_CUBLAS_ERR) return cublasLtGetStatusString((cublasStatus_t)(err - DT_CUDA_CUBLAS_ERR));
    return cudaGetErrorString((cudaError_t)err);
}
