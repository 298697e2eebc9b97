/* sampler.c - see sampler.h. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include "core/error.h"
#include "model/sampler.h"

struct dt_cand {
    float p; /* the logit, then its probability */
    int32_t id;
};

dt_status_t dt_sampler_init(struct dt_sampler *s, const struct dt_sampler_opts *o, int V)
{
    *s = (struct dt_sampler){.o = *o, .rng = dt_rng_make(o->seed, 0), .V = V};
    s->cand = malloc((size_t)V * sizeof *s->cand);
    if (!s->cand) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the sampler (%d tokens)", V);
    return DT_SUCCESS;
}

void dt_sampler_free(struct dt_sampler *s)
{
    free(s->cand);
    s->cand = NULL;
}

/* most likely first, the lower id first among equals: one order on every machine */
static int by_p(const void *a, const void *b)
{
    const struct dt_cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int32_t dt_sampler_next(struct dt_sampler *s, const float *logits)
{
    int V = s->V;
    if (s->o.temperature <= 0) {
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        return best;
    }
    struct dt_cand *c = s->cand;
    float inv = 1.0f / s->o.temperature, mx = -INFINITY;
    for (int32_t v = 0; v < V; v++) {
        c[v] = (struct dt_cand){logits[v] * inv, v};
        mx = c[v].p > mx ? c[v].p : mx;
    }
    int n = V;
    bool cut = (s->o.top_k > 0 && s->o.top_k < V) || s->o.top_p < 1.0f;
    if (cut) {
        qsort(c, (size_t)V, sizeof *c, by_p);
        if (s->o.top_k > 0 && s->o.top_k < V) n = s->o.top_k;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += c[i].p = expf(c[i].p - mx);
    if (s->o.top_p < 1.0f) {
        /* the most likely tokens until their share reaches top_p (the first always kept) */
        double acc = 0;
        int keep = 0;
        while (keep < n && (keep == 0 || acc < s->o.top_p * sum)) acc += c[keep++].p;
        n = keep;
        sum = acc;
    }
    double u = (double)dt_rng_uniform(&s->rng) * sum, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += c[i].p;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id; /* u fell on the rounding at the top */
}
