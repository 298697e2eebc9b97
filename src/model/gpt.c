/*
 * gpt.c - GPT-2 forward and backward, written out layer by layer on the
 * kernel table (see gpt.h). All activations live in one arena sized at
 * creation; with activation checkpointing the arena keeps each block's input
 * and one shared set of block internals, which backward recomputes.
 *
 * Shapes: B batch, T time, C channels, NH heads, V vocabulary, L layers.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "core/rng.h"
#include "model/gpt.h"

/* most vocabulary columns per fp32 logits block with 16-bit logits: 2 MiB of scratch at B*T = 256,
 * and wide enough that sgemm keeps its full rate */
#define LOGIT_COLS 2048

enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB, NP };

struct block {
    float *ln1, *ln1_mean, *ln1_rstd; /* (B,T,C), (B,T), (B,T) */
    float *qkv;                       /* (B,T,3C) */
    float *atty;                      /* (B,T,C) */
    float *att;                       /* (B,NH,T,T) */
    float *res2;                      /* (B,T,C) */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu; /* (B,T,4C) */
};

struct gpt {
    struct dt_model base;
    struct dt_gpt_config c;
    int B, T;
    struct dt_param_view views[NP];
    struct dt_grad_seg *segs; /* lnf, then each layer from the last, then the embeddings */
    float *p[NP], *g[NP]; /* parameter and gradient tensors, inside the flat buffers */
    float *arena;
    uint16_t *packed;     /* L x per_block 16-bit activations (c.activations != DT_F32), else NULL */
    size_t per_block;     /* floats of one block's activations, contiguous from blk[l].ln1 */
    float **resid;        /* (L+1) x (B,T,C): resid[0] is the embedding, resid[l+1] block l's output */
    struct block *blk;    /* L entries; all equal under activation checkpointing */
    float *proj;          /* (B,T,C) scratch for projections before the residual add */
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;        /* (B,T,V); dlogits after a training forward. NULL with 16-bit activations: */
    uint16_t *logits_lp;  /* then they are kept here, block-major (kernels.h, softmax_xent_lp), */
    float *logit_block;   /* and computed vb vocabulary columns at a time in this (B,T,vb) scratch */
    int vb;
    float *losses;        /* (B,T) */
    /* gradient scratch, reused by every layer */
    float *dres, *dln, *dqkv, *datty, *dfch, *dfch_gelu, *attn_scratch;
    int32_t *inputs, *targets;
};

size_t dt_gpt_num_params(const struct dt_gpt_config *c)
{
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer;
    return (size_t)c->vocab_size * C + (size_t)c->max_seq_len * C + L * (12 * C * C + 13 * C) + 2 * C;
}

static void layout(struct gpt *g)
{
    int C = g->c.n_embd, L = g->c.n_layer, V = g->c.vocab_size, maxT = g->c.max_seq_len;
    const struct {
        const char *name;
        int ndim, s0, s1, s2;
        bool decay;
    } spec[NP] = {
        {"wte", 2, V, C, 0, g->c.decay_embeddings},
        {"wpe", 2, maxT, C, 0, g->c.decay_embeddings},
        {"ln1w", 2, L, C, 0, false},
        {"ln1b", 2, L, C, 0, false},
        {"qkvw", 3, L, 3 * C, C, true},
        {"qkvb", 2, L, 3 * C, 0, false},
        {"attprojw", 3, L, C, C, true},
        {"attprojb", 2, L, C, 0, false},
        {"ln2w", 2, L, C, 0, false},
        {"ln2b", 2, L, C, 0, false},
        {"fcw", 3, L, 4 * C, C, true},
        {"fcb", 2, L, 4 * C, 0, false},
        {"fcprojw", 3, L, C, 4 * C, true},
        {"fcprojb", 2, L, C, 0, false},
        {"lnfw", 1, C, 0, 0, false},
        {"lnfb", 1, C, 0, 0, false},
    };
    size_t off = 0;
    for (int i = 0; i < NP; i++) {
        size_t n = (size_t)spec[i].s0 * (spec[i].ndim > 1 ? (size_t)spec[i].s1 : 1) *
                   (spec[i].ndim > 2 ? (size_t)spec[i].s2 : 1);
        g->views[i] = (struct dt_param_view){spec[i].name, off, n, spec[i].decay, spec[i].ndim,
                                             {spec[i].s0, spec[i].s1, spec[i].s2}};
        off += n;
    }
}

