/* optimizer.c - see optimizer.h. */
#include <math.h>
#include <stdlib.h>
#include "core/error.h"
#include "optim/optimizer.h"

dt_status_t dt_optimizer_init(struct dt_optimizer *o, const struct dt_optim_config *c, const struct dt_kernels *k,
                              struct dt_kctx *kc, size_t n)
{
    *o = (struct dt_optimizer){.c = *c, .k = k, .kc = kc, .n = n};
    o->m = k->alloc(kc, n * sizeof(float));
    if (c->kind != DT_OPT_SGD) o->v = k->alloc(kc, n * sizeof(float));
    if (!o->m || (c->kind != DT_OPT_SGD && !o->v)) {
        dt_optimizer_free(o);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the optimizer state (%zu parameters)", n);
    }
    return DT_SUCCESS;
}

void dt_optimizer_free(struct dt_optimizer *o)
{
    if (o->k) {
        o->k->free(o->kc, o->m);
        o->k->free(o->kc, o->v);
    }
    o->m = o->v = NULL;
}

size_t dt_optimizer_state_bytes(enum dt_optim_kind kind) { return kind == DT_OPT_SGD ? 4 : 8; }

void dt_optimizer_begin(struct dt_optimizer *o) { o->t++; }

void dt_optimizer_update(const struct dt_optimizer *o, float *p, const void *g, enum dt_dtype gt, void *plp,
                         enum dt_dtype pt, size_t at, size_t n, bool decay, float lr, float gscale)
{
    const struct dt_optim_config *c = &o->c;
    float wd = decay ? c->weight_decay : 0.0f;
    switch (c->kind) {
    case DT_OPT_ADAMW:
        o->k->adamw(o->kc, p, g, gt, gscale, 0.0f, o->m + at, o->v + at, n, lr, c->beta1, c->beta2, c->eps, wd,
                    (int)o->t, plp, pt);
        break;
    case DT_OPT_ADAM:
        /* Adam's L2 penalty is part of the gradient, unlike AdamW's decoupled decay */
        o->k->adamw(o->kc, p, g, gt, gscale, wd, o->m + at, o->v + at, n, lr, c->beta1, c->beta2, c->eps, 0.0f,
                    (int)o->t, plp, pt);
        break;
    case DT_OPT_SGD:
        o->k->sgd(o->kc, p, g, gt, gscale, o->m + at, n, lr, c->momentum, c->nesterov, wd, o->t == 1, plp, pt);
        break;
    }
}

bool dt_optimizer_slice(const struct dt_optimizer *o, float *p, const void *g, void *plp, size_t at, size_t n,
                        bool decay, struct dt_adamw_slice *s)
{
    float wd = decay ? o->c.weight_decay : 0.0f;
    if (o->c.kind == DT_OPT_SGD) return false;
    /* Adam's L2 penalty is part of the gradient, unlike AdamW's decoupled decay */
    bool adamw = o->c.kind == DT_OPT_ADAMW;
    *s = (struct dt_adamw_slice){p, o->m + at, o->v + at, g, plp, n, adamw ? wd : 0.0f, adamw ? 0.0f : wd};
    return true;
}

void dt_optimizer_apply(const struct dt_optimizer *o, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt,
                        enum dt_dtype pt, float lr, float gscale)
{
    const struct dt_optim_config *c = &o->c;
    if (ns > 0) o->k->adamw_slices(o->kc, s, ns, gt, gscale, lr, c->beta1, c->beta2, c->eps, (int)o->t, pt);
}

void dt_optimizer_step(struct dt_optimizer *o, struct dt_model *m, float lr, float gscale)
{
    dt_optimizer_begin(o);
    for (int i = 0; i < m->nviews; i++) {
        const struct dt_param_view *v = &m->views[i];
        dt_optimizer_update(o, m->params + v->offset, m->grads + v->offset, DT_F32, NULL, DT_F32, v->offset, v->numel,
                            v->decay, lr, gscale);
    }
}

float dt_grad_norm(const struct dt_model *m, float clip, float *gscale)
{
    float norm = (float)sqrt(m->k->sumsq(m->kc, m->grads, DT_F32, m->nparams));
    float coef = clip > 0 ? clip / (norm + 1e-6f) : 1.0f;
    *gscale = coef < 1.0f ? coef : 1.0f;
    return norm;
}
