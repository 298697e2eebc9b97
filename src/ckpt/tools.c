/*
 * tools.c - `dtrun ckpt inspect|consolidate|export` (ckpt.h): a checkpoint
 * read whole, whatever strategy and world wrote it, and turned into one
 * single-rank checkpoint, llm.c's model file, or a Hugging Face model
 * directory (GPT-2 or Llama).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "core/error.h"
#include "core/mem.h"
#include "events/jsonl.h"
#include "kernels/kernels.h"
#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "model/gpt.h"
#include "model/llama.h"

/* The whole of array a, read from the checkpoint (malloc'd). */
static dt_status_t read_all(const struct dt_ckpt *c, int a, float **out)
{
    size_t n = (size_t)dt_ckpt_state(c)->nparams;
    *out = dt_alloc_big(n * sizeof(float) + 1);
    if (!*out) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for %zu parameters", n);
    dt_status_t rc = dt_ckpt_read(c, a, 0, n, *out);
    if (rc != DT_SUCCESS) dt_free_big(*out);
    return rc;
}

/* ---- consolidate: one rank holding everything */

static dt_status_t read_range(void *ctx, int array, size_t off, size_t n, float *dst)
{
    return dt_ckpt_read(ctx, array, off, n, dst);
}

dt_status_t dt_ckpt_consolidate(const char *path, const char *out, FILE *log)
{
    struct dt_ckpt *c;
    DT_CHECK(dt_ckpt_open(path, true, &c));
    struct dt_run_state s = *dt_ckpt_state(c);
    struct dt_ckpt_writer *w = NULL;
    dt_status_t rc = dt_mkdirs(out);
    if (rc == DT_SUCCESS) rc = dt_ckpt_writer_open(out, 0, 1, NULL, &w);
    struct dt_range all = {0, (size_t)s.nparams};
    if (rc == DT_SUCCESS) rc = dt_ckpt_begin(w, s.step, "consolidate", &all, 1, s.narrays, read_range, c);
    struct dt_ckpt_file f;
    double secs;
    if (rc == DT_SUCCESS) rc = dt_ckpt_wait(w, &f, &secs);
    s.world = 1;
    char written[4400];
    if (rc == DT_SUCCESS) rc = dt_ckpt_commit(out, "consolidate", &s, &f, 1, 0, NULL, written, sizeof written);
    if (rc == DT_SUCCESS)
        fprintf(log, "%s: step %lld, %lld parameters x %d arrays in one file (%.1f MiB, fp32), from %s (%s on %d "
                "rank%s)\n", written, (long long)s.step, (long long)s.nparams, s.narrays, (double)f.bytes / 1048576,
                path, dt_ckpt_state(c)->strategy, dt_ckpt_state(c)->world, dt_ckpt_state(c)->world == 1 ? "" : "s");
    dt_ckpt_writer_close(w);
    dt_ckpt_close(c);
    return rc;
}

/* ---- export */

bool dt_ckpt_shape(const struct dt_run_state *s, struct dt_gpt_config *gc, struct dt_llama_config *lc, bool *llama)
{
    *gc = (struct dt_gpt_config){.activations = DT_F32};
    *lc = (struct dt_llama_config){.activations = DT_F32};
    *llama = dt_llama_parse(s->model, lc);
    return *llama || sscanf(s->model, "gpt n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d", &gc->n_layer,
                            &gc->n_head, &gc->n_embd, &gc->vocab_size, &gc->max_seq_len) == 5;
}

/* The model a checkpoint holds, built on the CPU (for its layout and names: batch 1 of 1 token) in
 * kc; *llama says which family. */
static dt_status_t model_of(const struct dt_ckpt *c, const char *path, struct dt_kctx *kc, struct dt_gpt_config *gc,
                            bool *llama, struct dt_model **m)
{
    const struct dt_run_state *s = dt_ckpt_state(c);
    struct dt_llama_config lc;
    if (!dt_ckpt_shape(s, gc, &lc, llama)) {
        return dt_error(DT_ERR_USAGE, "%s: error: the checkpoint holds %s, which has no GPT-2 or Llama layout to "
                        "export\n  hint: dtrun ckpt consolidate gives its whole fp32 state", path, s->model);
    }
    if (*llama) DT_CHECK(dt_llama_create(&lc, &dt_kernels_cpu, kc, 1, 1, m));
    else DT_CHECK(dt_gpt_create(gc, &dt_kernels_cpu, kc, 1, 1, m));
    if ((*m)->nparams != (size_t)s->nparams) {
        dt_model_free(*m);
        return dt_error(DT_ERR_CKPT, "%s: error: %lld parameters, but a %s has %zu", path, (long long)s->nparams,
                        s->model, (*m)->nparams);
    }
    return DT_SUCCESS;
}

