/*
 * cuda_table.c - kernels.h's op table over the CUDA module's kernels (kernels/cuda/module.h), for
 * a rank that drives a GPU. It includes no CUDA header: every call goes through the module dtrun
 * dlopens. The ops return nothing and a GPU runs them asynchronously, so the context keeps the
 * first failure (the op, the device, CUDA's words) and synchronize reports it with the step; an
 * op that hands a value back to the host (a norm, a loss without a sink) synchronizes by itself.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/error.h"
#include "kernels/cuda/plan.h"
#include "kernels/cuda_module.h"
#include "kernels/kernels.h"

/* The context: struct dt_kctx is the CPU backend's; this backend's pointers are cast to its own. */
struct cuda_kctx {
    const struct dt_cuda_ops *ops;
    void *mm; /* the module's cuBLASLt context (handle, workspace, scratch) */
    void *copies; /* the copies beside the kernels (copy_async), made at the first */
    int device;
    int err;        /* the first failure since the last synchronize */
    const char *op; /* the op it came from */
    char path[96];  /* describe's answer */
    unsigned tries; /* DTRUN_CUDA_TRY's kernels on trial (plan.h) */
    /* the live allocations and their sizes (a model makes a few dozen), for device_memory */
    struct live {
        void *p;
        size_t bytes;
    } *live;
    size_t nlive, cap;
    int64_t allocated, peak; /* peak: of allocated plus the module's scratch, see held() */
};

static struct cuda_kctx *C(struct dt_kctx *kc) { return (struct cuda_kctx *)kc; }

/* keep the first failure */
static void note(struct dt_kctx *kc, const char *op, int e)
{
    struct cuda_kctx *c = C(kc);
    if (e && !c->err) {
        c->err = e;
        c->op = op;
    }
}
#define CALL(kc, op, ...) note(kc, #op, C(kc)->ops->op(__VA_ARGS__))

static dt_status_t cuda_ctx_create(int device, struct dt_kctx **out)
{
    *out = NULL;
    const struct dt_cuda_module *m;
    DT_CHECK(dt_cuda_module_get(&m));
    struct cuda_kctx *c = calloc(1, sizeof *c);
    if (!c) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the CUDA kernels' context");
    c->ops = m->ops;
    c->device = device;
    char bad[32], names[DT_CUDA_TRY_STR];
    if (dt_cuda_tries_parse(getenv("DTRUN_CUDA_TRY"), &c->tries, bad, sizeof bad)) {
        free(c);
        dt_cuda_tries_str((1u << DT_CUDA_TRY_COUNT) - 1, names, sizeof names); /* every name, kv1 too */
        return dt_error(DT_ERR_CONFIG, "dtrun: error: DTRUN_CUDA_TRY names \"%s\", no kernel on trial\n  hint: "
                        "a comma-separated list of %s, or all; unset it for the kernels in use", bad, names);
    }
    m->ops->set_tries(c->tries);
    int e = c->ops->set_device(device);
    if (!e) e = c->ops->ctx_create(&c->mm);
    if (e) {
        free(c);
        return dt_error(DT_ERR_CUDA, "dtrun: error: cannot start the CUDA kernels on cuda:%d: %s\n"
                        "  hint: `dtrun info` says which GPU each rank sees", device, m->ops->error_string(e));
    }
    *out = (struct dt_kctx *)c;
    return DT_SUCCESS;
}

static void cuda_ctx_destroy(struct dt_kctx *kc)
{
    if (!kc) return;
    if (C(kc)->copies) C(kc)->ops->copies_destroy(C(kc)->copies);
    C(kc)->ops->ctx_destroy(C(kc)->mm);
    free(C(kc)->live);
    free(kc);
}

static void describe(struct dt_kctx *kc, char *buf, size_t n, enum dt_dtype compute)
{
    char tries[DT_CUDA_TRY_STR];
    dt_cuda_tries_str(C(kc)->tries, tries, sizeof tries);
    snprintf(buf, n, "cuBLASLt %s on cuda:%d; attention fused (flash)%s%s",
             compute == DT_F32 ? "fp32" : dt_dtype_str(compute), C(kc)->device,
             tries[0] ? "; on trial (DTRUN_CUDA_TRY): " : "", tries);
}

