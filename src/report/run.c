/*
 * run.c - read a run for the report (run.h): events.jsonl line by line (each line checked by
 * dt_json_valid, then read into a node tree by the config layer's YAML/JSON composer), and
 * config.yaml (its text for the page, its values by dotted key for comparing runs, the synthetic
 * source's best possible loss).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "config/ynode.h"
#include "core/error.h"
#include "data/markov.h"
#include "data/teacher.h"
#include "events/json.h"
#include "report/run.h"
#include "report/svg.h"

#define NOTES_MAX 6 /* skipped lines named one by one; the rest are counted */
#define RECORD_START "{\"schema_version\":"

static const char *const col_key[DT_NCOLS] = {
    [DT_COL_STEP] = "step", [DT_COL_TOKENS] = "tokens", [DT_COL_LOSS] = "loss", [DT_COL_LR] = "lr",
    [DT_COL_GRAD_NORM] = "grad_norm", [DT_COL_LOSS_SCALE] = "loss_scale", [DT_COL_SKIPPED] = "skipped_steps",
    [DT_COL_TOKENS_PER_S] = "tokens_per_s", [DT_COL_MFU] = "mfu", [DT_COL_STEP_MS] = "step_ms",
    [DT_COL_HOST_MEM] = "peak_memory_bytes", [DT_COL_DEV_ALLOC] = "device_peak_allocated_bytes",
    [DT_COL_DEV_RESERVED] = "device_reserved_bytes"};

struct reader {
    struct dt_report_run *r;
    uint64_t *seen; /* FNV-1a of each record id read, open addressing (0: empty) */
    size_t nseen, seen_cap;
    int life;       /* the life of the last record */
    size_t key_cap; /* of r->key and r->value */
    bool oom;
};

/* ------------------------------------------------------------ node access */

static const struct dt_ynode *get(const struct dt_ynode *map, const char *key)
{
    for (size_t i = 0; map && map->kind == DT_Y_MAP && i < map->n; i++)
        if (!strcmp(map->pairs[i].key->str, key)) return map->pairs[i].value;
    return NULL;
}

/* the number at key; NAN when missing, null or not a number */
static double num(const struct dt_ynode *map, const char *key)
{
    const struct dt_ynode *v = get(map, key);
    if (!v || v->kind != DT_Y_SCALAR || v->quoted || dt_ynode_is_null(v)) return NAN;
    char *end;
    double d = strtod(v->str, &end);
    return *end || end == v->str ? NAN : d;
}

/* the text at key; NULL when missing, null or not a scalar */
static const char *str(const struct dt_ynode *map, const char *key)
{
    const struct dt_ynode *v = get(map, key);
    return v && v->kind == DT_Y_SCALAR && !dt_ynode_is_null(v) ? v->str : NULL;
}

/* ------------------------------------------------------------ memory */

static bool grow(struct reader *rd, void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return !(rd->oom = true);
    *p = q;
    *cap = c;
    return true;
}

static void add_note(struct reader *rd, char *text)
{
    struct dt_report_run *r = rd->r;
    char **n = text ? realloc(r->note, (size_t)(r->nnotes + 1) * sizeof *n) : NULL;
    if (!n) {
        free(text);
        rd->oom = true;
        return;
    }
    r->note = n;
    r->note[r->nnotes++] = text;
}

/* ------------------------------------------------------------ records */

/* whether the record id was read before (delivery is at least once: a webhook log repeats some) */
static bool seen_before(struct reader *rd, const char *id)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *s = (const unsigned char *)id; *s; s++) h = (h ^ *s) * 1099511628211ull;
    h |= 1;
    if (rd->nseen * 2 >= rd->seen_cap) {
        size_t cap = rd->seen_cap ? rd->seen_cap * 2 : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) return !(rd->oom = true);
        for (size_t i = 0; i < rd->seen_cap; i++)
            if (rd->seen[i])
                for (size_t j = rd->seen[i] & (cap - 1);; j = (j + 1) & (cap - 1))
                    if (!t[j]) {
                        t[j] = rd->seen[i];
                        break;
                    }
        free(rd->seen);
        rd->seen = t;
        rd->seen_cap = cap;
    }
    for (size_t j = h & (rd->seen_cap - 1);; j = (j + 1) & (rd->seen_cap - 1)) {
        if (rd->seen[j] == h) return true;
        if (!rd->seen[j]) {
            rd->seen[j] = h;
            rd->nseen++;
            return false;
        }
    }
}

