/* cpu.h - the CPU kernels, one file per op; backend_cpu.c puts them in the op table. */
#ifndef DT_KERNELS_CPU_H
#define DT_KERNELS_CPU_H

#include "kernels/kernels.h"

void dt_cpu_gemm(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
/* "oneDNN sgemm (avx512_core)" or the stand-in's name */
const char *dt_cpu_gemm_path(void);
void dt_cpu_colsum(float *out, const float *x, int R, int C);
void dt_cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int BT, int C, int OC);
void dt_cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int BT, int C, int OC);
void dt_cpu_matmul_forward_lp(float *out, const float *inp, const float *weight, const float *bias, int BT, int C,
                              int OC, enum dt_dtype t);
void dt_cpu_matmul_backward_lp(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int BT, int C, int OC, enum dt_dtype t);
void dt_cpu_cast_to_lp(uint16_t *dst, const float *src, size_t n, enum dt_dtype t);
void dt_cpu_cast_from_lp(float *dst, const uint16_t *src, size_t n, enum dt_dtype t);
/* dst = src rounded to t, kept in fp32 (one pass) */
void dt_cpu_round_lp(float *dst, const float *src, size_t n, enum dt_dtype t);
/* 1: bf16 matmuls through oneDNN, 0: sgemm on widened operands (tests and benchmarks; the
 * default depends on the CPU, see matmul_lp.c) */
void dt_cpu_bf16_gemm_select(int onednn);
/* which path the 16-bit matmuls of type t take here, for logs and benchmarks */
const char *dt_cpu_matmul_lp_path(enum dt_dtype t);
void dt_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int BT, int C);
void dt_cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int BT, int C);
void dt_cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
void dt_cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, float *scratch,
                               int B, int T, int C, int NH);
void dt_cpu_gelu_forward(float *out, const float *inp, size_t N);
void dt_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);
void dt_cpu_residual_forward(float *out, const float *a, const float *b, size_t N);
void dt_cpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T, int C);
void dt_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C);
float dt_cpu_softmax_xent(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V);
float dt_cpu_softmax_xent_lp(float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V,
                             int vb, enum dt_dtype t);
void dt_cpu_adamw(float *param, const float *grad, float gscale, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int t);
void dt_cpu_sgd(float *param, const float *grad, float gscale, float *buf, size_t n, float lr, float momentum,
                int nesterov, float wd, int first_step);
float dt_cpu_mse(float *dout, const float *out, const float *target, float dloss, size_t n);
double dt_cpu_sumsq(const float *x, size_t n);
size_t dt_cpu_nonfinite(const float *x, size_t n);

#endif
