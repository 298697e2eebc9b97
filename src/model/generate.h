/*
 * generate.h - text from a language model, a token at a time: the prompt in one forward through the
 * model's key/value cache (prefill), then one token a step, each chosen by the sampler (sampler.h),
 * until a stop token or max_tokens. What `dtrun generate` runs, and a run's samples
 * (events.sample_interval).
 */
#ifndef DT_GENERATE_H
#define DT_GENERATE_H

#include <stdbool.h>
#include <stdint.h>
#include "model/sampler.h"
#include "model/model.h"

struct dt_gen_opts {
    struct dt_sampler_opts sampler;
    int max_tokens;
    const int32_t *stop; /* ids that end the text (EOS; not emitted); NULL: none */
    int nstop;
    /* the ids a token is chosen from, [0, V): the tokenizer's, so that a padded vocabulary's extra rows
     * (nanoGPT's 50304) never come out */
    int V;
};

struct dt_gen_result {
    int prompt_tokens, new_tokens;
    bool stopped;                /* at a stop token */
    double prefill_s, decode_s;  /* the prompt's forward; the new tokens' after the first */
    /* the new tokens' log-probability under the model: each one's log-softmax over the ids it was
     * chosen from (o->V), of the raw logits (temperature 1, before top-k and top-p), summed; it
     * changes with the last bit of a logit, so two runs of one model compare by it */
    double logprob;
};

/* Called with every new token as it is chosen; an error ends generation with it. */
typedef dt_status_t (*dt_gen_emit)(void *ctx, int32_t id);

/* Generate from m (its decode; created for at least n + max_tokens positions, else the text ends
 * where its positions do) after the n prompt ids (n >= 1), whose model has vocabulary model_V >= o->V;
 * the cache is freed at the end. */
dt_status_t dt_generate(struct dt_model *m, int model_V, const int32_t *prompt, int n, const struct dt_gen_opts *o,
                        dt_gen_emit emit, void *ctx, struct dt_gen_result *r);

#endif
