/* shapes.c - see shapes.h. */
#include <stdio.h>
#include "train/shapes.h"

void dt_shapes_gpt(const struct dt_config *cfg, enum dt_dtype activations, struct dt_gpt_config *gc)
{
    *gc = (struct dt_gpt_config){(int)cfg->model.n_layer,    (int)cfg->model.n_head,  (int)cfg->model.n_embd,
                                 (int)cfg->model.vocab_size, (int)cfg->model.seq_len, cfg->model.activation_checkpointing,
                                 false,                      activations};
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
    struct dt_gpt_config gc;
    dt_shapes_gpt(cfg, DT_F32, &gc);
    snprintf(buf, n, "gpt n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d", gc.n_layer, gc.n_head, gc.n_embd,
             gc.vocab_size, gc.max_seq_len);
}
