/*
 * dtype.c - conversions between fp32 and bf16/fp16, round to nearest even.
 *
 * The portable loops are the reference; the fast ones use this CPU's
 * conversion instructions (AVX512_BF16 vcvtneps2bf16, F16C / AVX-512
 * vcvtps2ph) when the CPU has them, chosen once at first use. Tests check the
 * two give the same bits for every class of input. NaNs stay NaNs (quiet,
 * sign kept); an fp32 that rounds past bf16's largest value becomes infinity,
 * and fp32 denormals become signed zeros in bf16, as vcvtneps2bf16 does
 * (dtrun runs with denormals flushed anyway).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include "core/dtype.h"

uint16_t dt_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN: keep it quiet */
    if (!(u & 0x7f800000u)) return (uint16_t)((u >> 16) & 0x8000u); /* denormal: signed zero, as vcvtneps2bf16 */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float dt_f32_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t dt_f16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x1ffu); /* NaN, quiet, payload kept */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: infinity */
    if (a < 0x38800000u) {                       /* below 2^-14: subnormal half (or zero) */
        if (a < 0x33000000u) return sign;        /* below half the smallest subnormal: +-0 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1);
    return sign | (uint16_t)(r >> 13);
}

float dt_f32_from_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) {
        u = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0); /* a NaN comes back quiet, as vcvtph2ps does */
    } else if (e == 0) {
        if (!m) {
            u = sign;
        } else { /* subnormal: normalize */
            int k = 0;
            while (!(m & 0x400u)) {
                m <<= 1;
                k++;
            }
            u = sign | ((uint32_t)(113 - k) << 23) | ((m & 0x3ffu) << 13);
        }
    } else {
        u = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

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
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_bf16(src[i]); /* a shift: compilers vectorize it */
}
static void f32_from_f16_portable(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_f16(src[i]);
}

__attribute__((target("avx512f,avx512bf16,avx512vl"))) static void bf16_from_f32_avx512(uint16_t *dst, const float *src,
                                                                                        size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)v);
    }
    bf16_from_f32_portable(dst + i, src + i, n - i);
}

__attribute__((target("avx512f"))) static void f16_from_f32_avx512(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    f16_from_f32_portable(dst + i, src + i, n - i);
}

__attribute__((target("avx512f"))) static void f32_from_f16_avx512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    f32_from_f16_portable(dst + i, src + i, n - i);
}

static void bf16_round_portable(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_bf16(dt_bf16_from_f32(src[i]));
}
static void f16_round_portable(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dt_f32_from_f16(dt_f16_from_f32(src[i]));
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
}

__attribute__((target("avx512f"))) static void f16_round_avx512(float *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(src + i),
                                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    f16_round_portable(dst + i, src + i, n - i);
}

const struct dt_convert dt_convert_portable = {"portable",          bf16_from_f32_portable, f32_from_bf16_any,
                                               f16_from_f32_portable, f32_from_f16_portable, bf16_round_portable,
                                               f16_round_portable};
static const struct dt_convert convert_avx512 = {"avx512",          bf16_from_f32_avx512, f32_from_bf16_any,
                                                 f16_from_f32_avx512, f32_from_f16_avx512,  bf16_round_avx512,
                                                 f16_round_avx512};

const struct dt_convert *dt_convert_fast(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) return &convert_avx512;
    return &dt_convert_portable;
}
