/*
 * ddp.c - data parallel: every rank holds the whole model and optimizer, the
 * sampler gives it its own micro-batches, and gradients are averaged in
 * buckets (bucket.h). Backward calls on_ready as each group of gradients
 * becomes final; the all-reduce of every bucket that group completes starts
 * on the communication thread, in place on the gradient buffer, while
 * backward goes on with earlier layers. With gradient accumulation only the last micro-step arms the
 * hook: the others accumulate locally (PyTorch's no_sync).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/log.h"
#include "strategy/bucket.h"
#include "strategy/strategy.h"

struct ddp {
    struct dt_bucket_plan plan;
    struct dt_comm_req *req; /* one per piece */
    char (*what)[40];        /* per bucket */
    int next;          /* first bucket not yet started this step */
    dt_status_t error; /* the first failed start, reported by reduce_grads */
    struct dt_model *m;
    size_t cap;          /* elements per bucket */
    enum dt_dtype rdt;   /* the gradient all-reduce's type (compute.grad_reduce_dtype) */
    uint16_t **lp;       /* per bucket, when rdt is 16-bit: the bucket rounded to rdt */
    /* sparse rows (the GPT's input-token embedding rows), gathered from every rank */
    struct dt_comm_req sreq[2];
    int32_t *rows_all;
    float *vals_all;
    size_t sparse_cap; /* rows that fit rows_all / vals_all per rank */
    bool sparse;
    size_t sparse_off;
    int sparse_rows, sparse_width;
};

/* Each piece is reduced in place: no staging copies. Backward already divided the gradients by
 * the world size (dt_strat.grad_divisor), so a sum is the mean. */
static void start_bucket(struct dt_strat *s, int i)
{
    struct ddp *d = s->impl;
    const struct dt_bucket *b = &d->plan.b[i];
    dt_status_t rc = DT_SUCCESS;
    if (d->rdt != DT_F32) {
        /* a 16-bit reduction: the bucket's pieces rounded into one buffer, one request */
        size_t o = 0;
        for (int j = 0; j < b->npieces; j++) {
            d->m->k->cast_to_lp(d->lp[i] + o, d->m->grads + b->pieces[j].offset, b->pieces[j].numel, d->rdt);
            o += b->pieces[j].numel;
        }
        d->req[i] = dt_coll_allreduce(d->lp[i], b->numel, d->rdt, DT_RED_SUM, d->what[i]);
        rc = dt_comm_start(s->comm, &d->req[i]);
    }
    /* fp32: each piece is reduced in place, no copies. Backward already divided the gradients by
     * the world size (dt_strat.grad_divisor), so a sum is the mean. */
    for (int j = 0; d->rdt == DT_F32 && j < b->npieces && rc == DT_SUCCESS; j++) {
        struct dt_comm_req *r = &d->req[b->pieces - d->plan.pieces + j];
        *r = dt_coll_allreduce(d->m->grads + b->pieces[j].offset, b->pieces[j].numel, DT_F32, DT_RED_SUM, d->what[i]);
        rc = dt_comm_start(s->comm, r);
    }
    if (rc != DT_SUCCESS && d->error == DT_SUCCESS) d->error = rc;
}

static void on_ready(void *ctx, int group)
{
    struct dt_strat *s = ctx;
    struct ddp *d = s->impl;
    while (d->next < d->plan.n && d->plan.b[d->next].ready_group <= group) start_bucket(s, d->next++);
}

/* Every rank's rows go to every rank; reduce_grads adds them, in rank order, once the dense
 * part of that gradient is reduced. */
static void on_sparse(void *ctx, size_t offset, const int32_t *rows, const float *vals, int nrows, int width)
{
    struct dt_strat *s = ctx;
    struct ddp *d = s->impl;
    size_t need = (size_t)nrows * (size_t)s->world;
    if (nrows > 0 && (size_t)nrows * (size_t)width > d->sparse_cap) {
        free(d->rows_all);
        free(d->vals_all);
        d->rows_all = malloc(need * sizeof *d->rows_all);
        d->vals_all = malloc(need * (size_t)width * sizeof *d->vals_all);
        d->sparse_cap = d->rows_all && d->vals_all ? (size_t)nrows * (size_t)width : 0;
        if (!d->sparse_cap) {
            if (d->error == DT_SUCCESS)
                d->error = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for %zu embedding rows", need);
            return;
        }
    }
    d->sparse = true;
    d->sparse_off = offset;
    d->sparse_rows = nrows;
    d->sparse_width = width;
    d->sreq[0] = dt_coll_allgather(rows, d->rows_all, need, DT_I32, "embedding rows");
    d->sreq[1] = dt_coll_allgather(vals, d->vals_all, need * (size_t)width, DT_F32, "embedding row gradients");
    for (int i = 0; i < 2; i++) {
        dt_status_t rc = dt_comm_start(s->comm, &d->sreq[i]);
        if (rc != DT_SUCCESS && d->error == DT_SUCCESS) d->error = rc;
    }
}

