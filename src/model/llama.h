/*
 * llama.h - the Llama family (Llama 2/3, TinyLlama, Mistral-style grouped-query attention), as
 * Hugging Face's LlamaForCausalLM computes it: pre-norm blocks with RMSNorm, rotary position
 * embeddings in the rotate-half layout, grouped-query attention (n_kv_head key/value heads shared by
 * the n_head query heads), a SwiGLU MLP down(silu(gate(x)) * up(x)), no biases, the LM head tied to
 * the token embedding or its own table.
 *
 * The flat buffer is layer-major and every parameter view carries Hugging Face's name, so that a
 * checkpoint maps onto it by name: model.embed_tokens.weight, then per layer input_layernorm,
 * self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj, then model.norm.weight
 * and lm_head.weight (untied only). q, k and v are adjacent (one matmul makes a row of NH query, NKV
 * key and NKV value heads, kernels.h's attention layout), as are gate and up (one matmul, gate
 * first, SwiGLU's input).
 */
#ifndef DT_LLAMA_H
#define DT_LLAMA_H

#include "kernels/formulas.h"
#include "model/model.h"

struct dt_llama_config {
    int n_layer, n_head, n_kv_head, n_embd, intermediate_size, vocab_size, max_seq_len;
    int max_position; /* the context the model is made for (config.json's max_position_embeddings); 0: max_seq_len */
    float rms_eps, rope_theta;
    bool tie_embeddings;
    struct dt_rope_scaling rope_scaling; /* Llama 3.1's scaled frequencies; factor 0: none */
    bool activation_checkpointing; /* keep only block inputs; recompute the rest in backward */
    bool decay_embeddings;         /* weight decay on the token embedding (default off; an untied head decays) */
    /* DT_F32, or DT_BF16 / DT_F16 (mixed precision), as dt_gpt_config's */
    enum dt_dtype activations;
};

/* The model line a checkpoint records (train/shapes.c), which resume compares and `dtrun ckpt export`
 * reads back: every number as it reads back exactly (the floats as their shortest decimals). */
void dt_llama_describe(const struct dt_llama_config *c, char *buf, size_t n);
/* A model line back into c; false when line is not a Llama's. A line without max_position (written
 * before it was recorded) reads as max_position = seq_len. */
bool dt_llama_parse(const char *line, struct dt_llama_config *c);

/* Sized for micro-batches of B sequences of T tokens (T <= max_seq_len). */
dt_status_t dt_llama_create(const struct dt_llama_config *c, const struct dt_kernels *k, struct dt_kctx *kc, int B,
                            int T, struct dt_model **out);
/* Its random init (dt_model_init_source) is Hugging Face's: every matrix N(0, 0.02), the norms 1. */
size_t dt_llama_num_params(const struct dt_llama_config *c);
/* Bytes of the activation arena at micro-batch B x T (as create allocates it: what forward keeps for
 * backward and backward's scratch), attention keeping natt floats a layer and backward natt_scratch
 * floats of scratch (the kernel table's attention_saved and attention_scratch): dtrun check --memory. */
size_t dt_llama_arena_bytes(const struct dt_llama_config *c, int B, int T, size_t natt, size_t nscratch);
/* The units of a Llama of this shape, without building it (malloc'd; dtrun check --memory). */
dt_status_t dt_llama_units(const struct dt_llama_config *c, struct dt_unit **units, int *n);
/* Of the last forward with grad_scale 0: the logits (B,T,V) row-major fp32; the residual stream
 * (B,T,C) entering block l (l = n_layer: leaving the last block, before the final norm). */
void dt_llama_logits(const struct dt_model *m, float *out);
void dt_llama_hidden(const struct dt_model *m, int l, float *out);
const struct dt_llama_config *dt_llama_config_of(const struct dt_model *m);


#endif
