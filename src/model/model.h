/*
 * model.h - what the trainer and the strategies see of a model: one flat
 * parameter space with named views, cut into units, a forward that returns
 * the mean loss (or adds it into a sink, returning 0), and a backward that
 * accumulates gradients.
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
 * A model allocates its activations only. Without a strategy it uses its own
 * full fp32 buffers, m->params and m->grads (dt_model_own_buffers), as unit
 * tests and the reference check do.
 */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"
#include "kernels/kernels.h"

/* How a view's values start in a random init, element by element, so that any range of it is drawn
 * alone (a rank draws only what it keeps, with the bits of a whole draw): element j of the view is
 * element first + j of the stream dt_rng_make(seed, stream) (core/rng.h). */
enum dt_init_kind { DT_INIT_CONST, DT_INIT_NORMAL, DT_INIT_UNIFORM };
struct dt_init {
    enum dt_init_kind kind;
    float scale;     /* const: the value; normal: its std; uniform: values in [-scale, scale) */
    uint64_t stream;
    size_t first;    /* a view that is a slice of a stream's tensor (GPT-2's layers of llm.c's tensors) */
};

struct dt_param_view {
    const char *name;
    size_t offset, numel;
    bool decay; /* weight decay applies (matrices; not biases, norms, and by default embeddings) */
    int ndim;
    int shape[3];
    struct dt_init init;
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
    /* Unit u gets no gradient from this backward but the rows that mem.rows brings (an untied token
     * embedding): a strategy that keeps the unit's gradients in part has nothing to reduce for it
     * (its part holds zeros until the rows are added), one that keeps them whole zeroes them. NULL
     * (or no hook): the unit's gradients are zeroed and done as any unit's. */
    void (*rows_only)(void *ctx, int u);
    /* Unit u's parameters as the strategy stores them, when that is the matmuls' 16-bit type and
     * they stay put until the optimizer step (mixed precision's storage under stages 0-2): the ops
     * that read any type (matmuls, the embedding lookup) take them as they are, with no widened
     * copy to make and nothing to release. NULL (or no hook): ask params. */
    const void *(*stored)(void *ctx, int u);
};

/* fp8-mixed's per-tensor scaling state (the trainer's, precision/fp8.h), which the linear layers quantise
 * with: linear j's input, weight and output gradient are tensors 3j, 3j + 1 and 3j + 2, scale[i] each
 * one's scale and amax[i] where its amax of this optimizer step is folded in (kernels.h, struct
 * dt_fp8_q); amax NULL: none recorded (current scaling, or an evaluation). gfmt: the gradients'
 * format (E5M2 under the hybrid format). All of it in tensor memory. */
struct dt_fp8_meta {
    float *scale, *amax;
    enum dt_fp8_fmt gfmt;
    bool current;
};

struct dt_model;

