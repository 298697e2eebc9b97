/*
 * backend.h - what the kernel backends of this build can report before any
 * model exists: GPUs visible, versions; and the one place that chooses a rank's op table
 * (kernels.h). Registration (backend_reg.c) is the one place with #ifdef. The CUDA backend
 * lives in a module loaded on first use (cuda_module.h): these functions are
 * the only ones that load it.
 */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include "core/status.h"

/*
 * GPUs this process can use, in *count; 0 with why[] filled when none. need: a GPU is asked for
 * (compute.device cuda, dtrun info), so the CUDA module is loaded and its failure is the error.
 * Without need (compute.device auto) a machine with no NVIDIA driver has no GPU and the module is
 * never touched.
 */
dt_status_t dt_backend_gpus(bool need, int *count, char *why, size_t n);
/* rank 0's ncclUniqueId, for the bootstrap: *have false (why says so) where this build or machine
 * has no CUDA module; an error only when the module is there and NCCL fails. */
dt_status_t dt_backend_nccl_id(unsigned char id[128], bool *have, char *why, size_t n);
struct dt_kernels;
/* The op table for a rank that drives GPU `ordinal` (-1: the CPU). */
dt_status_t dt_kernels_choose(int ordinal, const struct dt_kernels **out);
/* GPU `ordinal` in one line for `dtrun info`: "NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90, 132 SMs,
 * PCI 0000:3b:00.0, NUMA node 0" (loads the module). */
dt_status_t dt_backend_gpu_describe(int ordinal, char *buf, size_t n);
/* The CPU backend, one line, for `dtrun --version`. */
void dt_backend_describe(char *buf, size_t n);
/* The CUDA backend for `dtrun --version` and `dtrun info`: the module's versions and GPUs, or why
 * it is not there (loads the module). */
void dt_backend_describe_cuda(char *buf, size_t n);

#endif
