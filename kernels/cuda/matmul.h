/*
 * matmul.h - the cuBLASLt matmuls (matmul.c) and the context that holds their state. Errors are
 * cudaError_t values, or DT_CUDA_CUBLAS_ERR + a cublasStatus_t; dt_cuda_error_string names both.
 */
#ifndef DT_CUDA_MATMUL_H
#define DT_CUDA_MATMUL_H

#include <cublas_v2.h>

#define DT_CUDA_CUBLAS_ERR (1 << 20) /* above every cudaError_t */

#ifdef __cplusplus
extern "C" {
#endif

struct dt_cuda_ctx;

int dt_cuda_ctx_create(struct dt_cuda_ctx **out);
void dt_cuda_ctx_destroy(struct dt_cuda_ctx *c);
/* the context's cuBLAS handle, on the per-thread default stream (attention's reference path) */
cublasHandle_t dt_cuda_ctx_blas(struct dt_cuda_ctx *c);
/* kernels.h's matmul_forward/_backward (lp: DT_CUDA_F32, or the bf16/fp16 operands of _lp); wt: the
 * type of weight and bias, DT_CUDA_F32 (rounded to lp here) or lp (16-bit, used as it is);
 * cudaErrorInvalidValue for any other */
int dt_cuda_matmul_forward(struct dt_cuda_ctx *c, float *out, const float *inp, const void *weight, const void *bias,
                           int wt, int BT, int C, int OC, int lp);
int dt_cuda_matmul_backward(struct dt_cuda_ctx *c, float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const void *weight, int wt, int BT, int C, int OC, int lp, unsigned set);
const char *dt_cuda_error_string(int err);

#ifdef __cplusplus
}
#endif

#endif
