/*
 * tjson.h - a small JSON reader for tokenizer.json. Its own, because the project's config reader
 * (libyaml) refuses Llama 3's 9 MB file with 280k merges and mishandles escaped surrogate pairs.
 * The whole document becomes an array of nodes; strings are decoded (escapes, surrogate pairs)
 * into one pool, each NUL-terminated.
 */
#ifndef DT_TJSON_H
#define DT_TJSON_H

#include <stddef.h>
#include <stdint.h>

enum { TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ };

struct tj_node {
    uint8_t type;
    uint32_t key;   /* object member: its key's offset in the pool */
    uint32_t str;   /* TJ_STR: offset in the pool; length in len */
    uint32_t len;   /* TJ_STR: bytes; TJ_ARR/TJ_OBJ: members */
    uint32_t child; /* first member, 0 when none (node 0 is the root, never a member) */
    uint32_t next;  /* next member of the parent, 0 at the end */
    double num;
};

struct tj_doc {
    struct tj_node *n;
    size_t nn, cap;
    char *pool;
    size_t npool;
};

/* Parses text[0..len); 0 on success, else -1 with "line L: what" in err. */
int tj_parse(struct tj_doc *d, const char *text, size_t len, char *err, size_t errsize);
void tj_free(struct tj_doc *d);
/* The member `key` of object node o, or NULL. */
const struct tj_node *tj_get(const struct tj_doc *d, const struct tj_node *o, const char *key);
static inline const char *tj_str(const struct tj_doc *d, const struct tj_node *n) { return d->pool + n->str; }
static inline const char *tj_key(const struct tj_doc *d, const struct tj_node *n) { return d->pool + n->key; }
static inline const struct tj_node *tj_child(const struct tj_doc *d, const struct tj_node *n)
{
    return n->child ? &d->n[n->child] : NULL;
}
static inline const struct tj_node *tj_next(const struct tj_doc *d, const struct tj_node *n)
{
    return n->next ? &d->n[n->next] : NULL;
}

#endif
