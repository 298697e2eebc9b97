/*
 * sampler.h - the next token from a row of logits, in the order users of llm.c, nanoGPT and llama2.c
 * know: logits divided by the temperature, the top k kept, softmax, the smallest set of the most
 * likely tokens whose probability reaches top_p kept (nucleus), renormalised, one draw. Temperature 0
 * is greedy: the largest logit, the lowest id among equals (torch.argmax's choice). Draws come from
 * the counter-based generator (core/rng.h) keyed by the seed: the same seed, logits and settings give
 * the same tokens on any machine.
 */
#ifndef DT_SAMPLER_H
#define DT_SAMPLER_H

#include <stdint.h>
#include "core/rng.h"
#include "core/status.h"

struct dt_sampler_opts {
    float temperature; /* 0: greedy */
    int top_k;         /* 0: every token */
    float top_p;       /* 1: no nucleus cut */
    uint64_t seed;
};

struct dt_sampler {
    struct dt_sampler_opts o;
    struct dt_rng rng;
    int V;
    struct dt_cand *cand; /* V candidates, sorted when top_k or top_p cut */
};

dt_status_t dt_sampler_init(struct dt_sampler *s, const struct dt_sampler_opts *o, int V);
void dt_sampler_free(struct dt_sampler *s);
/* The next token among ids [0, V) of logits (fp32; a padded vocabulary's rows past V are not read). */
int32_t dt_sampler_next(struct dt_sampler *s, const float *logits);

#endif
