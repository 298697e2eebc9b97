/*
 * cuda_ops_embed_loss.c - test_cuda_ops.gpu's cases for the token table's rows (rows_forward,
 * rows_add and rows2) and the loss (softmax_xent and its 16-bit twin, xent2), against the CPU twins
 * (test_cuda_ops.c runs them).
 */
#include <math.h>
#include <string.h>
#include "cuda_check.h"
#include "cuda_ops_cases.h"

/*
 * A table's gradient into a range of it, the CPU's sums in the CPU's order, bit for bit, for a table
 * of each type. The cases: rows repeating within one stretch of the kernel's 256 entries; many
 * stretches (nrows 3000) over more table rows than the kernel's 1024 groups, so a block owns several
 * rows, with a token that repeats hundreds of times; a range starting and ending inside rows.
 */
void rows_add_cases(void)
{
    static const struct {
        int nrows, width, V, lo_row, lo_col, len_rows;
    } cases[] = {{132, 96, 160, 37, 5, 120}, {3000, 40, 2500, 3, 17, 2400}, {700, 300, 50, 0, 0, 50}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int nrows = cases[k].nrows, width = cases[k].width, V = cases[k].V;
        size_t lo = (size_t)cases[k].lo_row * width + (size_t)cases[k].lo_col, len = (size_t)cases[k].len_rows * width;
        int32_t *tok = malloc(nrows * sizeof *tok);
        for (int i = 0; i < nrows; i++) tok[i] = i % 5 == 0 ? 7 : (int32_t)(((unsigned)i * 7919u) % (unsigned)V);
        float *vals = randn((size_t)nrows * width, 22 + (unsigned)k), *dst = randn(len, 23 + (unsigned)k);
        float *gvals = dev(vals, (size_t)nrows * width * 4);
        int32_t *gtok = dev(tok, nrows * sizeof *tok);
        for (int ti = 0; ti < 3; ti++) {
            enum dt_dtype t = act_types[ti];
            size_t es = dt_dtype_size(t);
            void *d = typed(dst, len, t), *gd = dev(d, len * es);
            dt_kernels_cpu.rows_add(kc, d, t, lo, len, tok, vals, nrows, width);
            CK(gpu->rows_add(mm, gd, (int)t, lo, len, gtok, gvals, nrows, width));
            void *h = back_typed(gd, len, t);
            char what[128];
            snprintf(what, sizeof what, "rows_add %s, %d entries of width %d, repeated rows, bit for bit", dt_dtype_str(t),
                     nrows, width);
            report(memcmp(h, d, len * es) == 0, what, (double)(memcmp(h, d, len * es) != 0));
            free(h), free(d);
            gpu->free(gd);
        }
        gpu->free(gvals), gpu->free(gtok);
        free(tok), free(vals), free(dst);
    }
}

void embeddings_and_loss(void)
{
    int n = 4 * 33, C = 96, V = 300, v0 = 100, nv = 150;
    int32_t *tok = malloc(n * sizeof *tok);
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 7919) % V); /* repeats, and tokens outside the block */
    float *table = randn((size_t)nv * C, 20), *out = randn((size_t)n * C, 21);
    float *gtab = dev(table, (size_t)nv * C * 4), *gout = dev(out, (size_t)n * C * 4);
    int32_t *gtok = dev(tok, n * sizeof *tok);
    dt_kernels_cpu.rows_forward(kc, out, tok, table, DT_F32, v0, nv, n, C);
    CK(gpu->rows_forward(gout, gtok, gtab, (int)DT_F32, v0, nv, n, C));
    float *h = back(gout, (size_t)n * C);
    report(maxrel(h, out, (size_t)n * C) == 0, "rows_forward accumulates the block's rows", maxrel(h, out, (size_t)n * C));
    free(h);
    /* a 16-bit table (a strategy's working copy), widened as it is read */
    static const enum dt_dtype tt[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        uint16_t *t16 = malloc((size_t)nv * C * 2);
        dt_kernels_cpu.cast_to_lp(kc, t16, table, (size_t)nv * C, tt[k]);
        uint16_t *gt16 = dev(t16, (size_t)nv * C * 2);
        CK(gpu->to_device(gout, out, (size_t)n * C * 4)); /* the same start on both sides */
        dt_kernels_cpu.rows_forward(kc, out, tok, t16, tt[k], v0, nv, n, C);
        CK(gpu->rows_forward(gout, gtok, gt16, (int)tt[k], v0, nv, n, C));
        h = back(gout, (size_t)n * C);
        char what[80];
        snprintf(what, sizeof what, "rows_forward, %s table, bit for bit", dt_dtype_str(tt[k]));
        report(maxrel(h, out, (size_t)n * C) == 0, what, maxrel(h, out, (size_t)n * C));
        free(h), free(t16);
        gpu->free(gt16);
    }
    /* softmax + cross-entropy on block-major logits (vb < V), loss and gradient in place */
    int BT = 45, vb = 128;
    float *logits = randn((size_t)BT * V, 24), *losses = calloc(BT, 4);
    int32_t *y = malloc(BT * sizeof *y);
    for (int i = 0; i < BT; i++) y[i] = (int32_t)((i * 131) % V);
    float *glog = dev(logits, (size_t)BT * V * 4), *gloss = dev(NULL, BT * 4);
    int32_t *gy = dev(y, BT * sizeof *y);
    float mean_cpu = dt_kernels_cpu.softmax_xent(kc, losses, logits, y, 1.0f / BT, BT, V, vb, NULL), mean_gpu = 0;
    CK(gpu->to_device(glog, logits, (size_t)BT * V * 4)); /* again, its mean into a sink on the device */
    double *gacc = dev(NULL, sizeof(double)), acc = 0.25;
    CK(gpu->to_device(gacc, &acc, sizeof acc));
    CK(gpu->softmax_xent(gloss, glog, gy, 0.0f, BT, V, vb, NULL, gacc, 2.0));
    CK(gpu->softmax_xent(gloss, glog, gy, 1.0f / BT, BT, V, vb, &mean_gpu, NULL, 1.0));
    CK(gpu->to_host(&acc, gacc, sizeof acc));
    float *hl = back(gloss, BT), *hg = back(glog, (size_t)BT * V);
    double d = fmax(maxrel(hl, losses, BT), fabs((double)mean_gpu - mean_cpu));
    report(d < 1e-5, "softmax_xent: losses and their mean", d);
    /* the device's tree and the host's row order may differ in double's last bit, not in the float */
    d = fabs(acc - (0.25 + (double)mean_gpu / 2.0));
    report(d == 0, "softmax_xent: the mean into a sink on the device, as the host adds it", d);
    d = maxrel(hg, logits, (size_t)BT * V);
    report(d < 1e-6, "softmax_xent: the gradient written in place, block-major", d);
    free(hl), free(hg);
    void *all[] = {gtab, gout, gtok, glog, gloss, gy, gacc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(tok), free(table), free(out), free(logits), free(losses), free(y);
}

