/*
 * profile.c - see profile.h: a table whose ops run another table's and add up their wall time.
 * Every wrapper below has the one shape; the table is a copy of the inner one with the ops (and
 * zero and copy, passes over memory too) replaced, so the slots that take no context
 * (attention_saved, attention_scratch) and the memory slots are the inner table's own.
 */
#include <stdlib.h>
#include "core/clock.h"
#include "core/error.h"
#include "kernels/profile.h"

enum {
    OP_matmul_forward,
    OP_matmul_backward,
    OP_matmul_forward_lp,
    OP_matmul_backward_lp,
    OP_matmul_gelu_forward_lp,
    OP_matmul_dgelu_backward_lp,
    OP_matmul_forward_fp8,
    OP_matmul_backward_fp8,
    OP_fp8_update,
    OP_cast_to_lp,
    OP_cast_from_lp,
    OP_round_lp,
    OP_layernorm_forward,
    OP_layernorm_backward,
    OP_rmsnorm_forward,
    OP_rmsnorm_backward,
    OP_rope_forward,
    OP_rope_backward,
    OP_swiglu_forward,
    OP_swiglu_backward,
    OP_attention_forward,
    OP_attention_backward,
    OP_attention_cached,
    OP_gelu_forward,
    OP_gelu_backward,
    OP_residual_forward,
    OP_position_forward,
    OP_rows_forward,
    OP_position_backward,
    OP_rows_add,
    OP_softmax_xent,
    OP_softmax_xent_lp,
    OP_adamw,
    OP_adamw_slices,
    OP_sgd,
    OP_mse,
    OP_sumsq,
    OP_nonfinite,
    OP_sumsq_parts,
    OP_convert,
    OP_accumulate,
    OP_narrow_inplace,
    OP_widen_inplace,
    OP_round_stochastic,
    OP_zero,
    OP_copy,
    OP_N
};
_Static_assert(OP_N <= DT_KPROFILE_MAX, "profile.h's DT_KPROFILE_MAX holds every op");

static const char *const op_names[OP_N] = {
    "matmul_forward",
    "matmul_backward",
    "matmul_forward_lp",
    "matmul_backward_lp",
    "matmul_gelu_forward_lp",
    "matmul_dgelu_backward_lp",
    "matmul_forward_fp8",
    "matmul_backward_fp8",
    "fp8_update",
    "cast_to_lp",
    "cast_from_lp",
    "round_lp",
    "layernorm_forward",
    "layernorm_backward",
    "rmsnorm_forward",
    "rmsnorm_backward",
    "rope_forward",
    "rope_backward",
    "swiglu_forward",
    "swiglu_backward",
    "attention_forward",
    "attention_backward",
    "attention_cached",
    "gelu_forward",
    "gelu_backward",
    "residual_forward",
    "position_forward",
    "rows_forward",
    "position_backward",
    "rows_add",
    "softmax_xent",
    "softmax_xent_lp",
    "adamw",
    "adamw_slices",
    "sgd",
    "mse",
    "sumsq",
    "nonfinite",
    "sumsq_parts",
    "convert",
    "accumulate",
    "narrow_inplace",
    "widen_inplace",
    "round_stochastic",
    "zero",
    "copy",
};

/* the context: the inner table and its context, this table, the sums */
struct pctx {
    const struct dt_kernels *k;
    struct dt_kctx *inner;
    struct dt_kernels table;
    struct dt_kprofile prof;
    bool paused;
};

static struct pctx *P(struct dt_kctx *kc) { return (struct pctx *)kc; }

/* An op's time is from when the device has run everything before it to when it has run the op: on a
 * GPU, whose ops return at their launch, that is its device time (and the step runs without
 * overlap between ops while profiled); on the CPU the waits do nothing. */
static double start(struct dt_kctx *kc)
{
    P(kc)->k->wait(P(kc)->inner);
    return dt_now();
}

static void took(struct dt_kctx *kc, int op, double t0)
{
    P(kc)->k->wait(P(kc)->inner);
    if (P(kc)->paused) return;
    double dt = dt_now() - t0;
    struct dt_kprofile *p = &P(kc)->prof;
    p->secs[op] += dt;
    p->total[op] += dt;
    p->calls[op]++;
    p->calls_total[op]++;
}

