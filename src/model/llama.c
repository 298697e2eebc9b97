/*
 * llama.c - Llama forward and backward on the kernel table (see llama.h), laid out as gpt.c is: one
 * arena of activations sized at creation (with activation checkpointing: each block's input and one
 * shared set of internals, recomputed in backward), an fp32 residual stream, and what a block
 * computes between its ops in the activation type.
 *
 * Units: the token embedding in blocks of vocabulary rows, then per block its six parameter groups
 * (each norm, qkv, o, gate|up, down: what one kernel call reads), the final norm, and the untied
 * LM head in blocks of vocabulary rows.
 *
 * Shapes: B batch, T time, C channels, NH query heads, NKV key/value heads, hs = C / NH, W = (NH +
 * 2 NKV) hs the qkv row, H the MLP width, V vocabulary, L layers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "core/numfmt.h"
#include "core/rng.h"
#include "kernels/formulas.h"
#include "model/llama.h"
#include "model/lm_head.h"

/* a block's parameter groups, in buffer order: one unit each */
enum { P_ATTN_NORM, P_QKV, P_O, P_MLP_NORM, P_GATEUP, P_DOWN, NPART };
/* a block's tensors, Hugging Face's names: q, k, v share P_QKV and gate, up P_GATEUP */
enum { T_ATTN_NORM, T_Q, T_K, T_V, T_O, T_MLP_NORM, T_GATE, T_UP, T_DOWN, NT };
static const struct {
    const char *name;
    int part;
} tensors[NT] = {{"input_layernorm.weight", P_ATTN_NORM}, {"self_attn.q_proj.weight", P_QKV},
                 {"self_attn.k_proj.weight", P_QKV},      {"self_attn.v_proj.weight", P_QKV},
                 {"self_attn.o_proj.weight", P_O},        {"post_attention_layernorm.weight", P_MLP_NORM},
                 {"mlp.gate_proj.weight", P_GATEUP},      {"mlp.up_proj.weight", P_GATEUP},
                 {"mlp.down_proj.weight", P_DOWN}};

/* a block's activations: void * of the activation type, float * fp32 */
struct block {
    void *ln1;       /* (B,T,C) */
    float *ln1_rstd; /* (B,T) */
    void *qkv;       /* (B,T,W), q and k rotated in place */
    void *atty;      /* (B,T,C) */
    float *att;      /* each row's log-sum-exp (B,NH,T) */
    float *res2;     /* (B,T,C), the residual stream */
    void *ln2;
    float *ln2_rstd;
    void *gu; /* (B,T,2H): gate | up */
    void *sw; /* (B,T,H): silu(gate) * up */
};

struct llama {
    struct dt_model base;
    struct dt_llama_config c;
    int B, T, hs, W, H;
    struct dt_vocab voc;
    int u_block0, u_norm, u_head0; /* unit indices; the embedding's chunks are 0 .. voc.nchunks-1 */
    size_t rows[NT], in_block[NT + 1]; /* each block tensor's rows and offset in its block; [NT]: the block's size */
    struct dt_unit *units;
    struct dt_param_view *views;
    char (*names)[64];
    enum dt_dtype at;
    struct dt_lm_mem mem; /* the parameters' buffers, the arena, the tokens */
    float **resid; /* (L+1) x (B,T,C) */
    struct block *blk;
    float *cs; /* the rotary table (T, hs) */
    void *proj;
    void *lnf;
    float *lnf_rstd;
    struct dt_lm_head head;
    /* gradient scratch as gpt.c's: dres, dln (B,T,C), datty (B,T,C), dsw (B,T,H) fp32; dqkv (B,T,W)
     * and dgu (B,T,2H) of the activation type; dres_lp the residual stream's gradient rounded */
    float *dres, *dln, *datty, *dsw, *attn_scratch;
    void *dqkv, *dgu, *dres_lp;
};

