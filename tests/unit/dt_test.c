/* dt_test.c - see dt_test.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "dt_test.h"
#include "kernels/kernels.h"
#include "model/model.h"

static char dir[64], cwd[4096];

static struct dt_kctx *kctx;

static void kctx_destroy(void) { dt_kernels_cpu.ctx_destroy(kctx); }

struct dt_kctx *dt_test_kctx(void)
{
    if (!kctx) {
        if (dt_kernels_cpu.ctx_create(-1, &kctx) != DT_SUCCESS) fail_msg("%s", dt_error_msg());
        atexit(kctx_destroy);
    }
    return kctx;
}

void dt_test_own(struct dt_model *m, struct dt_param_source *s, uint64_t seed)
{
    assert_int_equal(dt_model_own_buffers(m), DT_SUCCESS);
    struct dt_param_source init;
    if (!s && seed) dt_model_init_source(m, seed, s = &init);
    if (!s) return;
    dt_status_t rc = dt_model_fill_own(m, s);
    dt_source_close(s);
    if (rc != DT_SUCCESS) fail_msg("%s", dt_error_msg());
}

int dt_test_setup(void **state)
{
    /* mkdtemp's template: the prefix and six placeholder characters */
    char holes[7];
    memset(holes, 'X', 6);
    holes[6] = '\0';
    snprintf(dir, sizeof dir, "/tmp/dt_test.%s", holes);
    if (!mkdtemp(dir) || !getcwd(cwd, sizeof cwd) || chdir(dir) != 0) return -1;
    dt_error_clear();
    return 0;
}

int dt_test_teardown(void **state)
{
    char cmd[128];
    if (chdir(cwd) != 0) return -1;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

void dt_test_write(const char *name, const char *text)
{
    FILE *f = fopen(name, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

dt_status_t dt_test_config(struct dt_config *cfg, const struct dt_geometry *geo, const char *yaml, ...)
{
    char *ov[32];
    int n = 0;
    va_list ap;
    va_start(ap, yaml);
    for (char *o; n < 32 && (o = va_arg(ap, char *)); ) ov[n++] = o;
    va_end(ap);
    dt_status_t rc = dt_config_init(cfg);
    if (rc != DT_SUCCESS) return rc;
    if (yaml) dt_test_write("t.yaml", yaml);
    rc = dt_config_load(cfg, NULL, yaml ? "t.yaml" : NULL, n, ov);
    if (rc != DT_SUCCESS) return rc;
    struct dt_geometry none = {.gpu_note = "no GPU (test)"};
    return dt_config_resolve(cfg, geo ? geo : &none);
}

static int saved_fd = -1;
static FILE *capture;

void dt_test_stderr_begin(void)
{
    fflush(stderr);
    capture = tmpfile();
    assert_non_null(capture);
    saved_fd = dup(fileno(stderr));
    dup2(fileno(capture), fileno(stderr));
}

char *dt_test_stderr_end(void)
{
    fflush(stderr);
    dup2(saved_fd, fileno(stderr));
    close(saved_fd);
    long n = ftell(capture);
    char *buf = calloc(1, (size_t)n + 1);
    rewind(capture);
    if (n > 0 && fread(buf, 1, (size_t)n, capture) != (size_t)n) buf[0] = '\0';
    fclose(capture);
    return buf;
}
