/*
 * cuda_ops_elementwise.c - test_cuda_ops.gpu's cases for the elementwise ops and the conversions:
 * GELU, the residual add, casts and rounding, SGD and AdamW per tensor, convert and accumulate
 * (convert2), narrowing and widening in place, against the CPU twins (test_cuda_ops.c runs them).
 */
#include <math.h>
#include <string.h>
#include "cuda_check.h"
#include "cuda_ops_cases.h"

/* GELU and the residual add on activations of each type; GELU's backward writes dinp */
void elementwise(void)
{
    size_t N = 100003;
    float *x = randn(N, 1), *y = randn(N, 2), *a = randn(N, 3), *res = calloc(N, 4);
    for (int k = 0; k < 3; k++) {
        enum dt_dtype t = act_types[k];
        size_t es = dt_dtype_size(t);
        char what[96];
        void *xt = typed(x, N, t), *yt = typed(y, N, t), *cpu = malloc(N * es);
        void *dx = dev(xt, N * es), *dyt = dev(yt, N * es), *dout = dev(NULL, N * es);
        float *dy32 = dev(y, N * 4), *da = dev(a, N * 4), *dres = dev(NULL, N * 4);
        /* from the buffers' start (16-byte packs, N odd: a tail), and one element in (element by element) */
        for (size_t o = 0; o < 2; o++) {
            const char *at = o ? ", one element past an alignment" : "";
            size_t n = N - o;
            void *xo = (char *)xt + o * es, *co = (char *)cpu + o * es, *go = (char *)dout + o * es;
            const void *gxo = (const char *)dx + o * es;
            dt_kernels_cpu.gelu_forward(kc, co, xo, t, n);
            CK(gpu->gelu_forward(go, gxo, (int)t, n));
            void *g = back_typed(go, n, t);
            double d = act_diff(g, co, n, t);
            snprintf(what, sizeof what, "gelu_forward %s%s", dt_dtype_str(t), at);
            report(d < 1e-5, what, d);
            free(g);
            /* written, not added: the buffer starts from other values on both sides */
            memcpy(cpu, yt, N * es);
            dt_kernels_cpu.gelu_backward(kc, co, xo, y + o, t, n);
            CK(gpu->to_device(dout, yt, N * es));
            CK(gpu->gelu_backward(go, gxo, dy32 + o, (int)t, n));
            g = back_typed(go, n, t);
            d = act_diff(g, co, n, t);
            snprintf(what, sizeof what, "gelu_backward %s writes dinp%s", dt_dtype_str(t), at);
            report(d < 1e-5, what, d);
            free(g);
        }
        /* one fp32 add of exactly widened values: the CPU's bits */
        dt_kernels_cpu.residual_forward(kc, res, a, yt, t, N);
        CK(gpu->residual_forward(dres, da, dyt, (int)t, N));
        float *h = back(dres, N);
        snprintf(what, sizeof what, "residual_forward fp32 + %s, bit for bit", dt_dtype_str(t));
        report(memcmp(h, res, N * 4) == 0, what, maxrel(h, res, N));
        free(h), free(xt), free(yt), free(cpu);
        gpu->free(dx), gpu->free(dyt), gpu->free(dout), gpu->free(dy32), gpu->free(da), gpu->free(dres);
    }
    /* refused before any launch: a type of no activation */
    int e1 = gpu->gelu_forward(NULL, NULL, 7, N), e2 = gpu->residual_forward(NULL, NULL, NULL, 7, N);
    report(e1 != 0 && e2 != 0, "gelu and residual refuse an unknown type", (double)(e1 == 0) + (e2 == 0));
    free(x), free(y), free(a), free(res);
}

