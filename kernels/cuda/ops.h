/*
 * ops.h - the CUDA kernels of ops.cu and its siblings (optim.cu, norms.cu, rope_swiglu.cu, embed.cu,
 * loss.cu), callable from C inside the CUDA module: the same arguments
 * as their kernels.h twins, device pointers, each returning the launch's cudaError_t (a launch is
 * asynchronous: an error of the kernel itself shows at the next synchronization). t: DT_CUDA_BF16
 * or DT_CUDA_F16 (and DT_CUDA_F32 where fp32 is allowed), the values of enum dt_dtype, which the
 * C++ side cannot include.
 */
#ifndef DT_CUDA_OPS_H
#define DT_CUDA_OPS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "kernels/cuda/plan.h"

#define DT_CUDA_F32 0  /* DT_F32 */
#define DT_CUDA_BF16 2 /* DT_BF16 */
#define DT_CUDA_F16 3  /* DT_F16 */
#define DT_CUDA_SET_DINP 1u    /* kernels.h's DT_SET_DINP */
#define DT_CUDA_SET_DPARAMS 2u /* DT_SET_DPARAMS */

#ifdef __cplusplus
extern "C" {
#endif

/* activations of type at (t for residual's b): fp32, bf16, fp16; computed in fp32, 16-bit stores
 * rounded to nearest even; gelu_backward writes dinp (=) */
cudaError_t dt_cuda_gelu_forward(void *out, const void *inp, int at, size_t N);
cudaError_t dt_cuda_gelu_backward(void *dinp, const void *inp, const float *dout, int at, size_t N);
cudaError_t dt_cuda_residual_forward(float *out, const float *a, const void *b, int bt, size_t N);
cudaError_t dt_cuda_cast_to_lp(uint16_t *dst, const float *src, size_t n, int t);
cudaError_t dt_cuda_cast_from_lp(float *dst, const uint16_t *src, size_t n, int t);
cudaError_t dt_cuda_round_lp(float *dst, const float *src, size_t n, int t);
/* grad of type gt (fp32, bf16, fp16), widened per element; plp not NULL: the updated parameters
 * also written there rounded to pt (bf16, fp16), in the same pass */
cudaError_t dt_cuda_adamw(float *param, const void *grad, int gt, float gscale, float l2, float *m, float *v, size_t n,
                          float lr, float beta1, float beta2, float eps, float wd, int t, void *plp, int pt);
/* the device scratch the reductions to a host value take (sumsq_parts, mse): their block partials
 * (DT_CUDA_REDUCE_BYTES: 1024 blocks', norm2's), then sumsq_parts' results, 16 bytes a part; the
 * reduction slot's one size, whichever op asks first (it never grows: a cudaFree waits) */
#define DT_CUDA_REDUCE_BYTES (1024 * 16)
#define DT_CUDA_REDUCE_SLOT (DT_CUDA_REDUCE_BYTES + 16 * DT_CUDA_PARTS_MAX)
/* module.h's sumsq_parts: each part's sum of squares and inf/nan count, one read of it, all the
 * parts' results copied back at once (synchronizes); scratch: DT_CUDA_REDUCE_SLOT */
struct dt_cuda_part;
cudaError_t dt_cuda_sumsq_parts(const struct dt_cuda_part *parts, int np, int t, double *sumsq, size_t *nonfinite,
                                void *scratch);
/* Reductions over rows (layernorm's dweight and dbias, a bias's column sums) in kernels/cpu/cpu.h's
 * fixed order: rows cut into blocks of DT_CUDA_ROW_BLOCK, each block summed in row order into a
 * partial (from 0), the partials added in block order (from 0), the total added to the output
 * (or written, for column sums with set). plan.h's dt_cuda_row_partials: the floats of device scratch one
 * such reduction over (BT, C) takes. */
/* out of type ot (fp32, bf16, fp16), computed in fp32 */
cudaError_t dt_cuda_layernorm_forward(void *out, int ot, float *mean, float *rstd, const float *inp, const float *weight,
                                      const float *bias, int BT, int C);
/* scratch: 2 dt_cuda_row_partials(BT, C) floats; dinp_lp (type lt) not NULL: dinp also rounded into it */
cudaError_t dt_cuda_layernorm_backward(float *dinp, void *dinp_lp, int lt, float *dweight, float *dbias,
                                       const float *dout, const float *inp, const float *weight, const float *mean,
                                       const float *rstd, int BT, int C, float *scratch);
/* Llama's ops (kernels.h): RMSNorm (backward's scratch: dt_cuda_row_partials(BT, C) floats), rotary
 * embeddings in place (backward: the inverse rotation), SwiGLU */
cudaError_t dt_cuda_rmsnorm_forward(void *out, int ot, float *rstd, const float *inp, const float *weight, float eps,
                                    int BT, int C);
cudaError_t dt_cuda_rmsnorm_backward(float *dinp, void *dinp_lp, int lt, float *dweight, const float *dout,
                                     const float *inp, const float *weight, const float *rstd, int BT, int C,
                                     float *scratch);
cudaError_t dt_cuda_rope(void *qkv, int at, const float *cs, int B, int T, int NH, int NKV, int hs, int backward);
cudaError_t dt_cuda_swiglu_forward(void *out, const void *inp, int at, int BT, int H);
cudaError_t dt_cuda_swiglu_backward(void *dinp, const void *inp, const float *dout, int at, int BT, int H);
cudaError_t dt_cuda_position_forward(float *out, const float *wpe, int B, int T, int C);
cudaError_t dt_cuda_position_backward(float *dwpe, const float *dout, int B, int T, int C);
/* table of type t: fp32, bf16 or fp16 */
cudaError_t dt_cuda_rows_forward(float *out, const int32_t *inp, const void *table, int t, int v0, int nv, int n, int C);
cudaError_t dt_cuda_rows_add(void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals, int nrows,
                             int width);
/* The same by sorted rows (plan.h, rows2), in rows_sorted.cu. scratch: dt_cuda_rows_sorted_bytes's
 * *bytes of device memory, 256-byte aligned (its error: CUB's, asked for its temporary storage) */
cudaError_t dt_cuda_rows_sorted_bytes(int nrows, size_t lo, size_t n, int width, size_t *bytes);
cudaError_t dt_cuda_rows_add_sorted(void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals,
                                    int nrows, int width, void *scratch);
/* the kernels on trial (plan.h's DT_CUDA_TRY_ flags), for the whole process */
void dt_cuda_set_tries(unsigned flags);
unsigned dt_cuda_tries(void);
/* A slice of a multi-tensor AdamW step as the kernel reads it: module.h's slice and where its
 * elements start in the step's element space (the slices' n, summed in order). */
struct dt_cuda_slice_dev {
    float *param, *m, *v;
    const void *grad;
    void *plp;
    size_t n, start;
    float wd, l2;
};
/* AdamW over the ns slices of the device table s (n > 0 each, starts ascending), total elements in
 * all: the bits dt_cuda_adamw gives slice by slice, in one launch */
cudaError_t dt_cuda_adamw_slices(const struct dt_cuda_slice_dev *s, int ns, size_t total, int gt, float gscale,
                                 float lr, float beta1, float beta2, float eps, int t, int pt);
/* grad, gt, plp, pt as dt_cuda_adamw's */
cudaError_t dt_cuda_sgd(float *param, const void *grad, int gt, float gscale, float *buf, size_t n, float lr,
                        float momentum, int nesterov, float wd, int first_step, void *plp, int pt);
cudaError_t dt_cuda_round_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0);
/* kernels.h's convert (add 0) and accumulate (add 1), dt and st any of the three float types */
cudaError_t dt_cuda_convert(void *dst, int dt, const void *src, int st, size_t n, int add);
/* The loss ops' mean loss (module.h): into *mean on the host (synchronizes), or, mean NULL, added into
 * *acc on the device as (double)(float)mean / div (does not) */
