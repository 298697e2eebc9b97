/* engine.c - see engine.h: the plan (pieces, and what each rank keeps), the storage, the memory report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/log.h"
#include "strategy/engine_impl.h"

/* ---- the plan: pieces and what this rank keeps of each */

static bool persistent(const struct dt_engine_config *c, const struct dt_unit *u)
{
    return c->stage == 3 && u->numel < c->persist;
}

/* Pieces over the units: stages 0-1 merge consecutive units up to the bucket (a piece is reduced once
 * all its units are done, as DDP's buckets are); stages 2-3 reduce and gather a unit at a time, so a
 * piece never spans two. A unit larger than the bucket is cut into equal pieces. With out NULL, only
 * counts. Returns the number of pieces; *shard_n gets the elements this rank keeps. */
static int plan(const struct dt_engine_config *c, const struct dt_unit *units, int nunits, int sworld, int srank,
                struct piece *out, struct unit_state *us, size_t *shard_n)
{
    size_t bucket = c->bucket ? c->bucket : 1, shard = 0;
    int np = 0;
    for (int u = 0; u < nunits; u++) {
        const struct dt_unit *un = &units[u];
        bool merge = c->stage <= 1 && np > 0 && un->numel <= bucket && out && out[np - 1].n + un->numel <= bucket &&
                     out[np - 1].nunits > 0 && out[np - 1].off + out[np - 1].n == un->offset;
        if (!out) merge = false; /* counting: an upper bound is enough */
        if (merge) {
            struct piece *p = &out[np - 1];
            p->n += un->numel;
            p->nunits++;
            if (us) us[u] = (struct unit_state){.first = np - 1, .npieces = 1, .slot = -1};
            continue;
        }
        size_t k = (un->numel + bucket - 1) / bucket;
        if (k == 0) k = 1;
        if (us) us[u] = (struct unit_state){.first = np, .npieces = (int)k, .persistent = persistent(c, un), .slot = -1};
        for (size_t i = 0; i < k; i++, np++) {
            if (!out) continue;
            size_t off, n;
            dt_comm_part(un->numel, (int)k, (int)i, &off, &n);
            out[np] = (struct piece){.off = un->offset + off, .n = n, .unit = u, .nunits = k == 1 ? 1 : 0,
                                     .up = DT_NO_TICKET};
        }
    }
    /* nunits 0 marks a piece of a cut unit: it waits for that one unit */
    for (int i = 0; out && i < np; i++) {
        struct piece *p = &out[i];
        if (p->nunits == 0) p->nunits = 1;
        p->part = c->stage >= 1 && !(us && us[p->unit].persistent);
        if (p->part) {
            dt_comm_part(p->n, sworld, srank, &p->own_off, &p->own_n);
            p->own_off += p->off;
        } else {
            p->own_off = p->off;
            p->own_n = p->n;
        }
        p->shard_at = shard;
        shard += p->own_n;
    }
    if (shard_n) *shard_n = shard;
    return np;
}

/* ---- what it costs: the same arithmetic for the estimate and the allocation */

struct sizes {
    size_t full_p, full_g, shard_p, shard_g, master, opt; /* elements */
    size_t slot_bytes, nslots, gslot_bytes, ngslots, npool, conv_bytes, scratch;
};

/* the gradients' storage type: fp32 when micro-batches accumulate into it */
static enum dt_dtype grad_type(const struct dt_engine_config *c) { return c->accum > 1 ? DT_F32 : c->pdt; }

static size_t slots_needed(const struct dt_engine_config *c, size_t max_unit, int nunits)
{
    if (c->stage < 3 && c->pdt == DT_F32) return 0;
    if (c->stage < 3) return 2; /* widening: the unit in use, and one more for a model that holds two */
    /* the unit in use (the models hold one at a time), those prefetched, those kept for reuse */
    size_t ahead = c->prefetch && max_unit ? (c->prefetch + max_unit - 1) / max_unit : 0;
    size_t kept = max_unit ? c->max_live / max_unit : 0;
    size_t n = 1 + ahead + kept;
    if (n < 2) n = 2;
    if (n > DT_ENGINE_SLOTS) n = DT_ENGINE_SLOTS;
    if (n > (size_t)nunits + 1) n = (size_t)nunits + 1;
    return n;
}

