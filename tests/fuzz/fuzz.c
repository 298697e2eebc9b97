/* fuzz.c - see fuzz.h. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"
#include "config/emit.h"
#include "config/resolve.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/log.h"
#include "fuzz.h"

static char dir[256];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_dir(void)
{
    if (dir[0]) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *dt_fuzz_init(void)
{
    if (dir[0]) return dir;
    const char *tmp = getenv("TMPDIR");
    static const char holes[] = {'X', 'X', 'X', 'X', 'X', 'X', '\0'}; /* mkdtemp's six placeholders */
    snprintf(dir, sizeof dir, "%s/dt_fuzz.%s", tmp && *tmp ? tmp : "/tmp", holes);
    if (!mkdtemp(dir)) dt_fuzz_fail("cannot make a temporary directory %s", dir);
    atexit(remove_dir);
    /* what the environment could add to a config is not part of the input */
    unsetenv("DTRUN_SITE_CONFIG");
    unsetenv("DTRUN_SITE_WEBHOOK_URL");
    unsetenv("DTRUN_RUN_NAME");
    unsetenv("DTRUN_WEBHOOK_URL");
    unsetenv("DTRUN_WEBHOOK_ALLOW");
    unsetenv("DTRUN_CONFIG");
    /* warnings are expected outcomes too: formatted, not printed */
    setenv("DTRUN_DEBUG", "ERROR", 0);
    dt_log_init();
    return dir;
}

const char *dt_fuzz_path(const char *name, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", dt_fuzz_init(), name);
    return path;
}

void dt_fuzz_write(const char *name, const void *data, size_t size, char *path, size_t n)
{
    dt_fuzz_path(name, path, n);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        dt_fuzz_fail("cannot write %s", path);
}

char *dt_fuzz_str(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) dt_fuzz_fail("out of memory");
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

void dt_fuzz_begin(void) { dt_error_clear(); }

void dt_fuzz_check_error(dt_status_t rc, const char *what)
{
    if (rc == DT_SUCCESS) return;
    const char *msg = dt_error_msg();
    if (!msg[0]) dt_fuzz_fail("%s failed (%s) without a message", what, dt_status_str(rc));
    if (!strstr(msg, "error: ")) dt_fuzz_fail("%s failed with a message that is not 'WHERE: error: WHAT': %s", what, msg);
}

void dt_fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dt_fuzz: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

/* keys dt_config_emit shows as a comment (emit.c unused()) or masked (DT_F_CREDENTIALS): not compared */
static bool shown_as_is(const struct dt_config *cfg, const struct dt_key *k)
{
    if (cfg->data.train && !strncmp(k->path, "data.synthetic.", 15)) return false;
    if (cfg->model.type != DT_MODEL_MLP && !strncmp(k->path, "model.mlp.", 10)) return false;
    if (k->flags & DT_F_CREDENTIALS) {
        const char *v = *(char *const *)DT_FIELD(cfg, k);
        if (v && strchr(v, '@')) return false;
    }
    return true;
}

void dt_fuzz_config_reads_back(const struct dt_config *a, const struct dt_geometry *geo)
{
    char path[512];
    FILE *f = fopen(dt_fuzz_path("emitted.yaml", path, sizeof path), "w");
    if (!f) dt_fuzz_fail("cannot write %s", path);
    dt_config_emit(a, f);
    if (fclose(f) != 0) dt_fuzz_fail("cannot write %s", path);
    struct dt_config b;
    dt_fuzz_begin();
    dt_status_t rc = dt_config_init(&b);
    if (rc == DT_SUCCESS) rc = dt_config_load(&b, NULL, path, 0, NULL);
    if (rc == DT_SUCCESS) rc = dt_config_resolve(&b, geo);
    if (rc != DT_SUCCESS) dt_fuzz_fail("what dt_config_emit printed does not read back:\n%s", dt_error_msg());
    for (size_t i = 0; i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        if (!shown_as_is(a, k)) continue;
        if (!dt_value_equal(k->type, DT_FIELD(a, k), DT_FIELD(&b, k))) {
            char va[512], vb[512];
            dt_value_format(k, DT_FIELD(a, k), va, sizeof va);
            dt_value_format(k, DT_FIELD(&b, k), vb, sizeof vb);
            dt_fuzz_fail("%s is %s, and %s after dt_config_emit and reading back", k->path, va, vb);
        }
    }
    dt_config_free(&b);
}
