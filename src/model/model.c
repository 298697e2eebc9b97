/* model.c - see model.h: the memory interface of a model without a strategy. */
#include "model/model.h"

static const float *own_params(void *ctx, int u)
{
    struct dt_model *m = ctx;
    return m->params + m->units[u].offset;
}

/* m->grads accumulate until their owner zeroes them */
static float *own_grads(void *ctx, int u, bool *fresh)
{
    struct dt_model *m = ctx;
    *fresh = false;
    return m->grads + m->units[u].offset;
}

static void own_done(void *ctx, int u)
{
    (void)ctx;
    (void)u;
}

static void own_rows(void *ctx, size_t table, const int32_t *rows, const float *vals, int nrows, int width)
{
    struct dt_model *m = ctx;
    m->k->rows_add(m->kc, m->grads + table, DT_F32, 0, m->nparams - table, rows, vals, nrows, width);
}

void dt_model_own_mem(struct dt_model *m)
{
    m->mem = (struct dt_model_mem_i){.params = own_params, .params_done = own_done, .grads = own_grads,
                                     .grads_done = own_done, .rows = own_rows};
    m->mem_ctx = m;
}

void dt_model_drop_buffers(struct dt_model *m)
{
    m->k->free(m->kc, m->params);
    m->k->free(m->kc, m->grads);
    m->params = m->grads = NULL;
}
