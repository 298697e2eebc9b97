/* rng.c - see rng.h. */
#include <math.h>
#include "core/rng.h"

uint64_t dt_hash64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

struct dt_rng dt_rng_make(uint64_t seed, uint64_t stream)
{
    return (struct dt_rng){dt_hash64(dt_hash64(seed) ^ (stream * 0xD1B54A32D192ED03ull))};
}

uint64_t dt_rng_u64(struct dt_rng *r)
{
    r->state += 0x9E3779B97F4A7C15ull;
    uint64_t z = r->state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dt_rng_skip(struct dt_rng *r, uint64_t n) { r->state += n * 0x9E3779B97F4A7C15ull; }

float dt_rng_uniform(struct dt_rng *r) { return (float)(dt_rng_u64(r) >> 40) / 16777216.0f; }

uint32_t dt_rng_below(struct dt_rng *r, uint32_t n) { return (uint32_t)(((dt_rng_u64(r) >> 32) * n) >> 32); }

float dt_rng_normal(struct dt_rng *r)
{
    float u1 = dt_rng_uniform(r), u2 = dt_rng_uniform(r);
    if (u1 < 1e-30f) u1 = 1e-30f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}
