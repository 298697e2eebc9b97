/*
 * gpt.c - GPT-2 forward and backward, written out layer by layer on the
 * kernel table (see gpt.h). All activations live in one arena sized at
 * creation; with activation checkpointing the arena keeps each block's input
 * and one shared set of block internals, which backward recomputes. The
 * residual stream is fp32; what a block computes between its ops is of the
 * activation type (fp32, or mixed precision's 16-bit type, as torch.autocast
 * keeps it), and so are the logits.
 *
 * Parameters are layer-major, so that every unit (model.h) is one contiguous
 * range: the token embedding in blocks of vb vocabulary rows (one unit each;
 * the LM head and the embedding lookup walk them), the positions, each
 * (weight, bias) pair of each transformer block, the final layernorm. llm.c
 * keeps the same tensors tensor-major (all layers' qkvw together, ...);
 * dt_gpt_from_llmc / dt_gpt_to_llmc convert.
 *
 * Shapes: B batch, T time, C channels, NH heads, V vocabulary, L layers.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/error.h"
#include "core/half.h"
#include "core/mem.h"
#include "core/rng.h"
#include "model/gpt.h"
#include "model/lm_head.h"

/* a block's tensors, in llm.c's order */
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, NB };
/* a block's units: each (weight, bias) pair, the tensors one kernel call reads together; small units keep
 * what ZeRO-3 holds gathered at once small (the largest is fc's, 4C^2 + 4C) */
enum { P_LN1, P_QKV, P_ATTPROJ, P_LN2, P_FC, P_FCPROJ, NPAIR };
/* llm.c's 16 tensors: wte, wpe, the block tensors, lnfw, lnfb */
#define NLLMC (NB + 4)

/* a block's activations: void * of the activation type, float * fp32 */
struct block {
    void *ln1;                  /* (B,T,C) */
    float *ln1_mean, *ln1_rstd; /* (B,T), (B,T) */
    void *qkv;                  /* (B,T,3C) */
    void *atty;                 /* (B,T,C) */
    float *att;                 /* what attention backward needs: each row's log-sum-exp (B,NH,T) */
    float *res2;                /* (B,T,C), the residual stream */
    void *ln2;
    float *ln2_mean, *ln2_rstd;
    void *fch, *fch_gelu; /* (B,T,4C) */
};

struct gpt {
    struct dt_model base;
    struct dt_gpt_config c;
    int B, T;
    struct dt_vocab voc;        /* the token embedding's units: chunks 0 .. voc.nchunks-1 */
    int u_wpe, u_block0, u_lnf; /* unit indices */
    size_t in_block[NB + 1];   /* each block tensor's offset in its block; [NB]: the block's size */
    struct dt_unit *units;
    struct dt_param_view *views;
    char (*names)[24];
    enum dt_dtype at;     /* the activation type, c.activations */
    bool gelu_fused;      /* 16-bit, c.fuse_gelu, and the kernels run GELU in the MLP's matmuls (gelu_fused) */
    struct dt_lm_mem mem; /* the parameters' buffers, the arena, the tokens */
    float **resid;        /* (L+1) x (B,T,C): resid[0] is the embedding, resid[l+1] block l's output */
    struct block *blk;    /* L entries; all equal under activation checkpointing */
    void *proj;           /* (B,T,C) scratch for projections before the residual add */
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    struct dt_lm_head head; /* tied to the token embedding: its logits, dlogits after a training forward */
    /* gradient scratch, reused by every layer: the matmuls' dinp in fp32, dqkv and dfch (a matmul's
     * dout, written by attention's and GELU's backward) of the activation type; dres_lp the residual
     * stream's gradient rounded to it by layernorm's backward, for the projections' backward (NULL
     * in fp32, where they read dres) */
    float *dres, *dln, *datty, *dfch_gelu, *attn_scratch;
    void *dqkv, *dfch, *dres_lp;
};

size_t dt_gpt_num_params(const struct dt_gpt_config *c)
{
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer;
    return (size_t)c->vocab_size * C + (size_t)c->max_seq_len * C + L * (12 * C * C + 13 * C) + 2 * C;
}

/* The units (model.h) of a GPT of this shape, in buffer order, into units (NULL: only count). */
static int units_of(const struct dt_gpt_config *c, struct dt_unit *units)
{
    size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size, off = 0;
    size_t pair[NPAIR] = {2 * C, 3 * C * C + 3 * C, C * C + C, 2 * C, 4 * C * C + 4 * C, 4 * C * C + C};
    int vb = dt_vocab_of(c->vocab_size).vb, n = 0;
    for (size_t v0 = 0; v0 < V; v0 += (size_t)vb) {
        size_t rows = V - v0 < (size_t)vb ? V - v0 : (size_t)vb;
        if (units) units[n] = (struct dt_unit){off, rows * C};
        off += rows * C;
        n++;
    }
    if (units) units[n] = (struct dt_unit){off, (size_t)c->max_seq_len * C};
    off += (size_t)c->max_seq_len * C;
    n++;
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < NPAIR; k++, n++) {
            if (units) units[n] = (struct dt_unit){off, pair[k]};
            off += pair[k];
        }
    if (units) units[n] = (struct dt_unit){off, 2 * C};
    return n + 1;
}

