/*
 * emit.c - `dtrun check` output: every key with its resolved value and, as a
 * comment, where it came from (default, file:line:col, override, DeepSpeed
 * JSON, or how "auto" was filled), then the world and the batch identity.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "config/diag.h"
#include "config/emit.h"
#include "config/schema.h"

static void origin_str(const struct dt_origin *o, char *buf, size_t n)
{
    char w[300];
    switch (o->kind) {
    case DT_ORIGIN_DEFAULT: snprintf(buf, n, "default"); break;
    case DT_ORIGIN_FILE: snprintf(buf, n, "%s", dt_loc_str(o->loc, w, sizeof w)); break;
    case DT_ORIGIN_OVERRIDE: snprintf(buf, n, "%s", o->loc.file); break;
    case DT_ORIGIN_DEEPSPEED: snprintf(buf, n, "deepspeed %s", dt_loc_str(o->loc, w, sizeof w)); break;
    case DT_ORIGIN_AUTO: snprintf(buf, n, "auto: %s", o->note); break;
    }
}

/* Number of leading path components two paths share. */
static int common_sections(const char *a, const char *b)
{
    int n = 0;
    for (;;) {
        size_t la = strcspn(a, "."), lb = strcspn(b, ".");
        if (!a[la] || !b[lb] || la != lb || strncmp(a, b, la) != 0) return n;
        n++;
        a += la + 1;
        b += lb + 1;
    }
}

/* Keys that do not apply to this run are left out, a comment saying why in their place, so the
 * output never contradicts itself when read back (data.train vs data.synthetic): NULL, or why. */
static const char *unused(const struct dt_config *cfg, const char *path)
{
    static const char *const llama_only[] = {"model.n_kv_head", "model.intermediate_size",
                                             "model.max_position_embeddings", "model.norm_eps", "model.rope_theta",
                                             "model.rope_scaling.type"};
    bool llama_key = false;
    for (size_t i = 0; i < sizeof llama_only / sizeof llama_only[0]; i++) llama_key |= !strcmp(path, llama_only[i]);
    /* the scaling's numbers, which only its llama3 type reads */
    bool scaling = !strncmp(path, "model.rope_scaling.", 19) && !llama_key;
    if (cfg->data.train && !strncmp(path, "data.synthetic.", 15)) return "synthetic: not used, data.train is set";
    if (cfg->model.type != DT_MODEL_MLP && !strncmp(path, "model.mlp.", 10)) return "mlp: not used, model.type is not mlp";
    if (cfg->model.type != DT_MODEL_LLAMA && (llama_key || scaling))
        return "llama's keys: not used, model.type is not llama";
    if (scaling && cfg->model.rope_scaling.type == DT_ROPE_NONE)
        return "rope_scaling's numbers: not used, model.rope_scaling.type is none";
    if (cfg->model.type == DT_MODEL_MLP && !strcmp(path, "model.tie_embeddings"))
        return "tie_embeddings: not used, model.type is mlp";
    return NULL;
}

/* the user:password@ of a URL shown as ***@ (in place) */
static void mask_credentials(char *v, size_t n)
{
    if (strlen(v) + 3 >= n) {
        snprintf(v, n, "\"(a URL too long to show)\"");
        return;
    }
    char *s = strstr(v, "://");
    if (!s) return;
    s += 3;
    char *at = strchr(s, '@'), *slash = strchr(s, '/');
    if (!at || (slash && slash < at)) return;
    memmove(s + 3, at, strlen(at) + 1);
    memcpy(s, "***", 3);
}

/*
 * Text for a YAML comment, in place: one line of what YAML may hold, anything else '?'. Origins name
 * files and overrides as the user wrote them, which may hold a CR, a newline or bytes YAML refuses;
 * printed as they were, the output did not read back (#16, tests/fuzz/fuzz_overrides.c).
 */
