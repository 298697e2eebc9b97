/*
 * engine_state.c - the engine's state in and out of checkpoints (engine.h):
 * which ranges a rank writes and reads, and the copies, in fp32 whatever the
 * working type.
 */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "strategy/engine_impl.h"

int dt_engine_narrays(const struct dt_engine *e) { return 1 + (int)(dt_optimizer_state_bytes(e->opt.c.kind) / 4); }

int64_t dt_engine_opt_steps(const struct dt_engine *e) { return e->opt.t; }

int dt_engine_save_ranges(const struct dt_engine *e, struct dt_range *out, int max)
{
    bool first_replica = !e->rep || e->rep->world.rank == 0;
    int k = 0;
    for (int i = 0; i < e->npieces; i++) {
        const struct piece *p = &e->pieces[i];
        size_t off = p->own_off, n = p->own_n;
        if (p->part && !first_replica) continue; /* the first node's ranks write the parts */
        if (!p->part) { /* every rank keeps it: each writes its share */
            dt_comm_part(p->n, e->world, e->rank, &off, &n);
            off += p->off;
        }
        if (n && k < max) out[k] = (struct dt_range){off, n};
        k += n > 0;
    }
    return k;
}

int dt_engine_load_ranges(const struct dt_engine *e, struct dt_range *out, int max)
{
    int k = 0;
    for (int i = 0; i < e->npieces; i++) {
        if (e->pieces[i].own_n && k < max) out[k] = (struct dt_range){e->pieces[i].own_off, e->pieces[i].own_n};
        k += e->pieces[i].own_n > 0;
    }
    return k;
}

/* the piece holding flat element off, and off's index in the shard */
static const struct piece *piece_at(const struct dt_engine *e, size_t off, size_t *at)
{
    int lo = 0, hi = e->npieces - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (e->pieces[mid].off <= off) lo = mid;
        else hi = mid - 1;
    }
    const struct piece *p = &e->pieces[lo];
    *at = p->shard_at + (off - p->own_off);
    return p;
}

/* the working parameters of a piece, where this rank keeps them */
static void *working(const struct dt_engine *e, const struct piece *p, size_t off)
{
    return e->c.stage == 3 ? dt_engine_at(e, e->shard_p, p->shard_at + (off - p->own_off))
                           : dt_engine_at(e, e->full_p, off);
}

/* Calls f on each run of [off, off + n) that lies in one piece; every element of it is this rank's. */
#define EACH_RUN(e, off, n, body)                                                                     \
    for (size_t done_ = 0; done_ < (n);) {                                                            \
        size_t at_, o_ = (off) + done_;                                                               \
        const struct piece *p_ = piece_at((e), o_, &at_);                                             \
        size_t k_ = p_->own_off + p_->own_n - o_;                                                     \
        if (k_ > (n) - done_) k_ = (n) - done_;                                                       \
        body;                                                                                         \
        done_ += k_;                                                                                  \
    }

/* n working parameters (tensor memory, of the storage type) to fp32 in host memory, and back: widened
 * or narrowed by the backend in the optimizer's scratch (a 16-bit storage always has one), a
 * sub-group at a time */
static void working_to_host(const struct dt_engine *e, float *d, const void *w, size_t n)
{
    if (e->c.offload_param) { /* on the host already */
        e->hk->convert(e->hkc, d, DT_F32, w, e->c.pdt, n);
        return;
    }
    if (e->c.pdt == DT_F32) {
        e->k->copy(e->kc, d, w, n * sizeof(float), DT_COPY_TO_HOST);
        return;
    }
    for (size_t i = 0; i < n; i += e->scratch_n) {
        size_t m = n - i < e->scratch_n ? n - i : e->scratch_n;
        e->k->convert(e->kc, e->scratch, DT_F32, (const char *)w + i * e->esz, e->c.pdt, m);
        e->k->copy(e->kc, d + i, e->scratch, m * sizeof(float), DT_COPY_TO_HOST);
    }
}

