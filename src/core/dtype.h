/*
 * dtype.h - the element types tensors and messages carry. Conversions between
 * them (bf16/fp16 rounding) join this file with mixed precision (issue #5).
 */
#ifndef DT_DTYPE_H
#define DT_DTYPE_H

#include <stddef.h>

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

#endif
