/*
 * optim.c - optimizer updates on one slice of the flat parameter buffer.
 * AdamW matches torch.optim.AdamW (decoupled decay p -= lr*wd*p, bias-corrected
 * moments, eps added after the square root); SGD matches torch.optim.SGD
 * (buf = g on the first step, then momentum*buf + g; nesterov uses g + momentum*buf)
 * with the decay decoupled as in AdamW, so both optimizers treat wd alike.
 */
#include <math.h>
#include "kernels/cpu/cpu.h"

void dt_cpu_adamw(float *param, const float *grad, float gscale, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int t)
{
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    float step = lr / bc1, rbc2 = 1.0f / sqrtf(bc2);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * gscale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = param[i] * (1.0f - lr * wd);
        param[i] = p - step * mi / (sqrtf(vi) * rbc2 + eps);
    }
}

void dt_cpu_sgd(float *param, const float *grad, float gscale, float *buf, size_t n, float lr, float momentum,
                int nesterov, float wd, int first_step)
{
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * gscale;
        float d = g;
        if (momentum != 0) {
            float b = first_step ? g : momentum * buf[i] + g;
            buf[i] = b;
            d = nesterov ? g + momentum * b : b;
        }
        param[i] = param[i] * (1.0f - lr * wd) - lr * d;
    }
}
