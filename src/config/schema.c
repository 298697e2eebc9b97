/*
 * schema.c - see schema.h. Parsing is strict on purpose: a quoted number, a
 * bool spelled "yes", a float where an integer belongs or a value out of range
 * is an error with the key, its place and what it accepts.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <strings.h>
#include "config/schema.h"
#include "config/suggest.h"
#include "config/timestr.h"
#include "core/error.h"

const struct dt_key *dt_schema_find(const struct dt_schema *s, const char *path, size_t *index)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->keys[i].path, path) == 0) {
            if (index) *index = i;
            return &s->keys[i];
        }
    }
    return NULL;
}

static bool is_section(const struct dt_schema *s, const char *path)
{
    size_t len = strlen(path);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->keys[i].path, path, len) == 0 && s->keys[i].path[len] == '.') return true;
    return false;
}

const char *dt_enum_str(const struct dt_enum_name *names, int v)
{
    for (const struct dt_enum_name *e = names; e && e->name; e++)
        if (e->value == v) return e->name;
    return "?";
}

static void enum_list(const struct dt_enum_name *names, char *buf, size_t n)
{
    buf[0] = '\0';
    int last = -1000;
    for (const struct dt_enum_name *e = names; e->name; e++) {
        if (e->value < 0 || e->value == last) continue;
        bool seen = false;
        for (const struct dt_enum_name *p = names; p != e; p++) seen |= p->value == e->value;
        if (seen) continue;
        last = e->value;
        if (buf[0]) strncat(buf, ", ", n - strlen(buf) - 1);
        strncat(buf, e->name, n - strlen(buf) - 1);
    }
}

const char *dt_key_accepts(const struct dt_key *k, char *buf, size_t n)
{
    char list[512];
    switch (k->type) {
    case DT_T_BOOL: snprintf(buf, n, "true or false"); break;
    case DT_T_INT: snprintf(buf, n, "a whole number"); break;
    case DT_T_FLOAT: snprintf(buf, n, "a number"); break;
    case DT_T_STR: snprintf(buf, n, "a string"); break;
    case DT_T_ENUM:
        enum_list(k->names, list, sizeof list);
        snprintf(buf, n, "one of %s", list);
        break;
    case DT_T_DURATION: {
        char units[80] = "";
        for (int u = 0; u <= DT_TU_SEC; u++) {
            if (!(k->units & (1u << u))) continue;
            if (units[0]) strcat(units, ", ");
            strcat(units, u == DT_TU_SEC ? "sec, min, h" : dt_time_unit_name(u));
        }
        snprintf(buf, n, "a duration (number + %s)", units);
        break;
    }
    case DT_T_SECONDS: snprintf(buf, n, "a time span such as 600s, 10m or 1h"); break;
    case DT_T_FLOATS:
        if (k->count) snprintf(buf, n, "a list of %d numbers", k->count);
        else snprintf(buf, n, "a list of numbers");
        break;
    case DT_T_ANY: snprintf(buf, n, "any value"); break;
    case DT_T_PHASES: snprintf(buf, n, "a list of {type: constant|linear|cosine, start, end, length, scaling}"); break;
    }
    return buf;
}

/* ------------------------------------------------------------ parsing */

union value {
    struct dt_phases ph;
    bool b;
    int64_t i;
    double f;
    char *s;
    int e;
    struct dt_duration d;
    struct dt_floats fl;
};

static int range_check(const struct dt_key *k, double v, char *why, size_t n)
{
    bool excl = (k->flags & DT_F_MIN_EXCL) != 0;
    if ((excl ? v > k->min : v >= k->min) && v <= k->max) return 0;
    if (k->max >= 1e300) snprintf(why, n, "must be %s %.15g", excl ? ">" : ">=", k->min);
    else if (excl) snprintf(why, n, "must be > %.15g and <= %.15g", k->min, k->max);
    else snprintf(why, n, "must be between %.15g and %.15g", k->min, k->max);
    return -1;
}

