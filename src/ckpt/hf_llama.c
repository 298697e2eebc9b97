/* hf_llama.c - see hf.h: a Llama's weights in Hugging Face's LlamaForCausalLM layout. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "config/ynode.h"
#include "core/error.h"
#include "core/numfmt.h"

const char *dt_hf_torch_dtype(enum dt_dtype t)
{
    return t == DT_BF16 ? "bfloat16" : t == DT_F16 ? "float16" : "float32";
}

/* what does not fit, one line each */
struct mismatch {
    char text[2048];
    size_t len;
    int n;
};

static void line(struct mismatch *mm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(struct mismatch *mm, const char *fmt, ...)
{
    if (mm->len < sizeof mm->text) {
        va_list ap;
        va_start(ap, fmt);
        mm->len += (size_t)vsnprintf(mm->text + mm->len, sizeof mm->text - mm->len, fmt, ap);
        va_end(ap);
    }
    mm->n++;
}

/* the open checkpoint, and the model whose views name its tensors */
struct hf_source {
    const struct dt_model *m;
    struct dt_st_set *st;
    const struct dt_st_tensor **t; /* each view's tensor */
    uint64_t *bytes_read;
};

static dt_status_t hf_fill(void *ctx, size_t off, size_t n, float *dst)
{
    struct hf_source *h = ctx;
    for (int i = 0; i < h->m->nviews; i++) {
        const struct dt_param_view *v = &h->m->views[i];
        size_t lo = v->offset > off ? v->offset : off, hi = v->offset + v->numel < off + n ? v->offset + v->numel : off + n;
        if (hi <= lo) continue;
        DT_CHECK(dt_st_read_range_f32(h->st, h->t[i], (int64_t)(lo - v->offset), hi - lo, dst + (lo - off)));
    }
    *h->bytes_read = dt_st_bytes_read(h->st);
    return DT_SUCCESS;
}

static void hf_close(void *ctx)
{
    struct hf_source *h = ctx;
    dt_st_close(h->st);
    free(h->t);
    free(h);
}

dt_status_t dt_hf_llama_source(const struct dt_model *m, const char *dir, struct dt_param_source *s)
{
    struct hf_source *h = calloc(1, sizeof *h);
    *s = (struct dt_param_source){.fill = hf_fill, .close = hf_close, .ctx = h};
    snprintf(s->what, sizeof s->what, "model.init_from %s", dir);
    if (h) h->t = calloc((size_t)m->nviews, sizeof *h->t);
    if (!h || !h->t) {
        free(h);
        s->ctx = NULL, s->close = NULL;
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", dir);
    }
    h->m = m;
    h->bytes_read = &s->bytes_read;
    dt_status_t rc = dt_st_open(dir, &h->st);
    /* every tensor of the model present with its shape; nothing else but a tied head's copy */
    struct mismatch mm = {.len = 0};
    for (int i = 0; i < m->nviews && rc == DT_SUCCESS; i++) {
        const struct dt_param_view *v = &m->views[i];
        const struct dt_st_tensor *t = h->t[i] = dt_st_find(h->st, v->name);
        char want[64], got[64];
        snprintf(want, sizeof want, v->ndim == 2 ? "[%d, %d]" : "[%d]", v->shape[0], v->shape[1]);
        if (!t) {
            line(&mm, "\n  %s: absent from the checkpoint, %s in the model", v->name, want);
            continue;
        }
        bool same = t->ndim == v->ndim && t->shape[0] == v->shape[0] && (v->ndim == 1 || t->shape[1] == v->shape[1]);
        if (same) continue;
        int o = snprintf(got, sizeof got, "[");
        for (int d = 0; d < t->ndim && o < (int)sizeof got; d++)
            o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        if (o < (int)sizeof got) snprintf(got + o, sizeof got - (size_t)o, "]");
        line(&mm, "\n  %s: %s in the checkpoint, %s in the model", v->name, got, want);
    }
    for (int i = 0; rc == DT_SUCCESS && i < dt_st_count(h->st); i++) {
        const char *name = dt_st_at(h->st, i)->name;
        bool ours = false;
        for (int j = 0; j < m->nviews && !ours; j++) ours = !strcmp(m->views[j].name, name);
        /* a tied head saved anyway, and the rotary inverse frequencies older transformers saved */
        if (!ours && strcmp(name, "lm_head.weight") && !strstr(name, "rotary_emb.inv_freq"))
            line(&mm, "\n  %s: in the checkpoint, not a parameter of the model", name);
    }
    if (rc == DT_SUCCESS && mm.n)
        rc = dt_error(DT_ERR_CONFIG, "%s: error: %d tensor%s of the checkpoint do%s not fit the model:%s\n"
                      "  hint: the names and shapes are Hugging Face LlamaForCausalLM's; check model.* against "
                      "config.json", dir, mm.n, mm.n == 1 ? "" : "s", mm.n == 1 ? "es" : "", mm.text);
    if (rc != DT_SUCCESS) dt_source_close(s);
    return rc;
}

dt_status_t dt_hf_save_llama(const struct dt_model *m, const float *params, const char *dir, enum dt_dtype dtype,
                             uint64_t shard_bytes)
{
    const struct dt_llama_config *c = dt_llama_config_of(m);
    struct dt_st_out *t = calloc((size_t)m->nviews, sizeof *t);
    if (!t) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    for (int i = 0; i < m->nviews; i++) {
        const struct dt_param_view *v = &m->views[i];
        t[i] = (struct dt_st_out){.name = v->name, .ndim = v->ndim, .shape = {v->shape[0], v->shape[1]},
                                  .data = params + v->offset};
    }
    dt_status_t rc = dt_st_write(dir, t, m->nviews, dtype, shard_bytes);
    free(t);
    DT_CHECK(rc);
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot write: %s", tmp, strerror(errno));
    int hs = c->n_embd / c->n_head;
    char scaling[256] = "null", v[4][32], eps[32], theta[32];
    const struct dt_rope_scaling *sc = &c->rope_scaling;
    if (sc->factor > 0)
        snprintf(scaling, sizeof scaling, "{\"rope_type\": \"llama3\", \"factor\": %s, \"low_freq_factor\": %s, "
                 "\"high_freq_factor\": %s, \"original_max_position_embeddings\": %s}", dt_fmt_float(sc->factor, v[0], 32),
                 dt_fmt_float(sc->low_freq_factor, v[1], 32), dt_fmt_float(sc->high_freq_factor, v[2], 32),
                 dt_fmt_float(sc->original_max_position, v[3], 32));
    fprintf(f,
            "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
            "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
            "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
            "  \"rope_theta\": %s,\n  \"rope_scaling\": %s,\n  \"hidden_act\": \"silu\",\n"
            "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\"\n}\n",
            c->n_embd, c->intermediate_size, c->n_layer, c->n_head, c->n_kv_head, hs, c->vocab_size,
            c->max_position ? c->max_position : c->max_seq_len,
            dt_fmt_float(c->rms_eps, eps, sizeof eps), dt_fmt_float(c->rope_theta, theta, sizeof theta), scaling, c->tie_embeddings ? "true" : "false",
            dt_hf_torch_dtype(dtype));
    bool ok = fflush(f) == 0 && !ferror(f);
    int e = errno;
    if (fclose(f) != 0) ok = false;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return dt_error(DT_ERR_SYSTEM, "%s: error: writing failed: %s", path, strerror(ok ? errno : e));
    }
    return DT_SUCCESS;
}
