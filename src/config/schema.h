/*
 * schema.h - the engine behind every schema table: defaults, applying a YAML
 * tree or a single override, formatting values, comparing them.
 *
 * A table (struct dt_schema) lists keys by dotted path; a path that is a
 * prefix of other keys is a section. Values are parsed by the key's type from
 * the scalar text, never by YAML's implicit typing, so `precision: 16` and
 * `name: 0123` mean what the schema says.
 */
#ifndef DT_SCHEMA_H
#define DT_SCHEMA_H

#include "config/diag.h"
#include "config/types.h"

const struct dt_key *dt_schema_find(const struct dt_schema *s, const char *path, size_t *index);
/* Set every key to its default (origin DEFAULT). Fails only on a bad table. */
dt_status_t dt_schema_defaults(const struct dt_schema *s, void *base, struct dt_origin *orig);
/* Apply a mapping node found at `prefix` ("" for the document root). */
void dt_schema_apply(const struct dt_schema *s, void *base, struct dt_origin *orig, const struct dt_ynode *map,
                     const char *prefix, enum dt_origin_kind kind, struct dt_diags *d);
/* Apply one value to one key path (overrides); `where` locates it in messages. */
void dt_schema_set(const struct dt_schema *s, void *base, struct dt_origin *orig, const char *path,
                   const struct dt_ynode *value, struct dt_loc where, enum dt_origin_kind kind, struct dt_diags *d);
/* Free owned strings. */
void dt_schema_release(const struct dt_schema *s, void *base);
/* These take the field itself (DT_FIELD), so values of two tables' keys of the
 * same type can be compared and copied. */
/* The value as YAML text (strings quoted, null as null). */
const char *dt_value_format(const struct dt_key *k, const void *field, char *buf, size_t n);
bool dt_value_equal(enum dt_type t, const void *fa, const void *fb);
dt_status_t dt_value_copy(enum dt_type t, void *fd, const void *fs);
const char *dt_enum_str(const struct dt_enum_name *names, int v);
/* What a key accepts, for messages and the README reference. */
const char *dt_key_accepts(const struct dt_key *k, char *buf, size_t n);

#define DT_FIELD(base, k) ((void *)((char *)(base) + (k)->offset))

#endif
