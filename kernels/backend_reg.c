/* backend_reg.c - the kernel backends compiled in; the one file with #ifdef HAVE_CUDA. */
#include <stdio.h>
#include "dt_build_config.h"
#include "kernels/backend.h"
#ifdef HAVE_CUDA
#include "kernels/cuda/probe.h"
#endif
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif

int dt_backend_gpu_count(char *why, size_t n)
{
#ifdef HAVE_CUDA
    return dt_cuda_device_count(why, n);
#else
    snprintf(why, n, "no GPU: dtrun was built without CUDA");
    return 0;
#endif
}

void dt_backend_describe(char *buf, size_t n)
{
    size_t o = 0;
#ifdef HAVE_DNNL
    const dnnl_version_t *v = dnnl_version();
    o += (size_t)snprintf(buf + o, n - o, "cpu (oneDNN %d.%d.%d, %s)", v->major, v->minor, v->patch, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other runtime");
#else
    o += (size_t)snprintf(buf + o, n - o, "cpu (without oneDNN)");
#endif
#ifdef HAVE_CUDA
    if (o < n) {
        o += (size_t)snprintf(buf + o, n - o, ", ");
        dt_cuda_describe(buf + o, n - o);
    }
#endif
}
