/* generate.c - see generate.h. */
#include <math.h>
#include <stdlib.h>
#include "core/clock.h"
#include "core/error.h"
#include "model/generate.h"

/* log-softmax of logits[0, V) at id, in double */
static double log_prob(const float *logits, int V, int32_t id)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, logits[i]);
    for (int i = 0; i < V; i++) sum += exp(logits[i] - mx);
    return logits[id] - mx - log(sum);
}

static bool is_stop(const struct dt_gen_opts *o, int32_t id)
{
    for (int i = 0; i < o->nstop; i++)
        if (o->stop[i] == id) return true;
    return false;
}

dt_status_t dt_generate(struct dt_model *m, int model_V, const int32_t *prompt, int n, const struct dt_gen_opts *o,
                        dt_gen_emit emit, void *ctx, struct dt_gen_result *r)
{
    *r = (struct dt_gen_result){.prompt_tokens = n};
    if (!m->iface.decode)
        return dt_error(DT_ERR_CONFIG, "dtrun: error: this model has no text to generate (an mlp)");
    for (int i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= model_V)
            return dt_error(DT_ERR_USAGE, "dtrun: error: prompt token %d is id %d, outside the model's vocabulary of "
                            "%d", i, prompt[i], model_V);
    float *logits = malloc((size_t)model_V * sizeof *logits);
    struct dt_sampler s = {0};
    dt_status_t rc = logits ? dt_sampler_init(&s, &o->sampler, o->V)
                            : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for %d logits", model_V);
    double t0 = dt_now(), t1 = t0;
    int pos;
    int32_t tok = 0;
    if (rc == DT_SUCCESS) rc = m->iface.decode(m, prompt, n, 0, logits);
    pos = n;
    while (rc == DT_SUCCESS && r->new_tokens < o->max_tokens) {
        if (r->new_tokens == 0) t1 = dt_now();
        tok = dt_sampler_next(&s, logits);
        if (is_stop(o, tok)) {
            r->stopped = true;
            break;
        }
        r->new_tokens++;
        r->logprob += log_prob(logits, o->V, tok);
        rc = emit(ctx, tok);
        if (rc != DT_SUCCESS || r->new_tokens == o->max_tokens) break;
        rc = m->iface.decode(m, &tok, 1, pos++, logits);
    }
    dt_status_t done = m->k->synchronize(m->kc, -1);
    if (rc == DT_SUCCESS) rc = done;
    r->prefill_s = t1 - t0;
    r->decode_s = dt_now() - t1;
    m->iface.decode_end(m);
    dt_sampler_free(&s);
    free(logits);
    return rc;
}