/* the life of a record: the start token of its id, "<run_id>-<start>-r<rank>-<seq>" (a record
 * without one, such as the SPANK plugin's task_failed, belongs to the life before it) */
static int life_of(struct reader *rd, const char *id)
{
    struct dt_report_run *r = rd->r;
    const char *a = id ? strchr(id, '-') : NULL, *b = a ? strchr(a + 1, '-') : NULL;
    char start[16] = "";
    if (a && b && strncmp(id, "slurm-", 6) && (size_t)(b - a - 1) < sizeof start)
        snprintf(start, sizeof start, "%.*s", (int)(b - a - 1), a + 1);
    if (!start[0] && r->nlives > 0) return rd->life;
    for (int i = 0; i < r->nlives; i++)
        if (!strcmp(r->life[i].start, start)) return rd->life = i;
    struct dt_report_life *l = realloc(r->life, (size_t)(r->nlives + 1) * sizeof *l);
    if (!l) {
        rd->oom = true;
        return rd->life;
    }
    r->life = l;
    int64_t at = r->n ? (int64_t)r->col[DT_COL_STEP][r->n - 1] : 0;
    l[r->nlives] = (struct dt_report_life){.from_step = at, .last_step = at};
    snprintf(l[r->nlives].start, sizeof l[r->nlives].start, "%s", start);
    return rd->life = r->nlives++;
}

/* keep the curves at steps up to `step` only (a start that resumed there trains the rest again) */
static void truncate_after(struct dt_report_run *r, double step)
{
    while (r->n > 0 && r->col[DT_COL_STEP][r->n - 1] > step) r->n--;
    while (r->neval > 0 && r->eval_step[r->neval - 1] > step) r->neval--;
}

static bool group_grow(struct reader *rd, struct dt_report_group *g, size_t cap)
{
    for (int i = 0; i < g->n; i++) {
        double *c = realloc(g->col[i], cap * sizeof *c);
        if (!c) return !(rd->oom = true);
        g->col[i] = c;
    }
    return true;
}

/* the members of obj as the row's values in g, a new member a new column (NAN in earlier rows) */
static void group_set(struct reader *rd, struct dt_report_group *g, const struct dt_ynode *obj, size_t row)
{
    for (int i = 0; i < g->n; i++) g->col[i][row] = NAN;
    for (size_t k = 0; obj && obj->kind == DT_Y_MAP && k < obj->n; k++) {
        const char *name = obj->pairs[k].key->str;
        int i = 0;
        while (i < g->n && strcmp(g->name[i], name)) i++;
        if (i == g->n) {
            if (g->n == DT_REPORT_GROUP_MAX) continue;
            double *c = malloc(rd->r->cap * sizeof *c);
            char *s = strdup(name);
            if (!c || !s) {
                free(c), free(s);
                rd->oom = true;
                return;
            }
            for (size_t j = 0; j <= row; j++) c[j] = NAN;
            g->col[i] = c, g->name[i] = s;
            g->n++;
        }
        g->col[i][row] = num(obj, name);
    }
}

static void metrics(struct reader *rd, const struct dt_ynode *m, int life)
{
    struct dt_report_run *r = rd->r;
    double step = num(m, "step");
    if (!isfinite(step)) return;
    truncate_after(r, step - 1); /* steps stay ascending whatever the file says */
    if (r->n == r->cap) { /* every column at once, so one capacity holds for all */
        size_t cap = r->cap ? r->cap * 2 : 256;
        for (int c = 0; c < DT_NCOLS; c++) {
            double *p = realloc(r->col[c], cap * sizeof *p);
            if (!p) {
                rd->oom = true;
                return;
            }
            r->col[c] = p;
        }
        if (!group_grow(rd, &r->phases, cap) || !group_grow(rd, &r->ops, cap)) return;
        r->cap = cap;
    }
    for (int c = 0; c < DT_NCOLS; c++) r->col[c][r->n] = num(m, col_key[c]);
    group_set(rd, &r->phases, get(m, "step_ms_breakdown"), r->n);
    group_set(rd, &r->ops, get(m, "op_ms"), r->n);
    r->n++;
    if ((int64_t)step > r->life[life].last_step) r->life[life].last_step = (int64_t)step;
}

