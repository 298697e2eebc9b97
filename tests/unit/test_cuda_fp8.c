/*
 * test_cuda_fp8.c - the CUDA module's FP8 ops (#42: kernels/cuda/fp8.cu's quantisation and
 * fp8_update, matmul.c's cuBLASLt FP8 gemms) against the CPU reference (kernels/cpu/matmul_fp8.c),
 * under delayed and current scaling, with the gradient in E5M2 (the hybrid format) and in E4M3:
 *   - the codes, bit for bit, every operand and every copy the gemms read (the forward's inp and
 *     weight, the backward's dout and the transposed inp, weight and dout): read through a gemm whose
 *     other operand is an identity quantised to a power of two, so each output is one code times
 *     exact factors, on the two sides the same product whatever order or accumulator the gemm has;
 *   - the amaxes folded into the operands' records, and dbias (the column sums of the bf16-rounded
 *     dout in the CPU's order), bit for bit;
 *   - whole gemms bit for bit on small integers at power-of-two scales (every sum exact on both
 *     sides): the layouts, alphas, the bias epilogue, beta (accumulate or overwrite), fp32 and bf16
 *     outputs;
 *   - whole gemms on random data within a stated bound (fp8_bound);
 *   - fp8_update's histories, scales and saturation count bit for bit, fp8_supported's verdict and
 *     message, and the shapes the FP8 gemms refuse.
 * Speaks TAP; exits 77 where no module or GPU is (`make check-gpu` runs it on a GPU node). On a GPU
 * without FP8 tensor cores (before compute capability 8.9) only fp8_update and fp8_supported run.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"
#include "cuda_check.h"
#include "kernels/backend.h"
#include "kernels/cuda/plan.h"

/* One operand's scaling on both sides: the CPU's struct dt_fp8_q over host floats, the module's over
 * device copies of them. Kept in place once set (cpu points into it). */
struct scl {
    float scale, amax;
    float *gscale, *gamax;
    bool current;
    enum dt_fp8_fmt fmt;
    struct dt_fp8_q cpu;
    struct dt_cuda_fp8_q gpu;
};

/* record: the amax folded into amax0 (NULL amax otherwise, as the backward's inp and weight) */
static void scl_set(struct scl *s, enum dt_fp8_fmt f, bool current, float scale, bool record, float amax0)
{
    s->scale = scale, s->amax = amax0, s->current = current, s->fmt = f;
    s->gscale = dev(&s->scale, 4);
    s->gamax = dev(&s->amax, 4);
    s->cpu = (struct dt_fp8_q){&s->scale, record ? &s->amax : NULL, f, current};
    s->gpu = (struct dt_cuda_fp8_q){s->gscale, record ? s->gamax : NULL, (int)f, current ? 1 : 0};
}

static void scl_free(struct scl *s) { gpu->free(s->gscale), gpu->free(s->gamax); }

/* the GPU's recorded amax against the CPU's, bit for bit */
static bool scl_amax_same(const struct scl *s)
{
    float *h = back(s->gamax, 1);
    bool same = memcmp(h, &s->amax, 4) == 0;
    free(h);
    return same;
}

static const char *scaling_str(bool current) { return current ? "current" : "delayed"; }

/* fp32 or bf16 values equal (zeros of either sign alike), or both NaN: how many pairs are not */
static size_t mismatches(const void *a, const void *b, size_t n, enum dt_dtype t, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double x = t == DT_F32 ? ((const float *)a)[i] : wide16(((const uint16_t *)a)[i], t);
        double y = t == DT_F32 ? ((const float *)b)[i] : wide16(((const uint16_t *)b)[i], t);
        if (x == y || (isnan(x) && isnan(y))) continue;
        if (!bad++) *first = i;
    }
    return bad;
}

/* a TAP line for an exact comparison of n results of type t (GPU's got, CPU's ref) */
static void report_same(const void *got, const void *ref, size_t n, enum dt_dtype t, const char *what)
{
    size_t first = 0, bad = mismatches(got, ref, n, t, &first);
    report(bad == 0, what, (double)bad);
    if (bad) {
        double g = t == DT_F32 ? ((const float *)got)[first] : wide16(((const uint16_t *)got)[first], t);
        double r = t == DT_F32 ? ((const float *)ref)[first] : wide16(((const uint16_t *)ref)[first], t);
        printf("# %zu of %zu differ (the count is the \"max difference\" above); first at %zu: gpu %.9g, cpu %.9g\n",
               bad, n, first, g, r);
    }
}

/* the identity (N, N) of type t times v */
static void *identity(int N, float v, enum dt_dtype t)
{
    float *x = calloc((size_t)N * N, sizeof *x);
    for (int i = 0; i < N; i++) x[(size_t)i * N + i] = v;
    void *y = typed(x, (size_t)N * N, t);
    free(x);
    return y;
}

/* n values over the whole range the formats see: m 2^e, m in [1, 2), e in [-20, 12], either sign;
 * special: some of them infinite (delayed scaling: its amax becomes infinite, its codes saturate) */
