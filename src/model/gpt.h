/*
 * gpt.h - GPT-2: pre-LayerNorm blocks, learned positions, the output layer tied
 * to the token embedding, a 4x GELU MLP. The parameters are llm.c's
 * ParameterTensors (wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w,
 * ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb), laid out layer by layer (each
 * block's tensors together, so a block is one unit that ZeRO-3 can gather);
 * dt_gpt_from_llmc and dt_gpt_to_llmc convert to and from llm.c's order.
 */
#ifndef DT_GPT_H
#define DT_GPT_H

#include "model/model.h"

struct dt_gpt_config {
    int n_layer, n_head, n_embd, vocab_size, max_seq_len;
    bool activation_checkpointing; /* keep only block inputs; recompute the rest in backward */
    bool decay_embeddings;         /* weight decay on wte/wpe (default off) */
    /* DT_F32, or DT_BF16 / DT_F16 (mixed precision): the type of the activations between ops and
     * of the matmuls' operands (the model's compute type), as torch.autocast keeps them: layernorm,
     * attention, GELU and the matmuls write 16 bits, the residual stream and the statistics stay
     * fp32, and the 16-bit logits go to a cross-entropy reduced in fp32 */
    enum dt_dtype activations;
    /* let the kernels run GELU in the MLP's matmuls where they offer it (kernels.h's gelu_fused):
     * backward then needs no fp32 dinp between them (B T 4C floats). Not under fp8-mixed, whose MLP
     * runs its FP8 matmuls and GELU apart. */
    bool fuse_gelu;
};

/* Sized for micro-batches of B sequences of T tokens (T <= max_seq_len). */
dt_status_t dt_gpt_create(const struct dt_gpt_config *c, const struct dt_kernels *k, struct dt_kctx *kc, int B, int T,
                          struct dt_model **out);
size_t dt_gpt_num_params(const struct dt_gpt_config *c);
/* Bytes of the activation arena at micro-batch B x T (as create allocates it: what forward keeps for
 * backward and backward's scratch), attention keeping natt floats a layer and backward natt_scratch
 * floats of scratch (the kernel table's attention_saved and attention_scratch): dtrun check --memory.
 * c->fuse_gelu is taken to mean the kernels do fuse GELU (the caller knows whether they will). */
size_t dt_gpt_arena_bytes(const struct dt_gpt_config *c, int B, int T, size_t natt, size_t nscratch);
/* The units of a GPT of this shape, without building it (malloc'd; dtrun check --memory). */
dt_status_t dt_gpt_units(const struct dt_gpt_config *c, struct dt_unit **units, int *n);
/*
 * Weights written by llm.c (train_gpt2.py's write_model) as a source of parameters (model.h): a
 * header of 256 int32 (magic 20240326, version 3 = float32, max_seq_len, vocab, layers, heads,
 * channels, padded vocab), then the parameters in llm.c's order with wte padded to the padded
 * vocab. Every dimension must match the model's, the positions may be longer (the first
 * max_seq_len rows are used), and the file must hold every byte; each range asked for is read with
 * pread from where it lies. The random init (GPT-2's: N(0, 0.02), residual projections N(0,
 * 0.02/sqrt(2L)), norms 1 and 0, biases 0) is the model's own (dt_model_init_source).
 */
dt_status_t dt_gpt_llmc_source(const struct dt_model *m, const char *path, struct dt_param_source *s);
/* Logits (B,T,V), row-major, of the last forward with grad_scale 0 (a training forward overwrites them with their
 * gradient); with 16-bit activations, the 16-bit logits widened. */
void dt_gpt_logits(const struct dt_model *m, float *out);
/* A whole parameter (or gradient) buffer from llm.c's tensor-major order into this model's, and back. */
void dt_gpt_from_llmc(const struct dt_model *m, const float *llmc, float *ours);
void dt_gpt_to_llmc(const struct dt_model *m, const float *ours, float *llmc);

#endif