/* The most dtrun held on the device: what this table allocated plus the module's own (its cuBLASLt
 * workspace and scratch, ctx_bytes). Scratch only grows and the table's total changes only here, so
 * the sum is at its most at a moment this file sees: just after an allocation, just before a free,
 * during a copy through a temporary, or at a reading; taking it there (with scratch's size then) makes
 * the peak the true one, not the sum of two peaks reached at different times (#41: that bound read
 * 4810 MiB against 4467 in use on the device). `extra`: a temporary held at that moment. */
static void held(struct cuda_kctx *c, size_t extra)
{
    int64_t now = c->allocated + (int64_t)c->ops->ctx_bytes(c->mm) + (int64_t)extra;
    if (now > c->peak) c->peak = now;
}

/* count an allocation in; false when the host is out of memory for the list */
static bool count_in(struct cuda_kctx *c, void *p, size_t bytes)
{
    if (c->nlive == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct live *l = realloc(c->live, cap * sizeof *l);
        if (!l) return false;
        c->live = l;
        c->cap = cap;
    }
    c->live[c->nlive++] = (struct live){p, bytes};
    c->allocated += (int64_t)bytes;
    held(c, 0);
    return true;
}
static void count_out(struct cuda_kctx *c, void *p)
{
    for (size_t i = 0; i < c->nlive; i++)
        if (c->live[i].p == p) {
            held(c, 0);
            c->allocated -= (int64_t)c->live[i].bytes;
            c->live[i] = c->live[--c->nlive];
            return;
        }
}
static void *alloc(struct dt_kctx *kc, size_t bytes)
{
    void *p = NULL;
    int e = C(kc)->ops->malloc(&p, bytes);
    note(kc, "alloc", e);
    if (e) return NULL;
    e = C(kc)->ops->memset(p, 0, bytes);
    note(kc, "alloc", e);
    /* the caller says it is out of memory when the host has none for the list either */
    if (e || !count_in(C(kc), p, bytes)) {
        C(kc)->ops->free(p);
        return NULL;
    }
    return p;
}
static void dev_free(struct dt_kctx *kc, void *p)
{
    if (!p) return;
    count_out(C(kc), p);
    note(kc, "free", C(kc)->ops->free(p));
}
static void device_memory(struct dt_kctx *kc, int64_t *peak_allocated, int64_t *reserved)
{
    size_t free_bytes = 0, total = 0;
    note(kc, "device_memory", C(kc)->ops->mem_info(&free_bytes, &total));
    held(C(kc), 0);
    *peak_allocated = C(kc)->peak;
    *reserved = (int64_t)(total - free_bytes);
}
static void *host_alloc(struct dt_kctx *kc, size_t bytes)
{
    void *p = NULL;
    int e = C(kc)->ops->malloc_host(&p, bytes);
    note(kc, "host_alloc", e);
    return e ? NULL : p;
}
static void host_free(struct dt_kctx *kc, void *p)
{
    if (p) note(kc, "host_free", C(kc)->ops->free_host(p));
}
static void zero(struct dt_kctx *kc, void *p, size_t bytes) { CALL(kc, memset, p, 0, bytes); }
static void copy(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    if (!bytes) return;
    if (kind == DT_COPY_TO_DEVICE) CALL(kc, to_device, dst, src, bytes);
    else if (kind == DT_COPY_TO_HOST) CALL(kc, to_host, dst, src, bytes);
    else {
        if (dt_cuda_copy_overlaps(dst, src, bytes)) held(C(kc), bytes);
        CALL(kc, on_device, dst, src, bytes);
    }
}
/* A copy the module queues (in_order: among the kernels, copy_inline; else beside them, copy_async); a
 * failure is kept for synchronize (the ticket is then DT_NO_TICKET, nothing to wait for: copies.h).
 * Without the copies' object, the copy is made now, in order with the kernels, so that what reads dst
 * before that synchronize reports the failure reads what it would have. */
