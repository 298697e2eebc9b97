/*
 * formulas.h - the per-element formulas the CPU kernels (kernels/cpu/) and their CUDA twins
 * (kernels/cuda/ops.cu and its siblings) both compile, so the two cannot drift apart: GELU's tanh
 * approximation and its derivative, SiLU's, the rotation of a rotary-embedding pair, one AdamW and
 * one SGD update, stochastic rounding to bf16. Inline, so the CPU loops around them still vectorize.
 */
#ifndef DT_FORMULAS_H
#define DT_FORMULAS_H

#include <math.h>
#include "core/half.h" /* DT_HD */

#define DT_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* tanh(u) as 1 - 2/(exp(2u) + 1), so loops vectorize (glibc's vector expf); clamped so large
 * inputs give +-1 exactly */
DT_HD static inline float dt_tanh_exp(float u)
{
    u = u > 15.0f ? 15.0f : u < -15.0f ? -15.0f : u;
    return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

DT_HD static inline float dt_gelu(float x)
{
    return 0.5f * x * (1.0f + dt_tanh_exp(DT_GELU_SCALE * (x + 0.044715f * x * x * x)));
}

/* d gelu(x) / dx */
DT_HD static inline float dt_gelu_grad(float x)
{
    float th = dt_tanh_exp(DT_GELU_SCALE * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * DT_GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

/* SiLU (x sigmoid(x), Llama's gate) and its derivative sigmoid(x) (1 + x (1 - sigmoid(x))); where
 * expf(-x) overflows to inf, sigmoid is 0 exactly, as torch's */
DT_HD static inline float dt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
DT_HD static inline float dt_silu(float x) { return x * dt_sigmoid(x); }
DT_HD static inline float dt_silu_grad(float x)
{
    float s = dt_sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

/* A rotary-embedding pair (x1, x2) = (x[i], x[i + hs/2]) turned by the angle whose cosine and sine
 * are c and s (Hugging Face's rotate-half: x * cos + rotate_half(x) * sin); dir -1 turns it back,
 * which is also the backward of dir 1 (a rotation's transpose is its inverse). */
DT_HD static inline void dt_rope_pair(float *x1, float *x2, float c, float s, float dir)
{
    float a = *x1, b = *x2;
    *x1 = a * c - dir * b * s;
    *x2 = b * c + dir * a * s;
}

/* Llama 3.1's scaled rotary frequencies (Hugging Face's rope_type "llama3"): factor 0 is none */
struct dt_rope_scaling {
    float factor, low_freq_factor, high_freq_factor, original_max_position;
};

/* Frequency i of hs/2: f_i = 1 / theta^(2i / hs) in fp32, as LlamaRotaryEmbedding's inv_freq, then
 * with scaling (not NULL, factor > 0) transformers' _compute_llama3_parameters: wavelengths 2 pi / f
 * longer than original / low_freq_factor divided by factor, shorter than original /
 * high_freq_factor kept, the ones between interpolated smoothly; in fp32, its operations in its
 * order. Host code. */
static inline float dt_rope_freq(int i, int hs, float theta, const struct dt_rope_scaling *sc)
{
    float f = 1.0f / powf(theta, (float)(2 * i) / (float)hs);
    if (!sc || sc->factor <= 0) return f;
    float wavelen = 2.0f * (float)M_PI / f;
    float low = sc->original_max_position / sc->low_freq_factor;
    float high = sc->original_max_position / sc->high_freq_factor;
    float g = wavelen > low ? f / sc->factor : f;
    if (wavelen < high || wavelen > low) return g;
    float smooth = (sc->original_max_position / wavelen - sc->low_freq_factor) /
                   (sc->high_freq_factor - sc->low_freq_factor);
    return (1 - smooth) * g / sc->factor + smooth * g;
}

/* The (T, hs) table rope takes: row t holds cos(t f_i) for i < hs/2, then sin(t f_i), the angle
 * t f_i in fp32, the formula of Hugging Face's LlamaRotaryEmbedding (which takes the cosine and sine
 * with torch's fp32 functions; here they are rounded once from double). Host code: the model fills
 * it once. */
static inline void dt_rope_table_scaled(float *cs, int T, int hs, float theta, const struct dt_rope_scaling *sc)
{
    int half = hs / 2;
    for (int i = 0; i < half; i++) {
        float f = dt_rope_freq(i, hs, theta, sc);
        for (int t = 0; t < T; t++) {
            float a = (float)t * f;
            cs[(size_t)t * hs + i] = (float)cos((double)a);
            cs[(size_t)t * hs + half + i] = (float)sin((double)a);
        }
    }
}

static inline void dt_rope_table(float *cs, int T, int hs, float theta) { dt_rope_table_scaled(cs, T, hs, theta, NULL); }

/* One AdamW element: g the (clipped) gradient; step = lr / (1 - beta1^t), rbc2 = 1 / sqrt(1 - beta2^t).
 * On a GPU every rounding is spelled out (the fused multiply-adds nvcc chose for the kernel that
 * came first): nvcc contracts a multiply and an add as the code around them leads it, and ptxas may
 * fuse those it left apart, so two kernels over the same elements (the optimizer's per-tensor and
 * multi-tensor ones) could differ in bits. */
DT_HD static inline void dt_adamw_one(float *param, float *m, float *v, float g, float lr, float beta1, float beta2,
                                      float eps, float wd, float step, float rbc2)
{
#ifdef __CUDA_ARCH__
    float mi = __fmaf_rn(*m, beta1, __fmul_rn(__fsub_rn(1.0f, beta1), g));
    float vi = __fmaf_rn(*v, beta2, __fmul_rn(__fmul_rn(__fsub_rn(1.0f, beta2), g), g));
    *m = mi;
    *v = vi;
    float p = __fmul_rn(*param, __fsub_rn(1.0f, __fmul_rn(lr, wd)));
    *param = __fsub_rn(p, __fdiv_rn(__fmul_rn(step, mi), __fmaf_rn(__fsqrt_rn(vi), rbc2, eps)));
#else
    float mi = beta1 * *m + (1.0f - beta1) * g;
    float vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi;
    *v = vi;
    float p = *param * (1.0f - lr * wd);
    *param = p - step * mi / (sqrtf(vi) * rbc2 + eps);
#endif
}
/* AdamW's gradient term, g gscale + l2 param (Adam's L2 penalty), its rounding spelled out on a GPU
 * as dt_adamw_one's */
DT_HD static inline float dt_adamw_grad(float g, float gscale, float l2, float param)
{
#ifdef __CUDA_ARCH__
    return __fmaf_rn(g, gscale, __fmul_rn(l2, param));
#else
    return g * gscale + l2 * param;
#endif
}

/* One SGD element with momentum (PyTorch's formulation) and decoupled weight decay. */
DT_HD static inline void dt_sgd_one(float *param, float *buf, float g, float lr, float momentum, int nesterov, float wd,
                                    int first_step)
{
    float d = g;
    if (momentum != 0) {
        float b = first_step ? g : momentum * *buf + g;
        *buf = b;
        d = nesterov ? g + momentum * b : b;
    }
    *param = *param * (1.0f - lr * wd) - lr * d;
}

/* splitmix64 of (seed, index): the same noise for an element whichever rank (or device) updates it */
DT_HD static inline uint32_t dt_noise(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

/* llm.c's stochastic rounding (llmc/adamw.cuh): add 16 random bits below bf16's last one, truncate.
 * Rounds up with probability (x - lower) / (upper - lower), so updates far below bf16's precision
 * still move the parameter on average. NaN and infinity are rounded as usual. */
DT_HD static inline uint16_t dt_bf16_stochastic(float x, uint64_t seed, uint64_t index)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return dt_bf16_from_f32(x);
    uint32_t r = u + (dt_noise(seed, index) & 0xffffu);
    if ((r & 0x7f800000u) == 0x7f800000u) r = u; /* no rounding past the largest finite value */
    return (uint16_t)(r >> 16);
}

#endif