static void size_up(const struct dt_engine_config *c, size_t nparams, size_t shard_n, size_t max_unit,
                    size_t max_own, int nunits, enum dt_optim_kind opt, struct sizes *s)
{
    size_t rsz = dt_dtype_size(c->rdt);
    *s = (struct sizes){0};
    s->full_p = c->stage <= 2 ? nparams : 0;
    s->full_g = c->stage <= 1 ? nparams : 0;
    s->shard_p = c->stage == 3 ? shard_n : 0;
    s->shard_g = c->stage >= 2 ? shard_n : 0; /* stage 1 reduces each part into its place in the whole */
    s->master = c->master ? shard_n : 0;
    s->opt = shard_n * dt_optimizer_state_bytes(opt) / 4;
    s->nslots = slots_needed(c, max_unit, nunits);
    s->slot_bytes = max_unit * 4; /* fp32; a 16-bit gather fills it and widens in place */
    /* gradient scratch: stages 2-3 always (two, so a reduction overlaps the next unit's backward),
     * stages 0-1 when the storage is 16-bit */
    s->ngslots = c->stage >= 2 ? (c->overlap ? 2 : 1) : grad_type(c) != DT_F32 || c->pdt != DT_F32 ? 1 : 0;
    s->gslot_bytes = s->ngslots ? max_unit * 4 + (c->stage >= 2 ? max_own * rsz : 0) : 0;
    /* stages 0-1 reducing in another type than the storage's: pieces in flight converted, two at a time */
    size_t piece = c->bucket < nparams ? c->bucket : nparams;
    s->npool = c->stage <= 1 && c->rdt != grad_type(c) ? 2 : 0;
    s->conv_bytes = s->npool * piece * rsz;
    /* the optimizer's fp32 copies: a sub-group, no larger than what one piece gives this rank */
    size_t sub = c->sub_group < max_own ? c->sub_group : max_own;
    s->scratch = (c->pdt != DT_F32 || c->stochastic) ? sub : 0;
}

static void report(const struct dt_engine_config *c, const struct sizes *s, struct dt_mem_report *r)
{
    size_t esz = dt_dtype_size(c->pdt), gsz = dt_dtype_size(grad_type(c));
    *r = (struct dt_mem_report){
        .params = (int64_t)((s->full_p + s->shard_p) * esz),
        .grads = (int64_t)((s->full_g + s->shard_g) * gsz),
        .master = (int64_t)(s->master * 4),
        .optimizer = (int64_t)(s->opt * 4),
        .gathered = (int64_t)(s->nslots * s->slot_bytes),
        .buffers = (int64_t)(s->ngslots * s->gslot_bytes + s->conv_bytes + s->scratch * 4 * (c->stochastic ? 2 : 1)),
    };
    r->state = r->params + r->grads + r->master + r->optimizer + r->gathered;
    r->total = r->state + r->buffers;
}

/* the largest unit, and the most elements one unit gives this rank to keep */
static void unit_extent(const struct piece *p, int np, const struct dt_unit *units, int nunits, size_t *max_unit,
                        size_t *max_own)
{
    *max_unit = *max_own = 0;
    for (int u = 0; u < nunits; u++)
        if (units[u].numel > *max_unit) *max_unit = units[u].numel;
    size_t own = 0;
    for (int i = 0; i < np; i++) {
        own = i > 0 && p[i].unit == p[i - 1].unit ? own + p[i].own_n : p[i].own_n;
        if (own > *max_own) *max_own = own;
    }
}

/* what a checkpoint takes from this rank (engine_state.c's save ranges, as rank `rank` of a world of
 * `world` holding the first replica) and the largest range it loads */
static void ranges(const struct piece *p, int np, int world, int rank, struct dt_mem_report *r)
{
    r->saved_elems = r->load_max_elems = 0;
    for (int i = 0; i < np; i++) {
        size_t off, n = p[i].own_n;
        if (!p[i].part) dt_comm_part(p[i].n, world, rank, &off, &n);
        r->saved_elems += (int64_t)n;
        if ((int64_t)p[i].own_n > r->load_max_elems) r->load_max_elems = (int64_t)p[i].own_n;
    }
}

