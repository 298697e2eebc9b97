/* teacher.c - see teacher.h. */
#include <math.h>
#include <stdlib.h>
#include "core/rng.h"
#include "data/teacher.h"

int dt_teacher_init(struct dt_teacher *t, int in, int out, bool regression, double noise, uint64_t seed)
{
    *t = (struct dt_teacher){.in = in, .out = out, .regression = regression, .noise = noise, .seed = seed};
    int H = DT_TEACHER_HIDDEN;
    t->w1 = malloc((size_t)H * in * sizeof(float));
    t->b1 = malloc((size_t)H * sizeof(float));
    t->w2 = malloc((size_t)out * H * sizeof(float));
    if (!t->w1 || !t->b1 || !t->w2) return -1;
    struct dt_rng r = dt_rng_make(seed, 0x7EAC4E5ull);
    for (int i = 0; i < H * in; i++) t->w1[i] = dt_rng_normal(&r) / sqrtf((float)in);
    for (int i = 0; i < H; i++) t->b1[i] = 0.5f * dt_rng_normal(&r);
    for (int i = 0; i < out * H; i++) t->w2[i] = dt_rng_normal(&r) / sqrtf((float)H);
    return 0;
}

void dt_teacher_free(struct dt_teacher *t)
{
    free(t->w1);
    free(t->b1);
    free(t->w2);
    t->w1 = t->b1 = t->w2 = NULL;
}

void dt_teacher_batch(const struct dt_teacher *t, uint64_t stream, int64_t first, int B, float *x, int32_t *labels,
                      float *y)
{
    int H = DT_TEACHER_HIDDEN;
    for (int b = 0; b < B; b++) {
        struct dt_rng r = dt_rng_make(t->seed + 0x5EEDull * (stream + 1), (uint64_t)(first + b));
        float *xb = x + (size_t)b * t->in, h[DT_TEACHER_HIDDEN], o[256];
        for (int i = 0; i < t->in; i++) xb[i] = dt_rng_normal(&r);
        for (int j = 0; j < H; j++) {
            float s = t->b1[j];
            for (int i = 0; i < t->in; i++) s += t->w1[j * t->in + i] * xb[i];
            h[j] = 0.5f * s * (1.0f + erff(s / sqrtf(2.0f)));
        }
        int best = 0;
        for (int k = 0; k < t->out; k++) {
            float s = 0;
            for (int j = 0; j < H; j++) s += t->w2[k * H + j] * h[j];
            if (k < 256) o[k] = s;
            if (t->regression) y[(size_t)b * t->out + k] = s + (float)t->noise * dt_rng_normal(&r);
            else if (s > o[best]) best = k;
        }
        if (!t->regression) labels[b] = best;
    }
}

double dt_teacher_loss_floor(const struct dt_teacher *t) { return t->regression ? t->noise * t->noise : 0.0; }
