/*
 * nccl.h - NCCL behind module.h's struct dt_cuda_nccl (kernels/cuda/nccl.c). Part of the CUDA
 * module; src/comm/nccl.c reaches it through the module's table, never by this name.
 */
#ifndef DT_CUDA_NCCL_H
#define DT_CUDA_NCCL_H

#include "kernels/cuda/module.h"

extern const struct dt_cuda_nccl dt_cuda_nccl;

#endif