static int parse_float_text(const char *s, double *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || isspace((unsigned char)*s)) {
        snprintf(why, n, "expected a number, got '%s'", s);
        return -1;
    }
    if (errno == ERANGE || !isfinite(v)) {
        snprintf(why, n, "'%s' is out of range for a number", s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_int_text(const char *s, int64_t *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end != s && !*end && errno == 0) {
        *out = v;
        return 0;
    }
    if (end != s && !*end && errno == ERANGE) {
        snprintf(why, n, "'%s' does not fit in a 64-bit integer", s);
        return -1;
    }
    /* DeepSpeed JSONs write counts as 1e9 or 2e8 */
    double d;
    if (parse_float_text(s, &d, why, n) != 0) {
        snprintf(why, n, "expected a whole number, got '%s'", s);
        return -1;
    }
    if (d != floor(d)) {
        snprintf(why, n, "expected a whole number, got '%s'", s);
        return -1;
    }
    if (fabs(d) >= 9.2233720368547758e18) {
        snprintf(why, n, "'%s' does not fit in a 64-bit integer", s);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

static int parse_scalar(const struct dt_key *k, const struct dt_ynode *v, union value *out, char *why, size_t n)
{
    const char *s = v->str;
    bool numeric = k->type == DT_T_BOOL || k->type == DT_T_INT || k->type == DT_T_FLOAT;
    if (numeric && v->quoted) {
        snprintf(why, n, "expected %s, got the string \"%s\" (remove the quotes)",
                 k->type == DT_T_BOOL ? "true or false" : k->type == DT_T_INT ? "a whole number" : "a number", s);
        return -1;
    }
    switch (k->type) {
    case DT_T_BOOL:
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) out->b = true;
        else if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) out->b = false;
        else {
            snprintf(why, n, "expected true or false, got '%s'", s);
            return -1;
        }
        return 0;
    case DT_T_INT:
        if (parse_int_text(s, &out->i, why, n)) return -1;
        return range_check(k, (double)out->i, why, n);
    case DT_T_FLOAT:
        if (parse_float_text(s, &out->f, why, n)) return -1;
        return range_check(k, out->f, why, n);
    case DT_T_STR:
        if (!(out->s = strdup(s))) {
            snprintf(why, n, "out of memory");
            return -1;
        }
        return 0;
    case DT_T_ENUM:
        for (const struct dt_enum_name *e = k->names; e->name; e++) {
            if (strcasecmp(e->name, s) != 0) continue;
            if (e->value < 0) {
                snprintf(why, n, "'%s' is not supported: %s", s, e->note);
                return -1;
            }
            out->e = e->value;
            return 0;
        }
        {
            char list[512];
            enum_list(k->names, list, sizeof list);
            const char *cands[64];
            size_t nc = 0;
            for (const struct dt_enum_name *e = k->names; e->name && nc < 64; e++)
                if (e->value >= 0) cands[nc++] = e->name;
            const char *sug = dt_suggest(s, cands, nc);
            if (sug) snprintf(why, n, "'%s' is not one of %s (did you mean '%s'?)", s, list, sug);
            else snprintf(why, n, "'%s' is not one of %s", s, list);
        }
        return -1;
    case DT_T_DURATION:
        if (dt_duration_parse(s, k->units, &out->d, why, n)) return -1;
        return range_check(k, out->d.value, why, n);
    case DT_T_SECONDS:
        if (dt_seconds_parse(s, &out->f, why, n)) return -1;
        return range_check(k, out->f, why, n);
    case DT_T_FLOATS:
    case DT_T_PHASES: break;
    case DT_T_ANY: return 0;
    }
    snprintf(why, n, "expected a list, got '%s'", s);
    return -1;
}

static const struct dt_enum_name phase_types[] = {
    {"constant", DT_PHASE_CONSTANT, NULL}, {"linear", DT_PHASE_LINEAR, NULL}, {"cosine", DT_PHASE_COSINE, NULL}, {0}};
static const struct dt_enum_name phase_scalings[] = {
    {"rescaled", DT_SCALING_RESCALED, NULL}, {"fixed", DT_SCALING_FIXED, NULL}, {0}};
/* the fields of one phase, parsed by the same code as top-level keys */
static const struct dt_key phase_keys[] = {
    {.path = "type", .type = DT_T_ENUM, .offset = offsetof(struct dt_phase, type), .names = phase_types},
    {.path = "start", .type = DT_T_FLOAT, .offset = offsetof(struct dt_phase, start), .min = 0, .max = 1e6},
    {.path = "end", .type = DT_T_FLOAT, .offset = offsetof(struct dt_phase, end), .min = 0, .max = 1e6},
    {.path = "length", .type = DT_T_FLOAT, .offset = offsetof(struct dt_phase, length), .min = 0, .max = 1,
     .flags = DT_F_MIN_EXCL},
    {.path = "scaling", .type = DT_T_ENUM, .offset = offsetof(struct dt_phase, scaling), .names = phase_scalings},
};

static int parse_scalar(const struct dt_key *k, const struct dt_ynode *v, union value *out, char *why, size_t n);

/* fvcore's validation: lengths sum to 1 within 1e-3, the last one absorbs the rest. */
static int parse_phases(const struct dt_ynode *v, struct dt_phases *out, char *why, size_t n)
{
    if (v->kind != DT_Y_SEQ || v->n == 0 || v->n > DT_PHASES_MAX) {
        snprintf(why, n, "expected a list of 1 to %d phases", DT_PHASES_MAX);
        return -1;
    }
    out->n = (int)v->n;
    double sum = 0;
    for (size_t i = 0; i < v->n; i++) {
        const struct dt_ynode *m = v->items[i];
        struct dt_phase *ph = &out->p[i];
        *ph = (struct dt_phase){.type = DT_PHASE_CONSTANT, .scaling = DT_SCALING_RESCALED, .start = 1, .end = 1};
        bool has_length = false;
        if (m->kind != DT_Y_MAP) {
            snprintf(why, n, "phase %zu: expected a mapping such as {type: cosine, start: 1, end: 0.1, length: 0.9}",
                     i + 1);
            return -1;
        }
        for (size_t j = 0; j < m->n; j++) {
            const struct dt_key *pk = NULL;
            for (size_t q = 0; q < sizeof phase_keys / sizeof phase_keys[0]; q++)
                if (!strcmp(phase_keys[q].path, m->pairs[j].key->str)) pk = &phase_keys[q];
            if (!pk) {
                snprintf(why, n, "phase %zu: unknown key '%s' (type, start, end, length, scaling)", i + 1,
                         m->pairs[j].key->str);
                return -1;
            }
            union value val = {0};
            char w[256];
            if (m->pairs[j].value->kind != DT_Y_SCALAR || parse_scalar(pk, m->pairs[j].value, &val, w, sizeof w)) {
                snprintf(why, n, "phase %zu: %s: %s", i + 1, pk->path,
                         m->pairs[j].value->kind != DT_Y_SCALAR ? "expected a scalar" : w);
                return -1;
            }
            if (pk->type == DT_T_ENUM) *(int *)((char *)ph + pk->offset) = val.e;
            else *(double *)((char *)ph + pk->offset) = val.f;
            has_length |= !strcmp(pk->path, "length");
        }
        if (!has_length) {
            snprintf(why, n, "phase %zu: needs a length (its fraction of the schedule)", i + 1);
            return -1;
        }
        if (ph->type == DT_PHASE_CONSTANT) ph->end = ph->start;
        sum += ph->length;
    }
    if (fabs(sum - 1.0) >= 1e-3) {
        snprintf(why, n, "the phase lengths add up to %g; they must add up to 1", sum);
        return -1;
    }
    out->p[out->n - 1].length += 1.0 - sum;
    return 0;
}

static int parse_node(const struct dt_key *k, const struct dt_ynode *v, union value *out, char *why, size_t n)
{
    char acc[256];
    if (k->type == DT_T_ANY) return 0;
    if (k->type == DT_T_PHASES) return parse_phases(v, &out->ph, why, n);
    if (k->type == DT_T_FLOATS) {
        if (v->kind != DT_Y_SEQ) {
            snprintf(why, n, "expected %s, got %s", dt_key_accepts(k, acc, sizeof acc), dt_ynode_kind_str(v->kind));
            return -1;
        }
        if ((k->count && (int)v->n != k->count) || v->n == 0 || v->n > DT_FLOATS_MAX) {
            snprintf(why, n, "expected %s, got %zu", dt_key_accepts(k, acc, sizeof acc), v->n);
            return -1;
        }
        out->fl.n = (int)v->n;
        for (size_t i = 0; i < v->n; i++) {
            const struct dt_ynode *it = v->items[i];
            if (it->kind != DT_Y_SCALAR || it->quoted) {
                snprintf(why, n, "item %zu: expected a number", i + 1);
                return -1;
            }
            char w[256];
            if (parse_float_text(it->str, &out->fl.v[i], w, sizeof w) || range_check(k, out->fl.v[i], w, sizeof w)) {
                snprintf(why, n, "item %zu: %s", i + 1, w);
                return -1;
            }
        }
        return 0;
    }
    if (v->kind != DT_Y_SCALAR) {
        snprintf(why, n, "expected %s, got %s", dt_key_accepts(k, acc, sizeof acc), dt_ynode_kind_str(v->kind));
        return -1;
    }
    return parse_scalar(k, v, out, why, n);
}

static void store(const struct dt_key *k, void *base, const union value *v)
{
    void *f = (char *)base + k->offset;
    switch (k->type) {
    case DT_T_BOOL: *(bool *)f = v->b; break;
    case DT_T_INT: *(int64_t *)f = v->i; break;
    case DT_T_FLOAT:
    case DT_T_SECONDS: *(double *)f = v->f; break;
    case DT_T_STR:
        free(*(char **)f);
        *(char **)f = v->s;
        break;
    case DT_T_ENUM: *(int *)f = v->e; break;
    case DT_T_DURATION: *(struct dt_duration *)f = v->d; break;
    case DT_T_FLOATS: *(struct dt_floats *)f = v->fl; break;
    case DT_T_PHASES: *(struct dt_phases *)f = v->ph; break;
    case DT_T_ANY: break;
    }
}

static void set_value(const struct dt_schema *s, void *base, struct dt_origin *orig, size_t idx,
                      const struct dt_ynode *v, enum dt_origin_kind kind, struct dt_loc where, struct dt_diags *d)
{
    const struct dt_key *k = &s->keys[idx];
    struct dt_loc at = where.file ? where : v->loc;
    char acc[512], why[1024];
    if (v->kind == DT_Y_SCALAR && !strcasecmp(v->str, "auto")) {
        if (k->flags & DT_F_AUTO) {
            orig[idx] = (struct dt_origin){.kind = kind, .loc = at, .is_auto = true};
            return;
        }
        /* an enum may name "auto" itself (compute.device); a string takes it literally */
        if (k->type != DT_T_ENUM && k->type != DT_T_STR) {
            dt_diag(d, at, NULL, "%s: 'auto' is not accepted here; write %s", k->path,
                    dt_key_accepts(k, acc, sizeof acc));
            return;
        }
    }
    if (dt_ynode_is_null(v)) {
        if (!(k->flags & DT_F_NULLABLE)) {
            dt_diag(d, at, NULL, "%s: needs a value: %s", k->path, dt_key_accepts(k, acc, sizeof acc));
            return;
        }
        union value nul = {0};
        store(k, base, &nul);
        orig[idx] = (struct dt_origin){.kind = kind, .loc = at};
        return;
    }
    union value val = {0};
    if (parse_node(k, v, &val, why, sizeof why) != 0) {
        dt_diag(d, at, NULL, "%s: %s", k->path, why);
        return;
    }
    store(k, base, &val);
    orig[idx] = (struct dt_origin){.kind = kind, .loc = at};
}

/* Names one level below `prefix`, for suggestions and listings. */
static size_t children(const struct dt_schema *s, const char *prefix, const char **out, size_t max)
{
    size_t plen = strlen(prefix), n = 0;
    static _Thread_local char names[128][64];
    for (size_t i = 0; i < s->n && n < max && n < 128; i++) {
        const char *p = s->keys[i].path;
        if (plen && (strncmp(p, prefix, plen) != 0 || p[plen] != '.')) continue;
        const char *rest = plen ? p + plen + 1 : p;
        size_t len = strcspn(rest, ".");
        if (len >= sizeof names[0]) continue;
        bool dup = false;
        for (size_t j = 0; j < n; j++) dup |= strlen(out[j]) == len && !strncmp(out[j], rest, len);
        if (dup) continue;
        memcpy(names[n], rest, len);
        names[n][len] = '\0';
        out[n] = names[n];
        n++;
    }
    return n;
}

static void unknown_key(const struct dt_schema *s, const char *prefix, const char *key, struct dt_loc at,
                        struct dt_diags *d)
{
    const char *kids[128];
    size_t nk = children(s, prefix, kids, 128);
    const char *sug = dt_suggest(key, kids, nk);
    char hint[1024];
    if (sug) {
        snprintf(hint, sizeof hint, "did you mean '%s'?", sug);
    } else {
        /* the same name elsewhere: `lr` written under compute instead of optimizer */
        const char *elsewhere = NULL;
        for (size_t i = 0; i < s->n && !elsewhere; i++) {
            const char *dot = strrchr(s->keys[i].path, '.');
            if (dot && !strcasecmp(dot + 1, key)) elsewhere = s->keys[i].path;
        }
        if (elsewhere) {
            snprintf(hint, sizeof hint, "did you mean '%s'?", elsewhere);
        } else {
            snprintf(hint, sizeof hint, "%s %s", *prefix ? "its keys are:" : "the sections are:", nk ? kids[0] : "");
            for (size_t i = 1; i < nk; i++) {
                strncat(hint, ", ", sizeof hint - strlen(hint) - 1);
                strncat(hint, kids[i], sizeof hint - strlen(hint) - 1);
            }
        }
    }
    if (*prefix) dt_diag(d, at, hint, "unknown key '%s' in %s (%s)", key, prefix, s->what);
    else dt_diag(d, at, hint, "unknown section '%s' (%s)", key, s->what);
}

void dt_schema_apply(const struct dt_schema *s, void *base, struct dt_origin *orig, const struct dt_ynode *map,
                     const char *prefix, enum dt_origin_kind kind, struct dt_diags *d)
{
    if (map->kind != DT_Y_MAP) {
        if (*prefix) dt_diag(d, map->loc, NULL, "%s: expected a mapping of keys, got %s", prefix,
                             dt_ynode_kind_str(map->kind));
        else dt_diag(d, map->loc, "a config is a mapping of sections such as `run:` and `model:`",
                     "expected a mapping at the top of the %s, got %s", s->what, dt_ynode_kind_str(map->kind));
        return;
    }
    for (size_t i = 0; i < map->n; i++) {
        const struct dt_ynode *key = map->pairs[i].key, *val = map->pairs[i].value;
        char path[256];
        if (strlen(prefix) + strlen(key->str) + 2 > sizeof path) {
            dt_diag(d, key->loc, NULL, "key '%.40s...' is too long", key->str);
            continue;
        }
        if (*prefix) snprintf(path, sizeof path, "%s.%s", prefix, key->str);
        else snprintf(path, sizeof path, "%s", key->str);
        size_t idx;
        if (dt_schema_find(s, path, &idx)) {
            set_value(s, base, orig, idx, val, kind, (struct dt_loc){0}, d);
        } else if (is_section(s, path)) {
            if (!dt_ynode_is_null(val)) dt_schema_apply(s, base, orig, val, path, kind, d);
        } else {
            unknown_key(s, prefix, key->str, key->loc, d);
        }
    }
}

void dt_schema_set(const struct dt_schema *s, void *base, struct dt_origin *orig, const char *path,
                   const struct dt_ynode *value, struct dt_loc where, enum dt_origin_kind kind, struct dt_diags *d)
{
    size_t idx;
    if (dt_schema_find(s, path, &idx)) {
        set_value(s, base, orig, idx, value, kind, where, d);
        return;
    }
    if (is_section(s, path)) {
        if (value->kind == DT_Y_MAP) {
            dt_schema_apply(s, base, orig, value, path, kind, d);
        } else {
            char hint[256];
            snprintf(hint, sizeof hint, "set one key, e.g. %s.<key>=VALUE, or a mapping: %s='{key: value}'", path,
                     path);
            dt_diag(d, where, hint, "%s is a section, not a single value", path);
        }
        return;
    }
    /* walk down to the deepest existing section to suggest the right name */
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s", path);
    char *dot = strrchr(prefix, '.');
    while (dot) {
        *dot = '\0';
        if (is_section(s, prefix)) break;
        dot = strrchr(prefix, '.');
    }
    if (!dot) prefix[0] = '\0';
    const char *rest = path + (prefix[0] ? strlen(prefix) + 1 : 0);
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(rest, "."), rest);
    unknown_key(s, prefix, key, where, d);
}

