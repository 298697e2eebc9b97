/*
 * test_kernels_fd.c - every CPU kernel's backward against central finite
 * differences of L = sum(out * R) for a random R (ggml's MODE_GRAD idea), on
 * small awkward shapes. Error: max |numeric - analytic| / max |analytic|.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "core/rng.h"
#include "dt_test.h"
#include "kernels/formulas.h"
#include "kernels/kernels.h"

static const struct dt_kernels *K = &dt_kernels_cpu;
#define KC dt_test_kctx()

static float *rnd(size_t n, float scale, uint64_t stream)
{
    float *x = malloc(n * sizeof *x);
    struct dt_rng r = dt_rng_make(42, stream);
    for (size_t i = 0; i < n; i++) x[i] = scale * dt_rng_normal(&r);
    return x;
}

/* The forward under test writes `nout` floats into out from the inputs it closes over. */
struct fd {
    void (*forward)(struct fd *f, float *out);
    size_t nout;
    const float *R;
    void *ctx;
};

static double objective(struct fd *f)
{
    float *out = calloc(f->nout, sizeof *out);
    f->forward(f, out);
    double s = 0;
    for (size_t i = 0; i < f->nout; i++) s += (double)out[i] * f->R[i];
    free(out);
    return s;
}

static void check(struct fd *f, const char *name, float *x, size_t n, const float *analytic, double tol)
{
    double err = 0, scale = 1e-6;
    const float eps = 1e-2f;
    for (size_t i = 0; i < n; i++) {
        /* a NaN left in a gradient is a failure of its own (the scale below would pass over it) */
        if (!isfinite(analytic[i])) fail_msg("%s[%zu] = %g: not a finite gradient", name, i, (double)analytic[i]);
        float save = x[i];
        x[i] = save + eps;
        double lp = objective(f);
        x[i] = save - eps;
        double lm = objective(f);
        x[i] = save;
        double num = (lp - lm) / (2 * eps);
        err = dt_test_worst(err, fabs(num - analytic[i]));
        scale = fmax(scale, fabs(analytic[i]));
    }
    print_message("# %-22s max error %.2e (relative %.2e)\n", name, err, err / scale);
    if (err / scale > tol) fail_msg("%s: finite differences disagree: relative error %.3g > %.3g", name, err / scale, tol);
}

/* ---------------------------------------------------------------- matmul */
struct mm {
    float *inp, *w, *b;
    int BT, C, OC;
};
static void mm_fwd(struct fd *f, float *out)
{
    struct mm *m = f->ctx;
    K->matmul_forward(KC, out, m->inp, m->w, m->b, m->BT, m->C, m->OC);
}
/* the gradients from zeros, added to; or (set) from NaN, which only an overwrite leaves behind */
static void matmul_case(int BT, int C, int OC, unsigned set)
{
    struct mm m = {rnd(BT * C, 1, 1), rnd(OC * C, 1, 2), rnd(OC, 1, 3), BT, C, OC};
    float *R = rnd(BT * OC, 1, 4);
    float *di = calloc(BT * C, 4), *dw = calloc(OC * C, 4), *db = calloc(OC, 4);
    for (int i = 0; set && i < BT * C; i++) di[i] = NAN;
    for (int i = 0; set && i < OC * C; i++) dw[i] = NAN;
    for (int i = 0; set && i < OC; i++) db[i] = NAN;
    K->matmul_backward(KC, di, dw, db, R, m.inp, m.w, BT, C, OC, set);
    struct fd f = {mm_fwd, (size_t)BT * OC, R, &m};
    check(&f, "matmul dinp", m.inp, BT * C, di, 1e-3);
    check(&f, "matmul dweight", m.w, OC * C, dw, 1e-3);
    check(&f, "matmul dbias", m.b, OC, db, 1e-3);
    free(m.inp), free(m.w), free(m.b), free(R), free(di), free(dw), free(db);
}
/* OC 75: the bias sums run in register blocks of 32 columns per thread, with a partial one */
static void matmul(void **state)
{
    matmul_case(5, 7, 3, 0);
    matmul_case(4, 3, 75, 0);
    matmul_case(5, 7, 3, DT_SET_DINP | DT_SET_DPARAMS);
    matmul_case(4, 3, 75, DT_SET_DINP | DT_SET_DPARAMS);
}

/* ---------------------------------------------------------------- layernorm */
struct ln {
    float *inp, *w, *b, *mean, *rstd;
    int BT, C;
};
static void ln_fwd(struct fd *f, float *out)
{
    struct ln *l = f->ctx;
    K->layernorm_forward(KC, out, DT_F32, l->mean, l->rstd, l->inp, l->w, l->b, l->BT, l->C);
}
static void layernorm_case(int BT, int C)
{
    struct ln l = {rnd(BT * C, 1, 5), rnd(C, 1, 6), rnd(C, 1, 7), calloc(BT, 4), calloc(BT, 4), BT, C};
    float *R = rnd(BT * C, 1, 8), *out = calloc(BT * C, 4);
    float *di = calloc(BT * C, 4), *dw = calloc(C, 4), *db = calloc(C, 4);
    K->layernorm_forward(KC, out, DT_F32, l.mean, l.rstd, l.inp, l.w, l.b, BT, C);
    K->layernorm_backward(KC, di, NULL, DT_F32, dw, db, R, l.inp, l.w, l.mean, l.rstd, BT, C);
    struct fd f = {ln_fwd, (size_t)BT * C, R, &l};
    check(&f, "layernorm dinp", l.inp, BT * C, di, 5e-3);
    check(&f, "layernorm dweight", l.w, C, dw, 1e-3);
    check(&f, "layernorm dbias", l.b, C, db, 1e-3);
    free(l.inp), free(l.w), free(l.b), free(l.mean), free(l.rstd), free(R), free(out), free(di), free(dw), free(db);
}
/* C 75: the parameter gradients run in register blocks of 32 channels per thread, with a partial one */
static void layernorm(void **state)
{
    layernorm_case(4, 9);
    layernorm_case(3, 75);
}

