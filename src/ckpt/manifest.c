/* manifest.c - see manifest.h. JSON out through the events' writer, in through the config's reader. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/manifest.h"
#include "config/ynode.h"
#include "core/error.h"
#include "events/json.h"

#define FORMAT "dtrun-checkpoint"

char *dt_manifest_text(const struct dt_run_state *m, const struct dt_ckpt_file *files, int nfiles)
{
    struct dt_json j = {0};
    char hex[24];
    dt_json_begin(&j);
    dt_json_str(&j, "format", FORMAT);
    dt_json_int(&j, "version", DT_CKPT_VERSION);
    dt_json_int(&j, "step", m->step);
    dt_json_int(&j, "opt_steps", m->opt_steps);
    dt_json_int(&j, "samples", m->samples);
    dt_json_int(&j, "tokens", m->tokens);
    dt_json_str(&j, "run_id", m->run_id);
    dt_json_num(&j, "loss", m->loss);
    dt_json_num(&j, "val_loss", m->val_loss);
    dt_json_str(&j, "config_hash", m->config_hash);
    dt_json_str(&j, "model", m->model);
    dt_json_int(&j, "params", m->nparams);
    dt_json_str(&j, "optimizer", m->optimizer);
    dt_json_int(&j, "arrays", m->narrays);
    dt_json_str(&j, "strategy", m->strategy);
    dt_json_int(&j, "stage", m->stage);
    dt_json_int(&j, "world", m->world);
    dt_json_str(&j, "precision", m->precision);
    dt_json_int(&j, "restart_count", m->restart);
    dt_json_str(&j, "saved_at", m->saved_at);
    /* every random stream is counter-based (core/rng.h): the seed and the counters above restore them */
    dt_json_obj(&j, "rng");
    snprintf(hex, sizeof hex, "%" PRIu64, m->seed);
    dt_json_str(&j, "seed", hex);
    dt_json_str(&j, "streams", "initialisation (seed, tensor), sampler (seed, samples), stochastic rounding "
                               "(seed, opt_steps)");
    dt_json_close(&j);
    dt_json_obj(&j, "sampler");
    dt_json_int(&j, "samples", m->samples);
    dt_json_close(&j);
    dt_json_obj(&j, "loss_scaler");
    dt_json_num(&j, "scale", m->scaler.scale);
    dt_json_int(&j, "cur_hysteresis", m->scaler.cur_hysteresis);
    dt_json_int(&j, "cur_iter", m->scaler.cur_iter);
    dt_json_int(&j, "last_overflow_iter", m->scaler.last_overflow_iter);
    dt_json_int(&j, "skipped", m->scaler.skipped);
    dt_json_close(&j);
    if (m->fp8_tensors) {
        dt_json_obj(&j, "fp8");
        dt_json_int(&j, "tensors", m->fp8_tensors);
        dt_json_int(&j, "amax_history_len", m->fp8_history);
        snprintf(hex, sizeof hex, "%016" PRIx64, m->fp8_xxh64);
        dt_json_str(&j, "xxh64", hex);
        dt_json_close(&j);
    }
    dt_json_obj(&j, "files");
    for (int i = 0; i < nfiles; i++) {
        dt_json_obj(&j, files[i].name);
        dt_json_int(&j, "bytes", files[i].bytes);
        snprintf(hex, sizeof hex, "%016" PRIx64, files[i].xxh64);
        dt_json_str(&j, "xxh64", hex);
        dt_json_close(&j);
    }
    dt_json_close(&j);
    const char *text = dt_json_end(&j);
    char *out = text ? strdup(text) : NULL;
    dt_json_free(&j);
    return out;
}

static const struct dt_ynode *get(const struct dt_ynode *map, const char *key)
{
    for (size_t i = 0; map && map->kind == DT_Y_MAP && i < map->n; i++)
        if (!strcmp(map->pairs[i].key->str, key)) return map->pairs[i].value;
    return NULL;
}

/* the scalar at key as text; NULL with *bad set when missing or not a scalar */
static const char *text(const struct dt_ynode *map, const char *key, const char **bad)
{
    const struct dt_ynode *v = get(map, key);
    if (!v || v->kind != DT_Y_SCALAR) {
        if (!*bad) *bad = key;
        return "";
    }
    return v->str;
}

static int64_t integer(const struct dt_ynode *map, const char *key, const char **bad)
{
    const char *s = text(map, key, bad);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if ((*s == '\0' || *end || errno) && !*bad) *bad = key;
    return v;
}

static double number(const struct dt_ynode *map, const char *key, const char **bad)
{
    const char *s = text(map, key, bad);
    if (!strcmp(s, "null")) return NAN;
    char *end;
    double v = strtod(s, &end);
    /* JSON has no infinity: 1e999 (or inf, which YAML reads) is a broken manifest, not a loss scale of
     * infinity that a resumed run trains with (#16, tests/fuzz/fuzz_manifest.c) */
    if ((*s == '\0' || *end || !isfinite(v)) && !*bad) *bad = key;
    return v;
}