void casts(void)
{
    size_t N = 65536 + 7;
    float *x = randn(N, 3);
    /* the edges too: every upper half-word (so every bf16 exponent and mantissa, infinities, NaNs,
     * subnormals) with a scrambled lower half, and exact ties (bf16: 0x8000; fp16: 0x1000) */
    for (size_t i = 0; i < 65536; i++) {
        uint32_t low = i % 3 == 0 ? 0x8000u : i % 3 == 1 ? 0x1000u : ((uint32_t)(i * 2654435761u) >> 17);
        uint32_t u = (uint32_t)i << 16 | low;
        memcpy(&x[i], &u, 4);
    }
    uint16_t *cpu = malloc(N * 2), *got = malloc(N * 2);
    float *dx = dev(x, N * 4);
    uint16_t *dh = dev(NULL, N * 2);
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        enum dt_dtype t = types[k];
        dt_kernels_cpu.cast_to_lp(kc, cpu, x, N, t);
        CK(gpu->cast_to_lp(dh, dx, N, (int)t));
        CK(gpu->synchronize());
        CK(gpu->to_host(got, dh, N * 2));
        size_t diff = 0;
        for (size_t i = 0; i < N; i++) diff += cpu[i] != got[i];
        char what[64];
        snprintf(what, sizeof what, "cast_to_lp %s, bit for bit", dt_dtype_str(t));
        report(diff == 0, what, (double)diff);
        float *wide = malloc(N * 4);
        dt_kernels_cpu.cast_from_lp(kc, wide, cpu, N, t);
        float *dw = dev(NULL, N * 4);
        CK(gpu->cast_from_lp(dw, dh, N, (int)t));
        float *gw = back(dw, N);
        diff = 0;
        for (size_t i = 0; i < N; i++) diff += memcmp(&wide[i], &gw[i], 4) != 0;
        snprintf(what, sizeof what, "cast_from_lp %s, bit for bit", dt_dtype_str(t));
        report(diff == 0, what, (double)diff);
        dt_kernels_cpu.round_lp(kc, wide, x, N, t);
        CK(gpu->round_lp(dw, dx, N, (int)t));
        free(gw);
        gw = back(dw, N);
        diff = 0;
        for (size_t i = 0; i < N; i++) diff += memcmp(&wide[i], &gw[i], 4) != 0;
        snprintf(what, sizeof what, "round_lp %s, bit for bit", dt_dtype_str(t));
        report(diff == 0, what, (double)diff);
        free(gw), free(wide);
        gpu->free(dw);
    }
    gpu->free(dx), gpu->free(dh);
    free(x), free(cpu), free(got);
}

