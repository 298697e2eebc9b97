/*
 * load.c - build a struct dt_config: built-in defaults, then the site
 * defaults (an admin's dtrun.yaml, the SPANK plugin's default webhook), then the YAML file, then the
 * user's SPANK options (--dt-run-name, --dt-webhook), then dotted overrides (`optimizer.lr=1e-3`),
 * each value remembering where it came from. Paths in a config are relative to the current directory, as for
 * torchrun and the Lightning CLI.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/schema.h"
#include "core/error.h"
#include "config/timestr.h"
#include "events/webhook_allow.h"

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

/* What the SPANK plugin (spank/) hands the tasks of a job: the admin's default webhook ranks with the
 * site file; the user's --dt-* options rank above their YAML and below the command line's overrides. */
static const struct env_layer {
    const char *var, *key, *label;
    bool site;
} env_layers[] = {
    {"DTRUN_SITE_WEBHOOK_URL", "events.webhook.url", "plugstack.conf webhook= (DTRUN_SITE_WEBHOOK_URL)", true},
    {"DTRUN_RUN_NAME", "run.name", "--dt-run-name (DTRUN_RUN_NAME)", false},
    {"DTRUN_WEBHOOK_URL", "events.webhook.url", "--dt-webhook (DTRUN_WEBHOOK_URL)", false},
};

static void apply_env(struct dt_config *cfg, bool site, struct dt_diags *d)
{
    for (size_t i = 0; i < sizeof env_layers / sizeof env_layers[0]; i++) {
        const struct env_layer *l = &env_layers[i];
        const char *v = getenv(l->var);
        if (l->site != site || !v || !*v) continue;
        const char *name = dt_namelist_add(&cfg->names, l->label);
        struct dt_loc where = {name ? name : l->var, 0, 0};
        /* the value as given, never read as YAML */
        const struct dt_ynode node = {.kind = DT_Y_SCALAR, .loc = where, .str = v, .quoted = true};
        dt_schema_set(&dt_config_schema, cfg, cfg->origin, l->key, &node, where,
                      site ? DT_ORIGIN_FILE : DT_ORIGIN_OVERRIDE, d);
    }
}

/* Where a key's value came from; a path the schema does not know has no location (not NULL). */
static struct dt_loc key_loc(const struct dt_config *cfg, const char *path)
{
    const struct dt_origin *o = dt_config_origin(cfg, path);
    return o ? o->loc : (struct dt_loc){0};
}

/* A cluster's admins may list the hosts webhooks may reach (plugstack.conf webhook_allow=). */
static void check_allowed(struct dt_config *cfg, struct dt_diags *d)
{
    const char *allow = getenv("DTRUN_WEBHOOK_ALLOW"), *url = cfg->events.webhook.url;
    if (!allow || !*allow || !url) return;
    struct dt_loc loc = key_loc(cfg, "events.webhook.url");
    char host[256];
    /* a host this check cannot read is refused, not waved through (libcurl may read one: #16) */
    if (!dt_url_host(url, host, sizeof host))
        dt_diag(d, loc, "write the URL as scheme://host[:port]/path with a plain host name (no %-escapes)",
                "events.webhook.url: the host cannot be read, so it cannot be checked against this cluster's "
                "webhook allow-list (%s)", allow);
    else if (!dt_host_allowed(host, allow))
        dt_diag(d, loc, "use a webhook on one of those hosts, or ask the cluster's admins to add it to webhook_allow= "
                "in plugstack.conf", "events.webhook.url: the host %s is not in this cluster's webhook allow-list (%s)",
                host, allow);
}

static void check_slurm_time(struct dt_config *cfg, struct dt_diags *d)
{
    long sec;
    if (cfg->slurm.time && dt_slurm_time_parse(cfg->slurm.time, &sec) != 0)
        dt_diag(d, key_loc(cfg, "slurm.time"),
                "write it as sbatch --time does: minutes (90), HH:MM:SS (04:00:00), D-HH:MM (1-12:00) or UNLIMITED",
                "slurm.time: '%s' is not a Slurm time limit", cfg->slurm.time);
}

dt_status_t dt_config_load(struct dt_config *cfg, const char *site, const char *path, int noverrides,
                           char *const *overrides)
{
    struct dt_diags d = {0};
    if (site) DT_CHECK(apply_file(cfg, site, &d));
    apply_env(cfg, true, &d);
    if (path) DT_CHECK(apply_file(cfg, path, &d));
    apply_env(cfg, false, &d);
    for (int i = 0; i < noverrides; i++) apply_override(cfg, overrides[i], &d);
    check_allowed(cfg, &d);
    check_slurm_time(cfg, &d);
    return dt_diag_finish(&d);
}
