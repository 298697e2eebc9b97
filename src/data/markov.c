/* markov.c - see markov.h. */
#include <math.h>
#include "core/rng.h"
#include "data/markov.h"

void dt_markov_init(struct dt_markov *mk, int order, int alphabet, int support, uint64_t seed)
{
    *mk = (struct dt_markov){.order = order, .alphabet = alphabet, .support = support, .seed = seed};
    double z = 0;
    for (int i = 0; i < support; i++) z += 1.0 / (i + 1);
    double c = 0;
    for (int i = 0; i < support; i++) {
        mk->p[i] = 1.0 / (i + 1) / z;
        c += mk->p[i];
        mk->cdf[i] = c;
    }
    mk->cdf[support - 1] = 1.0;
}

/* The i-th successor of a context: distinct for i < support (rehash on collision). */
static int32_t successor(const struct dt_markov *mk, uint64_t ctx, int i, const int32_t *chosen)
{
    for (uint64_t salt = 0;; salt++) {
        uint64_t h = dt_hash64(mk->seed ^ dt_hash64(ctx * 64 + (uint64_t)i + (salt << 40)));
        int32_t t = (int32_t)(h % (uint64_t)mk->alphabet);
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= chosen[j] == t;
        if (!dup) return t;
    }
}

void dt_markov_sequence(const struct dt_markov *mk, uint64_t stream, uint64_t n, int32_t *out, int len)
{
    struct dt_rng r = dt_rng_make(mk->seed + 0x5EEDull * (stream + 1), n);
    for (int t = 0; t < len; t++) {
        if (t < mk->order) {
            out[t] = (int32_t)dt_rng_below(&r, (uint32_t)mk->alphabet);
            continue;
        }
        uint64_t ctx = 0;
        for (int j = t - mk->order; j < t; j++) ctx = ctx * (uint64_t)mk->alphabet + (uint64_t)out[j];
        double u = (double)(dt_rng_u64(&r) >> 11) / 9007199254740992.0;
        int i = 0;
        while (i < mk->support - 1 && u >= mk->cdf[i]) i++;
        int32_t chosen[64];
        for (int j = 0; j <= i; j++) chosen[j] = successor(mk, ctx, j, chosen);
        out[t] = chosen[i];
    }
}

double dt_markov_entropy_rate(const struct dt_markov *mk)
{
    double h = 0;
    for (int i = 0; i < mk->support; i++) h -= mk->p[i] * log(mk->p[i]);
    return h;
}

double dt_markov_loss_floor(const struct dt_markov *mk, int T)
{
    int uniform = mk->order - 1 < T ? mk->order - 1 : T;
    return (uniform * log((double)mk->alphabet) + (T - uniform) * dt_markov_entropy_rate(mk)) / T;
}
