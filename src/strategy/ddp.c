/*
 * ddp.c - data parallel: every rank holds the whole model and optimizer, the
 * sampler gives it its own micro-batches, and gradients are averaged in
 * buckets (bucket.h). Backward calls on_ready as each group of gradients
 * becomes final; every bucket that group completes is copied into its staging
 * buffer (or, when it is one contiguous piece, used in place) and its
 * all-reduce starts on the communication thread while backward goes on with
 * earlier layers. With gradient accumulation only the last micro-step arms the
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
    struct dt_comm_req *req; /* one per bucket */
    float **staging;         /* per bucket; NULL when the bucket is one piece, reduced in place */
    char (*what)[40];
    int next;          /* first bucket not yet started this step */
    dt_status_t error; /* the first failed start, reported by reduce_grads */
    struct dt_model *m;
    size_t cap; /* elements per bucket */
};

static void start_bucket(struct dt_strat *s, int i)
{
    struct ddp *d = s->impl;
    const struct dt_bucket *b = &d->plan.b[i];
    float *buf;
    if (d->staging[i]) {
        size_t o = 0;
        for (int j = 0; j < b->npieces; j++) {
            memcpy(d->staging[i] + o, d->m->grads + b->pieces[j].offset, b->pieces[j].numel * sizeof(float));
            o += b->pieces[j].numel;
        }
        buf = d->staging[i];
    } else {
        buf = d->m->grads + b->pieces[0].offset;
    }
    d->req[i] = dt_coll_allreduce(buf, b->numel, DT_F32, DT_RED_AVG, d->what[i]);
    dt_status_t rc = dt_comm_start(s->comm, &d->req[i]);
    if (rc != DT_SUCCESS && d->error == DT_SUCCESS) d->error = rc;
}

static void on_ready(void *ctx, int group)
{
    struct dt_strat *s = ctx;
    struct ddp *d = s->impl;
    while (d->next < d->plan.n && d->plan.b[d->next].ready_group <= group) start_bucket(s, d->next++);
}

static void ddp_before_backward(struct dt_strat *s, struct dt_model *m, bool last)
{
    struct ddp *d = s->impl;
    d->next = 0;
    d->error = DT_SUCCESS;
    m->on_grads_ready = last ? on_ready : NULL;
    m->hook_ctx = s;
}

static dt_status_t ddp_reduce_grads(struct dt_strat *s, struct dt_model *m)
{
    struct ddp *d = s->impl;
    m->on_grads_ready = NULL;
    while (d->next < d->plan.n) start_bucket(s, d->next++); /* a backward that did not report every group */
    if (d->error != DT_SUCCESS) return d->error;
    for (int i = 0; i < d->plan.n; i++) {
        DT_CHECK(dt_comm_wait(s->comm, &d->req[i]));
        if (!d->staging[i]) continue;
        const struct dt_bucket *b = &d->plan.b[i];
        size_t o = 0;
        for (int j = 0; j < b->npieces; j++) {
            memcpy(m->grads + b->pieces[j].offset, d->staging[i] + o, b->pieces[j].numel * sizeof(float));
            o += b->pieces[j].numel;
        }
    }
    return DT_SUCCESS;
}

static dt_status_t ddp_mean(struct dt_strat *s, double *v, int n)
{
    return dt_comm_do(s->comm, dt_coll_allreduce(v, (size_t)n, DT_F64, DT_RED_AVG, "metrics"));
}

static void ddp_free_impl(struct ddp *d)
{
    if (!d) return;
    for (int i = 0; d->staging && i < d->plan.n; i++) free(d->staging[i]);
    free(d->staging);
    free(d->req);
    free(d->what);
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
    d->req = calloc((size_t)n, sizeof *d->req);
    d->staging = calloc((size_t)n, sizeof *d->staging);
    d->what = calloc((size_t)n, sizeof *d->what);
    if (!d->req || !d->staging || !d->what) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for buckets");
    for (int i = 0; i < n; i++) {
        snprintf(d->what[i], sizeof d->what[i], "gradient bucket %d/%d", i + 1, n);
        if (d->plan.b[i].npieces > 1 && !(d->staging[i] = malloc(d->plan.b[i].numel * sizeof(float))))
            return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for gradient bucket %d (%zu elements)", i + 1,
                            d->plan.b[i].numel);
    }
    DT_INFO(DT_SUB_COMM, "ddp: %d gradient bucket%s of at most %.2f MiB over %zu parameters", n, n > 1 ? "s" : "",
            d->cap * 4.0 / 1048576, m->nparams);
    return dt_comm_do(s->comm, dt_coll_broadcast(m->params, m->nparams, DT_F32, 0, "initial parameters"));
}

dt_status_t dt_strategy_ddp(struct dt_comm *c, double bucket_cap_mb, struct dt_strat **out)
{
    struct dt_strat *s = calloc(1, sizeof *s);
    struct ddp *d = calloc(1, sizeof *d);
    if (!s || !d) {
        free(s);
        free(d);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the ddp strategy");
    }
    d->cap = (size_t)(bucket_cap_mb * 1048576.0 / sizeof(float));
    *s = (struct dt_strat){.name = "ddp", .attach = ddp_attach, .before_backward = ddp_before_backward,
                              .reduce_grads = ddp_reduce_grads, .mean = ddp_mean, .free = ddp_free, .comm = c,
                              .rank = c->world.rank, .world = c->world.size, .impl = d};
    *out = s;
    return DT_SUCCESS;
}