dt_status_t dt_gpt_units(const struct dt_gpt_config *c, struct dt_unit **units, int *n)
{
    *n = units_of(c, NULL);
    *units = calloc((size_t)*n, sizeof **units);
    if (!*units) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    units_of(c, *units);
    return DT_SUCCESS;
}

/* GPT-2's init of llm.c's tensor i (0 wte, 1 wpe, 2 + b block tensor b, then lnfw, lnfb) from its
 * element first on: N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2L)), norms' weights 1,
 * biases 0 */
static struct dt_init init_of(const struct gpt *g, int i, size_t first)
{
    int b = i - 2; /* the block tensor, for i in [2, NLLMC - 2) */
    bool block = i >= 2 && i < NLLMC - 2;
    if ((block && (b == LN1W || b == LN2W)) || i == NLLMC - 2) return (struct dt_init){DT_INIT_CONST, 1.0f, 0, 0};
    if ((block && (b == LN1B || b == LN2B || b == QKVB || b == ATTPROJB || b == FCB || b == FCPROJB)) || i == NLLMC - 1)
        return (struct dt_init){DT_INIT_CONST, 0.0f, 0, 0};
    float std = block && (b == ATTPROJW || b == FCPROJW) ? 0.02f / sqrtf(2.0f * (float)g->c.n_layer) : 0.02f;
    return (struct dt_init){DT_INIT_NORMAL, std, (uint64_t)i, first};
}

static dt_status_t layout(struct gpt *g)
{
    int C = g->c.n_embd, L = g->c.n_layer, V = g->c.vocab_size, maxT = g->c.max_seq_len;
    static const struct {
        const char *name;
        int rows, cols; /* in units of C; cols 0: a vector */
        bool decay;
    } bt[NB] = {{"ln1w", 1, 0, false}, {"ln1b", 1, 0, false},      {"qkvw", 3, 1, true},  {"qkvb", 3, 0, false},
                {"attprojw", 1, 1, true}, {"attprojb", 1, 0, false}, {"ln2w", 1, 0, false}, {"ln2b", 1, 0, false},
                {"fcw", 4, 1, true},   {"fcb", 4, 0, false},      {"fcprojw", 1, 4, true}, {"fcprojb", 1, 0, false}};
    g->voc = dt_vocab_of(V);
    g->u_wpe = g->voc.nchunks;
    g->u_block0 = g->u_wpe + 1;
    g->u_lnf = g->u_block0 + L * NPAIR;
    int nunits = g->u_lnf + 1, nviews = 4 + NB * L;
    g->units = calloc((size_t)nunits, sizeof *g->units);
    g->views = calloc((size_t)nviews, sizeof *g->views);
    g->names = calloc((size_t)nviews, sizeof *g->names);
    if (!g->units || !g->views || !g->names) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the model");
    size_t off = 0;
    for (int i = 0; i < NB; i++) {
        g->in_block[i] = off;
        off += (size_t)bt[i].rows * C * (bt[i].cols ? (size_t)bt[i].cols * C : 1);
    }
    g->in_block[NB] = off;
    int nv = 0;
#define VIEW(nm, o, n, dec, nd, s0, s1)                                                                         \
    g->views[nv] = (struct dt_param_view){g->names[nv], (o), (n), (dec), (nd), {(s0), (s1), 0}, {0}};          \
    snprintf(g->names[nv], sizeof g->names[nv], "%s", nm);                                                     \
    nv++
    off = 0;
    units_of(&g->c, g->units);
    off = (size_t)V * C;
    VIEW("wte", 0, (size_t)V * C, g->c.decay_embeddings, 2, V, C);
    VIEW("wpe", off, (size_t)maxT * C, g->c.decay_embeddings, 2, maxT, C);
    off += (size_t)maxT * C;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < NB; i++) {
            char nm[24];
            snprintf(nm, sizeof nm, "h.%d.%s", l, bt[i].name);
            size_t n = g->in_block[i + 1] - g->in_block[i];
            VIEW(nm, off + g->in_block[i], n, bt[i].decay, bt[i].cols ? 2 : 1, bt[i].rows * C, bt[i].cols * C);
        }
        off += g->in_block[NB];
    }
    VIEW("lnfw", off, (size_t)C, false, 1, C, 0);
    VIEW("lnfb", off + C, (size_t)C, false, 1, C, 0);