dt_status_t dt_schema_defaults(const struct dt_schema *s, void *base, struct dt_origin *orig)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct dt_key *k = &s->keys[i];
        orig[i] = (struct dt_origin){.kind = DT_ORIGIN_DEFAULT};
        if (k->type == DT_T_ANY) continue;
        union value val = {0};
        if (k->def && (k->flags & DT_F_AUTO) && !strcmp(k->def, "auto")) {
            orig[i].is_auto = true;
        } else if (k->def) {
            struct dt_ydoc *doc;
            char why[512];
            if (dt_ydoc_parse("default", k->def, strlen(k->def), &doc) != DT_SUCCESS)
                return dt_error(DT_ERR_INTERNAL, "dtrun: error: schema default of %s does not parse: %s", k->path,
                                dt_error_msg());
            int bad = parse_node(k, dt_ydoc_root(doc), &val, why, sizeof why);
            dt_ydoc_free(doc);
            if (bad) return dt_error(DT_ERR_INTERNAL, "dtrun: error: schema default of %s: %s", k->path, why);
        }
        store(k, base, &val);
    }
    return DT_SUCCESS;
}

void dt_schema_release(const struct dt_schema *s, void *base)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->keys[i].type != DT_T_STR) continue;
        char **p = DT_FIELD(base, &s->keys[i]);
        free(*p);
        *p = NULL;
    }
}

