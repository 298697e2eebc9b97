/*
 * engine_step.c - the engine's step: zeroing, finishing the reductions, the
 * global norm from what each rank keeps (one all-reduce, the fp16 overflow
 * decision with it), the optimizer on this rank's shard in sub-groups, and
 * the parameters back to every rank that needs them (stages 1-2 all-gather).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/half.h"
#include "strategy/engine_impl.h"

void dt_engine_begin_step(struct dt_engine *e, int64_t step)
{
    e->step = step;
    struct dt_comm *cs[3] = {e->comm, e->shard, e->rep};
    for (int i = 0; i < 3; i++)
        if (cs[i]) dt_comm_set_step(cs[i], step);
    /* the first step's order of units is the order prefetching follows */
    if (e->ntrace > 0) e->traced = true;
    e->tracing = !e->traced;
    for (int u = 0; u < e->nunits; u++) e->units[u].written = false;
    if (e->shard_g) e->k->zero(e->kc, e->shard_g, e->shard_n * e->gsz);
    e->error = DT_SUCCESS;
    for (int i = 0; i < e->npieces; i++) e->pieces[i].started = false;
}

void dt_engine_before_backward(struct dt_engine *e, bool last)
{
    e->comm_now = e->c.stage >= 2 || last;
    for (int i = 0; i < e->npieces; i++) e->pieces[i].left = e->pieces[i].nunits;
}

dt_status_t dt_engine_reduce_grads(struct dt_engine *e)
{
    dt_status_t rc = e->error;
    if (e->c.stage <= 1) dt_engine_zero_unwritten(e);
    if (e->c.stage <= 1 && e->shard && rc == DT_SUCCESS) rc = dt_engine_start_reduce(e, -1); /* what backward left */
    if (e->c.stage <= 1 && e->shard && rc == DT_SUCCESS) rc = dt_engine_wait_reduce(e, -1);
    for (int i = 0; i < e->ngslots && rc == DT_SUCCESS; i++) rc = dt_engine_wait_gslot(e, &e->gslots[i]);
    if (rc == DT_SUCCESS) rc = dt_engine_finish_rows(e);
    /* fp32 sums of 16-bit gradients: rounded once, at the end, as the 16-bit storage rounds them */
    if (rc == DT_SUCCESS && e->gdt != e->c.pdt) {
        if (e->c.stage <= 1) e->k->round_lp(e->kc, e->full_g, e->full_g, e->m->nparams, e->c.pdt);
        else e->k->round_lp(e->kc, e->shard_g, e->shard_g, e->shard_n, e->c.pdt);
    }
    if (rc == DT_SUCCESS && e->c.offload) rc = dt_engine_offload_grads(e);
    return rc;
}

/* The squares: each element counted once over the world, a part by its owner on the first node
 * (replicas hold the same), a piece every rank keeps whole by the rank whose world-part it is. The
 * inf/nan check: everything this rank keeps, so a value gone bad on one rank's copy stops them all.
 * Every piece's parts in one call: a GPU waits for the device once a step, not once a piece. */
dt_status_t dt_engine_grad_norm(struct dt_engine *e, double *sumsq, bool *nonfinite)
{
    double v[2] = {0, 0};
    bool first_replica = !e->rep || e->rep->world.rank == 0;
    int np = 0;
    for (int i = 0; i < e->npieces; i++) {
        const struct piece *p = &e->pieces[i];
        const char *g = dt_engine_owned_grads(e, p);
        size_t off = 0, n = p->own_n;
        if (p->part && !first_replica) n = 0;
        else if (!p->part) dt_comm_part(p->n, e->world, e->rank, &off, &n);
        /* the squares of this rank's part, the check of all it keeps */
        struct dt_norm_part parts[3] = {{g + off * e->gsz, n, true}, {g, off, false},
                                        {g + (off + n) * e->gsz, p->own_n - off - n, false}};
        for (int k = 0; k < 3; k++)
            if (parts[k].n) e->norm_parts[np++] = parts[k];
    }
    size_t bad = 0;
    v[0] = e->k->sumsq_parts(e->kc, e->norm_parts, np, e->gdt, &bad);
    v[1] = (double)bad;
    if (e->comm) DT_CHECK(dt_comm_do(e->comm, dt_coll_allreduce(v, 2, DT_F64, DT_RED_SUM, "gradient norm")));
    *sumsq = v[0];
    *nonfinite = v[1] > 0;
    return DT_SUCCESS;
}