static float *wide_values(size_t n, unsigned seed, bool special)
{
    float *x = randn(n, seed);
    srand(seed + 1000);
    for (size_t i = 0; i < n; i++) {
        float m = 1.0f + (float)rand() / (float)RAND_MAX;
        x[i] = (x[i] < 0 ? -m : m) * ldexpf(1.0f, rand() % 33 - 20);
        if (special && i % 97 == 5) x[i] = i % 2 ? INFINITY : -INFINITY;
    }
    return x;
}

/* a delayed scale that clips the largest values (about the top 3%: their codes saturate) of x */
static float clipping_scale(const float *x, size_t n, enum dt_fp8_fmt f)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) amax = fmaxf(amax, fabsf(x[i]));
    return dt_fp8_max(f) / amax * 8.0f;
}

/*
 * The codes of every operand and copy, read through gemms against identities (the file's opening
 * comment). An identity holds 3/4, delayed-scaled to the code 2 (E4M3) or 4 (the gradient's format),
 * so an output is alpha times a code times a power of two: one rounding, the same on both sides
 * whatever the gemm's order or where the CPU's sgemm applies alpha; and alpha, the inverses of a
 * scale that is no power of two and of the random operand's multiplied, is the CPU's only if it is
 * formed as the CPU forms it. The random operand is scaled as `current` says; its amax is recorded
 * from 1/4 (smaller: replaced) and compared.
 */