/* s as a YAML double-quoted scalar. Escaped: what YAML would not read back as it is, the C0 and C1
 * controls, DEL, the line and paragraph separators, the BOM and the noncharacters U+FFFE/U+FFFF
 * (#16, tests/fuzz/fuzz_overrides.c). */
static const char *quote(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    buf[o++] = '"';
    for (; *s && o + 8 < n; s++) {
        const unsigned char *u = (const unsigned char *)s;
        unsigned char c = u[0];
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        } else if (c == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f) { /* U+0080..U+009F */
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", u[1]);
            s++;
        } else if ((c == 0xe2 && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9)) ||
                   (c == 0xef && ((u[1] == 0xbb && u[2] == 0xbf) || (u[1] == 0xbf && u[2] >= 0xbe)))) {
            /* U+2028, U+2029, U+FEFF, U+FFFE, U+FFFF */
            unsigned cp = (unsigned)(c & 0x0f) << 12 | (unsigned)(u[1] & 0x3f) << 6 | (u[2] & 0x3f);
            o += (size_t)snprintf(buf + o, n - o, "\\u%04x", cp);
            s += 2;
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

const char *dt_value_format(const struct dt_key *k, const void *f, char *buf, size_t n)
{
    char tmp[64];
    switch (k->type) {
    case DT_T_BOOL: snprintf(buf, n, "%s", *(const bool *)f ? "true" : "false"); break;
    case DT_T_INT: snprintf(buf, n, "%lld", (long long)*(const int64_t *)f); break;
    case DT_T_FLOAT: dt_double_str(*(const double *)f, buf, n); break;
    case DT_T_SECONDS: dt_seconds_str(*(const double *)f, buf, n); break;
    case DT_T_STR: {
        const char *s = *(char *const *)f;
        if (s) quote(s, buf, n);
        else snprintf(buf, n, "null");
        break;
    }
    case DT_T_ENUM: snprintf(buf, n, "%s", dt_enum_str(k->names, *(const int *)f)); break;
    case DT_T_DURATION: dt_duration_str(*(const struct dt_duration *)f, buf, n); break;
    case DT_T_FLOATS: {
        const struct dt_floats *fl = f;
        size_t o = (size_t)snprintf(buf, n, "[");
        for (int i = 0; i < fl->n && o < n; i++)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", dt_double_str(fl->v[i], tmp, sizeof tmp));
        if (o < n) snprintf(buf + o, n - o, "]");
        break;
    }
    case DT_T_PHASES: {
        const struct dt_phases *ph = f;
        size_t o = (size_t)snprintf(buf, n, "[");
        for (int i = 0; i < ph->n && o < n; i++) {
            char a[40], b[40], c[40];
            o += (size_t)snprintf(buf + o, n - o, "%s{type: %s, start: %s, end: %s, length: %s, scaling: %s}",
                                  i ? ", " : "", dt_enum_str(phase_types, ph->p[i].type),
                                  dt_double_str(ph->p[i].start, a, sizeof a), dt_double_str(ph->p[i].end, b, sizeof b),
                                  dt_double_str(ph->p[i].length, c, sizeof c),
                                  dt_enum_str(phase_scalings, ph->p[i].scaling));
        }
        if (o < n) snprintf(buf + o, n - o, "]");
        break;
    }
    case DT_T_ANY: snprintf(buf, n, "..."); break;
    }
    return buf;
}

bool dt_value_equal(enum dt_type t, const void *fa, const void *fb)
{
    switch (t) {
    case DT_T_BOOL: return *(const bool *)fa == *(const bool *)fb;
    case DT_T_INT: return *(const int64_t *)fa == *(const int64_t *)fb;
    case DT_T_FLOAT:
    case DT_T_SECONDS: return *(const double *)fa == *(const double *)fb;
    case DT_T_STR: {
        const char *sa = *(char *const *)fa, *sb = *(char *const *)fb;
        return sa == sb || (sa && sb && !strcmp(sa, sb));
    }
    case DT_T_ENUM: return *(const int *)fa == *(const int *)fb;
    case DT_T_DURATION: {
        const struct dt_duration *da = fa, *db = fb;
        return da->unit == db->unit && da->value == db->value;
    }
    case DT_T_FLOATS: {
        const struct dt_floats *x = fa, *y = fb;
        if (x->n != y->n) return false;
        for (int i = 0; i < x->n; i++)
            if (x->v[i] != y->v[i]) return false;
        return true;
    }
    case DT_T_PHASES: {
        const struct dt_phases *x = fa, *y = fb;
        if (x->n != y->n) return false;
        for (int i = 0; i < x->n; i++)
            if (x->p[i].type != y->p[i].type || x->p[i].scaling != y->p[i].scaling || x->p[i].start != y->p[i].start ||
                x->p[i].end != y->p[i].end || x->p[i].length != y->p[i].length)
                return false;
        return true;
    }
    case DT_T_ANY: return true;
    }
    return false;
}

dt_status_t dt_value_copy(enum dt_type t, void *fd, const void *fs)
{
    switch (t) {
    case DT_T_BOOL: *(bool *)fd = *(const bool *)fs; break;
    case DT_T_INT: *(int64_t *)fd = *(const int64_t *)fs; break;
    case DT_T_FLOAT:
    case DT_T_SECONDS: *(double *)fd = *(const double *)fs; break;
    case DT_T_STR: {
        const char *s = *(char *const *)fs;
        char *copy = s ? strdup(s) : NULL;
        if (s && !copy) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
        free(*(char **)fd);
        *(char **)fd = copy;
        break;
    }
    case DT_T_ENUM: *(int *)fd = *(const int *)fs; break;
    case DT_T_DURATION: *(struct dt_duration *)fd = *(const struct dt_duration *)fs; break;
    case DT_T_FLOATS: *(struct dt_floats *)fd = *(const struct dt_floats *)fs; break;
    case DT_T_PHASES: *(struct dt_phases *)fd = *(const struct dt_phases *)fs; break;
    case DT_T_ANY: break;
    }
    return DT_SUCCESS;
}
