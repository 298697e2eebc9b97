/*
 * engine_mem.c - the model's memory hooks (model.h) as the engine serves them:
 * where a unit's fp32 parameters are (the storage itself, a widened copy, or,
 * under stage 3, a gathered one, the next units prefetched in the order the
 * first step used them), where its gradients go, and the reductions that
 * start as each unit's gradients are done.
 */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "strategy/engine_impl.h"

static void fail(struct dt_engine *e, dt_status_t rc)
{
    if (rc != DT_SUCCESS && e->error == DT_SUCCESS) e->error = rc;
}

/* ---- parameters */

static const struct dt_unit *unit_of(const struct dt_engine *e, int u) { return &e->m->units[u]; }

/* Next use of u after trace position pos, in elements used in between; SIZE_MAX: none this step. */
static size_t distance(const struct dt_engine *e, int u, int pos)
{
    size_t d = 0;
    for (int i = pos; i < e->ntrace; i++) {
        if (e->trace[i] == u) return d;
        d += unit_of(e, e->trace[i])->numel;
    }
    return SIZE_MAX;
}

static struct slot *resident(struct dt_engine *e, int u)
{
    for (int i = 0; i < e->nslots; i++)
        if (e->slots[i].unit == u) return &e->slots[i];
    return NULL;
}

/* A slot to fill: a free one, else the least recently used that nobody uses; NULL if all are in use. */
static struct slot *take_slot(struct dt_engine *e)
{
    struct slot *best = NULL;
    for (int i = 0; i < e->nslots; i++) {
        struct slot *s = &e->slots[i];
        if (s->unit < 0) return s;
        if (s->users == 0 && !s->gathering && (!best || s->last < best->last)) best = s;
    }
    if (best) e->units[best->unit].slot = -1;
    return best;
}

/* offload: the uploads of unit u's pieces, before anything reads them */
static void await_unit(struct dt_engine *e, int u)
{
    const struct unit_state *us = &e->units[u];
    for (int i = us->first; i < us->first + us->npieces; i++) dt_engine_await_params(e, &e->pieces[i]);
}

static void start_gather(struct dt_engine *e, struct slot *s, int u)
{
    const struct unit_state *us = &e->units[u];
    await_unit(e, u);
    s->unit = u;
    s->ready = false;
    e->units[u].slot = (int)(s - e->slots);
    size_t base = unit_of(e, u)->offset, n = unit_of(e, u)->numel;
    if (us->persistent && !e->c.offload_param) { /* whole on every rank: widen from the shard */
        const struct piece *p = &e->pieces[us->first];
        e->k->convert(e->kc, s->f32, DT_F32, dt_engine_at(e, e->shard_p, p->shard_at), e->c.pdt, n);
        s->ready = true;
        return;
    }
    /* the weights on the host (offload_param): this rank's parts up into their places in the slot,
     * then gathered there in place (a unit kept whole: all of it, widened) */
    if (e->c.offload_param)
        for (int i = us->first; i < us->first + us->npieces; i++) {
            const struct piece *p = &e->pieces[i];
            e->k->copy(e->kc, (char *)s->f32 + (p->own_off - base) * e->esz, dt_engine_at(e, e->shard_p, p->shard_at),
                       p->own_n * e->esz, DT_COPY_TO_DEVICE);
        }
    if (us->persistent || !e->shard) {
        if (e->c.pdt != DT_F32) e->k->widen_inplace(e->kc, s->f32, n, e->c.pdt);
        s->ready = true;
        return;
    }
    s->gathering = true;
    for (int i = us->first; i < us->first + us->npieces; i++) {
        struct piece *p = &e->pieces[i];
        void *recv = (char *)s->f32 + (p->off - base) * e->esz; /* 16 bits: widened in place once here */
        const void *send = e->c.offload_param ? NULL : dt_engine_at(e, e->shard_p, p->shard_at); /* NULL: in place */
        p->gather = dt_coll_allgather(send, recv, p->n, e->c.pdt, "parameters");
        fail(e, dt_comm_start(e->shard, &p->gather));
    }
}

static void finish_gather(struct dt_engine *e, struct slot *s)
{
    if (!s->gathering) return;
    const struct unit_state *us = &e->units[s->unit];
    for (int i = us->first; i < us->first + us->npieces; i++) fail(e, dt_comm_wait(e->shard, &e->pieces[i].gather));
    if (e->c.pdt != DT_F32) e->k->widen_inplace(e->kc, s->f32, unit_of(e, s->unit)->numel, e->c.pdt);
    s->gathering = false;
    s->ready = true;
}

