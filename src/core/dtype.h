/*
 * dtype.h - the element types tensors and messages carry, and conversions of
 * one value between fp32 and bf16/fp16 (the array loops are kernels,
 * kernels/cpu/convert.h).
 */
#ifndef DT_DTYPE_H
#define DT_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum dt_dtype { DT_F32, DT_F64, DT_BF16, DT_F16, DT_I32, DT_U8 };

static inline size_t dt_dtype_size(enum dt_dtype t)
{
    static const size_t size[] = {[DT_F32] = 4, [DT_F64] = 8, [DT_BF16] = 2, [DT_F16] = 2, [DT_I32] = 4, [DT_U8] = 1};
    return size[t];
}

static inline const char *dt_dtype_str(enum dt_dtype t)
{
    static const char *const name[] = {[DT_F32] = "fp32", [DT_F64] = "fp64", [DT_BF16] = "bf16",
                                       [DT_F16] = "fp16", [DT_I32] = "int32", [DT_U8] = "bytes"};
    return name[t];
}

#include "core/half.h"

#endif