/* ---------------------------------------------------------------- Llama's ops */
struct rms {
    float *inp, *w, *rstd;
    int BT, C;
};
static void rms_fwd(struct fd *f, float *out)
{
    struct rms *r = f->ctx;
    K->rmsnorm_forward(KC, out, DT_F32, r->rstd, r->inp, r->w, 1e-5f, r->BT, r->C);
}
/* C 75: the weight gradient's register blocks of 32 channels, with a partial one; BT 130: three row
 * blocks of DT_ROW_BLOCK, the last partial */
static void rmsnorm(void **state)
{
    static const int shapes[2][2] = {{4, 9}, {130, 75}};
    for (int k = 0; k < 2; k++) {
        int BT = shapes[k][0], C = shapes[k][1];
        struct rms r = {rnd(BT * C, 1, 70), rnd(C, 1, 71), calloc(BT, 4), BT, C};
        float *R = rnd(BT * C, 1, 72), *out = calloc(BT * C, 4), *di = calloc(BT * C, 4), *dw = calloc(C, 4);
        K->rmsnorm_forward(KC, out, DT_F32, r.rstd, r.inp, r.w, 1e-5f, BT, C);
        K->rmsnorm_backward(KC, di, NULL, DT_F32, dw, R, r.inp, r.w, r.rstd, BT, C);
        struct fd f = {rms_fwd, (size_t)BT * C, R, &r};
        check(&f, "rmsnorm dinp", r.inp, BT * C, di, 5e-3);
        check(&f, "rmsnorm dweight", r.w, C, dw, 1e-3);
        free(r.inp), free(r.w), free(r.rstd), free(R), free(out), free(di), free(dw);
    }
}

struct rp {
    float *qkv, *cs;
    int B, T, NH, NKV, hs;
};
static void rope_fwd(struct fd *f, float *out)
{
    struct rp *r = f->ctx;
    memcpy(out, r->qkv, f->nout * sizeof *out);
    K->rope_forward(KC, out, DT_F32, r->cs, r->B, r->T, r->NH, r->NKV, r->hs);
}
/* Llama 3 8B's heads, 32 query and 8 key/value of 128, theta 500000: position t's pair i turned by
 * t theta^(-2i/hs) (the rotation in double), the values untouched, and back */
static void rope_heads(void **state)
{
    enum { T = 3, NH = 32, NKV = 8, HS = 128, W = (NH + 2 * NKV) * HS };
    static float cs[T * HS], x[T * W], y[T * W];
    dt_rope_table(cs, T, HS, 500000.0f);
    for (int i = 0; i < T * W; i++) x[i] = (float)(i % 101) / 50.0f - 1.0f;
    memcpy(y, x, sizeof x);
    K->rope_forward(KC, y, DT_F32, cs, 1, T, NH, NKV, HS);
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH + 2 * NKV; h++)
            for (int i = 0; i < HS / 2; i++) {
                size_t a = (size_t)t * W + (size_t)h * HS + i, b = a + HS / 2;
                double ang = h < NH + NKV ? t * (double)(1.0f / powf(500000.0f, (float)(2 * i) / HS)) : 0;
                double ea = x[a] * cos(ang) - x[b] * sin(ang), eb = x[b] * cos(ang) + x[a] * sin(ang);
                worst = fmax(worst, fmax(fabs(y[a] - ea), fabs(y[b] - eb)));
            }
    if (worst > 1e-6) fail_msg("rope at Llama 3's heads: %g from the rotation in double", worst);
    K->rope_backward(KC, y, DT_F32, cs, 1, T, NH, NKV, HS);
    worst = 0;
    for (int i = 0; i < T * W; i++) worst = fmax(worst, fabs(y[i] - x[i]));
    if (worst > 1e-6) fail_msg("rope backward does not turn forward back: %g", worst);
}

/* grouped-query heads (3 query, 1 key/value): the values pass through; theta 10000 as Llama 2 */
static void rope(void **state)
{
    enum { B = 2, T = 5, NH = 3, NKV = 1, HS = 8, W = (NH + 2 * NKV) * HS };
    float cs[T * HS];
    dt_rope_table(cs, T, HS, 10000.0f);
    struct rp r = {rnd(B * T * W, 1, 73), cs, B, T, NH, NKV, HS};
    float *R = rnd(B * T * W, 1, 74), *d = malloc(B * T * W * sizeof *d);
    memcpy(d, R, B * T * W * sizeof *d);
    K->rope_backward(KC, d, DT_F32, cs, B, T, NH, NKV, HS);
    struct fd f = {rope_fwd, (size_t)B * T * W, R, &r};
    check(&f, "rope dqkv", r.qkv, B * T * W, d, 1e-3);
    /* position 0 turns nothing; at position 1 the pair (x[0], x[hs/2]) turns by 1 radian */
    float *y = malloc(B * T * W * sizeof *y);
    rope_fwd(&f, y);
    assert_memory_equal(y, r.qkv, W * sizeof *y);
    float a = r.qkv[W], b = r.qkv[W + HS / 2];
    assert_true(fabsf(y[W] - (a * cosf(1) - b * sinf(1))) < 1e-6f && fabsf(y[W + HS / 2] - (b * cosf(1) + a * sinf(1))) < 1e-6f);
    free(r.qkv), free(R), free(d), free(y);
}

