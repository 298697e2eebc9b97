/*
 * fp8.h - fp8-mixed's scaling state (Transformer Engine's fp8_meta): for each of a model's linear
 * layers, three tensors (its input, weight and output gradient, model.h's dt_fp8_meta), each with a
 * scale and, under delayed scaling, an amax history of compute.fp8.amax_history_len optimizer steps,
 * all in the kernels' tensor memory so that a GPU updates them without a host round trip.
 *
 * A step's amaxes are the largest over every micro-batch of every rank (an all-reduce of the
 * history's first row before the update), and the scales change only between optimizer steps: so
 * one rank with 4 micro-batches and 4 ranks with one quantise with the same scales (DESIGN.md
 * invariant 1). Transformer Engine updates at every fp8_autocast exit, each micro-batch under
 * Lightning; the step is the unit here.
 */
#ifndef DT_PRECISION_FP8_H
#define DT_PRECISION_FP8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kernels/kernels.h"
#include "model/model.h"
#include "precision/policy.h"

struct dt_fp8_state {
    struct dt_fp8_meta meta;  /* what the linear layers quantise with while training */
    struct dt_fp8_meta quiet; /* the same scales, no amax recorded: evaluation (samples run in bf16) */
    float *hist;              /* (len, n), row 0 the step's amaxes; delayed scaling only */
    float *scale;             /* n */
    float *saturated;         /* 1: tensors clipped since the last dt_fp8_take_saturated */
    int n, len;
    struct dt_fp8_recipe r;
    const struct dt_kernels *k;
    struct dt_kctx *kc;
};

/* The state for n_linear linear layers, every scale 1 and every history zero (Transformer Engine's
 * start); refused when the kernels cannot multiply FP8 (fp8_supported). */
dt_status_t dt_fp8_open(struct dt_fp8_state *f, const struct dt_fp8_recipe *r, int n_linear,
                        const struct dt_kernels *k, struct dt_kctx *kc);
void dt_fp8_close(struct dt_fp8_state *f);
/* The step's amaxes, for the ranks' maximum before the update (NULL, 0 under current scaling). */
float *dt_fp8_amax(struct dt_fp8_state *f, size_t *n);
/* After an optimizer step: delayed scaling's update (the kernels' fp8_update). */
void dt_fp8_update(struct dt_fp8_state *f);
/* How many tensors were clipped since the last call (a host read of one value). */
int64_t dt_fp8_take_saturated(struct dt_fp8_state *f);
/* Every scale multiplied by factor (DTRUN_FAULT=fp8_jump: a host round trip, for the tests). */
void dt_fp8_jump(struct dt_fp8_state *f, float factor);
/* The state as a checkpoint holds it: the scales (n), then the history (len x n); floats. */
size_t dt_fp8_floats(const struct dt_fp8_state *f);
void dt_fp8_save(struct dt_fp8_state *f, float *host);
void dt_fp8_restore(struct dt_fp8_state *f, const float *host);

#endif