static void ddp_before_backward(struct dt_strat *s, struct dt_model *m, bool last)
{
    struct ddp *d = s->impl;
    d->next = 0;
    d->error = DT_SUCCESS;
    d->sparse = false;
    m->on_grads_ready = last ? on_ready : NULL;
    m->on_sparse_grads = last ? on_sparse : NULL;
    m->hook_ctx = s;
}

static dt_status_t ddp_reduce_grads(struct dt_strat *s, struct dt_model *m)
{
    struct ddp *d = s->impl;
    m->on_grads_ready = NULL;
    m->on_sparse_grads = NULL;
    while (d->next < d->plan.n) start_bucket(s, d->next++); /* a backward that did not report every group */
    if (d->error != DT_SUCCESS) return d->error;
    if (d->rdt == DT_F32) {
        for (int i = 0; i < d->plan.npieces; i++) DT_CHECK(dt_comm_wait(s->comm, &d->req[i]));
    } else {
        for (int i = 0; i < d->plan.n; i++) {
            DT_CHECK(dt_comm_wait(s->comm, &d->req[i]));
            const struct dt_bucket *b = &d->plan.b[i];
            size_t o = 0;
            for (int j = 0; j < b->npieces; j++) {
                m->k->cast_from_lp(m->grads + b->pieces[j].offset, d->lp[i] + o, b->pieces[j].numel, d->rdt);
                o += b->pieces[j].numel;
            }
        }
    }
    if (!d->sparse) return DT_SUCCESS;
    DT_CHECK(dt_comm_wait(s->comm, &d->sreq[0]));
    DT_CHECK(dt_comm_wait(s->comm, &d->sreq[1]));
    size_t w = (size_t)d->sparse_width, n = (size_t)d->sparse_rows * (size_t)s->world;
    float *g = m->grads + d->sparse_off;
    for (size_t i = 0; i < n; i++) {
        float *row = g + (size_t)d->rows_all[i] * w;
        const float *v = d->vals_all + i * w;
        for (size_t c = 0; c < w; c++) row[c] += v[c];
    }
    return DT_SUCCESS;
}

static dt_status_t ddp_mean(struct dt_strat *s, double *v, int n)
{
    return dt_comm_do(s->comm, dt_coll_allreduce(v, (size_t)n, DT_F64, DT_RED_AVG, "metrics"));
}

static dt_status_t ddp_max(struct dt_strat *s, double *v, int n)
{
    return dt_comm_do(s->comm, dt_coll_allreduce(v, (size_t)n, DT_F64, DT_RED_MAX, "metrics"));
}

static void ddp_free_impl(struct ddp *d)
{
    if (!d) return;
    for (int i = 0; d->lp && i < d->plan.n; i++) free(d->lp[i]);
    free(d->lp);
    free(d->req);
    free(d->what);
    free(d->rows_all);
    free(d->vals_all);
    dt_bucket_plan_free(&d->plan);
    free(d);
}

static void ddp_free(struct dt_strat *s) { ddp_free_impl(s->impl); }

static dt_status_t ddp_attach(struct dt_strat *s, struct dt_model *m)
{
    struct ddp *d = s->impl;
    d->m = m;
    DT_CHECK(dt_bucket_plan(m, d->cap, &d->plan));
    int n = d->plan.n;
    d->req = calloc((size_t)d->plan.npieces, sizeof *d->req);
    d->what = calloc((size_t)n, sizeof *d->what);
    if (!d->req || !d->what) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for buckets");
    for (int i = 0; i < n; i++) snprintf(d->what[i], sizeof d->what[i], "gradient bucket %d/%d", i + 1, n);
    if (d->rdt != DT_F32) {
        if (!(d->lp = calloc((size_t)n, sizeof *d->lp)))
            return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for buckets");
        for (int i = 0; i < n; i++)
            if (!(d->lp[i] = malloc(d->plan.b[i].numel * sizeof(uint16_t))))
                return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for gradient bucket %d", i + 1);
    }
    DT_INFO(DT_SUB_COMM, "ddp: %d gradient bucket%s of at most %.2f MiB over %zu parameters, reduced in %s", n,
            n > 1 ? "s" : "", d->cap * 4.0 / 1048576, m->nparams, dt_dtype_str(d->rdt));
    return dt_comm_do(s->comm, dt_coll_broadcast(m->params, m->nparams, DT_F32, 0, "initial parameters"));
}

dt_status_t dt_strategy_ddp(struct dt_comm *c, double bucket_cap_mb, enum dt_dtype reduce, struct dt_strat **out)
{
    struct dt_strat *s = calloc(1, sizeof *s);
    struct ddp *d = calloc(1, sizeof *d);
    if (!s || !d) {
        free(s);
        free(d);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the ddp strategy");
    }
    d->cap = (size_t)(bucket_cap_mb * 1048576.0 / sizeof(float));
    d->rdt = reduce;
    *s = (struct dt_strat){.name = "ddp", .attach = ddp_attach, .before_backward = ddp_before_backward,
                              .reduce_grads = ddp_reduce_grads, .mean = ddp_mean, .max = ddp_max, .free = ddp_free,
                              .comm = c, .rank = c->world.rank, .world = c->world.size, .grad_divisor = c->world.size,
                              .impl = d};
    *out = s;
    return DT_SUCCESS;
}