#define ID_VALUE 0.75f
#define ID_SCALE2 (2.0f / ID_VALUE) /* 0.75 x 2.6666667 rounds to 2 in fp32 */
#define ID_SCALE4 (4.0f / ID_VALUE)
static void codes(bool current, enum dt_fp8_fmt gfmt, enum dt_dtype wt, enum dt_dtype dt)
{
    enum { N = 80, M = 48 }; /* N: a tile and a part; every dimension a multiple of 16 */
    char what[192], cfg[96];
    snprintf(cfg, sizeof cfg, "%s scaling, gradient %s, weight %s, dout %s", scaling_str(current), dt_fp8_str(gfmt),
             dt_dtype_str(wt), dt_dtype_str(dt));
    const enum dt_fp8_fmt E4 = DT_FP8_E4M3;
    unsigned set = DT_SET_DINP | DT_SET_DPARAMS;

    /* forward, weight = I (OC = C = N): out(BT = M, N) = alpha . inp's codes . 2 */
    {
        float *x = wide_values((size_t)M * N, 1, !current);
        void *xb = typed(x, (size_t)M * N, DT_BF16), *w = identity(N, ID_VALUE, wt);
        struct scl qx, qw;
        scl_set(&qx, E4, current, clipping_scale(x, (size_t)M * N, E4), true, 0.25f);
        scl_set(&qw, E4, false, ID_SCALE2, true, 0.0f);
        size_t no = (size_t)M * N;
        float *out = malloc(no * 4), *gout = dev(NULL, no * 4);
        void *gx = dev(xb, no * 2), *gw = dev(w, (size_t)N * N * dt_dtype_size(wt));
        dt_kernels_cpu.matmul_forward_fp8(kc, out, DT_F32, xb, w, NULL, wt, M, N, N, &qx.cpu, &qw.cpu);
        CK(gpu->matmul_forward_fp8(mm, gout, (int)DT_F32, gx, gw, NULL, (int)wt, M, N, N, &qx.gpu, &qw.gpu));
        float *h = back(gout, no);
        snprintf(what, sizeof what, "fp8 codes, %s: the forward's inp, bit for bit", cfg);
        report_same(h, out, no, DT_F32, what);
        snprintf(what, sizeof what, "fp8 amax, %s: inp's folded, bit for bit (%g)", cfg, (double)qx.amax);
        report(scl_amax_same(&qx) && scl_amax_same(&qw), what, 0);
        free(x), free(xb), free(w), free(out), free(h);
        gpu->free(gout), gpu->free(gx), gpu->free(gw), scl_free(&qx), scl_free(&qw);
    }
    /* forward, inp = I (BT = C = N): out(N, OC = M) = alpha . 2 . the weight's codes, transposed */
    {
        float *w = wide_values((size_t)M * N, 2, false);
        void *wq = typed(w, (size_t)M * N, wt), *x = identity(N, ID_VALUE, DT_BF16);
        struct scl qx, qw;
        scl_set(&qx, E4, false, ID_SCALE2, true, 0.0f);
        scl_set(&qw, E4, current, clipping_scale(w, (size_t)M * N, E4), true, 0.25f);
        size_t no = (size_t)N * M;
        float *out = malloc(no * 4), *gout = dev(NULL, no * 4);
        void *gx = dev(x, (size_t)N * N * 2), *gw = dev(wq, (size_t)M * N * dt_dtype_size(wt));
        dt_kernels_cpu.matmul_forward_fp8(kc, out, DT_F32, x, wq, NULL, wt, N, N, M, &qx.cpu, &qw.cpu);
        CK(gpu->matmul_forward_fp8(mm, gout, (int)DT_F32, gx, gw, NULL, (int)wt, N, N, M, &qx.gpu, &qw.gpu));
        float *h = back(gout, no);
        snprintf(what, sizeof what, "fp8 codes, %s: the forward's weight, bit for bit", cfg);
        report_same(h, out, no, DT_F32, what);
        snprintf(what, sizeof what, "fp8 amax, %s: weight's folded, bit for bit (%g)", cfg, (double)qw.amax);
        report(scl_amax_same(&qw), what, 0);
        free(w), free(wq), free(x), free(out), free(h);
        gpu->free(gout), gpu->free(gx), gpu->free(gw), scl_free(&qx), scl_free(&qw);
    }
    /* backward, inp = weight = I (BT = C = OC = N): dinp = alpha . dout's codes . 2, dweight = alpha .
     * its transposed copy . 2 (both written: set); dbias from the same dout (an infinite dout's column
     * sums may be NaN: compared as values) */
    {
        size_t n = (size_t)N * N;
        float *dy = wide_values(n, 3, !current), *b0 = randn(N, 4);
        void *dyt = typed(dy, n, dt), *x = identity(N, ID_VALUE, DT_BF16), *w = identity(N, ID_VALUE, wt);
        struct scl qx, qw, qg;
        scl_set(&qx, E4, false, ID_SCALE2, false, 0.0f);
        scl_set(&qw, E4, false, ID_SCALE2, false, 0.0f);
        scl_set(&qg, gfmt, current, clipping_scale(dy, n, gfmt), true, 0.25f);
        float *dx = malloc(n * 4), *dw = malloc(n * 4), *db = malloc(N * 4);
        memcpy(db, b0, N * 4);
        void *gdy = dev(dyt, n * dt_dtype_size(dt)), *gx = dev(x, n * 2), *gw = dev(w, n * dt_dtype_size(wt));
        float *gdx = dev(NULL, n * 4), *gdw = dev(NULL, n * 4), *gdb = dev(b0, N * 4);
        dt_kernels_cpu.matmul_backward_fp8(kc, dx, dw, db, dyt, dt, x, w, wt, N, N, N, &qx.cpu, &qw.cpu, &qg.cpu, set);
        CK(gpu->matmul_backward_fp8(mm, gdx, gdw, gdb, gdy, (int)dt, gx, gw, (int)wt, N, N, N, &qx.gpu, &qw.gpu,
                                    &qg.gpu, set));
        float *hx = back(gdx, n), *hw = back(gdw, n), *hb = back(gdb, N);
        snprintf(what, sizeof what, "fp8 codes, %s: the backward's dout, bit for bit", cfg);
        report_same(hx, dx, n, DT_F32, what);
        snprintf(what, sizeof what, "fp8 codes, %s: the backward's dout transposed, bit for bit", cfg);
        report_same(hw, dw, n, DT_F32, what);
        snprintf(what, sizeof what, "fp8 dbias, %s: the bf16-rounded dout's column sums, bit for bit", cfg);
        report_same(hb, db, N, DT_F32, what);
        snprintf(what, sizeof what, "fp8 amax, %s: dout's folded, bit for bit (%g)", cfg, (double)qg.amax);
        report(scl_amax_same(&qg), what, 0);
        free(dy), free(b0), free(dyt), free(x), free(w), free(dx), free(dw), free(db), free(hx), free(hw), free(hb);
        gpu->free(gdy), gpu->free(gx), gpu->free(gw), gpu->free(gdx), gpu->free(gdw), gpu->free(gdb);
        scl_free(&qx), scl_free(&qw), scl_free(&qg);
    }
    /* backward, dout = I (BT = OC = N, C = M): dinp = alpha . 4 . the weight's transposed codes,
     * dweight = alpha . 4 . inp's transposed codes */
    {
        size_t nx = (size_t)N * M;
        float *x = wide_values(nx, 5, false), *w = wide_values(nx, 6, false);
        void *xb = typed(x, nx, DT_BF16), *wq = typed(w, nx, wt), *dy = identity(N, ID_VALUE, dt);
        struct scl qx, qw, qg;
        scl_set(&qx, E4, current, clipping_scale(x, nx, E4), false, 0.0f);
        scl_set(&qw, E4, current, clipping_scale(w, nx, E4), false, 0.0f);
        scl_set(&qg, gfmt, false, ID_SCALE4, true, 0.0f);
        float *dx = calloc(nx, 4), *dw = calloc(nx, 4);
        void *gdy = dev(dy, (size_t)N * N * dt_dtype_size(dt)), *gx = dev(xb, nx * 2);
        void *gw = dev(wq, nx * dt_dtype_size(wt));
        float *gdx = dev(NULL, nx * 4), *gdw = dev(NULL, nx * 4);
        dt_kernels_cpu.matmul_backward_fp8(kc, dx, dw, NULL, dy, dt, xb, wq, wt, N, M, N, &qx.cpu, &qw.cpu, &qg.cpu,
                                           set);
        CK(gpu->matmul_backward_fp8(mm, gdx, gdw, NULL, gdy, (int)dt, gx, gw, (int)wt, N, M, N, &qx.gpu, &qw.gpu,
                                    &qg.gpu, set));
        float *hx = back(gdx, nx), *hw = back(gdw, nx);
        snprintf(what, sizeof what, "fp8 codes, %s: the backward's weight transposed, bit for bit", cfg);
        report_same(hx, dx, nx, DT_F32, what);
        snprintf(what, sizeof what, "fp8 codes, %s: the backward's inp transposed, bit for bit", cfg);
        report_same(hw, dw, nx, DT_F32, what);
        free(x), free(w), free(xb), free(wq), free(dy), free(dx), free(dw), free(hx), free(hw);
        gpu->free(gdy), gpu->free(gx), gpu->free(gw), gpu->free(gdx), gpu->free(gdw);
        scl_free(&qx), scl_free(&qw), scl_free(&qg);
    }
}

