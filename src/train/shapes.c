/* shapes.c - see shapes.h. */
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
