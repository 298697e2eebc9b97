/* generate_cmd.c - see generate_cmd.h. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/hf.h"
#include "config/config.h"
#include "config/resolve.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "model/generate.h"
#include "precision/policy.h"
#include "tokenize/tokenizer.h"
#include "train/generate_cmd.h"
#include "train/shapes.h"

#define LLMC_MAGIC 20240326

enum kind { SRC_CKPT, SRC_HF, SRC_LLMC };

/* What SOURCE holds: the model's shape, where its weights and tokenizer are, its precision. */
struct source {
    enum kind kind;
    char path[4096]; /* the checkpoint chosen, the directory, the file */
    bool llama;
    struct dt_gpt_config gc;
    struct dt_llama_config lc;
    int positions; /* the most the model takes */
    struct dt_config cfg;
    bool have_cfg;
    struct dt_ckpt *ckpt;
    char tokenizer[4096]; /* "": none */
};

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The run's config.yaml beside a checkpoint: in the run.dir given, or two levels up (run.dir/ckpt/step-N). */
static bool run_config(const char *arg, const char *ckpt, char *out, size_t n)
{
    char buf[4096];
    snprintf(out, n, "%s/config.yaml", arg);
    if (is_file(out)) return true;
    snprintf(buf, sizeof buf, "%s", ckpt);
    for (int up = 0; up < 2; up++) {
        snprintf(buf, sizeof buf, "%s", dirname(buf));
        snprintf(out, n, "%s/config.yaml", buf);
        if (is_file(out)) return true;
    }
    return false;
}

/* cfg from yaml (NULL: the defaults) and the overrides, resolved for one CPU process */
static dt_status_t load_config(struct source *s, const char *yaml, int nover, char **over)
{
    DT_CHECK(dt_config_init(&s->cfg));
    s->have_cfg = true;
    DT_CHECK(dt_config_load(&s->cfg, NULL, yaml, nover, over));
    struct dt_geometry geo = {.ranks = 1};
    snprintf(geo.source, sizeof geo.source, "dtrun generate");
    return dt_config_resolve(&s->cfg, &geo);
}

static dt_status_t open_ckpt(struct source *s, const char *arg, const char *precision)
{
    DT_CHECK(dt_ckpt_resolve_arg(arg, s->path, sizeof s->path));
    DT_CHECK(dt_ckpt_open(s->path, true, &s->ckpt));
    const struct dt_run_state *st = dt_ckpt_state(s->ckpt);
    if (!dt_ckpt_shape(st, &s->gc, &s->lc, &s->llama))
        return dt_error(DT_ERR_USAGE, "%s: error: the checkpoint holds %s, which generates no text (a GPT-2 or a "
                        "Llama does)", s->path, st->model);
    s->positions = s->llama ? (s->lc.max_position ? s->lc.max_position : s->lc.max_seq_len) : s->gc.max_seq_len;
    char yaml[4200], prec[64], *over[] = {"compute.device=cpu", prec};
    snprintf(prec, sizeof prec, "compute.precision=%s", precision ? precision : st->precision);
    bool found = run_config(arg, s->path, yaml, sizeof yaml);
    dt_status_t rc = load_config(s, found ? yaml : NULL, 2, over);
    if (rc != DT_SUCCESS && found) {
        /* a run's config that no longer loads (a file it named is gone) still has a checkpoint */
        DT_WARN("%s: %s; generating without it (the tokenizer must then be given: --tokenizer)", yaml, dt_error_msg());
        dt_config_free(&s->cfg);
        rc = load_config(s, NULL, 2, over);
    }
    return rc;
}

/* A Hugging Face directory or an llm.c file: the config model.init_from makes of it, as a run's */
static dt_status_t open_init_from(struct source *s, enum kind kind, const char *path, const char *precision)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    s->kind = kind;
    char from[4200], prec[64], *over[] = {"compute.device=cpu", kind == SRC_HF ? "model.type=llama" : "model.type=gpt",
                                          from, prec};
    snprintf(from, sizeof from, "model.init_from=%s", path);
    snprintf(prec, sizeof prec, "compute.precision=%s", precision ? precision : "32");
    DT_CHECK(load_config(s, NULL, 4, over));
    if (kind == SRC_HF) {
        s->llama = true;
        dt_shapes_llama(&s->cfg, DT_F32, &s->lc);
        s->positions = s->lc.max_position;
        return DT_SUCCESS;
    }
    dt_shapes_gpt(&s->cfg, DT_F32, &s->gc);
    int32_t h[3] = {0};
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(h, sizeof h, 1, f) == 1;
    if (f) fclose(f);
    if (!ok) return dt_error(DT_ERR_DATA, "%s: error: cannot read llm.c's header: %s", path, strerror(errno));
    s->positions = s->gc.max_seq_len = h[2]; /* every row of the file's positions */
    return DT_SUCCESS;
}