/* the block's tensors' rows (their columns: C, but down_proj's H) */
static void block_rows(const struct dt_llama_config *c, size_t rows[NT])
{
    size_t C = (size_t)c->n_embd, hs = C / (size_t)c->n_head, kv = (size_t)c->n_kv_head * hs;
    size_t H = (size_t)c->intermediate_size;
    const size_t r[NT] = {1, C, kv, kv, C, 1, H, H, C};
    memcpy(rows, r, sizeof r);
}

static size_t tensor_numel(const struct dt_llama_config *c, const size_t rows[NT], int t)
{
    if (t == T_ATTN_NORM || t == T_MLP_NORM) return (size_t)c->n_embd;
    return rows[t] * (t == T_DOWN ? (size_t)c->intermediate_size : (size_t)c->n_embd);
}

/* The units (model.h) in buffer order into units (NULL: only count); *nparams the buffer's size. */
static int units_of(const struct dt_llama_config *c, struct dt_unit *units, size_t *nparams)
{
    size_t rows[NT], part[NPART] = {0}, off = 0, C = (size_t)c->n_embd;
    block_rows(c, rows);
    for (int t = 0; t < NT; t++) part[tensors[t].part] += tensor_numel(c, rows, t);
    struct dt_vocab voc = dt_vocab_of(c->vocab_size);
    int n = 0;
#define UNIT(size)                                                                                             \
    do {                                                                                                       \
        if (units) units[n] = (struct dt_unit){off, (size)};                                                   \
        off += (size);                                                                                         \
        n++;                                                                                                   \
    } while (0)
    for (int i = 0; i < voc.nchunks; i++) UNIT((size_t)dt_vocab_rows(&voc, i) * C);
    for (int l = 0; l < c->n_layer; l++)
        for (int p = 0; p < NPART; p++) UNIT(part[p]);
    UNIT(C);
    if (!c->tie_embeddings)
        for (int i = 0; i < voc.nchunks; i++) UNIT((size_t)dt_vocab_rows(&voc, i) * C);
#undef UNIT
    if (nparams) *nparams = off;
    return n;
}

void dt_llama_describe(const struct dt_llama_config *c, char *buf, size_t n)
{
    const struct dt_rope_scaling *r = &c->rope_scaling;
    char f[6][24];
    snprintf(buf, n, "llama n_layer=%d n_head=%d n_kv_head=%d n_embd=%d intermediate_size=%d vocab_size=%d seq_len=%d "
             "tie=%d norm_eps=%s rope_theta=%s rope_scaling=%s,%s,%s,%s max_position=%d", c->n_layer, c->n_head,
             c->n_kv_head, c->n_embd, c->intermediate_size, c->vocab_size, c->max_seq_len, c->tie_embeddings ? 1 : 0,
             dt_fmt_float(c->rms_eps, f[0], 24), dt_fmt_float(c->rope_theta, f[1], 24), dt_fmt_float(r->factor, f[2],
                          24),
             dt_fmt_float(r->low_freq_factor, f[3], 24), dt_fmt_float(r->high_freq_factor, f[4], 24),
             dt_fmt_float(r->original_max_position, f[5], 24), c->max_position ? c->max_position : c->max_seq_len);
}

bool dt_llama_parse(const char *line, struct dt_llama_config *c)
{
    int tie = 0, used = 0;
    struct dt_rope_scaling *r = &c->rope_scaling;
    if (sscanf(line, "llama n_layer=%d n_head=%d n_kv_head=%d n_embd=%d intermediate_size=%d vocab_size=%d seq_len=%d "
               "tie=%d norm_eps=%g rope_theta=%g rope_scaling=%g,%g,%g,%g%n", &c->n_layer, &c->n_head, &c->n_kv_head,
               &c->n_embd, &c->intermediate_size, &c->vocab_size, &c->max_seq_len, &tie, &c->rms_eps, &c->rope_theta,
               &r->factor, &r->low_freq_factor, &r->high_freq_factor, &r->original_max_position, &used) != 14)
        return false;
    c->tie_embeddings = tie != 0;
    c->max_position = c->max_seq_len;
    if (line[used] && sscanf(line + used, " max_position=%d", &c->max_position) != 1) return false;
    return true;
}

