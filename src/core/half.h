/*
 * half.h - one value between fp32 and bf16/fp16, round to nearest even: the one definition of
 * these roundings, compiled for the CPU (core/dtype.h includes it) and for CUDA devices
 * (the .cu files of kernels/cuda/), so a GPU kernel rounds bit for bit as its CPU reference does.
 */
#ifndef DT_HALF_H
#define DT_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DT_HD __host__ __device__
#else
#define DT_HD
#endif

/*
 * One value, round to nearest even: the reference semantics, in portable C, inline so that loops
 * over arrays vectorize (kernels/cpu/convert.c). NaNs stay NaNs (quiet, sign kept); an fp32 that
 * rounds past bf16's largest value becomes infinity, and fp32 denormals become signed zeros in
 * bf16, as x86's vcvtneps2bf16 does (dtrun runs with denormals flushed anyway).
 */
DT_HD static inline uint16_t dt_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN: keep it quiet */
    if (!(u & 0x7f800000u)) return (uint16_t)((u >> 16) & 0x8000u); /* denormal: signed zero, as vcvtneps2bf16 */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

DT_HD static inline float dt_f32_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

DT_HD static inline uint16_t dt_f16_from_f32(float f)
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

DT_HD static inline float dt_f32_from_f16(uint16_t h)
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

#endif
