/*
 * ynode.c - compose libyaml events into a located node tree (see ynode.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>
#include "config/ynode.h"
#include "core/error.h"

/* ---------------------------------------------------------------- arena */

struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
};

struct dt_ydoc {
    char *name;
    struct dt_ynode *root;
    struct chunk *chunks;
};

static void *arena_alloc(struct dt_ydoc *doc, size_t size)
{
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    struct chunk *c = doc->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        c = calloc(1, sizeof *c + cap); /* zeroed once: the arena hands out each byte once */
        if (!c) return NULL;
        c->cap = cap;
        c->next = doc->chunks;
        doc->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
}

void dt_ydoc_free(struct dt_ydoc *doc)
{
    if (!doc) return;
    for (struct chunk *c = doc->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(doc->name);
    free(doc);
}

struct dt_ynode *dt_ydoc_root(const struct dt_ydoc *doc) { return doc->root; }

bool dt_ynode_is_null(const struct dt_ynode *n)
{
    if (!n || n->kind != DT_Y_SCALAR || n->quoted) return false;
    const char *s = n->str;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

const char *dt_ynode_kind_str(enum dt_ynode_kind k)
{
    return k == DT_Y_MAP ? "a mapping" : k == DT_Y_SEQ ? "a list" : "a scalar";
}

/* ------------------------------------------------------------- composer */

struct frame {
    struct dt_ynode *node;
    struct dt_ynode **kids;
    size_t nkids, cap;
    size_t size; /* nodes in this subtree, aliases expanded */
    const char *anchor;
};

struct anchor {
    char *name;
    struct dt_ynode *node;
    size_t size;
};

struct composer {
    struct dt_ydoc *doc;
    const char *buf;
    size_t len;
    struct frame stack[DT_YAML_MAX_DEPTH + 1];
    int depth;
    struct anchor *anchors;
    size_t nanchors, anchors_cap;
    size_t total; /* nodes composed so far, aliases expanded */
    int ndocs;
};

static struct dt_loc mark_loc(struct composer *c, yaml_mark_t m)
{
    return (struct dt_loc){c->doc->name, (int)m.line + 1, (int)m.column + 1};
}

/* libyaml's reader errors carry only a byte offset: turn it into line:col. */
static struct dt_loc offset_loc(struct composer *c, size_t off)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < off && i < c->len; i++) {
        if (c->buf[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)c->buf[i] & 0xC0) != 0x80) {
            col++;
        }
    }
    return (struct dt_loc){c->doc->name, line, col};
}

static dt_status_t loc_error(struct dt_loc l, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static dt_status_t loc_error(struct dt_loc l, const char *hint, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    dt_error(DT_ERR_CONFIG, "%s:%d:%d: error: %s", l.file, l.line, l.col, what);
    if (hint) dt_error_append("  hint: %s", hint);
    return DT_ERR_CONFIG;
}

static dt_status_t budget(struct composer *c, struct dt_loc l, size_t add)
{
    c->total += add;
    if (add > DT_YAML_MAX_NODES || c->total > DT_YAML_MAX_NODES)
        return loc_error(l, "a dtrun config needs a few hundred values; write them out instead of nesting aliases",
                         "the document expands to more than %d values (YAML alias expansion)", DT_YAML_MAX_NODES);
    return DT_SUCCESS;
}

static dt_status_t push_kid(struct composer *c, struct dt_ynode *n, size_t size)
{
    if (c->depth == 0) {
        c->doc->root = n;
        return DT_SUCCESS;
    }
    struct frame *f = &c->stack[c->depth - 1];
    if (f->nkids == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        struct dt_ynode **k = realloc(f->kids, cap * sizeof *k);
        if (!k) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
        f->kids = k;
        f->cap = cap;
    }
    f->kids[f->nkids++] = n;
    f->size = f->size + size > DT_YAML_MAX_NODES ? DT_YAML_MAX_NODES + 1 : f->size + size;
    return DT_SUCCESS;
}

/* GCC 12's analyzer loses the arena's chunks (doc->chunks) and the anchors' names (c->anchors[]) once
 * a store goes through a node or at a computed index, and calls them leaked: a false positive,
 * dt_ydoc_free() and dt_ydoc_parse() free them (#16) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
static dt_status_t add_anchor(struct composer *c, const char *name, struct dt_ynode *n, size_t size)
{
    if (c->nanchors == c->anchors_cap) {
        size_t cap = c->anchors_cap ? c->anchors_cap * 2 : 8;
        struct anchor *a = realloc(c->anchors, cap * sizeof *a);
        if (!a) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
        c->anchors = a;
        c->anchors_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
    /* a later anchor of the same name wins, as in YAML */
    c->anchors[c->nanchors++] = (struct anchor){copy, n, size};
    return DT_SUCCESS;
}

static int cmp_pair_key(const void *a, const void *b)
{
    const struct dt_ypair *const *pa = a, *const *pb = b;
    return strcmp((*pa)->key->str, (*pb)->key->str);
}