/* out written whole under a temporary name, then renamed: a reader never sees half a file. */
static dt_status_t write_out(const char *out, const void *const *parts, const size_t *sizes, int nparts)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    FILE *f = fopen(tmp, "wb");
    if (!f) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot write: %s", tmp, strerror(errno));
    bool ok = true;
    for (int i = 0; i < nparts && ok; i++) ok = fwrite(parts[i], 1, sizes[i], f) == sizes[i];
    ok = fflush(f) == 0 && ok && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0) ok = false;
    if (!ok || rename(tmp, out) != 0) {
        e = ok ? errno : e;
        unlink(tmp);
        return dt_error(DT_ERR_SYSTEM, "%s: error: writing failed: %s", out, strerror(e));
    }
    return DT_SUCCESS;
}

/* llm.c's gpt2 model file (version 3, fp32): what train_gpt2.c reads and model.init_from loads. */
static dt_status_t export_llmc(struct dt_model *m, const struct dt_gpt_config *gc, const float *ours, const char *out)
{
    int32_t h[256] = {20240326, 3, gc->max_seq_len, gc->vocab_size, gc->n_layer, gc->n_head, gc->n_embd,
                      gc->vocab_size};
    float *llmc = dt_alloc_big(m->nparams * sizeof(float));
    if (!llmc) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for %zu parameters in llm.c's order", m->nparams);
    dt_gpt_to_llmc(m, ours, llmc);
    const void *parts[2] = {h, llmc};
    size_t sizes[2] = {sizeof h, m->nparams * sizeof(float)};
    dt_status_t rc = write_out(out, parts, sizes, 2);
    dt_free_big(llmc);
    return rc;
}

/* Hugging Face GPT-2's name for one of ours ("h.3.qkvw" -> "h.3.attn.c_attn.weight"); whether its
 * Conv1D stores the matrix transposed (in x out, where ours is out x in). */
static bool hf_name(const char *ours, char *out, size_t n, bool *transpose)
{
    static const struct {
        const char *ours, *hf;
        bool t;
    } map[] = {{"ln1w", "ln_1.weight", false},      {"ln1b", "ln_1.bias", false},
               {"qkvw", "attn.c_attn.weight", true}, {"qkvb", "attn.c_attn.bias", false},
               {"attprojw", "attn.c_proj.weight", true}, {"attprojb", "attn.c_proj.bias", false},
               {"ln2w", "ln_2.weight", false},      {"ln2b", "ln_2.bias", false},
               {"fcw", "mlp.c_fc.weight", true},     {"fcb", "mlp.c_fc.bias", false},
               {"fcprojw", "mlp.c_proj.weight", true}, {"fcprojb", "mlp.c_proj.bias", false},
               {"wte", "wte.weight", false},        {"wpe", "wpe.weight", false},
               {"lnfw", "ln_f.weight", false},      {"lnfb", "ln_f.bias", false}};
    int layer = -1, used = 0;
    const char *base = ours;
    if (sscanf(ours, "h.%d.%n", &layer, &used) == 1) base = ours + used;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(base, map[i].ours)) {
            if (layer >= 0) snprintf(out, n, "h.%d.%s", layer, map[i].hf);
            else snprintf(out, n, "%s", map[i].hf);
            *transpose = map[i].t;
            return true;
        }
    return false;
}

/* GPT-2's names and layouts in safetensors (its Conv1D matrices transposed), and the config.json
 * that transformers' GPT2LMHeadModel reads beside them. */
