/*
 * teacher.h - the MLP's built-in synthetic source: inputs x ~ N(0, I) of
 * `in` features, labelled by a fixed random teacher network (one GELU layer
 * of 32 units, seeded). Classification: the label is the teacher's argmax
 * (best loss 0). Regression: the target is the teacher's output plus
 * N(0, noise^2) per output (best mean squared error noise^2, in closed form).
 * Sample n is a pure function of (seed, n), like the Markov source.
 */
#ifndef DT_TEACHER_H
#define DT_TEACHER_H

#include <stdbool.h>
#include <stdint.h>

#define DT_TEACHER_HIDDEN 32

struct dt_teacher {
    int in, out;
    bool regression;
    double noise;
    uint64_t seed;
    float *w1, *b1, *w2; /* (HIDDEN, in), (HIDDEN), (out, HIDDEN) */
};

int dt_teacher_init(struct dt_teacher *t, int in, int out, bool regression, double noise, uint64_t seed);
void dt_teacher_free(struct dt_teacher *t);
/* Rows first .. first+B-1 of `stream`: x (B, in), and labels (B) or y (B, out). */
void dt_teacher_batch(const struct dt_teacher *t, uint64_t stream, int64_t first, int B, float *x, int32_t *labels,
                      float *y);
double dt_teacher_loss_floor(const struct dt_teacher *t);

#endif
