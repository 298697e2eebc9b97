/*
 * test_dtype.c - fp32 <-> bf16/fp16, round to nearest even: known values and
 * ties, every special class, and the fast (instruction) path giving the same
 * bits as the portable one over all 65536 half patterns and a million random
 * fp32 patterns, with denormals flushed (as dtrun runs) and without.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>
#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/cpu/convert.h"
#include "dt_test.h"

static float bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void known_values(void **state)
{
    (void)state;
    assert_int_equal(dt_bf16_from_f32(1.0f), 0x3f80);
    assert_int_equal(dt_bf16_from_f32(bits(0x3f808000)), 0x3f80); /* tie: to even */
    assert_int_equal(dt_bf16_from_f32(bits(0x3f818000)), 0x3f82); /* tie: to even, upward */
    assert_int_equal(dt_bf16_from_f32(bits(0x3f808001)), 0x3f81); /* above the tie */
    assert_int_equal(dt_bf16_from_f32(bits(0x7f7fffff)), 0x7f80); /* FLT_MAX rounds to infinity */
    assert_int_equal(dt_bf16_from_f32(-INFINITY), 0xff80);
    assert_int_equal(dt_bf16_from_f32(bits(0x7f800001)), 0x7fc0); /* signalling NaN comes back quiet */
    assert_int_equal(dt_bf16_from_f32(bits(0x80000001)), 0x8000); /* denormal: signed zero */
    assert_true(dt_f32_from_bf16(0x4049) == 3.140625f);
    assert_int_equal(dt_f16_from_f32(1.0f), 0x3c00);
    assert_int_equal(dt_f16_from_f32(65504.0f), 0x7bff);
    assert_int_equal(dt_f16_from_f32(65519.0f), 0x7bff);
    assert_int_equal(dt_f16_from_f32(65520.0f), 0x7c00); /* the tie above the largest half: infinity */
    assert_int_equal(dt_f16_from_f32(ldexpf(1, -24)), 0x0001);     /* smallest subnormal */
    assert_int_equal(dt_f16_from_f32(ldexpf(1, -25)), 0x0000);     /* tie with zero: even */
    assert_int_equal(dt_f16_from_f32(ldexpf(1.5f, -25)), 0x0001);  /* above the tie */
    assert_int_equal(dt_f16_from_f32(ldexpf(3, -25)), 0x0002);     /* 1.5 subnormal units: tie to even 2 */
    assert_int_equal(dt_f16_from_f32(ldexpf(1023, -24)), 0x03ff);  /* largest subnormal */
    assert_int_equal(dt_f16_from_f32(-0.0f), 0x8000);
    assert_true(dt_f32_from_f16(0x0001) == ldexpf(1, -24));
    assert_true(dt_f32_from_f16(0x3555) == 0.333251953125f);
    assert_true(isinf(dt_f32_from_f16(0xfc00)) && dt_f32_from_f16(0xfc00) < 0);
    assert_true(isnan(dt_f32_from_f16(0x7e00)));
    /* every finite half survives the round trip through fp32 */
    for (uint32_t h = 0; h < 65536; h++)
        if ((h & 0x7c00) != 0x7c00 && dt_f16_from_f32(dt_f32_from_f16((uint16_t)h)) != h) fail_msg("half %04x", h);
}

static void compare(const struct dt_convert *fast)
{
    enum { N = 1 << 20 };
    float *f = malloc(N * sizeof *f), *back_fast = malloc(65536 * sizeof *f), *back_ref = malloc(65536 * sizeof *f);
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2), *h = malloc(65536 * 2);
    assert_true(f && a && b && h && back_fast && back_ref);
    struct dt_rng r = dt_rng_make(7, 1);
    static const uint32_t special[] = {0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00001,
                                       0x00000001, 0x807fffff, 0x7f7fffff, 0x477fefff, 0x477ff000, 0x33000000,
                                       0x33000001, 0x38800000, 0x387fffff, 0x3f808000, 0x3f818000};
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)(dt_rng_u64(&r) >> 32);
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u; /* bf16 ties */
        if (i % 4 == 2) u = (u & 0x8fffe000u) | 0x38001000u; /* fp16 ties in the normal range */
        f[i] = bits(i < (int)(sizeof special / 4) ? special[i] : u);
    }
    fast->bf16_from_f32(a, f, N);
    dt_convert_portable.bf16_from_f32(b, f, N);
    for (int i = 0; i < N; i++)
        if (a[i] != b[i]) fail_msg("%s bf16(%08x): %04x, portable %04x", fast->name, (unsigned)0, a[i], b[i]);
    fast->f16_from_f32(a, f, N);
    dt_convert_portable.f16_from_f32(b, f, N);
    for (int i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        if (a[i] != b[i]) fail_msg("%s fp16(%08x): %04x, portable %04x", fast->name, u, a[i], b[i]);
    }
    /* rounding in place equals the way there and back */
    float *r1 = malloc(N * sizeof *r1), *r2 = malloc(N * sizeof *r2);
    assert_true(r1 && r2);
    fast->bf16_round(r1, f, N);
    dt_convert_portable.bf16_round(r2, f, N);
    assert_memory_equal(r1, r2, N * sizeof *r1);
    dt_convert_portable.bf16_from_f32(a, f, N);
    dt_convert_portable.f32_from_bf16(r2, a, N);
    assert_memory_equal(r1, r2, N * sizeof *r1);
    fast->f16_round(r1, f, N);
    dt_convert_portable.f16_round(r2, f, N);
    assert_memory_equal(r1, r2, N * sizeof *r1);
    dt_convert_portable.f16_from_f32(a, f, N);
    dt_convert_portable.f32_from_f16(r2, a, N);
    assert_memory_equal(r1, r2, N * sizeof *r1);
    free(r1);
    free(r2);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    fast->f32_from_f16(back_fast, h, 65536);
    dt_convert_portable.f32_from_f16(back_ref, h, 65536);
    assert_memory_equal(back_fast, back_ref, 65536 * sizeof(float));
    fast->f32_from_bf16(back_fast, h, 65536);
    dt_convert_portable.f32_from_bf16(back_ref, h, 65536);
    assert_memory_equal(back_fast, back_ref, 65536 * sizeof(float));
    /* from an odd element, over a length that leaves the vector loops a tail */
    fast->f32_from_bf16(back_fast, h + 1, 65533);
    dt_convert_portable.f32_from_bf16(back_ref, h + 1, 65533);
    assert_memory_equal(back_fast, back_ref, 65533 * sizeof(float));
    fast->f32_from_f16(back_fast, h + 1, 65533);
    dt_convert_portable.f32_from_f16(back_ref, h + 1, 65533);
    assert_memory_equal(back_fast, back_ref, 65533 * sizeof(float));
    free(f);
    free(a);
    free(b);
    free(h);
    free(back_fast);
    free(back_ref);
}

static void fast_matches_portable(void **state)
{
    (void)state;
    const struct dt_convert *fast = dt_convert_fast();
    if (fast == &dt_convert_portable) skip(); /* this CPU has no conversion instructions */
    compare(fast);
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040); /* FTZ and DAZ, as the trainer runs */
    compare(fast);
    _mm_setcsr(csr);
}

DT_TESTS(T(known_values), T(fast_matches_portable))