/* n small integers in [-3, 3] */
static float *small_ints(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    srand(seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(rand() % 7 - 3);
    return x;
}

/*
 * Whole gemms where nothing rounds: operands small integers at scale 2 (codes up to 6, exact in
 * either format), so products are at most 36, sums over K <= 64 below 2^12 (exact in fp32, and in the
 * tensor cores' narrower partial sums), alpha 1/4; integer bias and initial gradients. Both sides then
 * hold the exact values: bit for bit, fp32 and bf16 out (one rounding of the same value), the bias
 * epilogue, beta 1 (accumulate) and 0 (overwrite).
 */
static void exact(enum dt_fp8_fmt gfmt, enum dt_dtype wt, enum dt_dtype dt)
{
    enum { BT = 64, C = 48, OC = 32 };
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC;
    char what[192], cfg[96];
    snprintf(cfg, sizeof cfg, "%dx%dx%d, gradient %s, weight %s, dout %s", BT, C, OC, dt_fp8_str(gfmt),
             dt_dtype_str(wt), dt_dtype_str(dt));
    float *x = small_ints(nx, 10), *w = small_ints(nw, 11), *b = small_ints(OC, 12), *dy = small_ints(ny, 13);
    float *dx0 = small_ints(nx, 14), *dw0 = small_ints(nw, 15), *db0 = small_ints(OC, 16);
    void *xb = typed(x, nx, DT_BF16), *wq = typed(w, nw, wt), *bq = typed(b, OC, wt), *dyt = typed(dy, ny, dt);
    void *gx = dev(xb, nx * 2), *gw = dev(wq, nw * dt_dtype_size(wt)), *gb = dev(bq, OC * dt_dtype_size(wt));
    void *gdy = dev(dyt, ny * dt_dtype_size(dt));
    struct scl qx, qw, qg;
    scl_set(&qx, DT_FP8_E4M3, false, 2.0f, true, 0.0f);
    scl_set(&qw, DT_FP8_E4M3, false, 2.0f, true, 0.0f);
    scl_set(&qg, gfmt, false, 2.0f, true, 0.0f);
    for (int o = 0; o < 2; o++) {
        enum dt_dtype ot = o ? DT_BF16 : DT_F32;
        size_t os = dt_dtype_size(ot);
        void *out = malloc(ny * os), *gout = dev(NULL, ny * os);
        dt_kernels_cpu.matmul_forward_fp8(kc, out, ot, xb, wq, bq, wt, BT, C, OC, &qx.cpu, &qw.cpu);
        CK(gpu->matmul_forward_fp8(mm, gout, (int)ot, gx, gw, gb, (int)wt, BT, C, OC, &qx.gpu, &qw.gpu));
        void *h = back_typed(gout, ny, ot);
        snprintf(what, sizeof what, "fp8 forward on integers %s, bias, out %s: bit for bit", cfg, dt_dtype_str(ot));
        report_same(h, out, ny, ot, what);
        free(out), free(h), gpu->free(gout);
    }
    for (unsigned set = 0; set <= (DT_SET_DINP | DT_SET_DPARAMS); set += DT_SET_DINP | DT_SET_DPARAMS) {
        float *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(OC * 4);
        memcpy(dx, dx0, nx * 4), memcpy(dw, dw0, nw * 4), memcpy(db, db0, OC * 4);
        float *gdx = dev(dx0, nx * 4), *gdw = dev(dw0, nw * 4), *gdb = dev(db0, OC * 4);
        dt_kernels_cpu.matmul_backward_fp8(kc, dx, dw, db, dyt, dt, xb, wq, wt, BT, C, OC, &qx.cpu, &qw.cpu, &qg.cpu,
                                           set);
        CK(gpu->matmul_backward_fp8(mm, gdx, gdw, gdb, gdy, (int)dt, gx, gw, (int)wt, BT, C, OC, &qx.gpu, &qw.gpu,
                                    &qg.gpu, set));
        float *hx = back(gdx, nx), *hw = back(gdw, nw), *hb = back(gdb, OC);
        const char *how = set ? "overwritten" : "accumulated";
        snprintf(what, sizeof what, "fp8 backward on integers %s: dinp %s, bit for bit", cfg, how);
        report_same(hx, dx, nx, DT_F32, what);
        snprintf(what, sizeof what, "fp8 backward on integers %s: dweight %s, bit for bit", cfg, how);
        report_same(hw, dw, nw, DT_F32, what);
        snprintf(what, sizeof what, "fp8 backward on integers %s: dbias %s, bit for bit", cfg, how);
        report_same(hb, db, OC, DT_F32, what);
        free(dx), free(dw), free(db), free(hx), free(hw), free(hb);
        gpu->free(gdx), gpu->free(gdw), gpu->free(gdb);
    }
    report(scl_amax_same(&qx) && scl_amax_same(&qw) && scl_amax_same(&qg),
           "fp8 amax on integers: inp's, weight's and dout's folded by forward and backward, bit for bit", 0);
    free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0), free(xb), free(wq), free(bq), free(dyt);
    gpu->free(gx), gpu->free(gw), gpu->free(gb), gpu->free(gdy);
    scl_free(&qx), scl_free(&qw), scl_free(&qg);
}

