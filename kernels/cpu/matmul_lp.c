/*
 * matmul_lp.c - the linear layers of mixed precision: inputs (activations
 * stored in bf16 or fp16), weights and output gradients rounded to 16 bits
 * (round to nearest even, real 16-bit buffers), products accumulated in fp32,
 * results rounded once to the activation type or kept in fp32.
 *
 * Two paths compute the same sums in different orders (the test compares
 * them): oneDNN's matmul primitive on bf16 operands (bf16 in, f32 out; one
 * primitive per shape, cached for the context's life: a shape is always computed by the same
 * primitive, in the same order), and sgemm on the 16-bit operands widened back
 * to fp32 (the product of two 16-bit values is exact in fp32). oneDNN's path
 * pays where the CPU multiplies bf16 faster than fp32: AMD's Zen 4/5 (twice
 * the fp32 rate, ../shared/PERF.md) and Intel with AMX. On Intel AVX512_BF16
 * without AMX, vdpbf16ps runs at the fp32 FMA rate and oneDNN 2.6's brgemm
 * reached 0.5-0.8x of sgemm (bench/matmul_lp_bench), so sgemm is the default
 * there. The choice depends only on the CPU, so runs stay reproducible;
 * DTRUN_BF16_GEMM=onednn|sgemm overrides it. fp16 always takes sgemm.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt_build_config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fault.h"
#include "kernels/cpu/cpu.h"
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif

/* Growing scratch for the 16-bit copies; a context's kernels are called from one thread at a time. */
struct scratch {
    void *p;
    size_t n;
};

static void *grow(struct scratch *s, size_t bytes)
{
    if (bytes > s->n) {
        free(s->p);
        s->p = malloc(bytes);
        s->n = s->p ? bytes : 0;
    }
    return s->p;
}

#ifdef HAVE_DNNL
struct prim {
    char ta, tb;
    int M, N, K, lda, ldb, ldc;
    bool accumulate;
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c;
};
#endif

/* the CPU backend's context (kernels.h): all of its state is this file's */
struct dt_kctx {
    struct scratch s_b, s_c, s_wa, s_wb, s_wc, s_bias, s_out;
    struct scratch slot[DT_CPU_SCRATCH_SLOTS]; /* dt_cpu_scratch's, for the other kernels */
    const char *failed; /* the first op whose scratch could not be had since the last synchronize */
    size_t failed_bytes;
    char refused[512];  /* or the first call refused (dt_cpu_refuse): whichever came first is kept */
    int bf16_onednn;      /* -1: not chosen yet */
    bool gelu_fused;      /* the models call matmul_gelu_forward_lp and matmul_dgelu_backward_lp (tests) */
    const char *bf16_why; /* why bf16_onednn is what it is, for the log */
    char path[160];       /* dt_cpu_matmul_lp_path's answer */
#ifdef HAVE_DNNL
    /* every shape this context has multiplied (a model has tens of them), never evicted: a shape
     * that fell back to sgemm once its table was full summed in another order (#38) */
    struct prim **cache;
    int ncache, cap;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    bool no_bf16; /* oneDNN has no bf16 matmul on this CPU */
#endif
};

dt_status_t dt_cpu_ctx_create(int device, struct dt_kctx **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the CPU kernels' context");
    (*out)->bf16_onednn = -1;
    (*out)->bf16_why = "chosen by the caller";
    return DT_SUCCESS;
}

void dt_cpu_ctx_destroy(struct dt_kctx *kc)
{
    if (!kc) return;
    struct scratch *all[] = {&kc->s_b, &kc->s_c, &kc->s_wa, &kc->s_wb, &kc->s_wc, &kc->s_bias, &kc->s_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->p);
    for (int i = 0; i < DT_CPU_SCRATCH_SLOTS; i++) free(kc->slot[i].p);
#ifdef HAVE_DNNL
    for (int i = 0; i < kc->ncache; i++) {
        dnnl_primitive_destroy(kc->cache[i]->p);
        dnnl_memory_destroy(kc->cache[i]->a);
        dnnl_memory_destroy(kc->cache[i]->b);
        dnnl_memory_destroy(kc->cache[i]->c);
        free(kc->cache[i]);
    }
    free(kc->cache);
    if (kc->stream) dnnl_stream_destroy(kc->stream);
    if (kc->engine) dnnl_engine_destroy(kc->engine);
#endif
    free(kc);
}