void dt_engine_plan_memory(const struct dt_engine_config *c, const struct dt_unit *units, int nunits, int shard_ranks,
                           int rank, enum dt_optim_kind opt, struct dt_mem_report *r)
{
    int np = plan(c, units, nunits, shard_ranks, rank, NULL, NULL, NULL);
    struct piece *p = calloc((size_t)np, sizeof *p);
    struct unit_state *us = calloc((size_t)nunits, sizeof *us);
    size_t shard_n = 0, max_unit = 0, max_own = 0, nparams = 0;
    if (p && us) {
        np = plan(c, units, nunits, shard_ranks, rank, p, us, &shard_n);
        unit_extent(p, np, units, nunits, &max_unit, &max_own);
    }
    for (int u = 0; u < nunits; u++) nparams += units[u].numel;
    struct sizes s;
    size_up(c, nparams, shard_n, max_unit, max_own, nunits, opt, &s);
    report(c, &s, r);
    r->shard_elems = (int64_t)shard_n;
    if (p && us) ranges(p, np, shard_ranks, rank, r);
    free(p);
    free(us);
}

void dt_engine_memory(const struct dt_engine *e, struct dt_mem_report *r)
{
    size_t max_own;
    unit_extent(e->pieces, e->npieces, e->m->units, e->nunits, &(size_t){0}, &max_own);
    struct sizes s;
    size_up(&e->c, e->m->nparams, e->shard_n, e->max_unit, max_own, e->nunits, e->opt.c.kind, &s);
    s.nslots = (size_t)e->nslots;
    s.ngslots = (size_t)e->ngslots;
    report(&e->c, &s, r);
    r->shard_elems = (int64_t)e->shard_n;
    ranges(e->pieces, e->npieces, e->world, e->rank, r);
}

void dt_engine_describe(const struct dt_engine *e, char *buf, size_t n)
{
    int persist = 0, parts = 0;
    for (int u = 0; u < e->nunits; u++) persist += e->units[u].persistent;
    for (int i = 0; i < e->npieces; i++) parts += e->pieces[i].part;
    size_t most = 0;
    for (int i = 0; i < e->npieces; i++) most = e->pieces[i].n > most ? e->pieces[i].n : most;
    int o = snprintf(buf, n, "stage %d%s over %d rank%s: %d unit%s in %d piece%s of at most %zu elements", e->c.stage,
                     e->rep ? " (sharded within each node, replicated across nodes)" : "", e->sworld,
                     e->sworld > 1 ? "s" : "", e->nunits, e->nunits > 1 ? "s" : "", e->npieces,
                     e->npieces > 1 ? "s" : "", most);
    if (o > 0 && (size_t)o < n && e->c.stage >= 1)
        o += snprintf(buf + o, n - (size_t)o, ", %d partitioned", parts);
    if (o > 0 && (size_t)o < n && e->c.stage == 3)
        o += snprintf(buf + o, n - (size_t)o, ", %d unit%s kept whole (under %zu elements)", persist,
                      persist != 1 ? "s" : "", e->c.persist);
    if (o > 0 && (size_t)o < n && e->c.offload)
        snprintf(buf + o, n - (size_t)o, "; the optimizer offloaded: its state and fp32 master weights%s in host "
                 "memory, stepped by the CPU", e->c.offload_param ? " and the working weights" : "");
}

/* ---- storage */

static void *big(const struct dt_engine *e, size_t bytes, bool *ok)
{
    if (!bytes) return NULL;
    void *p = e->k->alloc(e->kc, bytes);
    if (!p) *ok = false;
    return p;
}

/* Offload's host side: the CPU's kernels and a context of theirs for the optimizer, which allocates
 * its moments there; the fp32 master weights and the two copies' buffers pinned (the backend's
 * host_alloc), so that the device copies to and from them at full speed. */
