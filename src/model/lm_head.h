/*
 * lm_head.h - what every language model here shares around its transformer blocks: the token
 * embedding read a block of vocabulary rows (a unit) at a time, the LM head over the same blocks
 * (tied to the embedding, or its own table), the fused softmax cross-entropy on block-major logits,
 * and the arena cursor that lays a model's activations out. GPT-2 and Llama call these.
 */
#ifndef DT_LM_HEAD_H
#define DT_LM_HEAD_H

#include "model/model.h"

/* most vocabulary rows per unit (and per logits block): a block of logits at B*T = 256 is 2 MiB in
 * fp32, wide enough that the matmul keeps its full rate */
#define DT_LOGIT_COLS 2048

/* A vocabulary cut into blocks of vb rows, one unit each. */
struct dt_vocab {
    int V, vb, nchunks;
};

/* at most an eighth of the vocabulary in whole cache lines, and at most DT_LOGIT_COLS; all of a
 * vocabulary below 64 */
struct dt_vocab dt_vocab_of(int V);
static inline int dt_vocab_rows(const struct dt_vocab *v, int c)
{
    return v->V - c * v->vb < v->vb ? v->V - c * v->vb : v->vb;
}

/* The LM head and its loss: logits (B*T, V) block-major (kernels.h) of type at, losses (B*T) fp32,
 * the head's weights units u0 .. u0 + nchunks - 1. */
struct dt_lm_head {
    struct dt_vocab voc;
    int u0, BT, C;
    enum dt_dtype at;
    void *logits;
    float *losses;
    const int32_t *targets;
};

/* out (BT, C) fp32 = the rows of the embedding's units [u0, u0 + nchunks) that inputs name, added */
void dt_embed_forward(struct dt_model *m, const struct dt_vocab *v, int u0, float *out, const int32_t *inputs, int BT,
                      int C);
/* The mean loss of x (BT, C, of type at) through the head (with a sink: added there, 0 returned;
 * kernels.h); with grad_scale != 0 the logits hold their gradient after (scaled by grad_scale / BT). */
float dt_lm_head_forward(struct dt_model *m, const struct dt_lm_head *h, const void *x, float grad_scale,
                         const struct dt_loss_sink *sink);
/* dx (fp32, =) = dlogits @ W, the head's gradients added */
void dt_lm_head_backward(struct dt_model *m, const struct dt_lm_head *h, const void *x, float *dx);
/* the logits of the last forward with grad_scale 0, (BT, V) row-major fp32, 16-bit ones widened */
void dt_lm_head_logits(const struct dt_model *m, const struct dt_lm_head *h, float *out);

/* The logits (V, fp32, host) of one row x (C, of type at) through the head: generation's last token. */
void dt_lm_head_row(struct dt_model *m, const struct dt_lm_head *h, const void *x, float *out);

/* The keys and values generation keeps (model.h's decode): per layer a key cache and a value cache
 * (T, NKV, hs) of the activation type, in one allocation made at the first decode. */
struct dt_kv_cache {
    char *buf;
    size_t layer; /* bytes of one layer's key (or value) cache */
};
/* c allocated for L layers of T positions, unless it is; an error says how much it wanted */
dt_status_t dt_kv_cache_get(struct dt_model *m, struct dt_kv_cache *c, int L, int T, int NKV, int hs);
static inline void *dt_kv_keys(const struct dt_kv_cache *c, int l) { return c->buf + 2 * (size_t)l * c->layer; }
static inline void *dt_kv_values(const struct dt_kv_cache *c, int l) { return c->buf + (2 * (size_t)l + 1) * c->layer; }
void dt_kv_cache_free(struct dt_model *m, struct dt_kv_cache *c);
/* decode's arguments checked against the model's T and head size (an error names them) */
dt_status_t dt_decode_check(int n, int pos, int T, int hs);

/* What a language model allocates (its parameters are a strategy's, or dt_model_own_buffers'): the
 * activation arena, the (B, T) token inputs and targets, and generation's cache. */
struct dt_lm_mem {
    char *arena;
    int32_t *inputs, *targets; /* targets right after inputs: one allocation, one copy up a micro-batch */
    /* Two buffers of host_alloc'ed memory (a GPU's: page-locked) the tokens go up from, in turn, each
     * with the ticket of its last copy (copy_inline: among the ops, after those that may still read
     * inputs, before those that read it next, never behind the offloaded state's copies): the host
     * does not wait for the device to take a micro-batch's tokens (a copy from pageable memory waits
     * for every op queued before it), only, before it refills a buffer, for that buffer's copy two
     * micro-batches back. */
    int32_t *stage[2];
    uint64_t staged[2];
    int next_stage;
    struct dt_kv_cache kv; /* generation's, from its first decode */
};
/* all of it, or an error that says how to fit (the caller frees what was made with dt_lm_mem_free) */
dt_status_t dt_lm_mem_alloc(struct dt_model *m, struct dt_lm_mem *a, size_t arena_bytes, int B, int T);
void dt_lm_mem_free(struct dt_model *m, struct dt_lm_mem *a);
/* the batch's B sequences of T+1 tokens into inputs [0, T) and targets [1, T], through a stage: the
 * ops queued next read them */
void dt_lm_tokens_in(struct dt_model *m, struct dt_lm_mem *a, const struct dt_batch *batch, int B, int T);

/* The arena's cursor: n elements of type t are carved off it at a time, each piece on a 64-byte
 * boundary (cache lines; a GPU's vector loads). With no base, it only counts. */
struct dt_cursor {
    char *base;
    size_t off;
};

static inline void *dt_take(struct dt_cursor *c, size_t n, enum dt_dtype t)
{
    void *p = c->base ? c->base + c->off : NULL;
    c->off += (n * dt_dtype_size(t) + 63) & ~(size_t)63;
    return p;
}

#endif