void *dt_cpu_scratch(struct dt_kctx *kc, int slot, size_t bytes, const char *op)
{
    void *p = dt_fault_now_since(DT_FAULT_NOMEM) ? NULL : grow(&kc->slot[slot], bytes);
    if (!p && !kc->failed) kc->failed = op, kc->failed_bytes = bytes; /* dt_cpu_failure says a refusal first */
    return p;
}

void dt_cpu_refuse(struct dt_kctx *kc, const char *fmt, ...)
{
    if (kc->refused[0] || kc->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kc->refused, sizeof kc->refused, fmt, ap);
    va_end(ap);
}

dt_status_t dt_cpu_failure(struct dt_kctx *kc, int64_t step)
{
    if (kc->refused[0]) { /* it came first: an op's own check of failed does not look at refused */
        dt_status_t rc = dt_error(DT_ERR_INTERNAL, "dtrun: error: step %lld: %s", (long long)step, kc->refused);
        kc->refused[0] = 0;
        kc->failed = NULL;
        return rc;
    }
    if (!kc->failed) return DT_SUCCESS;
    const char *op = kc->failed;
    kc->failed = NULL;
    return dt_error(DT_ERR_NOMEM, "dtrun: error: step %lld: out of memory for %zu bytes of the CPU kernels' scratch "
                    "in %s\n  hint: lower data.micro_batch_size or enable model.activation_checkpointing",
                    (long long)step, kc->failed_bytes, op);
}

void dt_cpu_bf16_gemm_select(struct dt_kctx *kc, int onednn) { kc->bf16_onednn = onednn; }

#ifdef HAVE_DNNL
static bool onednn_pays(struct dt_kctx *kc)
{
    int bf16_onednn = kc->bf16_onednn;
    const char *bf16_why = kc->bf16_why;
    if (bf16_onednn < 0) {
        const char *e = getenv("DTRUN_BF16_GEMM");
        bool amx = false, amd = false; /* only x86's are known here; elsewhere sgemm, the same sums */
#if defined(__x86_64__)
        unsigned a, b, c, d;
        amx = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22));
        __builtin_cpu_init();
        amd = __builtin_cpu_is("amd");
#endif
        if (e && !strcmp(e, "onednn")) bf16_onednn = 1, bf16_why = "DTRUN_BF16_GEMM=onednn";
        else if (e && !strcmp(e, "sgemm")) bf16_onednn = 0, bf16_why = "DTRUN_BF16_GEMM=sgemm";
        else if (amx) bf16_onednn = 1, bf16_why = "this CPU has AMX";
        else if (amd) bf16_onednn = 1, bf16_why = "AMD: bf16 at twice the fp32 rate";
        else bf16_onednn = 0, bf16_why = "this CPU multiplies bf16 no faster than fp32";
        kc->bf16_onednn = bf16_onednn;
        kc->bf16_why = bf16_why;
    }
    return bf16_onednn;
}

/* The primitive for this shape: the cached one, or a new one; NULL when this shape takes sgemm, which
 * it then does for the context's whole life: oneDNN has no bf16 matmul on this CPU (found at the
 * first shape, which dt_cpu_matmul_lp_path asks for before anything is computed), or none for this
 * shape (a stride it refuses). Out of memory for the table itself: NULL with failed set (the op
 * returns, and the next synchronize says so). */
