/*
 * init_from.c - model.init_from fixes the architecture, as Hugging Face's from_pretrained takes it from
 * config.json: every model key the config leaves unset is filled from what init_from names (a Hugging
 * Face directory's config.json, or an llm.c model file's header), marked "auto: model.init_from
 * PATH"; a key the user set that disagrees is an error naming both values and both places. What the
 * file holds that dtrun cannot build (another model_type, a bias, head_dim apart from the width's
 * share) is refused here, before anything is allocated, with the key's place in config.json.
 *
 * The loaders (src/ckpt/hf_llama.c, src/model/gpt.c) then find a model of the file's shape and
 * check each tensor against it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "config/resolve_impl.h"
#include "config/schema.h"
#include "config/ynode.h"
#include "core/error.h"

/* llm.c's model file: a 256 x int32 header (magic, version, max_seq_len, vocab_size, n_layer, n_head,
 * n_embd, padded_vocab_size) before the fp32 parameters (train_gpt2.c) */
#define LLMC_MAGIC 20240326

struct source {
    struct dt_config *cfg;
    struct dt_diags *d;
    const char *path;     /* model.init_from as written */
    const char *file;     /* the file the values come from (config.json or the model file) */
    bool header;          /* file is an llm.c model file: its values are its header's */
    char note[160];       /* the auto note: "model.init_from PATH" */
};

static const struct dt_ynode *lookup(const struct dt_ynode *map, const char *key)
{
    for (size_t i = 0; map && map->kind == DT_Y_MAP && i < map->n; i++)
        if (!strcmp(map->pairs[i].key->str, key)) return map->pairs[i].value;
    return NULL;
}

static bool present(const struct dt_ynode *v) { return v && !dt_ynode_is_null(v); }

/* where the file says it: "hf/config.json:5:3", "hf/config.json, absent: transformers' default", or
 * "gpt2_124M.bin's header" */
static const char *place(const struct source *s, const struct dt_ynode *v, char *buf, size_t n)
{
    if (!v && s->header) snprintf(buf, n, "%s's header", s->file);
    else if (!v) snprintf(buf, n, "%s, absent: transformers' default", s->file);
    else dt_loc_str(v->loc, buf, n);
    return buf;
}

static double get(const struct dt_key *k, const void *field)
{
    switch (k->type) {
    case DT_T_FLOAT: return *(const double *)field;
    case DT_T_BOOL: return *(const bool *)field;
    case DT_T_ENUM: return *(const int *)field;
    default: return (double)*(const int64_t *)field;
    }
}

static void put(const struct dt_key *k, void *field, double value)
{
    switch (k->type) {
    case DT_T_FLOAT: *(double *)field = value; break;
    case DT_T_BOOL: *(bool *)field = value != 0; break;
    case DT_T_ENUM: *(int *)field = (int)value; break;
    default: *(int64_t *)field = (int64_t)value; break;
    }
}

/* One model key from the file's value (v: its node, NULL when the file leaves it to its default):
 * filled when the config leaves it unset; checked when it sets it, equal meaning equal as the model
 * keeps it (a float as a float). key_text names it in the file. */
static void fill(struct source *s, const char *key, const char *key_text, const struct dt_ynode *v, double value)
{
    size_t i;
    const struct dt_key *k = dt_schema_find(&dt_config_schema, key, &i);
    void *field = DT_FIELD(s->cfg, k);
    if (!dt_resolve_user_set(s->cfg, key)) {
        put(k, field, value);
        dt_resolve_set_auto(s->cfg, key, "%s", s->note);
        return;
    }
    double ours = get(k, field);
    if (k->type == DT_T_FLOAT ? (float)ours == (float)value : ours == value) return;
    char a[64], b[64], w[300], f[300];
    dt_value_format(k, field, a, sizeof a);
    if (v && v->kind == DT_Y_SCALAR) snprintf(b, sizeof b, "%s", v->str);
    else if (k->type == DT_T_ENUM) snprintf(b, sizeof b, "%s", dt_enum_str(k->names, (int)value));
    else if (k->type == DT_T_BOOL) snprintf(b, sizeof b, "%s", value != 0 ? "true" : "false");
    else snprintf(b, sizeof b, "%.9g", value);
    dt_diag(s->d, dt_resolve_loc(s->cfg, key),
            "remove the key (model.init_from fills it), or load a model of this shape",
            "%s %s (%s) disagrees with model.init_from %s: %s %s (%s)", key, a,
            dt_resolve_where(s->cfg, key, w, sizeof w), s->path, key_text, b, place(s, v, f, sizeof f));
}

/* config.json's number at key (def when absent or null, as transformers' LlamaConfig defaults it);
 * false, with the error said, when it is not a number */