void updates_and_conversions(void)
{
    size_t N = 40001;
    float *p = randn(N, 40), *g = randn(N, 41), *b = randn(N, 42);
    float *gp = dev(p, N * 4), *gg = dev(g, N * 4), *gbuf = dev(b, N * 4);
    dt_kernels_cpu.sgd(kc, p, g, DT_F32, 0.5f, b, N, 0.1f, 0.9f, 1, 0.01f, 0, NULL, DT_F32);
    CK(gpu->sgd(gp, gg, (int)DT_F32, 0.5f, gbuf, N, 0.1f, 0.9f, 1, 0.01f, 0, NULL, (int)DT_F32));
    float *hp = back(gp, N), *hb = back(gbuf, N);
    double d = fmax(maxrel(hp, p, N), maxrel(hb, b, N));
    report(d < 1e-6, "sgd, nesterov momentum and weight decay", d);
    free(hp), free(hb);
    /* an fp16 gradient, the fp16 working copy written in the same pass, from the CPU's state */
    CK(gpu->to_device(gp, p, N * 4));
    CK(gpu->to_device(gbuf, b, N * 4));
    uint16_t *g16 = malloc(N * 2), *plp = malloc(N * 2), *gplp = malloc(N * 2), *own = malloc(N * 2);
    dt_kernels_cpu.cast_to_lp(kc, g16, g, N, DT_F16);
    uint16_t *dg16 = dev(g16, N * 2), *dplp = dev(NULL, N * 2);
    dt_kernels_cpu.sgd(kc, p, g16, DT_F16, 0.5f, b, N, 0.1f, 0.9f, 0, 0.01f, 0, plp, DT_F16);
    CK(gpu->sgd(gp, dg16, (int)DT_F16, 0.5f, gbuf, N, 0.1f, 0.9f, 0, 0.01f, 0, dplp, (int)DT_F16));
    hp = back(gp, N), hb = back(gbuf, N);
    CK(gpu->to_host(gplp, dplp, N * 2));
    d = fmax(maxrel(hp, p, N), maxrel(hb, b, N));
    report(d < 1e-6, "sgd, fp16 gradient: parameters and momentum", d);
    dt_kernels_cpu.cast_to_lp(kc, own, hp, N, DT_F16);
    int worst = max_ulps(gplp, plp, N);
    report(memcmp(own, gplp, N * 2) == 0 && worst <= 1, "sgd, fp16 copy written in the same pass", worst);
    free(hp), free(hb), free(g16), free(plp), free(gplp), free(own);
    gpu->free(dg16), gpu->free(dplp);
    uint16_t *r = malloc(N * 2), *gr16 = malloc(N * 2), *gr = dev(NULL, N * 2);
    dt_kernels_cpu.round_stochastic(kc, r, g, N, 7, 1000);
    CK(gpu->round_stochastic(gr, gg, N, 7, 1000));
    CK(gpu->synchronize());
    CK(gpu->to_host(gr16, gr, N * 2));
    report(memcmp(r, gr16, N * 2) == 0, "round_stochastic: the same noise for the same (seed, index)",
           (double)(memcmp(r, gr16, N * 2) != 0));
    /* every pair of float types, converted and accumulated */
    static const enum dt_dtype t[] = {DT_F32, DT_BF16, DT_F16};
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) {
            size_t sa = dt_dtype_size(t[a]), sc = dt_dtype_size(t[c]);
            void *src = malloc(N * sa), *dst = malloc(N * sc), *got = malloc(N * sc);
            dt_kernels_cpu.convert(kc, src, t[a], g, DT_F32, N);
            dt_kernels_cpu.convert(kc, dst, t[c], p, DT_F32, N);
            void *gsrc = dev(src, N * sa), *gdst = dev(dst, N * sc);
            dt_kernels_cpu.accumulate(kc, dst, t[c], src, t[a], N);
            CK(gpu->convert(gdst, (int)t[c], gsrc, (int)t[a], N, 1));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, gdst, N * sc));
            char what[80];
            snprintf(what, sizeof what, "accumulate %s into %s, bit for bit", dt_dtype_str(t[a]), dt_dtype_str(t[c]));
            report(memcmp(dst, got, N * sc) == 0, what, (double)(memcmp(dst, got, N * sc) != 0));
            dt_kernels_cpu.convert(kc, dst, t[c], src, t[a], N);
            CK(gpu->convert(gdst, (int)t[c], gsrc, (int)t[a], N, 0));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, gdst, N * sc));
            snprintf(what, sizeof what, "convert %s to %s, bit for bit", dt_dtype_str(t[a]), dt_dtype_str(t[c]));
            report(memcmp(dst, got, N * sc) == 0, what, (double)(memcmp(dst, got, N * sc) != 0));
            gpu->free(gsrc), gpu->free(gdst);
            free(src), free(dst), free(got);
        }
    float *dout = calloc(N, 4), *gdout = dev(NULL, N * 4), loss = 0;
    CK(gpu->to_device(gp, p, N * 4)); /* the same outputs on both sides */
    float ref = dt_kernels_cpu.mse(kc, dout, p, g, 0.25f, N, NULL);
    CK(gpu->mse(mm, gdout, gp, gg, 0.25f, N, &loss, NULL, 1.0));
    float *hd = back(gdout, N);
    d = fmax(fabs((double)loss - ref) / ref, maxrel(hd, dout, N));
    report(d < 1e-6, "mse: the loss and its gradient", d);
    double *gacc = dev(NULL, sizeof(double)), acc = -1;
    CK(gpu->to_device(gacc, &acc, sizeof acc));
    CK(gpu->mse(mm, gdout, gp, gg, 0.0f, N, NULL, gacc, 4.0));
    CK(gpu->to_host(&acc, gacc, sizeof acc));
    report(acc == -1 + (double)loss / 4, "mse: the mean into a sink on the device, the host's bits", acc);
    gpu->free(gacc);
    free(hd), free(dout), free(r), free(gr16), free(p), free(g), free(b);
    gpu->free(gp), gpu->free(gg), gpu->free(gbuf), gpu->free(gr), gpu->free(gdout);
}

