/* cuda_module_other.c - a CUDA module from another dtrun version, so test_cuda_module.sh can show
 * that dtrun refuses it by name (it never calls these). */
#include <stdio.h>
#include "kernels/cuda/module.h"

static int none(char *why, size_t n)
{
    snprintf(why, n, "not a real module");
    return 0;
}

static void describe(char *buf, size_t n) { snprintf(buf, n, "not a real module"); }

__attribute__((visibility("default"))) const struct dt_cuda_module dt_cuda_module = {
    .abi = DT_CUDA_MODULE_ABI, .version = "0.0.0-other", .device_count = none, .describe = describe};
