/*
 * engine_impl.h - the engine's state, shared by engine.c (plan, storage,
 * memory), engine_mem.c (the model's memory hooks: gathers, gradient scratch,
 * reductions) and engine_step.c (norm, optimizer, parameter sync).
 */
#ifndef DT_ENGINE_IMPL_H
#define DT_ENGINE_IMPL_H

#include "strategy/engine.h"

#define DT_ENGINE_SLOTS 8 /* most units gathered or widened at once */
#define DT_ENGINE_GSLOTS 3 /* gradient scratch buffers in flight */

struct piece {
    size_t off, n;          /* flat range */
    int unit;               /* its first unit */
    int nunits;             /* units in it (stages 0-1 merge small units; stages 2-3 cut units) */
    int left;               /* of those, not done with this micro-batch */
    bool started;           /* its reduction was started this step */
    bool part;              /* partitioned over the shard group; else every rank keeps it whole */
    size_t own_off, own_n;  /* the flat range this rank keeps */
    size_t shard_at;        /* where that range sits in the shard buffers */
    struct dt_comm_req req; /* its reduction in flight */
    struct dt_comm_req gather; /* stage 3: its gather in flight */
    struct dt_comm_req rep; /* hybrid: the all-reduce of the part across nodes */
    void *conv;             /* stages 0-1: its gradients in the reduction type, when that is not pdt (a pool buffer) */
    uint64_t up;            /* offload: the ticket of its updated parameters' upload (kernels.h copy_async) */
};

struct unit_state {
    int first, npieces;
    bool persistent; /* stage 3: kept whole */
    int slot;        /* the parameter slot holding its fp32 values, -1: none */
    bool written;    /* stages 0-1: this step's gradients are in full_g (the first write overwrote it) */
};

/* a unit's parameters in fp32 for the model (widened, and gathered under stage 3) */
struct slot {
    float *f32;
    void *lp;       /* stage 3, 16-bit: what the gather fills before widening */
    int unit;       /* -1: free */
    int users;      /* params() calls not yet done */
    bool gathering; /* requests in flight */
    bool ready;     /* f32 holds the unit */
    int64_t last;   /* for eviction: when it was last used */
};

/* a unit's gradients of one micro-batch, on their way into storage */
struct gslot {
    float *f32;
    void *send; /* in rdt, when that is not fp32 */
    void *recv; /* this rank's parts, in rdt */
    int unit;   /* -1: free */
    bool busy;  /* reductions in flight */
};

struct dt_engine {
    struct dt_engine_config c;
    struct dt_model *m;
    const struct dt_kernels *k; /* the model's: every buffer below is its tensor memory */
    struct dt_kctx *kc;
    struct dt_comm *comm;  /* every rank: metrics, the norm, embedding rows */
    struct dt_comm *shard; /* the sharding group (comm, or the node's ranks under hybrid) */
    struct dt_comm *rep;   /* hybrid: the ranks holding the same parts on other nodes; else NULL */
    int rank, world, srank, sworld;
    size_t esz;            /* bytes per working element (parameters) */
    enum dt_dtype gdt;     /* the gradients' storage: pdt, or fp32 when micro-batches accumulate */
    size_t gsz;
    struct piece *pieces;
    int npieces;
    struct unit_state *units;
    int nunits;
    size_t max_unit, shard_n;
    /* storage */
    void *full_p, *full_g;   /* stages 0-2 / 0-1: every element, in pdt */
    void *shard_p, *shard_g; /* stage 3 / stages 1-3: this rank's elements, in pdt */
    float *master;           /* fp32 master weights of the shard (mixed precision; offload: always, on the host) */
    struct dt_optimizer opt; /* offload: over host memory, stepping with the host's kernels */
    /* offload: the host's kernels and context; the shard's gradients come down into host_g (pinned, gdt),
     * the updated working copy goes up from host_p (pinned, pdt; fp32: master itself) */
    const struct dt_kernels *hk;
    struct dt_kctx *hkc;
    void *host_g, *host_p;
    uint64_t grads_down; /* offload: the ticket of the step's last gradient copy down */
    float *scratch, *scratch2; /* sub_group floats each: the optimizer's fp32 gradients and parameters */
    size_t scratch_n;          /* that many */
    struct dt_adamw_slice *slices; /* a step's AdamW updates, applied in one call (host memory) */
    int nslices, slices_cap;
    struct dt_norm_part *norm_parts; /* the step's gradient check: three parts a piece at most (host memory) */
    struct slot slots[DT_ENGINE_SLOTS];
    int nslots;
    struct gslot gslots[DT_ENGINE_GSLOTS];
    int ngslots, next_gslot;
    /* the order units were used in the first step, for prefetching */
    int *trace;
    int ntrace, trace_cap, trace_pos;
    bool tracing, traced;
    int64_t clock;
    /* a step */
    int64_t step;
    bool comm_now;         /* this micro-batch's gradients are reduced (stages 0-1: the last only) */
    bool first_micro;
    dt_status_t error;     /* the first failure inside a hook, reported by reduce_grads */
    /* the embedding rows of this backward, from every rank */
    struct dt_comm_req rows_req[2];
    int32_t *rows_all;
    float *vals_all;
    size_t rows_cap;
    bool rows_pending;
    size_t rows_table;
    int rows_n, rows_width;
    char (*what)[40]; /* per piece, for messages */
    /* stages 0-1 reducing in another type than the storage's: pieces in flight in that type */
    void *pool[DT_ENGINE_GSLOTS];
    int pool_owner[DT_ENGINE_GSLOTS], npool, next_pool;
};