static uint64_t queued(struct dt_kctx *kc, bool in_order, void *dst, const void *src, size_t bytes,
                       enum dt_copy_kind kind)
{
    struct cuda_kctx *c = C(kc);
    const char *op = in_order ? "copy_inline" : "copy_async";
    uint64_t ticket = DT_NO_TICKET;
    if (!c->copies) note(kc, op, c->ops->copies_create(&c->copies));
    if (!c->copies) {
        copy(kc, dst, src, bytes, kind);
        return DT_NO_TICKET;
    }
    note(kc, op, (in_order ? c->ops->copy_inline : c->ops->copy_async)(c->copies, dst, src, bytes, (int)kind, &ticket));
    return ticket;
}
static uint64_t copy_async(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    return queued(kc, false, dst, src, bytes, kind);
}
static uint64_t copy_inline(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    return queued(kc, true, dst, src, bytes, kind);
}
static void copy_wait(struct dt_kctx *kc, uint64_t ticket, bool host)
{
    if (ticket != DT_NO_TICKET && C(kc)->copies) note(kc, "copy_wait", C(kc)->ops->copy_wait(C(kc)->copies, ticket, host));
}
/* the failure, if any, stays for synchronize to report with its step */
static void wait_ops(struct dt_kctx *kc) { note(kc, "synchronize", C(kc)->ops->synchronize()); }
static dt_status_t synchronize(struct dt_kctx *kc, int64_t step)
{
    struct cuda_kctx *c = C(kc);
    note(kc, "synchronize", c->ops->synchronize());
    if (!c->err) return DT_SUCCESS;
    int e = c->err;
    c->err = 0;
    /* a shape the FP8 gemms refuse is the model's, not a fault to chase with a blocking launch */
    const char *hint = e == DT_CUDA_ERR_FP8_SHAPE
                           ? "compute.precision: bf16-mixed takes any shape; fp8-mixed wants model widths and "
                             "micro-batch x sequence length that are multiples of 16"
                           : "rerun with CUDA_LAUNCH_BLOCKING=1 to stop at the failing launch";
    return dt_error(DT_ERR_CUDA, "dtrun: error: step %lld: CUDA op %s failed on cuda:%d: %s\n  hint: %s",
                    (long long)step, c->op, c->device, c->ops->error_string(e), hint);
}