/* the mean squared error; scratch: DT_CUDA_REDUCE_SLOT */
cudaError_t dt_cuda_mse(float *dout, const float *out, const float *target, float dloss, size_t n, void *scratch,
                        float *mean, double *acc, double div);
/* dbias(OC) += (set: =) the column sums of dout(BT, OC) of type t, widened (the matmul's bias
 * gradient); scratch: dt_cuda_row_partials(BT, OC) floats */
cudaError_t dt_cuda_column_sums(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch);
/* the same of dout rounded to bf16 first (an FP8 matmul's bias gradient, Transformer Engine's bgrad):
 * the CPU's bits of its column sums of the rounded values */
cudaError_t dt_cuda_column_sums_bf16(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch);
/* the mean cross-entropy */
cudaError_t dt_cuda_softmax_xent(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                                 float *mean, double *acc, double div);
/* the same on 16-bit logits of type t: widened, reduced in fp32, dlogits rounded back in place */
cudaError_t dt_cuda_softmax_xent_lp(float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V,
                                    int vb, int t, float *mean, double *acc, double div);
/* n fp32 values into n values of type t at the buffer's start, and back, without a second buffer */
cudaError_t dt_cuda_narrow_inplace(void *buf, size_t n, int t);
cudaError_t dt_cuda_widen_inplace(void *buf, size_t n, int t);

