/* backend_reg.c - the kernel backends compiled in; the one file with #ifdef HAVE_CUDA. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "dt_build_config.h"
#include "kernels/backend.h"
#include "kernels/cuda_module.h"
#include "kernels/kernels.h"
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

dt_status_t dt_kernels_choose(int ordinal, const struct dt_kernels **out)
{
    *out = &dt_kernels_cpu;
    if (ordinal < 0) return DT_SUCCESS;
#ifdef HAVE_CUDA
    *out = &dt_kernels_cuda;
    return DT_SUCCESS;
#else
    return dt_error(DT_ERR_CONFIG, "dtrun: error: compute.device is cuda and this rank has cuda:%d, but dtrun was "
                    "built without CUDA\n  hint: set compute.device: cpu, or rebuild where configure finds the CUDA "
                    "toolkit", ordinal);
#endif
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

dt_status_t dt_backend_gpu_describe(int ordinal, char *buf, size_t n)
{
#ifdef HAVE_CUDA
    const struct dt_cuda_module *m;
    DT_CHECK(dt_cuda_module_get(&m));
    struct dt_cuda_device d;
    char why[256];
    if (m->device_info(ordinal, &d, why, sizeof why) != 0) return dt_error(DT_ERR_CUDA, "dtrun: error: %s", why);
    char numa[32] = "NUMA node unknown";
    if (d.numa_node >= 0) snprintf(numa, sizeof numa, "NUMA node %d", d.numa_node);
    snprintf(buf, n, "%s, %.1f GiB, sm_%d%d, %d SMs, PCI %s, %s", d.name, (double)d.mem_bytes / (1 << 30), d.cc_major,
             d.cc_minor, d.sm_count, d.pci_bus_id, numa);
    return DT_SUCCESS;
#else
    (void)ordinal;
    snprintf(buf, n, "no GPU: dtrun was built without CUDA");
    return DT_SUCCESS;
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