size_t dt_llama_num_params(const struct dt_llama_config *c)
{
    size_t n;
    units_of(c, NULL, &n);
    return n;
}

dt_status_t dt_llama_units(const struct dt_llama_config *c, struct dt_unit **units, int *n)
{
    *n = units_of(c, NULL, NULL);
    *units = calloc((size_t)*n, sizeof **units);
    if (!*units) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    units_of(c, *units, NULL);
    return DT_SUCCESS;
}

static dt_status_t layout(struct llama *g)
{
    const struct dt_llama_config *c = &g->c;
    int C = c->n_embd, L = c->n_layer, V = c->vocab_size;
    g->voc = dt_vocab_of(V);
    g->u_block0 = g->voc.nchunks;
    g->u_norm = g->u_block0 + L * NPART;
    g->u_head0 = c->tie_embeddings ? 0 : g->u_norm + 1;
    int nunits = units_of(c, NULL, NULL), nviews = 2 + NT * L + !c->tie_embeddings;
    g->units = calloc((size_t)nunits, sizeof *g->units);
    g->views = calloc((size_t)nviews, sizeof *g->views);
    g->names = calloc((size_t)nviews, sizeof *g->names);
    if (!g->units || !g->views || !g->names) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the model");
    units_of(c, g->units, &g->base.nparams);
    block_rows(c, g->rows);
    for (int t = 0; t < NT; t++) g->in_block[t + 1] = g->in_block[t] + tensor_numel(c, g->rows, t);
    int nv = 0;
    size_t off = 0;
#define VIEW(o, n, dec, nd, s0, s1, ...)                                                                       \
    g->views[nv] = (struct dt_param_view){g->names[nv], (o), (n), (dec), (nd), {(s0), (s1), 0}, {0}};          \
    snprintf(g->names[nv], sizeof g->names[nv], __VA_ARGS__);                                                  \
    nv++
    VIEW(0, (size_t)V * C, c->decay_embeddings, 2, V, C, "model.embed_tokens.weight");
    off = (size_t)V * C;
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < NT; t++) {
            bool norm = t == T_ATTN_NORM || t == T_MLP_NORM;
            size_t n = g->in_block[t + 1] - g->in_block[t];
            VIEW(off + g->in_block[t], n, !norm, norm ? 1 : 2, norm ? C : (int)g->rows[t],
                 norm ? 0 : (int)(n / g->rows[t]), "model.layers.%d.%s", l, tensors[t].name);
        }
        off += g->in_block[NT];
    }
    VIEW(off, (size_t)C, false, 1, C, 0, "model.norm.weight");
    off += (size_t)C;
    if (!c->tie_embeddings) {
        VIEW(off, (size_t)V * C, true, 2, V, C, "lm_head.weight");
    }
#undef VIEW
    /* Hugging Face's init: every matrix N(0, 0.02) from a stream of its own, the norms 1 */
    for (int i = 0; i < nv; i++)
        g->views[i].init = g->views[i].ndim == 1 ? (struct dt_init){DT_INIT_CONST, 1.0f, 0, 0}
                                                 : (struct dt_init){DT_INIT_NORMAL, 0.02f, (uint64_t)i, 0};
    struct dt_model *m = &g->base;
    m->units = g->units;
    m->nunits = nunits;
    m->views = g->views;
    m->n_linear = 4 * g->c.n_layer;
    m->nviews = nv;
    return DT_SUCCESS;
}

static int part_unit(const struct llama *g, int l, int part) { return g->u_block0 + l * NPART + part; }

/* the index fp8-mixed knows block l's linear layer part by (model.h): four a block, in the order the
 * forward runs them */
static int fp8_linear(int l, int part) { return 4 * l + part - 1 - (part > P_MLP_NORM); }

/* The rows a forward runs on: a training batch's B x T, or generation's n new tokens at positions pos
 * .. pos + n - 1 of the first row, attending through the cache. */
struct rows {
    int B, T, pos;
    bool cached;
};

static struct rows batch_rows(const struct llama *g) { return (struct rows){g->B, g->T, 0, false}; }