/* Stage 3: gather the units that come next in the first step's order, up to `prefetch` elements ahead. */
static void prefetch(struct dt_engine *e)
{
    size_t ahead = 0;
    for (int i = e->trace_pos; i < e->ntrace && ahead < e->c.prefetch; i++) {
        int u = e->trace[i];
        ahead += unit_of(e, u)->numel;
        if (resident(e, u) || e->units[u].persistent) continue;
        struct slot *s = take_slot(e);
        if (!s) return;
        start_gather(e, s, u);
        s->last = e->clock;
    }
}

static const float *e_params(void *ctx, int u)
{
    struct dt_engine *e = ctx;
    const struct dt_unit *un = unit_of(e, u);
    if (e->tracing) {
        if (e->ntrace == e->trace_cap) {
            int cap = e->trace_cap ? 2 * e->trace_cap : 64;
            int *t = realloc(e->trace, (size_t)cap * sizeof *t);
            if (t) e->trace = t, e->trace_cap = cap;
        }
        if (e->ntrace < e->trace_cap) e->trace[e->ntrace++] = u;
    }
    if (e->c.stage <= 2) await_unit(e, u);
    if (e->c.stage <= 2 && e->c.pdt == DT_F32) return (const float *)e->full_p + un->offset;
    if (e->c.stage == 3 && e->c.pdt == DT_F32 && e->units[u].persistent && !e->c.offload_param) {
        await_unit(e, u);
        return (const float *)e->shard_p + e->pieces[e->units[u].first].shard_at;
    }
    /* where we are in the first step's order */
    if (!e->tracing) {
        for (int i = e->trace_pos; i < e->ntrace; i++)
            if (e->trace[i] == u) {
                e->trace_pos = i + 1;
                break;
            }
    }
    struct slot *s = resident(e, u);
    if (!s) {
        s = take_slot(e);
        if (!s) { /* the model holds more units at once than there are slots: a bug, said once */
            fail(e, dt_error(DT_ERR_INTERNAL, "dtrun: error: the model uses more than %d units at once", e->nslots));
            s = &e->slots[0];
        }
        if (e->c.stage == 3) {
            start_gather(e, s, u);
        } else {
            s->unit = u;
            e->units[u].slot = (int)(s - e->slots);
            e->k->convert(e->kc, s->f32, DT_F32, dt_engine_at(e, e->full_p, un->offset), e->c.pdt, un->numel);
            s->ready = true;
        }
    }
    s->users++;
    s->last = ++e->clock;
    if (e->c.stage == 3 && !e->tracing) prefetch(e);
    finish_gather(e, s);
    return s->f32;
}

/* Stages 0-2 keep every unit whole in the working type, in place until the optimizer step: a
 * 16-bit store is what the matmuls multiply, so they read it as it is. */
static const void *e_stored(void *ctx, int u)
{
    struct dt_engine *e = ctx;
    if (e->c.stage > 2 || e->c.pdt == DT_F32 || e->c.pdt != e->m->compute) return NULL;
    await_unit(e, u);
    return dt_engine_at(e, e->full_p, unit_of(e, u)->offset);
}

static void e_params_done(void *ctx, int u)
{
    struct dt_engine *e = ctx;
    int i = e->units[u].slot;
    if (i < 0) return; /* served from storage */
    struct slot *s = &e->slots[i];
    if (--s->users > 0) return;
    /* stage 3: a unit not needed again soon is let go at once (stage3_max_reuse_distance) */
    if (e->c.stage == 3 && !e->tracing && distance(e, u, e->trace_pos) > e->c.max_reuse) {
        s->unit = -1;
        s->ready = false;
        e->units[u].slot = -1;
    }
}

void dt_engine_drop_params(struct dt_engine *e)
{
    for (int i = 0; i < e->nslots; i++) {
        struct slot *s = &e->slots[i];
        if (s->unit < 0) continue;
        finish_gather(e, s);
        e->units[s->unit].slot = -1;
        s->unit = -1;
        s->ready = false;
        s->users = 0;
    }
    e->trace_pos = 0;
}

/* ---- gradients */

/* where this rank keeps the reduced gradients of piece p */
void *dt_engine_owned_grads(const struct dt_engine *e, const struct piece *p)
{
    return e->c.stage <= 1 ? dt_engine_gat(e, e->full_g, p->own_off) : dt_engine_gat(e, e->shard_g, p->shard_at);
}

/* hybrid: the part just reduced within the node, all-reduced across nodes (buf in type t) */
static dt_status_t across_nodes(struct dt_engine *e, void *buf, size_t n, enum dt_dtype t)
{
    if (!e->rep || !n) return DT_SUCCESS;
    return dt_comm_do(e->rep, dt_coll_allreduce(buf, n, t, DT_RED_SUM, "gradients across nodes"));
}

