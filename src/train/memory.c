/* memory.c - see memory.h. */
#include <stdlib.h>
#include "core/error.h"
#include "precision/policy.h"
#include "strategy/strategy.h"
#include "train/memory.h"
#include "train/shapes.h"

#define MIB (1024.0 * 1024.0)

dt_status_t dt_memory_estimate(const struct dt_config *cfg, FILE *out)
{
    struct dt_prec_policy prec;
    struct dt_engine_config ec;
    struct dt_optim_config oc;
    struct dt_unit *units;
    int nunits;
    DT_CHECK(dt_precision_from_config(cfg, &prec));
    dt_strategy_engine_config(cfg, &prec, &ec);
    dt_shapes_optim(cfg, &oc);
    DT_CHECK(dt_shapes_units(cfg, &units, &nunits));
    double psi = 0;
    for (int u = 0; u < nunits; u++) psi += (double)units[u].numel;
    int N = cfg->resolved.world;
    int shard = ec.hybrid && cfg->resolved.nodes > 1 ? cfg->resolved.devices_per_node : N;
    double p = (double)dt_dtype_size(ec.pdt), g = ec.accum > 1 ? 4 : p;
    double K = (ec.master ? 4 : 0) + (double)dt_optimizer_state_bytes(oc.kind);
    fprintf(out, "# model state per rank, as dtrun allocates it: %.2fM parameters (Psi), %d rank%s%s, %s; per "
            "parameter p = %g bytes, g = %g, K = %g (%s%s)\n", psi / 1e6, N, N > 1 ? "s" : "",
            shard != N ? " (sharded over the ranks of a node)" : "", prec.name, p, g, K, ec.master ? "fp32 master 4 + " : "",
            oc.kind == DT_OPT_SGD ? "momentum 4" : "Adam moments 8");
    fprintf(out, "#   %-8s %10s %10s %9s %10s %9s %12s   %-30s %10s\n", "stage", "parameters", "gradients", "master",
            "optimizer", "gathered", "model state", "DeepSpeed's formula", "workspace");
    static const char *const names[] = {"ddp", "zero1", "zero2", "zero3"};
    static const char *const forms[] = {"(p+g+K) Psi", "(p+g) Psi + K Psi/N", "p Psi + (g+K) Psi/N", "(p+g+K) Psi/N"};
    double n = (double)shard;
    double formula[] = {(p + g + K) * psi, (p + g) * psi + K * psi / n, p * psi + (g + K) * psi / n,
                        (p + g + K) * psi / n};
    int64_t mine = 0;
    for (int stage = 0; stage <= 3; stage++) {
        struct dt_engine_config c = ec;
        c.stage = N > 1 ? stage : 0;
        struct dt_mem_report r;
        dt_engine_plan_memory(&c, units, nunits, N > 1 ? shard : 1, 0, oc.kind, &r);
        char f[64];
        snprintf(f, sizeof f, "%s = %.1f MiB", forms[stage], formula[stage] / MIB);
        fprintf(out, "#   %-8s %10.1f %10.1f %9.1f %10.1f %9.1f %8.1f MiB   %-30s %6.1f MiB%s\n", names[stage],
                (double)r.params / MIB, (double)r.grads / MIB, (double)r.master / MIB, (double)r.optimizer / MIB,
                (double)r.gathered / MIB, (double)r.state / MIB, f, (double)r.buffers / MIB,
                stage == cfg->resolved.stage ? "   <- this config" : "");
        if (stage == cfg->resolved.stage) mine = r.state;
    }
    fprintf(out, "# this config: %lld bytes of model state on rank 0\n", (long long)mine);
    free(units);
    return DT_SUCCESS;
}