static bool number(struct source *s, const struct dt_ynode *root, const char *key, double def, double *out,
                   const struct dt_ynode **node)
{
    const struct dt_ynode *v = lookup(root, key);
    *node = present(v) ? v : NULL;
    *out = def;
    if (!present(v)) return true;
    char *end = NULL, w[300];
    if (v->kind == DT_Y_SCALAR && !v->quoted) *out = strtod(v->str, &end);
    if (v->kind != DT_Y_SCALAR || v->quoted || end == v->str || *end || !isfinite(*out)) {
        dt_diag(s->d, v->loc, "config.json is transformers' LlamaConfig: its numbers are JSON numbers",
                "%s in %s is %s, not a number", key, place(s, v, w, sizeof w),
                v->kind == DT_Y_SCALAR ? v->str : v->kind == DT_Y_MAP ? "an object" : "a list");
        return false;
    }
    return true;
}

static bool boolean(struct source *s, const struct dt_ynode *root, const char *key, bool def, bool *out,
                    const struct dt_ynode **node)
{
    const struct dt_ynode *v = lookup(root, key);
    *node = present(v) ? v : NULL;
    *out = def;
    if (!present(v)) return true;
    if (v->kind == DT_Y_SCALAR && !v->quoted && (!strcmp(v->str, "true") || !strcmp(v->str, "false"))) {
        *out = !strcmp(v->str, "true");
        return true;
    }
    char w[300];
    dt_diag(s->d, v->loc, "config.json is transformers' LlamaConfig: true or false", "%s in %s is %s, not a boolean",
            key, place(s, v, w, sizeof w),
                       v->kind == DT_Y_SCALAR ? v->str : v->kind == DT_Y_MAP ? "an object" : "a list");
    return false;
}

/* Something the file asks for that dtrun's Llama does not compute: refused with its place. */
static void unsupported(struct source *s, const struct dt_ynode *v, const char *key, const char *what, const char *hint)
{
    char w[300];
    dt_diag(s->d, v ? v->loc : (struct dt_loc){s->file, 0, 0}, hint, "%s in %s is %s: %s", key,
            place(s, v, w, sizeof w), v && v->kind == DT_Y_SCALAR ? v->str : v ? "not a plain value" : "absent", what);
}

/* A number the file must have as a whole number */
static bool whole(struct source *s, const struct dt_ynode *root, const char *key, double def, double *out,
                  const struct dt_ynode **node)
{
    if (!number(s, root, key, def, out, node)) return false;
    if (*out >= 1 && *out <= 16777216 && *out == floor(*out)) return true;
    unsupported(s, *node, key, "not a positive whole number", "fix config.json");
    return false;
}

