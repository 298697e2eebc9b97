/*
 * convert.c - fp32 <-> bf16/fp16 over arrays, round to nearest even, with the
 * semantics of core/dtype.c's one-value conversions.
 *
 * The portable loops are the reference; on x86-64 the fast ones use the CPU's
 * conversion instructions (AVX512_BF16 vcvtneps2bf16, AVX-512 vcvtps2ph) when
 * it has them, chosen once at first use (dt_convert_fast). Tests check the two
 * give the same bits for every class of input. Other CPUs (aarch64) take the
 * portable loops.
 */
#include <string.h>
#include "core/dtype.h"
#include "kernels/cpu/convert.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static void bf16_from_f32_portable(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_bf16_from_f32(src[i]);
}
static void f16_from_f32_portable(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f16_from_f32(src[i]);
}
static void f32_from_bf16_any(float *dst, const uint16_t *src, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) { /* a shift, which every vector unit does */
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, 4);
    }
}
static void f32_from_f16_portable(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_f16(src[i]);
}

static void bf16_round_portable(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_bf16(dt_bf16_from_f32(src[i]));
}
static void f16_round_portable(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_f16(dt_f16_from_f32(src[i]));
}

const struct dt_convert dt_convert_portable = {"portable",          bf16_from_f32_portable, f32_from_bf16_any,
                                               f16_from_f32_portable, f32_from_f16_portable, bf16_round_portable,
                                               f16_round_portable};

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16,avx512vl"))) static void bf16_from_f32_avx512(uint16_t *dst, const float *src,
                                                                                        size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)v);
    }
    bf16_from_f32_portable(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* the SSE code that may run next pays for dirty upper halves: 4x in AdamW */
}

__attribute__((target("avx512f"))) static void f16_from_f32_avx512(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    f16_from_f32_portable(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* the SSE code that may run next pays for dirty upper halves: 4x in AdamW */
}

/* the shift of f32_from_bf16_any 16 lanes wide: built for the baseline ISA, that one runs 4 wide */
__attribute__((target("avx512f"))) static void f32_from_bf16_avx512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(
                                      _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i))), 16)));
    f32_from_bf16_any(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* the SSE code that may run next pays for dirty upper halves: 4x in AdamW */
}

__attribute__((target("avx512f"))) static void f32_from_f16_avx512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    f32_from_f16_portable(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* the SSE code that may run next pays for dirty upper halves: 4x in AdamW */
}

__attribute__((target("avx512f,avx512bf16,avx512vl"))) static void bf16_round_avx512(float *dst, const float *src,
                                                                                     size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
    bf16_round_portable(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* the SSE code that may run next pays for dirty upper halves: 4x in AdamW */
}

__attribute__((target("avx512f"))) static void f16_round_avx512(float *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(src + i),
                                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    f16_round_portable(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* the SSE code that may run next pays for dirty upper halves: 4x in AdamW */
}

static const struct dt_convert convert_avx512 = {"avx512",          bf16_from_f32_avx512, f32_from_bf16_avx512,
                                                 f16_from_f32_avx512, f32_from_f16_avx512,  bf16_round_avx512,
                                                 f16_round_avx512};
#endif

const struct dt_convert *dt_convert_fast(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) return &convert_avx512;
#endif
    return &dt_convert_portable;
}