#undef VIEW
    /* GPT-2's init, each of llm.c's tensors its own stream in llm.c's order, so the values are the
     * same whatever the layout: a layer's view is that layer's slice of its tensor's stream */
    g->views[0].init = init_of(g, 0, 0);
    g->views[1].init = init_of(g, 1, 0);
    for (int l = 0; l < L; l++)
        for (int i = 0; i < NB; i++) g->views[2 + l * NB + i].init = init_of(g, 2 + i, (size_t)l * g->views[2 + i].numel);
    g->views[2 + L * NB].init = init_of(g, NLLMC - 2, 0);
    g->views[3 + L * NB].init = init_of(g, NLLMC - 1, 0);
    struct dt_model *m = &g->base;
    m->units = g->units;
    m->nunits = nunits;
    m->views = g->views;
    m->n_linear = 4 * L;
    m->nviews = nv;
    m->nparams = off + 2 * (size_t)C;
    return DT_SUCCESS;
}

/* block l's unit for a (weight, bias) pair, and that pair's weight elements (its bias follows) */
static int pair_unit(const struct gpt *g, int l, int pair) { return g->u_block0 + l * NPAIR + pair; }
static size_t pair_weight(const struct gpt *g, int pair) { return g->in_block[2 * pair + 1] - g->in_block[2 * pair]; }

static const float *P(struct gpt *g, int l, int pair) { return dt_model_params(&g->base, pair_unit(g, l, pair)); }
static void done(struct gpt *g, int l, int pair) { dt_model_params_done(&g->base, pair_unit(g, l, pair)); }

/* the index fp8-mixed knows block l's linear layer pair by (model.h): four a block, in the order the
 * forward runs them */
static int fp8_linear(int l, int pair) { return 4 * l + pair - 1 - (pair > P_LN2); }

/* The rows a forward runs on: a training batch's B x T, or generation's n new tokens at positions pos
 * .. pos + n - 1 of the first row, attending through the cache. */
struct rows {
    int B, T, pos;
    bool cached;
};

static struct rows batch_rows(const struct gpt *g) { return (struct rows){g->B, g->T, 0, false}; }

/* out = linear(inp) with pair's weight and bias, activations in and out, over BT rows */
static void linear(struct gpt *g, int l, int pair, void *out, const void *inp, int C, int OC, int BT)
{
    int u = pair_unit(g, l, pair);
    struct dt_wref w = dt_model_params_any(&g->base, u);
    dt_mm_forward(&g->base, out, g->at, inp, w, true, BT, C, OC, fp8_linear(l, pair));
    dt_model_params_any_done(&g->base, u, w);
}

static void norm(struct gpt *g, int l, int pair, void *out, float *mean, float *rstd, const float *inp, int BT)
{
    const float *w = P(g, l, pair);
    int C = g->c.n_embd;
    g->base.k->layernorm_forward(g->base.kc, out, g->at, mean, rstd, inp, w, w + C, BT, C);
    done(g, l, pair);
}

/* Whether the MLP may run GELU in its matmuls (fc's forward, the projection's backward): asked for
 * (c.fuse_gelu, which fp8-mixed's config leaves off, so the fp32 dinp the ops apart need is carved:
 * dfch_gelu) and with 16-bit activations; the kernels must offer it too (create) */
static bool gelu_wanted(const struct dt_gpt_config *c) { return c->fuse_gelu && c->activations != DT_F32; }

/* pre = the pair's linear layer on inp, out = gelu(pre), in one matmul */
static void linear_gelu(struct gpt *g, int l, int pair, void *out, void *pre, const void *inp, int C, int OC, int BT)
{
    int u = pair_unit(g, l, pair);
    struct dt_wref w = dt_model_params_any(&g->base, u);
    g->base.k->matmul_gelu_forward_lp(g->base.kc, out, pre, inp, w.p, dt_wref_bias(w, C, OC), w.t, BT, C, OC, g->at);
    dt_model_params_any_done(&g->base, u, w);
}

/* x: block l's input, out its output; out NULL: recomputing the block's internals for backward,
 * whose output the next block's input already holds */