/* the working parameters this rank updates for piece p (full storage, or the stage-3 shard) */
static void *owned_params(const struct dt_engine *e, const struct piece *p)
{
    return e->c.stage == 3 ? dt_engine_at(e, e->shard_p, p->shard_at) : dt_engine_at(e, e->full_p, p->own_off);
}

/* the view holding flat element at, from the view v on (views cover the space in order) */
static int view_at(const struct dt_model *m, int v, size_t at)
{
    while (v + 1 < m->nviews && m->views[v].offset + m->views[v].numel <= at) v++;
    return v;
}

/* a slice for the step's one AdamW call; false when the host is out of memory for the list */
static bool add_slice(struct dt_engine *e, const struct dt_adamw_slice *s)
{
    if (e->nslices == e->slices_cap) {
        int cap = e->slices_cap ? 2 * e->slices_cap : 256;
        struct dt_adamw_slice *l = realloc(e->slices, (size_t)cap * sizeof *l);
        if (!l) return false;
        e->slices = l;
        e->slices_cap = cap;
    }
    e->slices[e->nslices++] = *s;
    return true;
}

/* Update flat elements [lo, hi) of piece p, all in one view (decay): AdamW's as a slice of the step's
 * one call, SGD's and stochastic rounding's (which needs scratch a slice at a time) now. Offloaded, the
 * host's copies: its gradients, fp32 master weights and working copy (host_p; fp32: the master). */
static dt_status_t update(struct dt_engine *e, const struct piece *p, size_t lo, size_t hi, bool decay, float lr,
                          float gscale)
{
    size_t n = hi - lo, at = p->shard_at + (lo - p->own_off), rel = lo - p->own_off;
    enum dt_dtype t = e->c.pdt;
    void *g = dt_engine_gat(e, dt_engine_owned_grads(e, p), rel), *w = dt_engine_at(e, owned_params(e, p), rel);
    if (e->c.offload) {
        g = dt_engine_gat(e, e->host_g, at);
        w = dt_engine_at(e, dt_engine_host_working(e), at);
    }
    float *w32 = w;
    /* the gradient is read in its storage type; master weights write their working copy in the same pass */
    struct dt_adamw_slice s;
    bool copy16 = e->master && w != e->master + at; /* a working copy besides the fp32 weights */
    if (!e->c.stochastic && dt_optimizer_slice(&e->opt, e->master ? e->master + at : w32, g, copy16 ? w : NULL, at,
                                               n, decay, &s))
        return add_slice(e, &s) ? DT_SUCCESS
                                : dt_error(DT_ERR_NOMEM, "dtrun: error: step %lld: out of host memory listing the "
                                           "optimizer's slices\n  hint: free memory on this node (a few KiB were "
                                           "asked for)", (long long)e->step);
    if (e->master && w != e->master + at) {
        dt_optimizer_update(&e->opt, e->master + at, g, e->gdt, w, t, at, n, decay, lr, gscale);
        return DT_SUCCESS;
    }
    if (e->c.stochastic) {
        e->k->convert(e->kc, e->scratch2, DT_F32, w, t, n);
        w32 = e->scratch2;
    }
    dt_optimizer_update(&e->opt, w32, g, e->gdt, NULL, DT_F32, at, n, decay, lr, gscale);
    if (e->c.stochastic) e->k->round_stochastic(e->kc, w, w32, n, e->c.seed ^ (uint64_t)e->opt.t * 0x9e3779b97f4a7c15ull, lo);
    return DT_SUCCESS;
}

