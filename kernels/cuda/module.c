/*
 * module.c - the one symbol dtrun_cuda.so exports (module.h): its interface
 * version and the functions behind it. Built only with the CUDA toolkit, into
 * the module, never into dtrun itself.
 */
#include "dt_build_config.h"
#include "kernels/cuda/module.h"
#include "kernels/cuda/nccl.h"
#include "kernels/cuda/probe.h"

extern const struct dt_cuda_ops dt_cuda_ops; /* ops_table.c */

__attribute__((visibility("default"))) const struct dt_cuda_module dt_cuda_module = {
    .abi = DT_CUDA_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .device_count = dt_cuda_device_count,
    .describe = dt_cuda_describe,
    .ops = &dt_cuda_ops,
    .nccl_unique_id = dt_cuda_nccl_unique_id,
    .device_info = dt_cuda_device_info,
    .nccl = &dt_cuda_nccl,
};
