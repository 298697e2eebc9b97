/*
 * probe.c - ask the CUDA runtime how many GPUs there are. On a machine with
 * the toolkit but no driver, cudaGetDeviceCount fails with "CUDA driver
 * version is insufficient for CUDA runtime version"; that is reported as
 * "no GPU" with the runtime's reason, never as an obscure failure.
 * Part of the CUDA module (module.h), not of dtrun.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include "kernels/cuda/probe.h"

int dt_cuda_device_count(char *why, size_t n)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        snprintf(why, n, "no GPU: %s", cudaGetErrorString(err));
        return 0;
    }
    if (count == 0) snprintf(why, n, "no GPU: the CUDA runtime sees none");
    return count;
}

void dt_cuda_describe(char *buf, size_t n)
{
    int rt = 0, nccl = 0;
    cudaRuntimeGetVersion(&rt);
    ncclGetVersion(&nccl);
    char why[160] = "";
    int gpus = dt_cuda_device_count(why, sizeof why);
    char seen[200];
    if (gpus > 0) snprintf(seen, sizeof seen, "%d GPU%s", gpus, gpus > 1 ? "s" : "");
    else snprintf(seen, sizeof seen, "%s", why);
    snprintf(buf, n, "CUDA runtime %d.%d, cuBLASLt %zu, NCCL %d.%d.%d; %s", rt / 1000, (rt % 1000) / 10,
             cublasLtGetVersion(), nccl / 10000, (nccl % 10000) / 100, nccl % 100, seen);
}

int dt_cuda_nccl_unique_id(unsigned char out[128], char *why, size_t n)
{
    ncclUniqueId id;
    _Static_assert(sizeof id == 128, "ncclUniqueId is NCCL_UNIQUE_ID_BYTES (128) long");
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
        snprintf(why, n, "ncclGetUniqueId failed: %s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
        return -1;
    }
    memcpy(out, &id, sizeof id);
    return 0;
}
