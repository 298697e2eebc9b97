/*
 * strategy.h - how the ranks share the work of one optimizer step. The trainer
 * calls the same hooks whatever the strategy: before each micro-step's
 * backward, after the last one (gradients are then the mean over every rank's
 * micro-batches), and to average metrics over ranks.
 *   single  one rank; nothing to share
 *   ddp     every rank holds the whole model; gradients are averaged in buckets
 *           whose all-reduce starts while backward is still running
 * ZeRO and FSDP plug in here with their issue.
 */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include <stdbool.h>
#include "comm/comm.h"
#include "config/config.h"
#include "launch/world.h"
#include "model/model.h"

struct dt_strat {
    const char *name;
    /* Take the model on: ddp broadcasts rank 0's parameters so ranks cannot start apart. */
    dt_status_t (*attach)(struct dt_strat *s, struct dt_model *m);
    /* Before each micro-batch's backward; last: the step's final one, the only one that communicates. */
    void (*before_backward)(struct dt_strat *s, struct dt_model *m, bool last);
    /* After the final backward: on return the gradients are the mean over all ranks. */
    dt_status_t (*reduce_grads)(struct dt_strat *s, struct dt_model *m);
    /* Replace v[0..n) by its mean over ranks (losses and other metrics). */
    dt_status_t (*mean)(struct dt_strat *s, double *v, int n);
    /* ... by its maximum over ranks (the slowest rank's step time, the largest memory). */
    dt_status_t (*max)(struct dt_strat *s, double *v, int n);
    void (*free)(struct dt_strat *s);
    struct dt_comm *comm; /* NULL for single */
    int rank, world;
    /* backward scales the loss gradient by 1/(accumulation x grad_divisor), so that summing
     * over ranks gives the mean without another pass over the gradients (PyTorch DDP divides
     * before its all-reduce the same way) */
    int grad_divisor;
    void *impl;
};

/* The strategy cfg->resolved.strategy names, for this world (opening the communicator when
 * there is more than one rank). */
dt_status_t dt_strategy_create(const struct dt_config *cfg, const struct dt_world *w, struct dt_strat **out);
/* clean: every rank finished; otherwise leave the communicator (a peer may never join a shutdown). */
void dt_strategy_free(struct dt_strat *s, bool clean);
/* Which step later requests belong to, for the watchdog's messages. */
void dt_strategy_set_step(struct dt_strat *s, int64_t step);

dt_status_t dt_strategy_single(struct dt_strat **out);
/* reduce: the type gradients travel in (DT_F32, or DT_BF16 / DT_F16, summed in fp32 per addition) */
dt_status_t dt_strategy_ddp(struct dt_comm *c, double bucket_cap_mb, enum dt_dtype reduce, struct dt_strat **out);

#endif
