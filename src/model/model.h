/*
 * model.h - what the trainer and the strategies see of a model: one flat
 * parameter buffer and one flat gradient buffer with named views (so ZeRO can
 * partition them by offset), a forward that returns the mean loss, and a
 * backward that accumulates into the gradients.
 */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"
#include "kernels/kernels.h"

struct dt_param_view {
    const char *name;
    size_t offset, numel;
    bool decay; /* weight decay applies (matrices; not biases, norms, and by default embeddings) */
    int ndim;
    int shape[3];
};

/* One micro-batch: for a GPT, B sequences of T+1 tokens (inputs [0,T), targets [1,T]);
 * for an MLP, B feature rows with class labels or regression targets. */
struct dt_batch {
    int B, T;
    const int32_t *tokens; /* GPT: (B, T+1) */
    const float *x;        /* MLP: (B, in) */
    const int32_t *labels; /* MLP classification: (B) */
    const float *y;        /* MLP regression: (B, out) */
};

/* Backward finishes gradients in groups, numbered 0, 1, ... in the order it finishes them;
 * a segment is a contiguous part of the flat gradient buffer that belongs to one group. */
struct dt_grad_seg {
    size_t offset, numel;
    int group;
};

struct dt_model;

struct dt_model_i {
    /* Mean loss over the batch. With grad_scale != 0, leaves what backward needs,
     * scaling the loss gradient by grad_scale (1/accumulation steps). */
    float (*forward)(struct dt_model *m, const struct dt_batch *b, float grad_scale);
    /* grads += d(grad_scale * mean loss)/d params */
    void (*backward)(struct dt_model *m);
    void (*free)(struct dt_model *m);
};

struct dt_model {
    struct dt_model_i iface;
    const struct dt_kernels *k;
    float *params, *grads;
    size_t nparams;
    const struct dt_param_view *views;
    int nviews;
    size_t activation_bytes; /* the activation arena, measured as allocated */
    double flops_per_token;  /* forward + backward, 6N plus attention (PaLM appendix B) */
    const struct dt_grad_seg *segs;
    int nsegs, ngroups;
    /* the operands of every matmul: DT_F32, or DT_BF16 / DT_F16 (mixed precision: rounded to
     * 16 bits, products accumulated in fp32) */
    enum dt_dtype compute;
    /* Called by backward as each group's gradients become final (strategies that overlap
     * communication with backward set it; NULL: nobody listens). */
    void (*on_grads_ready)(void *ctx, int group);
    /* Set together with on_grads_ready. Rows a model adds to a gradient after reporting its group
     * (the GPT's token embedding: the LM head makes it final but for the rows of the input tokens,
     * which backward reaches last) come here instead of being added:
     * grads[offset + rows[i] * width + c] += vals[i * width + c]. */
    void (*on_sparse_grads)(void *ctx, size_t offset, const int32_t *rows, const float *vals, int nrows, int width);
    void *hook_ctx;
    void *impl;
};

static inline void dt_mm_forward(const struct dt_model *m, float *out, const float *inp, const float *w,
                                 const float *b, int BT, int C, int OC)
{
    if (m->compute == DT_F32) m->k->matmul_forward(out, inp, w, b, BT, C, OC);
    else m->k->matmul_forward_lp(out, inp, w, b, BT, C, OC, m->compute);
}

static inline void dt_mm_backward(const struct dt_model *m, float *dinp, float *dw, float *db, const float *dout,
                                  const float *inp, const float *w, int BT, int C, int OC)
{
    if (m->compute == DT_F32) m->k->matmul_backward(dinp, dw, db, dout, inp, w, BT, C, OC);
    else m->k->matmul_backward_lp(dinp, dw, db, dout, inp, w, BT, C, OC, m->compute);
}

static inline void dt_model_grads_ready(struct dt_model *m, int group)
{
    if (m->on_grads_ready) m->on_grads_ready(m->hook_ctx, group);
}

static inline void dt_model_free(struct dt_model *m)
{
    if (m) m->iface.free(m);
}

#endif