/* Stages 1-2: every rank's updated parts to every rank, in place, at most allgather_bucket elements in flight. */
dt_status_t dt_engine_gather_params(struct dt_engine *e)
{
    size_t inflight = 0;
    int first = 0;
    for (int i = 0; i < e->npieces; i++) {
        struct piece *p = &e->pieces[i];
        if (!p->part) continue;
        if (inflight && inflight + p->n > e->c.allgather_bucket) {
            for (; first < i; first++)
                if (e->pieces[first].part) DT_CHECK(dt_comm_wait(e->shard, &e->pieces[first].gather));
            inflight = 0;
        }
        dt_engine_await_params(e, p); /* offload: its part came up */
        p->gather = dt_coll_allgather(NULL, dt_engine_at(e, e->full_p, p->off), p->n, e->c.pdt, "parameters");
        DT_CHECK(dt_comm_start(e->shard, &p->gather));
        inflight += p->n;
    }
    for (; first < e->npieces; first++)
        if (e->pieces[first].part) DT_CHECK(dt_comm_wait(e->shard, &e->pieces[first].gather));
    return DT_SUCCESS;
}

/* Offload: each piece's reduced gradients, this rank's part, down into host_g, the copies queued beside
 * the ops and waited for at once (the device computes the norm meanwhile: dt_engine_grad_norm) */
dt_status_t dt_engine_offload_grads(struct dt_engine *e)
{
    uint64_t last = DT_NO_TICKET;
    for (int i = 0; i < e->npieces; i++) {
        const struct piece *p = &e->pieces[i];
        uint64_t t = dt_copy_async(e->k, e->kc, dt_engine_gat(e, e->host_g, p->shard_at),
                                   dt_engine_owned_grads(e, p), p->own_n * e->gsz, DT_COPY_TO_HOST);
        if (t != DT_NO_TICKET) last = t; /* a piece with none of its elements here copies nothing: not the last */
    }
    e->grads_down = last;
    return DT_SUCCESS;
}

/* Offload: the updated working copy of each piece back up into the device's storage; a piece's upload
 * is waited for where its parameters are next read (dt_engine_await_params) */
static void upload(struct dt_engine *e)
{
    for (int i = 0; i < e->npieces; i++) {
        struct piece *p = &e->pieces[i];
        p->up = dt_copy_async(e->k, e->kc, owned_params(e, p), dt_engine_at(e, dt_engine_host_working(e), p->shard_at),
                              p->own_n * e->esz, DT_COPY_TO_DEVICE);
    }
}

dt_status_t dt_engine_step(struct dt_engine *e, float lr, float gscale)
{
    if (e->c.offload) dt_copy_wait(e->k, e->kc, e->grads_down, true); /* the host reads them now */
    dt_optimizer_begin(&e->opt);
    const struct dt_model *m = e->m;
    size_t sub = e->c.sub_group && e->scratch ? e->c.sub_group : SIZE_MAX;
    int v = 0;
    dt_status_t rc = DT_SUCCESS;
    e->nslices = 0;
    for (int i = 0; i < e->npieces && rc == DT_SUCCESS; i++) {
        const struct piece *p = &e->pieces[i];
        for (size_t lo = p->own_off, end = p->own_off + p->own_n; lo < end && rc == DT_SUCCESS;) {
            v = view_at(m, v, lo);
            const struct dt_param_view *pv = &m->views[v];
            size_t hi = pv->offset + pv->numel < end ? pv->offset + pv->numel : end;
            if (hi - lo > sub) hi = lo + sub;
            rc = update(e, p, lo, hi, pv->decay, lr, gscale);
            lo = hi;
        }
        v = 0;
    }
    if (rc != DT_SUCCESS) return rc;
    dt_optimizer_apply(&e->opt, e->slices, e->nslices, e->gdt, e->c.pdt, lr, gscale);
    dt_engine_drop_params(e); /* gathered and widened copies hold the old values */
    if (e->c.offload && !e->c.offload_param) upload(e); /* offload_param's are read from the host */
    if (e->c.stage >= 1 && e->c.stage <= 2 && e->shard) return dt_engine_gather_params(e);
    return DT_SUCCESS;
}

void dt_engine_poison_grad(struct dt_engine *e)
{
    const struct piece *p = &e->pieces[e->npieces / 2];
    /* infinity in the gradient's type, made on the host and copied in */
    float f = INFINITY;
    uint16_t h = e->gdt == DT_BF16 ? dt_bf16_from_f32(f) : dt_f16_from_f32(f);
    e->k->copy(e->kc, dt_engine_owned_grads(e, p), e->gdt == DT_F32 ? (const void *)&f : (const void *)&h, e->gsz,
               DT_COPY_TO_DEVICE);
}