static void matmul_forward(struct dt_kctx *kc, float *out, const float *inp, const float *weight, const float *bias,
                           int BT, int Ch, int OC)
{
    note(kc, "matmul_forward",
         C(kc)->ops->matmul_forward(C(kc)->mm, out, DT_F32, inp, weight, bias, DT_F32, BT, Ch, OC, DT_F32));
}
static void matmul_backward(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int BT, int Ch, int OC, unsigned set)
{
    note(kc, "matmul_backward",
         C(kc)->ops->matmul_backward(C(kc)->mm, dinp, dweight, dbias, dout, DT_F32, inp, weight, DT_F32, BT, Ch, OC,
                                     DT_F32, set));
}
static void matmul_forward_lp(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                              const void *bias, enum dt_dtype wt, int BT, int Ch, int OC, enum dt_dtype lp)
{
    note(kc, "matmul_forward_lp",
         C(kc)->ops->matmul_forward(C(kc)->mm, out, (int)ot, inp, weight, bias, (int)wt, BT, Ch, OC, (int)lp));
}
static void matmul_backward_lp(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                               enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int Ch,
                               int OC, enum dt_dtype lp, unsigned set)
{
    note(kc, "matmul_backward_lp",
         C(kc)->ops->matmul_backward(C(kc)->mm, dinp, dweight, dbias, dout, (int)dt, inp, weight, (int)wt, BT, Ch, OC,
                                     (int)lp, set));
}
static bool gelu_fused(struct dt_kctx *kc) { return C(kc)->tries & DT_CUDA_TRY_GELU; }
static void matmul_gelu_forward_lp(struct dt_kctx *kc, void *out, void *pre, const void *inp, const void *weight,
                                   const void *bias, enum dt_dtype wt, int BT, int Ch, int OC, enum dt_dtype lp)
{
    note(kc, "matmul_gelu_forward_lp",
         C(kc)->ops->matmul_gelu_forward(C(kc)->mm, out, pre, inp, weight, bias, (int)wt, BT, Ch, OC, (int)lp));
}
static void matmul_dgelu_backward_lp(struct dt_kctx *kc, void *dpre, const void *pre, float *dweight, float *dbias,
                                     const void *dout, enum dt_dtype dt, const void *inp, const void *weight,
                                     enum dt_dtype wt, int BT, int Ch, int OC, enum dt_dtype lp, unsigned set)
{
    note(kc, "matmul_dgelu_backward_lp",
         C(kc)->ops->matmul_dgelu_backward(C(kc)->mm, dpre, pre, dweight, dbias, dout, (int)dt, inp, weight, (int)wt, BT,
                                           Ch, OC, (int)lp, set));
}
/* kernels.h's struct dt_fp8_q as the module takes it */
static struct dt_cuda_fp8_q fp8_q(const struct dt_fp8_q *q)
{
    return (struct dt_cuda_fp8_q){q->scale, q->amax, (int)q->fmt, q->current ? 1 : 0};
}
static void matmul_forward_fp8(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                               const void *bias, enum dt_dtype wt, int BT, int Ch, int OC, const struct dt_fp8_q *qx,
                               const struct dt_fp8_q *qw)
{
    struct dt_cuda_fp8_q x = fp8_q(qx), w = fp8_q(qw);
    note(kc, "matmul_forward_fp8",
         C(kc)->ops->matmul_forward_fp8(C(kc)->mm, out, (int)ot, inp, weight, bias, (int)wt, BT, Ch, OC, &x, &w));
}
static void matmul_backward_fp8(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                                enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT,
                                int Ch, int OC, const struct dt_fp8_q *qx, const struct dt_fp8_q *qw,
                                const struct dt_fp8_q *qg, unsigned set)
{
    struct dt_cuda_fp8_q x = fp8_q(qx), w = fp8_q(qw), g = fp8_q(qg);
    note(kc, "matmul_backward_fp8",
         C(kc)->ops->matmul_backward_fp8(C(kc)->mm, dinp, dweight, dbias, dout, (int)dt, inp, weight, (int)wt, BT, Ch,
                                         OC, &x, &w, &g, set));
}
static void fp8_update(struct dt_kctx *kc, float *hist, float *scale, int n, int len, bool most_recent, float margin,
                       enum dt_fp8_fmt gfmt, float *saturated)
{
    CALL(kc, fp8_update, hist, scale, n, len, most_recent ? 1 : 0, margin, (int)gfmt, saturated);
}
/* FP8 tensor cores came with compute capability 8.9 (Ada; Hopper 9.0, Blackwell 10.0 and up) */
static dt_status_t fp8_supported(struct dt_kctx *kc)
{
    const struct dt_cuda_module *m;
    DT_CHECK(dt_cuda_module_get(&m));
    struct dt_cuda_device d;
    char why[256] = "";
    int dev = C(kc)->device;
    if (m->device_info(dev, &d, why, sizeof why))
        return dt_error(DT_ERR_CUDA, "dtrun: error: cannot tell whether cuda:%d has FP8 tensor cores: %s\n"
                        "  hint: `dtrun info` says which GPU each rank sees", dev, why);
    if (d.cc_major * 10 + d.cc_minor >= 89) return DT_SUCCESS;
    return dt_error(DT_ERR_CONFIG, "dtrun: error: compute.precision fp8-mixed needs FP8 tensor cores (compute "
                    "capability 8.9 or newer: Ada, Hopper, Blackwell); GPU %d (%s) is %d.%d\n"
                    "  hint: use compute.precision: bf16-mixed on this GPU", dev, d.name, d.cc_major, d.cc_minor);
}
static void cast_to_lp(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, enum dt_dtype t)
{
    CALL(kc, cast_to_lp, dst, src, n, (int)t);
}
static void cast_from_lp(struct dt_kctx *kc, float *dst, const uint16_t *src, size_t n, enum dt_dtype t)
{
    CALL(kc, cast_from_lp, dst, src, n, (int)t);
}
static void round_lp(struct dt_kctx *kc, float *dst, const float *src, size_t n, enum dt_dtype t)
{
    CALL(kc, round_lp, dst, src, n, (int)t);
}
static void layernorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *mean, float *rstd,
                              const float *inp, const float *weight, const float *bias, int BT, int Ch)
{
    CALL(kc, layernorm_forward, out, (int)ot, mean, rstd, inp, weight, bias, BT, Ch);
}
static void layernorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                               float *dbias, const float *dout, const float *inp, const float *weight,
                               const float *mean, const float *rstd, int BT, int Ch)
{
    CALL(kc, layernorm_backward, C(kc)->mm, dinp, dinp_lp, (int)lt, dweight, dbias, dout, inp, weight, mean, rstd, BT,
         Ch);
}
static void rmsnorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *rstd, const float *inp,
                            const float *weight, float eps, int BT, int Ch)
{
    CALL(kc, rmsnorm_forward, out, (int)ot, rstd, inp, weight, eps, BT, Ch);
}
static void rmsnorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                             const float *dout, const float *inp, const float *weight, const float *rstd, int BT,
                             int Ch)
{
    CALL(kc, rmsnorm_backward, C(kc)->mm, dinp, dinp_lp, (int)lt, dweight, dout, inp, weight, rstd, BT, Ch);
}
static void rope_forward(struct dt_kctx *kc, void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                         int NKV, int hs)
{
    CALL(kc, rope, qkv, (int)at, cs, B, T, NH, NKV, hs, 0);
}
static void rope_backward(struct dt_kctx *kc, void *dqkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                          int NKV, int hs)
{
    CALL(kc, rope, dqkv, (int)at, cs, B, T, NH, NKV, hs, 1);
}
static void swiglu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, int BT, int H)
{
    CALL(kc, swiglu_forward, out, inp, (int)at, BT, H);
}
static void swiglu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                            int BT, int H)
{
    CALL(kc, swiglu_backward, dinp, inp, dout, (int)at, BT, H);
}
/* the fused kernel keeps each row's log-sum-exp, not the (T,T) softmax */
static size_t attention_saved(int B, int NH, int T) { return (size_t)B * NH * T; }
static size_t attention_scratch(int B, int T, int Ch, int NH, int NKV, enum dt_dtype at)
{
    const struct dt_cuda_module *m;
    return dt_cuda_module_get(&m) == DT_SUCCESS ? m->ops->attention_scratch(B, T, Ch, NH, NKV, (int)at) : 0;
}
static void attention_forward(struct dt_kctx *kc, void *out, float *att, const void *qkv, enum dt_dtype at, int B,
                              int T, int Ch, int NH, int NKV)
{
    CALL(kc, attention_forward, out, att, qkv, (int)at, B, T, Ch, NH, NKV);
}
static void attention_backward(struct dt_kctx *kc, void *dqkv, const float *dout, const void *qkv, const void *out,
                               const float *att, float *scratch, enum dt_dtype at, int B, int T, int Ch, int NH,
                               int NKV)
{
    CALL(kc, attention_backward, dqkv, dout, qkv, out, att, scratch, (int)at, B, T, Ch, NH, NKV);
}
static void attention_cached(struct dt_kctx *kc, void *out, const void *qkv, void *kcache, void *vcache,
                             enum dt_dtype at, int B, int n, int pos, int Tc, int Ch, int NH, int NKV)
{
    CALL(kc, attention_cached, out, qkv, kcache, vcache, (int)at, B, n, pos, Tc, Ch, NH, NKV);
}
static void gelu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, size_t N)
{
    CALL(kc, gelu_forward, out, inp, (int)at, N);
}
static void gelu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                          size_t N)
{
    CALL(kc, gelu_backward, dinp, inp, dout, (int)at, N);
}
static void residual_forward(struct dt_kctx *kc, float *out, const float *a, const void *b, enum dt_dtype bt, size_t N)
{
    CALL(kc, residual_forward, out, a, b, (int)bt, N);
}
static void position_forward(struct dt_kctx *kc, float *out, const float *wpe, int B, int T, int Ch)
{
    CALL(kc, position_forward, out, wpe, B, T, Ch);
}
static void rows_forward(struct dt_kctx *kc, float *out, const int32_t *inp, const void *table, enum dt_dtype t, int v0,
                         int nv, int n, int Ch)
{
    CALL(kc, rows_forward, out, inp, table, (int)t, v0, nv, n, Ch);
}
static void position_backward(struct dt_kctx *kc, float *dwpe, const float *dout, int B, int T, int Ch)
{
    CALL(kc, position_backward, dwpe, dout, B, T, Ch);
}
static void rows_add(struct dt_kctx *kc, void *dst, enum dt_dtype t, size_t lo, size_t n, const int32_t *rows,
                     const float *vals, int nrows, int width)
{
    CALL(kc, rows_add, C(kc)->mm, dst, (int)t, lo, n, rows, vals, nrows, width);
}
/* The losses' mean copied back (the host waits), or added into a sink on the device (it does not) */
static float softmax_xent(struct dt_kctx *kc, float *losses, float *logits, const int32_t *targets, float dloss, int BT,
                          int V, int vb, const struct dt_loss_sink *sink)
{
    float mean = 0;
    CALL(kc, softmax_xent, losses, logits, targets, dloss, BT, V, vb, sink ? NULL : &mean, sink ? sink->acc : NULL,
         sink ? sink->div : 1.0);
    return mean;
}
static float softmax_xent_lp(struct dt_kctx *kc, float *losses, uint16_t *logits, const int32_t *targets, float dloss,
                             int BT, int V, int vb, enum dt_dtype t, const struct dt_loss_sink *sink)
{
    float mean = 0;
    CALL(kc, softmax_xent_lp, losses, logits, targets, dloss, BT, V, vb, (int)t, sink ? NULL : &mean,
         sink ? sink->acc : NULL, sink ? sink->div : 1.0);
    return mean;
}
static void adamw_slices(struct dt_kctx *kc, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt, float gscale,
                         float lr, float beta1, float beta2, float eps, int t, enum dt_dtype pt)
{
    const struct dt_cuda_adamw_slice *m = (const struct dt_cuda_adamw_slice *)s; /* the same layout: below */
    note(kc, "adamw_slices",
         C(kc)->ops->adamw_slices(C(kc)->mm, m, ns, (int)gt, gscale, lr, beta1, beta2, eps, t, (int)pt));
}
#define SAME(f) (offsetof(struct dt_adamw_slice, f) == offsetof(struct dt_cuda_adamw_slice, f))
_Static_assert(sizeof(struct dt_adamw_slice) == sizeof(struct dt_cuda_adamw_slice) && SAME(param) && SAME(m) &&
                   SAME(v) && SAME(grad) && SAME(plp) && SAME(n) && SAME(wd) && SAME(l2),
               "module.h's slice is kernels.h's");