/* ---- random data, within a bound */

/* x (n values of type t) as the FP8 gemms read it, the CPU reference's quantise: rounded to bf16,
 * times the scale, quantised, back in fp32; returns the scale's inverse */
static float dequantised(float *q, const void *x, enum dt_dtype t, size_t n, const struct scl *s)
{
    dt_kernels_cpu.convert(kc, q, DT_F32, x, t, n);
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        q[i] = dt_f32_from_bf16(dt_bf16_from_f32(q[i]));
        amax = fmaxf(amax, fabsf(q[i]));
    }
    float sc = s->current ? dt_fp8_scale(amax, 1.0f, s->fmt, 0.0f) : s->scale;
    for (size_t i = 0; i < n; i++) q[i] = dt_f32_from_fp8(dt_fp8_from_f32(q[i] * sc, s->fmt), s->fmt);
    return 1.0f / sc;
}

/*
 * The bound: the two sides multiply the same codes (checked above), so they differ only in how the
 * sums are added. The CPU adds in fp32 (the fp32 matmuls' 3 (K + 2) u S, cuda_ops_matmul.c); the
 * tensor cores add each k-block of 32 FP8 products with a narrower accumulator (about 14 bits kept:
 * DeepSeek-V3's report, section 3.3.2, measured on H800), each block's sum off by up to 32 of its
 * largest terms' 2^-13, before cuBLASLt promotes it into fp32 (FAST_ACCUM off): at most 2^-8 S more.
 * So |gpu - cpu| <= (2^-8 + 3 (K + 2) u) S, S the sum of the terms' magnitudes (alpha |a b|, the
 * initial value, the bias), plus one ulp of a bf16 out. The TAP line reports the largest
 * |gpu - cpu| / S too, so a GPU run shows how much of the allowance the hardware uses.
 */
#define FP8_ACC (1.0 / 256.0)

/* S(r, c) = |alpha| sum_k |A(r, k) B(c, k)| + |init(r, c)| + |bias(c)|, A (R, K) and B (Cn, K) with
 * strides (sa_r, sa_k) and (sb_c, sb_k); init and bias may be NULL */
static double *terms(const float *A, size_t sa_r, size_t sa_k, const float *B, size_t sb_c, size_t sb_k, float alpha,
                     const float *init, const float *bias, int R, int Cn, int K)
{
    double *S = malloc((size_t)R * Cn * sizeof *S);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < Cn; c++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += fabs((double)A[r * sa_r + k * sa_k] * B[c * sb_c + k * sb_k]);
            S[(size_t)r * Cn + c] = s * fabs((double)alpha) + (init ? fabs(init[(size_t)r * Cn + c]) : 0) +
                                    (bias ? fabs(bias[c]) : 0);
        }
    return S;
}

/* the largest |got - ref| (less one ulp of a bf16 result) over the bound; *rel the largest over S */
static double fp8_excess(const void *got, const void *ref, const double *S, size_t n, int K, enum dt_dtype t,
                         double *rel)
{
    double m = 0;
    *rel = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fmax(0.0, off_less_ulp(got, ref, i, t)), x = d / ((FP8_ACC + 3.0 * (K + 2) * U32) * S[i] + 1e-30);
        if (!(x <= m)) m = x; /* a NaN counts as a failure */
        if (!(d / (S[i] + 1e-30) <= *rel)) *rel = d / (S[i] + 1e-30);
    }
    return m;
}

