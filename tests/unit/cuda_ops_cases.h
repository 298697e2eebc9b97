/*
 * cuda_ops_cases.h - the cases of test_cuda_ops.gpu, one file an idea (cuda_ops_*.c), which
 * test_cuda_ops.c runs in order, then again with the kernels on trial.
 */
#ifndef DT_CUDA_OPS_CASES_H
#define DT_CUDA_OPS_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include "core/dtype.h"

/* the kernels on trial (plan.h's flags) the cases run with, where a case holds one to its own checks
 * (matmul_case: bgradb's dbias) */
extern unsigned trying;

void elementwise(void);
void casts(void);
void optimizer_and_norms(void);
void llama_ops(void);
void adamw_slices_case(enum dt_dtype gt, enum dt_dtype pt);
void layernorm_and_positions(int C);
void embeddings_and_loss(void);
void rows_add_cases(void);
void matmuls(void);
void updates_and_conversions(void);
void loss_lp(void);
void narrow_widen(void);
void convert_offsets(void);
void sumsq_offsets(void);
void rmsnorm_odd_width(void);
void swiglu_packs(void);
void row_sums_packed(void);
void bgradb_cases(void);
/* the matmul checks' error bound (cuda_ops_matmul.c), which cuda_ops_matmul_gelu.c's share: S(r, c)
 * = sum_k |A(r, k) B(c, k)| + |init(r, c)| + |bias(c)| (malloc'd), A (R, K) and B (Cn, K) row-major
 * with strides (sa_r, sa_k) and (sb_c, sb_k), init and bias may be NULL; the worst excess of got over
 * ref (type t; 16-bit: one ulp off first) against 3 (K + 2) u S; fp32 values rounded to lp in place */
double *bound(const float *A, size_t sa_r, size_t sa_k, const float *B, size_t sb_c, size_t sb_k, const float *init,
              const float *bias, int R, int Cn, int K);
double mm_excess(const void *got, const void *ref, const double *S, size_t n, int K, enum dt_dtype t);
void round_host(float *x, size_t n, enum dt_dtype lp);
void matmul_gelu_exact(void *ctx, enum dt_dtype lp);
void matmul_gelu_case(void *ctx, enum dt_dtype lp, int BT, int C, int OC);

#endif
