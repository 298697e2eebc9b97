/* optimizer.c - see optimizer.h. */
#include <math.h>
#include <stdlib.h>
#include "core/error.h"
#include "core/mem.h"
#include "optim/optimizer.h"

dt_status_t dt_optimizer_init(struct dt_optimizer *o, const struct dt_optim_config *c, const struct dt_kernels *k,
                              size_t n)
{
    *o = (struct dt_optimizer){.c = *c, .k = k, .n = n};
    o->m = dt_alloc_big(n * sizeof(float));
    if (c->kind != DT_OPT_SGD) o->v = dt_alloc_big(n * sizeof(float));
    if (!o->m || (c->kind != DT_OPT_SGD && !o->v)) {
        dt_optimizer_free(o);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the optimizer state (%zu parameters)", n);
    }
    return DT_SUCCESS;
}

void dt_optimizer_free(struct dt_optimizer *o)
{
    dt_free_big(o->m);
    dt_free_big(o->v);
    o->m = o->v = NULL;
}

size_t dt_optimizer_state_bytes(enum dt_optim_kind kind) { return kind == DT_OPT_SGD ? 4 : 8; }

void dt_optimizer_begin(struct dt_optimizer *o) { o->t++; }

void dt_optimizer_update(const struct dt_optimizer *o, float *p, float *g, size_t at, size_t n, bool decay, float lr,
                         float gscale)
{
    const struct dt_optim_config *c = &o->c;
    float wd = decay ? c->weight_decay : 0.0f;
    switch (c->kind) {
    case DT_OPT_ADAMW:
        o->k->adamw(p, g, gscale, o->m + at, o->v + at, n, lr, c->beta1, c->beta2, c->eps, wd, (int)o->t);
        break;
    case DT_OPT_ADAM:
        /* Adam's L2 penalty is part of the gradient, unlike AdamW's decoupled decay: fold it in first */
        if (wd != 0) {
            for (size_t j = 0; j < n; j++) g[j] = g[j] * gscale + wd * p[j];
            gscale = 1.0f;
        }
        o->k->adamw(p, g, gscale, o->m + at, o->v + at, n, lr, c->beta1, c->beta2, c->eps, 0.0f, (int)o->t);
        break;
    case DT_OPT_SGD:
        o->k->sgd(p, g, gscale, o->m + at, n, lr, c->momentum, c->nesterov, wd, o->t == 1);
        break;
    }
}

void dt_optimizer_step(struct dt_optimizer *o, struct dt_model *m, float lr, float gscale)
{
    dt_optimizer_begin(o);
    for (int i = 0; i < m->nviews; i++) {
        const struct dt_param_view *v = &m->views[i];
        dt_optimizer_update(o, m->params + v->offset, m->grads + v->offset, v->offset, v->numel, v->decay, lr, gscale);
    }
}

float dt_grad_norm(const struct dt_model *m, float clip, float *gscale)
{
    float norm = (float)sqrt(m->k->sumsq(m->grads, DT_F32, m->nparams));
    float coef = clip > 0 ? clip / (norm + 1e-6f) : 1.0f;
    *gscale = coef < 1.0f ? coef : 1.0f;
    return norm;
}