static struct prim *bf16_prim(struct dt_kctx *kc, char ta, char tb, int M, int N, int K, int lda, int ldb, int ldc,
                              bool accumulate)
{
    for (int i = 0; i < kc->ncache; i++) {
        struct prim *q = kc->cache[i];
        if (q->ta == ta && q->tb == tb && q->M == M && q->N == N && q->K == K && q->lda == lda && q->ldb == ldb &&
            q->ldc == ldc && q->accumulate == accumulate)
            return q->p ? q : NULL;
    }
    if (kc->no_bf16) return NULL;
    if (!kc->engine && (dnnl_engine_create(&kc->engine, dnnl_cpu, 0) != dnnl_success ||
                        dnnl_stream_create(&kc->stream, kc->engine, dnnl_stream_default_flags) != dnnl_success)) {
        kc->no_bf16 = true;
        return NULL;
    }
    struct prim *q = kc->ncache < kc->cap ? calloc(1, sizeof *q) : NULL;
    if (kc->ncache == kc->cap) {
        int cap = kc->cap ? 2 * kc->cap : 64;
        struct prim **t = realloc(kc->cache, (size_t)cap * sizeof *t);
        if (t) kc->cache = t, kc->cap = cap, q = calloc(1, sizeof *q);
    }
    if (!q) {
        if (!kc->failed) kc->failed = "matmul (the table of oneDNN's bf16 primitives)", kc->failed_bytes = sizeof *q;
        return NULL;
    }
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_dims_t adims = {M, K}, bdims = {K, N}, cdims = {M, N};
    dnnl_dims_t as = {ta == 'N' ? lda : 1, ta == 'N' ? 1 : lda}, bs = {tb == 'N' ? ldb : 1, tb == 'N' ? 1 : ldb},
                cs = {ldc, 1};
    dnnl_memory_desc_init_by_strides(&ad, 2, adims, dnnl_bf16, as);
    dnnl_memory_desc_init_by_strides(&bd, 2, bdims, dnnl_bf16, bs);
    dnnl_memory_desc_init_by_strides(&cd, 2, cdims, dnnl_f32, cs);
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && accumulate)
        ok = dnnl_post_ops_create(&ops) == dnnl_success && dnnl_post_ops_append_sum(ops, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, kc->engine, NULL) == dnnl_success;
    *q = (struct prim){ta, tb, M, N, K, lda, ldb, ldc, accumulate, NULL, NULL, NULL, NULL};
    ok = ok && dnnl_primitive_create(&q->p, pd) == dnnl_success &&
         dnnl_memory_create(&q->a, &ad, kc->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->b, &bd, kc->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->c, &cd, kc->engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        /* kept as this shape's answer: sgemm, every time */
        if (q->p) dnnl_primitive_destroy(q->p);
        if (q->a) dnnl_memory_destroy(q->a);
        if (q->b) dnnl_memory_destroy(q->b);
        q->p = NULL, q->a = q->b = q->c = NULL;
        if (!kc->ncache) kc->no_bf16 = true;
    }
    kc->cache[kc->ncache++] = q;
    return q->p ? q : NULL;
}
#endif

/* C(M,N) = op(A) op(B) [+ C], A and B 16-bit of type t, row-major like dt_cpu_gemm. */
static void gemm_lp(struct dt_kctx *kc, enum dt_dtype t, char ta, char tb, int M, int N, int K, const uint16_t *A, int lda,
                    const uint16_t *B, int ldb, bool accumulate, float *C, int ldc)
{
#ifdef HAVE_DNNL
    const char *failed = kc->failed;
    struct prim *q = t == DT_BF16 && onednn_pays(kc) ? bf16_prim(kc, ta, tb, M, N, K, lda, ldb, ldc, accumulate) : NULL;
    if (!failed && kc->failed) return; /* out of memory: said at the next synchronize, never another order */
    if (q) {
        dnnl_memory_set_data_handle(q->a, (void *)A);
        dnnl_memory_set_data_handle(q->b, (void *)B);
        dnnl_memory_set_data_handle(q->c, C);
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, q->a}, {DNNL_ARG_WEIGHTS, q->b}, {DNNL_ARG_DST, q->c}};
        dnnl_primitive_execute(q->p, kc->stream, 3, args);
        dnnl_stream_wait(kc->stream);
        return;
    }
#endif
    size_t na = (size_t)(ta == 'N' ? M : K) * lda, nb = (size_t)(tb == 'N' ? K : N) * ldb;
    float *a = grow(&kc->s_wa, na * sizeof(float)), *b = grow(&kc->s_wb, nb * sizeof(float));
    dt_cpu_cast_from_lp(kc, a, A, na, t);
    dt_cpu_cast_from_lp(kc, b, B, nb, t);
    dt_cpu_gemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
}