/* out = inp @ W^T with the part's weight, activations in and out, over BT rows */
static void linear(struct llama *g, int l, int part, void *out, const void *inp, int C, int OC, int BT)
{
    int u = part_unit(g, l, part);
    struct dt_wref w = dt_model_params_any(&g->base, u);
    dt_mm_forward(&g->base, out, g->at, inp, w, false, BT, C, OC, fp8_linear(l, part));
    dt_model_params_any_done(&g->base, u, w);
}

static void norm(struct llama *g, int u, void *out, float *rstd, const float *inp, int BT)
{
    const float *w = dt_model_params(&g->base, u);
    g->base.k->rmsnorm_forward(g->base.kc, out, g->at, rstd, inp, w, g->c.rms_eps, BT, g->c.n_embd);
    dt_model_params_done(&g->base, u);
}

/* x: block l's input, out its output; out NULL: recomputing the block's internals for backward */
static void block_forward(struct llama *g, int l, const float *x, float *out, struct rows r)
{
    const struct dt_kernels *k = g->base.k;
    struct dt_kctx *kc = g->base.kc;
    int B = r.B, T = r.T, BT = B * T, C = g->c.n_embd, NH = g->c.n_head, NKV = g->c.n_kv_head, H = g->H;
    size_t BTC = (size_t)BT * C;
    struct block *b = &g->blk[l];
    norm(g, part_unit(g, l, P_ATTN_NORM), b->ln1, b->ln1_rstd, x, BT);
    linear(g, l, P_QKV, b->qkv, b->ln1, C, g->W, BT);
    k->rope_forward(kc, b->qkv, g->at, g->cs + (size_t)r.pos * g->hs, B, T, NH, NKV, g->hs);
    if (r.cached)
        k->attention_cached(kc, b->atty, b->qkv, dt_kv_keys(&g->mem.kv, l), dt_kv_values(&g->mem.kv, l), g->at, B, T,
                            r.pos, g->T, C, NH, NKV);
    else k->attention_forward(kc, b->atty, b->att, b->qkv, g->at, B, T, C, NH, NKV);
    linear(g, l, P_O, g->proj, b->atty, C, C, BT);
    k->residual_forward(kc, b->res2, x, g->proj, g->at, BTC);
    norm(g, part_unit(g, l, P_MLP_NORM), b->ln2, b->ln2_rstd, b->res2, BT);
    linear(g, l, P_GATEUP, b->gu, b->ln2, C, 2 * H, BT);
    k->swiglu_forward(kc, b->sw, b->gu, g->at, BT, H);
    if (!out) return;
    linear(g, l, P_DOWN, g->proj, b->sw, H, C, BT);
    k->residual_forward(kc, out, b->res2, g->proj, g->at, BTC);
}

/* dinp (fp32, =) of the part's linear layer, its weight's gradient added; dout of type dt */
static void linear_backward(struct llama *g, int l, int part, float *dinp, const void *dout, enum dt_dtype dt,
                            const void *inp, int C, int OC)
{
    int u = part_unit(g, l, part);
    struct dt_wref w = dt_model_params_any(&g->base, u);
    bool fresh;
    float *dw = dt_model_grads(&g->base, u, &fresh);
    dt_mm_backward(&g->base, dinp, dw, NULL, dout, dt, inp, w, g->B * g->T, C, OC,
                   DT_SET_DINP | (fresh ? DT_SET_DPARAMS : 0), fp8_linear(l, part));
    dt_model_grads_done(&g->base, u);
    dt_model_params_any_done(&g->base, u, w);
}

/* dres += d loss / d inp of unit u's RMSNorm, given dout */
static void norm_backward(struct llama *g, int u, const float *dout, const float *inp, const float *rstd)
{
    const float *w = dt_model_params(&g->base, u);
    float *dw = dt_model_grads_added(&g->base, u);
    g->base.k->rmsnorm_backward(g->base.kc, g->dres, g->dres_lp, g->at, dw, dout, inp, w, rstd, g->B * g->T,
                                g->c.n_embd);
    dt_model_grads_done(&g->base, u);
    dt_model_params_done(&g->base, u);
}

