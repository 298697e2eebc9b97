/*
 * optim.c - optimizer updates on one slice of the flat parameter buffer.
 * AdamW matches torch.optim.AdamW (decoupled decay p -= lr*wd*p, bias-corrected
 * moments, eps added after the square root); SGD matches torch.optim.SGD
 * (buf = g on the first step, then momentum*buf + g; nesterov uses g + momentum*buf)
 * with the decay decoupled as in AdamW, so both optimizers treat wd alike.
 */
#include <math.h>
#include "kernels/formulas.h"
#include "kernels/cpu/cpu.h"

void dt_cpu_adamw(struct dt_kctx *kc, float *param, const float *grad, float gscale, float l2, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int t)
{
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    float step = lr / bc1, rbc2 = 1.0f / sqrtf(bc2);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        dt_adamw_one(&param[i], &m[i], &v[i], grad[i] * gscale + l2 * param[i], lr, beta1, beta2, eps, wd, step, rbc2);
    }
}

void dt_cpu_sgd(struct dt_kctx *kc, float *param, const float *grad, float gscale, float *buf, size_t n, float lr, float momentum,
                int nesterov, float wd, int first_step)
{
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        dt_sgd_one(&param[i], &buf[i], grad[i] * gscale, lr, momentum, nesterov, wd, first_step);
    }
}
