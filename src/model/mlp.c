/* mlp.c - see mlp.h. Layer l maps width[l] to width[l+1]; pre[l] is its output before GELU. Each layer
 * (its weight, then its bias) is one unit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "core/rng.h"
#include "model/mlp.h"

struct mlp {
    struct dt_model base;
    struct dt_mlp_config c;
    int B, nlayers;
    int width[DT_MLP_MAX_LAYERS + 1];
    struct dt_param_view views[2 * DT_MLP_MAX_LAYERS];
    struct dt_unit units[DT_MLP_MAX_LAYERS]; /* layer l: its weight and bias */
    char names[2 * DT_MLP_MAX_LAYERS][8];
    /* of the activation type (c.activations) but the output layer's pre, fp32 */
    void *pre[DT_MLP_MAX_LAYERS];  /* (B, width[l+1]) */
    void *post[DT_MLP_MAX_LAYERS]; /* GELU(pre[l]), the next layer's input; post[-1] is x */
    void *dpre;                    /* gradient scratch, (B, max width): of the activation type, */
    float *dpost;                  /* fp32 (a matmul's dinp) */
    float *dout;                    /* d loss / d output, (B, out) */
    float *losses;                  /* (B) */
    float *x;                       /* the batch's features, (B, in), narrowed in place to the activation type */
    float *y;                       /* regression targets, (B, out) */
    int32_t *labels;                /* class labels, (B) */
};

static float mlp_forward(struct dt_model *m, const struct dt_batch *b, float grad_scale, const struct dt_loss_sink *sink)
{
    struct mlp *p = m->impl;
    const struct dt_kernels *k = m->k;
    struct dt_kctx *kc = m->kc;
    int B = p->B, L = p->nlayers, out = p->c.out;
    enum dt_dtype at = p->c.activations;
    k->copy(kc, p->x, b->x, (size_t)B * p->c.in * sizeof(float), DT_COPY_TO_DEVICE);
    /* the one conversion of a step: the batch into the activation type */
    if (at != DT_F32) k->narrow_inplace(kc, p->x, (size_t)B * p->c.in, at);
    const void *in = p->x;
    for (int l = 0; l < L; l++) {
        struct dt_wref w = dt_model_params_any(m, l); /* the weight (width[l+1], width[l]), then the bias */
        dt_mm_forward(m, p->pre[l], l + 1 < L ? at : DT_F32, in, w, true, B, p->width[l], p->width[l + 1], -1);
        dt_model_params_any_done(m, l, w);
        if (l + 1 < L) {
            k->gelu_forward(kc, p->post[l], p->pre[l], at, (size_t)B * p->width[l + 1]);
            in = p->post[l];
        }
    }
    const float *logits = p->pre[L - 1];
    if (p->c.regression) {
        k->copy(kc, p->y, b->y, (size_t)B * out * sizeof(float), DT_COPY_TO_DEVICE);
        return k->mse(kc, p->dout, logits, p->y, grad_scale / (float)(B * out), (size_t)B * out, sink);
    }
    k->copy(kc, p->labels, b->labels, (size_t)B * sizeof(int32_t), DT_COPY_TO_DEVICE);
    k->copy(kc, p->dout, logits, (size_t)B * out * sizeof(float), DT_COPY_ON_DEVICE);
    return k->softmax_xent(kc, p->losses, p->dout, p->labels, grad_scale / (float)B, B, out, out, sink);
}

/* dpost holds d loss / d (layer input), dpre d loss / d pre[l-1]; each is consumed before it is rewritten. */
static void mlp_backward(struct dt_model *m)
{
    struct mlp *p = m->impl;
    const struct dt_kernels *k = m->k;
    struct dt_kctx *kc = m->kc;
    int B = p->B;
    const void *dcur = p->dout; /* d loss / d pre[l], of type dt */
    enum dt_dtype dt = DT_F32, at = p->c.activations;
    for (int l = p->nlayers - 1; l >= 0; l--) {
        const void *in = l ? p->post[l - 1] : p->x;
        size_t nin = (size_t)B * p->width[l], nw = (size_t)p->width[l] * p->width[l + 1];
        struct dt_wref w = dt_model_params_any(m, l);
        bool fresh;
        float *dw = dt_model_grads(m, l, &fresh);
        dt_mm_backward(m, p->dpost, dw, dw + nw, dcur, dt, in, w, B, p->width[l], p->width[l + 1],
                       DT_SET_DINP | (fresh ? DT_SET_DPARAMS : 0), -1);
        dt_model_grads_done(m, l);
        dt_model_params_any_done(m, l, w);
        if (l == 0) break;
        k->gelu_backward(kc, p->dpre, p->pre[l - 1], p->dpost, at, nin);
        dcur = p->dpre;
        dt = at;
    }
}

static void mlp_free(struct dt_model *m)
{
    struct mlp *p = m->impl;
    dt_model_drop_buffers(m);
    void *bufs[] = {p->dpre, p->dpost, p->dout, p->losses, p->x, p->y, p->labels};
    for (int l = 0; l < p->nlayers; l++) {
        m->k->free(m->kc, p->pre[l]);
        m->k->free(m->kc, p->post[l]);
    }
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) m->k->free(m->kc, bufs[i]);
    free(p);
}