static void copy(char *dst, size_t n, const struct dt_ynode *map, const char *key, const char **bad)
{
    snprintf(dst, n, "%s", text(map, key, bad));
}

dt_status_t dt_manifest_read(const char *dir, struct dt_run_state *m, struct dt_ckpt_file **files, int *nfiles)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    *files = NULL;
    *nfiles = 0;
    struct dt_ydoc *doc;
    if (dt_ydoc_load_file(path, &doc) != DT_SUCCESS) {
        char why[512];
        snprintf(why, sizeof why, "%s", dt_error_msg());
        return dt_error(DT_ERR_CKPT, "%s: error: the manifest cannot be read, so this is not a checkpoint (%.*s)", path,
                        (int)strcspn(why, "\n"), why);
    }
    const struct dt_ynode *r = dt_ydoc_root(doc);
    const char *bad = NULL; /* the first key missing or malformed */
    *m = (struct dt_run_state){0};
    if (strcmp(text(r, "format", &bad), FORMAT) || integer(r, "version", &bad) != DT_CKPT_VERSION) {
        dt_ydoc_free(doc);
        return dt_error(DT_ERR_CKPT, "%s: error: not a dtrun checkpoint manifest of version %d", path, DT_CKPT_VERSION);
    }
    m->step = integer(r, "step", &bad);
    m->opt_steps = integer(r, "opt_steps", &bad);
    m->samples = integer(r, "samples", &bad);
    m->tokens = integer(r, "tokens", &bad);
    copy(m->run_id, sizeof m->run_id, r, "run_id", &bad);
    m->loss = number(r, "loss", &bad);
    m->val_loss = number(r, "val_loss", &bad);
    copy(m->config_hash, sizeof m->config_hash, r, "config_hash", &bad);
    copy(m->model, sizeof m->model, r, "model", &bad);
    m->nparams = integer(r, "params", &bad);
    copy(m->optimizer, sizeof m->optimizer, r, "optimizer", &bad);
    m->narrays = (int)integer(r, "arrays", &bad);
    copy(m->strategy, sizeof m->strategy, r, "strategy", &bad);
    m->stage = (int)integer(r, "stage", &bad);
    m->world = (int)integer(r, "world", &bad);
    copy(m->precision, sizeof m->precision, r, "precision", &bad);
    m->restart = (int)integer(r, "restart_count", &bad);
    copy(m->saved_at, sizeof m->saved_at, r, "saved_at", &bad);
    const struct dt_ynode *rng = get(r, "rng"), *sc = get(r, "loss_scaler"), *fl = get(r, "files");
    m->seed = strtoull(text(rng, "seed", &bad), NULL, 10);
    m->scaler.scale = number(sc, "scale", &bad);
    if (isnan(m->scaler.scale) && !bad) bad = "scale"; /* null: a loss may be unknown, the scale never */
    m->scaler.cur_hysteresis = integer(sc, "cur_hysteresis", &bad);
    m->scaler.cur_iter = integer(sc, "cur_iter", &bad);
    m->scaler.last_overflow_iter = integer(sc, "last_overflow_iter", &bad);
    m->scaler.skipped = integer(sc, "skipped", &bad);
    const struct dt_ynode *f8 = get(r, "fp8");
    if (f8) {
        m->fp8_tensors = (int)integer(f8, "tensors", &bad);
        m->fp8_history = (int)integer(f8, "amax_history_len", &bad);
        m->fp8_xxh64 = strtoull(text(f8, "xxh64", &bad), NULL, 16);
        if (!bad && (m->fp8_tensors < 1 || m->fp8_history < 0)) bad = "fp8";
    }
    if (!bad && (!fl || fl->kind != DT_Y_MAP || fl->n == 0)) bad = "files";
    if (!bad && (m->narrays < 1 || m->narrays > 16)) bad = "arrays";
    if (!bad && (m->step < 0 || m->world < 1 || m->nparams < 1)) bad = m->step < 0 ? "step" : m->world < 1 ? "world" : "params";
    if (!bad) {
        *files = calloc(fl->n, sizeof **files);
        if (!*files) bad = "files";
        for (size_t i = 0; *files && i < fl->n; i++) {
            struct dt_ckpt_file *f = &(*files)[i];
            snprintf(f->name, sizeof f->name, "%s", fl->pairs[i].key->str);
            f->bytes = integer(fl->pairs[i].value, "bytes", &bad);
            f->xxh64 = strtoull(text(fl->pairs[i].value, "xxh64", &bad), NULL, 16);
            /* a file name is a name in this directory, nothing else */
            if ((strchr(f->name, '/') || f->name[0] == '.' || f->bytes < 0) && !bad) bad = "files";
        }
        *nfiles = (int)fl->n;
    }
    dt_ydoc_free(doc);
    if (bad) {
        free(*files);
        *files = NULL;
        return dt_error(DT_ERR_CKPT, "%s: error: the manifest is incomplete or malformed (at \"%s\"), so this is not "
                        "a checkpoint", path, bad);
    }
    return DT_SUCCESS;
}