static void p_matmul_forward(struct dt_kctx *kc, float *out, const float *inp, const float *weight, const float *bias,
                             int BT, int C, int OC)
{
    double t0 = start(kc);
    P(kc)->k->matmul_forward(P(kc)->inner, out, inp, weight, bias, BT, C, OC);
    took(kc, OP_matmul_forward, t0);
}
static void p_matmul_backward(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, int BT, int C, int OC, unsigned set)
{
    double t0 = start(kc);
    P(kc)->k->matmul_backward(P(kc)->inner, dinp, dweight, dbias, dout, inp, weight, BT, C, OC, set);
    took(kc, OP_matmul_backward, t0);
}
static void p_matmul_forward_lp(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                                const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype lp)
{
    double t0 = start(kc);
    P(kc)->k->matmul_forward_lp(P(kc)->inner, out, ot, inp, weight, bias, wt, BT, C, OC, lp);
    took(kc, OP_matmul_forward_lp, t0);
}
static void p_matmul_backward_lp(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                                 enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                                 int OC, enum dt_dtype lp, unsigned set)
{
    double t0 = start(kc);
    P(kc)->k->matmul_backward_lp(P(kc)->inner, dinp, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, lp, set);
    took(kc, OP_matmul_backward_lp, t0);
}
static void p_matmul_gelu_forward_lp(struct dt_kctx *kc, void *out, void *pre, const void *inp, const void *weight,
                                     const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype lp)
{
    double t0 = start(kc);
    P(kc)->k->matmul_gelu_forward_lp(P(kc)->inner, out, pre, inp, weight, bias, wt, BT, C, OC, lp);
    took(kc, OP_matmul_gelu_forward_lp, t0);
}
static void p_matmul_dgelu_backward_lp(struct dt_kctx *kc, void *dpre, const void *pre, float *dweight, float *dbias,
                                       const void *dout, enum dt_dtype dt, const void *inp, const void *weight,
                                       enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype lp, unsigned set)
{
    double t0 = start(kc);
    P(kc)->k->matmul_dgelu_backward_lp(P(kc)->inner, dpre, pre, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC,
                                       lp, set);
    took(kc, OP_matmul_dgelu_backward_lp, t0);
}
static bool p_gelu_fused(struct dt_kctx *kc) { return P(kc)->k->gelu_fused(P(kc)->inner); }

static void p_matmul_forward_fp8(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                                 const void *bias, enum dt_dtype wt, int BT, int C, int OC, const struct dt_fp8_q *qx,
                                 const struct dt_fp8_q *qw)
{
    double t0 = start(kc);
    P(kc)->k->matmul_forward_fp8(P(kc)->inner, out, ot, inp, weight, bias, wt, BT, C, OC, qx, qw);
    took(kc, OP_matmul_forward_fp8, t0);
}

static void p_matmul_backward_fp8(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                                  enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT,
                                  int C, int OC, const struct dt_fp8_q *qx, const struct dt_fp8_q *qw,
                                  const struct dt_fp8_q *qg, unsigned set)
{
    double t0 = start(kc);
    P(kc)->k->matmul_backward_fp8(P(kc)->inner, dinp, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, qx, qw, qg,
                                  set);
    took(kc, OP_matmul_backward_fp8, t0);
}

