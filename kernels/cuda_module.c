/* cuda_module.c - see cuda_module.h. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/installdir.h"
#include "core/error.h"
#include "dt_build_config.h"
#include "kernels/cuda_module.h"

static const struct dt_cuda_module *loaded;
static dt_status_t load_rc = DT_SUCCESS;
static char load_msg[1024];
static int tried;

/* The module's path: DTRUN_CUDA_MODULE, the build tree for a program that runs from it, else pkglibdir. */
static void module_path(char *buf, size_t n)
{
    const char *env = getenv("DTRUN_CUDA_MODULE");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    if (dt_from_build_tree())
        snprintf(buf, n, "%s/kernels/cuda/.libs/%s", DT_BUILDDIR, DT_CUDA_MODULE_FILE);
    else snprintf(buf, n, "%s/%s", DT_PKGLIBDIR, DT_CUDA_MODULE_FILE);
}

static dt_status_t load(void)
{
    char path[PATH_MAX + 64];
    module_path(path, sizeof path);
    static const char hint[] = "  hint: compute.device: cpu needs no module; for GPUs reinstall dtrun (make install puts "
                               "the module in " DT_PKGLIBDIR ") or set DTRUN_CUDA_MODULE to its path";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror() usually starts with the path, which the message already names */
        const char *why = dlerror();
        size_t pl = strlen(path);
        if (!strncmp(why, path, pl) && !strncmp(why + pl, ": ", 2)) why += pl + 2;
        return dt_error(DT_ERR_CUDA, "%s: error: cannot load dtrun's CUDA module: %s\n%s", path, why, hint);
    }
    const struct dt_cuda_module *m = dlsym(h, DT_CUDA_MODULE_SYMBOL);
    if (!m) {
        dt_status_t rc = dt_error(DT_ERR_CUDA, "%s: error: not a dtrun CUDA module (it has no '%s' symbol)\n%s", path,
                                  DT_CUDA_MODULE_SYMBOL, hint);
        dlclose(h);
        return rc;
    }
    if (m->abi != DT_CUDA_MODULE_ABI || !m->version || strcmp(m->version, PACKAGE_VERSION)) {
        dt_status_t rc = dt_error(DT_ERR_CUDA, "%s: error: the CUDA module is from dtrun %s (module interface %d), "
                                  "this is dtrun %s (interface %d)\n  hint: install dtrun and its module from one "
                                  "build, or set DTRUN_CUDA_MODULE to the matching module",
                                  path, m->version ? m->version : "(unknown)", m->abi, PACKAGE_VERSION,
                                  DT_CUDA_MODULE_ABI);
        dlclose(h);
        return rc;
    }
    loaded = m; /* kept open for the life of the process */
    return DT_SUCCESS;
}

dt_status_t dt_cuda_module_get(const struct dt_cuda_module **out)
{
    if (!tried) {
        tried = 1;
        load_rc = load();
        if (load_rc != DT_SUCCESS) snprintf(load_msg, sizeof load_msg, "%s", dt_error_msg());
    }
    *out = loaded;
    return load_rc == DT_SUCCESS ? DT_SUCCESS : dt_error(load_rc, "%s", load_msg);
}