/* One shape on random data (values about 1), both scalings' scales as a run would have them. */
static void random_case(int BT, int C, int OC, bool current, enum dt_fp8_fmt gfmt, enum dt_dtype wt, enum dt_dtype dt,
                        unsigned set)
{
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC;
    char what[224], cfg[128];
    snprintf(cfg, sizeof cfg, "%dx%dx%d, %s scaling, gradient %s, weight %s, dout %s", BT, C, OC,
             scaling_str(current), dt_fp8_str(gfmt), dt_dtype_str(wt), dt_dtype_str(dt));
    float *x = randn(nx, 20), *w = randn(nw, 21), *b = randn(OC, 22), *dy = randn(ny, 23);
    float *dx0 = randn(nx, 24), *dw0 = randn(nw, 25), *db0 = randn(OC, 26);
    for (size_t i = 0; i < nw; i++) w[i] *= 0.02f; /* a weight's scale, far from the activations' */
    for (size_t i = 0; i < ny; i++) dy[i] *= 1e-3f;
    void *xb = typed(x, nx, DT_BF16), *wq = typed(w, nw, wt), *bq = typed(b, OC, wt), *dyt = typed(dy, ny, dt);
    void *gx = dev(xb, nx * 2), *gw = dev(wq, nw * dt_dtype_size(wt)), *gb = dev(bq, OC * dt_dtype_size(wt));
    void *gdy = dev(dyt, ny * dt_dtype_size(dt));
    struct scl qx, qw, qg;
    /* delayed: scales from a previous step's amax a little below this one's (a few codes clip) */
    scl_set(&qx, DT_FP8_E4M3, current, 448.0f / 2.9f, true, 0.0f);
    scl_set(&qw, DT_FP8_E4M3, current, 448.0f / 0.058f, true, 0.0f);
    scl_set(&qg, gfmt, current, dt_fp8_max(gfmt) / 2.9e-3f, true, 0.0f);
    float *xq = malloc(nx * 4), *wqq = malloc(nw * 4), *dyq = malloc(ny * 4), *br = malloc(OC * 4);
    float ix = dequantised(xq, xb, DT_BF16, nx, &qx), iw = dequantised(wqq, wq, wt, nw, &qw);
    float ig = dequantised(dyq, dyt, dt, ny, &qg);
    dt_kernels_cpu.convert(kc, br, DT_F32, bq, wt, OC);
    for (int i = 0; i < OC; i++) br[i] = dt_f32_from_bf16(dt_bf16_from_f32(br[i]));

    double rel;
    for (int o = 0; o < 2; o++) {
        enum dt_dtype ot = o ? DT_BF16 : DT_F32;
        size_t os = dt_dtype_size(ot);
        void *out = malloc(ny * os), *gout = dev(NULL, ny * os);
        dt_kernels_cpu.matmul_forward_fp8(kc, out, ot, xb, wq, bq, wt, BT, C, OC, &qx.cpu, &qw.cpu);
        CK(gpu->matmul_forward_fp8(mm, gout, (int)ot, gx, gw, gb, (int)wt, BT, C, OC, &qx.gpu, &qw.gpu));
        void *h = back_typed(gout, ny, ot);
        double *S = terms(xq, C, 1, wqq, C, 1, ix * iw, NULL, br, BT, OC, C);
        double d = fp8_excess(h, out, S, ny, C, ot, &rel);
        snprintf(what, sizeof what, "fp8 forward %s, bias, out %s: within (2^-8 + 3 (K+2) u) S (|diff|/S %.3g)", cfg,
                 dt_dtype_str(ot), rel);
        report(d <= 1.0, what, d);
        free(S), free(out), free(h), gpu->free(gout);
    }
    report(scl_amax_same(&qx) && scl_amax_same(&qw), "fp8 forward on random data: amaxes folded, bit for bit", 0);

    float *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(OC * 4);
    memcpy(dx, dx0, nx * 4), memcpy(dw, dw0, nw * 4), memcpy(db, db0, OC * 4);
    float *gdx = dev(dx0, nx * 4), *gdw = dev(dw0, nw * 4), *gdb = dev(db0, OC * 4);
    /* the backward's inp and weight at the forward's scales, their amax not recorded again */
    qx.cpu.amax = NULL, qw.cpu.amax = NULL, qx.gpu.amax = NULL, qw.gpu.amax = NULL;
    dt_kernels_cpu.matmul_backward_fp8(kc, dx, dw, db, dyt, dt, xb, wq, wt, BT, C, OC, &qx.cpu, &qw.cpu, &qg.cpu, set);
    CK(gpu->matmul_backward_fp8(mm, gdx, gdw, gdb, gdy, (int)dt, gx, gw, (int)wt, BT, C, OC, &qx.gpu, &qw.gpu,
                                &qg.gpu, set));
    float *hx = back(gdx, nx), *hw = back(gdw, nw), *hb = back(gdb, OC);
    /* dinp(BT, C) = dout(BT, OC) . weight(OC, C): K = OC; dweight(OC, C) = dout^T . inp: K = BT */
    double *Sx = terms(dyq, OC, 1, wqq, 1, C, ig * iw, set & DT_SET_DINP ? NULL : dx0, NULL, BT, C, OC);
    double *Sw = terms(dyq, 1, OC, xq, 1, C, ig * ix, set & DT_SET_DPARAMS ? NULL : dw0, NULL, OC, C, BT);
    double relw, d = fmax(fp8_excess(hx, dx, Sx, nx, OC, DT_F32, &rel), fp8_excess(hw, dw, Sw, nw, BT, DT_F32, &relw));
    snprintf(what, sizeof what, "fp8 backward %s: dinp, dweight %s within (2^-8 + 3 (K+2) u) S (|diff|/S %.3g, %.3g)",
             cfg, set ? "overwritten" : "accumulated", rel, relw);
    report(d <= 1.0, what, d);
    snprintf(what, sizeof what, "fp8 backward %s: dbias, the bf16-rounded dout's column sums, bit for bit", cfg);
    report(memcmp(hb, db, OC * 4) == 0, what, maxrel(hb, db, OC));
    report(scl_amax_same(&qg), "fp8 backward on random data: dout's amax folded, bit for bit", 0);

    free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0), free(xb), free(wq), free(bq), free(dyt);
    free(xq), free(wqq), free(dyq), free(br), free(dx), free(dw), free(db), free(hx), free(hw), free(hb), free(Sx),
        free(Sw);
    gpu->free(gx), gpu->free(gw), gpu->free(gb), gpu->free(gdy), gpu->free(gdx), gpu->free(gdw), gpu->free(gdb);
    scl_free(&qx), scl_free(&qw), scl_free(&qg);
}

