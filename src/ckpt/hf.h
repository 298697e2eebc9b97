/*
 * hf.h - Hugging Face model directories in and out: config.json beside model.safetensors, or
 * shards model-0000N-of-0000M.safetensors with model.safetensors.index.json (safetensors.h). A
 * model's parameter views carry Hugging Face's names (llama.h), so both directions walk the views.
 */
#ifndef DT_CKPT_HF_H
#define DT_CKPT_HF_H

#include <stdint.h>
#include "model/llama.h"

/* transformers' name of a dtype in config.json's torch_dtype: float32, bfloat16, float16 */
const char *dt_hf_torch_dtype(enum dt_dtype t);

/* dir's weights as a source of the Llama m's parameters (model.h): the tensors (fp32, bf16 or fp16)
 * must be exactly m's (one error names every missing, misshapen or unknown one; config.json's
 * settings are the config's, config/init_from.c), and each range asked for is read from the bytes
 * that hold it, nothing else (a rank reads its slices). */
dt_status_t dt_hf_llama_source(const struct dt_model *m, const char *dir, struct dt_param_source *s);
/* params (host, fp32, m's flat buffer) into dir as dtype, in shards of at most shard_bytes once the
 * tensors pass that size (0: one file), with config.json. */
dt_status_t dt_hf_save_llama(const struct dt_model *m, const float *params, const char *dir, enum dt_dtype dtype,
                             uint64_t shard_bytes);

#endif
