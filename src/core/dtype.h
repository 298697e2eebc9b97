/*
 * dtype.h - the element types tensors and messages carry, and conversions
 * between fp32 and bf16/fp16 (round to nearest even; dtype.c).
 */
#ifndef DT_DTYPE_H
#define DT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

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

/* One value (the reference semantics). */
uint16_t dt_bf16_from_f32(float f);
float dt_f32_from_bf16(uint16_t h);
uint16_t dt_f16_from_f32(float f);
float dt_f32_from_f16(uint16_t h);

/* Arrays: a portable table and, where the CPU has conversion instructions, a fast one that gives
 * the same bits. */
struct dt_convert {
    const char *name;
    void (*bf16_from_f32)(uint16_t *dst, const float *src, size_t n);
    void (*f32_from_bf16)(float *dst, const uint16_t *src, size_t n);
    void (*f16_from_f32)(uint16_t *dst, const float *src, size_t n);
    void (*f32_from_f16)(float *dst, const uint16_t *src, size_t n);
    /* dst = the fp32 value of src rounded to bf16 / fp16, in one pass */
    void (*bf16_round)(float *dst, const float *src, size_t n);
    void (*f16_round)(float *dst, const float *src, size_t n);
};
extern const struct dt_convert dt_convert_portable;
/* the fastest this CPU runs */
const struct dt_convert *dt_convert_fast(void);

#endif
