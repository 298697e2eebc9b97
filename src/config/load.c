/*
 * load.c - build a struct dt_config: built-in defaults, then the site
 * defaults (an admin's dtrun.yaml), then the YAML file, then dotted overrides (`optimizer.lr=1e-3`), each value remembering where it
 * came from. Paths in a config are relative to the current directory, as for
 * torchrun and the Lightning CLI.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/schema.h"
#include "core/error.h"

const char *dt_namelist_add(struct dt_namelist *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return l->names[i];
    char **t = realloc(l->names, (l->n + 1) * sizeof *t);
    if (!t) return NULL;
    l->names = t;
    if (!(t[l->n] = strdup(name))) return NULL;
    return t[l->n++];
}

void dt_namelist_free(struct dt_namelist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    *l = (struct dt_namelist){0};
}

dt_status_t dt_config_init(struct dt_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->origin = calloc(dt_config_schema.n, sizeof *cfg->origin);
    if (!cfg->origin) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    return dt_schema_defaults(&dt_config_schema, cfg, cfg->origin);
}

void dt_config_free(struct dt_config *cfg)
{
    dt_schema_release(&dt_config_schema, cfg);
    dt_ds_free(&cfg->ds);
    free(cfg->origin);
    dt_namelist_free(&cfg->names);
    memset(cfg, 0, sizeof *cfg);
}

const struct dt_origin *dt_config_origin(const struct dt_config *cfg, const char *path)
{
    size_t i;
    return dt_schema_find(&dt_config_schema, path, &i) ? &cfg->origin[i] : NULL;
}

/* Origins point at the document's name; re-point them at the config's own copy. */
static void own_names(struct dt_config *cfg, const char *from, const char *to)
{
    for (size_t i = 0; i < dt_config_schema.n; i++)
        if (cfg->origin[i].loc.file == from) cfg->origin[i].loc.file = to;
}

static dt_status_t apply_file(struct dt_config *cfg, const char *path, struct dt_diags *d)
{
    struct dt_ydoc *doc;
    DT_CHECK(dt_ydoc_load_file(path, &doc));
    const char *name = dt_namelist_add(&cfg->names, path);
    const struct dt_ynode *root = dt_ydoc_root(doc);
    if (name) dt_schema_apply(&dt_config_schema, cfg, cfg->origin, root, "", DT_ORIGIN_FILE, d);
    own_names(cfg, root->loc.file, name);
    dt_ydoc_free(doc);
    return name ? DT_SUCCESS : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
}

static bool valid_key(const char *k, size_t len)
{
    if (len == 0 || k[0] == '.' || k[len - 1] == '.') return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)k[i]) && k[i] != '_' && k[i] != '.' && k[i] != '-') return false;
    return true;
}

static void apply_override(struct dt_config *cfg, const char *arg, struct dt_diags *d)
{
    char label[512];
    snprintf(label, sizeof label, "override '%s'", arg);
    const char *name = dt_namelist_add(&cfg->names, label);
    struct dt_loc where = {name ? name : "override", 0, 0};
    const char *eq = strchr(arg, '=');
    if (!eq || !valid_key(arg, (size_t)(eq - arg))) {
        dt_diag(d, where, "write overrides as key.path=value, e.g. optimizer.lr=1e-3",
                "not a key=value override");
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%.*s", (int)(eq - arg), arg);
    const char *value = eq + 1;
    struct dt_ydoc *doc = NULL;
    if (dt_ydoc_parse(label, value, strlen(value), &doc) != DT_SUCCESS) {
        dt_diag(d, where, "quote the value for the shell, e.g. optimizer.betas='[0.9, 0.95]'",
                "the value does not parse: %s", dt_error_msg());
        return;
    }
    static const struct dt_ynode null_node = {.kind = DT_Y_SCALAR, .str = ""};
    const struct dt_ynode *v = dt_ydoc_root(doc) ? dt_ydoc_root(doc) : &null_node;
    dt_schema_set(&dt_config_schema, cfg, cfg->origin, path, v, where, DT_ORIGIN_OVERRIDE, d);
    dt_ydoc_free(doc);
}

dt_status_t dt_config_load(struct dt_config *cfg, const char *site, const char *path, int noverrides,
                           char *const *overrides)
{
    struct dt_diags d = {0};
    if (site) DT_CHECK(apply_file(cfg, site, &d));
    if (path) DT_CHECK(apply_file(cfg, path, &d));
    for (int i = 0; i < noverrides; i++) apply_override(cfg, overrides[i], &d);
    return dt_diag_finish(&d);
}