static void working_from_host(const struct dt_engine *e, void *w, const float *s, size_t n)
{
    if (e->c.offload_param) {
        if (w != (const void *)s) e->hk->convert(e->hkc, w, e->c.pdt, s, DT_F32, n);
        return;
    }
    if (e->c.pdt == DT_F32) {
        e->k->copy(e->kc, w, s, n * sizeof(float), DT_COPY_TO_DEVICE);
        return;
    }
    for (size_t i = 0; i < n; i += e->scratch_n) {
        size_t m = n - i < e->scratch_n ? n - i : e->scratch_n;
        e->k->copy(e->kc, e->scratch, s + i, m * sizeof(float), DT_COPY_TO_DEVICE);
        e->k->convert(e->kc, (char *)w + i * e->esz, e->c.pdt, e->scratch, DT_F32, m);
    }
}

/* the master weights and the optimizer's state, where they live: the device's memory, or offloaded to
 * the host's (a memcpy there) */
static void state_copy(const struct dt_engine *e, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    if (e->c.offload) memcpy(dst, src, bytes);
    else e->k->copy(e->kc, dst, src, bytes, kind);
}

void dt_engine_get(const struct dt_engine *e, int array, size_t off, size_t n, float *dst)
{
    EACH_RUN(e, off, n, {
        float *d = dst + done_;
        if (array == 0 && e->master) state_copy(e, d, e->master + at_, k_ * sizeof(float), DT_COPY_TO_HOST);
        else if (array == 0) working_to_host(e, d, working(e, p_, o_), k_);
        else state_copy(e, d, (array == 1 ? e->opt.m : e->opt.v) + at_, k_ * sizeof(float), DT_COPY_TO_HOST);
    })
}

void dt_engine_put(struct dt_engine *e, int array, size_t off, size_t n, const float *src)
{
    EACH_RUN(e, off, n, {
        const float *s = src + done_;
        if (array == 0) {
            if (e->master) state_copy(e, e->master + at_, s, k_ * sizeof(float), DT_COPY_TO_DEVICE);
            working_from_host(e, working(e, p_, o_), s, k_);
        } else {
            state_copy(e, (array == 1 ? e->opt.m : e->opt.v) + at_, s, k_ * sizeof(float), DT_COPY_TO_DEVICE);
        }
    })
}

dt_status_t dt_engine_loaded(struct dt_engine *e, int64_t opt_steps)
{
    e->opt.t = opt_steps;
    dt_engine_drop_params(e); /* widened and gathered copies of the old values */
    /* stages 1-2 keep every parameter: the parts the others loaded */
    if (e->c.stage >= 1 && e->c.stage <= 2 && e->shard) return dt_engine_gather_params(e);
    return DT_SUCCESS;
}

dt_status_t dt_engine_fill(struct dt_engine *e, struct dt_param_source *s, size_t staging)
{
    int nr = dt_engine_load_ranges(e, NULL, 0);
    size_t most = 0;
    struct dt_range *r = malloc((size_t)(nr ? nr : 1) * sizeof *r);
    if (r) dt_engine_load_ranges(e, r, nr);
    for (int i = 0; r && i < nr; i++) most = r[i].n > most ? r[i].n : most;
    size_t chunk = most < staging ? most : staging;
    float *buf = s && chunk ? e->k->host_alloc(e->kc, chunk * sizeof *buf) : NULL;
    /* a failure is kept, not returned: every rank goes on to the collective below */
    dt_status_t rc = DT_SUCCESS;
    if (s && (!r || (chunk && !buf)))
        rc = dt_error(DT_ERR_NOMEM, "dtrun: rank %d: error: out of host memory staging %s (%zu MiB)", e->rank, s->what,
                      chunk * sizeof *buf >> 20);
    for (int i = 0; s && rc == DT_SUCCESS && i < nr; i++)
        for (size_t done = 0; rc == DT_SUCCESS && done < r[i].n; done += chunk) {
            size_t k = r[i].n - done < chunk ? r[i].n - done : chunk;
            rc = s->fill(s->ctx, r[i].off + done, k, buf);
            if (rc == DT_SUCCESS) dt_engine_put(e, 0, r[i].off + done, k, buf);
        }
    free(r);
    if (buf) e->k->host_free(e->kc, buf);
    dt_status_t done = dt_engine_loaded(e, 0);
    DT_CHECK(rc);
    return done;
}
