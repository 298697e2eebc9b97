/*
 * engine.h - the one sharding engine behind every strategy: DDP is stage 0,
 * ZeRO-1/2/3 are stages 1-3 (FSDP's FULL_SHARD is 3, SHARD_GRAD_OP 2,
 * NO_SHARD 0), single is stage 0 on one rank. The stage only decides what
 * each rank keeps whole and what it keeps a part of (DeepSpeed's ZeRO paper;
 * REFERENCE.md):
 *
 *                 parameters   gradients   fp32 master + optimizer state
 *   stage 0       whole        whole       whole          (all-reduce)
 *   stage 1       whole        whole       part           (reduce-scatter into place, all-gather after the step)
 *   stage 2       whole        part        part           (reduce-scatter per micro-batch)
 *   stage 3       part         part        part           (all-gather before each use)
 *
 * The flat parameter space is cut into pieces: each model unit (model.h) in
 * pieces of at most `bucket` elements. A piece is what one collective moves
 * and what is partitioned: rank r of the sharding group owns the part
 * dt_comm_part(piece, r). Stage 3 keeps units smaller than `persist` whole on
 * every rank (DeepSpeed's stage3_param_persistence_threshold). A rank's shard
 * is its parts of every piece, concatenated; its optimizer state and master
 * weights cover the shard only.
 *
 * Precision: the working parameters and gradients are in `pdt` (fp32, or bf16
 * / fp16 under mixed precision, whose fp32 master weights the optimizer
 * updates; bf16-true has no master and updates bf16 parameters with
 * stochastic rounding). The model reads fp32: the engine widens a unit into a
 * scratch slot when it is stored in 16 bits, and gathers it first under
 * stage 3 (prefetching the next unit in the order the first step used them).
 * Every strategy rounds the same way, so they trace the same losses: each
 * micro-batch's gradients are rounded to the working type (as a 16-bit
 * model's backward writes them), summed over micro-batches and ranks in fp32
 * (reductions travel in fp32 unless compute.grad_reduce_dtype says
 * otherwise), and rounded once more at the end. The sums are kept in the
 * working type with one micro-batch a step, in fp32 with several (DeepSpeed's
 * fp32 gradient accumulation).
 *
 * HYBRID_SHARD shards within a node and replicates across nodes: the shard
 * group is the node's ranks, and each reduced part is then all-reduced over
 * the ranks holding the same part on the other nodes.
 *
 * Offload (dt_engine_config.offload) moves the master weights and the optimizer state of the shard
 * to the host at any stage: the device keeps the working parameters and gradients; after the
 * reduction the shard's gradients are copied down, the CPU's AdamW updates the fp32 master weights
 * and writes their working copy, and that goes back up, each piece's upload ordered before the
 * first use of its unit (stage 3: its gather in the next forward) rather than before the whole step.
 */
#ifndef DT_ENGINE_H
#define DT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/status.h"
#include "model/model.h"
#include "optim/optimizer.h"

struct dt_engine_config {
    int stage;                /* 0..3 */
    bool hybrid;              /* shard within a node, replicate across nodes */
    size_t bucket;            /* most elements in one piece (reduce_bucket_size) */
    size_t allgather_bucket;  /* stages 1-2: parameter elements all-gathered at a time after the step */
    size_t prefetch;          /* stage 3: parameter elements gathered ahead of use */
    size_t persist;           /* stage 3: units with fewer elements stay whole */
    size_t max_live;          /* stage 3: gathered parameter elements kept at most (0: what is in use) */
    size_t max_reuse;         /* stage 3: a unit used again within this many elements stays gathered */
    size_t sub_group;         /* the optimizer works on this many elements at a time */
    bool overlap;             /* start reductions while backward runs */
    int accum;                /* micro-batches per step (gradient accumulation) */
    enum dt_dtype pdt;        /* working parameters and gradients */
    enum dt_dtype rdt;        /* gradients travel in this type */
    bool master;              /* fp32 master weights (mixed precision) */
    bool stochastic;          /* no master: 16-bit parameters updated with stochastic rounding (bf16-true) */
    uint64_t seed;            /* of the stochastic rounding */
    /* ZeRO-Offload (DeepSpeed's offload_optimizer: cpu): the fp32 master weights and the optimizer
     * state of this rank's shard live in host memory and the optimizer steps there (the CPU's
     * kernels); the reduced gradients come down and the updated working weights go back up, through
     * pinned buffers. The same path runs on the CPU backend, its copies plain memcpys. */
    bool offload;
    /* offload_param: cpu (stage 3, with offload): the working weights of the shard live in pinned host
     * memory too, updated there by the optimizer; each unit's part is copied up into its slot before
     * the slot is gathered, so the device holds gathered units, gradients and activations only */
    bool offload_param;
};