/* Stages 0-1: the piece's gradients, summed over ranks (stage 0: in place; stage 1: this rank's part
 * into the shard). */
static dt_status_t finish_piece(struct dt_engine *e, struct piece *p);

/* A pool buffer for a piece reduced in another type than the storage's; the oldest piece in flight
 * gives its own back first when both are taken. */
static dt_status_t take_pool(struct dt_engine *e, struct piece *p)
{
    int k = e->next_pool;
    e->next_pool = (k + 1) % e->npool;
    if (e->pool_owner[k] >= 0) DT_CHECK(finish_piece(e, &e->pieces[e->pool_owner[k]]));
    e->pool_owner[k] = (int)(p - e->pieces);
    p->conv = e->pool[k];
    return DT_SUCCESS;
}

static void give_pool(struct dt_engine *e, struct piece *p)
{
    for (int k = 0; k < e->npool; k++)
        if (e->pool[k] == p->conv) e->pool_owner[k] = -1;
    p->conv = NULL;
}

static dt_status_t start_piece(struct dt_engine *e, struct piece *p)
{
    p->started = true;
    void *g = dt_engine_gat(e, e->full_g, p->off);
    enum dt_dtype t = e->c.rdt;
    if (e->npool) {
        DT_CHECK(take_pool(e, p));
        e->k->convert(e->kc, p->conv, t, g, e->gdt, p->n);
    }
    void *buf = p->conv ? p->conv : g;
    const char *what = e->what[p - e->pieces];
    /* stage 1: in place, this rank's part lands at the piece's start */
    if (e->c.stage == 0) p->req = dt_coll_allreduce(buf, p->n, t, DT_RED_SUM, what);
    else p->req = dt_coll_reduce_scatter(NULL, buf, p->n, t, DT_RED_SUM, what);
    return dt_comm_start(e->shard, &p->req);
}

static dt_status_t finish_piece(struct dt_engine *e, struct piece *p)
{
    if (!p->started) return DT_SUCCESS;
    p->started = false;
    DT_CHECK(dt_comm_wait(e->shard, &p->req));
    void *own = dt_engine_owned_grads(e, p);
    if (e->c.stage == 0) {
        DT_CHECK(across_nodes(e, p->conv ? p->conv : own, p->n, e->c.rdt));
        if (p->conv) e->k->convert(e->kc, own, e->gdt, p->conv, e->c.rdt, p->n);
        if (p->conv) give_pool(e, p);
        return DT_SUCCESS;
    }
    /* the in-place result is at the piece's start: to this rank's place in it */
    void *got = p->conv ? p->conv : dt_engine_gat(e, e->full_g, p->off);
    DT_CHECK(across_nodes(e, got, p->own_n, e->c.rdt));
    if (p->conv) {
        e->k->convert(e->kc, own, e->gdt, p->conv, e->c.rdt, p->own_n);
        give_pool(e, p);
    } else if (got != own) {
        e->k->copy(e->kc, own, got, p->own_n * e->gsz, DT_COPY_ON_DEVICE);
    }
    return DT_SUCCESS;
}

dt_status_t dt_engine_start_reduce(struct dt_engine *e, int unit)
{
    dt_status_t rc = DT_SUCCESS;
    for (int i = 0; i < e->npieces && rc == DT_SUCCESS; i++)
        if (!e->pieces[i].started && (unit < 0 || e->pieces[i].unit == unit)) rc = start_piece(e, &e->pieces[i]);
    return rc;
}

dt_status_t dt_engine_wait_reduce(struct dt_engine *e, int unit)
{
    for (int i = 0; i < e->npieces; i++)
        if (unit < 0 || e->pieces[i].unit == unit) DT_CHECK(finish_piece(e, &e->pieces[i]));
    return DT_SUCCESS;
}

/* Stages 2-3: a unit's gradients of this micro-batch leave its scratch: reduced over the ranks
 * (reduce-scatter, or all-reduce of a unit every rank keeps whole) and added to what this rank keeps. */