static dt_status_t offload_alloc(struct dt_engine *e)
{
    e->hk = &dt_kernels_cpu;
    DT_CHECK(e->hk->ctx_create(-1, &e->hkc));
    size_t n = e->shard_n ? e->shard_n : 1;
    bool lp = e->c.pdt != DT_F32;
    if (e->c.offload_param) { /* the working weights on the host; fp32 ones are the master weights themselves */
        e->shard_p = e->k->host_alloc(e->kc, n * e->esz);
        e->master = lp ? e->k->host_alloc(e->kc, n * sizeof(float)) : e->shard_p;
    } else {
        e->master = e->k->host_alloc(e->kc, n * sizeof(float));
        if (lp) e->host_p = e->k->host_alloc(e->kc, n * e->esz);
    }
    e->host_g = e->k->host_alloc(e->kc, n * e->gsz);
    if (!e->master || !e->host_g || (lp && !e->host_p && !e->c.offload_param) || (e->c.offload_param && !e->shard_p))
        return dt_error(DT_ERR_NOMEM, "dtrun: rank %d: error: out of pinned host memory for the offloaded optimizer "
                        "(%.1f MiB of master weights, gradients and working copy for %zu parameters)\n  hint: more "
                        "ranks keep less each (zero1/2/3 shard the optimizer), or raise ulimit -l", e->rank,
                        (double)n * (4 + e->gsz + (e->c.pdt != DT_F32 ? e->esz : 0)) / 1048576, e->shard_n);
    return DT_SUCCESS;
}

static dt_status_t allocate(struct dt_engine *e)
{
    struct dt_model *m = e->m;
    size_t max_own;
    unit_extent(e->pieces, e->npieces, m->units, m->nunits, &e->max_unit, &max_own);
    struct sizes s;
    size_up(&e->c, m->nparams, e->shard_n, e->max_unit, max_own, m->nunits, e->opt.c.kind, &s);
    bool ok = true;
    e->full_p = big(e, s.full_p * e->esz, &ok);
    e->full_g = big(e, s.full_g * e->gsz, &ok);
    if (!e->c.offload_param) e->shard_p = big(e, s.shard_p * e->esz, &ok);
    e->shard_g = big(e, s.shard_g * e->gsz, &ok);
    if (e->c.offload) {
        DT_CHECK(offload_alloc(e));
    } else {
        e->master = big(e, s.master * 4, &ok);
    }
    e->scratch = big(e, s.scratch * 4, &ok);
    e->scratch_n = s.scratch;
    if (e->c.stochastic) e->scratch2 = big(e, s.scratch * 4, &ok);
    e->nslots = (int)s.nslots;
    for (int i = 0; i < e->nslots; i++) e->slots[i] = (struct slot){.f32 = big(e, s.slot_bytes, &ok), .unit = -1};
    e->ngslots = (int)s.ngslots;
    size_t rsz = dt_dtype_size(e->c.rdt);
    for (int i = 0; i < e->ngslots; i++)
        e->gslots[i] = (struct gslot){.f32 = big(e, e->max_unit * 4, &ok),
                                      .recv = big(e, e->c.stage >= 2 ? max_own * rsz : 0, &ok), .unit = -1};
    e->npool = (int)s.npool;
    for (int i = 0; i < e->npool; i++) {
        e->pool[i] = big(e, s.conv_bytes / s.npool, &ok);
        e->pool_owner[i] = -1;
    }
    if (!ok)
        return dt_error(DT_ERR_NOMEM, "dtrun: rank %d: error: out of memory for the model state (stage %d, %zu "
                        "parameters)\n  hint: a higher ZeRO stage or more ranks keeps less on each", e->rank,
                        e->c.stage, m->nparams);
    return e->c.offload ? dt_optimizer_init(&e->opt, &e->opt.c, e->hk, e->hkc, e->shard_n)
                        : dt_optimizer_init(&e->opt, &e->opt.c, e->k, e->kc, e->shard_n);
}

static dt_status_t split_comms(struct dt_engine *e, const struct dt_world *w)
{
    e->shard = e->comm;
    if (!e->c.hybrid || !e->comm || w->nnodes <= 1) return DT_SUCCESS;
    if (w->size != w->nnodes * w->local_size)
        return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: HYBRID_SHARD shards within a node, and the nodes of this "
                        "job hold different numbers of ranks (%d ranks on %d nodes, %d here)\n  hint: start the same "
                        "number of tasks on every node (srun --ntasks-per-node)", w->rank, w->size, w->nnodes,
                        w->local_size);
    DT_CHECK(dt_comm_split(e->comm, w->node, w->local_rank, "node", &e->shard));
    return dt_comm_split(e->comm, w->local_rank, w->node, "replicas", &e->rep);
}