struct dt_model_i {
    /* Mean loss over the batch. With grad_scale != 0, leaves what backward needs,
     * scaling the loss gradient by grad_scale (1/accumulation steps). With a sink the loss goes
     * there and 0 is returned: the trainer's GPU runs forward into backward without the host
     * waiting for the loss in between. */
    float (*forward)(struct dt_model *m, const struct dt_batch *b, float grad_scale, const struct dt_loss_sink *sink);
    /* grads += d(grad_scale * mean loss)/d params */
    void (*backward)(struct dt_model *m);
    /* Generation (a language model's; NULL: an MLP): the logits (V, fp32, host memory) of the last of
     * n tokens (host) at positions pos .. pos + n - 1, each layer's keys and values kept in a cache
     * for the calls that follow: the prompt at pos 0, then one token a step. The cache (allocated
     * by the first call, until decode_end) holds the T positions the model was created for: pos + n
     * <= T. The forward's arithmetic on the first row of its arena, in its activation type. */
    dt_status_t (*decode)(struct dt_model *m, const int32_t *tokens, int n, int pos, float *logits);
    void (*decode_end)(struct dt_model *m);
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
    /* Its own fp32 buffers, only without a strategy (dt_model_own_buffers): a strategy keeps the
     * state, a rank's share of it, and serves the units through mem; a model never allocates them. */
    float *params, *grads;
    void *params_lp; /* generation's copy of params in the 16-bit compute type (dt_model_own_weights) */
    size_t activation_bytes; /* the activation arena, measured as allocated */
    double flops_per_token;  /* forward + backward, 6N plus attention (PaLM appendix B) */
    /* the operands of every matmul and the type activations are stored in between ops: DT_F32, or
     * DT_BF16 / DT_F16 (mixed precision: 16-bit activations, products accumulated in fp32), set by
     * the model's config at creation */
    enum dt_dtype compute;
    /* the linear layers fp8-mixed quantises (a transformer's four a block; not the LM head), and their
     * scaling state: NULL, or set by the trainer under fp8-mixed (compute DT_BF16) */
    int n_linear;
    const struct dt_fp8_meta *fp8;
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

/* How linear j's tensor i (0 input, 1 weight, 2 output gradient) is quantised; record: its amax folded
 * into the step's */
static inline struct dt_fp8_q dt_fp8_q_of(const struct dt_fp8_meta *f, int j, int i, bool record)
{
    int t = 3 * j + i;
    return (struct dt_fp8_q){f->scale + t, record && f->amax ? f->amax + t : NULL, i == 2 ? f->gfmt : DT_FP8_E4M3,
                             f->current};
}

/* out = inp @ w^T (+ the bias that follows the OC x C weight in the unit, when bias). inp holds
 * activations of the model's compute type (fp32, or mixed precision's 16-bit type); out is of type
 * ot: the compute type, or fp32 where a loss reads it (fp32 compute: both fp32). fp8: the linear
 * layer's index (0 .. n_linear - 1), quantised under fp8-mixed; -1: never quantised. */
/* the bias that follows the OC x C weight in a unit */
static inline const void *dt_wref_bias(struct dt_wref w, int C, int OC)
{
    return (const char *)w.p + (size_t)OC * C * dt_dtype_size(w.t);
}

static inline void dt_mm_forward(const struct dt_model *m, void *out, enum dt_dtype ot, const void *inp,
                                 struct dt_wref w, bool bias, int BT, int C, int OC, int fp8)
{
    const void *b = bias ? dt_wref_bias(w, C, OC) : NULL;
    if (m->compute == DT_F32) m->k->matmul_forward(m->kc, out, inp, w.p, b, BT, C, OC);
    else if (fp8 >= 0 && m->fp8) {
        struct dt_fp8_q qx = dt_fp8_q_of(m->fp8, fp8, 0, true), qw = dt_fp8_q_of(m->fp8, fp8, 1, true);
        m->k->matmul_forward_fp8(m->kc, out, ot, inp, w.p, b, w.t, BT, C, OC, &qx, &qw);
    } else m->k->matmul_forward_lp(m->kc, out, ot, inp, w.p, b, w.t, BT, C, OC, m->compute);
}

/* dout of type dt (the compute type, or fp32: a residual stream's or a loss's gradient); dinp, dw
 * and db fp32; set: the DT_SET_* outputs to overwrite (kernels.h); fp8 as dt_mm_forward's */
static inline void dt_mm_backward(const struct dt_model *m, float *dinp, float *dw, float *db, const void *dout,
                                  enum dt_dtype dt, const void *inp, struct dt_wref w, int BT, int C, int OC,
                                  unsigned set, int fp8)
{
    if (m->compute == DT_F32) m->k->matmul_backward(m->kc, dinp, dw, db, dout, inp, w.p, BT, C, OC, set);
    else if (fp8 >= 0 && m->fp8) {
        struct dt_fp8_q qx = dt_fp8_q_of(m->fp8, fp8, 0, false), qw = dt_fp8_q_of(m->fp8, fp8, 1, false),
                        qg = dt_fp8_q_of(m->fp8, fp8, 2, true);
        m->k->matmul_backward_fp8(m->kc, dinp, dw, db, dout, dt, inp, w.p, w.t, BT, C, OC, &qx, &qw, &qg, set);
    } else m->k->matmul_backward_lp(m->kc, dinp, dw, db, dout, dt, inp, w.p, w.t, BT, C, OC, m->compute, set);
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
/* unit u's gradient is only the rows mem.rows adds after it (mem.rows_only) */
static inline void dt_model_grads_rows_only(struct dt_model *m, int u)
{
    if (m->mem.rows_only) {
        m->mem.rows_only(m->mem_ctx, u);
        return;
    }
    dt_model_grads_added(m, u);
    dt_model_grads_done(m, u);
}

/*
 * Where a model's initial parameters come from: its random init, or a weights file. A source fills
 * any flat range of the parameter space with fp32 values in host memory, so a rank asks for what it
 * keeps and nothing more (src/strategy's ranges): no rank draws or reads the whole model.
 */
struct dt_param_source {
    char what[160]; /* for messages: "the random init (seed 1234)", "model.init_from hf" */
    dt_status_t (*fill)(void *ctx, size_t off, size_t n, float *dst);
    void (*close)(void *ctx);
    void *ctx;
    uint64_t bytes_read; /* bytes of files read so far (a file's sources) */
};

/* m's random init (its views' dt_init) with seed, as a source; the values of [off, off + n) */
void dt_model_init_source(const struct dt_model *m, uint64_t seed, struct dt_param_source *s);
void dt_model_init_range(const struct dt_model *m, uint64_t seed, size_t off, size_t n, float *dst);
static inline void dt_source_close(struct dt_param_source *s)
{
    if (s->close) s->close(s->ctx);
    s->close = NULL;
}

/* A model without a strategy (unit tests, the reference checks, export's layout): its own fp32
 * buffers m->params and m->grads (zeroed), which it then uses for every unit; filled from a source. */
dt_status_t dt_model_own_buffers(struct dt_model *m);
dt_status_t dt_model_fill_own(struct dt_model *m, struct dt_param_source *s);
/* A model for generation: its own parameters and no gradients, and with a 16-bit compute type a copy
 * of them in that type, which the matmuls read as they are (mem.stored), made by
 * dt_model_weights_ready once they are filled (dt_model_fill_own); round: the fp32 ones rounded to the
 * 16-bit type first, as a strategy's working copy holds them. */
dt_status_t dt_model_own_weights(struct dt_model *m);
void dt_model_weights_ready(struct dt_model *m, bool round);
/* Free m->params, m->grads and m->params_lp. */
void dt_model_drop_buffers(struct dt_model *m);

static inline void dt_model_free(struct dt_model *m)
{
    if (m) m->iface.free(m);
}

#endif
