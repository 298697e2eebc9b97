/*
 * samples.c - events.sample_interval (#40): every N steps, and after the last, text generated from the
 * current weights as llm.c's train_gpt2 does (temperature 1, no top-k or top-p, the same seed 1337 every
 * time, so samples differ only as the weights do), starting from events.sample_prompt after the
 * tokenizer's document token, or from that token alone. Every rank runs the generation, since a
 * sharded model's units are gathered collectively as the forward reaches them; the ranks hold the
 * same weights, compute the same logits and draw the same tokens; rank 0 prints the text and sends
 * it as a sample event. The key/value cache lives only while a sample is made.
 */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/log.h"
#include "model/generate.h"
#include "train/trainer_impl.h"

/* llm.c's sample_rng_state, reset at every sample */
#define SAMPLE_SEED 1337

dt_status_t dt_train_samples_open(struct trainer *tr)
{
    const struct dt_config *cfg = tr->cfg;
    if (tr->sample_every <= 0) return DT_SUCCESS;
    if (cfg->model.type == DT_MODEL_MLP)
        return dt_error(DT_ERR_CONFIG, "events.sample_interval: error: an mlp generates no text\n  hint: set "
                        "events.sample_interval: 0ba");
    const char *t = cfg->model.tokenizer, *prompt = cfg->events.sample_prompt ? cfg->events.sample_prompt : "";
    if (t) DT_CHECK(dt_tokenizer_load(t, &tr->sample_tok));
    else if (cfg->model.vocab_size != 256)
        return dt_error(DT_ERR_CONFIG, "events.sample_interval: error: no tokenizer to read this model's %lld ids as "
                        "text (only a vocabulary of 256 is read as bytes)\n  hint: set model.tokenizer (the "
                        "tokenizer.json the shards were prepared with)", (long long)cfg->model.vocab_size);
    size_t len = strlen(prompt);
    struct dt_tok_ids ids = {0};
    dt_status_t rc = DT_SUCCESS;
    tr->sample_prompt = malloc((len + 1) * sizeof *tr->sample_prompt);
    if (!tr->sample_prompt) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    if (!tr->sample_tok) {
        for (size_t i = 0; i < len; i++) tr->sample_prompt[tr->sample_n++] = (unsigned char)prompt[i];
    } else {
        int32_t doc = dt_tokenizer_doc_token(tr->sample_tok);
        dt_tok_ctx_t c = dt_tok_ctx_new(tr->sample_tok);
        rc = c ? dt_tokenizer_encode(c, prompt, len, &ids) : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
        dt_tok_ctx_free(c);
        int32_t *p = rc == DT_SUCCESS ? realloc(tr->sample_prompt, (ids.n + 1) * sizeof *p) : NULL;
        if (rc == DT_SUCCESS && !p) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
        if (p) {
            tr->sample_prompt = p;
            if (doc >= 0) p[tr->sample_n++] = doc;
            for (size_t i = 0; i < ids.n; i++) p[tr->sample_n++] = (int32_t)ids.v[i];
        }
        dt_tok_ids_free(&ids);
    }
    if (rc == DT_SUCCESS && tr->sample_n == 0)
        rc = dt_error(DT_ERR_CONFIG, "events.sample_prompt: error: empty, and %s has no document token to start "
                      "from\n  hint: set events.sample_prompt",
                      tr->sample_tok ? dt_tokenizer_path(tr->sample_tok) : "a byte-level model");
    if (rc == DT_SUCCESS && tr->sample_n >= tr->T)
        rc = dt_error(DT_ERR_CONFIG, "events.sample_prompt: error: %d tokens, but model.seq_len %d leaves no room "
                      "for a sample", tr->sample_n, tr->T);
    return rc;
}

struct collected {
    int32_t *ids;
    int n;
};

static dt_status_t collect(void *ctx, int32_t id)
{
    struct collected *c = ctx;
    c->ids[c->n++] = id;
    return DT_SUCCESS;
}

dt_status_t dt_train_sample(struct trainer *tr, int64_t step)
{
    const struct dt_config *cfg = tr->cfg;
    int V = (int)cfg->model.vocab_size, room = tr->T - tr->sample_n + 1;
    int max = cfg->events.sample_tokens < room ? (int)cfg->events.sample_tokens : room;
    int32_t stop[1] = {tr->sample_tok ? dt_tokenizer_doc_token(tr->sample_tok) : -1};
    struct dt_gen_opts o = {.sampler = {.temperature = 1, .top_p = 1, .seed = SAMPLE_SEED}, .max_tokens = max,
                            .stop = stop, .nstop = stop[0] >= 0,
                            .V = tr->sample_tok ? dt_tokenizer_vocab_size(tr->sample_tok) : V};
    struct collected c = {malloc((size_t)max * sizeof *c.ids), 0};
    if (!c.ids) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for a sample");
    struct dt_gen_result r;
    dt_status_t rc = dt_generate(tr->model, V, tr->sample_prompt, tr->sample_n, &o, collect, &c, &r);
    if (rc == DT_SUCCESS && tr->rank == 0) {
        size_t len = 0;
        char *text = NULL, *prompt = NULL;
        if (tr->sample_tok) {
            text = dt_tokenizer_decode(tr->sample_tok, (const uint32_t *)c.ids, (size_t)c.n, true, &len);
            prompt = cfg->events.sample_prompt ? strdup(cfg->events.sample_prompt) : strdup("");
        } else if ((text = malloc(3 * (size_t)c.n + 1)) &&
                   (prompt = strdup(cfg->events.sample_prompt ? cfg->events.sample_prompt : ""))) {
            for (int i = 0; i < c.n; i++) {
                if (c.ids[i]) text[len++] = (char)c.ids[i];
                else memcpy(text + len, "\xef\xbf\xbd", 3), len += 3; /* U+FFFD: NUL ends a C string */
            }
            text[len] = 0;
        }
        rc = text && prompt ? dt_events_sample(&tr->events, step, prompt, text, c.n, r.logprob)
                            : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for a sample's text");
        free(text);
        free(prompt);
    }
    free(c.ids);
    return rc;
}

void dt_train_samples_close(struct trainer *tr)
{
    dt_tokenizer_free(tr->sample_tok);
    free(tr->sample_prompt);
    tr->sample_tok = NULL;
    tr->sample_prompt = NULL;
}