static dt_status_t finish_map(struct composer *c, struct frame *f)
{
    struct dt_ynode *n = f->node;
    n->n = f->nkids / 2;
    n->pairs = arena_alloc(c->doc, (n->n ? n->n : 1) * sizeof *n->pairs);
    struct dt_ypair **sorted = malloc((n->n ? n->n : 1) * sizeof *sorted);
    if (!n->pairs || !sorted) {
        free(sorted);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
    }
    for (size_t i = 0; i < n->n; i++) {
        struct dt_ynode *k = f->kids[2 * i];
        if (k->kind != DT_Y_SCALAR) {
            free(sorted);
            return loc_error(k->loc, "write keys as plain names such as `lr:`",
                             "a key must be a plain name, not %s", dt_ynode_kind_str(k->kind));
        }
        n->pairs[i] = (struct dt_ypair){k, f->kids[2 * i + 1]};
        sorted[i] = &n->pairs[i];
    }
    qsort(sorted, n->n, sizeof *sorted, cmp_pair_key);
    for (size_t i = 1; i < n->n; i++) {
        if (strcmp(sorted[i - 1]->key->str, sorted[i]->key->str) == 0) {
            const struct dt_ynode *a = sorted[i - 1]->key, *b = sorted[i]->key;
            if (a->loc.line > b->loc.line || (a->loc.line == b->loc.line && a->loc.col > b->loc.col)) {
                const struct dt_ynode *t = a;
                a = b;
                b = t;
            }
            char hint[256];
            snprintf(hint, sizeof hint, "the first is at line %d, column %d; keep one of them", a->loc.line,
                     a->loc.col);
            dt_status_t rc = loc_error(b->loc, hint, "duplicate key '%s'", b->str);
            free(sorted);
            return rc;
        }
    }
    free(sorted);
    return DT_SUCCESS;
}

static dt_status_t start_container(struct composer *c, enum dt_ynode_kind kind, yaml_event_t *ev,
                                   const yaml_char_t *anchor)
{
    struct dt_loc l = mark_loc(c, ev->start_mark);
    if (c->depth >= DT_YAML_MAX_DEPTH)
        return loc_error(l, "a dtrun config is a few levels deep; check for runaway brackets",
                         "nesting deeper than %d levels", DT_YAML_MAX_DEPTH);
    DT_CHECK(budget(c, l, 1));
    struct dt_ynode *n = arena_alloc(c->doc, sizeof *n);
    if (!n) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
    n->kind = kind;
    n->loc = l;
    char *name = NULL;
    if (anchor) {
        size_t len = strlen((const char *)anchor);
        if (!(name = arena_alloc(c->doc, len + 1)))
            return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
        memcpy(name, anchor, len + 1);
    }
    c->stack[c->depth++] = (struct frame){.node = n, .size = 1, .anchor = name};
    return DT_SUCCESS;
}

static dt_status_t end_container(struct composer *c)
{
    struct frame f = c->stack[--c->depth];
    dt_status_t rc = DT_SUCCESS;
    if (f.node->kind == DT_Y_MAP) {
        rc = finish_map(c, &f);
    } else {
        f.node->n = f.nkids;
        f.node->items = arena_alloc(c->doc, (f.nkids ? f.nkids : 1) * sizeof *f.node->items);
        if (!f.node->items) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
        else if (f.nkids) memcpy(f.node->items, f.kids, f.nkids * sizeof *f.kids);
    }
    if (rc == DT_SUCCESS && f.anchor) rc = add_anchor(c, f.anchor, f.node, f.size);
    free(f.kids);
    if (rc == DT_SUCCESS) rc = push_kid(c, f.node, f.size);
    return rc;
}
#pragma GCC diagnostic pop

static dt_status_t on_event(struct composer *c, yaml_event_t *ev)
{
    struct dt_loc l = mark_loc(c, ev->start_mark);
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++c->ndocs > 1)
            return loc_error(l, "keep one document per file (remove the extra `---`)",
                             "the file holds more than one YAML document");
        return DT_SUCCESS;
    case YAML_SCALAR_EVENT: {
        DT_CHECK(budget(c, l, 1));
        struct dt_ynode *n = arena_alloc(c->doc, sizeof *n);
        char *s = arena_alloc(c->doc, ev->data.scalar.length + 1);
        if (!n || !s) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", c->doc->name);
        memcpy(s, ev->data.scalar.value, ev->data.scalar.length);
        if (memchr(s, '\0', ev->data.scalar.length))
            return loc_error(l, NULL, "a value holds a NUL character");
        n->kind = DT_Y_SCALAR;
        n->loc = l;
        n->str = s;
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
                    (ev->data.scalar.tag && !strcmp((const char *)ev->data.scalar.tag, YAML_STR_TAG));
        if (ev->data.scalar.anchor) DT_CHECK(add_anchor(c, (const char *)ev->data.scalar.anchor, n, 1));
        return push_kid(c, n, 1);
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (size_t i = c->nanchors; i-- > 0;) {
            if (strcmp(c->anchors[i].name, name) == 0) {
                DT_CHECK(budget(c, l, c->anchors[i].size));
                return push_kid(c, c->anchors[i].node, c->anchors[i].size);
            }
        }
        return loc_error(l, "define the anchor (&name) before using it", "unknown alias *%s", name);
    }
    case YAML_SEQUENCE_START_EVENT:
        return start_container(c, DT_Y_SEQ, ev, ev->data.sequence_start.anchor);
    case YAML_MAPPING_START_EVENT:
        return start_container(c, DT_Y_MAP, ev, ev->data.mapping_start.anchor);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return end_container(c);
    default:
        return DT_SUCCESS;
    }
}

