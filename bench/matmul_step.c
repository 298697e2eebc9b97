/*
 * matmul_step.c - the fp32 matmuls of one GPT training step, replayed alone
 * through dtrun's CPU matmul kernels: each layer's four linear layers and the
 * LM head a vocabulary block at a time (the model's own units, dt_gpt_units),
 * forward in the step's order and backward in reverse, every call on buffers
 * of its own. Set beside the matmul lines of events.wall_clock_breakdown, it
 * tells whether the step's matmuls run slower than the same calls run alone.
 * usage: bench/matmul_step [L C V T B [REPS]]   (defaults: the 124M shape, 12 768 50257 64 4, 6 reps)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kernels/cpu/cpu.h"
#include "model/gpt.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *filled(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) >> 22 & 1023) / 1024.0f - 0.5f;
    return p;
}

struct linear {
    int C, OC;
    float *w, *b, *inp, *out, *dinp, *dw, *db;
};

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    struct dt_gpt_config c = {12, 12, 768, 50257, 64, false, false, DT_F32, false};
    int B = 4, reps = 6;
    if (argc > 1) {
        if (argc < 6) {
            fprintf(stderr, "usage: matmul_step [L C V T B [REPS]]\n");
            return 2;
        }
        c.n_layer = atoi(argv[1]), c.n_embd = atoi(argv[2]), c.vocab_size = atoi(argv[3]);
        c.max_seq_len = atoi(argv[4]), B = atoi(argv[5]), reps = argc > 6 ? atoi(argv[6]) : reps;
        c.n_head = 1;
    }
    if (c.n_layer <= 0 || c.n_embd <= 0 || c.vocab_size <= 0 || c.max_seq_len <= 0 || B <= 0 || reps < 2) {
        fprintf(stderr, "matmul_step: L C V T B must be positive and REPS at least 2\n");
        return 2;
    }
    int BT = B * c.max_seq_len, C = c.n_embd, nunits, n = 0;
    struct dt_unit *units;
    if (dt_gpt_units(&c, &units, &nunits) != DT_SUCCESS) return 1;
    /* the model's units begin with the vocabulary blocks: their rows sum to V */
    int nvocab = 0;
    for (size_t rows = 0; rows < (size_t)c.vocab_size; nvocab++) rows += units[nvocab].numel / (size_t)C;
    struct linear *m = calloc((size_t)4 * c.n_layer + nvocab, sizeof *m);
    if (!m) return 1;
    for (int l = 0; l < c.n_layer; l++) {
        int shape[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}; /* qkv, attproj, fc, fcproj */
        for (int k = 0; k < 4; k++, n++) m[n].C = shape[k][0], m[n].OC = shape[k][1];
    }
    for (int u = 0; u < nvocab; u++, n++) m[n].C = C, m[n].OC = (int)(units[u].numel / (size_t)C);
    free(units);
    double flop = 0;
    for (int i = 0; i < n; i++) {
        struct linear *x = &m[i];
        bool bias = i < 4 * c.n_layer; /* the LM head has none */
        x->w = filled((size_t)x->OC * x->C), x->dw = filled((size_t)x->OC * x->C);
        x->inp = filled((size_t)BT * x->C), x->dinp = filled((size_t)BT * x->C), x->out = filled((size_t)BT * x->OC);
        x->b = bias ? filled(x->OC) : NULL, x->db = bias ? filled(x->OC) : NULL;
        if (!x->w || !x->dw || !x->inp || !x->dinp || !x->out || (bias && (!x->b || !x->db))) {
            fprintf(stderr, "matmul_step: out of memory for call %d of %d\n", i + 1, n);
            return 1;
        }
        flop += 2.0 * BT * x->C * x->OC;
    }
    dt_kernels_cpu.init();
    struct dt_kctx *kc;
    if (dt_kernels_cpu.ctx_create(-1, &kc) != DT_SUCCESS) return 1;
    double *fwd = malloc(reps * sizeof *fwd), *bwd = malloc(reps * sizeof *bwd);
    if (!fwd || !bwd) return 1;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < n; i++) dt_cpu_matmul_forward(kc, m[i].out, m[i].inp, m[i].w, m[i].b, BT, m[i].C, m[i].OC);
        double t1 = now();
        for (int i = n - 1; i >= 0; i--)
            dt_cpu_matmul_backward(kc, m[i].dinp, m[i].dw, m[i].db, m[i].out, m[i].inp, m[i].w, BT, m[i].C, m[i].OC,
                                   DT_SET_DINP | DT_SET_DPARAMS);
        fwd[r] = t1 - t0, bwd[r] = now() - t1;
    }
    /* the median of the reps after the first (warm-up) */
    qsort(fwd + 1, reps - 1, sizeof *fwd, cmp), qsort(bwd + 1, reps - 1, sizeof *bwd, cmp);
    double f = fwd[1 + (reps - 1) / 2], b = bwd[1 + (reps - 1) / 2];
    printf("L%d C%d V%d T%d B%d, %d calls a direction (%d vocabulary blocks), median of %d reps:\n", c.n_layer, C,
           c.vocab_size, c.max_seq_len, B, n, nvocab, reps - 1);
    printf("  matmul_forward  %9.3f ms  %6.1f GFLOP/s\n", f * 1e3, flop / f / 1e9);
    printf("  matmul_backward %9.3f ms  %6.1f GFLOP/s\n", b * 1e3, 2 * flop / b / 1e9);
    dt_kernels_cpu.ctx_destroy(kc);
    return 0;
}