dt_status_t dt_mlp_units(const struct dt_mlp_config *c, struct dt_unit **units, int *n)
{
    int width[DT_MLP_MAX_LAYERS + 1] = {c->in};
    for (int i = 0; i < c->nhidden; i++) width[i + 1] = c->hidden[i];
    width[c->nhidden + 1] = c->out;
    *n = c->nhidden + 1;
    *units = calloc((size_t)*n, sizeof **units);
    if (!*units) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    size_t off = 0;
    for (int l = 0; l < *n; l++) {
        size_t numel = (size_t)width[l + 1] * width[l] + (size_t)width[l + 1];
        (*units)[l] = (struct dt_unit){off, numel};
        off += numel;
    }
    return DT_SUCCESS;
}

size_t dt_mlp_arena_bytes(const struct dt_mlp_config *c, int B)
{
    size_t as = dt_dtype_size(c->activations), maxw = (size_t)(c->in > c->out ? c->in : c->out), bytes = 0;
    int nlayers = c->nhidden + 1;
    for (int l = 0; l < nlayers; l++) {
        size_t fo = (size_t)(l < c->nhidden ? c->hidden[l] : c->out);
        maxw = fo > maxw ? fo : maxw;
        bytes += (size_t)B * fo * (dt_dtype_size(l + 1 < nlayers ? c->activations : DT_F32) + as); /* pre, post */
    }
    /* dpre, dpost, dout, losses, x, y, labels */
    return bytes + (size_t)B * (maxw * (as + 4) + (size_t)c->out * 4 + 4 + (size_t)c->in * 4 + (size_t)c->out * 4 + 4);
}

dt_status_t dt_mlp_create(const struct dt_mlp_config *c, const struct dt_kernels *k, struct dt_kctx *kc, int B,
                          struct dt_model **out)
{
    *out = NULL;
    struct mlp *p = calloc(1, sizeof *p);
    if (!p) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the mlp");
    struct dt_model *m = &p->base;
    m->k = k;
    m->kc = kc;
    p->c = *c;
    p->B = B;
    p->nlayers = c->nhidden + 1;
    p->width[0] = c->in;
    for (int i = 0; i < c->nhidden; i++) p->width[i + 1] = c->hidden[i];
    p->width[p->nlayers] = c->out;
    m->compute = c->activations;
    size_t off = 0, as = dt_dtype_size(c->activations);
    int maxw = 0;
    for (int l = 0; l < p->nlayers; l++) {
        int fi = p->width[l], fo = p->width[l + 1];
        maxw = fi > maxw ? fi : maxw;
        maxw = fo > maxw ? fo : maxw;
        snprintf(p->names[2 * l], sizeof p->names[0], "w%d", l);
        snprintf(p->names[2 * l + 1], sizeof p->names[0], "b%d", l);
        /* PyTorch nn.Linear's init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), each view a stream of its own */
        float bound = 1.0f / sqrtf((float)fi);
        p->views[2 * l] = (struct dt_param_view){p->names[2 * l], off, (size_t)fo * fi, true, 2, {fo, fi, 0},
                                                 {DT_INIT_UNIFORM, bound, 0x3100ull + 2 * (uint64_t)l, 0}};
        off += (size_t)fo * fi;
        p->views[2 * l + 1] = (struct dt_param_view){p->names[2 * l + 1], off, (size_t)fo, false, 1, {fo, 0, 0},
                                                     {DT_INIT_UNIFORM, bound, 0x3100ull + 2 * (uint64_t)l + 1, 0}};
        off += (size_t)fo;
        p->units[l] = (struct dt_unit){p->views[2 * l].offset, (size_t)fo * fi + fo};
        p->pre[l] = k->alloc(kc, (size_t)B * fo * dt_dtype_size(l + 1 < p->nlayers ? c->activations : DT_F32));
        p->post[l] = k->alloc(kc, (size_t)B * fo * as);
    }
    m->iface = (struct dt_model_i){.forward = mlp_forward, .backward = mlp_backward, .free = mlp_free};
    m->impl = p;
    m->nparams = off;
    m->views = p->views;
    m->nviews = 2 * p->nlayers;
    m->units = p->units;
    m->nunits = p->nlayers;
    p->dpre = k->alloc(kc, (size_t)B * maxw * as);
    p->dpost = k->alloc(kc, (size_t)B * maxw * sizeof(float));
    p->dout = k->alloc(kc, (size_t)B * c->out * sizeof(float));
    p->losses = k->alloc(kc, (size_t)B * sizeof(float));
    p->x = k->alloc(kc, (size_t)B * c->in * sizeof(float));
    p->y = k->alloc(kc, (size_t)B * c->out * sizeof(float));
    p->labels = k->alloc(kc, (size_t)B * sizeof(int32_t));
    bool ok = p->dpre && p->dpost && p->dout && p->losses && p->x && p->y && p->labels;
    for (int l = 0; l < p->nlayers; l++) ok = ok && p->pre[l] && p->post[l];
    if (!ok) {
        mlp_free(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory creating the mlp (%zu parameters)", off);
    }
    size_t acts = 0;
    for (int l = 0; l < p->nlayers; l++)
        acts += (size_t)B * p->width[l + 1] * (as + dt_dtype_size(l + 1 < p->nlayers ? c->activations : DT_F32));
    m->activation_bytes = acts;
    m->flops_per_token = 6.0 * (double)off;
    *out = m;
    return DT_SUCCESS;
}

