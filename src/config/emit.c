/*
 * emit.c - `dtrun check` output: every key with its resolved value and, as a
 * comment, where it came from (default, file:line:col, override, DeepSpeed
 * JSON, or how "auto" was filled), then the world and the batch identity.
 */
#include <stdbool.h>
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

/* Keys that do not apply to this run are shown as a comment, so the output
 * never contradicts itself when read back (data.train vs data.synthetic). */
static bool unused(const struct dt_config *cfg, const char *path)
{
    return (cfg->data.train && !strncmp(path, "data.synthetic.", 15)) ||
           (cfg->model.type != DT_MODEL_MLP && !strncmp(path, "model.mlp.", 10));
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

void dt_config_emit(const struct dt_config *cfg, FILE *out)
{
    fprintf(out, "# dtrun resolved config: every key, with where its value came from\n");
    const char *prev = "";
    for (size_t i = 0; i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        if (unused(cfg, k->path)) {
            if (!unused(cfg, prev))
                fprintf(out, "  # %s: not used, %s\n", !strncmp(k->path, "model.mlp.", 10) ? "mlp" : "synthetic",
                        !strncmp(k->path, "model.mlp.", 10) ? "model.type is not mlp" : "data.train is set");
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
        char val[2048], from[400], line[2600];
        dt_value_format(k, DT_FIELD(cfg, k), val, sizeof val);
        if (k->flags & DT_F_CREDENTIALS) mask_credentials(val, sizeof val);
        origin_str(&cfg->origin[i], from, sizeof from);
        if (k->flags & DT_F_CREDENTIALS) mask_credentials(from, sizeof from); /* an override repeats the value */
        snprintf(line, sizeof line, "%*s%s: %s", 2 * depth, "", p, val);
        fprintf(out, "%-48s # %s\n", line, from);
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
        fprintf(out, "# %s\n", ds);
    }
}
