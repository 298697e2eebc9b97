/* softmax_xent.c - fused softmax + cross-entropy with the gradient written in place (see kernels.h). */
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

/* Row i's block b of a block-major (BT, V) buffer (see kernels.h); n gets its width. */
static inline float *block_row(float *logits, int i, int b, int BT, int V, int vb, int *n)
{
    int v0 = b * vb;
    *n = V - v0 < vb ? V - v0 : vb;
    return logits + (size_t)BT * v0 + (size_t)i * *n;
}

DT_CLONES float dt_cpu_softmax_xent(struct dt_kctx *kc, float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V,
                                    int vb, const struct dt_loss_sink *sink)
{
    int nb = (V + vb - 1) / vb;
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        int y = targets[i], n;
        float mx = -INFINITY, xy = 0;
        for (int b = 0; b < nb; b++) {
            const float *row = block_row(logits, i, b, BT, V, vb, &n);
            #pragma omp simd reduction(max : mx)
            for (int v = 0; v < n; v++) mx = row[v] > mx ? row[v] : mx;
            if (y / vb == b) xy = row[y - b * vb];
        }
        double sum = 0;
        for (int b = 0; b < nb; b++) {
            const float *row = block_row(logits, i, b, BT, V, vb, &n);
            #pragma omp simd reduction(+ : sum)
            for (int v = 0; v < n; v++) sum += expf(row[v] - mx);
        }
        float lse = mx + (float)log(sum);
        losses[i] = lse - xy;
        for (int b = 0; dloss != 0 && b < nb; b++) {
            float *row = block_row(logits, i, b, BT, V, vb, &n);
            #pragma omp simd
            for (int v = 0; v < n; v++) row[v] = expf(row[v] - lse) * dloss;
            if (y / vb == b) row[y - b * vb] -= dloss;
        }
    }
    double mean = 0;
    for (int i = 0; i < BT; i++) mean += losses[i];
    return dt_loss_out((float)(mean / BT), sink);
}

/* Row i's values from block b of a block-major (BT, V) buffer (see kernels.h), widened into x. */
static inline int segment(float *x, const uint16_t *logits, const struct dt_convert *cv, bool bf, int i, int b, int BT,
                          int V, int vb)
{
    int v0 = b * vb, n = V - v0 < vb ? V - v0 : vb;
    (bf ? cv->f32_from_bf16 : cv->f32_from_f16)(x, logits + (size_t)BT * v0 + (size_t)i * n, (size_t)n);
    return n;
}

DT_CLONES float dt_cpu_softmax_xent_lp(struct dt_kctx *kc, float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V,
                             int vb, enum dt_dtype t, const struct dt_loss_sink *sink)
{
    static const struct dt_convert *cv;
    if (!cv) cv = dt_convert_fast();
    bool bf = t == DT_BF16;
    int nb = (V + vb - 1) / vb;
    /* a widened block per thread, from the context's scratch: when it cannot be had, the op returns
     * and the next synchronize says so (dt_cpu_failure), never a thread writing through NULL */
    float *all = dt_cpu_scratch(kc, 0, (size_t)omp_get_max_threads() * (size_t)vb * sizeof *all, "softmax_xent");
    if (!all) return dt_loss_out(NAN, sink);
    #pragma omp parallel
    {
        float *x = all + (size_t)omp_get_thread_num() * (size_t)vb;
        #pragma omp for
        for (int i = 0; i < BT; i++) {
            int y = targets[i];
            float mx = -INFINITY, xy = 0;
            for (int b = 0; b < nb; b++) {
                int n = segment(x, logits, cv, bf, i, b, BT, V, vb);
                #pragma omp simd reduction(max : mx)
                for (int v = 0; v < n; v++) mx = x[v] > mx ? x[v] : mx;
                if (y / vb == b) xy = x[y - b * vb];
            }
            double sum = 0;
            for (int b = 0; b < nb; b++) {
                int n = segment(x, logits, cv, bf, i, b, BT, V, vb);
                #pragma omp simd reduction(+ : sum)
                for (int v = 0; v < n; v++) sum += expf(x[v] - mx);
            }
            float lse = mx + (float)log(sum);
            losses[i] = lse - xy;
            for (int b = 0; dloss != 0 && b < nb; b++) {
                int n = segment(x, logits, cv, bf, i, b, BT, V, vb);
                #pragma omp simd
                for (int v = 0; v < n; v++) x[v] = expf(x[v] - lse) * dloss;
                if (y / vb == b) x[y - b * vb] -= dloss;
                (bf ? cv->bf16_from_f32 : cv->f16_from_f32)(logits + (size_t)BT * b * vb + (size_t)i * n, x, (size_t)n);
            }
        }
    }
    double mean = 0;
    for (int i = 0; i < BT; i++) mean += losses[i];
    return dt_loss_out((float)(mean / BT), sink);
}
