/* cpu.h - the CPU kernels, one file per op; backend_cpu.c puts them in the op table. */
#ifndef DT_KERNELS_CPU_H
#define DT_KERNELS_CPU_H

#include <omp.h>
#include <stdbool.h>
#include <string.h>
#include "kernels/cpu/convert.h"
#include "kernels/kernels.h"

/* clears and copies of at least this many bytes run on every thread: one thread's memset or memcpy
 * leaves memory bandwidth unused */
#define DT_CPU_PARALLEL_BYTES ((size_t)1 << 20)

/* Inside a parallel region, this thread's share [*lo, *hi) of bytes: whole pages, the last thread's
 * the rest, every byte in one share for any size. */
static inline void dt_cpu_byte_share(size_t bytes, size_t *lo, size_t *hi)
{
    size_t nt = (size_t)omp_get_num_threads(), chunk = ((bytes + nt - 1) / nt + 4095) & ~(size_t)4095;
    size_t a = (size_t)omp_get_thread_num() * chunk;
    *lo = a < bytes ? a : bytes;
    *hi = a + chunk < bytes ? a + chunk : bytes;
}

/* Activations of type t (fp32, bf16, fp16): n of them from element i of p widened into dst, and
 * n fp32 values rounded (to nearest even) into p from element i. */
static inline void dt_cpu_load(float *dst, const void *p, enum dt_dtype t, size_t i, size_t n)
{
    const struct dt_convert *cv = dt_convert_fast();
    if (t == DT_F32) memcpy(dst, (const float *)p + i, n * sizeof(float));
    else (t == DT_BF16 ? cv->f32_from_bf16 : cv->f32_from_f16)(dst, (const uint16_t *)p + i, n);
}
static inline void dt_cpu_store(void *p, enum dt_dtype t, size_t i, const float *src, size_t n)
{
    const struct dt_convert *cv = dt_convert_fast();
    if (t == DT_F32) memcpy((float *)p + i, src, n * sizeof(float));
    else (t == DT_BF16 ? cv->bf16_from_f32 : cv->f16_from_f32)((uint16_t *)p + i, src, n);
}
/* elements the elementwise ops convert at a time, on a thread's stack */
#define DT_CPU_CHUNK 1024
/* An elementwise op on 16-bit activations: n values of type it from inp, DT_CPU_CHUNK at a time on
 * every thread, widened into fp32, f applied (to the k values from element i0 on), the result
 * rounded into out, of type ot (elementwise.c). */
typedef void (*dt_cpu_chunk_fn)(float *x, size_t i0, size_t k, const void *arg);
void dt_cpu_chunks(void *out, enum dt_dtype ot, const void *inp, enum dt_dtype it, size_t n, dt_cpu_chunk_fn f,
                   const void *arg);
/* Rows per partial sum in the reductions over rows (parameter gradients of layernorm, a bias's column
 * sums): each block of DT_ROW_BLOCK rows is summed in row order, the blocks' sums are added in
 * block order. The GPU kernels keep the same order, so both give the same bits, and the blocks run
 * in parallel on either. */
#define DT_ROW_BLOCK 64
/* A CPU kernel's mean loss through a sink (kernels.h; none: returned) */
static inline float dt_loss_out(float mean, const struct dt_loss_sink *sink)
{
    if (!sink) return mean;
    *sink->acc += (double)mean / sink->div;
    return 0.0f;
}

/* Growing scratch of the CPU context (matmul_lp.c), slot 0..DT_CPU_SCRATCH_SLOTS-1: slot 0 the norms'
 * 16-bit rows, the 16-bit loss's widened blocks and attention backward's shares of dK and dV, 1-3
 * attention's widened copies (none of them calls another op that takes a slot).
 * NULL when out of memory: the op returns, and the next synchronize reports op and bytes
 * (dt_cpu_failure). A context's kernels are called from one thread at a time. */
