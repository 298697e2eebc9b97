/*
 * matmul.h - the cuBLASLt matmuls (matmul.c) and the context that holds their state. Errors are
 * cudaError_t values, DT_CUDA_CUBLAS_ERR + a cublasStatus_t, or module.h's DT_CUDA_ERR_FP8_SHAPE;
 * dt_cuda_error_string names them all.
 */
#ifndef DT_CUDA_MATMUL_H
#define DT_CUDA_MATMUL_H

#include <cublas_v2.h>
#include <stddef.h>
#include "kernels/cuda/module.h"

#define DT_CUDA_CUBLAS_ERR (1 << 20) /* above every cudaError_t */

#ifdef __cplusplus
extern "C" {
#endif

struct dt_cuda_ctx;

int dt_cuda_ctx_create(struct dt_cuda_ctx **out);
void dt_cuda_ctx_destroy(struct dt_cuda_ctx *c);
/* the context's cuBLAS handle, on the per-thread default stream (attention's reference path) */
cublasHandle_t dt_cuda_ctx_blas(struct dt_cuda_ctx *c);
/* The context's device scratch: slot's buffer of at least bytes (grown as needed, 256-byte aligned),
 * for what one op keeps between its launches; a later op may reuse the slot. */
enum {
    DT_CUDA_SCRATCH_WEIGHT,    /* an fp32 weight rounded to lp */
    DT_CUDA_SCRATCH_DOUT,      /* an fp32 dout rounded to lp */
    DT_CUDA_SCRATCH_BIAS,      /* a 16-bit bias, widened or aligned */
    DT_CUDA_SCRATCH_PARTIALS,  /* the row blocks' partial sums (ops.h) */
    DT_CUDA_SCRATCH_SLICES,    /* a multi-tensor AdamW step's slice table (ops.h) */
    DT_CUDA_SCRATCH_REDUCE,    /* a reduction's block partials (ops.h's DT_CUDA_REDUCE_SLOT) */
    DT_CUDA_SCRATCH_OUT,       /* an unaligned biased gemm's fp32 output, before its one rounding */
    DT_CUDA_SCRATCH_FP8_STATE, /* an FP8 matmul's scales and alphas (ops.h's struct dt_cuda_fp8_state) */
    DT_CUDA_SCRATCH_FP8_X,     /* its inp's codes: the forward's, or the backward's transposed */
    DT_CUDA_SCRATCH_FP8_W,     /* its weight's codes: the forward's, or the backward's transposed */
    DT_CUDA_SCRATCH_FP8_G,     /* its dout's codes, then their transposed copy */
    DT_CUDA_SCRATCH_ROWS,      /* rows_add's sorted entries under rows2 (ops.h) */
    DT_CUDA_SCRATCH_SLOTS
};
int dt_cuda_ctx_scratch(struct dt_cuda_ctx *c, int slot, size_t bytes, void **out);
/* device bytes c holds: the workspace and every scratch slot */
size_t dt_cuda_ctx_bytes(const struct dt_cuda_ctx *c);
/* kernels.h's matmul_forward/_backward and their _lp twins. lp: DT_CUDA_F32 (everything fp32), or
 * bf16/fp16, the type the products take their operands in (fp32 accumulation): inp is of type lp,
 * out (ot) and dout (dt) of type lp or fp32 (a 16-bit out rounded once, an fp32 dout rounded to lp
 * here). wt: the type of weight and bias, DT_CUDA_F32 (rounded to lp here) or lp (used as it is).
 * cudaErrorInvalidValue for any other type. */
int dt_cuda_matmul_forward(struct dt_cuda_ctx *c, void *out, int ot, const void *inp, const void *weight,
                           const void *bias, int wt, int BT, int C, int OC, int lp);
int dt_cuda_matmul_backward(struct dt_cuda_ctx *c, float *dinp, float *dweight, float *dbias, const void *dout, int dt,
                            const void *inp, const void *weight, int wt, int BT, int C, int OC, int lp, unsigned set);
/* kernels.h's matmul_gelu_forward_lp and matmul_dgelu_backward_lp (pre, out, dpre of type lp) */
int dt_cuda_matmul_gelu_forward(struct dt_cuda_ctx *c, void *out, void *pre, const void *inp, const void *weight,
                                const void *bias, int wt, int BT, int C, int OC, int lp);
int dt_cuda_matmul_dgelu_backward(struct dt_cuda_ctx *c, void *dpre, const void *pre, float *dweight, float *dbias,
                                  const void *dout, int dt, const void *inp, const void *weight, int wt, int BT, int C,
                                  int OC, int lp, unsigned set);
/* module.h's matmul_forward_fp8 and matmul_backward_fp8: cuBLASLt's FP8 gemms on the codes of
 * ops.h's dt_cuda_fp8_quantise; DT_CUDA_ERR_FP8_SHAPE for a shape or output they do not take */
int dt_cuda_matmul_forward_fp8(struct dt_cuda_ctx *c, void *out, int ot, const void *inp, const void *weight,
                               const void *bias, int wt, int BT, int C, int OC, const struct dt_cuda_fp8_q *qx,
                               const struct dt_cuda_fp8_q *qw);
int dt_cuda_matmul_backward_fp8(struct dt_cuda_ctx *c, float *dinp, float *dweight, float *dbias, const void *dout,
                                int dt, const void *inp, const void *weight, int wt, int BT, int C, int OC,
                                const struct dt_cuda_fp8_q *qx, const struct dt_cuda_fp8_q *qw,
                                const struct dt_cuda_fp8_q *qg, unsigned set);
const char *dt_cuda_error_string(int err);

#ifdef __cplusplus
}
#endif

#endif