struct sg {
    float *inp;
    int BT, H;
};
static void swiglu_fwd(struct fd *f, float *out)
{
    struct sg *s = f->ctx;
    K->swiglu_forward(KC, out, s->inp, DT_F32, s->BT, s->H);
}
static void swiglu_case(int BT, int H)
{
    struct sg s = {rnd((size_t)BT * 2 * H, 2, 75), BT, H};
    float *R = rnd((size_t)BT * H, 1, 76), *di = malloc((size_t)BT * 2 * H * sizeof *di);
    for (int i = 0; i < BT * 2 * H; i++) di[i] = NAN; /* written, not added to */
    K->swiglu_backward(KC, di, s.inp, R, DT_F32, BT, H);
    struct fd f = {swiglu_fwd, (size_t)BT * H, R, &s};
    check(&f, "swiglu dinp", s.inp, BT * 2 * H, di, 1e-3);
    free(s.inp), free(R), free(di);
}

/* H 1500: more columns than one chunk of a row, the last one partial */
static void swiglu(void **state)
{
    swiglu_case(6, 7);
    swiglu_case(2, 1500);
}

/* ---------------------------------------------------------------- attention */
struct at {
    float *qkv, *att;
    int B, T, C, NH, NKV;
};
/* floats of a qkv with NH query and NKV key/value heads of C / NH */
static size_t qkv_floats(int B, int T, int C, int NH, int NKV) { return (size_t)B * T * (C + 2 * NKV * (C / NH)); }
static void at_fwd(struct fd *f, float *out)
{
    struct at *a = f->ctx;
    K->attention_forward(KC, out, a->att, a->qkv, DT_F32, a->B, a->T, a->C, a->NH, a->NKV);
}
/* the gradient of the whole layer against finite differences, at one shape */
static void attention_fd(int B, int T, int C, int NH, int NKV, uint64_t stream, const char *what)
{
    size_t nq = qkv_floats(B, T, C, NH, NKV);
    struct at a = {rnd(nq, 1, stream), calloc(K->attention_saved(B, NH, T), 4), B, T, C, NH, NKV};
    float *R = rnd((size_t)B * T * C, 1, stream + 1), *out = calloc((size_t)B * T * C, 4);
    float *dqkv = calloc(nq, 4), *scratch = calloc(K->attention_scratch(B, T, C, NH, NKV, DT_F32) + 1, 4);
    K->attention_forward(KC, out, a.att, a.qkv, DT_F32, B, T, C, NH, NKV);
    K->attention_backward(KC, dqkv, R, a.qkv, out, a.att, scratch, DT_F32, B, T, C, NH, NKV);
    struct fd f = {at_fwd, (size_t)B * T * C, R, &a};
    check(&f, what, a.qkv, nq, dqkv, 5e-3);
    free(a.qkv), free(a.att), free(R), free(out), free(dqkv), free(scratch);
}
static void attention(void **state)
{
    attention_fd(2, 5, 6, 2, 2, 9, "attention dqkv");
    attention_fd(2, 5, 12, 4, 2, 13, "grouped-query attention dqkv");
    attention_fd(1, 6, 9, 3, 1, 15, "multi-query attention dqkv");
}
/* Past one block of queries and keys (the kernel's blocks are 64 rows): T = 70 crosses a block
 * edge, with a partial last block. */
static void attention_blocks(void **state) { attention_fd(1, 70, 4, 2, 1, 31, "attention dqkv across blocks"); }

/* The blocked kernels against attention written out plainly in double (the whole T x T softmax,
 * then dS = P (dP - rowsum(dP P))), at T = 150: three query blocks, the last 22 rows; NKV of the NH
 * heads, each key/value head's gradient summed over its group. */