static void block_forward(struct gpt *g, int l, const float *x, float *out, struct rows r)
{
    const struct dt_kernels *k = g->base.k;
    struct dt_kctx *kc = g->base.kc;
    int B = r.B, T = r.T, BT = B * T, C = g->c.n_embd, NH = g->c.n_head;
    size_t BTC = (size_t)BT * C;
    struct block *b = &g->blk[l];
    norm(g, l, P_LN1, b->ln1, b->ln1_mean, b->ln1_rstd, x, BT);
    linear(g, l, P_QKV, b->qkv, b->ln1, C, 3 * C, BT);
    if (r.cached)
        k->attention_cached(kc, b->atty, b->qkv, dt_kv_keys(&g->mem.kv, l), dt_kv_values(&g->mem.kv, l), g->at, B, T,
                            r.pos, g->T, C, NH, NH);
    else k->attention_forward(kc, b->atty, b->att, b->qkv, g->at, B, T, C, NH, NH);
    linear(g, l, P_ATTPROJ, g->proj, b->atty, C, C, BT);
    k->residual_forward(kc, b->res2, x, g->proj, g->at, BTC);
    norm(g, l, P_LN2, b->ln2, b->ln2_mean, b->ln2_rstd, b->res2, BT);
    if (g->gelu_fused) {
        linear_gelu(g, l, P_FC, b->fch_gelu, b->fch, b->ln2, C, 4 * C, BT);
    } else {
        linear(g, l, P_FC, b->fch, b->ln2, C, 4 * C, BT);
        k->gelu_forward(kc, b->fch_gelu, b->fch, g->at, 4 * BTC);
    }
    if (!out) return;
    linear(g, l, P_FCPROJ, g->proj, b->fch_gelu, 4 * C, C, BT);
    k->residual_forward(kc, out, b->res2, g->proj, g->at, BTC);
}

/* dinp (fp32) = d loss / d inp of the pair's linear layer, its parameters' gradients added; dout of
 * type dt */
static void linear_backward(struct gpt *g, int l, int pair, float *dinp, const void *dout, enum dt_dtype dt,
                            const void *inp, int C, int OC)
{
    int u = pair_unit(g, l, pair);
    struct dt_wref w = dt_model_params_any(&g->base, u);
    bool fresh;
    float *dw = dt_model_grads(&g->base, u, &fresh);
    dt_mm_backward(&g->base, dinp, dw, dw + pair_weight(g, pair), dout, dt, inp, w, g->B * g->T, C, OC,
                   DT_SET_DINP | (fresh ? DT_SET_DPARAMS : 0), fp8_linear(l, pair));
    dt_model_grads_done(&g->base, u);
    dt_model_params_any_done(&g->base, u, w);
}

/* dpre (of the activation type) = gelu'(pre) * d loss / d inp of the pair's linear layer, whose input
 * was gelu(pre), in one matmul; its parameters' gradients added */
static void linear_dgelu_backward(struct gpt *g, int l, int pair, void *dpre, const void *pre, const void *dout,
                                  enum dt_dtype dt, const void *inp, int C, int OC)
{
    int u = pair_unit(g, l, pair);
    struct dt_wref w = dt_model_params_any(&g->base, u);
    bool fresh;
    float *dw = dt_model_grads(&g->base, u, &fresh);
    g->base.k->matmul_dgelu_backward_lp(g->base.kc, dpre, pre, dw, dw + pair_weight(g, pair), dout, dt, inp, w.p, w.t,
                                        g->B * g->T, C, OC, g->at, fresh ? DT_SET_DPARAMS : 0);
    dt_model_grads_done(&g->base, u);
    dt_model_params_any_done(&g->base, u, w);
}

/* dres += d loss / d inp of the pair's layernorm, given dout */
static void norm_backward(struct gpt *g, int l, int pair, const float *dout, const float *inp, const float *mean,
                          const float *rstd)
{
    int u = pair_unit(g, l, pair), C = g->c.n_embd;
    const float *w = dt_model_params(&g->base, u);
    float *dw = dt_model_grads_added(&g->base, u);
    g->base.k->layernorm_backward(g->base.kc, g->dres, g->dres_lp, g->at, dw, dw + C, dout, inp, w, mean, rstd,
                                  g->B * g->T, C);
    dt_model_grads_done(&g->base, u);
    dt_model_params_done(&g->base, u);
}

/* the residual stream's gradient as a projection's backward reads it: in the activation type */
static const void *dres(const struct gpt *g) { return g->dres_lp ? g->dres_lp : g->dres; }

/* On entry dres = dL/d(block output); on return dL/d(block input). */
static void block_backward(struct gpt *g, int l, const float *x)
{
    const struct dt_kernels *k = g->base.k;
    struct dt_kctx *kc = g->base.kc;
    int B = g->B, T = g->T, C = g->c.n_embd, NH = g->c.n_head;
    size_t BTC = (size_t)B * T * C;
    struct block *b = &g->blk[l];
    if (g->gelu_fused) {
        linear_dgelu_backward(g, l, P_FCPROJ, g->dfch, b->fch, dres(g), g->at, b->fch_gelu, 4 * C, C);
    } else {
        linear_backward(g, l, P_FCPROJ, g->dfch_gelu, dres(g), g->at, b->fch_gelu, 4 * C, C);
        k->gelu_backward(kc, g->dfch, b->fch, g->dfch_gelu, g->at, 4 * BTC);
    }
    linear_backward(g, l, P_FC, g->dln, g->dfch, g->at, b->ln2, C, 4 * C);
    /* the residual path: dres becomes dL/d res2 */
    norm_backward(g, l, P_LN2, g->dln, b->res2, b->ln2_mean, b->ln2_rstd);
    linear_backward(g, l, P_ATTPROJ, g->datty, dres(g), g->at, b->atty, C, C);
    k->attention_backward(kc, g->dqkv, g->datty, b->qkv, b->atty, b->att, g->attn_scratch, g->at, B, T, C, NH, NH);
    linear_backward(g, l, P_QKV, g->dln, g->dqkv, g->at, b->ln1, C, 3 * C);
    norm_backward(g, l, P_LN1, g->dln, x, b->ln1_mean, b->ln1_rstd);
}