static void from_config_json(struct source *s, const struct dt_ynode *root)
{
    struct dt_config *cfg = s->cfg;
    const struct dt_ynode *v, *type = lookup(root, "model_type");
    if (!root || root->kind != DT_Y_MAP) {
        dt_diag(s->d, (struct dt_loc){s->file, 0, 0}, "config.json holds one JSON object",
                "%s is not a JSON object", s->file);
        return;
    }
    if (!type || type->kind != DT_Y_SCALAR || strcmp(type->str, "llama")) {
        bool gpt2 = type && type->kind == DT_Y_SCALAR && !strcmp(type->str, "gpt2");
        unsupported(s, type, "model_type", "dtrun loads Hugging Face weights of model_type llama",
                    gpt2 ? "a GPT-2's weights load from llm.c's model file (gpt2_124M.bin): point model.init_from at it"
                         : "model.init_from takes a LlamaForCausalLM directory or an llm.c GPT-2 model file");
        return;
    }
    if (dt_resolve_user_set(cfg, "model.type") && cfg->model.type != DT_MODEL_LLAMA) {
        char w[300], f[300];
        dt_diag(s->d, dt_resolve_loc(cfg, "model.type"), "drop model.type (model.init_from fills it)",
                "model.type %s (%s) disagrees with model.init_from %s: model_type llama (%s)",
                cfg->model.type == DT_MODEL_GPT ? "gpt" : "mlp", dt_resolve_where(cfg, "model.type", w, sizeof w),
                s->path, place(s, type, f, sizeof f));
        return;
    }
    if (!dt_resolve_user_set(cfg, "model.type")) {
        cfg->model.type = DT_MODEL_LLAMA;
        dt_resolve_set_auto(cfg, "model.type", "%s", s->note);
    }
    double x, heads = 0, width = 0, pos = 0;
    bool b;
    if (whole(s, root, "num_hidden_layers", 32, &x, &v)) fill(s, "model.n_layer", "num_hidden_layers", v, x);
    if (whole(s, root, "hidden_size", 4096, &width, &v)) fill(s, "model.n_embd", "hidden_size", v, width);
    if (whole(s, root, "num_attention_heads", 32, &heads, &v))
        fill(s, "model.n_head", "num_attention_heads", v, heads);
    /* absent or null: as many as the query heads (multi-head attention) */
    if (whole(s, root, "num_key_value_heads", heads, &x, &v)) fill(s, "model.n_kv_head", "num_key_value_heads", v, x);
    if (whole(s, root, "intermediate_size", 11008, &x, &v))
        fill(s, "model.intermediate_size", "intermediate_size", v, x);
    if (whole(s, root, "vocab_size", 32000, &x, &v)) fill(s, "model.vocab_size", "vocab_size", v, x);
    if (number(s, root, "rms_norm_eps", 1e-6, &x, &v)) fill(s, "model.norm_eps", "rms_norm_eps", v, x);
    if (number(s, root, "rope_theta", 10000, &x, &v)) fill(s, "model.rope_theta", "rope_theta", v, x);
    if (boolean(s, root, "tie_word_embeddings", false, &b, &v))
        fill(s, "model.tie_embeddings", "tie_word_embeddings", v, b);
    if (whole(s, root, "max_position_embeddings", 2048, &pos, &v))
        fill(s, "model.max_position_embeddings", "max_position_embeddings", v, pos);
    /* what dtrun's Llama does not compute */
    if (present(v = lookup(root, "head_dim")) && heads > 0 &&
        (v->kind != DT_Y_SCALAR || strtod(v->str, NULL) != floor(width / heads)))
        unsupported(s, v, "head_dim", "dtrun's heads are hidden_size / num_attention_heads wide",
                    "a model with a head size of its own cannot be loaded");
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++)
        if (boolean(s, root, biases[i], false, &b, &v) && b)
            unsupported(s, v, biases[i], "dtrun's Llama has no biases", "a model with biases cannot be loaded");
    v = lookup(root, "hidden_act");
    if (present(v) && (v->kind != DT_Y_SCALAR || strcmp(v->str, "silu")))
        unsupported(s, v, "hidden_act", "dtrun's Llama computes SwiGLU with silu", "a model with another activation "
                    "cannot be loaded");
    /* rotary scaling: Llama 3.1's, or none */
    const struct dt_ynode *rs = lookup(root, "rope_scaling");
    double orig = 0;
    if (present(rs)) {
        const struct dt_ynode *ty = lookup(rs, "rope_type");
        if (!ty) ty = lookup(rs, "type");
        if (rs->kind != DT_Y_MAP || !ty || ty->kind != DT_Y_SCALAR || strcmp(ty->str, "llama3")) {
            unsupported(s, ty ? ty : rs, "rope_scaling.rope_type", "dtrun scales rotary frequencies as Llama 3.1 "
                        "does (llama3) or not at all", "a model with another rope scaling cannot be loaded");
        } else {
            fill(s, "model.rope_scaling.type", "rope_scaling.rope_type", ty, DT_ROPE_LLAMA3);
            if (number(s, rs, "factor", 8, &x, &v)) fill(s, "model.rope_scaling.factor", "rope_scaling.factor", v, x);
            if (number(s, rs, "low_freq_factor", 1, &x, &v))
                fill(s, "model.rope_scaling.low_freq_factor", "rope_scaling.low_freq_factor", v, x);
            if (number(s, rs, "high_freq_factor", 4, &x, &v))
                fill(s, "model.rope_scaling.high_freq_factor", "rope_scaling.high_freq_factor", v, x);
            if (whole(s, rs, "original_max_position_embeddings", 8192, &orig, &v))
                fill(s, "model.rope_scaling.original_max_position_embeddings",
                     "rope_scaling.original_max_position_embeddings", v, orig);
        }
    } else {
        fill(s, "model.rope_scaling.type", "rope_scaling", rs, DT_ROPE_NONE);
    }
    /* the training length, when the config leaves it: the context the model was pretrained on (Llama
     * 3.2's scaled 131072 positions were trained at 8192, as its preset says) */
    if (!dt_resolve_user_set(cfg, "model.seq_len") && (orig > 0 || pos > 0)) {
        cfg->model.seq_len = (int64_t)(orig > 0 ? orig : pos);
        dt_resolve_set_auto(cfg, "model.seq_len", "%s (%s)", s->note,
                            orig > 0 ? "rope_scaling.original_max_position_embeddings" : "max_position_embeddings");
    }
}