static void attention_plain_case(int NKV)
{
    enum { B = 2, T = 150, C = 16, NH = 4, HS = C / NH };
    int W = C + 2 * NKV * HS, group = NH / NKV;
    size_t nq = qkv_floats(B, T, C, NH, NKV);
    float *qkv = rnd(nq, 3, 33), *R = rnd((size_t)B * T * C, 1, 34);
    float *out = calloc((size_t)B * T * C, 4), *dqkv = calloc(nq, 4);
    float *saved = calloc(K->attention_saved(B, NH, T), 4);
    float *scratch = calloc(K->attention_scratch(B, T, C, NH, NKV, DT_F32) + 1, 4);
    K->attention_forward(KC, out, saved, qkv, DT_F32, B, T, C, NH, NKV);
    K->attention_backward(KC, dqkv, R, qkv, out, saved, scratch, DT_F32, B, T, C, NH, NKV);
    static double p[T][T], dp[T][T], ref[B * T * C];
    double *dref = calloc(nq, sizeof *dref);
    double sc = 1.0 / sqrt((double)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kh = C + h / group * HS, vh = kh + NKV * HS;
#define Q(t, d) qkv[((size_t)b * T + (t)) * W + h * HS + (d)]
#define KK(t, d) qkv[((size_t)b * T + (t)) * W + kh + (d)]
#define VV(t, d) qkv[((size_t)b * T + (t)) * W + vh + (d)]
#define DY(t, d) R[((size_t)b * T + (t)) * C + h * HS + (d)]
#define D(t, at) dref[((size_t)b * T + (t)) * W + (at)]
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int d = 0; d < HS; d++) s += (double)Q(t, d) * KK(u, d);
                    p[t][u] = s * sc;
                    mx = fmax(mx, p[t][u]);
                }
                for (int u = 0; u <= t; u++) sum += p[t][u] = exp(p[t][u] - mx);
                for (int u = 0; u <= t; u++) p[t][u] /= sum;
                for (int d = 0; d < HS; d++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++) o += p[t][u] * VV(u, d);
                    ref[((size_t)b * T + t) * C + h * HS + d] = o;
                }
            }
            for (int t = 0; t < T; t++) {
                double dot = 0;
                for (int u = 0; u <= t; u++) {
                    dp[t][u] = 0;
                    for (int d = 0; d < HS; d++) dp[t][u] += (double)DY(t, d) * VV(u, d);
                    dot += dp[t][u] * p[t][u];
                }
                for (int u = 0; u <= t; u++) {
                    double ds = p[t][u] * (dp[t][u] - dot) * sc;
                    for (int d = 0; d < HS; d++) {
                        D(t, h * HS + d) += ds * KK(u, d);
                        D(u, kh + d) += ds * Q(t, d);
                        D(u, vh + d) += p[t][u] * DY(t, d);
                    }
                }
            }
#undef Q
#undef KK
#undef VV
#undef DY
#undef D
        }
    double e = 0, m = 0, de = 0, dm = 0;
    for (size_t i = 0; i < (size_t)B * T * C; i++) e = dt_test_worst(e, fabs(out[i] - ref[i])), m = fmax(m, fabs(ref[i]));
    for (size_t i = 0; i < nq; i++) de = dt_test_worst(de, fabs(dqkv[i] - dref[i])), dm = fmax(dm, fabs(dref[i]));
    if (e / m > 1e-5 || de / dm > 1e-5)
        fail_msg("blocked attention vs plain, %d key/value heads of %d: out %g, dqkv %g (relative)", NKV, NH, e / m,
                 de / dm);
    free(qkv), free(R), free(out), free(dqkv), free(saved), free(scratch), free(dref);
}
static void attention_plain(void **state)
{
    attention_plain_case(4);
    attention_plain_case(2);
    attention_plain_case(1);
}

/* Attention's backward splits a group's query heads into chunks, one thread each, so that multi-query
 * attention at batch 1 uses every thread (#38); the split depends on the shape alone, so 1 and 3
 * threads give the same bits. The plain reference above checks the values (B 2, NKV 1: 4 chunks).
 * T = 200 ends in a partial block; 16-bit activations take the same kernel. */
static void attention_threads(void **state)
{
    static const int shapes[][5] = {{1, 200, 32, 4, 1}, {2, 130, 16, 4, 2}, {1, 64, 16, 2, 2}, {3, 97, 24, 6, 3}};
    static const enum dt_dtype types[] = {DT_F32, DT_BF16};
    int threads = omp_get_max_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t ti = 0; ti < 2; ti++) {
            int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3], NKV = shapes[s][4];
            enum dt_dtype t = types[ti];
            size_t nq = qkv_floats(B, T, C, NH, NKV), n = (size_t)B * T * C, es = t == DT_F32 ? 4 : 2;
            float *qf = rnd(nq, 2, 40 + s), *R = rnd(n, 1, 50 + s), *lse = calloc(K->attention_saved(B, NH, T), 4);
            void *qkv = malloc(nq * es), *out = malloc(n * es), *d1 = malloc(nq * es), *d3 = malloc(nq * es);
            K->convert(KC, qkv, t, qf, DT_F32, nq);
            K->attention_forward(KC, out, lse, qkv, t, B, T, C, NH, NKV);
            omp_set_num_threads(1);
            K->attention_backward(KC, d1, R, qkv, out, lse, NULL, t, B, T, C, NH, NKV);
            omp_set_num_threads(3);
            K->attention_backward(KC, d3, R, qkv, out, lse, NULL, t, B, T, C, NH, NKV);
            omp_set_num_threads(threads);
            assert_int_equal(K->synchronize(KC, 0), DT_SUCCESS);
            if (memcmp(d1, d3, nq * es))
                fail_msg("attention backward B=%d T=%d C=%d NH=%d NKV=%d %s: 1 and 3 threads differ", B, T, C, NH, NKV,
                         t == DT_F32 ? "fp32" : "bf16");
            free(qf), free(R), free(lse), free(qkv), free(out), free(d1), free(d3);
        }
}

/* ---------------------------------------------------------------- gelu */
static void gelu_fwd(struct fd *f, float *out) { K->gelu_forward(KC, out, f->ctx, DT_F32, f->nout); }
static void gelu(void **state)
{
    float *x = rnd(40, 2, 11), *R = rnd(40, 1, 12), *dx = calloc(40, 4);
    K->gelu_backward(KC, dx, x, R, DT_F32, 40);
    struct fd f = {gelu_fwd, 40, R, x};
    check(&f, "gelu dinp", x, 40, dx, 1e-3);
    free(x), free(R), free(dx);
}