static void block_forward(struct gpt *g, int l, const float *x, float *out)
{
    const struct dt_kernels *k = g->base.k;
    int B = g->B, T = g->T, C = g->c.n_embd, NH = g->c.n_head, BT = B * T;
    size_t BTC = (size_t)BT * C;
    struct block *b = &g->blk[l];
    k->layernorm_forward(b->ln1, b->ln1_mean, b->ln1_rstd, x, g->p[LN1W] + l * C, g->p[LN1B] + l * C, BT, C);
    dt_mm_forward(&g->base, b->qkv, b->ln1, g->p[QKVW] + (size_t)l * 3 * C * C, g->p[QKVB] + l * 3 * C, BT, C, 3 * C);
    k->attention_forward(b->atty, b->att, b->qkv, B, T, C, NH);
    dt_mm_forward(&g->base, g->proj, b->atty, g->p[ATTPROJW] + (size_t)l * C * C, g->p[ATTPROJB] + l * C, BT, C, C);
    k->residual_forward(b->res2, x, g->proj, BTC);
    k->layernorm_forward(b->ln2, b->ln2_mean, b->ln2_rstd, b->res2, g->p[LN2W] + l * C, g->p[LN2B] + l * C, BT, C);
    dt_mm_forward(&g->base, b->fch, b->ln2, g->p[FCW] + (size_t)l * 4 * C * C, g->p[FCB] + l * 4 * C, BT, C, 4 * C);
    k->gelu_forward(b->fch_gelu, b->fch, 4 * BTC);
    dt_mm_forward(&g->base, g->proj, b->fch_gelu, g->p[FCPROJW] + (size_t)l * 4 * C * C, g->p[FCPROJB] + l * C, BT, 4 * C,
                      C);
    k->residual_forward(out, b->res2, g->proj, BTC);
}

/* On entry dres = dL/d(block output); on return dL/d(block input). */
static void block_backward(struct gpt *g, int l, const float *x)
{
    const struct dt_kernels *k = g->base.k;
    int B = g->B, T = g->T, C = g->c.n_embd, NH = g->c.n_head, BT = B * T;
    size_t BTC = (size_t)BT * C;
    struct block *b = &g->blk[l];
    memset(g->dfch_gelu, 0, 4 * BTC * sizeof(float));
    dt_mm_backward(&g->base, g->dfch_gelu, g->g[FCPROJW] + (size_t)l * 4 * C * C, g->g[FCPROJB] + l * C, g->dres,
                       b->fch_gelu, g->p[FCPROJW] + (size_t)l * 4 * C * C, BT, 4 * C, C);
    memset(g->dfch, 0, 4 * BTC * sizeof(float));
    k->gelu_backward(g->dfch, b->fch, g->dfch_gelu, 4 * BTC);
    memset(g->dln, 0, BTC * sizeof(float));
    dt_mm_backward(&g->base, g->dln, g->g[FCW] + (size_t)l * 4 * C * C, g->g[FCB] + l * 4 * C, g->dfch, b->ln2,
                       g->p[FCW] + (size_t)l * 4 * C * C, BT, C, 4 * C);
    /* the residual path: dres becomes dL/d res2 */
    k->layernorm_backward(g->dres, g->g[LN2W] + l * C, g->g[LN2B] + l * C, g->dln, b->res2, g->p[LN2W] + l * C,
                          b->ln2_mean, b->ln2_rstd, BT, C);
    memset(g->datty, 0, BTC * sizeof(float));
    dt_mm_backward(&g->base, g->datty, g->g[ATTPROJW] + (size_t)l * C * C, g->g[ATTPROJB] + l * C, g->dres, b->atty,
                       g->p[ATTPROJW] + (size_t)l * C * C, BT, C, C);
    memset(g->dqkv, 0, 3 * BTC * sizeof(float));
    k->attention_backward(g->dqkv, g->datty, b->qkv, b->att, g->attn_scratch, B, T, C, NH);
    memset(g->dln, 0, BTC * sizeof(float));
    dt_mm_backward(&g->base, g->dln, g->g[QKVW] + (size_t)l * 3 * C * C, g->g[QKVB] + l * 3 * C, g->dqkv, b->ln1,
                       g->p[QKVW] + (size_t)l * 3 * C * C, BT, C, 3 * C);
    k->layernorm_backward(g->dres, g->g[LN1W] + l * C, g->g[LN1B] + l * C, g->dln, x, g->p[LN1W] + l * C,
                          b->ln1_mean, b->ln1_rstd, BT, C);
}