#undef SAME
static void adamw(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float l2, float *m,
                  float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t, void *plp,
                  enum dt_dtype pt)
{
    CALL(kc, adamw, param, grad, (int)gt, gscale, l2, m, v, n, lr, beta1, beta2, eps, wd, t, plp, (int)pt);
}
static void sgd(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float *buf, size_t n,
                float lr, float momentum, int nesterov, float wd, int first_step, void *plp, enum dt_dtype pt)
{
    CALL(kc, sgd, param, grad, (int)gt, gscale, buf, n, lr, momentum, nesterov, wd, first_step, plp, (int)pt);
}
static float mse(struct dt_kctx *kc, float *dout, const float *out, const float *target, float dloss, size_t n,
                 const struct dt_loss_sink *sink)
{
    float loss = 0;
    CALL(kc, mse, C(kc)->mm, dout, out, target, dloss, n, sink ? NULL : &loss, sink ? sink->acc : NULL,
         sink ? sink->div : 1.0);
    return loss;
}
/* The parts in calls of up to DT_CUDA_PARTS_MAX to the module, each waiting for the device once: the
 * squares of those that count them added in order, as the CPU adds them */
static double sumsq_parts(struct dt_kctx *kc, const struct dt_norm_part *parts, int nparts, enum dt_dtype t, size_t *bad)
{
    double s = 0;
    *bad = 0;
    for (int at = 0; at < nparts; at += DT_CUDA_PARTS_MAX) {
        int n = nparts - at < DT_CUDA_PARTS_MAX ? nparts - at : DT_CUDA_PARTS_MAX;
        struct dt_cuda_part p[DT_CUDA_PARTS_MAX];
        double sq[DT_CUDA_PARTS_MAX] = {0};
        size_t nb[DT_CUDA_PARTS_MAX] = {0};
        for (int i = 0; i < n; i++) p[i] = (struct dt_cuda_part){parts[at + i].x, parts[at + i].n};
        CALL(kc, sumsq_parts, C(kc)->mm, p, n, (int)t, sq, nb);
        for (int i = 0; i < n; i++) {
            if (parts[at + i].squares) s += sq[i];
            *bad += nb[i];
        }
    }
    return s;
}
static double sumsq(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n)
{
    size_t bad;
    return sumsq_parts(kc, &(struct dt_norm_part){x, n, true}, 1, t, &bad);
}
static size_t nonfinite(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n)
{
    size_t bad;
    sumsq_parts(kc, &(struct dt_norm_part){x, n, false}, 1, t, &bad);
    return bad;
}
static void convert(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n)
{
    CALL(kc, convert, dst, (int)dt, src, (int)st, n, 0);
}
static void accumulate(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n)
{
    CALL(kc, convert, dst, (int)dt, src, (int)st, n, 1);
}
static void narrow_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t)
{
    CALL(kc, narrow_inplace, buf, n, (int)t);
}
static void widen_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t)
{
    CALL(kc, widen_inplace, buf, n, (int)t);
}
static void round_stochastic(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, uint64_t seed,
                             uint64_t index0)
{
    CALL(kc, round_stochastic, dst, src, n, seed, index0);
}

