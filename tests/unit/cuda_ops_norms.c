/*
 * cuda_ops_norms.c - test_cuda_ops.gpu's cases for layernorm and the position embedding, and the
 * row blocks' partial sums on trial (colsum2), against the CPU twins (test_cuda_ops.c runs them).
 */
#include <math.h>
#include <string.h>
#include "core/half.h"
#include "cuda_check.h"
#include "cuda_ops_cases.h"
#include "kernels/cuda/plan.h"

/* B*T = 145 rows: two full blocks of 64 and a part, so the row blocks' order shows */
void layernorm_and_positions(int C)
{
    int B = 5, T = 29, BT = B * T;
    size_t n = (size_t)BT * C;
    char what[128];
    float *x = randn(n, 8), *w = randn(C, 9), *b = randn(C, 10), *dy = randn(n, 11);
    float *mean = calloc(BT, 4), *rstd = calloc(BT, 4);
    float *gx = dev(x, n * 4), *gw = dev(w, C * 4), *gb = dev(b, C * 4), *gdy = dev(dy, n * 4);
    float *gmean = dev(NULL, BT * 4), *grstd = dev(NULL, BT * 4);
    for (int k = 0; k < 3; k++) {
        enum dt_dtype t = act_types[k];
        void *cpu = malloc(n * dt_dtype_size(t)), *gout = dev(NULL, n * dt_dtype_size(t));
        dt_kernels_cpu.layernorm_forward(kc, cpu, t, mean, rstd, x, w, b, BT, C);
        CK(gpu->layernorm_forward(gout, (int)t, gmean, grstd, gx, gw, gb, BT, C));
        void *h = back_typed(gout, n, t);
        float *hm = back(gmean, BT), *hr = back(grstd, BT);
        double d = fmax(act_diff(h, cpu, n, t), fmax(maxrel(hm, mean, BT), maxrel(hr, rstd, BT)));
        snprintf(what, sizeof what, "layernorm_forward %s, C = %d: out, mean, rstd", dt_dtype_str(t), C);
        report(d < 1e-5, what, d);
        free(h), free(hm), free(hr), free(cpu);
        gpu->free(gout);
    }
    /* backward accumulates: start from values, so "=" in place of "+=" would show; both sides from
     * the CPU's mean and rstd */
    float *dx = randn(n, 13), *dw = randn(C, 14), *db = randn(C, 15);
    float *gdx = dev(dx, n * 4), *gdw = dev(dw, C * 4), *gdb = dev(db, C * 4);
    CK(gpu->to_device(gmean, mean, BT * 4));
    CK(gpu->to_device(grstd, rstd, BT * 4));
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    dt_kernels_cpu.layernorm_backward(kc, dx, NULL, DT_F32, dw, db, dy, x, w, mean, rstd, BT, C);
    CK(gpu->layernorm_backward(ctx, gdx, NULL, DT_F32, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    float *hx = back(gdx, n), *hw = back(gdw, C), *hb = back(gdb, C);
    /* dinp: sums over C in another order; dweight: the CPU's order, but nvcc and GCC may fuse the
     * product's last multiply with the add differently (an fp32 rounding per row, 145 rows) */
    double d = fmax(maxrel(hx, dx, n), maxrel(hw, dw, C));
    snprintf(what, sizeof what, "layernorm_backward, C = %d: dinp, dweight", C);
    report(d < 1e-4, what, d);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: dbias, row blocks in the CPU's order, bit for bit", C);
    report(memcmp(hb, db, C * 4) == 0, what, maxrel(hb, db, C));
    /* the same bits on a second run (no atomics) */
    float *hw1 = hw, *hb1 = hb;
    CK(gpu->to_device(gdw, dw, C * 4));
    CK(gpu->to_device(gdb, db, C * 4));
    CK(gpu->layernorm_backward(ctx, gdx, NULL, DT_F32, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    hw = back(gdw, C), hb = back(gdb, C);
    dt_kernels_cpu.layernorm_backward(kc, dx, NULL, DT_F32, dw, db, dy, x, w, mean, rstd, BT, C);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: a second pass adds the same sums again", C);
    report(memcmp(hb, db, C * 4) == 0 && maxrel(hw, dw, C) < 1e-4, what, maxrel(hw, dw, C));
    /* the residual stream's gradient rounded into a 16-bit copy in the same pass: the GPU's own sum */
    uint16_t *glp = dev(NULL, n * 2);
    CK(gpu->layernorm_backward(ctx, gdx, glp, (int)DT_BF16, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    float *hx2 = back(gdx, n);
    uint16_t *hl = back_typed(glp, n, DT_BF16);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += hl[i] != dt_bf16_from_f32(hx2[i]);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: the bf16 copy of dinp is its sum rounded", C);
    report(off == 0, what, (double)off);
    free(hx2), free(hl);
    gpu->free(glp);
    free(hx), free(hw), free(hb), free(hw1), free(hb1);
    gpu->ctx_destroy(ctx);
    float *wpe = randn((size_t)T * C, 12), *pos = calloc(n, 4), *dwpe = randn((size_t)T * C, 16);
    float *gwpe = dev(wpe, (size_t)T * C * 4), *gpos = dev(NULL, n * 4), *gdwpe = dev(dwpe, (size_t)T * C * 4);
    dt_kernels_cpu.position_forward(kc, pos, wpe, B, T, C);
    dt_kernels_cpu.position_backward(kc, dwpe, dy, B, T, C);
    CK(gpu->position_forward(gpos, gwpe, B, T, C));
    CK(gpu->position_backward(gdwpe, gdy, B, T, C));
    float *hp = back(gpos, n), *hd = back(gdwpe, (size_t)T * C);
    report(maxrel(hp, pos, n) == 0, "position_forward", maxrel(hp, pos, n));
    d = maxrel(hd, dwpe, (size_t)T * C);
    report(d == 0, "position_backward accumulates, batches in the CPU's order", d);
    free(hp), free(hd), free(wpe), free(pos), free(dwpe);
    void *all[] = {gx, gw, gb, gdy, gmean, grstd, gdx, gdw, gdb, gwpe, gpos, gdwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(b), free(dy), free(mean), free(rstd), free(dx), free(dw), free(db);
}

/* colsum2 (plan.h) against the kernels in use, bit for bit: layernorm's dweight and dbias, RMSNorm's
 * dweight and a bias's column sums (fp32, bf16 and fp16 douts; test_cuda_fp8.gpu the bf16-rounded
 * sums of fp8-mixed's dbias), at 200 rows (three blocks of 64 and a part) and widths the packs take
 * (768: 192 fp32 packs in three blocks of 64 threads, 96 16-bit ones in two, the second half idle;
 * 3072, GPT-2's fc: 12 blocks and 6) or leave to the kernels in use (772 for 16 bits) */
void row_sums_packed(void)
{
    int BT = 200, differ = 0;
    static const int widths[] = {768, 772, 3072};
    for (int wi = 0; wi < 3; wi++) {
        int C = widths[wi];
        size_t n = (size_t)BT * C;
        float *x = randn(n, 31), *w = randn(C, 32), *dy = randn(n, 33), *mean = randn(BT, 34), *rstd = randn(BT, 35);
        float *gx = dev(x, n * 4), *gw = dev(w, C * 4), *gdy = dev(dy, n * 4), *gmean = dev(mean, BT * 4);
        float *grstd = dev(rstd, BT * 4), *gdx = dev(NULL, n * 4), *gdw = dev(NULL, C * 4), *gdb = dev(NULL, C * 4);
        float *got[2][4];
        for (int trial = 0; trial < 2; trial++) {
            gpu->set_tries(trial ? DT_CUDA_TRY_COLSUM2 : 0);
            CK(gpu->memset(gdw, 0, C * 4));
            CK(gpu->memset(gdb, 0, C * 4));
            CK(gpu->layernorm_backward(mm, gdx, NULL, (int)DT_F32, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
            got[trial][0] = back(gdw, C), got[trial][1] = back(gdb, C);
            CK(gpu->memset(gdw, 0, C * 4));
            CK(gpu->rmsnorm_backward(mm, gdx, NULL, (int)DT_F32, gdw, gdy, gx, gw, grstd, BT, C));
            got[trial][2] = back(gdw, C);
            /* a bias's column sums: dout (BT, C) of each type, the matmul's own shapes small */
            float *sums = malloc(3 * C * 4);
            for (int k = 0; k < 3; k++) {
                enum dt_dtype t = act_types[k];
                size_t es = dt_dtype_size(t);
                void *h = typed(dy, n, t), *hi = typed(x, (size_t)BT * 16, t), *gd = dev(h, n * es);
                void *gi = dev(hi, (size_t)BT * 16 * es);
                float *gwt = dev(w, (size_t)16 * C * 4), *gdi = dev(NULL, (size_t)BT * 16 * 4);
                float *gdwt = dev(NULL, (size_t)16 * C * 4);
                CK(gpu->matmul_backward(mm, gdi, gdwt, gdb, gd, (int)t, gi, gwt, (int)DT_F32, BT, 16, C, (int)t,
                                        DT_SET_DINP | DT_SET_DPARAMS));
                float *hb = back(gdb, C);
                memcpy(sums + k * C, hb, C * 4);
                free(hb), free(h), free(hi);
                gpu->free(gd), gpu->free(gi), gpu->free(gwt), gpu->free(gdi), gpu->free(gdwt);
            }
            got[trial][3] = sums;
        }
        gpu->set_tries(0);
        for (int j = 0; j < 4; j++) {
            size_t m = j == 3 ? 3 * (size_t)C : (size_t)C;
            differ += memcmp(got[0][j], got[1][j], m * 4) != 0;
            free(got[0][j]), free(got[1][j]);
        }
        free(x), free(w), free(dy), free(mean), free(rstd);
        gpu->free(gx), gpu->free(gw), gpu->free(gdy), gpu->free(gmean), gpu->free(grstd), gpu->free(gdx);
        gpu->free(gdw), gpu->free(gdb);
    }
    report(differ == 0, "colsum2: layernorm's dweight and dbias, RMSNorm's dweight, column sums of fp32, bf16 and "
                        "fp16 douts at 200 rows and widths 768, 772 and 3072: the bits of the kernels in use", differ);
}