static const void *dres(const struct llama *g) { return g->dres_lp ? g->dres_lp : g->dres; }

/* On entry dres = dL/d(block output); on return dL/d(block input). */
static void block_backward(struct llama *g, int l, const float *x)
{
    const struct dt_kernels *k = g->base.k;
    struct dt_kctx *kc = g->base.kc;
    int B = g->B, T = g->T, C = g->c.n_embd, NH = g->c.n_head, NKV = g->c.n_kv_head, H = g->H;
    struct block *b = &g->blk[l];
    linear_backward(g, l, P_DOWN, g->dsw, dres(g), g->at, b->sw, H, C);
    k->swiglu_backward(kc, g->dgu, b->gu, g->dsw, g->at, B * T, H);
    linear_backward(g, l, P_GATEUP, g->dln, g->dgu, g->at, b->ln2, C, 2 * H);
    norm_backward(g, part_unit(g, l, P_MLP_NORM), g->dln, b->res2, b->ln2_rstd);
    linear_backward(g, l, P_O, g->datty, dres(g), g->at, b->atty, C, C);
    k->attention_backward(kc, g->dqkv, g->datty, b->qkv, b->atty, b->att, g->attn_scratch, g->at, B, T, C, NH, NKV);
    k->rope_backward(kc, g->dqkv, g->at, g->cs, B, T, NH, NKV, g->hs);
    linear_backward(g, l, P_QKV, g->dln, g->dqkv, g->at, b->ln1, C, g->W);
    norm_backward(g, part_unit(g, l, P_ATTN_NORM), g->dln, x, b->ln1_rstd);
}

static float llama_forward(struct dt_model *m, const struct dt_batch *batch, float grad_scale,
                             const struct dt_loss_sink *sink)
{
    struct llama *g = m->impl;
    const struct dt_kernels *k = m->k;
    struct dt_kctx *kc = m->kc;
    int B = g->B, T = g->T, C = g->c.n_embd, L = g->c.n_layer, BT = B * T;
    dt_lm_tokens_in(m, &g->mem, batch, B, T);
    k->zero(kc, g->resid[0], (size_t)BT * C * sizeof(float));
    dt_embed_forward(m, &g->voc, 0, g->resid[0], g->mem.inputs, BT, C);
    for (int l = 0; l < L; l++) block_forward(g, l, g->resid[l], g->resid[l + 1], batch_rows(g));
    norm(g, g->u_norm, g->lnf, g->lnf_rstd, g->resid[L], BT);
    return dt_lm_head_forward(m, &g->head, g->lnf, grad_scale, sink);
}

static dt_status_t llama_decode(struct dt_model *m, const int32_t *tokens, int n, int pos, float *logits)
{
    struct llama *g = m->impl;
    int C = g->c.n_embd, L = g->c.n_layer;
    DT_CHECK(dt_decode_check(n, pos, g->T, g->hs));
    DT_CHECK(dt_kv_cache_get(m, &g->mem.kv, L, g->T, g->c.n_kv_head, g->hs));
    m->k->copy(m->kc, g->mem.inputs, tokens, (size_t)n * sizeof(int32_t), DT_COPY_TO_DEVICE);
    m->k->zero(m->kc, g->resid[0], (size_t)n * C * sizeof(float));
    dt_embed_forward(m, &g->voc, 0, g->resid[0], g->mem.inputs, n, C);
    for (int l = 0; l < L; l++) block_forward(g, l, g->resid[l], g->resid[l + 1], (struct rows){1, n, pos, true});
    norm(g, g->u_norm, g->lnf, g->lnf_rstd, g->resid[L] + (size_t)(n - 1) * C, 1);
    dt_lm_head_row(m, &g->head, g->lnf, logits);
    return DT_SUCCESS;
}

static void llama_decode_end(struct dt_model *m)
{
    struct llama *g = m->impl;
    dt_kv_cache_free(m, &g->mem.kv);
}