/* Shapes the FP8 gemms do not take fail with the module's own error, naming what they need, and
 * leave the output alone. */
static void refused_shapes(void)
{
    enum { BT = 40, C = 64, OC = 32 }; /* BT not a multiple of 16 */
    float *x = randn((size_t)BT * C, 30), *w = randn((size_t)OC * C, 31), *o = randn((size_t)BT * OC, 32);
    void *xb = typed(x, (size_t)BT * C, DT_BF16), *gx = dev(xb, (size_t)BT * C * 2), *gw = dev(w, (size_t)OC * C * 4);
    float *gout = dev(o, (size_t)BT * OC * 4);
    struct scl qx, qw;
    scl_set(&qx, DT_FP8_E4M3, true, 1.0f, true, 0.0f);
    scl_set(&qw, DT_FP8_E4M3, true, 1.0f, true, 0.0f);
    int e = gpu->matmul_forward_fp8(mm, gout, (int)DT_F32, gx, gw, NULL, (int)DT_F32, BT, C, OC, &qx.gpu, &qw.gpu);
    float *h = back(gout, (size_t)BT * OC);
    const char *msg = e ? gpu->error_string(e) : "";
    report(e == DT_CUDA_ERR_FP8_SHAPE && strstr(msg, "multiples of 16") && memcmp(h, o, (size_t)BT * OC * 4) == 0,
           "fp8 forward with BT 40: refused (DT_CUDA_ERR_FP8_SHAPE, saying multiples of 16), out untouched", e);
    printf("# %s\n", msg);
    /* an output 4 bytes past 16 (a slice of a buffer): refused too */
    e = gpu->matmul_forward_fp8(mm, gout + 1, (int)DT_F32, gx, gw, NULL, (int)DT_F32, 32, C, OC, &qx.gpu, &qw.gpu);
    report(e == DT_CUDA_ERR_FP8_SHAPE, "fp8 forward into an output off 16-byte boundaries: refused", e);
    free(x), free(w), free(o), free(xb), free(h);
    gpu->free(gx), gpu->free(gw), gpu->free(gout), scl_free(&qx), scl_free(&qw);
}

/*
 * fp8_update against the CPU's, bit for bit: 3 x 101 tensors (a thread each, past one warp), the
 * history 1, 4 and 16 steps long, most_recent and the history's max, margins 0 and 1, the gradient in
 * either format; amaxes of every magnitude with zeros, infinities and NaNs among them (the scale
 * kept), some large enough to saturate at their scales and overflow the quotient (the largest fp32).
 */
