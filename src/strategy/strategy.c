/* strategy.c - see strategy.h: the factory, and the single-rank strategy, which has nothing to share. */
#include <stdlib.h>
#include "config/schema.h"
#include "core/error.h"
#include "strategy/strategy.h"

static dt_status_t single_attach(struct dt_strat *s, struct dt_model *m)
{
    (void)s;
    (void)m;
    return DT_SUCCESS;
}

static void single_before_backward(struct dt_strat *s, struct dt_model *m, bool last)
{
    (void)s;
    (void)last;
    m->on_grads_ready = NULL;
}

static dt_status_t single_reduce_grads(struct dt_strat *s, struct dt_model *m)
{
    (void)s;
    (void)m;
    return DT_SUCCESS;
}

/* one rank: its values are already the mean and the maximum */
static dt_status_t single_reduce(struct dt_strat *s, double *v, int n)
{
    (void)s;
    (void)v;
    (void)n;
    return DT_SUCCESS;
}

static void single_free(struct dt_strat *s) { (void)s; }

dt_status_t dt_strategy_single(struct dt_strat **out)
{
    struct dt_strat *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the strategy");
    *s = (struct dt_strat){.name = "single", .attach = single_attach, .before_backward = single_before_backward,
                              .reduce_grads = single_reduce_grads, .mean = single_reduce, .max = single_reduce,
                              .free = single_free, .world = 1, .grad_divisor = 1};
    *out = s;
    return DT_SUCCESS;
}

dt_status_t dt_strategy_create(const struct dt_config *cfg, const struct dt_world *w, struct dt_strat **out)
{
    *out = NULL;
    if (cfg->resolved.strategy == DT_STRAT_SINGLE) return dt_strategy_single(out);
    if (cfg->resolved.strategy != DT_STRAT_DDP)
        return dt_error(DT_ERR_CONFIG, "dtrun: error: compute.strategy %s is not implemented in this build (ZeRO and "
                        "FSDP land with their issue)\n  hint: use compute.strategy: ddp",
                        dt_enum_str(dt_strategy_names, cfg->resolved.strategy));
    struct dt_comm *c;
    DT_CHECK(dt_comm_open(&c, w, dt_comm_cpu_backend(), cfg->compute.comm_timeout));
    static const enum dt_dtype reduce[] = {[DT_DTYPE_FP32] = DT_F32, [DT_DTYPE_BF16] = DT_BF16,
                                           [DT_DTYPE_FP16] = DT_F16};
    dt_status_t rc = dt_strategy_ddp(c, cfg->compute.strategy_config.bucket_cap_mb,
                                     reduce[cfg->compute.grad_reduce_dtype], out);
    if (rc != DT_SUCCESS) dt_comm_close(c, true);
    return rc;
}

void dt_strategy_free(struct dt_strat *s, bool clean)
{
    if (!s) return;
    s->free(s);
    dt_comm_close(s->comm, clean);
    free(s);
}

void dt_strategy_set_step(struct dt_strat *s, int64_t step)
{
    if (s->comm) dt_comm_set_step(s->comm, step);
}