static void p_fp8_update(struct dt_kctx *kc, float *hist, float *scale, int n, int len, bool most_recent, float margin,
                         enum dt_fp8_fmt gfmt, float *saturated)
{
    double t0 = start(kc);
    P(kc)->k->fp8_update(P(kc)->inner, hist, scale, n, len, most_recent, margin, gfmt, saturated);
    took(kc, OP_fp8_update, t0);
}
static void p_cast_to_lp(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, enum dt_dtype t)
{
    double t0 = start(kc);
    P(kc)->k->cast_to_lp(P(kc)->inner, dst, src, n, t);
    took(kc, OP_cast_to_lp, t0);
}
static void p_cast_from_lp(struct dt_kctx *kc, float *dst, const uint16_t *src, size_t n, enum dt_dtype t)
{
    double t0 = start(kc);
    P(kc)->k->cast_from_lp(P(kc)->inner, dst, src, n, t);
    took(kc, OP_cast_from_lp, t0);
}
static void p_round_lp(struct dt_kctx *kc, float *dst, const float *src, size_t n, enum dt_dtype t)
{
    double t0 = start(kc);
    P(kc)->k->round_lp(P(kc)->inner, dst, src, n, t);
    took(kc, OP_round_lp, t0);
}
static void p_layernorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *mean, float *rstd,
                                const float *inp, const float *weight, const float *bias, int BT, int C)
{
    double t0 = start(kc);
    P(kc)->k->layernorm_forward(P(kc)->inner, out, ot, mean, rstd, inp, weight, bias, BT, C);
    took(kc, OP_layernorm_forward, t0);
}
static void p_layernorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                                 float *dbias, const float *dout, const float *inp, const float *weight,
                                 const float *mean, const float *rstd, int BT, int C)
{
    double t0 = start(kc);
    P(kc)->k->layernorm_backward(P(kc)->inner, dinp, dinp_lp, lt, dweight, dbias, dout, inp, weight, mean, rstd, BT, C);
    took(kc, OP_layernorm_backward, t0);
}
static void p_rmsnorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *rstd, const float *inp,
                              const float *weight, float eps, int BT, int C)
{
    double t0 = start(kc);
    P(kc)->k->rmsnorm_forward(P(kc)->inner, out, ot, rstd, inp, weight, eps, BT, C);
    took(kc, OP_rmsnorm_forward, t0);
}
static void p_rmsnorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                               const float *dout, const float *inp, const float *weight, const float *rstd, int BT,
                               int C)
{
    double t0 = start(kc);
    P(kc)->k->rmsnorm_backward(P(kc)->inner, dinp, dinp_lp, lt, dweight, dout, inp, weight, rstd, BT, C);
    took(kc, OP_rmsnorm_backward, t0);
}
static void p_rope_forward(struct dt_kctx *kc, void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                           int NKV, int hs)
{
    double t0 = start(kc);
    P(kc)->k->rope_forward(P(kc)->inner, qkv, at, cs, B, T, NH, NKV, hs);
    took(kc, OP_rope_forward, t0);
}
static void p_rope_backward(struct dt_kctx *kc, void *dqkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                            int NKV, int hs)
{
    double t0 = start(kc);
    P(kc)->k->rope_backward(P(kc)->inner, dqkv, at, cs, B, T, NH, NKV, hs);
    took(kc, OP_rope_backward, t0);
}
static void p_swiglu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, int BT, int H)
{
    double t0 = start(kc);
    P(kc)->k->swiglu_forward(P(kc)->inner, out, inp, at, BT, H);
    took(kc, OP_swiglu_forward, t0);
}
static void p_swiglu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                              int BT, int H)
{
    double t0 = start(kc);
    P(kc)->k->swiglu_backward(P(kc)->inner, dinp, inp, dout, at, BT, H);
    took(kc, OP_swiglu_backward, t0);
}
static void p_attention_forward(struct dt_kctx *kc, void *out, float *att, const void *qkv, enum dt_dtype at, int B,
                                int T, int C, int NH, int NKV)
{
    double t0 = start(kc);
    P(kc)->k->attention_forward(P(kc)->inner, out, att, qkv, at, B, T, C, NH, NKV);
    took(kc, OP_attention_forward, t0);
}
static void p_attention_backward(struct dt_kctx *kc, void *dqkv, const float *dout, const void *qkv, const void *out,
                                 const float *att, float *scratch, enum dt_dtype at, int B, int T, int C, int NH,
                                 int NKV)
{
    double t0 = start(kc);
    P(kc)->k->attention_backward(P(kc)->inner, dqkv, dout, qkv, out, att, scratch, at, B, T, C, NH, NKV);
    took(kc, OP_attention_backward, t0);
}
static void p_attention_cached(struct dt_kctx *kc, void *out, const void *qkv, void *kcache, void *vcache,
                               enum dt_dtype at, int B, int n, int pos, int Tc, int C, int NH, int NKV)
{
    double t0 = start(kc);
    P(kc)->k->attention_cached(P(kc)->inner, out, qkv, kcache, vcache, at, B, n, pos, Tc, C, NH, NKV);
    took(kc, OP_attention_cached, t0);
}
static void p_gelu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, size_t N)
{
    double t0 = start(kc);
    P(kc)->k->gelu_forward(P(kc)->inner, out, inp, at, N);
    took(kc, OP_gelu_forward, t0);
}
static void p_gelu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                            size_t N)
{
    double t0 = start(kc);
    P(kc)->k->gelu_backward(P(kc)->inner, dinp, inp, dout, at, N);
    took(kc, OP_gelu_backward, t0);
}
static void p_residual_forward(struct dt_kctx *kc, float *out, const float *a, const void *b, enum dt_dtype bt,
                               size_t N)
{
    double t0 = start(kc);
    P(kc)->k->residual_forward(P(kc)->inner, out, a, b, bt, N);
    took(kc, OP_residual_forward, t0);
}
static void p_position_forward(struct dt_kctx *kc, float *out, const float *wpe, int B, int T, int C)
{
    double t0 = start(kc);
    P(kc)->k->position_forward(P(kc)->inner, out, wpe, B, T, C);
    took(kc, OP_position_forward, t0);
}
static void p_rows_forward(struct dt_kctx *kc, float *out, const int32_t *inp, const void *table, enum dt_dtype t,
                           int v0, int nv, int n, int C)
{
    double t0 = start(kc);
    P(kc)->k->rows_forward(P(kc)->inner, out, inp, table, t, v0, nv, n, C);
    took(kc, OP_rows_forward, t0);
}
static void p_position_backward(struct dt_kctx *kc, float *dwpe, const float *dout, int B, int T, int C)
{
    double t0 = start(kc);
    P(kc)->k->position_backward(P(kc)->inner, dwpe, dout, B, T, C);
    took(kc, OP_position_backward, t0);
}
static void p_rows_add(struct dt_kctx *kc, void *dst, enum dt_dtype t, size_t lo, size_t n, const int32_t *rows,
                       const float *vals, int nrows, int width)
{
    double t0 = start(kc);
    P(kc)->k->rows_add(P(kc)->inner, dst, t, lo, n, rows, vals, nrows, width);
    took(kc, OP_rows_add, t0);
}
static float p_softmax_xent(struct dt_kctx *kc, float *losses, float *logits, const int32_t *targets, float dloss,
                            int BT, int V, int vb, const struct dt_loss_sink *sink)
{
    double t0 = start(kc);
    float r = P(kc)->k->softmax_xent(P(kc)->inner, losses, logits, targets, dloss, BT, V, vb, sink);
    took(kc, OP_softmax_xent, t0);
    return r;
}
static float p_softmax_xent_lp(struct dt_kctx *kc, float *losses, uint16_t *logits, const int32_t *targets, float dloss,
                               int BT, int V, int vb, enum dt_dtype t, const struct dt_loss_sink *sink)
{
    double t0 = start(kc);
    float r = P(kc)->k->softmax_xent_lp(P(kc)->inner, losses, logits, targets, dloss, BT, V, vb, t, sink);
    took(kc, OP_softmax_xent_lp, t0);
    return r;
}
static void p_adamw(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float l2,
                    float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t,
                    void *plp, enum dt_dtype pt)
{
    double t0 = start(kc);
    P(kc)->k->adamw(P(kc)->inner, param, grad, gt, gscale, l2, m, v, n, lr, beta1, beta2, eps, wd, t, plp, pt);
    took(kc, OP_adamw, t0);
}
static void p_adamw_slices(struct dt_kctx *kc, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt, float gscale,
                           float lr, float beta1, float beta2, float eps, int t, enum dt_dtype pt)
{
    double t0 = start(kc);
    P(kc)->k->adamw_slices(P(kc)->inner, s, ns, gt, gscale, lr, beta1, beta2, eps, t, pt);
    took(kc, OP_adamw_slices, t0);
}
static void p_sgd(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float *buf,
                  size_t n, float lr, float momentum, int nesterov, float wd, int first_step, void *plp,
                  enum dt_dtype pt)
{
    double t0 = start(kc);
    P(kc)->k->sgd(P(kc)->inner, param, grad, gt, gscale, buf, n, lr, momentum, nesterov, wd, first_step, plp, pt);
    took(kc, OP_sgd, t0);
}
static float p_mse(struct dt_kctx *kc, float *dout, const float *out, const float *target, float dloss, size_t n,
                   const struct dt_loss_sink *sink)
{
    double t0 = start(kc);
    float r = P(kc)->k->mse(P(kc)->inner, dout, out, target, dloss, n, sink);
    took(kc, OP_mse, t0);
    return r;
}
static double p_sumsq(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n)
{
    double t0 = start(kc);
    double r = P(kc)->k->sumsq(P(kc)->inner, x, t, n);
    took(kc, OP_sumsq, t0);
    return r;
}
static size_t p_nonfinite(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n)
{
    double t0 = start(kc);
    size_t r = P(kc)->k->nonfinite(P(kc)->inner, x, t, n);
    took(kc, OP_nonfinite, t0);
    return r;
}
static double p_sumsq_parts(struct dt_kctx *kc, const struct dt_norm_part *parts, int nparts, enum dt_dtype t,
                            size_t *bad)
{
    double t0 = start(kc);
    double r = P(kc)->k->sumsq_parts(P(kc)->inner, parts, nparts, t, bad);
    took(kc, OP_sumsq_parts, t0);
    return r;
}
static void p_convert(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n)
{
    double t0 = start(kc);
    P(kc)->k->convert(P(kc)->inner, dst, dt, src, st, n);
    took(kc, OP_convert, t0);
}
static void p_accumulate(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n)
{
    double t0 = start(kc);
    P(kc)->k->accumulate(P(kc)->inner, dst, dt, src, st, n);
    took(kc, OP_accumulate, t0);
}
static void p_narrow_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t)
{
    double t0 = start(kc);
    P(kc)->k->narrow_inplace(P(kc)->inner, buf, n, t);
    took(kc, OP_narrow_inplace, t0);
}
static void p_widen_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t)
{
    double t0 = start(kc);
    P(kc)->k->widen_inplace(P(kc)->inner, buf, n, t);
    took(kc, OP_widen_inplace, t0);
}
static void p_round_stochastic(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, uint64_t seed,
                               uint64_t index0)
{
    double t0 = start(kc);
    P(kc)->k->round_stochastic(P(kc)->inner, dst, src, n, seed, index0);
    took(kc, OP_round_stochastic, t0);
}
static void p_zero(struct dt_kctx *kc, void *p, size_t bytes)
{
    double t0 = start(kc);
    P(kc)->k->zero(P(kc)->inner, p, bytes);
    took(kc, OP_zero, t0);
}
static void p_copy(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    double t0 = start(kc);
    P(kc)->k->copy(P(kc)->inner, dst, src, bytes, kind);
    took(kc, OP_copy, t0);
}