static void reduce_gslot(struct dt_engine *e, struct gslot *s)
{
    const struct unit_state *us = &e->units[s->unit];
    const struct dt_unit *un = unit_of(e, s->unit);
    enum dt_dtype t = e->c.rdt;
    size_t rsz = dt_dtype_size(t), base = e->pieces[us->first].shard_at;
    /* this micro-batch's gradients rounded to the working type, as every strategy rounds them; the
     * scratch is its own send buffer */
    if (t != DT_F32) e->k->narrow_inplace(e->kc, s->f32, un->numel, t);
    if (e->c.pdt != DT_F32 && t != e->c.pdt) e->k->round_lp(e->kc, s->f32, s->f32, un->numel, e->c.pdt);
    s->busy = true;
    for (int i = us->first; i < us->first + us->npieces; i++) {
        struct piece *p = &e->pieces[i];
        void *send = (char *)s->f32 + (p->off - un->offset) * rsz;
        if (!e->shard) continue; /* one rank: nothing to reduce */
        if (p->part)
            p->req = dt_coll_reduce_scatter(send, (char *)s->recv + (p->shard_at - base) * rsz, p->n, t, DT_RED_SUM,
                                            e->what[i]);
        else p->req = dt_coll_allreduce(send, p->n, t, DT_RED_SUM, e->what[i]);
        p->started = true;
        fail(e, dt_comm_start(e->shard, &p->req));
    }
    if (!e->c.overlap) fail(e, dt_engine_wait_gslot(e, s));
}

dt_status_t dt_engine_wait_gslot(struct dt_engine *e, struct gslot *s)
{
    if (!s->busy) return DT_SUCCESS;
    s->busy = false;
    const struct unit_state *us = &e->units[s->unit];
    const struct dt_unit *un = unit_of(e, s->unit);
    enum dt_dtype t = e->c.rdt;
    size_t rsz = dt_dtype_size(t), base = e->pieces[us->first].shard_at;
    for (int i = us->first; i < us->first + us->npieces; i++) {
        struct piece *p = &e->pieces[i];
        const void *got = p->part && e->shard ? (char *)s->recv + (p->shard_at - base) * rsz
                                              : (char *)s->f32 + (p->off - un->offset) * rsz;
        if (p->started) {
            p->started = false;
            DT_CHECK(dt_comm_wait(e->shard, &p->req));
            DT_CHECK(across_nodes(e, (void *)got, p->part ? p->own_n : p->n, t));
        }
        size_t from = p->part && e->shard ? 0 : p->own_off - p->off; /* a whole piece: this rank keeps it all */
        e->k->accumulate(e->kc, dt_engine_gat(e, e->shard_g, p->shard_at), e->gdt, (const char *)got + from * rsz, t,
                         p->own_n);
    }
    s->unit = -1;
    return DT_SUCCESS;
}

static float *e_grads(void *ctx, int u, bool *fresh)
{
    struct dt_engine *e = ctx;
    const struct dt_unit *un = unit_of(e, u);
    if (dt_engine_direct_grads(e)) { /* fp32: no rounding */
        *fresh = !e->units[u].written;
        e->units[u].written = true;
        return (float *)e->full_g + un->offset;
    }
    /* a slot for this micro-batch's gradients, which the model writes: added in at grads_done */
    struct gslot *s = &e->gslots[e->next_gslot];
    e->next_gslot = (e->next_gslot + 1) % e->ngslots;
    fail(e, dt_engine_wait_gslot(e, s));
    s->unit = u;
    *fresh = true;
    return s->f32;
}

void dt_engine_zero_unwritten(struct dt_engine *e)
{
    for (int u = 0; u < e->nunits; u++) {
        const struct dt_unit *un = unit_of(e, u);
        if (e->units[u].written) continue;
        e->units[u].written = true;
        e->k->zero(e->kc, dt_engine_gat(e, e->full_g, un->offset), un->numel * e->gsz);
    }
}

static struct gslot *gslot_of(struct dt_engine *e, int u)
{
    for (int i = 0; i < e->ngslots; i++)
        if (e->gslots[i].unit == u && !e->gslots[i].busy) return &e->gslots[i];
    return NULL;
}

static void e_grads_done(void *ctx, int u)
{
    struct dt_engine *e = ctx;
    const struct dt_unit *un = unit_of(e, u);
    if (e->c.stage >= 2) {
        struct gslot *s = gslot_of(e, u);
        if (s) reduce_gslot(e, s);
        return;
    }
    struct gslot *s = gslot_of(e, u);
    if (s) { /* this micro-batch's gradients rounded to the working type, then added in (stored: the step's first) */
        void *g = dt_engine_gat(e, e->full_g, un->offset);
        if (e->gdt != e->c.pdt) e->k->round_lp(e->kc, s->f32, s->f32, un->numel, e->c.pdt);
        if (e->units[u].written) e->k->accumulate(e->kc, g, e->gdt, s->f32, DT_F32, un->numel);
        else e->k->convert(e->kc, g, e->gdt, s->f32, DT_F32, un->numel);
        e->units[u].written = true;
        s->unit = -1;
    }
    if (!e->comm_now || !e->c.overlap || !e->shard) return;
    const struct unit_state *us = &e->units[u];
    for (int i = us->first; i < us->first + us->npieces; i++) {
        struct piece *p = &e->pieces[i];
        if (--p->left == 0) fail(e, start_piece(e, p));
    }
}