static dt_status_t open_source(struct source *s, const struct dt_generate_opts *o)
{
    const char *arg = o->source;
    struct stat st;
    char cj[4200];
    snprintf(cj, sizeof cj, "%s/config.json", arg);
    if (stat(arg, &st) != 0)
        return dt_error(DT_ERR_USAGE, "%s: error: %s\n  hint: SOURCE is a checkpoint (step-<N>/), a checkpoint.dir, "
                        "a run.dir, a Hugging Face Llama directory (config.json and safetensors) or llm.c's GPT-2 "
                        "model file", arg, strerror(errno));
    if (S_ISDIR(st.st_mode) && is_file(cj)) DT_CHECK(open_init_from(s, SRC_HF, arg, o->precision));
    else if (S_ISREG(st.st_mode)) {
        int32_t magic = 0;
        FILE *f = fopen(arg, "rb");
        if (f && fread(&magic, sizeof magic, 1, f) != 1) magic = 0;
        if (f) fclose(f);
        if (magic == LLMC_MAGIC) DT_CHECK(open_init_from(s, SRC_LLMC, arg, o->precision));
        else DT_CHECK(open_ckpt(s, arg, o->precision)); /* a checkpoint.dir's latest file */
    } else {
        DT_CHECK(open_ckpt(s, arg, o->precision));
    }
    /* the tokenizer: the command's, else the run's (the Hugging Face directory's: model.tokenizer's auto) */
    const char *t = o->tokenizer ? o->tokenizer : s->cfg.model.tokenizer;
    if (t) snprintf(s->tokenizer, sizeof s->tokenizer, "%s", t);
    return DT_SUCCESS;
}

/* ---- the weights */

static dt_status_t ckpt_fill(void *ctx, size_t off, size_t n, float *dst) { return dt_ckpt_read(ctx, 0, off, n, dst); }

static dt_status_t build_model(struct source *s, const struct dt_kernels *k, struct dt_kctx *kc, int T,
                               const struct dt_prec_policy *p, struct dt_model **m)
{
    if (s->llama) {
        s->lc.activations = p->compute;
        s->lc.max_seq_len = T;
        s->lc.activation_checkpointing = false;
        DT_CHECK(dt_llama_create(&s->lc, k, kc, 1, T, m));
    } else {
        s->gc.activations = p->compute;
        s->gc.activation_checkpointing = false;
        s->gc.fuse_gelu = true;
        DT_CHECK(dt_gpt_create(&s->gc, k, kc, 1, T, m));
    }
    DT_CHECK(dt_model_own_weights(*m));
    struct dt_param_source src = {.fill = ckpt_fill, .ctx = s->ckpt};
    if (s->kind == SRC_HF) DT_CHECK(dt_hf_llama_source(*m, s->path, &src));
    else if (s->kind == SRC_LLMC) DT_CHECK(dt_gpt_llmc_source(*m, s->path, &src));
    else if ((*m)->nparams != (size_t)dt_ckpt_state(s->ckpt)->nparams)
        return dt_error(DT_ERR_CKPT, "%s: error: %lld parameters, but a %s has %zu", s->path,
                        (long long)dt_ckpt_state(s->ckpt)->nparams, dt_ckpt_state(s->ckpt)->model, (*m)->nparams);
    dt_status_t rc = dt_model_fill_own(*m, &src);
    dt_source_close(&src);
    DT_CHECK(rc);
    /* training's forward reads every parameter in the compute type (the strategies' working copy:
     * norms and embeddings too), so generation does: a sample during training is what generate
     * makes of that step's checkpoint, bit for bit; --precision 32-true keeps them fp32 */
    dt_model_weights_ready(*m, p->compute != DT_F32);
    return DT_SUCCESS;
}

/* ---- the prompt */

static dt_status_t read_prompt(const struct dt_generate_opts *o, char **text, size_t *len)
{
    if (!o->prompt_file) {
        *text = strdup(o->prompt ? o->prompt : "");
        *len = strlen(o->prompt ? o->prompt : "");
        return *text ? DT_SUCCESS : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    }
    FILE *f = fopen(o->prompt_file, "rb");
    if (!f) return dt_error(DT_ERR_USAGE, "%s: error: cannot read the prompt: %s", o->prompt_file, strerror(errno));
    size_t cap = 4096, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    if (!b) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", o->prompt_file);
    b[n] = 0;
    *text = b;
    *len = n;
    return DT_SUCCESS;
}

/* The prompt's ids: --prompt-ids as given; text after the tokenizer's document token (as prepare
 * starts every document), or its bytes for a byte-level model. */