/* the memory and control slots: the inner table's, on its context */
static void *p_alloc(struct dt_kctx *kc, size_t bytes) { return P(kc)->k->alloc(P(kc)->inner, bytes); }
static void p_free(struct dt_kctx *kc, void *p) { P(kc)->k->free(P(kc)->inner, p); }
static void *p_host_alloc(struct dt_kctx *kc, size_t bytes) { return P(kc)->k->host_alloc(P(kc)->inner, bytes); }
static void p_host_free(struct dt_kctx *kc, void *p) { P(kc)->k->host_free(P(kc)->inner, p); }
static dt_status_t p_synchronize(struct dt_kctx *kc, int64_t step) { return P(kc)->k->synchronize(P(kc)->inner, step); }
static void p_wait(struct dt_kctx *kc) { P(kc)->k->wait(P(kc)->inner); }
static void p_device_memory(struct dt_kctx *kc, int64_t *peak_allocated, int64_t *reserved)
{
    P(kc)->k->device_memory(P(kc)->inner, peak_allocated, reserved);
}
static void p_describe(struct dt_kctx *kc, char *buf, size_t n, enum dt_dtype compute)
{
    P(kc)->k->describe(P(kc)->inner, buf, n, compute);
}
static void p_ctx_destroy(struct dt_kctx *kc)
{
    if (!kc) return;
    P(kc)->k->ctx_destroy(P(kc)->inner);
    free(kc);
}