static dt_status_t parser_error(struct composer *c, yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory parsing %s", c->doc->name);
    if (p->error == YAML_READER_ERROR) {
        struct dt_loc l = offset_loc(c, p->problem_offset);
        return loc_error(l, "save the file as UTF-8 text", "not valid UTF-8 text (%s at byte %zu)",
                         p->problem ? p->problem : "unreadable byte", p->problem_offset);
    }
    struct dt_loc l = mark_loc(c, p->problem_mark);
    char what[512];
    if (p->context)
        snprintf(what, sizeof what, "YAML syntax: %s (%s at line %d, column %d)", p->problem, p->context,
                 (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
    else
        snprintf(what, sizeof what, "YAML syntax: %s", p->problem ? p->problem : "invalid document");
    return loc_error(l, "check the indentation, colons and quotes on this line and the one before", "%s", what);
}

dt_status_t dt_ydoc_parse(const char *name, const char *buf, size_t len, struct dt_ydoc **out)
{
    *out = NULL;
    struct dt_ydoc *doc = calloc(1, sizeof *doc);
    if (!doc || !(doc->name = strdup(name))) {
        free(doc);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", name);
    }
    struct composer c = {.doc = doc, .buf = buf, .len = len};
    const char *nul = memchr(buf, '\0', len);
    dt_status_t rc = DT_SUCCESS;
    if (nul) {
        rc = loc_error(offset_loc(&c, (size_t)(nul - buf)), "is this a binary file? a config is YAML text",
                       "the file holds a NUL byte at offset %zu", (size_t)(nul - buf));
        goto out;
    }
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory parsing %s", name);
        goto out;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = parser_error(&c, &p);
            break;
        }
        bool end = ev.type == YAML_STREAM_END_EVENT;
        rc = on_event(&c, &ev);
        yaml_event_delete(&ev);
        if (rc != DT_SUCCESS || end) break;
    }
    yaml_parser_delete(&p);
out:
    while (c.depth > 0) free(c.stack[--c.depth].kids);
    for (size_t i = 0; i < c.nanchors; i++) free(c.anchors[i].name);
    free(c.anchors);
    if (rc != DT_SUCCESS) {
        dt_ydoc_free(doc);
        return rc;
    }
    *out = doc;
    return DT_SUCCESS;
}

dt_status_t dt_ydoc_load_file(const char *path, struct dt_ydoc **out)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return dt_error(DT_ERR_CONFIG, "%s: error: cannot read the config file: %s\n  hint: check the path%s", path,
                        strerror(errno),
                        errno == ENOENT ? "; `dtrun check` with no file shows the built-in default" : "");
    if (S_ISDIR(st.st_mode))
        return dt_error(DT_ERR_CONFIG, "%s: error: this is a directory, not a config file\n"
                        "  hint: name a YAML file, e.g. %s/config.yaml", path, path);
    if (!S_ISREG(st.st_mode))
        return dt_error(DT_ERR_CONFIG, "%s: error: not a regular file\n  hint: name a YAML file", path);
    if ((uintmax_t)st.st_size > DT_YAML_MAX_BYTES)
        return dt_error(DT_ERR_CONFIG, "%s: error: the file is %.1f MiB; a config is at most %u MiB\n"
                        "  hint: is this the right file? data goes in data.train, not in the config",
                        path, (double)st.st_size / (1 << 20), DT_YAML_MAX_BYTES >> 20);
    FILE *f = fopen(path, "rb");
    if (!f)
        return dt_error(DT_ERR_CONFIG, "%s: error: cannot open the config file: %s\n  hint: check its permissions",
                        path, strerror(errno));
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return dt_error(DT_ERR_NOMEM, "%s: error: out of memory reading the config file", path);
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(buf);
        return dt_error(DT_ERR_CONFIG, "%s: error: reading the config file failed after %zu of %zu bytes", path,
                        got, size);
    }
    buf[size] = '\0';
    dt_status_t rc = dt_ydoc_parse(path, buf, size, out);
    free(buf);
    if (rc == DT_SUCCESS && !(*out)->root) {
        dt_ydoc_free(*out);
        *out = NULL;
        return dt_error(DT_ERR_CONFIG, "%s: error: the file holds no settings (it is empty or only comments)\n"
                        "  hint: start from a template in templates/, or run without a file for the built-in default",
                        path);
    }
    return rc;
}