static float gpt_forward(struct dt_model *m, const struct dt_batch *batch, float grad_scale)
{
    struct gpt *g = m->impl;
    const struct dt_kernels *k = m->k;
    int B = g->B, T = g->T, C = g->c.n_embd, V = g->c.vocab_size, L = g->c.n_layer, BT = B * T;
    for (int b = 0; b < B; b++) {
        memcpy(g->inputs + b * T, batch->tokens + (size_t)b * (T + 1), (size_t)T * sizeof(int32_t));
        memcpy(g->targets + b * T, batch->tokens + (size_t)b * (T + 1) + 1, (size_t)T * sizeof(int32_t));
    }
    k->encoder_forward(g->resid[0], g->inputs, g->p[WTE], g->p[WPE], B, T, C);
    for (int l = 0; l < L; l++) {
        block_forward(g, l, g->resid[l], g->resid[l + 1]);
        if (g->packed) k->cast_to_lp(g->packed + (size_t)l * g->per_block, g->blk[0].ln1, g->per_block, g->c.activations);
    }
    k->layernorm_forward(g->lnf, g->lnf_mean, g->lnf_rstd, g->resid[L], g->p[LNFW], g->p[LNFB], BT, C);
    if (!g->logits_lp) {
        dt_mm_forward(&g->base, g->logits, g->lnf, g->p[WTE], NULL, BT, C, V);
        return k->softmax_xent(g->losses, g->logits, g->targets, grad_scale / (float)BT, BT, V);
    }
    for (int v0 = 0; v0 < V; v0 += g->vb) {
        int n = V - v0 < g->vb ? V - v0 : g->vb;
        dt_mm_forward(&g->base, g->logit_block, g->lnf, g->p[WTE] + (size_t)v0 * C, NULL, BT, C, n);
        k->cast_to_lp(g->logits_lp + (size_t)BT * v0, g->logit_block, (size_t)BT * n, g->c.activations);
    }
    return k->softmax_xent_lp(g->losses, g->logits_lp, g->targets, grad_scale / (float)BT, BT, V, g->vb,
                              g->c.activations);
}

/* dln += dlogits @ wte, dwte += dlogits^T @ lnf: the LM head's backward, a vocabulary block at a
 * time when the logits are kept in 16 bits (each block of wte and its gradient touched once). */
static void lm_head_backward(struct gpt *g, int BT, int C, int V)
{
    if (!g->logits_lp) {
        dt_mm_backward(&g->base, g->dln, g->g[WTE], NULL, g->logits, g->lnf, g->p[WTE], BT, C, V);
        return;
    }
    for (int v0 = 0; v0 < V; v0 += g->vb) {
        int n = V - v0 < g->vb ? V - v0 : g->vb;
        g->base.k->cast_from_lp(g->logit_block, g->logits_lp + (size_t)BT * v0, (size_t)BT * n, g->c.activations);
        dt_mm_backward(&g->base, g->dln, g->g[WTE] + (size_t)v0 * C, NULL, g->logit_block, g->lnf,
                       g->p[WTE] + (size_t)v0 * C, BT, C, n);
    }
}

