/* backend_reg.c - the kernel backends compiled in; the one file with #ifdef HAVE_CUDA. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "dt_build_config.h"
#include "kernels/backend.h"
#include "kernels/cuda_module.h"
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif

#ifdef HAVE_CUDA
/* The NVIDIA driver creates both; without them the CUDA runtime can find no GPU, so there is no
 * reason to map it. */
static bool driver_present(void)
{
    return access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0;
}

/* the first line of the current error message */
static void first_line(char *buf, size_t n)
{
    const char *m = dt_error_msg();
    snprintf(buf, n, "%.*s", (int)strcspn(m, "\n"), m);
}
#endif

dt_status_t dt_backend_gpus(bool need, int *count, char *why, size_t n)
{
    *count = 0;
#ifdef HAVE_CUDA
    if (!need && !driver_present()) {
        snprintf(why, n, "no GPU: no NVIDIA driver on this machine (no /dev/nvidiactl)");
        return DT_SUCCESS;
    }
    const struct dt_cuda_module *m;
    DT_CHECK(dt_cuda_module_get(&m));
    *count = m->device_count(why, n);
#else
    (void)need;
    snprintf(why, n, "no GPU: dtrun was built without CUDA");
#endif
    return DT_SUCCESS;
}

dt_status_t dt_backend_nccl_id(unsigned char id[128], bool *have, char *why, size_t n)
{
    *have = false;
#ifdef HAVE_CUDA
    const struct dt_cuda_module *m;
    if (dt_cuda_module_get(&m) != DT_SUCCESS) {
        first_line(why, n);
        return DT_SUCCESS;
    }
    if (m->nccl_unique_id(id, why, n) != 0) return dt_error(DT_ERR_CUDA, "dtrun: error: %s", why);
    *have = true;
#else
    (void)id;
    snprintf(why, n, "dtrun was built without CUDA");
#endif
    return DT_SUCCESS;
}

void dt_backend_describe(char *buf, size_t n)
{
#ifdef HAVE_DNNL
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, n, "cpu (oneDNN %d.%d.%d, %s)", v->major, v->minor, v->patch,
             v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other runtime");
#else
    snprintf(buf, n, "cpu (without oneDNN)");
#endif
}

void dt_backend_describe_cuda(char *buf, size_t n)
{
#ifdef HAVE_CUDA
    const struct dt_cuda_module *m;
    if (dt_cuda_module_get(&m) == DT_SUCCESS) m->describe(buf, n);
    else first_line(buf, n);
#else
    snprintf(buf, n, "not built (configure found no CUDA toolkit, or --without-cuda)");
#endif
}