static void update_cases(void)
{
    enum { N = 303 };
    static const int lens[] = {1, 4, 16};
    char what[160];
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int variant = 0; variant < 8; variant++) {
            int len = lens[li], most_recent = variant & 1;
            float margin = variant & 2 ? 1.0f : 0.0f;
            enum dt_fp8_fmt gfmt = variant & 4 ? DT_FP8_E4M3 : DT_FP8_E5M2;
            size_t nh = (size_t)len * N;
            float *hist = wide_values(nh, 40 + (unsigned)variant, false), *scale = wide_values(N, 50, false);
            for (size_t i = 0; i < nh; i++) {
                hist[i] = fabsf(hist[i]);
                if (i % 29 == 3) hist[i] = 0.0f;
                if (i % 31 == 7) hist[i] = INFINITY;
                if (i % 37 == 11) hist[i] = NAN;
                if (i % 41 == 13) hist[i] = 1e-37f; /* near fp32's least normal: the quotient overflows */
            }
            for (int i = 0; i < N; i++) scale[i] = fabsf(scale[i]) * 64.0f;
            float sat = 2.0f;
            float *ghist = dev(hist, nh * 4), *gscale = dev(scale, N * 4), *gsat = dev(&sat, 4);
            dt_kernels_cpu.fp8_update(kc, hist, scale, N, len, most_recent, margin, gfmt, &sat);
            CK(gpu->fp8_update(ghist, gscale, N, len, most_recent, margin, (int)gfmt, gsat));
            float *hh = back(ghist, nh), *hs = back(gscale, N), *hsat = back(gsat, 1);
            bool same = memcmp(hh, hist, nh * 4) == 0 && memcmp(hs, scale, N * 4) == 0 && memcmp(hsat, &sat, 4) == 0;
            snprintf(what, sizeof what,
                     "fp8_update len %d, %s, margin %g, gradient %s: histories, scales, saturated (%g) bit for bit",
                     len, most_recent ? "most recent" : "history's max", (double)margin, dt_fp8_str(gfmt),
                     (double)sat);
            report(same, what, maxrel(hs, scale, N));
            free(hist), free(scale), free(hh), free(hs), free(hsat);
            gpu->free(ghist), gpu->free(gscale), gpu->free(gsat);
        }
}

/* kernels.h's fp8_supported through the table a rank on GPU 0 gets: DT_SUCCESS from compute
 * capability 8.9, else an error that names the GPU and its capability. Returns whether the GPU has FP8. */
static bool supported(void)
{
    const struct dt_cuda_module *m;
    const struct dt_kernels *t = NULL;
    struct dt_cuda_device d;
    char why[256] = "";
    struct dt_kctx *k = NULL;
    if (dt_cuda_module_get(&m) != DT_SUCCESS || m->device_info(0, &d, why, sizeof why) ||
        dt_kernels_choose(0, &t) != DT_SUCCESS || t->ctx_create(0, &k) != DT_SUCCESS) {
        printf("Bail out! cannot query GPU 0 or make the CUDA table's context: %s\n", why);
        exit(1);
    }
    bool fp8 = d.cc_major * 10 + d.cc_minor >= 89;
    dt_status_t st = t->fp8_supported(k);
    const char *msg = st == DT_SUCCESS ? "" : dt_error_msg();
    char what[384];
    if (fp8) {
        snprintf(what, sizeof what, "fp8_supported on %s (compute capability %d.%d): yes", d.name, d.cc_major,
                 d.cc_minor);
        report(st == DT_SUCCESS, what, 0);
    } else {
        snprintf(what, sizeof what, "fp8_supported on %s (compute capability %d.%d): no, the message names it",
                 d.name, d.cc_major, d.cc_minor);
        report(st == DT_ERR_CONFIG && strstr(msg, d.name) && strstr(msg, "8.9 or newer") &&
                   strstr(msg, "hint: use compute.precision: bf16-mixed"),
               what, 0);
        printf("# %s\n", msg);
    }
    t->ctx_destroy(k);
    return fp8;
}

int main(void)
{
    int rc = cuda_check_start();
    if (rc) return rc;
    bool fp8 = supported();
    update_cases();
    if (!fp8) {
        printf("ok %d - fp8 gemms # SKIP this GPU has no FP8 tensor cores\n", ++tap_n);
        return cuda_check_finish();
    }
    static const enum dt_fp8_fmt gfmts[] = {DT_FP8_E5M2, DT_FP8_E4M3};
    for (int g = 0; g < 2; g++)
        for (int current = 0; current < 2; current++) {
            codes(current, gfmts[g], DT_F32, DT_F32);
            codes(current, gfmts[g], DT_BF16, DT_BF16);
        }
    for (int g = 0; g < 2; g++) {
        exact(gfmts[g], DT_F32, DT_F32);
        exact(gfmts[g], DT_BF16, DT_BF16);
    }
    static const int shapes[][3] = {{128, 96, 64}, {64, 256, 48}, {256, 384, 128}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int g = 0; g < 2; g++)
            for (int current = 0; current < 2; current++)
                random_case(shapes[s][0], shapes[s][1], shapes[s][2], current, gfmts[g], s % 2 ? DT_BF16 : DT_F32,
                            s % 2 ? DT_F32 : DT_BF16, current ? DT_SET_DINP | DT_SET_DPARAMS : 0);
    /* colsum2 on trial (plan.h): dbias's bf16-rounded column sums a pack of channels a thread, the
     * same bits */
    gpu->set_tries(DT_CUDA_TRY_COLSUM2);
    report_prefix = "on trial (colsum2): ";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        random_case(shapes[s][0], shapes[s][1], shapes[s][2], 1, DT_FP8_E5M2, DT_BF16, DT_BF16,
                    DT_SET_DINP | DT_SET_DPARAMS);
    gpu->set_tries(0);
    report_prefix = "";
    refused_shapes();
    return cuda_check_finish();
}
