/* sched.c - see sched.h. */
#include <math.h>
#include "optim/sched.h"

int64_t dt_duration_steps(struct dt_duration d, const struct dt_step_units *u, int64_t total_steps)
{
    double steps = 0;
    switch (d.unit) {
    case DT_TU_BA: steps = d.value; break;
    case DT_TU_SP: steps = d.value / (double)u->samples_per_step; break;
    case DT_TU_TOK: steps = d.value / (double)u->tokens_per_step; break;
    case DT_TU_EP: steps = d.value * (double)u->steps_per_epoch; break;
    case DT_TU_DUR: steps = d.value * (double)total_steps; break;
    case DT_TU_SEC: break; /* wall time is not steps: the caller times it */
    }
    return (int64_t)ceil(steps - 1e-9);
}

void dt_sched_from_config(struct dt_sched *s, const struct dt_config *cfg, const struct dt_step_units *u,
                          int64_t total_steps)
{
#define c (&cfg->scheduler)
    *s = (struct dt_sched){
        .type = c->type,
        .lr = cfg->optimizer.lr,
        .warmup = dt_duration_steps(c->warmup, u, total_steps),
        .total = dt_duration_steps(c->total, u, total_steps),
        .step_size = dt_duration_steps(c->step_size, u, total_steps),
        .min_lr_ratio = c->min_lr_ratio,
        .gamma = c->gamma,
        .warmup_type = c->warmup_type,
        .warmup_min_lr = c->warmup_min_lr,
        .warmup_max_lr = c->warmup_max_lr,
        .warmup_min_ratio = c->warmup_min_ratio,
        .cos_min_ratio = c->cos_min_ratio,
        .milestones = c->milestones,
        .phases = c->phases,
    };
#undef c
    if (s->step_size < 1) s->step_size = 1;
}

/* DeepSpeed's warmup gamma; W is already max(2, warmup_num_steps). */
static double ds_warmup_gamma(const struct dt_sched *s, int64_t it, double W)
{
    if (s->warmup_type == DT_WARMUP_LINEAR) return (double)it / W;
    return log((double)it + 1) / log(W);
}

/* fvcore CompositeParamScheduler: a boundary belongs to the next phase (the +eps). */
static double composite(const struct dt_phases *ph, double where)
{
    const double eps = 1e-6;
    int i = 0;
    double running = ph->p[0].length;
    while (where + eps > running && i < ph->n - 1) {
        i++;
        running += ph->p[i].length;
    }
    const struct dt_phase *p = &ph->p[i];
    double sub = p->scaling == DT_SCALING_FIXED ? where : (where - (running - p->length)) / p->length;
    switch (p->type) {
    case DT_PHASE_LINEAR: return p->end * sub + p->start * (1 - sub);
    case DT_PHASE_COSINE: return p->end + 0.5 * (p->start - p->end) * (1 + cos(M_PI * sub));
    default: return p->start;
    }
}

double dt_sched_lr(const struct dt_sched *s, int64_t it)
{
    double W = s->warmup, T = s->total;
    switch (s->type) {
    case DT_SCHED_WARMUP_LR:
    case DT_SCHED_WARMUP_DECAY_LR: {
        double w = W < 2 ? 2 : W;
        double g;
        if (it < w) g = ds_warmup_gamma(s, it, w);
        else if (s->type == DT_SCHED_WARMUP_LR) g = 1;
        else g = fmax(0.0, (T - (double)it) / fmax(1.0, T - w));
        return s->warmup_min_lr + (s->warmup_max_lr - s->warmup_min_lr) * g;
    }
    case DT_SCHED_WARMUP_COSINE_LR: {
        double w = W < 2 ? 2 : W;
        double ratio;
        if (it < w) {
            ratio = s->warmup_min_ratio + ds_warmup_gamma(s, it, w) * (1 - s->warmup_min_ratio);
        } else {
            double p = fmin(1.0, ((double)it - w + 1) / fmax(1.0, T - w));
            ratio = fmax(0.0, s->cos_min_ratio + (1 - s->cos_min_ratio) * (1 + cos(M_PI * p)) / 2);
        }
        return s->lr * ratio;
    }
    case DT_SCHED_COMPOSITE: return s->lr * composite(&s->phases, T > 0 ? fmin((double)it / T, 1.0) : 0);
    default: break;
    }
    if (it < W) return s->lr * ((double)it + 1) / W;
    double min_lr = s->lr * s->min_lr_ratio;
    double p = T > W ? fmin(1.0, ((double)it - W) / (T - W)) : 1.0;
    switch (s->type) {
    case DT_SCHED_LINEAR: return s->lr - (s->lr - min_lr) * p;
    case DT_SCHED_COSINE: return min_lr + 0.5 * (s->lr - min_lr) * (1 + cos(M_PI * p));
    case DT_SCHED_STEP: return s->lr * pow(s->gamma, floor((double)it / (double)s->step_size));
    case DT_SCHED_MULTISTEP: {
        int passed = 0;
        for (int i = 0; i < s->milestones.n; i++) passed += (double)it >= s->milestones.v[i];
        return s->lr * pow(s->gamma, passed);
    }
    default: return s->lr;
    }
}
