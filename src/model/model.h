/*
 * model.h - what the trainer and the strategies see of a model: one flat
 * parameter space with named views, cut into units, a forward that returns
 * the mean loss, and a backward that accumulates gradients.
 *
 * A unit is a contiguous range of the flat buffer that the model reads and
 * writes as a whole: a transformer block, a block of vocabulary rows, the
 * final layernorm. Units cover the buffer in order. The model never keeps a
 * pointer to its parameters or gradients: before it uses a unit it asks the
 * memory interface (struct dt_model_mem_i) where the unit's parameters are,
 * and where to add its gradients, and says when it is done. That is the hook
 * every strategy needs: DDP hands out the full buffers and starts a unit's
 * all-reduce when its gradients are done; ZeRO-3 gathers a unit's
 * parameters just before it is used and frees them after
 * (src/strategy/engine.h).
 *
 * Without a strategy the model uses its own full fp32 buffers, m->params and
 * m->grads (dt_model_own_mem), as unit tests and the reference check do.
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

struct dt_unit {
    size_t offset, numel;
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

/* Where a unit's parameters and gradients are while the model works on it. */
struct dt_model_mem_i {
    /* unit u's parameters in fp32, valid until params_done(u) */
    const float *(*params)(void *ctx, int u);
    void (*params_done)(void *ctx, int u);
    /* where unit u's gradients of this backward are added (+=), valid until grads_done(u), which says
     * they are final for this micro-batch. *fresh: they hold nothing yet, not even zeros, so the
     * ops must write every element (=), which spares a pass that zeroes them */
    float *(*grads)(void *ctx, int u, bool *fresh);
    void (*grads_done)(void *ctx, int u);
    /* Gradients that arrive as rows after their units were done (the token embedding: the LM head
     * finishes its units, the input tokens' rows come last): row rows[i] of the (.., width) table
     * at flat offset `table` gets vals[i]. Once per backward, after every grads_done. */
    void (*rows)(void *ctx, size_t table, const int32_t *rows, const float *vals, int nrows, int width);
    /* Unit u's parameters as the strategy stores them, when that is the matmuls' 16-bit type and
     * they stay put until the optimizer step (mixed precision's storage under stages 0-2): the ops
     * that read any type (matmuls, the embedding lookup) take them as they are, with no widened
     * copy to make and nothing to release. NULL (or no hook): ask params. */
    const void *(*stored)(void *ctx, int u);
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
    const struct dt_kernels *k; /* the ops, and the memory they run on */
    struct dt_kctx *kc;
    size_t nparams;
    const struct dt_param_view *views;
    int nviews;
    const struct dt_unit *units;
    int nunits;
    struct dt_model_mem_i mem;
    void *mem_ctx;
    /* The model's own fp32 buffers, filled by its init or a weights file: the strategy takes the
     * parameters from here, and may free both (dt_model_drop_buffers) when it keeps its own. */
    float *params, *grads;
    size_t activation_bytes; /* the activation arena, measured as allocated */
    double flops_per_token;  /* forward + backward, 6N plus attention (PaLM appendix B) */
    /* the operands of every matmul and the type activations are stored in between ops: DT_F32, or
     * DT_BF16 / DT_F16 (mixed precision: 16-bit activations, products accumulated in fp32), set by
     * the model's config at creation */
    enum dt_dtype compute;
    void *impl;
};

static inline const float *dt_model_params(struct dt_model *m, int u) { return m->mem.params(m->mem_ctx, u); }
static inline void dt_model_params_done(struct dt_model *m, int u) { m->mem.params_done(m->mem_ctx, u); }

/* A unit's parameters for the ops that read any type: the stored 16-bit ones where the strategy
 * has them (mem.stored), else the fp32 ones params gives. */
struct dt_wref {
    const void *p;
    enum dt_dtype t;
};

static inline struct dt_wref dt_model_params_any(struct dt_model *m, int u)
{
    const void *s = m->mem.stored ? m->mem.stored(m->mem_ctx, u) : NULL;
    if (s) return (struct dt_wref){s, m->compute};
    return (struct dt_wref){dt_model_params(m, u), DT_F32};
}

static inline void dt_model_params_any_done(struct dt_model *m, int u, struct dt_wref w)
{
    if (w.t == DT_F32) dt_model_params_done(m, u);
}

/* out = inp @ w^T (+ the bias that follows the OC x C weight in the unit, when bias). inp holds
 * activations of the model's compute type (fp32, or mixed precision's 16-bit type); out is of type
 * ot: the compute type, or fp32 where a loss reads it (fp32 compute: both fp32). */
static inline void dt_mm_forward(const struct dt_model *m, void *out, enum dt_dtype ot, const void *inp,
                                 struct dt_wref w, bool bias, int BT, int C, int OC)
{
    const void *b = bias ? (const char *)w.p + (size_t)OC * C * dt_dtype_size(w.t) : NULL;
    if (m->compute == DT_F32) m->k->matmul_forward(m->kc, out, inp, w.p, b, BT, C, OC);
    else m->k->matmul_forward_lp(m->kc, out, ot, inp, w.p, b, w.t, BT, C, OC, m->compute);
}

/* dout of type dt (the compute type, or fp32: a residual stream's or a loss's gradient); dinp, dw
 * and db fp32; set: the DT_SET_* outputs to overwrite (kernels.h) */
static inline void dt_mm_backward(const struct dt_model *m, float *dinp, float *dw, float *db, const void *dout,
                                  enum dt_dtype dt, const void *inp, struct dt_wref w, int BT, int C, int OC,
                                  unsigned set)
{
    if (m->compute == DT_F32) m->k->matmul_backward(m->kc, dinp, dw, db, dout, inp, w.p, BT, C, OC, set);
    else m->k->matmul_backward_lp(m->kc, dinp, dw, db, dout, dt, inp, w.p, w.t, BT, C, OC, m->compute, set);
}
static inline float *dt_model_grads(struct dt_model *m, int u, bool *fresh) { return m->mem.grads(m->mem_ctx, u, fresh); }
/* unit u's gradients, zeroed when fresh: for the ops that only add */
static inline float *dt_model_grads_added(struct dt_model *m, int u)
{
    bool fresh;
    float *g = dt_model_grads(m, u, &fresh);
    if (fresh) m->k->zero(m->kc, g, m->units[u].numel * sizeof(float));
    return g;
}
static inline void dt_model_grads_done(struct dt_model *m, int u) { m->mem.grads_done(m->mem_ctx, u); }

/* Use m->params and m->grads for every unit (no strategy; model.c). */
void dt_model_own_mem(struct dt_model *m);
/* Free m->params and m->grads: a strategy that keeps the state elsewhere. */
void dt_model_drop_buffers(struct dt_model *m);

static inline void dt_model_free(struct dt_model *m)
{
    if (m) m->iface.free(m);
}

#endif