static void gpt_backward(struct dt_model *m)
{
    struct gpt *g = m->impl;
    const struct dt_kernels *k = m->k;
    int B = g->B, T = g->T, C = g->c.n_embd, V = g->c.vocab_size, L = g->c.n_layer, BT = B * T;
    size_t BTC = (size_t)BT * C;
    /* reporting groups as they finish needs the token embedding's rows handed over at the end */
    bool report = m->on_grads_ready && m->on_sparse_grads;
    memset(g->dln, 0, BTC * sizeof(float));
    memset(g->dres, 0, BTC * sizeof(float));
    lm_head_backward(g, BT, C, V);
    if (report) dt_model_grads_ready(m, 0);
    k->layernorm_backward(g->dres, g->g[LNFW], g->g[LNFB], g->dln, g->resid[L], g->p[LNFW], g->lnf_mean, g->lnf_rstd,
                          BT, C);
    if (report) dt_model_grads_ready(m, 1);
    for (int l = L - 1; l >= 0; l--) {
        if (g->c.activation_checkpointing) block_forward(g, l, g->resid[l], g->proj);
        else if (g->packed)
            k->cast_from_lp(g->blk[0].ln1, g->packed + (size_t)l * g->per_block, g->per_block, g->c.activations);
        block_backward(g, l, g->resid[l]);
        if (report) dt_model_grads_ready(m, L - l + 1);
    }
    k->encoder_backward(report ? NULL : g->g[WTE], g->g[WPE], g->dres, g->inputs, B, T, C);
    if (report) {
        m->on_sparse_grads(m->hook_ctx, g->views[WTE].offset, g->inputs, g->dres, BT, C);
        dt_model_grads_ready(m, L + 2);
    }
}

/* Group 0: wte (final after the LM head but for the input tokens' rows, handed over
 * separately); group 1: lnfw, lnfb; group L-l+1: layer l's slice of each per-layer tensor;
 * group L+2: wpe. */
static dt_status_t grad_segments(struct gpt *g)
{
    int L = g->c.n_layer, n = 0;
    g->segs = malloc((size_t)(4 + (LNFW - LN1W) * L) * sizeof *g->segs);
    if (!g->segs) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for gradient segments");
    g->segs[n++] = (struct dt_grad_seg){g->views[WTE].offset, g->views[WTE].numel, 0};
    g->segs[n++] = (struct dt_grad_seg){g->views[LNFW].offset, g->views[LNFW].numel, 1};
    g->segs[n++] = (struct dt_grad_seg){g->views[LNFB].offset, g->views[LNFB].numel, 1};
    for (int l = L - 1; l >= 0; l--)
        for (int i = LN1W; i < LNFW; i++) {
            size_t per = g->views[i].numel / (size_t)L;
            g->segs[n++] = (struct dt_grad_seg){g->views[i].offset + (size_t)l * per, per, L - l + 1};
        }
    g->segs[n++] = (struct dt_grad_seg){g->views[WPE].offset, g->views[WPE].numel, L + 2};
    g->base.segs = g->segs;
    g->base.nsegs = n;
    g->base.ngroups = L + 3;
    return DT_SUCCESS;
}

static void gpt_free(struct dt_model *m)
{
    struct gpt *g = m->impl;
    dt_free_big(m->params);
    dt_free_big(m->grads);
    dt_free_big(g->arena);
    dt_free_big(g->packed);
    dt_free_big(g->logits_lp);
    free(g->resid);
    free(g->blk);
    free(g->inputs);
    free(g->targets);
    free(g->segs);
    free(g);
}

/* Carve `n` floats off the arena cursor. */
static float *take(float **cur, size_t n)
{
    float *p = *cur;
    *cur += n;
    return p;
}

