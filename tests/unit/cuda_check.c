/* cuda_check.c - see cuda_check.h. */
#include <math.h>
#include <string.h>
#include "core/error.h"
#include "core/half.h"
#include "cuda_check.h"

const struct dt_cuda_ops *gpu;
struct dt_kctx *kc; /* the CPU twins' context */
void *mm;            /* the module's context, for the ops that take one outside the matmul tests */
int tap_n, failed;
const char *report_prefix = "";

void report(int ok, const char *what, double got)
{
    printf("%sok %d - %s%s (max difference %.3g)\n", ok ? "" : "not ", ++tap_n, report_prefix, what, got);
    failed += !ok;
}

float *randn(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    srand(seed);
    for (size_t i = 0; i < n; i++) x[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 6.0f;
    return x;
}

/* a device copy of n bytes of host memory (NULL: zeroed) */
void *dev(const void *host, size_t bytes)
{
    void *d = NULL;
    if (gpu->malloc(&d, bytes)) {
        printf("Bail out! cudaMalloc of %zu bytes failed\n", bytes);
        exit(1);
    }
    if (host) CK(gpu->to_device(d, host, bytes));
    else {
        void *z = calloc(1, bytes);
        CK(gpu->to_device(d, z, bytes));
        free(z);
    }
    return d;
}

float *back(const void *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    int e = gpu->synchronize();
    if (!e) e = gpu->to_host(h, d, n * sizeof *h);
    if (e) {
        printf("Bail out! a kernel or copy failed: %s\n", gpu->error_string(e));
        exit(1);
    }
    return h;
}

/* largest |a - b| / max(1, |b|) */
double maxrel(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* a 16-bit value of type t widened */
double wide16(uint16_t h, enum dt_dtype t) { return t == DT_BF16 ? dt_f32_from_bf16(h) : dt_f32_from_f16(h); }

/*
 * Two results of type t (16-bit) of the same fp32 computation: if the two sides' fp32 values differ
 * by d, each rounding moves its value by at most half a unit in the last place at its magnitude, so
 * |got - ref| <= d + ulp, ulp the spacing above the larger of the two. Returns the largest
 * (|got - ref| - ulp) / max(1, |ref|), at least 0: what is left for the fp32 tolerance (the metric
 * of maxrel) to cover.
 */
double lp_excess(const uint16_t *got, const uint16_t *ref, size_t n, enum dt_dtype t)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = off_less_ulp(got, ref, i, t) / fmax(1.0, fabs(wide16(ref[i], t)));
        if (!(d <= m)) m = d; /* a NaN counts as a failure */
    }
    return m;
}

double off_less_ulp(const void *got, const void *ref, size_t i, enum dt_dtype t)
{
    if (t == DT_F32) return fabs((double)((const float *)got)[i] - ((const float *)ref)[i]);
    uint16_t hg = ((const uint16_t *)got)[i], hr = ((const uint16_t *)ref)[i];
    uint16_t big = (hg & 0x7fff) > (hr & 0x7fff) ? hg & 0x7fff : hr & 0x7fff;
    return fabs(wide16(hg, t) - wide16(hr, t)) - (wide16((uint16_t)(big + 1), t) - wide16(big, t));
}

/* n values of type t (fp32 or 16-bit) as the bytes the GPU and the CPU kernels take */
void *typed(const float *x, size_t n, enum dt_dtype t)
{
    void *p = malloc(n * dt_dtype_size(t));
    dt_kernels_cpu.convert(kc, p, t, x, DT_F32, n);
    return p;
}

/* an activation's result of type t, GPU's against CPU's: maxrel for fp32, lp_excess for 16 bits */
double act_diff(const void *got, const void *ref, size_t n, enum dt_dtype t)
{
    return t == DT_F32 ? maxrel(got, ref, n) : lp_excess(got, ref, n, t);
}

/* n values of type t copied back from the device (after the queue has run) */
void *back_typed(const void *d, size_t n, enum dt_dtype t)
{
    void *h = malloc(n * dt_dtype_size(t));
    int e = gpu->synchronize();
    if (!e) e = gpu->to_host(h, d, n * dt_dtype_size(t));
    if (e) {
        printf("Bail out! a kernel or copy failed: %s\n", gpu->error_string(e));
        exit(1);
    }
    return h;
}

const enum dt_dtype act_types[3] = {DT_F32, DT_BF16, DT_F16};

/* units in the last place between two 16-bit floats of one type (both encodings are sign-magnitude) */
int ulps(uint16_t a, uint16_t b)
{
    int x = a & 0x8000 ? -(a & 0x7fff) : a, y = b & 0x8000 ? -(b & 0x7fff) : b;
    return abs(x - y);
}

/* the most ulps between two arrays of 16-bit floats */
int max_ulps(const uint16_t *a, const uint16_t *b, size_t n)
{
    int worst = 0;
    for (size_t i = 0; i < n; i++) worst = ulps(a[i], b[i]) > worst ? ulps(a[i], b[i]) : worst;
    return worst;
}

int cuda_check_start(void)
{
    const struct dt_cuda_module *m;
    if (dt_cuda_module_get(&m) != DT_SUCCESS) {
        const char *msg = dt_error_msg();
        printf("1..0 # SKIP no CUDA module: %.*s\n", (int)strcspn(msg, "\n"), msg);
        return 77;
    }
    char why[200] = "";
    if (m->device_count(why, sizeof why) == 0) {
        printf("1..0 # SKIP %s\n", why);
        return 77;
    }
    gpu = m->ops;
    if (dt_kernels_cpu.ctx_create(-1, &kc) != DT_SUCCESS || gpu->set_device(0) || gpu->ctx_create(&mm)) {
        printf("Bail out! cannot start the CPU kernels, select GPU 0 or make the module's context\n");
        return 1;
    }
    return 0;
}

int cuda_check_finish(void)
{
    gpu->ctx_destroy(mm);
    dt_kernels_cpu.ctx_destroy(kc);
    printf("1..%d\n", tap_n);
    return failed ? 1 : 0;
}
