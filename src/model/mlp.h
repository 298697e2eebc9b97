/*
 * mlp.h - a multilayer perceptron for the simplest jobs: in -> hidden... -> out
 * with GELU between layers; classification (softmax cross-entropy over `out`
 * classes) or regression (mean squared error over `out` values). Parameters
 * are w0, b0, w1, b1, ... in one flat buffer, like the GPT's.
 */
#ifndef DT_MLP_H
#define DT_MLP_H

#include "model/model.h"

#define DT_MLP_MAX_LAYERS 9

struct dt_mlp_config {
    int in, out;
    int nhidden;
    int hidden[DT_MLP_MAX_LAYERS - 1];
    bool regression;
    /* the activations between layers and the matmuls' operands: DT_F32, or mixed precision's DT_BF16 /
     * DT_F16 (the model's compute type); the output layer's stay fp32 for the loss */
    enum dt_dtype activations;
};

dt_status_t dt_mlp_create(const struct dt_mlp_config *c, const struct dt_kernels *k, struct dt_kctx *kc, int B,
                          struct dt_model **out);
/* Bytes create allocates for micro-batches of B rows (dtrun check --memory). */
size_t dt_mlp_arena_bytes(const struct dt_mlp_config *c, int B);
/* The units of an MLP of this shape, without building it (malloc'd; dtrun check --memory). */
dt_status_t dt_mlp_units(const struct dt_mlp_config *c, struct dt_unit **units, int *n);
/* Its random init (dt_model_init_source) is PyTorch nn.Linear's: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * for weights and biases. */

#endif
