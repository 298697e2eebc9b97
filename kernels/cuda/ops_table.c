/*
 * ops_table.c - module.h's table of device memory and the kernels of ops.cu (and its siblings),
 * fp8.cu and the attention .cu files: cudaError_t carried as int, so that dtrun and the tests include
 * no CUDA header. Part of the CUDA module.
 */
#include <stdlib.h>
#include <cuda_runtime.h>
#include "kernels/cuda/copies.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/module.h"
#include "core/dtype.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"
#include "kernels/kernels.h"

_Static_assert(DT_CUDA_F32 == DT_F32 && DT_CUDA_BF16 == DT_BF16 && DT_CUDA_F16 == DT_F16,
               "ops.h's dtype codes are enum dt_dtype's");
_Static_assert(DT_CUDA_SET_DINP == DT_SET_DINP && DT_CUDA_SET_DPARAMS == DT_SET_DPARAMS,
               "ops.h's matmul_backward bits are kernels.h's");
_Static_assert(DT_CUDA_FP8_E4M3 == DT_FP8_E4M3 && DT_CUDA_FP8_E5M2 == DT_FP8_E5M2, "ops.h's FP8 formats are fp8.h's");

static int ctx_create(void **ctx) { return dt_cuda_ctx_create((struct dt_cuda_ctx **)ctx); }
static void ctx_destroy(void *ctx) { dt_cuda_ctx_destroy(ctx); }
static int matmul_forward(void *ctx, void *out, int ot, const void *inp, const void *weight, const void *bias, int wt,
                          int BT, int C, int OC, int lp)
{
    return dt_cuda_matmul_forward(ctx, out, ot, inp, weight, bias, wt, BT, C, OC, lp);
}
static int matmul_backward(void *ctx, float *dinp, float *dweight, float *dbias, const void *dout, int dt,
                           const void *inp, const void *weight, int wt, int BT, int C, int OC, int lp, unsigned set)
{
    return dt_cuda_matmul_backward(ctx, dinp, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, lp, set);
}
static int matmul_gelu_forward(void *ctx, void *out, void *pre, const void *inp, const void *weight, const void *bias,
                               int wt, int BT, int C, int OC, int lp)
{
    return dt_cuda_matmul_gelu_forward(ctx, out, pre, inp, weight, bias, wt, BT, C, OC, lp);
}
static int matmul_dgelu_backward(void *ctx, void *dpre, const void *pre, float *dweight, float *dbias, const void *dout,
                                 int dt, const void *inp, const void *weight, int wt, int BT, int C, int OC, int lp,
                                 unsigned set)
{
    return dt_cuda_matmul_dgelu_backward(ctx, dpre, pre, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, lp, set);
}
static int matmul_forward_fp8(void *ctx, void *out, int ot, const void *inp, const void *weight, const void *bias,
                              int wt, int BT, int C, int OC, const struct dt_cuda_fp8_q *qx,
                              const struct dt_cuda_fp8_q *qw)
{
    return dt_cuda_matmul_forward_fp8(ctx, out, ot, inp, weight, bias, wt, BT, C, OC, qx, qw);
}
static int matmul_backward_fp8(void *ctx, float *dinp, float *dweight, float *dbias, const void *dout, int dt,
                               const void *inp, const void *weight, int wt, int BT, int C, int OC,
                               const struct dt_cuda_fp8_q *qx, const struct dt_cuda_fp8_q *qw,
                               const struct dt_cuda_fp8_q *qg, unsigned set)
{
    return dt_cuda_matmul_backward_fp8(ctx, dinp, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, qx, qw, qg, set);
}
static int fp8_update(float *hist, float *scale, int n, int len, int most_recent, float margin, int gfmt,
                      float *saturated)
{
    return (int)dt_cuda_fp8_update(hist, scale, n, len, most_recent, margin, gfmt, saturated);
}
static int dev_malloc(void **p, size_t bytes) { return (int)cudaMalloc(p, bytes); }
static int dev_free(void *p) { return (int)cudaFree(p); }
static int to_device(void *dst, const void *src, size_t bytes)
{
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}
static int to_host(void *dst, const void *src, size_t bytes)
{
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
static int synchronize(void) { return (int)cudaStreamSynchronize(cudaStreamPerThread); }
static int copies_create(void **c) { return dt_cuda_copies_create((struct dt_cuda_copies **)c); }
static void copies_destroy(void *c) { dt_cuda_copies_destroy(c); }
static int copy_async(void *c, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket)
{
    return dt_cuda_copy_async(c, dst, src, bytes, kind, ticket);
}
static int copy_wait(void *c, uint64_t ticket, int host) { return dt_cuda_copy_wait(c, ticket, host); }
static int copy_inline(void *c, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket)
{
    return dt_cuda_copy_inline(c, dst, src, bytes, kind, ticket);
}
static size_t ctx_bytes(void *ctx) { return dt_cuda_ctx_bytes(ctx); }
static int mem_info(size_t *free_bytes, size_t *total_bytes) { return (int)cudaMemGetInfo(free_bytes, total_bytes); }
static int set_device(int dev) { return (int)cudaSetDevice(dev); }
static int is_device(const void *p)
{
    if (!p) return 0;
    struct cudaPointerAttributes a;
    cudaError_t pending = cudaPeekAtLastError(); /* a launch's error, for the next synchronize to report */
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        if (pending == cudaSuccess) cudaGetLastError(); /* the query's own error is not one to keep */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
static int malloc_host(void **p, size_t bytes) { return (int)cudaMallocHost(p, bytes); }
static int free_host(void *p) { return (int)cudaFreeHost(p); }
static int dev_memset(void *p, int byte, size_t bytes) { return (int)cudaMemsetAsync(p, byte, bytes, cudaStreamPerThread); }
static int on_device(void *dst, const void *src, size_t bytes)
{
    if (!dt_cuda_copy_overlaps(dst, src, bytes))
        return (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread);
    /* cudaMemcpy's ranges must not overlap: through a temporary, as memmove would */
    void *t = NULL;
    cudaError_t e = cudaMallocAsync(&t, bytes, cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaMemcpyAsync(t, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dst, t, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread);
    if (t) {
        cudaError_t f = cudaFreeAsync(t, cudaStreamPerThread);
        if (e == cudaSuccess) e = f;
    }
    return (int)e;
}

static int gelu_forward(void *out, const void *inp, int at, size_t N) { return (int)dt_cuda_gelu_forward(out, inp, at, N); }
static int gelu_backward(void *dinp, const void *inp, const float *dout, int at, size_t N)
{
    return (int)dt_cuda_gelu_backward(dinp, inp, dout, at, N);
}
static int residual_forward(float *out, const float *a, const void *b, int bt, size_t N)
{
    return (int)dt_cuda_residual_forward(out, a, b, bt, N);
}
static int cast_to_lp(uint16_t *dst, const float *src, size_t n, int t) { return (int)dt_cuda_cast_to_lp(dst, src, n, t); }
static int cast_from_lp(float *dst, const uint16_t *src, size_t n, int t)
{
    return (int)dt_cuda_cast_from_lp(dst, src, n, t);
}
static int round_lp(float *dst, const float *src, size_t n, int t) { return (int)dt_cuda_round_lp(dst, src, n, t); }
/* The slice table onto the device (the context's scratch), each slice's start in the step's element
 * space filled in and empty slices left out, then one launch. */
static int adamw_slices(void *ctx, const struct dt_cuda_adamw_slice *s, int ns, int gt, float gscale, float lr,
                        float beta1, float beta2, float eps, int t, int pt)
{
    struct dt_cuda_slice_dev *h = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *h);
    if (!h) return (int)cudaErrorMemoryAllocation;
    int n = 0, e = 0;
    size_t total = 0;
    for (int i = 0; i < ns && !e; i++) {
        if (s[i].plp && pt != DT_CUDA_BF16 && pt != DT_CUDA_F16) e = (int)cudaErrorInvalidValue;
        if (e || !s[i].n) continue;
        h[n++] = (struct dt_cuda_slice_dev){s[i].param, s[i].m, s[i].v, s[i].grad, s[i].plp, s[i].n, total, s[i].wd,
                                            s[i].l2};
        total += s[i].n;
    }
    void *d = NULL;
    if (!e && n) e = dt_cuda_ctx_scratch(ctx, DT_CUDA_SCRATCH_SLICES, (size_t)n * sizeof *h, &d);
    /* from pageable memory the copy returns once h is staged, so h can go right after */
    if (!e && n) e = (int)cudaMemcpyAsync(d, h, (size_t)n * sizeof *h, cudaMemcpyHostToDevice, cudaStreamPerThread);
    if (!e && n) e = (int)dt_cuda_adamw_slices(d, n, total, gt, gscale, lr, beta1, beta2, eps, t, pt);
    free(h);
    return e;
}
static int adamw(float *param, const void *grad, int gt, float gscale, float l2, float *m, float *v, size_t n, float lr,
                 float beta1, float beta2, float eps, float wd, int t, void *plp, int pt)
{
    return (int)dt_cuda_adamw(param, grad, gt, gscale, l2, m, v, n, lr, beta1, beta2, eps, wd, t, plp, pt);
}
static int sumsq_parts(void *ctx, const struct dt_cuda_part *parts, int np, int t, double *sumsq, size_t *nonfinite)
{
    void *s;
    int e = dt_cuda_ctx_scratch(ctx, DT_CUDA_SCRATCH_REDUCE, DT_CUDA_REDUCE_SLOT, &s);
    return e ? e : (int)dt_cuda_sumsq_parts(parts, np, t, sumsq, nonfinite, s);
}
static int layernorm_forward(void *out, int ot, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int BT, int C)
{
    return (int)dt_cuda_layernorm_forward(out, ot, mean, rstd, inp, weight, bias, BT, C);
}
static int layernorm_backward(void *ctx, float *dinp, void *dinp_lp, int lt, float *dweight, float *dbias,
                              const float *dout, const float *inp, const float *weight, const float *mean,
                              const float *rstd, int BT, int C)
{
    void *s = NULL; /* dweight's partials, then dbias's */
    int e = dt_cuda_ctx_scratch(ctx, DT_CUDA_SCRATCH_PARTIALS, 2 * dt_cuda_row_partials(BT, C) * sizeof(float), &s);
    return e ? e
             : (int)dt_cuda_layernorm_backward(dinp, dinp_lp, lt, dweight, dbias, dout, inp, weight, mean, rstd, BT,
                                               C, s);
}
static int rmsnorm_forward(void *out, int ot, float *rstd, const float *inp, const float *weight, float eps, int BT,
                           int C)
{
    return (int)dt_cuda_rmsnorm_forward(out, ot, rstd, inp, weight, eps, BT, C);
}
static int rmsnorm_backward(void *ctx, float *dinp, void *dinp_lp, int lt, float *dweight, const float *dout,
                            const float *inp, const float *weight, const float *rstd, int BT, int C)
{
    void *s = NULL;
    int e = dt_cuda_ctx_scratch(ctx, DT_CUDA_SCRATCH_PARTIALS, dt_cuda_row_partials(BT, C) * sizeof(float), &s);
    return e ? e : (int)dt_cuda_rmsnorm_backward(dinp, dinp_lp, lt, dweight, dout, inp, weight, rstd, BT, C, s);
}
static int rope(void *qkv, int at, const float *cs, int B, int T, int NH, int NKV, int hs, int backward)
{
    return (int)dt_cuda_rope(qkv, at, cs, B, T, NH, NKV, hs, backward);
}
static int swiglu_forward(void *out, const void *inp, int at, int BT, int H)
{
    return (int)dt_cuda_swiglu_forward(out, inp, at, BT, H);
}
static int swiglu_backward(void *dinp, const void *inp, const float *dout, int at, int BT, int H)
{
    return (int)dt_cuda_swiglu_backward(dinp, inp, dout, at, BT, H);
}
static int position_forward(float *out, const float *wpe, int B, int T, int C)
{
    return (int)dt_cuda_position_forward(out, wpe, B, T, C);
}
static int position_backward(float *dwpe, const float *dout, int B, int T, int C)
{
    return (int)dt_cuda_position_backward(dwpe, dout, B, T, C);
}

static int rows_forward(float *out, const int32_t *inp, const void *table, int t, int v0, int nv, int n, int C)
{
    return (int)dt_cuda_rows_forward(out, inp, table, t, v0, nv, n, C);
}
static int rows_add(void *ctx, void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals, int nrows,
                    int width)
{
    if (!(dt_cuda_tries() & DT_CUDA_TRY_ROWS2)) return (int)dt_cuda_rows_add(dst, t, lo, n, rows, vals, nrows, width);
    void *s;
    size_t bytes;
    int e = (int)dt_cuda_rows_sorted_bytes(nrows, lo, n, width, &bytes);
    if (!e) e = dt_cuda_ctx_scratch(ctx, DT_CUDA_SCRATCH_ROWS, bytes, &s);
    return e ? e : (int)dt_cuda_rows_add_sorted(dst, t, lo, n, rows, vals, nrows, width, s);
}
static int softmax_xent(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                        float *mean, double *acc, double div)
{
    return (int)dt_cuda_softmax_xent(losses, logits, targets, dloss, BT, V, vb, mean, acc, div);
}

static int sgd(float *param, const void *grad, int gt, float gscale, float *buf, size_t n, float lr, float momentum,
               int nesterov, float wd, int first_step, void *plp, int pt)
{
    return (int)dt_cuda_sgd(param, grad, gt, gscale, buf, n, lr, momentum, nesterov, wd, first_step, plp, pt);
}
static int round_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0)
{
    return (int)dt_cuda_round_stochastic(dst, src, n, seed, index0);
}
static int convert(void *dst, int dt, const void *src, int st, size_t n, int add)
{
    return (int)dt_cuda_convert(dst, dt, src, st, n, add);
}
static int mse(void *ctx, float *dout, const float *out, const float *target, float dloss, size_t n, float *mean,
               double *acc, double div)
{
    void *s;
    int e = dt_cuda_ctx_scratch(ctx, DT_CUDA_SCRATCH_REDUCE, DT_CUDA_REDUCE_SLOT, &s);
    return e ? e : (int)dt_cuda_mse(dout, out, target, dloss, n, s, mean, acc, div);
}

static int softmax_xent_lp(float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                           int t, float *mean, double *acc, double div)
{
    return (int)dt_cuda_softmax_xent_lp(losses, logits, targets, dloss, BT, V, vb, t, mean, acc, div);
}
static int narrow_inplace(void *buf, size_t n, int t) { return (int)dt_cuda_narrow_inplace(buf, n, t); }
static int widen_inplace(void *buf, size_t n, int t) { return (int)dt_cuda_widen_inplace(buf, n, t); }
static int attention_forward(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH, int NKV)
{
    return (int)dt_cuda_attention_forward(out, lse, qkv, at, B, T, C, NH, NKV);
}
static int attention_backward(void *dqkv, const float *dout, const void *qkv, const void *out, const float *lse,
                              float *scratch, int at, int B, int T, int C, int NH, int NKV)
{
    return (int)dt_cuda_attention_backward(dqkv, dout, qkv, out, lse, scratch, at, B, T, C, NH, NKV);
}
static int attention_forward_ref(void *ctx, float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                                 int NKV)
{
    return dt_cuda_attention_forward_ref(ctx, out, att, qkv, B, T, C, NH, NKV);
}
static int attention_backward_ref(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *att,
                                  float *scratch, int B, int T, int C, int NH, int NKV)
{
    return dt_cuda_attention_backward_ref(ctx, dqkv, dout, qkv, att, scratch, B, T, C, NH, NKV);
}
static int attention_cached(void *out, const void *qkv, void *kcache, void *vcache, int at, int B, int n, int pos,
                            int Tc, int C, int NH, int NKV)
{
    return (int)dt_cuda_attention_cached(out, qkv, kcache, vcache, at, B, n, pos, Tc, C, NH, NKV);
}

const struct dt_cuda_ops dt_cuda_ops = {
    .error_string = dt_cuda_error_string,
    .ctx_create = ctx_create,
    .ctx_destroy = ctx_destroy,
    .matmul_forward = matmul_forward,
    .matmul_gelu_forward = matmul_gelu_forward,
    .matmul_dgelu_backward = matmul_dgelu_backward,
    .matmul_backward = matmul_backward,
    .matmul_forward_fp8 = matmul_forward_fp8,
    .matmul_backward_fp8 = matmul_backward_fp8,
    .fp8_update = fp8_update,
    .set_device = set_device,
    .set_tries = dt_cuda_set_tries,
    .is_device = is_device,
    .malloc = dev_malloc,
    .malloc_host = malloc_host,
    .free_host = free_host,
    .memset = dev_memset,
    .on_device = on_device,
    .free = dev_free,
    .to_device = to_device,
    .copies_create = copies_create,
    .copies_destroy = copies_destroy,
    .copy_async = copy_async,
    .copy_wait = copy_wait,
    .copy_inline = copy_inline,
    .to_host = to_host,
    .synchronize = synchronize,
    .mem_info = mem_info,
    .ctx_bytes = ctx_bytes,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .residual_forward = residual_forward,
    .cast_to_lp = cast_to_lp,
    .cast_from_lp = cast_from_lp,
    .round_lp = round_lp,
    .adamw = adamw,
    .adamw_slices = adamw_slices,
    .sumsq_parts = sumsq_parts,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_backward = rmsnorm_backward,
    .rope = rope,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .position_forward = position_forward,
    .position_backward = position_backward,
    .rows_forward = rows_forward,
    .rows_add = rows_add,
    .softmax_xent = softmax_xent,
    .sgd = sgd,
    .round_stochastic = round_stochastic,
    .convert = convert,
    .mse = mse,
    .softmax_xent_lp = softmax_xent_lp,
    .narrow_inplace = narrow_inplace,
    .widen_inplace = widen_inplace,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .attention_scratch = dt_cuda_attention_scratch,
    .attention_forward_ref = attention_forward_ref,
    .attention_backward_ref = attention_backward_ref,
    .attention_ref_scratch = dt_cuda_attention_ref_scratch,
    .attention_cached = attention_cached,
};