/* ---------------------------------------------------------------- embedding */
struct em {
    int32_t *tok;
    float *wte, *wpe;
    int B, T, C;
};
/* the token table in two blocks of rows (ZeRO-3 gathers it a block at a time), then the positions */
static void em_fwd(struct fd *f, float *out)
{
    struct em *e = f->ctx;
    int n = e->B * e->T;
    K->position_forward(KC, out, e->wpe, e->B, e->T, e->C);
    K->rows_forward(KC, out, e->tok, e->wte, DT_F32, 0, 2, n, e->C);
    K->rows_forward(KC, out, e->tok, e->wte + 2 * e->C, DT_F32, 2, 2, n, e->C);
}
static void embedding(void **state)
{
    int32_t tok[6] = {3, 1, 3, 0, 2, 3}; /* repeats: gradients of a row add up */
    struct em e = {tok, rnd(4 * 5, 1, 13), rnd(3 * 5, 1, 14), 2, 3, 5};
    float *R = rnd(30, 1, 15), *dte = calloc(20, 4), *dpe = calloc(15, 4), *part = calloc(20, 4);
    K->position_backward(KC, dpe, R, 2, 3, 5);
    K->rows_add(KC, dte, DT_F32, 0, 20, tok, R, 6, 5);
    struct fd f = {em_fwd, 30, R, &e};
    check(&f, "embedding dwte", e.wte, 20, dte, 1e-3);
    check(&f, "embedding dwpe", e.wpe, 15, dpe, 1e-3);
    /* what a rank keeping elements [7, 13) of the table gets: exactly those of the whole */
    K->rows_add(KC, part, DT_F32, 7, 6, tok, R, 6, 5);
    assert_memory_equal(part, dte + 7, 6 * sizeof(float));
    /* into bf16 storage: the same sums, rounded once per row added */
    uint16_t lp[20] = {0};
    K->rows_add(KC, lp, DT_BF16, 0, 20, tok, R, 6, 5);
    for (int i = 0; i < 20; i++) assert_true(fabsf(dt_f32_from_bf16(lp[i]) - dte[i]) <= 0.02f * fabsf(dte[i]) + 1e-6f);
    /* the lookup from a 16-bit table (the strategy's storage): its rows widened exactly, each type */
    enum dt_dtype ts[2] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        uint16_t t16[20];
        float got[30] = {0}, want[30] = {0}, wr[20];
        for (int i = 0; i < 20; i++) {
            t16[i] = ts[k] == DT_BF16 ? dt_bf16_from_f32(e.wte[i]) : dt_f16_from_f32(e.wte[i]);
            wr[i] = ts[k] == DT_BF16 ? dt_f32_from_bf16(t16[i]) : dt_f32_from_f16(t16[i]);
        }
        K->rows_forward(KC, got, tok, t16, ts[k], 0, 4, 6, 5);
        K->rows_forward(KC, want, tok, wr, DT_F32, 0, 4, 6, 5);
        assert_memory_equal(got, want, sizeof got);
        assert_true(got[0] != 0);
    }
    free(e.wte), free(e.wpe), free(R), free(dte), free(dpe), free(part);
}

/* ---------------------------------------------------------------- softmax + cross-entropy */
struct sx {
    float *logits;
    int32_t *targets;
    int BT, V, vb;
};
/* L = sum of losses: one output per row, R = 1 */
static void sx_fwd(struct fd *f, float *out)
{
    struct sx *s = f->ctx;
    float *copy = malloc((size_t)s->BT * s->V * 4);
    memcpy(copy, s->logits, (size_t)s->BT * s->V * 4);
    K->softmax_xent(KC, out, copy, s->targets, 0.0f, s->BT, s->V, s->vb, NULL);
    free(copy);
}
static void softmax_xent(void **state)
{
    int BT = 3, V = 7;
    int32_t targets[3] = {6, 0, 3};
    float ones[3] = {1, 1, 1}, losses[3], blocked_losses[3];
    float *logits = rnd((size_t)BT * V, 2, 16), *grad = malloc((size_t)BT * V * 4), *blocked = malloc((size_t)BT * V * 4);
    struct sx s = {logits, targets, BT, V, V};
    memcpy(grad, s.logits, (size_t)BT * V * 4);
    float mean = K->softmax_xent(KC, losses, grad, targets, 1.0f, BT, V, V, NULL); /* dloss 1: gradient of the sum */
    assert_true(mean == (float)(((double)losses[0] + losses[1] + losses[2]) / 3));
    struct fd f = {sx_fwd, (size_t)BT, ones, &s};
    check(&f, "softmax_xent dlogits", s.logits, (size_t)BT * V, grad, 1e-3);
    /* block-major, 3 columns a block (the last holds 1): the same losses and gradients, moved */
    int vb = 3;
    for (int b = 0; b * vb < V; b++) {
        int n = V - b * vb < vb ? V - b * vb : vb;
        for (int i = 0; i < BT; i++)
            memcpy(blocked + (size_t)BT * b * vb + (size_t)i * n, logits + (size_t)i * V + b * vb, (size_t)n * 4);
    }
    /* through a sink: the mean, as returned, over div added to what it holds; 0 returned */
    double acc = 1.5;
    struct dt_loss_sink sink = {&acc, 4};
    assert_true(K->softmax_xent(KC, blocked_losses, blocked, targets, 1.0f, BT, V, vb, &sink) == 0.0f);
    assert_true(acc == 1.5 + (double)mean / 4);
    for (int i = 0; i < BT; i++) assert_true(blocked_losses[i] == losses[i]);
    for (int b = 0; b * vb < V; b++) {
        int n = V - b * vb < vb ? V - b * vb : vb;
        for (int i = 0; i < BT; i++)
            assert_memory_equal(blocked + (size_t)BT * b * vb + (size_t)i * n, grad + (size_t)i * V + b * vb,
                                (size_t)n * 4);
    }
    free(logits), free(grad), free(blocked);
}

