/*
 * tokenizer_auto.c - model.tokenizer, when the config leaves it unset, is the tokenizer the run's ids
 * are in (#40): the one `dtrun prepare --tokenizer` recorded in the prepare.json beside data.train's
 * shards, else the tokenizer.json in model.init_from's Hugging Face directory. The run's config.yaml
 * then records it, which is where `dtrun generate RUN_DIR` finds it. A prepare.json that does not
 * read is left to the data loader, which checks it and says what is wrong.
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "config/resolve_impl.h"
#include "config/ynode.h"

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* the "tokenizer" of the prepare.json in the directory of the first file the glob names */
static char *from_manifest(const char *pattern, char *json, size_t n)
{
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return NULL;
    const char *first = g.gl_pathv[0], *slash = strrchr(first, '/');
    snprintf(json, n, "%.*sprepare.json", slash ? (int)(slash - first + 1) : 0, first);
    globfree(&g);
    struct dt_ydoc *doc;
    if (!is_file(json) || dt_ydoc_load_file(json, &doc) != DT_SUCCESS) return NULL;
    char *out = NULL;
    const struct dt_ynode *root = dt_ydoc_root(doc);
    for (size_t i = 0; root && root->kind == DT_Y_MAP && i < root->n; i++)
        if (!strcmp(root->pairs[i].key->str, "tokenizer") && root->pairs[i].value->kind == DT_Y_SCALAR &&
            root->pairs[i].value->str[0])
            out = strdup(root->pairs[i].value->str);
    dt_ydoc_free(doc);
    return out;
}

void dt_resolve_tokenizer(struct dt_config *cfg)
{
    if (cfg->model.tokenizer) return;
    char json[4200];
    char *t = cfg->data.train ? from_manifest(cfg->data.train, json, sizeof json) : NULL;
    if (t) {
        cfg->model.tokenizer = t;
        dt_resolve_set_auto(cfg, "model.tokenizer", "%s, beside data.train's shards", json);
        return;
    }
    snprintf(json, sizeof json, "%s/tokenizer.json", cfg->model.init_from ? cfg->model.init_from : "");
    if (cfg->model.init_from && is_file(json) && (cfg->model.tokenizer = strdup(json)))
        dt_resolve_set_auto(cfg, "model.tokenizer", "model.init_from %s", cfg->model.init_from);
}
