/* probe.h - CUDA runtime, cuBLASLt and NCCL presence and versions (the CUDA module only). */
#ifndef DT_CUDA_PROBE_H
#define DT_CUDA_PROBE_H

#include <stddef.h>

int dt_cuda_device_count(char *why, size_t n);
void dt_cuda_describe(char *buf, size_t n);

struct dt_cuda_device;
/* one GPU's details for `dtrun info` (device.c) */
int dt_cuda_device_info(int dev, struct dt_cuda_device *out, char *why, size_t n);

/* rank 0's NCCL id (module.h) */
int dt_cuda_nccl_unique_id(unsigned char out[128], char *why, size_t n);

#endif