/*
 * attention.cu: causal attention with grouped-query heads (kernels.h): a row of qkv (B,T,W), W =
 * (NH + 2 NKV) C/NH, holds NH query heads, then NKV key heads, then NKV value heads (NKV dividing NH;
 * NKV = NH is multi-head attention's (B,T,3C)), query head h attending with key/value head
 * h / (NH/NKV); qkv and out (B,T,C) of type at (fp32, bf16, fp16: widened as read, computed in fp32,
 * rounded once on store), dqkv (B,T,W) written (=) in type at, a key/value head's gradient summed
 * over its group's query heads; bf16 and fp16 at head size 64 or 128 run on tensor cores
 * (attention_tc.h), which also round P, dS and dout to 16 bits before their products. Fused (flash
 * attention, head size C/NH up to 128; other shapes cudaErrorInvalidValue): forward writes out and
 * lse (B,NH,T, fp32), each query row's log-sum-exp of its scaled scores, the only state backward
 * needs; backward takes the forward's out and lse (dout in fp32) and dt_cuda_attention_scratch(...)
 * floats of device scratch, and gives the same bits on every run (no atomics).
 */
cudaError_t dt_cuda_attention_forward(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH,
                                      int NKV);
cudaError_t dt_cuda_attention_backward(void *dqkv, const float *dout, const void *qkv, const void *out,
                                       const float *lse, float *scratch, int at, int B, int T, int C, int NH, int NKV);
size_t dt_cuda_attention_scratch(int B, int T, int C, int NH, int NKV, int at);
/* The reference path, fp32 only, the textbook algorithm through cuBLAS (c's handle): att
 * (B,NH,T,T) the causal softmax, masked entries 0; backward from att writes dqkv (=), with
 * dt_cuda_attention_ref_scratch(NH, T) floats of scratch. cudaError_t, or DT_CUDA_CUBLAS_ERR + a
 * cuBLAS status (matmul.h). */
struct dt_cuda_ctx;
int dt_cuda_attention_forward_ref(struct dt_cuda_ctx *c, float *out, float *att, const float *qkv, int B, int T, int C,
                                  int NH, int NKV);
int dt_cuda_attention_backward_ref(struct dt_cuda_ctx *c, float *dqkv, const float *dout, const float *qkv,
                                   const float *att, float *scratch, int B, int T, int C, int NH, int NKV);
size_t dt_cuda_attention_ref_scratch(int NH, int T);
/*
 * attention_cached.cu: attention for generation over a cache of keys and values (kernels.h's
 * attention_cached): the key and value heads of the n new rows of qkv (B,n,W) stored into kcache and
 * vcache (B,Tc,NKV,hs) at rows [pos, pos + n), then out (B,n,C) the new queries attended over the
 * cached rows 0 .. their own; all of type at, computed in fp32, out rounded once. Head size C/NH up
 * to DT_CUDA_ATTN_CACHED_HS_MAX; pos + n <= Tc (other shapes: cudaErrorInvalidValue).
 */
#define DT_CUDA_ATTN_CACHED_HS_MAX 256
cudaError_t dt_cuda_attention_cached(void *out, const void *qkv, void *kcache, void *vcache, int at, int B, int n,
                                     int pos, int Tc, int C, int NH, int NKV);