/* offload: the host's working copy of the shard, which the optimizer writes (offload_param: the shard
 * itself; fp32: the master weights) */
static inline void *dt_engine_host_working(const struct dt_engine *e)
{
    return e->c.pdt == DT_F32 ? (void *)e->master : e->c.offload_param ? e->shard_p : e->host_p;
}
/* offload: what reads piece p's working parameters next waits for their upload */
static inline void dt_engine_await_params(struct dt_engine *e, struct piece *p)
{
    if (p->up == DT_NO_TICKET) return;
    dt_copy_wait(e->k, e->kc, p->up, false);
    p->up = DT_NO_TICKET;
}

/* engine_mem.c */
void dt_engine_install_hooks(struct dt_engine *e);
dt_status_t dt_engine_wait_gslot(struct dt_engine *e, struct gslot *s);
dt_status_t dt_engine_finish_rows(struct dt_engine *e);
dt_status_t dt_engine_start_reduce(struct dt_engine *e, int unit);
dt_status_t dt_engine_wait_reduce(struct dt_engine *e, int unit);
/* forget every gathered or widened unit: the parameters are about to change */
void dt_engine_drop_params(struct dt_engine *e);
/* engine_step.c */
dt_status_t dt_engine_gather_params(struct dt_engine *e);
/* offload: the shard's reduced gradients down to the host (queued; dt_engine_step waits for them) */
dt_status_t dt_engine_offload_grads(struct dt_engine *e);
/* the pointer to this rank's gradients of piece p, in pdt */
void *dt_engine_owned_grads(const struct dt_engine *e, const struct piece *p);

/* element i of a parameter buffer (the working type), of a gradient buffer (gdt) */
static inline void *dt_engine_at(const struct dt_engine *e, void *buf, size_t i) { return (char *)buf + i * e->esz; }
static inline void *dt_engine_gat(const struct dt_engine *e, void *buf, size_t i) { return (char *)buf + i * e->gsz; }
/* fp32 under stages 0-1: the model's ops write the gradients into full_g themselves, the first
 * micro-batch of a step overwriting what the last step left (no zeroing pass) */
static inline bool dt_engine_direct_grads(const struct dt_engine *e) { return e->c.stage <= 1 && e->c.pdt == DT_F32; }
/* zero full_g in the units the model has not written this step (stages 0-1, where full_g is never
 * zeroed as a whole: a unit's first write of a step overwrites it; a unit its backward never asks
 * for has zero gradients, as under the other strategies) */
void dt_engine_zero_unwritten(struct dt_engine *e);

#endif