dt_status_t dt_engine_create(const struct dt_engine_config *c, struct dt_comm *comm, const struct dt_world *w,
                             struct dt_model *m, const struct dt_optim_config *oc, struct dt_engine **out)
{
    *out = NULL;
    struct dt_engine *e = calloc(1, sizeof *e);
    if (!e) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the strategy");
    e->c = *c;
    e->m = m;
    e->k = m->k;
    e->kc = m->kc;
    e->comm = comm;
    e->rank = w->rank;
    e->world = w->size;
    e->esz = dt_dtype_size(c->pdt);
    e->gdt = grad_type(c);
    e->gsz = dt_dtype_size(e->gdt);
    e->opt.c = *oc;
    e->nunits = m->nunits;
    e->grads_down = DT_NO_TICKET;
    dt_status_t rc = split_comms(e, w);
    e->srank = e->shard ? e->shard->world.rank : 0;
    e->sworld = e->shard ? e->shard->world.size : 1;
    if (rc == DT_SUCCESS) {
        int np = plan(c, m->units, m->nunits, e->sworld, e->srank, NULL, NULL, NULL);
        e->pieces = calloc((size_t)np, sizeof *e->pieces);
        e->units = calloc((size_t)m->nunits, sizeof *e->units);
        e->what = calloc((size_t)np, sizeof *e->what);
        e->norm_parts = calloc(3 * (size_t)np, sizeof *e->norm_parts);
        if (!e->pieces || !e->units || !e->what || !e->norm_parts)
            rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the plan");
        else e->npieces = plan(c, m->units, m->nunits, e->sworld, e->srank, e->pieces, e->units, &e->shard_n);
        for (int i = 0; e->what && i < e->npieces; i++)
            snprintf(e->what[i], sizeof e->what[i], "gradient piece %d/%d", i + 1, e->npieces);
    }
    if (rc == DT_SUCCESS) rc = allocate(e);
    if (rc == DT_SUCCESS) {
        dt_engine_install_hooks(e);
        char what[256];
        dt_engine_describe(e, what, sizeof what);
        DT_INFO(DT_SUB_COMM, "strategy: %s; parameters in %s, gradients %s%s%s, reduced in %s%s", what,
                dt_dtype_str(c->pdt), c->pdt != DT_F32 ? "rounded to " : "in ", dt_dtype_str(c->pdt),
                e->gdt != c->pdt ? " and summed in fp32" : "", dt_dtype_str(c->rdt),
                c->master ? ", fp32 master weights" : "");
    }
    if (rc != DT_SUCCESS) {
        dt_engine_free(e, false);
        return rc;
    }
    *out = e;
    return DT_SUCCESS;
}

void dt_engine_free(struct dt_engine *e, bool clean)
{
    if (!e) return;
    void *bufs[] = {e->full_p, e->full_g, e->c.offload_param ? NULL : e->shard_p, e->shard_g,
                    e->c.offload ? NULL : e->master, e->scratch, e->scratch2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) e->k->free(e->kc, bufs[i]);
    void *pinned[] = {e->c.offload && e->master != e->shard_p ? e->master : NULL, e->host_g, e->host_p,
                      e->c.offload_param ? e->shard_p : NULL};
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
        if (pinned[i]) e->k->host_free(e->kc, pinned[i]);
    for (int i = 0; i < e->nslots; i++) e->k->free(e->kc, e->slots[i].f32);
    for (int i = 0; i < e->ngslots; i++) {
        e->k->free(e->kc, e->gslots[i].f32);
        e->k->free(e->kc, e->gslots[i].recv);
    }
    for (int i = 0; i < e->npool; i++) e->k->free(e->kc, e->pool[i]);
    free(e->slices);
    free(e->norm_parts);
    dt_optimizer_free(&e->opt);
    if (e->hkc) e->hk->ctx_destroy(e->hkc);
    if (e->rep) dt_comm_close(e->rep, clean);
    if (e->shard && e->shard != e->comm) dt_comm_close(e->shard, clean);
    free(e->pieces);
    free(e->units);
    free(e->what);
    free(e->trace);
    e->k->free(e->kc, e->rows_all);
    e->k->free(e->kc, e->vals_all);
    free(e);
}