static float gpt_forward(struct dt_model *m, const struct dt_batch *batch, float grad_scale,
                           const struct dt_loss_sink *sink)
{
    struct gpt *g = m->impl;
    const struct dt_kernels *k = m->k;
    struct dt_kctx *kc = m->kc;
    int B = g->B, T = g->T, C = g->c.n_embd, L = g->c.n_layer, BT = B * T;
    dt_lm_tokens_in(m, &g->mem, batch, B, T);
    k->position_forward(kc, g->resid[0], dt_model_params(m, g->u_wpe), B, T, C);
    dt_model_params_done(m, g->u_wpe);
    dt_embed_forward(m, &g->voc, 0, g->resid[0], g->mem.inputs, BT, C);
    for (int l = 0; l < L; l++) block_forward(g, l, g->resid[l], g->resid[l + 1], batch_rows(g));
    const float *ln = dt_model_params(m, g->u_lnf);
    k->layernorm_forward(kc, g->lnf, g->at, g->lnf_mean, g->lnf_rstd, g->resid[L], ln, ln + C, BT, C);
    dt_model_params_done(m, g->u_lnf);
    return dt_lm_head_forward(m, &g->head, g->lnf, grad_scale, sink);
}

static dt_status_t gpt_decode(struct dt_model *m, const int32_t *tokens, int n, int pos, float *logits)
{
    struct gpt *g = m->impl;
    const struct dt_kernels *k = m->k;
    struct dt_kctx *kc = m->kc;
    int C = g->c.n_embd, L = g->c.n_layer;
    DT_CHECK(dt_decode_check(n, pos, g->T, C / g->c.n_head));
    DT_CHECK(dt_kv_cache_get(m, &g->mem.kv, L, g->T, g->c.n_head, C / g->c.n_head));
    k->copy(kc, g->mem.inputs, tokens, (size_t)n * sizeof(int32_t), DT_COPY_TO_DEVICE);
    k->position_forward(kc, g->resid[0], dt_model_params(m, g->u_wpe) + (size_t)pos * C, 1, n, C);
    dt_model_params_done(m, g->u_wpe);
    dt_embed_forward(m, &g->voc, 0, g->resid[0], g->mem.inputs, n, C);
    for (int l = 0; l < L; l++) block_forward(g, l, g->resid[l], g->resid[l + 1], (struct rows){1, n, pos, true});
    const float *ln = dt_model_params(m, g->u_lnf);
    k->layernorm_forward(kc, g->lnf, g->at, g->lnf_mean, g->lnf_rstd, g->resid[L] + (size_t)(n - 1) * C, ln, ln + C,
                         1, C);
    dt_model_params_done(m, g->u_lnf);
    dt_lm_head_row(m, &g->head, g->lnf, logits);
    return DT_SUCCESS;
}

static void gpt_decode_end(struct dt_model *m)
{
    struct gpt *g = m->impl;
    dt_kv_cache_free(m, &g->mem.kv);
}

static void gpt_backward(struct dt_model *m)
{
    struct gpt *g = m->impl;
    const struct dt_kernels *k = m->k;
    struct dt_kctx *kc = m->kc;
    int B = g->B, T = g->T, C = g->c.n_embd, L = g->c.n_layer, BT = B * T;
    size_t BTC = (size_t)BT * C;
    k->zero(kc, g->dres, BTC * sizeof(float));
    dt_lm_head_backward(m, &g->head, g->lnf, g->dln);
    const float *w = dt_model_params(m, g->u_lnf);
    float *dw = dt_model_grads_added(m, g->u_lnf);
    k->layernorm_backward(kc, g->dres, g->dres_lp, g->at, dw, dw + C, g->dln, g->resid[L], w, g->lnf_mean,
                          g->lnf_rstd, BT, C);
    dt_model_grads_done(m, g->u_lnf);
    dt_model_params_done(m, g->u_lnf);
    for (int l = L - 1; l >= 0; l--) {
        if (g->c.activation_checkpointing) block_forward(g, l, g->resid[l], NULL, batch_rows(g));
        block_backward(g, l, g->resid[l]);
    }
    k->position_backward(kc, dt_model_grads_added(m, g->u_wpe), g->dres, B, T, C);
    dt_model_grads_done(m, g->u_wpe);
    /* the input tokens' rows of the token embedding, last */
    m->mem.rows(m->mem_ctx, 0, g->mem.inputs, g->dres, BT, C);
}