/* ---------------------------------------------------------------- mixed types */
/* conversions and sums between fp32, bf16 and fp16 against the one-value reference */
static void mixed_types(void **state)
{
    enum { N = 1001 };
    float *x = rnd(N, 3, 30), *y = rnd(N, 3, 31), back[N];
    uint16_t b[N], h[N], b2[N];
    K->convert(KC, b, DT_BF16, x, DT_F32, N);
    K->convert(KC, h, DT_F16, b, DT_BF16, N); /* 16 to 16 bits, through fp32 */
    K->convert(KC, back, DT_F32, h, DT_F16, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(b[i], dt_bf16_from_f32(x[i]));
        assert_int_equal(h[i], dt_f16_from_f32(dt_f32_from_bf16(b[i])));
        assert_true(back[i] == dt_f32_from_f16(h[i]));
    }
    memcpy(b2, b, sizeof b);
    K->accumulate(KC, b2, DT_BF16, y, DT_F32, N); /* bf16 += fp32: summed in fp32, rounded once */
    for (int i = 0; i < N; i++) assert_int_equal(b2[i], dt_bf16_from_f32(dt_f32_from_bf16(b[i]) + y[i]));
    /* in place, both ways, without a second buffer */
    float buf[N];
    memcpy(buf, x, sizeof buf);
    K->narrow_inplace(KC, buf, N, DT_BF16);
    assert_memory_equal(buf, b, sizeof b);
    K->widen_inplace(KC, buf, N, DT_BF16);
    for (int i = 0; i < N; i++) assert_true(buf[i] == dt_f32_from_bf16(b[i]));
    assert_true(K->sumsq(KC, b, DT_BF16, N) == K->sumsq(KC, buf, DT_F32, N));
    free(x), free(y);
}

/* stochastic rounding: deterministic for (seed, index), one of the two neighbours, unbiased on average */
static void stochastic_rounding(void **state)
{
    enum { N = 20000 };
    float *x = malloc(N * sizeof *x);
    uint16_t *r = malloc(N * sizeof *r), *again = malloc(N * sizeof *again);
    float v = 1.0f + 1.0f / 512; /* a quarter of the way from 1 to the next bf16, 1 + 1/128 */
    for (int i = 0; i < N; i++) x[i] = v;
    K->round_stochastic(KC, r, x, N, 7, 1000);
    K->round_stochastic(KC, again + 500, x + 500, N - 500, 7, 1500); /* the same elements from another start */
    assert_memory_equal(r + 500, again + 500, (N - 500) * sizeof *r);
    double mean = 0;
    int up = 0;
    for (int i = 0; i < N; i++) {
        float f = dt_f32_from_bf16(r[i]);
        assert_true(f == 1.0f || f == 1.0f + 1.0f / 128);
        up += f > 1.0f;
        mean += f;
    }
    mean /= N;
    print_message("# stochastic rounding: %d of %d up (expected a quarter), mean error %.2e\n", up, N, mean - v);
    assert_true(fabs((double)up / N - 0.25) < 0.02);
    assert_true(fabs(mean - v) < 2e-4);
    free(x), free(r), free(again);
}

/* sumsq_parts as the engine calls it for a piece: the squares of x[lo, lo + sn), the inf/nan check of
 * all of x[0, n) */
static double sumsq_range(const void *x, enum dt_dtype t, size_t n, size_t lo, size_t sn, size_t *bad)
{
    size_t esz = dt_dtype_size(t);
    const char *b = x;
    struct dt_norm_part parts[] = {{b + lo * esz, sn, true}, {b, lo, false}, {b + (lo + sn) * esz, n - lo - sn, false}};
    return K->sumsq_parts(KC, parts, 3, t, bad);
}

