/*
 * strategy.h - how the ranks share the work of one optimizer step: the
 * config's strategy (single, ddp, zero1/2/3, fsdp with its sharding_strategy,
 * deepspeed with its JSON's stage) turned into the sharding engine's settings
 * (engine.h), the communicator it runs over, and the reductions of metrics.
 */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include <stdbool.h>
#include "comm/comm.h"
#include "config/config.h"
#include "launch/world.h"
#include "model/model.h"
#include "precision/policy.h"
#include "strategy/engine.h"

struct dt_strat {
    char name[48];        /* "ddp", "zero3", "fsdp FULL_SHARD", "deepspeed stage 2", "single" */
    struct dt_comm *comm; /* NULL for one rank */
    int rank, world;
    /* backward scales the loss gradient by 1/(accumulation x grad_divisor), so that summing over ranks
     * gives the mean without another pass over the gradients (PyTorch DDP divides before its all-reduce
     * the same way) */
    int grad_divisor;
    struct dt_engine_config ec;
    struct dt_engine *engine; /* once attached */
    const struct dt_world *w;
};

/* The settings the config asks for with this precision (no ranks, no model needed: dtrun check --memory). */
void dt_strategy_engine_config(const struct dt_config *cfg, const struct dt_prec_policy *prec,
                               struct dt_engine_config *ec);
/* The strategy cfg->resolved.strategy names, for this world (opening the communicator when
 * there is more than one rank). */
dt_status_t dt_strategy_create(const struct dt_config *cfg, const struct dt_prec_policy *prec,
                               const struct dt_world *w, struct dt_strat **out);
/* Take the model on (its storage moves into the engine). */
dt_status_t dt_strategy_attach(struct dt_strat *s, struct dt_model *m, const struct dt_optim_config *oc);
/* clean: every rank finished; otherwise leave the communicator (a peer may never join a shutdown). */
void dt_strategy_free(struct dt_strat *s, bool clean);
/* Replace v[0..n) by its mean / maximum over ranks (losses, step times, memory). */
dt_status_t dt_strategy_mean(struct dt_strat *s, double *v, int n);
dt_status_t dt_strategy_max(struct dt_strat *s, double *v, int n);

#endif
