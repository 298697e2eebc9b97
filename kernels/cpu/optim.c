/*
 * optim.c - optimizer updates on one slice of the flat parameter buffer.
 * AdamW matches torch.optim.AdamW (decoupled decay p -= lr*wd*p, bias-corrected
 * moments, eps added after the square root); SGD matches torch.optim.SGD
 * (buf = g on the first step, then momentum*buf + g; nesterov uses g + momentum*buf)
 * with the decay decoupled as in AdamW, so both optimizers treat wd alike.
 *
 * Under mixed precision the gradient arrives in 16 bits and the update also
 * writes the 16-bit working copy of the parameters: both happen here, a block
 * at a time in cache, so the optimizer reads and writes each array once
 * instead of converting the gradient in and the parameters out in passes of
 * their own.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include "core/dtype.h"
#include "kernels/cpu/convert.h"
#include "kernels/formulas.h"
#include "kernels/cpu/cpu.h"

#define BLOCK 1024

/* one optimizer's constants: AdamW's (m and v its state), or SGD's (m its momentum buffer) */
struct upd {
    bool sgd;
    float gscale, l2, lr, beta1, beta2, eps, wd, step, rbc2, momentum;
    int nesterov, first_step;
};

/* n bytes to dst past the caches (streaming stores on x86-64, SSE2 being its baseline): the next
 * forward reads the 16-bit copy from memory anyway, and a plain store would first read each line it
 * writes. The caller fences (sfence) before another thread reads dst. */
static void store_past_cache(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 16 <= n; i += 16) _mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
    memcpy(d + i, s + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

/* p, m, v and the gradient a block at a time: the gradient widened into the block's buffer as it
 * is read, the 16-bit copy of the parameters written while the block is in cache */
static void update(const struct upd *u, float *param, float *m, float *v, const void *grad, enum dt_dtype gt,
                   size_t n, void *plp, enum dt_dtype pt)
{
    const struct dt_convert *cv = dt_convert_fast();
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (size_t b = 0; b < n; b += BLOCK) {
            float tmp[BLOCK];
            size_t k = n - b < BLOCK ? n - b : BLOCK;
            const float *g = tmp;
            if (gt == DT_F32) g = (const float *)grad + b;
            else (gt == DT_BF16 ? cv->f32_from_bf16 : cv->f32_from_f16)(tmp, (const uint16_t *)grad + b, k);
            float *p = param + b, *mb = m + b;
            /* the constants in locals: read through u, the stores to p, m, v could alias them and no loop
             * would vectorize */
            const float gs = u->gscale, l2 = u->l2, lr = u->lr, b1 = u->beta1, b2 = u->beta2, eps = u->eps,
                        wd = u->wd, step = u->step, rbc2 = u->rbc2, mu = u->momentum;
            const int nesterov = u->nesterov, first = u->first_step;
            if (u->sgd) {
                #pragma omp simd
                for (size_t i = 0; i < k; i++) dt_sgd_one(&p[i], &mb[i], g[i] * gs, lr, mu, nesterov, wd, first);
            } else {
                float *vb = v + b; /* AdamW's second moment (SGD has none, v NULL) */
                #pragma omp simd
                for (size_t i = 0; i < k; i++)
                    dt_adamw_one(&p[i], &mb[i], &vb[i], dt_adamw_grad(g[i], gs, l2, p[i]), lr, b1, b2, eps, wd, step,
                                 rbc2);
            }
            if (plp) {
                uint16_t t16[BLOCK];
                (pt == DT_BF16 ? cv->bf16_from_f32 : cv->f16_from_f32)(t16, p, k);
                store_past_cache((uint16_t *)plp + b, t16, k * sizeof *t16);
            }
        }
#if defined(__x86_64__)
        _mm_sfence(); /* this thread's streaming stores, before the region's end lets others read them */
#endif
    }
}

void dt_cpu_adamw(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float l2, float *m,
                  float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t, void *plp,
                  enum dt_dtype pt)
{
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    struct upd u = {.gscale = gscale, .l2 = l2, .lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .wd = wd,
                    .step = lr / bc1, .rbc2 = 1.0f / sqrtf(bc2)};
    update(&u, param, m, v, grad, gt, n, plp, pt);
}

/* slice by slice: the CPU has no launches to save */
void dt_cpu_adamw_slices(struct dt_kctx *kc, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt, float gscale,
                         float lr, float beta1, float beta2, float eps, int t, enum dt_dtype pt)
{
    for (int i = 0; i < ns; i++)
        dt_cpu_adamw(kc, s[i].param, s[i].grad, gt, gscale, s[i].l2, s[i].m, s[i].v, s[i].n, lr, beta1, beta2, eps,
                     s[i].wd, t, s[i].plp, pt);
}

void dt_cpu_sgd(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float *buf, size_t n,
                float lr, float momentum, int nesterov, float wd, int first_step, void *plp, enum dt_dtype pt)
{
    struct upd u = {.sgd = true, .gscale = gscale, .lr = lr, .momentum = momentum, .nesterov = nesterov, .wd = wd,
                    .first_step = first_step};
    update(&u, param, buf, NULL, grad, gt, n, plp, pt);
}
