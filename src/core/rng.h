/*
 * rng.h - deterministic random numbers: splitmix64 streams keyed by (seed, stream),
 * so every consumer (weights, data order, synthetic tokens) draws the same
 * numbers whatever the world size or the order of calls elsewhere. The state is a counter, so a
 * consumer can start a stream at any draw: a rank draws only its slice of a tensor's initial values
 * and gets the bits a whole draw would give.
 */
#ifndef DT_RNG_H
#define DT_RNG_H

#include <stdint.h>

struct dt_rng {
    uint64_t state;
};

uint64_t dt_hash64(uint64_t x);
struct dt_rng dt_rng_make(uint64_t seed, uint64_t stream);
uint64_t dt_rng_u64(struct dt_rng *r);
/* as if n u64 had been drawn (a counter: O(1)); dt_rng_uniform draws one, dt_rng_normal two */
void dt_rng_skip(struct dt_rng *r, uint64_t n);
/* uniform in [0, 1) with 24 bits */
float dt_rng_uniform(struct dt_rng *r);
/* uniform integer in [0, n) */
uint32_t dt_rng_below(struct dt_rng *r, uint32_t n);
/* standard normal (Box-Muller) */
float dt_rng_normal(struct dt_rng *r);

#endif
