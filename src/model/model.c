/* model.c - see model.h: a model's random init range by range, and the memory of a model without a strategy. */
#include <stdio.h>
#include <stdlib.h>
#include "core/error.h"
#include "core/rng.h"
#include "model/model.h"

/* ---- the random init */

/* n values of view v from its element j on */
static void draw(const struct dt_param_view *v, uint64_t seed, size_t j, size_t n, float *dst)
{
    const struct dt_init *in = &v->init;
    if (in->kind == DT_INIT_CONST) {
        for (size_t i = 0; i < n; i++) dst[i] = in->scale;
        return;
    }
    struct dt_rng r = dt_rng_make(seed, in->stream);
    bool normal = in->kind == DT_INIT_NORMAL;
    dt_rng_skip(&r, (uint64_t)(in->first + j) * (normal ? 2 : 1));
    if (normal)
        for (size_t i = 0; i < n; i++) dst[i] = in->scale * dt_rng_normal(&r);
    else
        for (size_t i = 0; i < n; i++) dst[i] = in->scale * (2.0f * dt_rng_uniform(&r) - 1.0f);
}

/* the values in chunks over the threads: a rank's share of an 8B model is a billion of them */
#define DRAW_CHUNK 65536

void dt_model_init_range(const struct dt_model *m, uint64_t seed, size_t off, size_t n, float *dst)
{
    for (int i = 0; i < m->nviews && n; i++) {
        const struct dt_param_view *v = &m->views[i];
        size_t lo = v->offset > off ? v->offset : off, hi = v->offset + v->numel < off + n ? v->offset + v->numel : off + n;
        if (hi <= lo) continue;
        size_t chunks = (hi - lo + DRAW_CHUNK - 1) / DRAW_CHUNK;
        #pragma omp parallel for schedule(static)
        for (size_t c = 0; c < chunks; c++) {
            size_t a = lo + c * DRAW_CHUNK, k = hi - a < DRAW_CHUNK ? hi - a : DRAW_CHUNK;
            draw(v, seed, a - v->offset, k, dst + (a - off));
        }
    }
}

struct init_ctx {
    const struct dt_model *m;
    uint64_t seed;
};

static dt_status_t init_fill(void *ctx, size_t off, size_t n, float *dst)
{
    const struct init_ctx *c = ctx;
    dt_model_init_range(c->m, c->seed, off, n, dst);
    return DT_SUCCESS;
}

void dt_model_init_source(const struct dt_model *m, uint64_t seed, struct dt_param_source *s)
{
    struct init_ctx *c = malloc(sizeof *c);
    *s = (struct dt_param_source){.fill = init_fill, .close = free, .ctx = c};
    snprintf(s->what, sizeof s->what, "the random init (seed %llu)", (unsigned long long)seed);
    if (c) *c = (struct init_ctx){m, seed};
}

/* ---- a model without a strategy: its own buffers */

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

dt_status_t dt_model_own_buffers(struct dt_model *m)
{
    m->params = m->k->alloc(m->kc, m->nparams * sizeof(float));
    m->grads = m->k->alloc(m->kc, m->nparams * sizeof(float));
    if (!m->params || !m->grads) {
        dt_model_drop_buffers(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the model's %zu parameters", m->nparams);
    }
    m->mem = (struct dt_model_mem_i){.params = own_params, .params_done = own_done, .grads = own_grads,
                                     .grads_done = own_done, .rows = own_rows};
    m->mem_ctx = m;
    return DT_SUCCESS;
}

static const void *own_stored(void *ctx, int u)
{
    struct dt_model *m = ctx;
    return (const char *)m->params_lp + m->units[u].offset * dt_dtype_size(m->compute);
}

dt_status_t dt_model_own_weights(struct dt_model *m)
{
    m->params = m->k->alloc(m->kc, m->nparams * sizeof(float));
    if (m->compute != DT_F32) m->params_lp = m->k->alloc(m->kc, m->nparams * dt_dtype_size(m->compute));
    if (!m->params || (m->compute != DT_F32 && !m->params_lp)) {
        dt_model_drop_buffers(m);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the model's %zu parameters (%.1f MiB)",
                        m->nparams, (double)m->nparams * (4 + (m->compute != DT_F32 ? 2 : 0)) / 1048576);
    }
    m->mem = (struct dt_model_mem_i){.params = own_params, .params_done = own_done,
                                     .stored = m->params_lp ? own_stored : NULL};
    m->mem_ctx = m;
    return DT_SUCCESS;
}

void dt_model_weights_ready(struct dt_model *m, bool round)
{
    if (round) m->k->round_lp(m->kc, m->params, m->params, m->nparams, m->compute);
    if (m->params_lp) m->k->convert(m->kc, m->params_lp, m->compute, m->params, DT_F32, m->nparams);
}

dt_status_t dt_model_fill_own(struct dt_model *m, struct dt_param_source *s)
{
    if (!s->ctx) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", s->what);
    float *host = malloc(DRAW_CHUNK * 16 * sizeof *host);
    if (!host) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", s->what);
    dt_status_t rc = DT_SUCCESS;
    for (size_t off = 0; off < m->nparams && rc == DT_SUCCESS; off += DRAW_CHUNK * 16) {
        size_t n = m->nparams - off < DRAW_CHUNK * 16 ? m->nparams - off : DRAW_CHUNK * 16;
        rc = s->fill(s->ctx, off, n, host);
        if (rc == DT_SUCCESS) m->k->copy(m->kc, m->params + off, host, n * sizeof *host, DT_COPY_TO_DEVICE);
    }
    free(host);
    return rc;
}

void dt_model_drop_buffers(struct dt_model *m)
{
    m->k->free(m->kc, m->params);
    m->k->free(m->kc, m->grads);
    m->k->free(m->kc, m->params_lp);
    m->params = m->grads = NULL;
    m->params_lp = NULL;
}