dt_status_t dt_gpt_create(const struct dt_gpt_config *c, const struct dt_kernels *k, int B, int T,
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
    layout(g);
    int C = c->n_embd, NH = c->n_head, V = c->vocab_size, L = c->n_layer;
    size_t BT = (size_t)B * T, BTC = BT * C;
    size_t nparams = g->views[NP - 1].offset + g->views[NP - 1].numel;
    size_t per_block = BTC /* ln1 */ + 2 * BT + 3 * BTC + BTC + (size_t)B * NH * T * T + BTC /* res2 */ + BTC +
                       2 * BT + 8 * BTC;
    /* one fp32 block when block activations are recomputed or kept packed in 16 bits */
    bool pack = c->activations != DT_F32 && !c->activation_checkpointing;
    size_t nblocks = c->activation_checkpointing || pack ? 1 : (size_t)L;
    /* 16-bit logits: a block of vb vocabulary columns is computed in fp32 at a time */
    bool lp_logits = c->activations != DT_F32;
    int vb = (V / 8 + 63) / 64 * 64; /* at most an eighth of the vocabulary, whole cache lines */
    vb = !lp_logits ? V : vb > LOGIT_COLS ? LOGIT_COLS : vb < 64 ? (V < 64 ? V : 64) : vb;
    size_t nlogits = lp_logits ? BT * (size_t)vb : BT * V;
    size_t nacts = (size_t)(L + 1) * BTC + nblocks * per_block + BTC + BTC + 2 * BT + nlogits + BT;
    /* dres, dln, datty (BTC each), dqkv (3 BTC), dfch and dfch_gelu (4 BTC each), attention scratch */
    size_t ngrad_scratch = 14 * BTC + dt_kernels_attention_scratch(T);
    struct dt_model *m = &g->base;
    m->params = dt_alloc_big(nparams * sizeof(float));
    m->grads = dt_alloc_big(nparams * sizeof(float));
    g->arena = dt_alloc_big((nacts + ngrad_scratch) * sizeof(float));
    g->per_block = per_block;
    if (pack) g->packed = dt_alloc_big((size_t)L * per_block * sizeof(uint16_t));
    if (lp_logits) g->logits_lp = dt_alloc_big(BT * V * sizeof(uint16_t));
    g->vb = vb;
    g->resid = calloc((size_t)L + 1, sizeof *g->resid);
    g->blk = calloc((size_t)L, sizeof *g->blk);
    g->inputs = malloc(BT * sizeof(int32_t));
    g->targets = malloc(BT * sizeof(int32_t));
    m->iface = (struct dt_model_i){.forward = gpt_forward, .backward = gpt_backward, .free = gpt_free};
    m->impl = g;
    if (!m->params || !m->grads || !g->arena || (pack && !g->packed) || (lp_logits && !g->logits_lp) || !g->resid || !g->blk || !g->inputs || !g->targets) {
        gpt_free(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the model (%zu parameters, %zu MiB of "
                        "activations); lower data.micro_batch_size or enable model.activation_checkpointing",
                        nparams, nacts * 4 >> 20);
    }
    for (int i = 0; i < NP; i++) {
        g->p[i] = m->params + g->views[i].offset;
        g->g[i] = m->grads + g->views[i].offset;
    }
    dt_status_t rc = grad_segments(g);
    if (rc != DT_SUCCESS) {
        gpt_free(m);
        return rc;
    }
    float *cur = g->arena;
    for (int l = 0; l <= L; l++) g->resid[l] = take(&cur, BTC);
    for (size_t i = 0; i < nblocks; i++) {
        struct block *b = &g->blk[i];
        b->ln1 = take(&cur, BTC);
        b->ln1_mean = take(&cur, BT);
        b->ln1_rstd = take(&cur, BT);
        b->qkv = take(&cur, 3 * BTC);
        b->atty = take(&cur, BTC);
        b->att = take(&cur, (size_t)B * NH * T * T);
        b->res2 = take(&cur, BTC);
        b->ln2 = take(&cur, BTC);
        b->ln2_mean = take(&cur, BT);
        b->ln2_rstd = take(&cur, BT);
        b->fch = take(&cur, 4 * BTC);
        b->fch_gelu = take(&cur, 4 * BTC);
    }
    for (int l = (int)nblocks; l < L; l++) g->blk[l] = g->blk[0];
    g->proj = take(&cur, BTC);
    g->lnf = take(&cur, BTC);
    g->lnf_mean = take(&cur, BT);
    g->lnf_rstd = take(&cur, BT);
    if (lp_logits) g->logit_block = take(&cur, nlogits);
    else g->logits = take(&cur, nlogits);
    g->losses = take(&cur, BT);
    g->dres = take(&cur, BTC);
    g->dln = take(&cur, BTC);
    g->datty = take(&cur, BTC);
    g->dqkv = take(&cur, 3 * BTC);
    g->dfch = take(&cur, 4 * BTC);
    g->dfch_gelu = take(&cur, 4 * BTC);
    g->attn_scratch = take(&cur, dt_kernels_attention_scratch(T));
    m->k = k;
    m->nparams = nparams;
    m->views = g->views;
    m->nviews = NP;
    m->activation_bytes = nacts * sizeof(float) + (pack ? (size_t)L * per_block * sizeof(uint16_t) : 0) +
                          (lp_logits ? BT * V * sizeof(uint16_t) : 0);
    m->flops_per_token = 6.0 * (double)nparams + 12.0 * L * C * T;
    *out = m;
    return DT_SUCCESS;
}

dt_status_t dt_gpt_load_llmc(struct dt_model *m, const char *path)
{
    struct gpt *g = m->impl;
    FILE *f = fopen(path, "rb");
    if (!f) return dt_error(DT_ERR_DATA, "%s: error: cannot read model.init_from: %s", path, strerror(errno));
    int32_t h[256];
    dt_status_t rc = DT_SUCCESS;
    if (fread(h, sizeof h, 1, f) != 1) {
        rc = dt_error(DT_ERR_DATA, "%s: error: truncated: shorter than llm.c's 1024-byte model header", path);
    } else if (h[0] != 20240326) {
        rc = dt_error(DT_ERR_DATA, "%s: error: not an llm.c model file: magic %d at byte 0, expected 20240326\n"
                      "  hint: model.init_from takes the gpt2_124M.bin that llm.c's train_gpt2.py writes", path, h[0]);
    } else if (h[1] != 3) {
        rc = dt_error(DT_ERR_DATA, "%s: error: llm.c model version %d at byte 4; dtrun reads version 3 (float32)\n"
                      "  hint: use the float32 file (gpt2_124M.bin, not gpt2_124M_bf16.bin)", path, h[1]);
    } else if (h[2] < g->c.max_seq_len || h[3] != g->c.vocab_size || h[4] != g->c.n_layer ||
               h[5] != g->c.n_head || h[6] != g->c.n_embd || h[7] < h[3]) {
        rc = dt_error(DT_ERR_CONFIG, "%s: error: the file holds max_seq_len %d, vocab_size %d, n_layer %d, n_head %d, "
                      "n_embd %d; the config asks for %d, %d, %d, %d, %d\n  hint: set model.* to the file's shape",
                      path, h[2], h[3], h[4], h[5], h[6], g->c.max_seq_len, g->c.vocab_size, g->c.n_layer,
                      g->c.n_head, g->c.n_embd);
    }
    int C = g->c.n_embd;
    for (int i = 0; i < NP && rc == DT_SUCCESS; i++) {
        size_t n = g->views[i].numel;
        size_t skip_after = 0;
        if (i == WTE) skip_after = (size_t)(h[7] - h[3]) * C;           /* padded vocab rows */
        if (i == WPE) skip_after = (size_t)(h[2] - g->c.max_seq_len) * C; /* longer contexts */
        if (fread(g->p[i], sizeof(float), n, f) != n || fseek(f, (long)(skip_after * sizeof(float)), SEEK_CUR) != 0)
            rc = dt_error(DT_ERR_DATA, "%s: error: truncated in %s: the file ends before the parameters do", path,
                          g->views[i].name);
    }
    fclose(f);
    return rc;
}

const float *dt_gpt_logits(const struct dt_model *m) { return ((const struct gpt *)m->impl)->logits; }

void dt_gpt_init(struct dt_model *m, uint64_t seed)
{
    struct gpt *g = m->impl;
    float resid_std = 0.02f / sqrtf(2.0f * (float)g->c.n_layer);
    for (int i = 0; i < NP; i++) {
        float *p = g->p[i];
        size_t n = g->views[i].numel;
        bool norm_w = i == LN1W || i == LN2W || i == LNFW;
        bool bias = i == LN1B || i == LN2B || i == LNFB || i == QKVB || i == ATTPROJB || i == FCB || i == FCPROJB;
        if (norm_w || bias) {
            for (size_t j = 0; j < n; j++) p[j] = norm_w ? 1.0f : 0.0f;
            continue;
        }
        float std = (i == ATTPROJW || i == FCPROJW) ? resid_std : 0.02f;
        struct dt_rng r = dt_rng_make(seed, (uint64_t)i);
        for (size_t j = 0; j < n; j++) p[j] = std * dt_rng_normal(&r);
    }
}