static void eval(struct reader *rd, const struct dt_ynode *m)
{
    struct dt_report_run *r = rd->r;
    double step = num(m, "step"), loss = num(m, "val_loss");
    if (!isfinite(step)) return;
    while (r->neval > 0 && r->eval_step[r->neval - 1] >= step) r->neval--;
    size_t cap = r->eval_cap;
    if (!grow(rd, (void **)&r->eval_step, &cap, r->neval + 1, sizeof(double))) return;
    cap = r->eval_cap;
    if (!grow(rd, (void **)&r->eval_loss, &cap, r->neval + 1, sizeof(double))) return;
    r->eval_cap = cap;
    r->eval_step[r->neval] = step;
    r->eval_loss[r->neval++] = loss;
}

static void sample(struct reader *rd, const struct dt_ynode *m)
{
    struct dt_report_run *r = rd->r;
    const char *prompt = str(m, "prompt"), *text = str(m, "text");
    if (!text || !grow(rd, (void **)&r->samples, &r->samples_cap, r->nsamples + 1, sizeof *r->samples)) return;
    struct dt_report_sample *s = &r->samples[r->nsamples];
    *s = (struct dt_report_sample){num(m, "step"), strdup(prompt ? prompt : ""), strdup(text)};
    if (!s->prompt || !s->text) {
        free(s->prompt), free(s->text);
        rd->oom = true;
        return;
    }
    r->nsamples++;
}

static void event(struct reader *rd, enum dt_report_kind kind, double step, int life, bool bad, char *what)
{
    struct dt_report_run *r = rd->r;
    if (!what || !grow(rd, (void **)&r->ev, &r->ev_cap, r->nev + 1, sizeof *r->ev)) {
        free(what);
        rd->oom = true;
        return;
    }
    /* a record without a step (run_failed before the first, task_failed) is placed where the run was */
    if (!isfinite(step)) step = r->nlives ? (double)r->life[life].last_step : 0;
    r->ev[r->nev++] = (struct dt_report_event){.kind = kind, .step = (int64_t)step, .life = life, .bad = bad,
                                               .what = what};
}

static void set_ended(struct reader *rd, int life, const char *what)
{
    free(rd->r->life[life].ended);
    if (!(rd->r->life[life].ended = strdup(what))) rd->oom = true;
}

static void started(struct reader *rd, const struct dt_ynode *m, int life)
{
    struct dt_report_life *l = &rd->r->life[life];
    const struct dt_ynode *res = get(m, "resumed"), *world = get(m, "world");
    double from = res && res->kind == DT_Y_MAP ? num(res, "step") : 0;
    if (!isfinite(from)) from = 0;
    truncate_after(rd->r, from);
    l->from_step = l->last_step = (int64_t)from;
    l->restart_count = isfinite(num(m, "restart_count")) ? (int)num(m, "restart_count") : 0;
    const char *t = str(m, "time"), *w = str(world, "description"), *dev = str(m, "device");
    const char *strat = str(m, "strategy"), *prec = str(m, "precision");
    free(l->started);
    l->started = dt_out_format("%s on %s; %s; %s; %s", t ? t : "?", w ? w : "an unknown world", dev ? dev : "?",
                            strat ? strat : "?", prec ? prec : "?");
    if (!l->started) {
        rd->oom = true;
        return;
    }
    char from_text[96] = "from scratch";
    if (from > 0) snprintf(from_text, sizeof from_text, "resumed from step %.0f", from);
    event(rd, DT_EV_START, from, life, false,
          dt_out_format("life %d started (restart %d), %s, on %s", life + 1, l->restart_count, from_text,
                     w ? w : "an unknown world"));
}