static dt_status_t prompt_ids(const struct dt_generate_opts *o, dt_tokenizer_t tok, struct dt_tok_ids *ids)
{
    if (o->prompt_ids) {
        const char *p = o->prompt_ids;
        while (*p) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ','))
                return dt_error(DT_ERR_USAGE, "--prompt-ids '%s': give token ids separated by commas, e.g. 50256,464",
                                o->prompt_ids);
            if (ids->n == ids->cap) {
                size_t cap = ids->cap ? 2 * ids->cap : 64;
                uint32_t *nv = realloc(ids->v, cap * sizeof *nv);
                if (!nv) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
                ids->v = nv, ids->cap = cap;
            }
            ids->v[ids->n++] = (uint32_t)v;
            p = *end ? end + 1 : end;
        }
        return DT_SUCCESS;
    }
    char *text;
    size_t len;
    DT_CHECK(read_prompt(o, &text, &len));
    dt_status_t rc = DT_SUCCESS;
    if (!tok) {
        ids->v = malloc((len + 1) * sizeof *ids->v);
        if (!ids->v) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
        for (size_t i = 0; rc == DT_SUCCESS && i < len; i++) ids->v[ids->n++] = (unsigned char)text[i];
        ids->cap = len + 1;
    } else {
        int32_t doc = dt_tokenizer_doc_token(tok);
        dt_tok_ctx_t c = dt_tok_ctx_new(tok);
        if (!c) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the tokenizer");
        if (rc == DT_SUCCESS && doc >= 0) {
            ids->v = malloc(64 * sizeof *ids->v);
            if (!ids->v) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
            else ids->v[ids->n++] = (uint32_t)doc, ids->cap = 64;
        }
        if (rc == DT_SUCCESS) rc = dt_tokenizer_encode(c, text, len, ids);
        dt_tok_ctx_free(c);
    }
    free(text);
    return rc;
}

/* ---- the output */

struct emitter {
    FILE *out;
    bool ids;
    dt_tokenizer_t tok;
    struct dt_tok_stream stream;
    int n;
};

static dt_status_t emit(void *ctx, int32_t id)
{
    struct emitter *e = ctx;
    if (e->ids) {
        fprintf(e->out, "%s%d", e->n++ ? " " : "", id);
    } else if (!e->tok) {
        fputc(id & 0xff, e->out);
    } else {
        char buf[1024];
        int k = dt_tok_stream_feed(&e->stream, (uint32_t)id, buf, sizeof buf);
        if (k > 0) fwrite(buf, 1, (size_t)k, e->out);
    }
    fflush(e->out);
    return ferror(e->out) ? dt_error(DT_ERR_SYSTEM, "dtrun generate: error: writing the text failed: %s",
                                     strerror(errno))
                          : DT_SUCCESS;
}