/* A unit whose gradient is only the rows e_rows brings: under stages 2-3 its part of shard_g holds
 * zeros since the step began, and the rows are added into it, so nothing is reduced for it (a
 * Llama 3's untied embedding is 525M elements, reduce-scattered as zeros every micro-batch before);
 * stages 0-1 keep it whole: zeroed, and reduced with its piece as any unit. */
static void e_rows_only(void *ctx, int u)
{
    struct dt_engine *e = ctx;
    if (e->c.stage >= 2) return;
    bool fresh;
    float *g = e_grads(ctx, u, &fresh);
    if (fresh) e->k->zero(e->kc, g, unit_of(e, u)->numel * sizeof(float));
    e_grads_done(ctx, u);
}

/* ---- the embedding rows, which come after their units were done */

/* rows into what this rank keeps of the table at flat offset `table` */
static void add_rows(struct dt_engine *e, size_t table, const int32_t *rows, const float *vals, int nrows, int width,
                     bool whole)
{
    if (whole) { /* stages 0-1 between reductions: every element is here */
        e->k->rows_add(e->kc, dt_engine_gat(e, e->full_g, table), e->gdt, 0, e->m->nparams - table, rows, vals, nrows,
                       width);
        return;
    }
    for (int i = 0; i < e->npieces; i++) {
        const struct piece *p = &e->pieces[i];
        size_t lo = p->own_off > table ? p->own_off : table, hi = p->own_off + p->own_n;
        if (hi <= lo) continue;
        void *dst = dt_engine_gat(e, dt_engine_owned_grads(e, p), lo - p->own_off);
        e->k->rows_add(e->kc, dst, e->gdt, lo - table, hi - lo, rows, vals, nrows, width);
    }
}

dt_status_t dt_engine_finish_rows(struct dt_engine *e)
{
    if (!e->rows_pending) return DT_SUCCESS;
    e->rows_pending = false;
    DT_CHECK(dt_comm_wait(e->comm, &e->rows_req[0]));
    DT_CHECK(dt_comm_wait(e->comm, &e->rows_req[1]));
    add_rows(e, e->rows_table, e->rows_all, e->vals_all, e->rows_n * e->world, e->rows_width, e->c.stage == 0);
    return DT_SUCCESS;
}

static void e_rows(void *ctx, size_t table, const int32_t *rows, const float *vals, int nrows, int width)
{
    struct dt_engine *e = ctx;
    if (!e->comm || (e->c.stage <= 1 && !e->comm_now)) {
        add_rows(e, table, rows, vals, nrows, width, e->c.stage <= 1);
        return;
    }
    fail(e, dt_engine_finish_rows(e));
    size_t need = (size_t)nrows * (size_t)e->world;
    if (need * (size_t)width > e->rows_cap) {
        e->k->free(e->kc, e->rows_all);
        e->k->free(e->kc, e->vals_all);
        e->rows_all = e->k->alloc(e->kc, need * sizeof *e->rows_all);
        e->vals_all = e->k->alloc(e->kc, need * (size_t)width * sizeof *e->vals_all);
        e->rows_cap = e->rows_all && e->vals_all ? need * (size_t)width : 0;
        if (!e->rows_cap) {
            fail(e, dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for %zu embedding rows", need));
            return;
        }
    }
    e->rows_table = table;
    e->rows_n = nrows;
    e->rows_width = width;
    e->rows_req[0] = dt_coll_allgather(rows, e->rows_all, need, DT_I32, "embedding rows");
    e->rows_req[1] = dt_coll_allgather(vals, e->vals_all, need * (size_t)width, DT_F32, "embedding row gradients");
    fail(e, dt_comm_start(e->comm, &e->rows_req[0]));
    fail(e, dt_comm_start(e->comm, &e->rows_req[1]));
    e->rows_pending = true;
    /* stages 2-3 keep no whole gradients to add them to later: the next micro-batch reuses the buffers */
    if (e->c.stage >= 2) fail(e, dt_engine_finish_rows(e));
}

void dt_engine_install_hooks(struct dt_engine *e)
{
    e->m->mem = (struct dt_model_mem_i){.params = e_params, .params_done = e_params_done, .grads = e_grads,
                                        .grads_done = e_grads_done, .rows = e_rows, .rows_only = e_rows_only,
                                        .stored = e_stored};
    e->m->mem_ctx = e;
}