/*
 * The matmuls' tolerance, from the arithmetic: each output is a sum of K exact products (fp32 x
 * fp32 in fp32 is not exact, but its rounding is one of the K + 2 below; 16-bit x 16-bit is exact in
 * fp32) plus at most an initial value (accumulation) and a bias, added in fp32 in some order. Any
 * order of recursive or blocked summation, fused or not, is within gamma_{K+2} S ~ (K + 2) u S of the
 * exact sum, S the sum of the terms' magnitudes and u = 2^-24 (Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., section 3.1). The CPU rounds to nearest; tensor cores' fp32
 * accumulation may truncate (Fasi et al. 2021), up to twice that per add. So the two results lie
 * within 3 (K + 2) u S of each other. bound() returns S per output element, in double; mm_excess
 * the largest |got - ref| / (3 (K + 2) u S) (for 16-bit outputs after one ulp of the type is taken
 * off, lp_excess's argument): at most 1 when the GPU is right. A term missing or doubled is an
 * error of about |a b|, far above (K + 2) u S for the shapes here; TF32 (a 2^-11 relative error per
 * product) is caught by its own test below.
 */

/* 16-bit logits: V = 300 in blocks of 128 (the last block's rows at addresses of every parity: the
 * kernel's row in shared memory, read 16 bytes at a time from a boundary), and V = 120001, whose row
 * (234 KiB) fits no device's shared memory (the kernel's passes over global memory) */
static void loss_lp_at(int BT, int V, int vb)
{
    size_t n = (size_t)BT * V;
    int32_t *y = malloc(BT * sizeof *y);
    for (int i = 0; i < BT; i++) y[i] = (int32_t)((i * 131) % V);
    float *x = randn(n, 60), *losses = calloc(BT, 4);
    uint16_t *lg = malloc(n * 2), *got = malloc(n * 2);
    int32_t *gy = dev(y, BT * sizeof *y);
    float *gloss = dev(NULL, BT * 4);
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        enum dt_dtype t = types[k];
        char what[96];
        dt_kernels_cpu.cast_to_lp(kc, lg, x, n, t);
        uint16_t *glg = dev(lg, n * 2);
        float mean_cpu = dt_kernels_cpu.softmax_xent_lp(kc, losses, lg, y, 1.0f / BT, BT, V, vb, t, NULL), mean_gpu = 0;
        CK(gpu->softmax_xent_lp(gloss, glg, gy, 1.0f / BT, BT, V, vb, (int)t, &mean_gpu, NULL, 1.0));
        float *hl = back(gloss, BT);
        CK(gpu->to_host(got, glg, n * 2));
        double d = fmax(maxrel(hl, losses, BT), fabs((double)mean_gpu - mean_cpu));
        snprintf(what, sizeof what, "softmax_xent_lp %s, V = %d: losses and their mean", dt_dtype_str(t), V);
        report(d < 1e-5, what, d);
        int worst = 0;
        for (size_t i = 0; i < n; i++) worst = ulps(got[i], lg[i]) > worst ? ulps(got[i], lg[i]) : worst;
        /* the GPU's expf is not glibc's: a few fp32 ulp, at most one after rounding to 16 bits */
        snprintf(what, sizeof what, "softmax_xent_lp %s, V = %d: the gradient in place, block-major, within 1 ulp",
                 dt_dtype_str(t), V);
        report(worst <= 1, what, worst);
        free(hl);
        gpu->free(glg);
    }
    gpu->free(gy), gpu->free(gloss);
    free(y), free(x), free(losses), free(lg), free(got);
}

void loss_lp(void)
{
    loss_lp_at(45, 300, 128);
    loss_lp_at(3, 120001, 15040);
}