/* GCC 12's analyzer loses the lives array once life_of() has grown it through rd->r (a store at a
 * computed index, as in ynode.c and webhook.c) and calls it leaked: a false positive,
 * dt_report_run_free() frees it (#16) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
static void record(struct reader *rd, const struct dt_ynode *m)
{
    struct dt_report_run *r = rd->r;
    const char *type = str(m, "type"), *id = str(m, "id");
    if (!type || (id && seen_before(rd, id))) return;
    int life = life_of(rd, id);
    if (rd->oom) return;
    r->records++;
    if (!r->name && str(m, "run_name") && !(r->name = strdup(str(m, "run_name")))) rd->oom = true;
    double step = num(m, "step");
    const char *error = str(m, "error");
    if (!strcmp(type, "metrics")) {
        metrics(rd, m, life);
    } else if (!strcmp(type, "eval")) {
        eval(rd, m);
    } else if (!strcmp(type, "sample")) {
        sample(rd, m);
    } else if (!strcmp(type, "run_started")) {
        started(rd, m, life);
    } else if (!strcmp(type, "checkpoint_saved")) {
        event(rd, DT_EV_CKPT_SAVED, step, life, false,
              dt_out_format("checkpoint saved at step %.0f: %.1f MB in %.2f s", step, num(m, "bytes") / 1e6,
                         num(m, "seconds")));
    } else if (!strcmp(type, "checkpoint_failed")) {
        event(rd, DT_EV_CKPT_FAILED, step, life, true,
              dt_out_format("checkpoint failed at step %.0f: %s", step, error ? error : "?"));
    } else if (!strcmp(type, "preempted")) {
        const char *sig = str(m, "signal"), *saved = str(m, "checkpointed");
        char *what = dt_out_format("preempted by %s at step %.0f, %s", sig ? sig : "a signal", step,
                                saved && !strcmp(saved, "true") ? "its state saved" : "no checkpoint saved");
        if (what) set_ended(rd, life, what);
        event(rd, DT_EV_PREEMPTED, step, life, false, what);
    } else if (!strcmp(type, "task_failed")) {
        const char *sig = str(m, "signal"), *node = str(m, "node"), *oom = str(m, "oom_killed");
        char how[48];
        if (sig) snprintf(how, sizeof how, "%s", sig);
        else snprintf(how, sizeof how, "exit status %.0f", num(m, "exit_status"));
        event(rd, DT_EV_TASK_FAILED, NAN, life, true,
              dt_out_format("task failed: rank %.0f on %s, %s%s", num(m, "rank"), node ? node : "?", how,
                            oom && !strcmp(oom, "true") ? " (OOM killed)" : ""));
    } else if (!strcmp(type, "run_finished")) {
        char *what = dt_out_format("run finished: %.0f steps, loss %.4g, validation %.4g, %.0f s", num(m, "steps"),
                                num(m, "loss"), num(m, "val_loss"), num(m, "seconds"));
        if (what) set_ended(rd, life, what);
        event(rd, DT_EV_END, num(m, "steps"), life, false, what);
    } else if (!strcmp(type, "run_failed")) {
        char *what = dt_out_format("run failed at step %.0f (rank %.0f): %s", step, num(m, "rank"),
                                   error ? error : "?");
        if (what) set_ended(rd, life, what);
        event(rd, DT_EV_END, step, life, true, what);
    }
}
#pragma GCC diagnostic pop

/* one line of events.jsonl: a record, or a webhook batch (an array of them) */
static bool line_records(struct reader *rd, const char *name, const char *s, size_t len)
{
    if (!dt_json_valid(s, len)) return false;
    struct dt_ydoc *doc;
    if (dt_ydoc_parse(name, s, len, &doc) != DT_SUCCESS) return false;
    const struct dt_ynode *root = dt_ydoc_root(doc);
    bool records = root && root->kind != DT_Y_SCALAR; /* asked before the document is freed */
    if (root && root->kind == DT_Y_SEQ)
        for (size_t i = 0; i < root->n; i++) record(rd, root->items[i]);
    else if (root && root->kind == DT_Y_MAP) record(rd, root);
    dt_ydoc_free(doc);
    return records;
}

static dt_status_t read_events(struct reader *rd, const char *path)
{
    struct dt_report_run *r = rd->r;
    FILE *f = fopen(path, "r");
    if (!f)
        return dt_error(DT_ERR_USAGE, "%s: error: cannot read the events: %s\n  hint: give the run.dir of a run (the "
                        "directory with its events.jsonl)", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, lines = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0 && !rd->oom) {
        lines++;
        bool whole = line[len - 1] == '\n';
        if (whole) line[--len] = '\0';
        if (len == 0 || line_records(rd, path, line, (size_t)len)) continue;
        /* a line torn by a kill mid-write, and the next life's first record appended to it */
        const char *rest = NULL;
        for (const char *p = strstr(line + 1, RECORD_START); p; p = strstr(p + 1, RECORD_START)) rest = p;
        bool recovered = rest && line_records(rd, path, rest, (size_t)(line + len - rest));
        if (++r->lines_skipped > NOTES_MAX) continue;
        if (recovered)
            add_note(rd, dt_out_format("%s:%zu: a record torn by a crash (%zu bytes) and the next one written "
                                    "after it: the torn part is skipped", path, lines, (size_t)(rest - line)));
        else if (!whole)
            add_note(rd, dt_out_format("%s:%zu: the last line is torn (the run was killed while writing it): "
                                    "skipped", path, lines));
        else add_note(rd, dt_out_format("%s:%zu: not an event record: skipped", path, lines));
    }
    int err = ferror(f);
    free(line);
    fclose(f);
    if (r->lines_skipped > NOTES_MAX)
        add_note(rd, dt_out_format("%s: %zu more lines skipped", path, r->lines_skipped - NOTES_MAX));
    if (rd->oom) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory reading the events", path);
    if (err) return dt_error(DT_ERR_SYSTEM, "%s: error: reading the events failed", path);
    if (r->records == 0)
        return dt_error(DT_ERR_USAGE, "%s: error: no event records in it (%zu line%s), so there is nothing to draw\n"
                        "  hint: a run writes its first record as it starts; give the run.dir of a run that has "
                        "started", path, lines, lines == 1 ? "" : "s");
    return DT_SUCCESS;
}

