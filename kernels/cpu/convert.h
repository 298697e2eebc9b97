/*
 * convert.h - fp32 <-> bf16/fp16 conversions over arrays (convert.c): a
 * portable table, the reference, and the fastest this CPU runs, which gives
 * the same bits.
 */
#ifndef DT_KERNELS_CPU_CONVERT_H
#define DT_KERNELS_CPU_CONVERT_H

#include <stddef.h>
#include <stdint.h>

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
/* the fastest this CPU runs (x86-64 with AVX-512 and AVX512_BF16: "avx512"; else "portable") */
const struct dt_convert *dt_convert_fast(void);

#endif