/* copies beside the ops are not ops: passed through, untimed */
static uint64_t p_copy_async(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    return P(kc)->k->copy_async(P(kc)->inner, dst, src, bytes, kind);
}
static dt_status_t p_fp8_supported(struct dt_kctx *kc) { return P(kc)->k->fp8_supported(P(kc)->inner); }
static void p_copy_wait(struct dt_kctx *kc, uint64_t ticket, bool host) { P(kc)->k->copy_wait(P(kc)->inner, ticket, host); }
static uint64_t p_copy_inline(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    return P(kc)->k->copy_inline(P(kc)->inner, dst, src, bytes, kind);
}

dt_status_t dt_kprofile_wrap(const struct dt_kernels **k, struct dt_kctx **kc)
{
    struct pctx *c = calloc(1, sizeof *c);
    if (!c) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the op profile");
    c->k = *k;
    c->inner = *kc;
    c->prof.n = OP_N;
    for (int i = 0; i < OP_N; i++) c->prof.name[i] = op_names[i];
    struct dt_kernels *t = &c->table;
    *t = **k;
    t->ctx_create = NULL; /* a profile wraps a context made by the inner table */
    t->ctx_destroy = p_ctx_destroy;
    t->alloc = p_alloc;
    t->free = p_free;
    t->host_alloc = p_host_alloc;
    t->host_free = p_host_free;
    t->synchronize = p_synchronize;
    t->wait = p_wait;
    t->device_memory = (*k)->device_memory ? p_device_memory : NULL;
    t->fp8_supported = (*k)->fp8_supported ? p_fp8_supported : NULL;
    t->describe = p_describe;
    t->zero = p_zero;
    t->copy = p_copy;
    t->copy_async = (*k)->copy_async ? p_copy_async : NULL;
    t->copy_wait = (*k)->copy_wait ? p_copy_wait : NULL;
    t->copy_inline = (*k)->copy_inline ? p_copy_inline : NULL;
    t->matmul_forward = p_matmul_forward;
    t->matmul_backward = p_matmul_backward;
    t->matmul_forward_lp = p_matmul_forward_lp;
    t->matmul_backward_lp = p_matmul_backward_lp;
    t->gelu_fused = (*k)->gelu_fused ? p_gelu_fused : NULL;
    t->matmul_gelu_forward_lp = (*k)->matmul_gelu_forward_lp ? p_matmul_gelu_forward_lp : NULL;
    t->matmul_dgelu_backward_lp = (*k)->matmul_dgelu_backward_lp ? p_matmul_dgelu_backward_lp : NULL;
    t->matmul_forward_fp8 = p_matmul_forward_fp8;
    t->matmul_backward_fp8 = p_matmul_backward_fp8;
    t->fp8_update = p_fp8_update;
    t->cast_to_lp = p_cast_to_lp;
    t->cast_from_lp = p_cast_from_lp;
    t->round_lp = p_round_lp;
    t->layernorm_forward = p_layernorm_forward;
    t->layernorm_backward = p_layernorm_backward;
    t->rmsnorm_forward = p_rmsnorm_forward;
    t->rmsnorm_backward = p_rmsnorm_backward;
    t->rope_forward = p_rope_forward;
    t->rope_backward = p_rope_backward;
    t->swiglu_forward = p_swiglu_forward;
    t->swiglu_backward = p_swiglu_backward;
    t->attention_forward = p_attention_forward;
    t->attention_backward = p_attention_backward;
    t->attention_cached = p_attention_cached;
    t->gelu_forward = p_gelu_forward;
    t->gelu_backward = p_gelu_backward;
    t->residual_forward = p_residual_forward;
    t->position_forward = p_position_forward;
    t->rows_forward = p_rows_forward;
    t->position_backward = p_position_backward;
    t->rows_add = p_rows_add;
    t->softmax_xent = p_softmax_xent;
    t->softmax_xent_lp = p_softmax_xent_lp;
    t->adamw = p_adamw;
    t->adamw_slices = p_adamw_slices;
    t->sgd = p_sgd;
    t->mse = p_mse;
    t->sumsq = p_sumsq;
    t->nonfinite = p_nonfinite;
    t->sumsq_parts = p_sumsq_parts;
    t->convert = p_convert;
    t->accumulate = p_accumulate;
    t->narrow_inplace = p_narrow_inplace;
    t->widen_inplace = p_widen_inplace;
    t->round_stochastic = p_round_stochastic;
    *k = t;
    *kc = (struct dt_kctx *)c;
    return DT_SUCCESS;
}

struct dt_kprofile *dt_kprofile_of(struct dt_kctx *kc) { return &P(kc)->prof; }

void dt_kprofile_pause(struct dt_kctx *kc, bool paused) { P(kc)->paused = paused; }