static void comment_safe(char *text)
{
    const unsigned char *r = (const unsigned char *)text;
    char *w = text;
    while (*r) {
        unsigned c = *r, cp = c;
        int n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (n > 1) cp = c & (0x7fu >> n);
        for (int i = 1; i < n; i++) {
            if ((r[i] & 0xc0) != 0x80) {
                n = 0;
                break;
            }
            cp = cp << 6 | (r[i] & 0x3f);
        }
        /* YAML's printable characters, less its line breaks (LF, CR, NEL, LS, PS) and the BOM */
        bool ok = (n == 1 && (c == '\t' || (c >= 0x20 && c < 0x7f))) || (n == 2 && cp >= 0xa0) ||
                  (n == 3 && cp >= 0x800 && (cp < 0xd800 || (cp >= 0xe000 && cp <= 0xfffd)) && cp != 0x2028 &&
                   cp != 0x2029 && cp != 0xfeff) ||
                  (n == 4 && cp >= 0x10000 && cp <= 0x10ffff);
        if (ok) {
            memmove(w, r, (size_t)n);
            w += n;
        } else {
            *w++ = '?';
        }
        r += n > 0 ? n : 1;
    }
    *w = '\0';
}

void dt_config_emit(const struct dt_config *cfg, FILE *out)
{
    fprintf(out, "# dtrun resolved config: every key, with where its value came from\n");
    const char *prev = "";
    for (size_t i = 0; i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        const char *why = unused(cfg, k->path), *before = unused(cfg, prev);
        if (why) {
            if (!before || strcmp(before, why)) fprintf(out, "  # %s\n", why);
            prev = k->path;
            continue;
        }
        int shared = common_sections(prev, k->path);
        /* open the sections this key needs beyond the ones still open */
        const char *p = k->path;
        int depth = 0;
        for (;;) {
            size_t len = strcspn(p, ".");
            if (!p[len]) break;
            if (depth >= shared) fprintf(out, "%*s%.*s:\n", 2 * depth, "", (int)len, p);
            p += len + 1;
            depth++;
        }
        /* a string whole, however long (each byte at most 6 when escaped): cut, it read back as another */
        const char *str = k->type == DT_T_STR ? *(char *const *)DT_FIELD(cfg, k) : NULL;
        size_t vn = str ? 6 * strlen(str) + 64 : 2048;
        char small[2048], *val = vn > sizeof small ? malloc(vn) : small, from[400];
        if (!val) {
            val = small;
            vn = sizeof small;
        }
        dt_value_format(k, DT_FIELD(cfg, k), val, vn);
        if (k->flags & DT_F_CREDENTIALS) mask_credentials(val, vn);
        origin_str(&cfg->origin[i], from, sizeof from);
        if (k->flags & DT_F_CREDENTIALS) mask_credentials(from, sizeof from); /* an override repeats the value */
        comment_safe(from);
        int w = fprintf(out, "%*s%s: %s", 2 * depth, "", p, val);
        fprintf(out, "%*s # %s\n", w < 48 ? 48 - w : 0, "", from);
        if (val != small) free(val);
        prev = k->path;
    }
    const int64_t tokens = cfg->resolved.global_batch * cfg->model.seq_len;
    fprintf(out, "# world: %d node%s x %d rank%s per node = %d rank%s; strategy %s\n", cfg->resolved.nodes,
            cfg->resolved.nodes > 1 ? "s" : "", cfg->resolved.devices_per_node,
            cfg->resolved.devices_per_node > 1 ? "s" : "", cfg->resolved.world, cfg->resolved.world > 1 ? "s" : "",
            dt_enum_str(dt_strategy_names, cfg->resolved.strategy));
    fprintf(out,
            "# batch: micro_batch_size %lld x gradient_accumulation_steps %lld x world %d = %lld sequences "
            "(%lld tokens) per optimizer step\n",
            (long long)cfg->data.micro_batch_size, (long long)cfg->compute.gradient_accumulation_steps,
            cfg->resolved.world, (long long)cfg->resolved.global_batch, (long long)tokens);
    if (cfg->ds.present) {
        char ds[1024];
        dt_ds_describe(cfg, ds, sizeof ds);
        comment_safe(ds);
        fprintf(out, "# %s\n", ds);
    }
}