/* ------------------------------------------------------------ config.yaml */

/* a value as a line of flow YAML: [0.9, 0.95], {type: linear, start: 0.0} */
static void render(struct dt_out *o, const struct dt_ynode *n)
{
    if (n->kind == DT_Y_SCALAR) {
        dt_out_printf(o, "%s", n->str);
        return;
    }
    dt_out_printf(o, "%s", n->kind == DT_Y_SEQ ? "[" : "{");
    for (size_t i = 0; i < n->n; i++) {
        if (i) dt_out_printf(o, ", ");
        if (n->kind == DT_Y_MAP) dt_out_printf(o, "%s: ", n->pairs[i].key->str);
        render(o, n->kind == DT_Y_SEQ ? n->items[i] : n->pairs[i].value);
    }
    dt_out_printf(o, "%s", n->kind == DT_Y_SEQ ? "]" : "}");
}

static void flatten(struct reader *rd, const struct dt_ynode *map, const char *prefix)
{
    struct dt_report_run *r = rd->r;
    for (size_t i = 0; i < map->n && !rd->oom; i++) {
        const struct dt_ynode *v = map->pairs[i].value;
        char *key = dt_out_format("%s%s%s", prefix, *prefix ? "." : "", map->pairs[i].key->str);
        if (!key) {
            rd->oom = true;
            return;
        }
        if (v->kind == DT_Y_MAP && v->n > 0) {
            flatten(rd, v, key);
            free(key);
            continue;
        }
        struct dt_out o = {0};
        render(&o, v);
        size_t cap = rd->key_cap;
        if (o.oom || !grow(rd, (void **)&r->key, &cap, r->nkeys + 1, sizeof(char *)) ||
            !grow(rd, (void **)&r->value, &rd->key_cap, r->nkeys + 1, sizeof(char *))) {
            free(key), dt_out_free(&o);
            rd->oom = true;
            return;
        }
        r->key[r->nkeys] = key;
        r->value[r->nkeys++] = o.p ? o.p : strdup("");
    }
}

static const char *config_value(const struct dt_report_run *r, const char *key)
{
    for (size_t i = 0; i < r->nkeys; i++)
        if (!strcmp(r->key[i], key)) return r->value[i];
    return NULL;
}

static double config_num(const struct dt_report_run *r, const char *key)
{
    const char *v = config_value(r, key);
    return v ? strtod(v, NULL) : NAN;
}

/* The best possible loss of the built-in synthetic sources (data/markov.h, data/teacher.h), from
 * the keys the run's data loader read; NAN for token shards */
static double loss_floor(const struct dt_report_run *r)
{
    const char *train = config_value(r, "data.train"), *kind = config_value(r, "data.synthetic.kind");
    if (!train || strcmp(train, "null") || !kind) return NAN;
    if (!strcmp(kind, "teacher")) {
        const char *task = config_value(r, "model.mlp.task");
        struct dt_teacher t = {.regression = task && !strcmp(task, "regression"),
                               .noise = config_num(r, "data.synthetic.noise")};
        return dt_teacher_loss_floor(&t);
    }
    double order = config_num(r, "data.synthetic.order"), alphabet = config_num(r, "data.synthetic.alphabet");
    double support = config_num(r, "data.synthetic.support"), T = config_num(r, "model.seq_len");
    if (strcmp(kind, "markov") || !(order >= 1) || !(alphabet >= 2) || !(support >= 1 && support <= 64) || !(T >= 1))
        return NAN;
    struct dt_markov mk;
    dt_markov_init(&mk, (int)order, (int)alphabet, (int)support, 0);
    return dt_markov_loss_floor(&mk, (int)T);
}

