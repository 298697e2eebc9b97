/*
 * matmul_lp_bench.c - one linear layer's forward and backward, fp32 (sgemm)
 * against bf16-mixed (16-bit operands through oneDNN's matmul primitive,
 * bf16 activations in and out, the fp32 weight rounded per call as a strategy without 16-bit
 * storage has it), on the GPT-2 124M shapes at B*T rows.
 * usage: bench/matmul_lp_bench [ROWS] [REPS]   (defaults 256 10)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kernels/cpu/cpu.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int BT = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 10;
    if (BT <= 0 || reps <= 0) {
        fprintf(stderr, "usage: matmul_lp_bench [ROWS] [REPS]: both positive\n");
        return 2;
    }
    static const struct { const char *name; int C, OC; } shapes[] = {
        {"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072}, {"fcproj", 3072, 768}, {"lm head", 768, 50257}};
    dt_kernels_cpu.init();
    struct dt_kctx *kc;
    if (dt_kernels_cpu.ctx_create(-1, &kc) != DT_SUCCESS) return 1;
    printf("%d rows; GFLOP/s of forward+backward (6 x rows x C x OC per rep), weight rounding included; this CPU's "
           "default bf16 path: %s\n", BT, dt_cpu_matmul_lp_path(kc, DT_BF16));
    printf("%-8s %6s %6s %10s %12s %12s\n", "layer", "C", "OC", "fp32", "bf16 oneDNN", "bf16 sgemm");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s].C, OC = shapes[s].OC;
        float *x = calloc((size_t)BT * C, 4), *w = calloc((size_t)OC * C, 4), *b = calloc(OC, 4);
        float *o = calloc((size_t)BT * OC, 4), *dx = calloc((size_t)BT * C, 4), *dw = calloc((size_t)OC * C, 4);
        float *db = calloc(OC, 4);
        uint16_t *xl = calloc((size_t)BT * C, 2), *ol = calloc((size_t)BT * OC, 2); /* bf16 activations */
        if (!x || !w || !b || !o || !dx || !dw || !db || !xl || !ol) {
            fprintf(stderr, "matmul_lp_bench: out of memory for the %s layer at %d rows\n", shapes[s].name, BT);
            return 1;
        }
        for (size_t i = 0; i < (size_t)OC * C; i++) w[i] = (float)(i % 7) * 0.01f;
        for (size_t i = 0; i < (size_t)BT * C; i++) x[i] = (float)(i % 5) * 0.1f;
        dt_cpu_cast_to_lp(kc, xl, x, (size_t)BT * C, DT_BF16);
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r < reps; r++)
            for (int lp = 0; lp < 3; lp++) {
                double t0 = now();
                if (lp) {
                    dt_cpu_bf16_gemm_select(kc, lp == 1);
                    dt_cpu_matmul_forward_lp(kc, ol, DT_BF16, xl, w, b, DT_F32, BT, C, OC, DT_BF16);
                    dt_cpu_matmul_backward_lp(kc, dx, dw, db, ol, DT_BF16, xl, w, DT_F32, BT, C, OC, DT_BF16,
                                              DT_SET_DINP | DT_SET_DPARAMS);
                } else {
                    dt_cpu_matmul_forward(kc, o, x, w, b, BT, C, OC);
                    dt_cpu_matmul_backward(kc, dx, dw, db, o, x, w, BT, C, OC, DT_SET_DINP | DT_SET_DPARAMS);
                }
                double t = now() - t0;
                if (t < best[lp]) best[lp] = t;
            }
        double flop = 6.0 * BT * C * OC;
        printf("%-8s %6d %6d %10.1f %12.1f %12.1f\n", shapes[s].name, C, OC, flop / best[0] / 1e9,
               flop / best[1] / 1e9, flop / best[2] / 1e9);
        free(x), free(w), free(b), free(o), free(dx), free(dw), free(db), free(xl), free(ol);
    }
    dt_kernels_cpu.ctx_destroy(kc);
    return 0;
}