static void gpt_free(struct dt_model *m)
{
    struct gpt *g = m->impl;
    dt_lm_mem_free(m, &g->mem);
    free(g->resid);
    free(g->blk);
    free(g->units);
    free(g->views);
    free(g->names);
    free(g);
}

/* Lay the activations out from base (NULL: only count); returns the bytes they take, *kept those of
 * the first part, what forward keeps for backward (the gradient scratch follows). */
static size_t carve(struct gpt *g, char *base, size_t natt, size_t nscratch, size_t *kept)
{
    int C = g->c.n_embd, V = g->c.vocab_size, L = g->c.n_layer;
    size_t BT = (size_t)g->B * g->T, BTC = BT * C;
    enum dt_dtype at = g->at;
    size_t nblocks = g->c.activation_checkpointing ? 1 : (size_t)L;
    struct dt_cursor cur = {base, 0};
    for (int l = 0; l <= L; l++) g->resid[l] = dt_take(&cur, BTC, DT_F32);
    for (size_t i = 0; i < nblocks; i++) {
        struct block *b = &g->blk[i];
        b->ln1 = dt_take(&cur, BTC, at);
        b->ln1_mean = dt_take(&cur, BT, DT_F32);
        b->ln1_rstd = dt_take(&cur, BT, DT_F32);
        b->qkv = dt_take(&cur, 3 * BTC, at);
        b->atty = dt_take(&cur, BTC, at);
        b->att = dt_take(&cur, natt, DT_F32);
        b->res2 = dt_take(&cur, BTC, DT_F32);
        b->ln2 = dt_take(&cur, BTC, at);
        b->ln2_mean = dt_take(&cur, BT, DT_F32);
        b->ln2_rstd = dt_take(&cur, BT, DT_F32);
        b->fch = dt_take(&cur, 4 * BTC, at);
        b->fch_gelu = dt_take(&cur, 4 * BTC, at);
    }
    for (int l = (int)nblocks; l < L; l++) g->blk[l] = g->blk[0];
    g->proj = dt_take(&cur, BTC, at);
    g->lnf = dt_take(&cur, BTC, at);
    g->lnf_mean = dt_take(&cur, BT, DT_F32);
    g->lnf_rstd = dt_take(&cur, BT, DT_F32);
    g->head.logits = dt_take(&cur, BT * V, at);
    g->head.losses = dt_take(&cur, BT, DT_F32);
    *kept = cur.off;
    g->dres = dt_take(&cur, BTC, DT_F32);
    g->dln = dt_take(&cur, BTC, DT_F32);
    g->datty = dt_take(&cur, BTC, DT_F32);
    g->dqkv = dt_take(&cur, 3 * BTC, at);
    g->dfch = dt_take(&cur, 4 * BTC, at);
    g->dfch_gelu = g->gelu_fused ? NULL : dt_take(&cur, 4 * BTC, DT_F32);
    g->dres_lp = at == DT_F32 ? NULL : dt_take(&cur, BTC, at);
    g->attn_scratch = dt_take(&cur, nscratch, DT_F32);
    return cur.off;
}

size_t dt_gpt_arena_bytes(const struct dt_gpt_config *c, int B, int T, size_t natt, size_t nscratch)
{
    struct gpt g = {.c = *c, .B = B, .T = T, .at = c->activations, .gelu_fused = gelu_wanted(c)};
    g.resid = calloc((size_t)c->n_layer + 1, sizeof *g.resid);
    g.blk = calloc((size_t)c->n_layer, sizeof *g.blk);
    size_t kept, bytes = g.resid && g.blk ? carve(&g, NULL, natt, nscratch, &kept) : 0;
    free(g.resid);
    free(g.blk);
    return bytes;
}