/* the reductions the optimizer and the loss scaler use, against closed forms */
static void reductions(void **state)
{
    size_t n = 100003; /* odd, so no vector width divides it */
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (i % 2) ? 3.0f : -4.0f;
    assert_true(K->sumsq(KC, x, DT_F32, n) == 50002.0 * 16 + 50001.0 * 9); /* 50002 even indices hold -4 */
    assert_int_equal(K->nonfinite(KC, x, DT_F32, n), 0);
    x[7] = INFINITY;
    x[n - 1] = NAN;
    x[500] = -INFINITY;
    assert_int_equal(K->nonfinite(KC, x, DT_F32, n), 3);
    /* both in one read: the squares of a middle part, the check of everything */
    size_t bad = 0;
    double part = sumsq_range(x, DT_F32, n, 1000, 50000, &bad);
    assert_int_equal(bad, 3);
    assert_true(part == 25000.0 * 16 + 25000.0 * 9); /* [1000, 51000): 25000 even indices */
    x[1500] = NAN;
    assert_true(isnan(sumsq_range(x, DT_F32, n, 1000, 50000, &bad)) && bad == 4);
    /* counted one by one, two in one block of the sum and one in another */
    x[1501] = INFINITY;
    x[40000] = -INFINITY;
    assert_true(isnan(sumsq_range(x, DT_F32, n, 1000, 50000, &bad)) && bad == 6);
    x[1500] = -4.0f, x[1501] = 3.0f, x[40000] = -4.0f;
    assert_true(isnan(sumsq_range(x, DT_F32, n, 0, n, &bad)) && bad == 3);
    uint16_t *h = malloc(n * sizeof *h);
    K->convert(KC, h, DT_F16, x, DT_F32, n);
    assert_int_equal(K->nonfinite(KC, h, DT_F16, n), 3);
    assert_true(sumsq_range(h, DT_F16, n, 8, 100, &bad) == 50.0 * 16 + 50.0 * 9 && bad == 3);
    /* a 16-bit inf and nan inside the summed part, in one block */
    h[2000] = 0x7c00, h[2001] = 0x7e00;
    assert_true(isnan(sumsq_range(h, DT_F16, n, 1000, 50000, &bad)) && bad == 5);
    K->convert(KC, h, DT_BF16, x, DT_F32, n);
    h[3000] = 0xff80; /* bf16 -inf */
    assert_true(isinf(sumsq_range(h, DT_BF16, n, 1000, 50000, &bad)) && bad == 4);
    /* many parts: the squares of those that count them added in the parts' order (2^54, then 250,
     * which rounds to 2^54 + 248, then 0.25, lost: backwards 2^54 + 252), every part checked */
    K->convert(KC, x, DT_F32, h, DT_BF16, n);
    x[3000] = 1.0f, x[7] = 134217728.0f, x[500] = 0.5f, x[n - 1] = 3.0f;
    struct dt_norm_part parts[] = {{x + 7, 1, true}, {x, 7, false}, {x + 10, 20, true}, {x + 3000, 1, false},
                                   {x + 500, 1, true}};
    double want = 18014398509481984.0 + 248;
    assert_true(K->sumsq_parts(KC, parts, 5, DT_F32, &bad) == want && bad == 0);
    x[3000] = NAN, x[8] = INFINITY;
    assert_true(K->sumsq_parts(KC, parts, 5, DT_F32, &bad) == want && bad == 1); /* x[8]: in no part */
    x[3] = -INFINITY;
    assert_true(K->sumsq_parts(KC, parts, 5, DT_F32, &bad) == want && bad == 2); /* checked, not summed */
    free(h);
    /* 4 bytes past 1 MiB: threads clearing whole pages each must still reach the last byte */
    size_t bytes = ((size_t)1 << 20) + 4;
    unsigned char *z = malloc(bytes);
    int threads = omp_get_max_threads();
    for (int nt = 1; nt <= 8; nt++) {
        memset(z, 0xff, bytes);
        omp_set_num_threads(nt);
        K->zero(KC, z, bytes);
        size_t left = 0;
        for (size_t i = 0; i < bytes; i++) left += z[i] != 0;
        assert_int_equal(left, 0);
    }
    omp_set_num_threads(threads);
    free(z);
    float out[3] = {1, 2, 3}, target[3] = {1, 0, 6}, d[3];
    assert_true(K->mse(KC, d, out, target, 0.5f, 3, NULL) == (0 + 4 + 9) / 3.0f);
    double acc = -1;
    struct dt_loss_sink sink = {&acc, 2};
    assert_true(K->mse(KC, d, out, target, 0.5f, 3, &sink) == 0.0f && acc == -1 + (double)((0 + 4 + 9) / 3.0f) / 2);
    assert_true(d[1] == 2.0f && d[2] == -3.0f); /* 2 (out - target) * 0.5 */
    free(x);
}

/* ---------------------------------------------------------------- 16-bit activations */
/* n fp32 values rounded to t, as 16-bit values, and those widened again */
static uint16_t *lp_of(const float *x, size_t n, enum dt_dtype t)
{
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = t == DT_BF16 ? dt_bf16_from_f32(x[i]) : dt_f16_from_f32(x[i]);
    return h;
}
static float *f32_of(const uint16_t *h, size_t n, enum dt_dtype t)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = t == DT_BF16 ? dt_f32_from_bf16(h[i]) : dt_f32_from_f16(h[i]);
    return x;
}
/* got (n values of type t) is ref rounded to t, bit for bit */
static void same_rounded(const char *what, enum dt_dtype t, const uint16_t *got, const float *ref, size_t n)
{
    uint16_t *want = lp_of(ref, n, t);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s in %s: element %zu is 0x%04x, the fp32 result rounded is 0x%04x", what, dt_dtype_str(t), i, got[i],
                     want[i]);
    free(want);
}

/* Each op that takes the activation type: on 16-bit operands it computes what its fp32 form computes
 * on the same values widened, and stores that rounded once (kernels.h's contract, the CUDA kernels'
 * reference); attention at T = 70 crosses a block edge. */