static void llama_backward(struct dt_model *m)
{
    struct llama *g = m->impl;
    int C = g->c.n_embd, L = g->c.n_layer, BT = g->B * g->T;
    m->k->zero(m->kc, g->dres, (size_t)BT * C * sizeof(float));
    dt_lm_head_backward(m, &g->head, g->lnf, g->dln);
    norm_backward(g, g->u_norm, g->dln, g->resid[L], g->lnf_rstd);
    for (int l = L - 1; l >= 0; l--) {
        if (g->c.activation_checkpointing) block_forward(g, l, g->resid[l], NULL, batch_rows(g));
        block_backward(g, l, g->resid[l]);
    }
    /* An untied embedding's units have no gradient but their rows (the tied one's are the head's) */
    for (int c = 0; !g->c.tie_embeddings && c < g->voc.nchunks; c++) dt_model_grads_rows_only(m, c);
    /* the input tokens' rows of the token embedding, last */
    m->mem.rows(m->mem_ctx, 0, g->mem.inputs, g->dres, BT, C);
}

static void llama_free(struct dt_model *m)
{
    struct llama *g = m->impl;
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
static size_t carve(struct llama *g, char *base, size_t natt, size_t nscratch, size_t *kept)
{
    int C = g->c.n_embd, V = g->c.vocab_size, L = g->c.n_layer;
    size_t BT = (size_t)g->B * g->T, BTC = BT * C, BTW = BT * g->W, BTH = BT * g->H;
    enum dt_dtype at = g->at;
    size_t nblocks = g->c.activation_checkpointing ? 1 : (size_t)L;
    struct dt_cursor cur = {base, 0};
    for (int l = 0; l <= L; l++) g->resid[l] = dt_take(&cur, BTC, DT_F32);
    for (size_t i = 0; i < nblocks; i++) {
        struct block *b = &g->blk[i];
        b->ln1 = dt_take(&cur, BTC, at);
        b->ln1_rstd = dt_take(&cur, BT, DT_F32);
        b->qkv = dt_take(&cur, BTW, at);
        b->atty = dt_take(&cur, BTC, at);
        b->att = dt_take(&cur, natt, DT_F32);
        b->res2 = dt_take(&cur, BTC, DT_F32);
        b->ln2 = dt_take(&cur, BTC, at);
        b->ln2_rstd = dt_take(&cur, BT, DT_F32);
        b->gu = dt_take(&cur, 2 * BTH, at);
        b->sw = dt_take(&cur, BTH, at);
    }
    for (int l = (int)nblocks; l < L; l++) g->blk[l] = g->blk[0];
    g->cs = dt_take(&cur, (size_t)g->T * g->hs, DT_F32);
    g->proj = dt_take(&cur, BTC, at);
    g->lnf = dt_take(&cur, BTC, at);
    g->lnf_rstd = dt_take(&cur, BT, DT_F32);
    g->head.logits = dt_take(&cur, BT * V, at);
    g->head.losses = dt_take(&cur, BT, DT_F32);
    *kept = cur.off;
    g->dres = dt_take(&cur, BTC, DT_F32);
    g->dln = dt_take(&cur, BTC, DT_F32);
    g->datty = dt_take(&cur, BTC, DT_F32);
    g->dqkv = dt_take(&cur, BTW, at);
    g->dgu = dt_take(&cur, 2 * BTH, at);
    g->dsw = dt_take(&cur, BTH, DT_F32);
    g->dres_lp = at == DT_F32 ? NULL : dt_take(&cur, BTC, at);
    g->attn_scratch = dt_take(&cur, nscratch, DT_F32);
    return cur.off;
}

size_t dt_llama_arena_bytes(const struct dt_llama_config *c, int B, int T, size_t natt, size_t nscratch)
{
    struct llama g = {.c = *c, .B = B, .T = T, .hs = c->n_embd / c->n_head, .H = c->intermediate_size,
                      .at = c->activations};
    g.W = c->n_embd + 2 * c->n_kv_head * g.hs;
    g.resid = calloc((size_t)c->n_layer + 1, sizeof *g.resid);
    g.blk = calloc((size_t)c->n_layer, sizeof *g.blk);
    size_t kept, bytes = g.resid && g.blk ? carve(&g, NULL, natt, nscratch, &kept) : 0;
    free(g.resid);
    free(g.blk);
    return bytes;
}

dt_status_t dt_llama_create(const struct dt_llama_config *c, const struct dt_kernels *k, struct dt_kctx *kc, int B,
                            int T, struct dt_model **out)
{
    *out = NULL;
    if (c->n_head < 1 || c->n_kv_head < 1 || c->n_embd % c->n_head || c->n_head % c->n_kv_head ||
        (c->n_embd / c->n_head) % 2 || c->intermediate_size < 1 || T > c->max_seq_len || B < 1 || T < 1)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: llama: bad shape (n_embd %d, n_head %d, n_kv_head %d, "
                        "intermediate_size %d, T %d, max %d)", c->n_embd, c->n_head, c->n_kv_head,
                        c->intermediate_size, T, c->max_seq_len);
    struct llama *g = calloc(1, sizeof *g);
    if (!g) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the model");
    g->c = *c;
    g->B = B;
    g->T = T;
    g->hs = c->n_embd / c->n_head;
    g->W = c->n_embd + 2 * c->n_kv_head * g->hs;
    g->H = c->intermediate_size;
    struct dt_model *m = &g->base;
    m->iface = (struct dt_model_i){.forward = llama_forward, .backward = llama_backward, .decode = llama_decode,
                                   .decode_end = llama_decode_end, .free = llama_free};
    m->impl = g;
    m->k = k;
    m->kc = kc;
    dt_status_t rc = layout(g);
    if (rc != DT_SUCCESS) {
        llama_free(m);
        return rc;
    }
    int C = c->n_embd, NH = c->n_head, L = c->n_layer;
    g->at = c->activations;
    m->compute = c->activations;
    g->resid = calloc((size_t)L + 1, sizeof *g->resid);
    g->blk = calloc((size_t)L, sizeof *g->blk);
    float *cs = malloc((size_t)T * g->hs * sizeof *cs);
    if (!g->resid || !g->blk || !cs) {
        free(cs);
        llama_free(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the model");
    }
    size_t nacts, natt = k->attention_saved(B, NH, T), nscratch = k->attention_scratch(B, T, C, NH, c->n_kv_head, g->at);
    size_t bytes = carve(g, NULL, natt, nscratch, &nacts);
    rc = dt_lm_mem_alloc(m, &g->mem, bytes, B, T);
    if (rc != DT_SUCCESS) {
        free(cs);
        llama_free(m);
        return rc;
    }
    carve(g, g->mem.arena, natt, nscratch, &nacts);
    dt_rope_table_scaled(cs, T, g->hs, c->rope_theta, &c->rope_scaling);
    k->copy(kc, g->cs, cs, (size_t)T * g->hs * sizeof *cs, DT_COPY_TO_DEVICE);
    free(cs);
    g->head = (struct dt_lm_head){g->voc, g->u_head0, B * T, C, g->at, g->head.logits, g->head.losses, g->mem.targets};
    m->activation_bytes = nacts;
    /* the matmuls' parameters (an untied embedding is a lookup, not a product) plus attention */
    double matmul = (double)m->nparams - (c->tie_embeddings ? 0.0 : (double)c->vocab_size * C);
    m->flops_per_token = 6.0 * matmul + 12.0 * L * C * T;
    *out = m;
    return DT_SUCCESS;
}


void dt_llama_logits(const struct dt_model *m, float *out)
{
    const struct llama *g = m->impl;
    dt_lm_head_logits(m, &g->head, out);
}

void dt_llama_hidden(const struct dt_model *m, int l, float *out)
{
    const struct llama *g = m->impl;
    m->k->copy(m->kc, out, g->resid[l], (size_t)g->B * g->T * g->c.n_embd * sizeof(float), DT_COPY_TO_HOST);
}

const struct dt_llama_config *dt_llama_config_of(const struct dt_model *m)
{
    const struct llama *g = m->impl;
    return &g->c;
}