static dt_status_t export_gpt2_hf(struct dt_model *m, const struct dt_gpt_config *gc, const float *ours,
                                  const struct dt_export *x)
{
    struct dt_st_out *t = calloc((size_t)m->nviews, sizeof *t);
    char (*names)[64] = calloc((size_t)m->nviews, sizeof *names);
    float *data = dt_alloc_big(m->nparams * sizeof(float)); /* the tensors as GPT-2 lays them out */
    dt_status_t rc = t && names && data ? DT_SUCCESS : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    for (int i = 0; i < m->nviews && rc == DT_SUCCESS; i++) {
        const struct dt_param_view *v = &m->views[i];
        bool tr;
        if (!hf_name(v->name, names[i], sizeof names[i], &tr)) {
            rc = dt_error(DT_ERR_INTERNAL, "dtrun: error: no GPT-2 name for parameter %s", v->name);
            break;
        }
        int r = v->shape[0], c = v->ndim == 2 ? v->shape[1] : 0;
        float *d = data + v->offset;
        if (tr) {
            for (int a = 0; a < r; a++)
                for (int b = 0; b < c; b++) d[(size_t)b * r + a] = ours[v->offset + (size_t)a * c + b];
        } else {
            memcpy(d, ours + v->offset, v->numel * sizeof(float));
        }
        t[i] = (struct dt_st_out){names[i], v->ndim, {tr ? c : r, tr ? r : c}, d};
    }
    if (rc == DT_SUCCESS) rc = dt_st_write(x->out, t, m->nviews, x->dtype, x->shard_bytes);
    free(t);
    free(names);
    dt_free_big(data);
    DT_CHECK(rc);
    char cfg[1024], path[4300];
    int n = snprintf(cfg, sizeof cfg,
                     "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                     "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n"
                     "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"activation_function\": \"gelu_new\",\n"
                     "  \"layer_norm_epsilon\": 1e-05,\n  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"%s\"\n}\n",
                     gc->vocab_size, gc->max_seq_len, gc->max_seq_len, gc->n_embd, gc->n_layer, gc->n_head,
                     dt_hf_torch_dtype(x->dtype));
    snprintf(path, sizeof path, "%s/config.json", x->out);
    const void *cp[1] = {cfg};
    size_t cs[1] = {(size_t)n};
    return write_out(path, cp, cs, 1);
}

dt_status_t dt_ckpt_export(const char *path, const struct dt_export *x, FILE *log)
{
    bool llmc = !strcmp(x->format, "llmc"), st = !strcmp(x->format, "safetensors");
    if (!llmc && !st)
        return dt_error(DT_ERR_USAGE, "dtrun ckpt export: error: --format '%s': use llmc (llm.c's model file) or "
                        "safetensors (a Hugging Face model directory)", x->format);
    struct dt_ckpt *c;
    DT_CHECK(dt_ckpt_open(path, true, &c));
    struct dt_gpt_config gc;
    struct dt_model *m = NULL;
    struct dt_kctx *kc = NULL;
    float *ours = NULL;
    bool llama = false;
    dt_status_t rc = dt_kernels_cpu.ctx_create(-1, &kc);
    if (rc == DT_SUCCESS) rc = model_of(c, path, kc, &gc, &llama, &m);
    if (rc == DT_SUCCESS && llama && llmc)
        rc = dt_error(DT_ERR_USAGE, "%s: error: llm.c's model file holds a GPT-2; the checkpoint holds a Llama\n"
                      "  hint: use --format safetensors (Hugging Face LlamaForCausalLM)", path);
    if (rc == DT_SUCCESS) rc = read_all(c, 0, &ours);
    if (rc == DT_SUCCESS)
        rc = llmc ? export_llmc(m, &gc, ours, x->out)
             : llama ? dt_hf_save_llama(m, ours, x->out, x->dtype, x->shard_bytes)
                     : export_gpt2_hf(m, &gc, ours, x);
    if (rc == DT_SUCCESS)
        fprintf(log, "%s: %s of step %lld (%s, %zu parameters, %s) from %s\n", x->out,
                llmc ? "llm.c model file (version 3)"
                : llama ? "safetensors and config.json (LlamaForCausalLM)"
                        : "safetensors and config.json (GPT2LMHeadModel)",
                (long long)dt_ckpt_state(c)->step, dt_ckpt_state(c)->model, m->nparams,
                llmc ? "fp32" : dt_hf_torch_dtype(x->dtype), path);
    if (ours) dt_free_big(ours);
    dt_model_free(m);
    if (kc) dt_kernels_cpu.ctx_destroy(kc);
    dt_ckpt_close(c);
    return rc;
}

dt_status_t dt_ckpt_inspect(const char *path, FILE *out)
{
    struct dt_ckpt *c;
    DT_CHECK(dt_ckpt_open(path, true, &c));
    dt_status_t rc = dt_ckpt_describe(c, out);
    dt_ckpt_close(c);
    return rc;
}