dt_status_t dt_gpt_create(const struct dt_gpt_config *c, const struct dt_kernels *k, struct dt_kctx *kc, int B, int T,
                          struct dt_model **out)
{
    *out = NULL;
    if (c->n_embd % c->n_head || T > c->max_seq_len || B < 1 || T < 1)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: gpt: bad shape (n_embd %d, n_head %d, T %d, max %d)",
                        c->n_embd, c->n_head, T, c->max_seq_len);
    struct gpt *g = calloc(1, sizeof *g);
    if (!g) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the model");
    g->c = *c;
    g->B = B;
    g->T = T;
    struct dt_model *m = &g->base;
    m->iface = (struct dt_model_i){.forward = gpt_forward, .backward = gpt_backward, .decode = gpt_decode,
                                   .decode_end = gpt_decode_end, .free = gpt_free};
    m->impl = g;
    m->k = k;
    m->kc = kc;
    dt_status_t rc = layout(g);
    if (rc != DT_SUCCESS) {
        gpt_free(m);
        return rc;
    }
    int C = c->n_embd, NH = c->n_head, L = c->n_layer;
    size_t nparams = m->nparams;
    g->at = c->activations;
    m->compute = c->activations;
    g->gelu_fused = gelu_wanted(c) && k->gelu_fused && k->gelu_fused(kc);
    g->resid = calloc((size_t)L + 1, sizeof *g->resid);
    g->blk = calloc((size_t)L, sizeof *g->blk);
    if (!g->resid || !g->blk) {
        gpt_free(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the model");
    }
    size_t nacts, natt = k->attention_saved(B, NH, T), nscratch = k->attention_scratch(B, T, C, NH, NH, g->at);
    size_t bytes = carve(g, NULL, natt, nscratch, &nacts);
    rc = dt_lm_mem_alloc(m, &g->mem, bytes, B, T);
    if (rc != DT_SUCCESS) {
        gpt_free(m);
        return rc;
    }
    carve(g, g->mem.arena, natt, nscratch, &nacts);
    g->head = (struct dt_lm_head){g->voc, 0, B * T, C, g->at, g->head.logits, g->head.losses, g->mem.targets};
    m->activation_bytes = nacts;
    m->flops_per_token = 6.0 * (double)nparams + 12.0 * L * C * T;
    *out = m;
    return DT_SUCCESS;
}

/*
 * llm.c's order: wte (V,C), wpe (maxT,C), then each block tensor for all layers (ln1w (L,C),
 * ln1b (L,C), qkvw (L,3C,C), ...), lnfw, lnfb. walk_llmc calls move(ctx, ours, llmc, n) for every
 * run of n values at offset ours in this model's order and llmc in llm.c's; each direction, and the
 * file reader, walks the same list.
 */
typedef dt_status_t (*move_fn)(void *ctx, size_t ours, size_t llmc, size_t n);

static dt_status_t walk_llmc(const struct gpt *g, move_fn move, void *ctx)
{
    int C = g->c.n_embd, L = g->c.n_layer;
    size_t wte = (size_t)g->c.vocab_size * C, wpe = (size_t)g->c.max_seq_len * C, off = 0;
    DT_CHECK(move(ctx, 0, 0, wte + wpe)); /* wte and wpe: the same place in both orders */
    off += wte + wpe;
    size_t blocks = wte + wpe; /* block 0 in ours */
    for (int i = 0; i < NB; i++) {
        size_t n = g->in_block[i + 1] - g->in_block[i];
        for (int l = 0; l < L; l++, off += n) DT_CHECK(move(ctx, blocks + (size_t)l * g->in_block[NB] + g->in_block[i], off, n));
    }
    return move(ctx, blocks + (size_t)L * g->in_block[NB], off, 2 * (size_t)C);
}

struct buffers {
    float *ours, *llmc;
};
static dt_status_t from_llmc(void *ctx, size_t ours, size_t llmc, size_t n)
{
    const struct buffers *b = ctx;
    memcpy(b->ours + ours, b->llmc + llmc, n * sizeof(float));
    return DT_SUCCESS;
}
static dt_status_t to_llmc(void *ctx, size_t ours, size_t llmc, size_t n)
{
    const struct buffers *b = ctx;
    memcpy(b->llmc + llmc, b->ours + ours, n * sizeof(float));
    return DT_SUCCESS;
}

void dt_gpt_from_llmc(const struct dt_model *m, const float *llmc, float *ours)
{
    walk_llmc(m->impl, from_llmc, &(struct buffers){ours, (float *)llmc});
}

void dt_gpt_to_llmc(const struct dt_model *m, const float *ours, float *llmc)
{
    walk_llmc(m->impl, to_llmc, &(struct buffers){(float *)ours, llmc});
}

/* ---- llm.c's model file as a source of parameters: a rank reads the byte ranges of what it keeps */

struct llmc_file {
    const struct gpt *g;
    char *path;
    int fd;
    int32_t h[8];                /* the header's shape: max_seq_len h[2], padded vocabulary h[7] */
    size_t lo, hi;               /* the range asked for, in our order */
    float *dst;                  /* where [lo, hi) goes */
    uint64_t *bytes_read;
};

/* the file's byte offset of llm.c-order element e: wte is padded to h[7] rows and wpe holds h[2] */
static uint64_t file_at(const struct llmc_file *f, size_t e)
{
    size_t C = (size_t)f->g->c.n_embd, wte = (size_t)f->g->c.vocab_size * C, wpe = (size_t)f->g->c.max_seq_len * C;
    size_t at = e < wte ? e : e < wte + wpe ? (size_t)f->h[7] * C + (e - wte)
                                            : (size_t)f->h[7] * C + (size_t)f->h[2] * C + (e - wte - wpe);
    return 1024 + (uint64_t)at * sizeof(float);
}

