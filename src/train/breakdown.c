/* breakdown.c - see breakdown.h. */
#include <stdio.h>
#include "core/log.h"
#include "kernels/profile.h"
#include "train/breakdown.h"

void dt_breakdown_interval(struct dt_kctx *kc, int64_t steps, double *ms_per_step, bool in_total)
{
    struct dt_kprofile *p = dt_kprofile_of(kc);
    for (int i = 0; i < p->n; i++) {
        ms_per_step[i] = steps > 0 ? p->secs[i] * 1e3 / (double)steps : 0;
        if (!in_total) p->total[i] -= p->secs[i], p->calls_total[i] -= p->calls[i];
        p->secs[i] = 0;
        p->calls[i] = 0;
    }
}

void dt_breakdown_log(struct dt_kctx *kc, int64_t steps, double train_s)
{
    const struct dt_kprofile *p = dt_kprofile_of(kc);
    if (steps <= 0 || train_s <= 0) return;
    int order[DT_KPROFILE_MAX]; /* slowest first: an insertion sort of a few dozen */
    for (int i = 0; i < p->n; i++) {
        int j = i;
        for (; j > 0 && p->total[order[j - 1]] < p->total[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    double step_ms = train_s * 1e3 / (double)steps, in_ops = 0;
    char table[4096];
    size_t o = 0;
    for (int j = 0; j < p->n && o < sizeof table; j++) {
        int i = order[j];
        if (!p->calls_total[i]) continue;
        double ms = p->total[i] * 1e3 / (double)steps;
        in_ops += ms;
        o += (size_t)snprintf(table + o, sizeof table - o, "\n  %-20s %9.3f ms %5.1f%%  %6.1f calls", p->name[i], ms,
                              100 * ms / step_ms, (double)p->calls_total[i] / (double)steps);
    }
    /* the ops are timed inside the steps (validation and saving pause them, as they do the step's
     * clock): their sum exceeds the step only by the clock's rounding */
    double outside = step_ms > in_ops ? step_ms - in_ops : 0;
    DT_INFO(DT_SUB_TRAIN, "wall clock per step by op (events.wall_clock_breakdown; each op timed from when the device "
            "has run the ops before it, so a GPU's are device times), over %lld steps of %.3f ms:%s\n"
            "  %-20s %9.3f ms %5.1f%%", (long long)steps, step_ms, table, "(outside the ops)", outside,
            100 * outside / step_ms);
}