static void activations_16bit(void **state)
{
    enum { B = 2, T = 70, C = 24, NH = 3, BT = B * T };
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int ti = 0; ti < 2; ti++) {
        enum dt_dtype t = types[ti];
        float *x = rnd(BT * C, 1, 60), *w = rnd(C, 1, 61), *b = rnd(C, 1, 62), *res = rnd(BT * C, 1, 63);
        float *mean = calloc(BT, 4), *rstd = calloc(BT, 4), *ref = calloc(BT * 3 * C, 4);
        uint16_t *out = calloc(BT * 3 * C, 2);
        K->layernorm_forward(KC, out, t, mean, rstd, x, w, b, BT, C);
        K->layernorm_forward(KC, ref, DT_F32, mean, rstd, x, w, b, BT, C);
        same_rounded("layernorm_forward", t, out, ref, BT * C);
        /* backward adds into the fp32 residual gradient and rounds the sum into a 16-bit copy */
        float *dx = rnd(BT * C, 1, 66), *dw = calloc(C, 4), *db = calloc(C, 4);
        K->layernorm_backward(KC, dx, out, t, dw, db, res, x, w, mean, rstd, BT, C);
        same_rounded("layernorm_backward's 16-bit dinp", t, out, dx, BT * C);
        free(dx), free(dw), free(db);
        /* RMSNorm forward, and its backward's 16-bit copy of dinp */
        K->rmsnorm_forward(KC, out, t, rstd, x, w, 1e-5f, BT, C);
        K->rmsnorm_forward(KC, ref, DT_F32, rstd, x, w, 1e-5f, BT, C);
        same_rounded("rmsnorm_forward", t, out, ref, BT * C);
        float *rx = rnd(BT * C, 1, 67), *rw = calloc(C, 4);
        K->rmsnorm_backward(KC, rx, out, t, rw, res, x, w, rstd, BT, C);
        same_rounded("rmsnorm_backward's 16-bit dinp", t, out, rx, BT * C);
        free(rx), free(rw);
        /* SwiGLU on (BT, 2 x C/2) and rope on C / 8 heads of 8, as 16-bit values */
        uint16_t *sh = lp_of(x, BT * C, t);
        float *sx = f32_of(sh, BT * C, t), cs[T * 8];
        K->swiglu_forward(KC, out, sh, t, BT, C / 2);
        K->swiglu_forward(KC, ref, sx, DT_F32, BT, C / 2);
        same_rounded("swiglu_forward", t, out, ref, BT * C / 2);
        K->swiglu_backward(KC, out, sh, res, t, BT, C / 2);
        K->swiglu_backward(KC, ref, sx, res, DT_F32, BT, C / 2);
        same_rounded("swiglu_backward", t, out, ref, BT * C);
        dt_rope_table(cs, T, 8, 10000.0f);
        K->rope_forward(KC, sh, t, cs, B, T, 1, 1, 8); /* each row: 1 query, 1 key, 1 value head of 8 */
        K->rope_forward(KC, sx, DT_F32, cs, B, T, 1, 1, 8);
        same_rounded("rope_forward", t, sh, sx, BT * C);
        free(sh), free(sx);
        /* GELU forward and backward on 16-bit values */
        uint16_t *h = lp_of(x, BT * C, t);
        float *hx = f32_of(h, BT * C, t);
        K->gelu_forward(KC, out, h, t, BT * C);
        K->gelu_forward(KC, ref, hx, DT_F32, BT * C);
        same_rounded("gelu_forward", t, out, ref, BT * C);
        K->gelu_backward(KC, out, h, res, t, BT * C);
        K->gelu_backward(KC, ref, hx, res, DT_F32, BT * C);
        same_rounded("gelu_backward", t, out, ref, BT * C);
        /* the residual stream plus a 16-bit projection, in fp32 */
        float *sum = calloc(BT * C, 4);
        K->residual_forward(KC, sum, res, h, t, BT * C);
        K->residual_forward(KC, ref, res, hx, DT_F32, BT * C);
        assert_memory_equal(sum, ref, BT * C * sizeof *sum);
        /* attention forward and backward, multi-query: the widened copies of a narrower qkv */
        size_t nq = qkv_floats(B, T, C, NH, 1);
        float *qkv = rnd(nq, 1, 64), *lse = calloc(K->attention_saved(B, NH, T), 4);
        float *lse32 = calloc(K->attention_saved(B, NH, T), 4), *dout = rnd(BT * C, 1, 65);
        float *scratch = calloc(K->attention_scratch(B, T, C, NH, 1, t) + 1, 4);
        uint16_t *q = lp_of(qkv, nq, t), *o = calloc(BT * C, 2);
        float *qx = f32_of(q, nq, t);
        K->attention_forward(KC, o, lse, q, t, B, T, C, NH, 1);
        K->attention_forward(KC, ref, lse32, qx, DT_F32, B, T, C, NH, 1);
        same_rounded("attention_forward", t, o, ref, BT * C);
        assert_memory_equal(lse, lse32, K->attention_saved(B, NH, T) * sizeof *lse);
        float *ox = f32_of(o, BT * C, t);
        K->attention_backward(KC, out, dout, q, o, lse, scratch, t, B, T, C, NH, 1);
        K->attention_backward(KC, ref, dout, qx, ox, lse, scratch, DT_F32, B, T, C, NH, 1);
        same_rounded("attention_backward", t, out, ref, nq);
        free(x), free(w), free(b), free(res), free(mean), free(rstd), free(ref), free(out), free(h), free(hx);
        free(sum), free(qkv), free(lse), free(lse32), free(dout), free(scratch), free(q), free(o), free(qx), free(ox);
    }
}

DT_TESTS(T(matmul), T(layernorm), T(attention), T(attention_blocks), T(attention_plain), T(attention_threads), T(gelu), T(embedding), T(softmax_xent), T(mixed_types),
         T(stochastic_rounding), T(reductions), T(activations_16bit), T(rmsnorm), T(rope), T(rope_heads), T(swiglu))