/*
 * fp8.cu: Transformer Engine's per-tensor FP8 scaling (kernels.h's struct dt_fp8_q, fp8-mixed), what
 * matmul.c's FP8 gemms read. An operand is rounded to bf16, multiplied by its scale in fp32 and
 * converted to E4M3 or E5M2 codes by core/fp8.h, the CPU reference's own conversions, so the codes
 * are the CPU's bits. dt_cuda_fp8_quantise takes one matmul's operands (slots DT_CUDA_FP8_X, _W, _G:
 * inp, weight, dout; x NULL where absent): under current scaling it first takes the operand's amax
 * into st->amax (and folds it into the operand's amax when not NULL), computes every scale and the
 * gemms' alphas on the device (no copy to the host), then writes each operand's codes into q (R, Cc)
 * and its transposed copy into qt (Cc, R), either NULL when not wanted; under delayed scaling the
 * cast reads *scale and folds the amax in the same pass. R and Cc multiples of 4, else
 * cudaErrorInvalidValue.
 */
#define DT_CUDA_FP8_E4M3 0 /* enum dt_fp8_fmt's DT_FP8_E4M3 */
#define DT_CUDA_FP8_E5M2 1 /* DT_FP8_E5M2 */
enum { DT_CUDA_FP8_X, DT_CUDA_FP8_W, DT_CUDA_FP8_G, DT_CUDA_FP8_SLOTS };
/* One FP8 matmul's device state: per operand slot this call's amax (current scaling) and the scale
 * it was quantised with; alpha what each gemm's fp32 sums are multiplied by (index DT_CUDA_FP8_FWD:
 * forward, X W; _DGRAD: G W; _WGRAD: G X), the two scales' inverses multiplied, as the CPU's. */
enum { DT_CUDA_FP8_FWD, DT_CUDA_FP8_DGRAD, DT_CUDA_FP8_WGRAD };
struct dt_cuda_fp8_state {
    float amax[DT_CUDA_FP8_SLOTS], scale[DT_CUDA_FP8_SLOTS], alpha[3];
};
/* one operand: x (R, Cc) of type t (fp32, bf16, fp16), scale, amax, fmt and current as module.h's
 * struct dt_cuda_fp8_q, its codes into q and qt */
struct dt_cuda_fp8_operand {
    const void *x;
    int t, R, Cc;
    const float *scale;
    float *amax;
    int fmt, current;
    uint8_t *q, *qt;
};
cudaError_t dt_cuda_fp8_quantise(struct dt_cuda_fp8_state *st, const struct dt_cuda_fp8_operand op[DT_CUDA_FP8_SLOTS]);
/* kernels.h's fp8_update in one launch of one block (saturated a device pointer) */
cudaError_t dt_cuda_fp8_update(float *hist, float *scale, int n, int len, int most_recent, float margin, int gfmt,
                               float *saturated);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/*
 * Device side, for the ops' .cu files and the attention kernels: activations stored as S (float, __nv_bfloat16, __half;
 * the kernels are templates on it), widened to fp32 as read and rounded to nearest even as stored,
 * both through core/half.h, the CPU kernels' own conversions, so a 16-bit store holds the CPU's bits
 * for the same fp32 value.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "core/half.h"

__device__ static inline float dt_ld(float x) { return x; }
__device__ static inline float dt_ld(__nv_bfloat16 x) { return dt_f32_from_bf16(__bfloat16_as_ushort(x)); }
__device__ static inline float dt_ld(__half x) { return dt_f32_from_f16(__half_as_ushort(x)); }
__device__ static inline void dt_st(float *p, float f) { *p = f; }
__device__ static inline void dt_st(__nv_bfloat16 *p, float f) { *p = __ushort_as_bfloat16(dt_bf16_from_f32(f)); }
__device__ static inline void dt_st(__half *p, float f) { *p = __ushort_as_half(dt_f16_from_f32(f)); }

/* f(S *) called with a null pointer of the storage type of t (a launcher's generic lambda takes S
 * from it); cudaErrorInvalidValue for a t of no storage type */
template <typename F>
static inline cudaError_t dt_by_type(int t, F f)
{
    switch (t) {
    case DT_CUDA_F32: return f((float *)NULL);
    case DT_CUDA_BF16: return f((__nv_bfloat16 *)NULL);
    case DT_CUDA_F16: return f((__half *)NULL);
    default: return cudaErrorInvalidValue;
    }
}
#endif

#endif
