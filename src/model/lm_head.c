/* lm_head.c - see lm_head.h. */
#include <string.h>
#include "core/error.h"
#include "core/half.h"
#include "model/lm_head.h"

struct dt_vocab dt_vocab_of(int V)
{
    int vb = (V / 8 + 63) / 64 * 64;
    vb = vb > DT_LOGIT_COLS ? DT_LOGIT_COLS : vb < 64 ? (V < 64 ? V : 64) : vb;
    return (struct dt_vocab){V, vb, (V + vb - 1) / vb};
}

void dt_embed_forward(struct dt_model *m, const struct dt_vocab *v, int u0, float *out, const int32_t *inputs, int BT,
                      int C)
{
    for (int c = 0; c < v->nchunks; c++) {
        struct dt_wref w = dt_model_params_any(m, u0 + c);
        m->k->rows_forward(m->kc, out, inputs, w.p, w.t, c * v->vb, dt_vocab_rows(v, c), BT, C);
        dt_model_params_any_done(m, u0 + c, w);
    }
}

/* vocabulary chunk c's (BT, n) block of the block-major logits */
static void *logits_block(const struct dt_lm_head *h, int c)
{
    return (char *)h->logits + (size_t)h->BT * c * h->voc.vb * dt_dtype_size(h->at);
}

float dt_lm_head_forward(struct dt_model *m, const struct dt_lm_head *h, const void *x, float grad_scale,
                         const struct dt_loss_sink *sink)
{
    const struct dt_kernels *k = m->k;
    for (int c = 0; c < h->voc.nchunks; c++) {
        struct dt_wref w = dt_model_params_any(m, h->u0 + c);
        dt_mm_forward(m, logits_block(h, c), h->at, x, w, false, h->BT, h->C, dt_vocab_rows(&h->voc, c), -1);
        dt_model_params_any_done(m, h->u0 + c, w);
    }
    float dloss = grad_scale / (float)h->BT;
    /* 16-bit logits go to an fp32 cross-entropy (torch.autocast's bf16 LM head into its fp32 loss) */
    if (h->at != DT_F32)
        return k->softmax_xent_lp(m->kc, h->losses, h->logits, h->targets, dloss, h->BT, h->voc.V, h->voc.vb, h->at,
                                  sink);
    return k->softmax_xent(m->kc, h->losses, h->logits, h->targets, dloss, h->BT, h->voc.V, h->voc.vb, sink);
}

void dt_lm_head_backward(struct dt_model *m, const struct dt_lm_head *h, const void *x, float *dx)
{
    for (int c = 0; c < h->voc.nchunks; c++) {
        int u = h->u0 + c;
        struct dt_wref w = dt_model_params_any(m, u);
        bool fresh;
        float *dw = dt_model_grads(m, u, &fresh);
        dt_mm_backward(m, dx, dw, NULL, logits_block(h, c), h->at, x, w, h->BT, h->C, dt_vocab_rows(&h->voc, c),
                       (c == 0 ? DT_SET_DINP : 0) | (fresh ? DT_SET_DPARAMS : 0), -1);
        dt_model_grads_done(m, u);
        dt_model_params_any_done(m, u, w);
    }
}

void dt_lm_head_logits(const struct dt_model *m, const struct dt_lm_head *h, float *out)
{
    size_t es = dt_dtype_size(h->at);
    uint16_t row[DT_LOGIT_COLS]; /* a 16-bit row of a block, widened here */
    for (int c = 0; c < h->voc.nchunks; c++) {
        int n = dt_vocab_rows(&h->voc, c), v0 = c * h->voc.vb;
        for (int i = 0; i < h->BT; i++) {
            const char *at = (const char *)h->logits + ((size_t)h->BT * v0 + (size_t)i * n) * es;
            float *o = out + (size_t)i * h->voc.V + v0;
            if (h->at == DT_F32) {
                m->k->copy(m->kc, o, at, (size_t)n * sizeof(float), DT_COPY_TO_HOST);
                continue;
            }
            m->k->copy(m->kc, row, at, (size_t)n * es, DT_COPY_TO_HOST);
            for (int v = 0; v < n; v++) o[v] = h->at == DT_BF16 ? dt_f32_from_bf16(row[v]) : dt_f32_from_f16(row[v]);
        }
    }
}

