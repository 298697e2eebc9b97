/* fp8.c - see fp8.h. */
#include <stdlib.h>
#include "core/error.h"
#include "precision/fp8.h"

dt_status_t dt_fp8_open(struct dt_fp8_state *f, const struct dt_fp8_recipe *r, int n_linear,
                        const struct dt_kernels *k, struct dt_kctx *kc)
{
    *f = (struct dt_fp8_state){.n = 3 * n_linear, .len = r->current ? 0 : r->history_len, .r = *r, .k = k, .kc = kc};
    if (k->fp8_supported) DT_CHECK(k->fp8_supported(kc));
    size_t n = (size_t)f->n;
    f->scale = k->alloc(kc, n * sizeof(float));
    f->saturated = k->alloc(kc, sizeof(float));
    if (f->len) f->hist = k->alloc(kc, (size_t)f->len * n * sizeof(float));
    if (!f->scale || !f->saturated || (f->len && !f->hist)) {
        dt_fp8_close(f);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for fp8-mixed's scaling state (%d tensors, a "
                        "history of %d)\n  hint: lower compute.fp8.amax_history_len", 3 * n_linear, r->history_len);
    }
    float *one = malloc(n * sizeof(float));
    if (!one) {
        dt_fp8_close(f);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for fp8-mixed's scaling state");
    }
    for (size_t i = 0; i < n; i++) one[i] = 1.0f;
    k->copy(kc, f->scale, one, n * sizeof(float), DT_COPY_TO_DEVICE);
    free(one);
    f->meta = (struct dt_fp8_meta){f->scale, f->hist, r->grad, r->current};
    f->quiet = (struct dt_fp8_meta){f->scale, NULL, r->grad, r->current};
    return DT_SUCCESS;
}

void dt_fp8_close(struct dt_fp8_state *f)
{
    if (f->scale) f->k->free(f->kc, f->scale);
    if (f->saturated) f->k->free(f->kc, f->saturated);
    if (f->hist) f->k->free(f->kc, f->hist);
    f->scale = f->saturated = f->hist = NULL;
}

float *dt_fp8_amax(struct dt_fp8_state *f, size_t *n)
{
    *n = f->hist ? (size_t)f->n : 0;
    return f->hist;
}

void dt_fp8_update(struct dt_fp8_state *f)
{
    if (f->hist)
        f->k->fp8_update(f->kc, f->hist, f->scale, f->n, f->len, f->r.most_recent, f->r.margin, f->r.grad,
                         f->saturated);
}

int64_t dt_fp8_take_saturated(struct dt_fp8_state *f)
{
    float s = 0;
    f->k->copy(f->kc, &s, f->saturated, sizeof s, DT_COPY_TO_HOST);
    if (s != 0) f->k->zero(f->kc, f->saturated, sizeof(float));
    return (int64_t)s;
}

void dt_fp8_jump(struct dt_fp8_state *f, float factor)
{
    size_t n = (size_t)f->n;
    float *s = malloc(n * sizeof(float));
    if (!s) return;
    f->k->copy(f->kc, s, f->scale, n * sizeof(float), DT_COPY_TO_HOST);
    for (size_t i = 0; i < n; i++) s[i] *= factor;
    f->k->copy(f->kc, f->scale, s, n * sizeof(float), DT_COPY_TO_DEVICE);
    free(s);
}

size_t dt_fp8_floats(const struct dt_fp8_state *f) { return (size_t)f->n * (1 + (size_t)f->len); }

void dt_fp8_save(struct dt_fp8_state *f, float *host)
{
    size_t n = (size_t)f->n;
    f->k->copy(f->kc, host, f->scale, n * sizeof(float), DT_COPY_TO_HOST);
    if (f->hist) f->k->copy(f->kc, host + n, f->hist, (size_t)f->len * n * sizeof(float), DT_COPY_TO_HOST);
}

void dt_fp8_restore(struct dt_fp8_state *f, const float *host)
{
    size_t n = (size_t)f->n;
    f->k->copy(f->kc, f->scale, host, n * sizeof(float), DT_COPY_TO_DEVICE);
    if (f->hist) f->k->copy(f->kc, f->hist, host + n, (size_t)f->len * n * sizeof(float), DT_COPY_TO_DEVICE);
}