static dt_status_t read_run(void *ctx, size_t ours, size_t llmc, size_t n)
{
    struct llmc_file *f = ctx;
    size_t lo = ours > f->lo ? ours : f->lo, hi = ours + n < f->hi ? ours + n : f->hi;
    size_t wte = (size_t)f->g->c.vocab_size * f->g->c.n_embd;
    while (lo < hi) {
        /* wte's padding lies between wte and wpe in the file: a run is read up to that boundary */
        size_t e = llmc + (lo - ours), k = hi - lo;
        if (e < wte && e + k > wte) k = wte - e;
        char *p = (char *)(f->dst + (lo - f->lo));
        uint64_t at = file_at(f, e);
        for (size_t left = k * sizeof(float); left;) {
            ssize_t got = pread(f->fd, p, left, (off_t)at);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0)
                return dt_error(DT_ERR_DATA, "%s: error: %s at byte %llu: the file ends before the parameters do",
                                f->path, got < 0 ? strerror(errno) : "truncated", (unsigned long long)at);
            p += got, at += (uint64_t)got, left -= (size_t)got;
            *f->bytes_read += (uint64_t)got;
        }
        lo += k;
    }
    return DT_SUCCESS;
}

static dt_status_t llmc_fill(void *ctx, size_t off, size_t n, float *dst)
{
    struct llmc_file *f = ctx;
    f->lo = off, f->hi = off + n, f->dst = dst;
    return walk_llmc(f->g, read_run, f);
}

static void llmc_close(void *ctx)
{
    struct llmc_file *f = ctx;
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

dt_status_t dt_gpt_llmc_source(const struct dt_model *m, const char *path, struct dt_param_source *s)
{
    const struct gpt *g = m->impl;
    struct llmc_file *f = calloc(1, sizeof *f);
    *s = (struct dt_param_source){.fill = llmc_fill, .close = llmc_close, .ctx = f};
    snprintf(s->what, sizeof s->what, "model.init_from %s", path);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        s->ctx = NULL, s->close = NULL;
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", path);
    }
    f->g = g;
    f->bytes_read = &s->bytes_read;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    dt_status_t rc = DT_SUCCESS;
    struct stat st;
    ssize_t got = f->fd >= 0 ? pread(f->fd, f->h, sizeof f->h, 0) : -1;
    if (f->fd < 0 || fstat(f->fd, &st) != 0) {
        rc = dt_error(DT_ERR_DATA, "%s: error: cannot read model.init_from: %s", path, strerror(errno));
    } else if (got != (ssize_t)sizeof f->h || f->h[0] != 20240326) {
        rc = dt_error(DT_ERR_DATA, "%s: error: not an llm.c model file: magic %d at byte 0, expected 20240326\n"
                      "  hint: model.init_from takes the gpt2_124M.bin that llm.c's train_gpt2.py writes", path,
                      got == (ssize_t)sizeof f->h ? f->h[0] : 0);
    } else if (f->h[1] != 3) {
        rc = dt_error(DT_ERR_DATA, "%s: error: llm.c model version %d at byte 4; dtrun reads version 3 (float32)\n"
                      "  hint: use the float32 file (gpt2_124M.bin, not gpt2_124M_bf16.bin)", path, f->h[1]);
    } else if (f->h[2] < g->c.max_seq_len || f->h[3] != g->c.vocab_size || f->h[4] != g->c.n_layer ||
               f->h[5] != g->c.n_head || f->h[6] != g->c.n_embd || f->h[7] < f->h[3]) {
        rc = dt_error(DT_ERR_CONFIG, "%s: error: the file holds max_seq_len %d, vocab_size %d, n_layer %d, n_head %d, "
                      "n_embd %d; the config asks for %d, %d, %d, %d, %d\n  hint: set model.* to the file's shape",
                      path, f->h[2], f->h[3], f->h[4], f->h[5], f->h[6], g->c.max_seq_len, g->c.vocab_size,
                      g->c.n_layer, g->c.n_head, g->c.n_embd);
    } else {
        /* every byte the parameters need is there, checked before any rank reads */
        size_t C = (size_t)g->c.n_embd, blocks = m->nparams - (size_t)g->c.vocab_size * C - (size_t)g->c.max_seq_len * C;
        uint64_t need = 1024 + ((uint64_t)f->h[7] * C + (uint64_t)f->h[2] * C + blocks) * sizeof(float);
        if ((uint64_t)st.st_size < need)
            rc = dt_error(DT_ERR_DATA, "%s: error: truncated: %llu bytes, and a model of this shape needs %llu\n"
                          "  hint: the file was cut short: write it again", path, (unsigned long long)st.st_size,
                          (unsigned long long)need);
    }
    if (rc != DT_SUCCESS) dt_source_close(s);
    return rc;
}

void dt_gpt_logits(const struct dt_model *m, float *out)
{
    const struct gpt *g = m->impl;
    dt_lm_head_logits(m, &g->head, out);
}