void dt_lm_head_row(struct dt_model *m, const struct dt_lm_head *h, const void *x, float *out)
{
    struct dt_lm_head one = *h;
    one.BT = 1; /* one row's block-major logits are row-major */
    for (int c = 0; c < one.voc.nchunks; c++) {
        struct dt_wref w = dt_model_params_any(m, one.u0 + c);
        dt_mm_forward(m, logits_block(&one, c), one.at, x, w, false, 1, one.C, dt_vocab_rows(&one.voc, c), -1);
        dt_model_params_any_done(m, one.u0 + c, w);
    }
    dt_lm_head_logits(m, &one, out);
}

dt_status_t dt_kv_cache_get(struct dt_model *m, struct dt_kv_cache *c, int L, int T, int NKV, int hs)
{
    if (c->buf) return DT_SUCCESS;
    c->layer = (size_t)T * NKV * hs * dt_dtype_size(m->compute);
    c->buf = m->k->alloc(m->kc, 2 * (size_t)L * c->layer);
    if (!c->buf)
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the key/value cache of generation (%.1f MiB: "
                        "%d layers x %d positions x %d heads x %d, keys and values)\n  hint: ask for fewer tokens "
                        "(prompt and new ones)", 2.0 * (double)L * (double)c->layer / 1048576, L, T, NKV, hs);
    return DT_SUCCESS;
}

void dt_kv_cache_free(struct dt_model *m, struct dt_kv_cache *c)
{
    if (c->buf) m->k->free(m->kc, c->buf);
    c->buf = NULL;
}

dt_status_t dt_decode_check(int n, int pos, int T, int hs)
{
    if (hs > DT_ATTN_CACHED_HS_MAX)
        return dt_error(DT_ERR_CONFIG, "dtrun: error: generation takes heads of at most %d channels; this model's have "
                        "%d", DT_ATTN_CACHED_HS_MAX, hs);
    if (n < 1 || pos < 0 || pos + n > T)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: decode of %d tokens at position %d: the model holds %d "
                        "positions", n, pos, T);
    return DT_SUCCESS;
}

dt_status_t dt_lm_mem_alloc(struct dt_model *m, struct dt_lm_mem *a, size_t arena_bytes, int B, int T)
{
    const struct dt_kernels *k = m->k;
    size_t tokens = 2 * (size_t)B * T * sizeof(int32_t);
    a->arena = k->alloc(m->kc, arena_bytes);
    a->inputs = k->alloc(m->kc, tokens);
    a->targets = a->inputs ? a->inputs + (size_t)B * T : NULL;
    for (int i = 0; i < 2; i++) {
        a->stage[i] = k->host_alloc(m->kc, tokens);
        a->staged[i] = DT_NO_TICKET;
    }
    if (!a->arena || !a->inputs)
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the model (%zu MiB of activations); lower "
                        "data.micro_batch_size or enable model.activation_checkpointing", arena_bytes >> 20);
    if (!a->stage[0] || !a->stage[1])
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of host memory for the tokens' staging (2 x %zu KiB%s)\n"
                        "  hint: free memory on this node", tokens >> 10,
                        k->copy_inline ? ", page-locked: the node's limit on locked memory, ulimit -l, may be lower" : "");
    return DT_SUCCESS;
}

void dt_lm_mem_free(struct dt_model *m, struct dt_lm_mem *a)
{
    for (int i = 0; i < 2; i++) /* the copies out of the stages into inputs have ended */
        if (a->stage[i]) dt_copy_wait(m->k, m->kc, a->staged[i], true);
    dt_model_drop_buffers(m);
    m->k->free(m->kc, a->arena);
    m->k->free(m->kc, a->inputs);
    for (int i = 0; i < 2; i++)
        if (a->stage[i]) m->k->host_free(m->kc, a->stage[i]);
    dt_kv_cache_free(m, &a->kv);
}

void dt_lm_tokens_in(struct dt_model *m, struct dt_lm_mem *a, const struct dt_batch *batch, int B, int T)
{
    int s = a->next_stage;
    a->next_stage ^= 1;
    int32_t *in = a->stage[s], *tg = in + (size_t)B * T;
    dt_copy_wait(m->k, m->kc, a->staged[s], true); /* its last copy has read it */
    for (int b = 0; b < B; b++) {
        const int32_t *row = batch->tokens + (size_t)b * (T + 1);
        memcpy(in + (size_t)b * T, row, (size_t)T * sizeof *row);
        memcpy(tg + (size_t)b * T, row + 1, (size_t)T * sizeof *row);
    }
    a->staged[s] = dt_copy_inline(m->k, m->kc, a->inputs, in, 2 * (size_t)B * T * sizeof *in, DT_COPY_TO_DEVICE);
}