/* Model-state bytes per rank, as allocated (dtrun check --memory estimates the same). */
struct dt_mem_report {
    int64_t params, grads, master, optimizer;
    int64_t gathered;        /* units gathered (stage 3) or widened to fp32 for the model, at most at once */
    int64_t state;           /* the model state: all of the above */
    int64_t buffers;         /* workspace: gradient scratch, reduction and conversion buffers */
    int64_t total;
    /* elements: of the optimizer's shard, written to a checkpoint, in the largest range loaded */
    int64_t shard_elems, saved_elems, load_max_elems;
};

struct dt_engine;

/* comm: every rank (NULL: one rank); an engine over it, taking the model on: it allocates what this
 * rank keeps (its shard, its gather slots, its workspace; never the whole model unless the stage
 * keeps it whole) and the model's memory hooks become its own. The parameters are then filled
 * (dt_engine_fill) or loaded from a checkpoint (dt_engine_put, dt_engine_loaded). */
dt_status_t dt_engine_create(const struct dt_engine_config *c, struct dt_comm *comm, const struct dt_world *w,
                             struct dt_model *m, const struct dt_optim_config *oc, struct dt_engine **out);
/* The initial parameters from s (model.h), the ranges this rank keeps only, staged through host
 * memory `staging` floats at a time; then as dt_engine_loaded at step 0. Collective: every rank calls
 * it, a rank whose source could not be opened with s NULL (it fills nothing and joins the rest). */
dt_status_t dt_engine_fill(struct dt_engine *e, struct dt_param_source *s, size_t staging);
void dt_engine_free(struct dt_engine *e, bool clean);

/* One optimizer step: begin (under stages 0-1 the first write of a unit's gradients overwrites the
 * last step's; stages 2-3 zero the shard's) ... */
void dt_engine_begin_step(struct dt_engine *e, int64_t step);
/* ... before each micro-batch's backward (last: the step's final one) ... */
void dt_engine_before_backward(struct dt_engine *e, bool last);
/* ... after the final backward: every rank's gradients reduced into what this rank keeps ... */
dt_status_t dt_engine_reduce_grads(struct dt_engine *e);
/* ... the squared global norm and whether any gradient is inf or nan, over all ranks (one all-reduce) ... */
dt_status_t dt_engine_grad_norm(struct dt_engine *e, double *sumsq, bool *nonfinite);
/* ... and the update, gradients taken times gscale (clipping and loss scale folded in). */
dt_status_t dt_engine_step(struct dt_engine *e, float lr, float gscale);
/* Test hook (fault.h grad_inf): an inf in a gradient this rank keeps. */
void dt_engine_poison_grad(struct dt_engine *e);

/*
 * Checkpoints. A rank's state is arrays over the flat parameter space: array 0 the fp32 parameters
 * (the master weights, or the working ones widened), then the optimizer's (Adam's two moments, or
 * SGD's momentum). save_ranges: the flat ranges this rank writes, each element written by exactly
 * one rank of the world; load_ranges: the ranges it holds (it reads them back, from whatever world
 * wrote them). Both return how many there are and fill at most max of them. get/put copy one range of one array out of and into the engine; after the puts,
 * loaded() sets the optimizer's step count and completes the parameters every rank keeps whole
 * (collective: every rank calls it).
 */
struct dt_range {
    size_t off, n;
};
int dt_engine_narrays(const struct dt_engine *e);
int dt_engine_save_ranges(const struct dt_engine *e, struct dt_range *out, int max);
int dt_engine_load_ranges(const struct dt_engine *e, struct dt_range *out, int max);
void dt_engine_get(const struct dt_engine *e, int array, size_t off, size_t n, float *dst);
void dt_engine_put(struct dt_engine *e, int array, size_t off, size_t n, const float *src);
dt_status_t dt_engine_loaded(struct dt_engine *e, int64_t opt_steps);
/* optimizer updates taken (Adam's t, the LR schedule's clock) */
int64_t dt_engine_opt_steps(const struct dt_engine *e);

/* What the engine allocated; what it would allocate (no model, no ranks needed). */
void dt_engine_memory(const struct dt_engine *e, struct dt_mem_report *r);
void dt_engine_plan_memory(const struct dt_engine_config *c, const struct dt_unit *units, int nunits, int shard_ranks,
                           int rank, enum dt_optim_kind opt, struct dt_mem_report *r);
/* "zero3 (FULL_SHARD): 12 pieces of at most 0.59M, 3 units persistent" */
void dt_engine_describe(const struct dt_engine *e, char *buf, size_t n);

#endif
