/*
 * markov.h - the built-in synthetic source: a seeded order-k Markov chain over
 * an alphabet of A tokens. Each context of k tokens has S successors, picked by
 * hashing (seed, context), with Zipf probabilities p_i = (1/(i+1)) / H_S. Every
 * context has the same next-token distribution up to relabelling, so the
 * entropy rate is exactly h = -sum p_i ln p_i, whatever the stationary
 * distribution. A sequence starts with k uniform tokens, so the best possible
 * mean loss over T predictions is ((k-1) ln A + (T-k+1) h) / T: tests compare
 * training against that closed form.
 * Sequence n is a pure function of (seed, n): any rank can make any sample.
 */
#ifndef DT_MARKOV_H
#define DT_MARKOV_H

#include <stdint.h>

struct dt_markov {
    int order, alphabet, support;
    uint64_t seed;
    double p[64];   /* successor probabilities */
    double cdf[64];
};

void dt_markov_init(struct dt_markov *mk, int order, int alphabet, int support, uint64_t seed);
/* Sequence n of `len` tokens; `stream` separates train (0) from validation (1). */
void dt_markov_sequence(const struct dt_markov *mk, uint64_t stream, uint64_t n, int32_t *out, int len);
double dt_markov_entropy_rate(const struct dt_markov *mk);
/* The least achievable mean cross-entropy (nats) over the T predictions of a sequence of T+1 tokens. */
double dt_markov_loss_floor(const struct dt_markov *mk, int T);

#endif