/* the tokens that end a text: GPT-2's <|endoftext|>, Llama 3's <|end_of_text|> and <|eot_id|>, </s> */
static int stop_ids(dt_tokenizer_t tok, int32_t *out)
{
    static const char *const names[] = {"<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "</s>"};
    int n = 0;
    for (size_t i = 0; tok && i < sizeof names / sizeof names[0]; i++) {
        int32_t id = dt_tokenizer_token_id(tok, names[i]);
        if (id >= 0) out[n++] = id;
    }
    return n;
}

static dt_status_t choose_device(const char *device, int *ordinal)
{
    bool cpu = !strcmp(device, "cpu"), cuda = !strcmp(device, "cuda");
    if (!cpu && !cuda && strcmp(device, "auto"))
        return dt_error(DT_ERR_USAGE, "--device '%s': use cpu, cuda or auto (a GPU when there is one)", device);
    *ordinal = -1;
    if (cpu) return DT_SUCCESS;
    int gpus = 0;
    char why[256] = "";
    DT_CHECK(dt_backend_gpus(cuda, &gpus, why, sizeof why));
    if (cuda && gpus == 0)
        return dt_error(DT_ERR_CONFIG, "dtrun generate: error: --device cuda, but this process can use no GPU (%s)", why);
    if (gpus > 0) *ordinal = 0;
    return DT_SUCCESS;
}

dt_status_t dt_generate_main(const struct dt_generate_opts *o, FILE *out)
{
    struct source s = {.kind = SRC_CKPT};
    struct dt_tok_ids ids = {0};
    dt_tokenizer_t tok = NULL;
    struct dt_model *m = NULL;
    struct dt_kctx *kc = NULL;
    const struct dt_kernels *k = NULL;
    struct dt_prec_policy prec;
    int ordinal = -1, V = 0;
    dt_status_t rc = open_source(&s, o);
    if (rc == DT_SUCCESS) rc = dt_precision_from_config(&s.cfg, &prec);
    if (rc == DT_SUCCESS) V = s.llama ? s.lc.vocab_size : s.gc.vocab_size;
    if (rc == DT_SUCCESS && s.tokenizer[0]) rc = dt_tokenizer_load(s.tokenizer, &tok);
    if (rc == DT_SUCCESS && !tok && V != 256 && !(o->prompt_ids && o->ids))
        rc = dt_error(DT_ERR_USAGE, "%s: error: no tokenizer for this model's %d ids (only a vocabulary of 256 is "
                      "read as bytes)\n  hint: --tokenizer PATH (the tokenizer.json its data was prepared with), or "
                      "--prompt-ids with --ids", s.path, V);
    if (rc == DT_SUCCESS && tok && dt_tokenizer_vocab_size(tok) > V)
        rc = dt_error(DT_ERR_USAGE, "%s: error: the tokenizer %s has %d ids, more than the model's vocabulary of %d\n"
                      "  hint: give the tokenizer the model was trained with (--tokenizer)", s.path, s.tokenizer,
                      dt_tokenizer_vocab_size(tok), V);
    if (rc == DT_SUCCESS) rc = prompt_ids(o, tok, &ids);
    if (rc == DT_SUCCESS && ids.n == 0)
        rc = dt_error(DT_ERR_USAGE, "dtrun generate: error: the prompt is empty and this tokenizer has no document "
                      "token to start from\n  hint: give --prompt TEXT");
    if (rc == DT_SUCCESS && (int)ids.n > s.positions)
        rc = dt_error(DT_ERR_USAGE, "dtrun generate: error: the prompt is %zu tokens, but the model takes at most %d "
                      "positions", ids.n, s.positions);
    int n = (int)ids.n, max_tokens = o->max_tokens;
    if (rc == DT_SUCCESS && n + max_tokens - 1 > s.positions) {
        max_tokens = s.positions - n + 1;
        DT_WARN("the model takes %d positions: at most %d new tokens after the prompt's %d", s.positions, max_tokens, n);
    }
    if (rc == DT_SUCCESS) rc = choose_device(o->device, &ordinal);
    if (rc == DT_SUCCESS) rc = dt_kernels_choose(ordinal, &k);
    if (rc == DT_SUCCESS && k->init) k->init();
    if (rc == DT_SUCCESS) rc = k->ctx_create(ordinal, &kc);
    int T = n + max_tokens - 1;
    if (rc == DT_SUCCESS) rc = build_model(&s, k, kc, T, &prec, &m);
    struct dt_sampler_opts so = o->sampler;
    if (!o->seeded) so.seed = (uint64_t)time(NULL);
    int32_t stop[4];
    struct dt_gen_opts g = {.sampler = so, .max_tokens = max_tokens, .stop = stop,
                            .nstop = o->ignore_eos ? 0 : stop_ids(tok, stop), .V = tok ? dt_tokenizer_vocab_size(tok) : V};
    struct emitter e = {.out = out, .ids = o->ids, .tok = tok};
    if (tok) dt_tok_stream_init(&e.stream, tok, true);
    struct dt_gen_result r = {0};
    if (rc == DT_SUCCESS) {
        char dev[256];
        k->describe(kc, dev, sizeof dev, prec.compute);
        DT_INFO(DT_SUB_TRAIN, "generate: %s (%s, %s), %s; prompt %d tokens; temperature %g, top-k %d, top-p %g, seed "
                "%llu", s.path, s.llama ? "llama" : "gpt", prec.name, dev, n, (double)so.temperature, so.top_k,
                (double)so.top_p, (unsigned long long)so.seed);
        rc = dt_generate(m, V, (const int32_t *)ids.v, n, &g, emit, &e, &r);
    }
    if (rc == DT_SUCCESS && tok && !o->ids) {
        char buf[64];
        int k2 = dt_tok_stream_finish(&e.stream, buf, sizeof buf);
        if (k2 > 0) fwrite(buf, 1, (size_t)k2, out);
    }
    if (rc == DT_SUCCESS) {
        fputc('\n', out);
        fflush(out);
        DT_INFO(DT_SUB_TRAIN, "generate: %d new tokens%s, log-probability %.9g; prompt %d tokens in %.3f s, then %.1f "
                "tokens/s", r.new_tokens, r.stopped ? ", stopped at the end-of-text token" : "", r.logprob, n, r.prefill_s,
                r.new_tokens > 1 && r.decode_s > 0 ? (r.new_tokens - 1) / r.decode_s : 0.0);
    }
    dt_model_free(m);
    if (kc) k->ctx_destroy(kc);
    dt_tokenizer_free(tok);
    dt_tok_ids_free(&ids);
    if (s.ckpt) dt_ckpt_close(s.ckpt);
    if (s.have_cfg) dt_config_free(&s.cfg);
    return rc;
}