static void read_config(struct reader *rd, const char *path)
{
    struct dt_report_run *r = rd->r;
    FILE *f = fopen(path, "r");
    if (!f) {
        add_note(rd, dt_out_format("%s: %s: the run's config is not shown", path, strerror(errno)));
        return;
    }
    struct dt_out o = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) dt_out_printf(&o, "%.*s", (int)n, buf);
    fclose(f);
    if (o.oom) {
        dt_out_free(&o);
        rd->oom = true;
        return;
    }
    r->config_text = o.p ? o.p : strdup("");
    struct dt_ydoc *doc;
    if (dt_ydoc_parse(path, r->config_text, strlen(r->config_text), &doc) != DT_SUCCESS) {
        const char *why = dt_error_msg();
        add_note(rd, dt_out_format("%s: cannot be read (%.*s): its keys are not compared", path,
                                (int)strcspn(why, "\n"), why));
        return;
    }
    const struct dt_ynode *root = dt_ydoc_root(doc);
    if (root && root->kind == DT_Y_MAP) flatten(rd, root, "");
    dt_ydoc_free(doc);
    r->loss_floor = loss_floor(r);
}

/* ------------------------------------------------------------ the run */

dt_status_t dt_report_run_read(const char *dir, struct dt_report_run *r)
{
    *r = (struct dt_report_run){.loss_floor = NAN};
    struct reader rd = {.r = r};
    struct stat st;
    if (stat(dir, &st) != 0)
        return dt_error(DT_ERR_USAGE, "%s: error: no such run directory\n  hint: give the run.dir of a run (the "
                        "directory with its events.jsonl and config.yaml)", dir);
    bool is_dir = S_ISDIR(st.st_mode);
    r->dir = strdup(dir);
    r->events_path = is_dir ? dt_out_format("%s/events.jsonl", dir) : strdup(dir);
    if (!r->dir || !r->events_path) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", dir);
    if (is_dir && stat(r->events_path, &st) != 0)
        return dt_error(DT_ERR_USAGE, "%s: error: no events here (no events.jsonl), so there is nothing to draw\n"
                        "  hint: give the run.dir of a run that has started (a run with events.jsonl: null "
                        "keeps none)", dir);
    dt_status_t rc = read_events(&rd, r->events_path);
    if (rc == DT_SUCCESS && is_dir) {
        char *cfg = dt_out_format("%s/config.yaml", dir);
        if (cfg) read_config(&rd, cfg);
        else rd.oom = true;
        free(cfg);
    }
    if (rc == DT_SUCCESS && rd.oom) rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory", dir);
    for (int i = 0; rc == DT_SUCCESS && i < r->nlives - 1; i++)
        if (!r->life[i].ended) set_ended(&rd, i, "no last word (killed?)");
    free(rd.seen);
    return rc;
}

void dt_report_run_free(struct dt_report_run *r)
{
    free(r->dir), free(r->events_path), free(r->name);
    for (int c = 0; c < DT_NCOLS; c++) free(r->col[c]);
    struct dt_report_group *g[] = {&r->phases, &r->ops};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < g[k]->n; i++) free(g[k]->name[i]), free(g[k]->col[i]);
    free(r->eval_step), free(r->eval_loss);
    for (size_t i = 0; i < r->nsamples; i++) free(r->samples[i].prompt), free(r->samples[i].text);
    free(r->samples);
    for (size_t i = 0; i < r->nev; i++) free(r->ev[i].what);
    free(r->ev);
    for (int i = 0; i < r->nlives; i++) free(r->life[i].started), free(r->life[i].ended);
    free(r->life);
    free(r->config_text);
    for (size_t i = 0; i < r->nkeys; i++) free(r->key[i]), free(r->value[i]);
    free(r->key), free(r->value);
    for (int i = 0; i < r->nnotes; i++) free(r->note[i]);
    free(r->note);
    *r = (struct dt_report_run){0};
}

double dt_report_tokens_at(const struct dt_report_run *r, double step)
{
    const double *s = r->col[DT_COL_STEP], *t = r->col[DT_COL_TOKENS];
    size_t lo = 0, hi = r->n; /* the first record at or past step */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s[mid] < step) lo = mid + 1;
        else hi = mid;
    }
    size_t i = lo < r->n ? lo : r->n - 1;
    /* the same tokens per step as that record (the global batch is fixed) */
    return r->n && s[i] > 0 ? t[i] * step / s[i] : NAN;
}