/* The sgemm path: operands rounded to t in one pass each, kept in fp32. */
static bool widened(struct dt_kctx *kc, enum dt_dtype t)
{
#ifdef HAVE_DNNL
    if (t == DT_BF16 && onednn_pays(kc)) return false;
#endif
    (void)kc;
    (void)t;
    return true;
}

/* The bias as the products' type t has it, in fp32 scratch: an fp32 bias rounded to t (as autocast's
 * F.linear rounds it; so a strategy's 16-bit storage gives the same bits), a 16-bit one widened. */
static const float *bias_f32(struct dt_kctx *kc, const void *bias, enum dt_dtype wt, int OC, enum dt_dtype t)
{
    if (!bias) return NULL;
    float *b = grow(&kc->s_bias, (size_t)OC * sizeof(float));
    if (wt == DT_F32) dt_cpu_round_lp(kc, b, bias, (size_t)OC, t);
    else dt_cpu_convert(kc, b, DT_F32, bias, wt, (size_t)OC);
    if (wt != DT_F32 && wt != t) dt_cpu_round_lp(kc, b, b, (size_t)OC, t);
    return b;
}

/* The weight as the path multiplies it: rounded to t in fp32 scratch (sgemm), or in t (oneDNN); from
 * fp32 (rounded here) or from 16-bit storage of type t (widened exactly, or used as it is). */
static const float *weight_widened(struct dt_kctx *kc, const void *weight, enum dt_dtype wt, size_t n, enum dt_dtype t)
{
    float *w = grow(&kc->s_wb, n * sizeof(float));
    if (wt == DT_F32) dt_cpu_round_lp(kc, w, weight, n, t);
    else dt_cpu_convert(kc, w, DT_F32, weight, wt, n);
    if (wt != DT_F32 && wt != t) dt_cpu_round_lp(kc, w, w, n, t);
    return w;
}

static const uint16_t *weight_lp(struct dt_kctx *kc, const void *weight, enum dt_dtype wt, size_t n, enum dt_dtype t)
{
    if (wt == t) return weight;
    uint16_t *w = grow(&kc->s_b, n * sizeof(uint16_t));
    dt_cpu_convert(kc, w, t, weight, wt, n);
    return w;
}

void dt_cpu_matmul_forward_lp(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                              const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype t)
{
    const float *b = bias_f32(kc, bias, wt, OC, t);
    size_t nx = (size_t)BT * C, no = (size_t)BT * OC;
    /* the fp32 sums, rounded into a 16-bit out once they are complete */
    float *o = ot == DT_F32 ? out : grow(&kc->s_out, no * sizeof(float));
    if (!o) {
        if (!kc->failed) kc->failed = "matmul_forward_lp", kc->failed_bytes = no * sizeof(float);
        return;
    }
    if (widened(kc, t)) {
        float *x = grow(&kc->s_wa, nx * sizeof(float));
        dt_cpu_cast_from_lp(kc, x, inp, nx, t);
        dt_cpu_matmul_forward(kc, o, x, weight_widened(kc, weight, wt, (size_t)OC * C, t), b, BT, C, OC);
    } else {
        const uint16_t *w = weight_lp(kc, weight, wt, (size_t)OC * C, t);
        if (b) {
            #pragma omp parallel for
            for (int i = 0; i < BT; i++) memcpy(o + (size_t)i * OC, b, (size_t)OC * sizeof *o);
        }
        gemm_lp(kc, t, 'N', 'T', BT, OC, C, inp, C, w, C, b != NULL, o, OC);
    }
    if (ot != DT_F32) dt_cpu_cast_to_lp(kc, out, o, no, ot);
}

void dt_cpu_gelu_fuse(struct dt_kctx *kc, bool on) { kc->gelu_fused = on; }
bool dt_cpu_gelu_fused(struct dt_kctx *kc) { return kc->gelu_fused; }

