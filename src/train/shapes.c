/* shapes.c - see shapes.h. */
#include <stdio.h>
#include <stdlib.h>
#include "core/error.h"
#include "train/shapes.h"

void dt_shapes_gpt(const struct dt_config *cfg, enum dt_dtype activations, struct dt_gpt_config *gc)
{
    /* GELU in the MLP's matmuls where the kernels offer it, but under fp8-mixed (gpt.h) */
    *gc = (struct dt_gpt_config){.n_layer = (int)cfg->model.n_layer,
                                 .n_head = (int)cfg->model.n_head,
                                 .n_embd = (int)cfg->model.n_embd,
                                 .vocab_size = (int)cfg->model.vocab_size,
                                 .max_seq_len = (int)cfg->model.seq_len,
                                 .activation_checkpointing = cfg->model.activation_checkpointing,
                                 .decay_embeddings = false,
                                 .activations = activations,
                                 .fuse_gelu = cfg->compute.precision != DT_PREC_FP8_MIXED};
}

void dt_shapes_llama(const struct dt_config *cfg, enum dt_dtype activations, struct dt_llama_config *lc)
{
    *lc = (struct dt_llama_config){.n_layer = (int)cfg->model.n_layer,
                                   .n_head = (int)cfg->model.n_head,
                                   .n_kv_head = (int)cfg->model.n_kv_head,
                                   .n_embd = (int)cfg->model.n_embd,
                                   .intermediate_size = (int)cfg->model.intermediate_size,
                                   .vocab_size = (int)cfg->model.vocab_size,
                                   .max_seq_len = (int)cfg->model.seq_len,
                                   .max_position = (int)cfg->model.max_position_embeddings,
                                   .rms_eps = (float)cfg->model.norm_eps,
                                   .rope_theta = (float)cfg->model.rope_theta,
                                   .tie_embeddings = cfg->model.tie_embeddings,
                                   .activation_checkpointing = cfg->model.activation_checkpointing,
                                   .activations = activations};
    /* none: all zeros, so that numbers the model never reads do not tell two checkpoints apart */
    if (cfg->model.rope_scaling.type == DT_ROPE_LLAMA3)
        lc->rope_scaling = (struct dt_rope_scaling){(float)cfg->model.rope_scaling.factor,
                                                    (float)cfg->model.rope_scaling.low_freq_factor,
                                                    (float)cfg->model.rope_scaling.high_freq_factor,
                                                    (float)cfg->model.rope_scaling.original_max_position_embeddings};
}

void dt_shapes_mlp(const struct dt_config *cfg, struct dt_mlp_config *mc)
{
    *mc = (struct dt_mlp_config){.in = (int)cfg->model.mlp.in_features,
                                 .out = (int)cfg->model.mlp.out_features,
                                 .nhidden = cfg->model.mlp.hidden.n,
                                 .regression = cfg->model.mlp.task == DT_TASK_REGRESSION};
    for (int i = 0; i < mc->nhidden; i++) mc->hidden[i] = (int)cfg->model.mlp.hidden.v[i];
}

void dt_shapes_optim(const struct dt_config *cfg, struct dt_optim_config *oc)
{
    static const enum dt_optim_kind kinds[] = {[DT_OPTIM_ADAMW] = DT_OPT_ADAMW, [DT_OPTIM_ADAM] = DT_OPT_ADAM,
                                               [DT_OPTIM_SGD] = DT_OPT_SGD};
    *oc = (struct dt_optim_config){kinds[cfg->optimizer.type],
                                   (float)cfg->optimizer.betas.v[0],
                                   (float)cfg->optimizer.betas.v[1],
                                   (float)cfg->optimizer.eps,
                                   (float)cfg->optimizer.weight_decay,
                                   (float)cfg->optimizer.momentum,
                                   cfg->optimizer.nesterov};
}

dt_status_t dt_shapes_units(const struct dt_config *cfg, struct dt_unit **units, int *n)
{
    if (cfg->model.type == DT_MODEL_MLP) {
        struct dt_mlp_config mc;
        dt_shapes_mlp(cfg, &mc);
        return dt_mlp_units(&mc, units, n);
    }
    if (cfg->model.type == DT_MODEL_LLAMA) {
        struct dt_llama_config lc;
        dt_shapes_llama(cfg, DT_F32, &lc);
        return dt_llama_units(&lc, units, n);
    }
    struct dt_gpt_config gc;
    dt_shapes_gpt(cfg, DT_F32, &gc);
    return dt_gpt_units(&gc, units, n);
}

void dt_shapes_describe(const struct dt_config *cfg, char *buf, size_t n)
{
    if (cfg->model.type == DT_MODEL_MLP) {
        struct dt_mlp_config mc;
        dt_shapes_mlp(cfg, &mc);
        int o = snprintf(buf, n, "mlp in=%d hidden=[", mc.in);
        for (int i = 0; i < mc.nhidden && o > 0 && (size_t)o < n; i++)
            o += snprintf(buf + o, n - (size_t)o, "%s%d", i ? "," : "", mc.hidden[i]);
        if (o > 0 && (size_t)o < n)
            snprintf(buf + o, n - (size_t)o, "] out=%d %s", mc.out, mc.regression ? "regression" : "classification");
        return;
    }
    if (cfg->model.type == DT_MODEL_LLAMA) {
        struct dt_llama_config lc;
        dt_shapes_llama(cfg, DT_F32, &lc);
        dt_llama_describe(&lc, buf, n);
        return;
    }
    struct dt_gpt_config gc;
    dt_shapes_gpt(cfg, DT_F32, &gc);
    snprintf(buf, n, "gpt n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d", gc.n_layer, gc.n_head, gc.n_embd,
             gc.vocab_size, gc.max_seq_len);
}

dt_status_t dt_shapes_print(const struct dt_config *cfg, FILE *out)
{
    struct dt_unit *units;
    int n;
    DT_CHECK(dt_shapes_units(cfg, &units, &n));
    size_t total = 0;
    for (int u = 0; u < n; u++) total += units[u].numel;
    free(units);
    char digits[32], grouped[48], shape[256];
    int len = snprintf(digits, sizeof digits, "%zu", total), o = 0;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) grouped[o++] = ',';
        grouped[o++] = digits[i];
    }
    grouped[o] = 0;
    double v = (double)total;
    dt_shapes_describe(cfg, shape, sizeof shape);
    fprintf(out, "# parameters: %s (%.3g%s), %s\n", grouped, v >= 1e9 ? v / 1e9 : v >= 1e6 ? v / 1e6 : v / 1e3,
            v >= 1e9 ? "B" : v >= 1e6 ? "M" : "K", shape);
    return DT_SUCCESS;
}
