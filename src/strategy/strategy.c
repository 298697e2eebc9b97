/* strategy.c - see strategy.h. */
#include <stdio.h>
#include <stdlib.h>
#include "config/schema.h"
#include "core/error.h"
#include "core/log.h"
#include "strategy/strategy.h"

void dt_strategy_engine_config(const struct dt_config *cfg, const struct dt_prec_policy *prec,
                               struct dt_engine_config *ec)
{
    const struct dt_strategy_config *sc = &cfg->compute.strategy_config;
    static const enum dt_dtype reduce[] = {[DT_DTYPE_FP32] = DT_F32, [DT_DTYPE_BF16] = DT_BF16,
                                           [DT_DTYPE_FP16] = DT_F16};
    /* the working type: fp32, or the 16 bits every matmul rounds to */
    enum dt_dtype pdt = prec->compute;
    *ec = (struct dt_engine_config){
        .stage = cfg->resolved.stage,
        .hybrid = cfg->resolved.hybrid,
        .bucket = (size_t)(sc->bucket_cap_mb * 1048576.0 / sizeof(float)),
        .allgather_bucket = (size_t)sc->allgather_bucket_size,
        .prefetch = (size_t)sc->prefetch_bucket_size,
        .persist = (size_t)sc->param_persistence_threshold,
        .max_live = (size_t)sc->max_live_parameters,
        .max_reuse = (size_t)sc->max_reuse_distance,
        .sub_group = (size_t)sc->sub_group_size,
        .overlap = sc->overlap_comm,
        .accum = (int)cfg->compute.gradient_accumulation_steps,
        .pdt = pdt,
        .rdt = reduce[cfg->compute.grad_reduce_dtype],
        .master = pdt != DT_F32 && !prec->bf16_params,
        .stochastic = prec->bf16_params,
        .seed = (uint64_t)cfg->run.seed,
        .offload = sc->offload_optimizer == DT_OFFLOAD_CPU,
        .offload_param = sc->offload_param == DT_OFFLOAD_CPU && cfg->resolved.stage == 3,
    };
    if (ec->bucket < 1) ec->bucket = 1;
}

/* "zero3", "fsdp FULL_SHARD", "deepspeed stage 2", "ddp", "single" */
static void name(const struct dt_config *cfg, char *buf, size_t n)
{
    int s = cfg->compute.strategy;
    if (cfg->resolved.strategy == DT_STRAT_SINGLE) snprintf(buf, n, "single");
    else if (s == DT_STRAT_FSDP)
        snprintf(buf, n, "fsdp %s", dt_enum_str(dt_fsdp_sharding_names, cfg->compute.strategy_config.sharding_strategy));
    else if (s == DT_STRAT_DEEPSPEED) snprintf(buf, n, "deepspeed stage %d", cfg->resolved.stage);
    else snprintf(buf, n, "%s", dt_enum_str(dt_strategy_names, cfg->resolved.strategy));
}

dt_status_t dt_strategy_create(const struct dt_config *cfg, const struct dt_prec_policy *prec,
                               const struct dt_world *w, struct dt_strat **out)
{
    *out = NULL;
    struct dt_strat *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the strategy");
    *s = (struct dt_strat){.rank = w->rank, .world = w->size, .grad_divisor = w->size, .w = w};
    name(cfg, s->name, sizeof s->name);
    dt_strategy_engine_config(cfg, prec, &s->ec);
    if (w->size > 1) {
        /* tensors on GPUs are reduced by NCCL (host values beside it by MPI); on CPUs by MPI */
        const struct dt_comm_backend *be =
            cfg->compute.device == DT_DEVICE_CUDA ? dt_comm_gpu_backend() : dt_comm_cpu_backend();
        dt_status_t rc = dt_comm_open(&s->comm, w, be, cfg->compute.comm_timeout);
        if (rc != DT_SUCCESS) {
            free(s);
            return rc;
        }
    }
    *out = s;
    return DT_SUCCESS;
}

dt_status_t dt_strategy_attach(struct dt_strat *s, struct dt_model *m, const struct dt_optim_config *oc)
{
    return dt_engine_create(&s->ec, s->comm, s->w, m, oc, &s->engine);
}

void dt_strategy_free(struct dt_strat *s, bool clean)
{
    if (!s) return;
    dt_engine_free(s->engine, clean);
    dt_comm_close(s->comm, clean);
    free(s);
}

dt_status_t dt_strategy_mean(struct dt_strat *s, double *v, int n)
{
    if (!s->comm) return DT_SUCCESS;
    return dt_comm_do(s->comm, dt_coll_allreduce(v, (size_t)n, DT_F64, DT_RED_AVG, "metrics"));
}

dt_status_t dt_strategy_max(struct dt_strat *s, double *v, int n)
{
    if (!s->comm) return DT_SUCCESS;
    return dt_comm_do(s->comm, dt_coll_allreduce(v, (size_t)n, DT_F64, DT_RED_MAX, "metrics"));
}