#define DT_CPU_SCRATCH_SLOTS 4
void *dt_cpu_scratch(struct dt_kctx *kc, int slot, size_t bytes, const char *op);
dt_status_t dt_cpu_failure(struct dt_kctx *kc, int64_t step);
/* a call refused (what and why, printf's format), kept for the next synchronize as a failed scratch is */
void dt_cpu_refuse(struct dt_kctx *kc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the op table's zero: on every thread from a MiB up */
void dt_cpu_zero(struct dt_kctx *kc, void *p, size_t bytes);
void dt_cpu_gemm(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
/* "oneDNN sgemm (avx512_core)" or the stand-in's name */
const char *dt_cpu_gemm_path(void);
/* out[c] += (set: =) the sum over rows of x(R, C) */
void dt_cpu_colsum(float *out, const float *x, int R, int C, bool set);
void dt_cpu_matmul_forward(struct dt_kctx *kc, float *out, const float *inp, const float *weight, const float *bias, int BT, int C, int OC);
void dt_cpu_matmul_backward(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int BT, int C, int OC, unsigned set);
void dt_cpu_matmul_forward_lp(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                              const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype t);
void dt_cpu_matmul_backward_lp(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                               enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                               int OC, enum dt_dtype t, unsigned set);
/* kernels.h's GELU in the matmul, the two ops composed; the models take that path where
 * dt_cpu_gelu_fuse turned it on (tests: the same bits as the ops apart) */
void dt_cpu_gelu_fuse(struct dt_kctx *kc, bool on);
bool dt_cpu_gelu_fused(struct dt_kctx *kc);
void dt_cpu_matmul_gelu_forward_lp(struct dt_kctx *kc, void *out, void *pre, const void *inp, const void *weight,
                                   const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype t);
void dt_cpu_matmul_dgelu_backward_lp(struct dt_kctx *kc, void *dpre, const void *pre, float *dweight, float *dbias,
                                     const void *dout, enum dt_dtype dt, const void *inp, const void *weight,
                                     enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype t, unsigned set);
/* fp8-mixed's (matmul_fp8.c): scratch slots 0-3 */
void dt_cpu_matmul_forward_fp8(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                               const void *bias, enum dt_dtype wt, int BT, int C, int OC, const struct dt_fp8_q *qx,
                               const struct dt_fp8_q *qw);
void dt_cpu_matmul_backward_fp8(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                                enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                                int OC, const struct dt_fp8_q *qx, const struct dt_fp8_q *qw,
                                const struct dt_fp8_q *qg, unsigned set);
void dt_cpu_fp8_update(struct dt_kctx *kc, float *hist, float *scale, int n, int len, bool most_recent, float margin,
                       enum dt_fp8_fmt gfmt, float *saturated);
void dt_cpu_cast_to_lp(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, enum dt_dtype t);
void dt_cpu_cast_from_lp(struct dt_kctx *kc, float *dst, const uint16_t *src, size_t n, enum dt_dtype t);
/* dst = src rounded to t, kept in fp32 (one pass) */
void dt_cpu_round_lp(struct dt_kctx *kc, float *dst, const float *src, size_t n, enum dt_dtype t);
/* 1: bf16 matmuls through oneDNN, 0: sgemm on widened operands (tests and benchmarks; the
 * default depends on the CPU, see matmul_lp.c) */
dt_status_t dt_cpu_ctx_create(int device, struct dt_kctx **out);
void dt_cpu_ctx_destroy(struct dt_kctx *kc);
void dt_cpu_bf16_gemm_select(struct dt_kctx *kc, int onednn);
/* which path the 16-bit matmuls of type t take here, for logs and benchmarks */
const char *dt_cpu_matmul_lp_path(struct dt_kctx *kc, enum dt_dtype t);
void dt_cpu_layernorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int BT, int C);
void dt_cpu_layernorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                               float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int BT, int C);
void dt_cpu_rmsnorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *rstd, const float *inp,
                            const float *weight, float eps, int BT, int C);
void dt_cpu_rmsnorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                             const float *dout, const float *inp, const float *weight, const float *rstd, int BT, int C);
void dt_cpu_rope_forward(struct dt_kctx *kc, void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                         int NKV, int hs);
void dt_cpu_rope_backward(struct dt_kctx *kc, void *dqkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                          int NKV, int hs);
void dt_cpu_swiglu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, int BT, int H);
void dt_cpu_swiglu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                            int BT, int H);
void dt_cpu_attention_forward(struct dt_kctx *kc, void *out, float *att, const void *qkv, enum dt_dtype at, int B, int T,
                              int C, int NH, int NKV);
size_t dt_cpu_attention_saved(int B, int NH, int T);
void dt_cpu_attention_cached(struct dt_kctx *kc, void *out, const void *qkv, void *kcache, void *vcache,
                             enum dt_dtype at, int B, int n, int pos, int Tc, int C, int NH, int NKV);
size_t dt_cpu_attention_scratch(int B, int T, int C, int NH, int NKV, enum dt_dtype at);
void dt_cpu_attention_backward(struct dt_kctx *kc, void *dqkv, const float *dout, const void *qkv, const void *out,
                               const float *att, float *scratch, enum dt_dtype at, int B, int T, int C, int NH,
                               int NKV);
void dt_cpu_gelu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, size_t N);
void dt_cpu_gelu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at, size_t N);
void dt_cpu_residual_forward(struct dt_kctx *kc, float *out, const float *a, const void *b, enum dt_dtype bt, size_t N);
void dt_cpu_position_forward(struct dt_kctx *kc, float *out, const float *wpe, int B, int T, int C);
void dt_cpu_rows_forward(struct dt_kctx *kc, float *out, const int32_t *inp, const void *table, enum dt_dtype t, int v0,
                         int nv, int n, int C);
void dt_cpu_position_backward(struct dt_kctx *kc, float *dwpe, const float *dout, int B, int T, int C);
void dt_cpu_rows_add(struct dt_kctx *kc, void *dst, enum dt_dtype t, size_t lo, size_t n, const int32_t *rows, const float *vals,
                     int nrows, int width);
float dt_cpu_softmax_xent(struct dt_kctx *kc, float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                          const struct dt_loss_sink *sink);
float dt_cpu_softmax_xent_lp(struct dt_kctx *kc, float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V,
                             int vb, enum dt_dtype t, const struct dt_loss_sink *sink);
void dt_cpu_adamw(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float l2, float *m,
                  float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t, void *plp,
                  enum dt_dtype pt);
void dt_cpu_adamw_slices(struct dt_kctx *kc, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt, float gscale,
                         float lr, float beta1, float beta2, float eps, int t, enum dt_dtype pt);
void dt_cpu_sgd(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float *buf, size_t n,
                float lr, float momentum, int nesterov, float wd, int first_step, void *plp, enum dt_dtype pt);
float dt_cpu_mse(struct dt_kctx *kc, float *dout, const float *out, const float *target, float dloss, size_t n,
                 const struct dt_loss_sink *sink);
double dt_cpu_sumsq(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n);
size_t dt_cpu_nonfinite(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n);
double dt_cpu_sumsq_parts(struct dt_kctx *kc, const struct dt_norm_part *parts, int nparts, enum dt_dtype t,
                          size_t *bad);
void dt_cpu_convert(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n);
void dt_cpu_accumulate(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n);
void dt_cpu_narrow_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t);
void dt_cpu_widen_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t);
void dt_cpu_round_stochastic(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0);

#endif
