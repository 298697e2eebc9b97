/*
 * fp8.h - one value between fp32 and the two OCP 8-bit floating-point formats (OCP 8-bit Floating
 * Point Specification (OFP8) 1.0), the one definition of these conversions, compiled for the CPU and
 * for CUDA devices (as half.h), so a GPU kernel quantises bit for bit as its CPU reference does:
 *   E4M3  bias 7, no infinities, NaN S.1111.111 (0x7f, 0xff), largest finite 448 (0x7e), smallest
 *         subnormal 2^-9: the forward's inputs and weights under fp8-mixed
 *   E5M2  bias 15, infinities S.11111.00, NaNs S.11111.{01,10,11}, largest finite 57344 (0x7b),
 *         smallest subnormal 2^-16: the gradients under the hybrid format
 * fp32 -> fp8 rounds to nearest even and saturates as Transformer Engine's casts do (CUDA's
 * __NV_SATFINITE): a finite value beyond the largest finite one, and an infinity, become the largest
 * finite value of its sign; a NaN stays a NaN (E4M3 0x7f, E5M2 0x7e, the sign kept). fp8 -> fp32 is
 * exact (every fp8 value is an fp32 one).
 */
#ifndef DT_FP8_H
#define DT_FP8_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/half.h"

enum dt_fp8_fmt { DT_FP8_E4M3, DT_FP8_E5M2 };

/* the largest finite value: 448 and 57344 */
DT_HD static inline float dt_fp8_max(enum dt_fp8_fmt f) { return f == DT_FP8_E4M3 ? 448.0f : 57344.0f; }

static inline const char *dt_fp8_str(enum dt_fp8_fmt f) { return f == DT_FP8_E4M3 ? "E4M3" : "E5M2"; }

DT_HD static inline uint8_t dt_fp8_from_f32(float x, enum dt_fp8_fmt f)
{
    const int M = f == DT_FP8_E4M3 ? 3 : 2, bias = f == DT_FP8_E4M3 ? 7 : 15;
    const uint32_t maxcode = f == DT_FP8_E4M3 ? 0x7eu : 0x7bu, nan = f == DT_FP8_E4M3 ? 0x7fu : 0x7eu;
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t s = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(s | nan);
    float ax;
    memcpy(&ax, &a, 4);
    if (ax >= dt_fp8_max(f)) return (uint8_t)(s | maxcode); /* saturate, infinities too */
    int e = (int)(a >> 23) - 127, emin = 1 - bias;
    uint32_t code;
    if (e >= emin) { /* normal: round the fp32 mantissa to M bits, a carry moves into the exponent */
        int sh = 23 - M;
        a += (1u << (sh - 1)) - 1u + ((a >> sh) & 1u);
        code = (a >> sh) - ((uint32_t)(127 - bias) << M);
    } else { /* subnormal (an fp32 denormal is below half the smallest subnormal: zero) */
        if (!(a >> 23)) return (uint8_t)s;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int sh = 23 - M + (emin - e);
        if (sh > 24) return (uint8_t)s; /* below half the smallest subnormal */
        uint32_t r = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        code = r; /* 2^M: the smallest normal value, encoded as such */
    }
    return (uint8_t)(s | code);
}

DT_HD static inline float dt_f32_from_fp8(uint8_t c, enum dt_fp8_fmt f)
{
    const int M = f == DT_FP8_E4M3 ? 3 : 2, bias = f == DT_FP8_E4M3 ? 7 : 15;
    const uint32_t E = f == DT_FP8_E4M3 ? 0xfu : 0x1fu;
    uint32_t s = (uint32_t)(c & 0x80u) << 24, e = (c & 0x7fu) >> M, m = c & ((1u << M) - 1u), u;
    if (f == DT_FP8_E4M3 && e == E && m == (1u << M) - 1u) u = s | 0x7fc00000u;
    else if (f == DT_FP8_E5M2 && e == E) u = s | (m ? 0x7fc00000u : 0x7f800000u);
    else if (e) u = s | ((e + 127u - (uint32_t)bias) << 23) | (m << (23 - M));
    else if (!m) u = s;
    else { /* subnormal: m * 2^(1 - bias - M), normalised for fp32 */
        int k = 0;
        while (!(m & (1u << M))) m <<= 1, k++;
        u = s | ((uint32_t)(127 + 1 - bias - k) << 23) | ((m & ((1u << M) - 1u)) << (23 - M));
    }
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Transformer Engine's scale from an amax (its _default_sf_compute): (max / amax) / 2^margin; the
 * scale kept where amax is 0 or not finite, and the largest fp32 where the quotient overflows. */
DT_HD static inline float dt_fp8_scale(float amax, float scale, enum dt_fp8_fmt f, float margin)
{
    if (!(amax > 0.0f) || amax - amax != 0.0f) return scale;
    /* 2^margin exactly where margin is whole (a device's exp2f is approximate) */
    float p = margin == (float)(int)margin ? ldexpf(1.0f, (int)margin) : exp2f(margin);
    float sf = dt_fp8_max(f) / amax / p;
    return sf - sf != 0.0f ? 3.40282347e38f : sf;
}

#endif