/* llm.c's header: the GPT-2 it holds (the file's positions are the longest sequence it can train on) */
static void from_llmc(struct source *s, const int32_t *h)
{
    struct dt_config *cfg = s->cfg;
    char w[300];
    if (dt_resolve_user_set(cfg, "model.type") && cfg->model.type != DT_MODEL_GPT) {
        dt_diag(s->d, dt_resolve_loc(cfg, "model.type"), "drop model.type (model.init_from fills it)",
                "model.type %s (%s) disagrees with model.init_from %s: an llm.c GPT-2 model file",
                cfg->model.type == DT_MODEL_LLAMA ? "llama" : "mlp", dt_resolve_where(cfg, "model.type", w, sizeof w),
                s->path);
        return;
    }
    if (h[1] != 3) {
        dt_diag(s->d, dt_resolve_loc(cfg, "model.init_from"), "use the float32 file (gpt2_124M.bin, not "
                "gpt2_124M_bf16.bin)", "model.init_from %s: llm.c model version %d at byte 4; dtrun reads version 3 "
                "(float32)", s->path, h[1]);
        return;
    }
    for (int i = 2; i < 8; i++)
        if (h[i] < 1 || h[i] > 16777216) {
            dt_diag(s->d, dt_resolve_loc(cfg, "model.init_from"), "the file is damaged: write it again with llm.c's "
                    "train_gpt2.py", "model.init_from %s: header field %d is %d", s->path, i, h[i]);
            return;
        }
    if (!dt_resolve_user_set(cfg, "model.type")) {
        cfg->model.type = DT_MODEL_GPT;
        dt_resolve_set_auto(cfg, "model.type", "%s", s->note);
    }
    fill(s, "model.vocab_size", "vocab_size (header int 3)", NULL, h[3]);
    fill(s, "model.n_layer", "n_layer (header int 4)", NULL, h[4]);
    fill(s, "model.n_head", "n_head (header int 5)", NULL, h[5]);
    fill(s, "model.n_embd", "n_embd (header int 6)", NULL, h[6]);
    /* a shorter sequence reads the first rows of the position table; a longer one has no rows to read */
    if (!dt_resolve_user_set(cfg, "model.seq_len")) {
        cfg->model.seq_len = h[2];
        dt_resolve_set_auto(cfg, "model.seq_len", "%s (max_seq_len)", s->note);
    } else if (cfg->model.seq_len > h[2]) {
        dt_diag(s->d, dt_resolve_loc(cfg, "model.seq_len"), "lower model.seq_len, or remove it (init_from fills it)",
                "model.seq_len %lld (%s) is longer than the %d positions model.init_from %s holds",
                (long long)cfg->model.seq_len, dt_resolve_where(cfg, "model.seq_len", w, sizeof w), h[2], s->path);
    }
}

void dt_resolve_init_from(struct dt_config *cfg, struct dt_diags *d)
{
    const char *path = cfg->model.init_from;
    if (!path) return;
    struct source s = {.cfg = cfg, .d = d, .path = path};
    snprintf(s.note, sizeof s.note, "model.init_from %s", path);
    struct dt_loc here = dt_resolve_loc(cfg, "model.init_from");
    if (cfg->model.type == DT_MODEL_MLP && dt_resolve_user_set(cfg, "model.type")) {
        dt_diag(d, here, "remove model.init_from", "model.init_from loads GPT-2 or Llama weights; an mlp has none");
        return;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        dt_diag(d, here, "model.init_from takes a Hugging Face model directory (config.json beside its safetensors) "
                "or an llm.c model file", "cannot read model.init_from %s: %s", path, strerror(errno));
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        char json[4200];
        snprintf(json, sizeof json, "%s/config.json", path);
        s.file = json;
        struct dt_ydoc *doc;
        if (dt_ydoc_load_file(json, &doc) != DT_SUCCESS) {
            dt_diag(d, here, "model.init_from takes a Hugging Face model directory (config.json beside its "
                    "safetensors)", "model.init_from %s: %s", path, dt_error_msg());
            return;
        }
        from_config_json(&s, dt_ydoc_root(doc));
        dt_ydoc_free(doc);
        return;
    }
    s.file = path;
    s.header = true;
    int32_t h[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(h, sizeof h[0], 8, f) : 0;
    int e = errno;
    if (f) fclose(f);
    if (!f)
        dt_diag(d, here, "check the path and its permissions", "cannot read model.init_from %s: %s", path, strerror(e));
    else if (got < 8 || h[0] != LLMC_MAGIC)
        dt_diag(d, here, "model.init_from takes a Hugging Face model directory (config.json beside its safetensors) "
                "or the gpt2_124M.bin that llm.c's train_gpt2.py writes",
                "model.init_from %s is not an llm.c model file: magic %d at byte 0, expected %d", path, h[0],
                LLMC_MAGIC);
    else
        from_llmc(&s, h);
}