void narrow_widen(void)
{
    /* under and over the kernels' 4096-value head, the larger through several ordered passes */
    static const size_t sizes[] = {1000, 100003};
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) {
            size_t n = sizes[s];
            enum dt_dtype t = types[k];
            char what[96];
            float *x = randn(n, 70), *got = malloc(n * 4);
            /* magnitudes from 2^-24 to 2^23: fp16's subnormals and overflow too */
            for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)(i % 48) - 24);
            float *g = dev(x, n * 4);
            dt_kernels_cpu.narrow_inplace(kc, x, n, t);
            CK(gpu->narrow_inplace(g, n, (int)t));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, g, n * 4));
            snprintf(what, sizeof what, "narrow_inplace %s, %zu values, bit for bit", dt_dtype_str(t), n);
            report(memcmp(got, x, n * 2) == 0, what, (double)(memcmp(got, x, n * 2) != 0));
            dt_kernels_cpu.widen_inplace(kc, x, n, t);
            CK(gpu->widen_inplace(g, n, (int)t));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, g, n * 4));
            snprintf(what, sizeof what, "widen_inplace %s, %zu values, bit for bit", dt_dtype_str(t), n);
            report(memcmp(got, x, n * 4) == 0, what, (double)(memcmp(got, x, n * 4) != 0));
            gpu->free(g);
            free(x), free(got);
        }
}

/* convert and accumulate between every pair of types on n = 1031 elements (a tail of 7 past packs of
 * 8), from and to places aligned to a pack (8 elements in) and not (1 and 3 elements in), bit for bit
 * with the CPU: under convert2 the packed kernel and its fallback */
void convert_offsets(void)
{
    static const enum dt_dtype t[] = {DT_F32, DT_BF16, DT_F16};
    static const size_t offs[2][2] = {{8, 8}, {1, 3}};
    size_t n = 1031, cap = n + 8;
    float *src32 = randn(cap, 97), *dst32 = randn(cap, 98);
    int bad = 0;
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++)
            for (int o = 0; o < 2; o++)
                for (int add = 0; add < 2; add++) {
                    size_t sa = dt_dtype_size(t[a]), sc = dt_dtype_size(t[c]), so = offs[o][0], dof = offs[o][1];
                    void *src = typed(src32, cap, t[a]), *dst = typed(dst32, cap, t[c]), *got = malloc(cap * sc);
                    char *gsrc = dev(src, cap * sa), *gdst = dev(dst, cap * sc);
                    void *d = (char *)dst + dof * sc, *s = (char *)src + so * sa;
                    if (add) dt_kernels_cpu.accumulate(kc, d, t[c], s, t[a], n);
                    else dt_kernels_cpu.convert(kc, d, t[c], s, t[a], n);
                    CK(gpu->convert(gdst + dof * sc, (int)t[c], gsrc + so * sa, (int)t[a], n, add));
                    CK(gpu->synchronize());
                    CK(gpu->to_host(got, gdst, cap * sc));
                    bad += memcmp(got, dst, cap * sc) != 0;
                    gpu->free(gsrc), gpu->free(gdst);
                    free(src), free(dst), free(got);
                }
    report(bad == 0, "convert and accumulate, every pair of types, 1031 elements at aligned and unaligned places, "
           "bit for bit", bad);
    free(src32), free(dst32);
}