const struct dt_kernels dt_kernels_cuda = {
    .name = "cuda",
    .ctx_create = cuda_ctx_create,
    .ctx_destroy = cuda_ctx_destroy,
    .alloc = alloc,
    .free = dev_free,
    .zero = zero,
    .copy = copy,
    .copy_async = copy_async,
    .copy_wait = copy_wait,
    .copy_inline = copy_inline,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .synchronize = synchronize,
    .wait = wait_ops,
    .device_memory = device_memory,
    .describe = describe,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .matmul_forward_lp = matmul_forward_lp,
    .matmul_backward_lp = matmul_backward_lp,
    .gelu_fused = gelu_fused,
    .matmul_gelu_forward_lp = matmul_gelu_forward_lp,
    .matmul_dgelu_backward_lp = matmul_dgelu_backward_lp,
    .matmul_forward_fp8 = matmul_forward_fp8,
    .matmul_backward_fp8 = matmul_backward_fp8,
    .fp8_update = fp8_update,
    .fp8_supported = fp8_supported,
    .cast_to_lp = cast_to_lp,
    .cast_from_lp = cast_from_lp,
    .round_lp = round_lp,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_backward = rmsnorm_backward,
    .rope_forward = rope_forward,
    .rope_backward = rope_backward,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .attention_saved = attention_saved,
    .attention_scratch = attention_scratch,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .attention_cached = attention_cached,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .residual_forward = residual_forward,
    .position_forward = position_forward,
    .rows_forward = rows_forward,
    .position_backward = position_backward,
    .rows_add = rows_add,
    .softmax_xent = softmax_xent,
    .softmax_xent_lp = softmax_xent_lp,
    .adamw = adamw,
    .adamw_slices = adamw_slices,
    .sgd = sgd,
    .mse = mse,
    .sumsq = sumsq,
    .nonfinite = nonfinite,
    .sumsq_parts = sumsq_parts,
    .convert = convert,
    .accumulate = accumulate,
    .narrow_inplace = narrow_inplace,
    .widen_inplace = widen_inplace,
    .round_stochastic = round_stochastic,
};
