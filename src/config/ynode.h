/*
 * ynode.h - a YAML (or JSON) document as a tree of located nodes.
 *
 * libyaml's event parser feeds a small composer that keeps, for every node,
 * the file, line and column it came from (1-based), so every config error can
 * point at its place. The composer refuses what a config never needs and an
 * attacker could use: more than one document, nesting deeper than
 * DT_YAML_MAX_DEPTH, alias expansion past DT_YAML_MAX_NODES nodes, duplicate
 * or non-scalar keys, files over DT_YAML_MAX_BYTES, NUL bytes.
 * Aliases share the anchored node (no copy), so the tree is a DAG; all nodes
 * live in the document's arena and are freed together.
 */
#ifndef DT_YNODE_H
#define DT_YNODE_H

#include <stdbool.h>
#include <stddef.h>
#include "core/status.h"

#define DT_YAML_MAX_BYTES (8u << 20)
#define DT_YAML_MAX_DEPTH 64
#define DT_YAML_MAX_NODES 100000

struct dt_loc {
    const char *file; /* name shown in messages; owned by the document */
    int line, col;    /* 1-based; 0 when unknown */
};

enum dt_ynode_kind { DT_Y_SCALAR, DT_Y_MAP, DT_Y_SEQ };

struct dt_ynode;

struct dt_ypair {
    struct dt_ynode *key; /* always a scalar */
    struct dt_ynode *value;
};

struct dt_ynode {
    enum dt_ynode_kind kind;
    struct dt_loc loc;
    const char *str; /* scalar text, NUL-terminated */
    bool quoted;     /* scalar was quoted or block style: never null, never a number */
    size_t n;        /* number of pairs (map) or items (seq) */
    struct dt_ypair *pairs;
    struct dt_ynode **items;
};

struct dt_ydoc;

/* Read and compose a file; `shown` is the name used in messages (NULL: path). */
dt_status_t dt_ydoc_load_file(const char *path, struct dt_ydoc **out);
/* Compose a buffer already in memory; `name` is used in messages. */
dt_status_t dt_ydoc_parse(const char *name, const char *buf, size_t len, struct dt_ydoc **out);
struct dt_ynode *dt_ydoc_root(const struct dt_ydoc *doc);
void dt_ydoc_free(struct dt_ydoc *doc);

/* A plain scalar spelled null, Null, NULL, ~ or nothing. */
bool dt_ynode_is_null(const struct dt_ynode *n);
const char *dt_ynode_kind_str(enum dt_ynode_kind k);

#endif
