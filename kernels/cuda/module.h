/*
 * module.h - the interface between dtrun and its CUDA module (dtrun_cuda.so).
 *
 * Everything that links the CUDA runtime, cuBLAS(Lt) or NCCL is built into
 * that shared object, which dtrun dlopens only when a GPU is wanted
 * (kernels/cuda_module.c), so a dtrun process that trains on the CPU or only
 * checks a config maps none of those libraries. The module exports one symbol,
 * DT_CUDA_MODULE_SYMBOL, of this type; dtrun refuses a module whose abi or
 * version differs from its own.
 */
#ifndef DT_CUDA_MODULE_IFACE_H
#define DT_CUDA_MODULE_IFACE_H

#include <stddef.h>

/* Raise when this struct changes. */
#define DT_CUDA_MODULE_ABI 1
#define DT_CUDA_MODULE_SYMBOL "dt_cuda_module"
#define DT_CUDA_MODULE_FILE "dtrun_cuda.so"

struct dt_cuda_module {
    int abi;             /* DT_CUDA_MODULE_ABI of the build that made it */
    const char *version; /* that build's PACKAGE_VERSION */
    /* GPUs the CUDA runtime sees; 0 with why[] filled when none */
    int (*device_count)(char *why, size_t n);
    /* "CUDA runtime 13.0, cuBLASLt 130000, NCCL 2.27.7; 1 GPU" */
    void (*describe)(char *buf, size_t n);
};

#endif