/* The GPU's GELU in the matmul, composed of the kernels the model calls apart, so the same bits: the
 * model's fused path runs on the CPU for tests (dt_cpu_gelu_fuse) */
void dt_cpu_matmul_gelu_forward_lp(struct dt_kctx *kc, void *out, void *pre, const void *inp, const void *weight,
                                   const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype t)
{
    dt_cpu_matmul_forward_lp(kc, pre, t, inp, weight, bias, wt, BT, C, OC, t);
    dt_cpu_gelu_forward(kc, out, pre, t, (size_t)BT * OC);
}

void dt_cpu_matmul_dgelu_backward_lp(struct dt_kctx *kc, void *dpre, const void *pre, float *dweight, float *dbias,
                                     const void *dout, enum dt_dtype dt, const void *inp, const void *weight,
                                     enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype t, unsigned set)
{
    /* the fp32 dinp in the forward's output scratch, which the backward does not take */
    float *d = grow(&kc->s_out, (size_t)BT * C * sizeof(float));
    if (!d) {
        if (!kc->failed) kc->failed = "matmul_dgelu_backward_lp", kc->failed_bytes = (size_t)BT * C * sizeof(float);
        return;
    }
    dt_cpu_matmul_backward_lp(kc, d, dweight, dbias, dout, dt, inp, weight, wt, BT, C, OC, t, set | DT_SET_DINP);
    dt_cpu_gelu_backward(kc, dpre, pre, d, t, (size_t)BT * C);
}

void dt_cpu_matmul_backward_lp(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                               enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                               int OC, enum dt_dtype t, unsigned set)
{
    size_t nx = (size_t)BT * C, nd = (size_t)BT * OC;
    if (widened(kc, t)) {
        float *x = grow(&kc->s_wa, nx * sizeof(float)), *d = grow(&kc->s_wc, nd * sizeof(float));
        dt_cpu_cast_from_lp(kc, x, inp, nx, t);
        if (dt == DT_F32) dt_cpu_round_lp(kc, d, dout, nd, t);
        else dt_cpu_cast_from_lp(kc, d, dout, nd, t);
        const float *w = weight_widened(kc, weight, wt, (size_t)OC * C, t);
        dt_cpu_matmul_backward(kc, dinp, dweight, dbias, d, x, w, BT, C, OC, set);
        return;
    }
    const uint16_t *d = dout;
    if (dt == DT_F32) {
        uint16_t *r = grow(&kc->s_c, nd * sizeof(uint16_t));
        dt_cpu_cast_to_lp(kc, r, dout, nd, t);
        d = r;
    }
    const uint16_t *w = weight_lp(kc, weight, wt, (size_t)OC * C, t);
    gemm_lp(kc, t, 'N', 'N', BT, C, OC, d, OC, w, C, !(set & DT_SET_DINP), dinp, C);
    gemm_lp(kc, t, 'T', 'N', OC, C, BT, d, OC, inp, C, !(set & DT_SET_DPARAMS), dweight, C);
    if (dbias) {
        float *df = grow(&kc->s_wc, nd * sizeof(float));
        dt_cpu_cast_from_lp(kc, df, d, nd, t);
        dt_cpu_colsum(dbias, df, BT, OC, set & DT_SET_DPARAMS);
    }
}

const char *dt_cpu_matmul_lp_path(struct dt_kctx *kc, enum dt_dtype t)
{
    if (t != DT_BF16) return "fp32 sgemm on operands rounded to fp16";
#ifdef HAVE_DNNL
    bool pays = onednn_pays(kc);
    if (pays && bf16_prim(kc, 'N', 'T', 16, 16, 16, 16, 16, 16, false)) {
        snprintf(kc->path, sizeof kc->path, "oneDNN bf16 matmul (%s)", kc->bf16_why);
        return kc->path;
    }
    snprintf(kc->path, sizeof kc->path, "fp32 sgemm on operands rounded to bf16 (%s)",
             pays ? "oneDNN has no bf16 matmul on this CPU" : kc->bf16_why);
    return kc->path;
#else
    return "fp32 sgemm on operands rounded to bf16 (built without oneDNN)";
#endif
}
